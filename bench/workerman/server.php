<?php

/**
 * The benchmark's apps served by Workerman (a PHP server with no front
 * process: each of its PHP processes accepts connections and parses HTTP
 * itself), for bench/http.py. Workerman's source is read from where the
 * benchmark found it, never copied here.
 *
 *   BENCH_WORKERMAN_DIR=../shared/peers/workerman-5.2.2 BENCH_WORKERMAN_APP=hello \
 *   BENCH_WORKERMAN_LISTEN=127.0.0.1:8080 BENCH_WORKERMAN_COUNT=2 BENCH_WORKERMAN_STATE=/tmp/wm \
 *       php -d opcache.enable_cli=1 bench/workerman/server.php start
 *
 * Workerman reads its command (start) from the command line, so the rest
 * comes through the environment: the directory of Workerman's release
 * (holding src/), the app (hello, symfony-micro), the address, the number
 * of PHP processes (Workerman's `count`, the benchmark's N) and a
 * directory for its pid, log and status files. The master stays in the
 * foreground; SIGTERM or SIGINT stops it and its children.
 *
 * Each app is built lazily, at a process's first request: Workerman's
 * onWorkerStart runs in a coroutine context that needs its separate
 * workerman/coroutine package, which is not loaded here (no Composer).
 */

declare(strict_types=1);

use Symfony\Component\HttpFoundation\Request as SymfonyRequest;
use Symfony\Component\HttpKernel\KernelInterface;
use Workerman\Connection\TcpConnection;
use Workerman\Protocols\Http\Request;
use Workerman\Protocols\Http\Response;
use Workerman\Worker;

$setting = static function (string $name): string {
    $value = getenv($name);
    if ($value === false || $value === '') {
        fwrite(STDERR, "bench/workerman/server.php: {$name} is not set\n");
        exit(2);
    }
    return $value;
};

$source = rtrim($setting('BENCH_WORKERMAN_DIR'), '/') . '/src/';
if (!is_file($source . 'Worker.php')) {
    fwrite(STDERR, "bench/workerman/server.php: no Workerman in {$source}\n");
    exit(2);
}
$app = $setting('BENCH_WORKERMAN_APP');
$listen = $setting('BENCH_WORKERMAN_LISTEN');
$count = (int) $setting('BENCH_WORKERMAN_COUNT');
$state = rtrim($setting('BENCH_WORKERMAN_STATE'), '/');

// Composer's PSR-4 rule for Workerman\ -> src/, as its composer.json
// declares. Classes of its optional packages (Workerman\Coroutine\...) have
// no file here and are left to other autoloaders.
spl_autoload_register(static function (string $class) use ($source): void {
    if (str_starts_with($class, 'Workerman\\')) {
        $file = $source . str_replace('\\', '/', substr($class, 10)) . '.php';
        if (is_file($file)) {
            require $file;
        }
    }
});

/**
 * A Workerman request as the Symfony Request a front controller would have
 * built from PHP's globals: the same server variables a FastCGI server
 * passes (method, URI, query, protocol, addresses, HTTP_* headers), query,
 * body fields, cookies and raw body.
 */
$toSymfony = static function (TcpConnection $connection, Request $request): SymfonyRequest {
    $server = [
        'REQUEST_METHOD' => $request->method(),
        'REQUEST_URI' => $request->uri(),
        'QUERY_STRING' => $request->queryString(),
        'SERVER_PROTOCOL' => 'HTTP/' . $request->protocolVersion(),
        'SERVER_NAME' => $request->host(true),
        'SERVER_ADDR' => $connection->getLocalIp(),
        'SERVER_PORT' => $connection->getLocalPort(),
        'REMOTE_ADDR' => $connection->getRemoteIp(),
        'REMOTE_PORT' => $connection->getRemotePort(),
        'SCRIPT_NAME' => '',
        'SCRIPT_FILENAME' => '',
        'REQUEST_TIME' => time(),
        'REQUEST_TIME_FLOAT' => microtime(true),
    ];
    foreach ($request->header() as $name => $value) {
        $key = strtoupper(str_replace('-', '_', (string) $name));
        $server[$key === 'CONTENT_TYPE' || $key === 'CONTENT_LENGTH' ? $key : 'HTTP_' . $key] = $value;
    }
    return new SymfonyRequest(
        $request->get(),
        $request->post(),
        [],
        $request->cookie(),
        [],
        $server,
        $request->rawBody(),
    );
};

$worker = new Worker("http://{$listen}");
$worker->count = $count;
$worker->name = "bench-{$app}";

switch ($app) {
    case 'hello':
        $worker->onMessage = static function (TcpConnection $connection, Request $request): void {
            $connection->send('Hello, World!');
        };
        break;
    case 'symfony-micro':
        $worker->onMessage = static function (TcpConnection $connection, Request $request) use ($toSymfony): void {
            static $kernel = null;
            if ($kernel === null) {
                $kernel = require __DIR__ . '/../apps/symfony-micro/bootstrap.php';
                assert($kernel instanceof KernelInterface);
                $kernel->boot();
            }
            $symfonyRequest = $toSymfony($connection, $request);
            $symfonyResponse = $kernel->handle($symfonyRequest);
            $headers = $symfonyResponse->headers->allPreserveCaseWithoutCookies();
            $cookies = $symfonyResponse->headers->getCookies();
            if ($cookies) {
                $headers['Set-Cookie'] = array_map('strval', $cookies);
            }
            $connection->send(new Response(
                $symfonyResponse->getStatusCode(),
                $headers,
                (string) $symfonyResponse->getContent(),
            ));
            // As after a php-fpm response: the kernel's terminate listeners;
            // the next handle() resets the services (Kernel::boot()'s
            // services_resetter).
            $kernel->terminate($symfonyRequest, $symfonyResponse);
        };
        break;
    default:
        fwrite(STDERR, "bench/workerman/server.php: unknown app {$app} (hello, symfony-micro)\n");
        exit(2);
}

Worker::$pidFile = "{$state}/workerman.pid";
Worker::$statusFile = "{$state}/workerman.status";
Worker::$logFile = "{$state}/workerman.log";
Worker::$stdoutFile = "{$state}/workerman.stdout";
Worker::runAll();
