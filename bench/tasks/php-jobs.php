<?php

/**
 * One measurement of the PHP-jobs part of bench/tasks.py: N calls of
 * BenchApp\Jobs\invoice(1 ... N) (app/bootstrap.php), C at a time,
 *
 *   warm  through Hearth\TaskRunner::map(): `hearth run --php-bootstrap`,
 *         C warm PHP workers that load the bootstrap once each;
 *   cold  through `xargs -P C`, one `php -r 'require BOOTSTRAP; echo
 *         json_encode(invoice($argv[1]));'` per job: the bootstrap per job.
 *
 *     php bench/tasks/php-jobs.php --method warm|cold -n 1000 -c 2 [--hearth BIN]
 *
 * Prints one JSON line. Both sides' results are checked against the same
 * calls made in this process; exits 1 when any differs or is missing.
 */

declare(strict_types=1);

const BOOTSTRAP = __DIR__ . '/app/bootstrap.php';
const JOB = 'BenchApp\Jobs\invoice';

$options = getopt('n:c:', ['method:', 'hearth:', 'autoload:']);
$method = (string) ($options['method'] ?? '');
$n = (int) ($options['n'] ?? 1000);
$concurrency = (int) ($options['c'] ?? 2);
if (!in_array($method, ['warm', 'cold'], true) || $n < 1 || $concurrency < 1) {
    fwrite(STDERR, "usage: php php-jobs.php --method warm|cold -n N -c C [--hearth BIN]\n");
    exit(2);
}

$ids = range(1, $n);

if ($method === 'warm') {
    require (string) ($options['autoload'] ?? dirname(__DIR__, 2) . '/php/autoload.php');
    $hearth = isset($options['hearth']) ? (string) $options['hearth'] : null;
    $started = hrtime(true);
    // Keyed by order id: map() returns the same keys, each with what the
    // call returned (or a Hearth\JobError, which the check below rejects).
    $argsList = array_combine($ids, array_map(static fn (int $id) => [$id], $ids));
    $got = Hearth\TaskRunner::map(BOOTSTRAP, JOB, $argsList, $concurrency, $hearth);
    $seconds = (hrtime(true) - $started) / 1e9;
} else {
    $code = 'require ' . var_export(BOOTSTRAP, true) . '; '
        . 'echo json_encode(' . JOB . '((int) $argv[1])) . "\n";';
    $started = hrtime(true);
    $list = tempnam(sys_get_temp_dir(), 'hearth-bench-jobs-');
    file_put_contents($list, implode("\n", $ids) . "\n");
    $xargs = proc_open(
        ['xargs', '-d', '\n', '-P', (string) $concurrency, '-n', '1', PHP_BINARY, '-r', $code],
        [0 => ['file', $list, 'r'], 1 => ['pipe', 'w'], 2 => STDERR],
        $pipes
    );
    if ($xargs === false) {
        fwrite(STDERR, "php-jobs.php: cannot start xargs\n");
        exit(2);
    }
    $out = (string) stream_get_contents($pipes[1]);
    fclose($pipes[1]);
    $status = proc_close($xargs);
    $seconds = (hrtime(true) - $started) / 1e9;
    unlink($list);
    if ($status !== 0) {
        fwrite(STDERR, "php-jobs.php: xargs exited with status $status\n");
    }
    // One line per job, in completion order; each is written with one
    // write(2) of less than PIPE_BUF bytes, so lines never mix.
    $got = [];
    foreach (explode("\n", rtrim($out, "\n")) as $line) {
        $result = json_decode($line, true);
        $got[is_array($result) ? (int) ($result['order'] ?? -1) : -1] = $result;
    }
}

// The expected results: the same calls, here.
require BOOTSTRAP;
$wrong = 0;
$example = null;
foreach ($ids as $id) {
    $expected = BenchApp\Jobs\invoice($id);
    if (($got[$id] ?? null) !== $expected) {
        $wrong++;
        $example ??= ['id' => $id, 'expected' => $expected, 'got' => $got[$id] ?? null];
    }
}
$ok = $wrong === 0 && count($got) === $n;
echo json_encode([
    'event' => 'measured', 'test' => 'php-jobs', 'method' => $method, 'n' => $n, 'concurrency' => $concurrency,
    'seconds' => $seconds, 'tps' => $n / $seconds, 'results' => count($got), 'wrong' => $wrong, 'ok' => $ok,
]), "\n";
if (!$ok) {
    fwrite(STDERR, "php-jobs.php: $method: $wrong of $n results wrong or missing, " . count($got) . ' results; e.g. '
        . json_encode($example) . "\n");
    exit(1);
}
