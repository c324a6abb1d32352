<?php

/**
 * One measurement of bench/calls.py: N calls of one function, one after
 * the other, from this process, by one method:
 *
 *   listener   Hearth\Jobs::call() to `hearth work --listen SOCKET` (warm workers)
 *   here       the function called directly in this process (booted once, here)
 *   fallback   Hearth\Jobs::call() with no listener: the in-process fallback
 *              (the same call, its arguments and value through JSON)
 *   php-r      one `php -r 'require BOOTSTRAP; echo json_encode(f(...));'` per call
 *
 *     php bench/calls/roundtrip.php --method M --job add|invoice -n N [--socket unix:PATH]
 *
 * Prints one JSON line with the time per call. Every result is checked
 * against the same call made here; exits 1 when one differs.
 */

declare(strict_types=1);

require dirname(__DIR__, 2) . '/php/autoload.php';
require __DIR__ . '/jobs.php';

const JOBS = [
    'add' => 'BenchCalls\add',
    'invoice' => 'BenchApp\Jobs\invoice',
];

$options = getopt('n:', ['method:', 'job:', 'socket:']);
$method = (string) ($options['method'] ?? '');
$job = (string) ($options['job'] ?? '');
$n = (int) ($options['n'] ?? 1000);
$socket = (string) ($options['socket'] ?? '');
if (!in_array($method, ['listener', 'here', 'fallback', 'php-r'], true) || !isset(JOBS[$job]) || $n < 1) {
    fwrite(STDERR, "usage: php roundtrip.php --method listener|here|fallback|php-r --job add|invoice -n N\n");
    exit(2);
}
if ($method === 'listener' && $socket === '') {
    fwrite(STDERR, "roundtrip.php: --method listener needs --socket unix:PATH\n");
    exit(2);
}
$function = JOBS[$job];
$args = static fn (int $i): array => $job === 'add' ? [$i, 1] : [$i];

// The expected values, and one untimed call of each kind to warm up.
$expected = [];
for ($i = 1; $i <= $n; $i++) {
    $expected[$i] = json_decode(json_encode($function(...$args($i)), JSON_PRESERVE_ZERO_FRACTION), true);
}
$absent = 'unix:' . sys_get_temp_dir() . '/hearth-bench-no-listener-' . getmypid() . '.sock';
$call = match ($method) {
    'listener' => static fn (array $a) => Hearth\Jobs::call($function, $a, timeout: 10, fallback: false, socket: $socket),
    'fallback' => static fn (array $a) => Hearth\Jobs::call($function, $a, timeout: 10, socket: $absent),
    'here' => static fn (array $a) => $function(...$a),
    'php-r' => static function (array $a) use ($function): mixed {
        $code = 'require ' . var_export(__DIR__ . '/jobs.php', true) . '; echo json_encode('
            . $function . '(...json_decode($argv[1], true)), JSON_PRESERVE_ZERO_FRACTION);';
        // No shell in between: the process a caller would start.
        $process = proc_open([PHP_BINARY, '-r', $code, json_encode($a)], [1 => ['pipe', 'w']], $pipes);
        $out = stream_get_contents($pipes[1]);
        fclose($pipes[1]);
        proc_close($process);
        return json_decode((string) $out, true);
    },
};
$call($args(1));

$got = [];
$started = hrtime(true);
for ($i = 1; $i <= $n; $i++) {
    $got[$i] = $call($args($i));
}
$seconds = (hrtime(true) - $started) / 1e9;

$wrong = 0;
foreach ($expected as $i => $value) {
    if (($got[$i] ?? null) !== $value) {
        $wrong++;
    }
}
echo json_encode([
    'method' => $method, 'job' => $job, 'n' => $n, 'seconds' => $seconds,
    'per_call_us' => $seconds / $n * 1e6, 'wrong' => $wrong,
]), "\n";
exit($wrong === 0 ? 0 : 1);
