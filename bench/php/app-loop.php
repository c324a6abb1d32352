<?php

/**
 * An app's own time per request, without HTTP, a front or a worker
 * protocol: boots the app once, then hands it the benchmark's request in a
 * loop, in this one process, and prints one JSON line:
 *
 *   {"app": "...", "requests": N, "wall_us": ..., "cpu_us": ..., "body": "..."}
 *
 * wall_us and cpu_us (user + system, from getrusage()) are per request,
 * over the measured iterations (after a warm-up of a tenth of them).
 * bench/http.py runs it with php-cgi, the SAPI and php.ini of Hearth's
 * workers, so OPcache is on as there:
 *
 *   BENCH_LOOP_APP=symfony-micro BENCH_LOOP_N=5000 php-cgi -q bench/php/app-loop.php
 *
 * (php-cgi passes no command-line arguments to a script: the environment
 * carries them; php bench/php/app-loop.php APP N works too, with the CLI's
 * php.ini.) Apps: hello (the echo of bench/apps/hello), symfony-micro (the
 * kernel of bench/apps/symfony-micro: Request::create(), handle(),
 * terminate(), and the services_resetter's reset that Kernel::boot() runs
 * at the next handle(), as in a worker).
 */

declare(strict_types=1);

$app = (string) (getenv('BENCH_LOOP_APP') ?: ($argv[1] ?? 'hello'));
$n = max(10, (int) (getenv('BENCH_LOOP_N') ?: ($argv[2] ?? 5000)));
$path = (string) (getenv('BENCH_LOOP_PATH') ?: ($argv[3] ?? '/'));

switch ($app) {
    case 'hello':
        $handle = static function (): string {
            ob_start();
            echo 'Hello, World!';
            return (string) ob_get_clean();
        };
        break;
    case 'symfony-micro':
        $kernel = require __DIR__ . '/../apps/symfony-micro/bootstrap.php';
        $kernel->boot();
        $handle = static function () use ($kernel, $path): string {
            $request = Symfony\Component\HttpFoundation\Request::create($path, 'GET', [], [], [], [
                'HTTP_HOST' => '127.0.0.1:8080', 'REMOTE_ADDR' => '127.0.0.1', 'SERVER_PORT' => '8080',
                'HTTP_USER_AGENT' => 'app-loop', 'HTTP_ACCEPT' => '*/*',
            ]);
            $response = $kernel->handle($request);
            $body = (string) $response->getContent();
            $kernel->terminate($request, $response);
            return $body;
        };
        break;
    default:
        fwrite(STDERR, "app-loop.php: unknown app {$app} (hello, symfony-micro)\n");
        exit(2);
}

/** @return array{0: int, 1: float} hrtime in ns, CPU in µs */
$now = static function (): array {
    $u = getrusage();
    return [hrtime(true), $u['ru_utime.tv_sec'] * 1e6 + $u['ru_utime.tv_usec']
        + $u['ru_stime.tv_sec'] * 1e6 + $u['ru_stime.tv_usec']];
};

$body = '';
for ($i = 0, $warm = intdiv($n, 10); $i < $warm; $i++) {
    $body = $handle();
}
[$wall0, $cpu0] = $now();
for ($i = 0; $i < $n; $i++) {
    $body = $handle();
}
[$wall1, $cpu1] = $now();

echo json_encode([
    'app' => $app,
    'requests' => $n,
    'wall_us' => ($wall1 - $wall0) / 1e3 / $n,
    'cpu_us' => ($cpu1 - $cpu0) / $n,
    'body' => $body,
], JSON_UNESCAPED_SLASHES), "\n";
