<?php

/**
 * Measures what the PHP library costs per request, without HTTP or Hearth:
 * a child process sends N encoded requests over a socketpair to the real
 * Hearth\Internal\Runtime running HANDLER, and reads the responses.
 *
 *   php-cgi -d output_buffering=1 bench/php/runtime-overhead.php [N] [handler]
 *
 * handler: hello (echo), headers (header() + setcookie()), session
 * (session_start()), psr7 (Psr7Worker with nyholm/psr7). Prints the worker's
 * CPU time per request (user and system), which is what the library adds
 * on top of the app; the round trip also includes the client and wakeups.
 */

declare(strict_types=1);

require __DIR__ . '/../../php/autoload.php';

use Hearth\Internal\Channel;
use Hearth\Internal\Frame;
use Hearth\Internal\Runtime;

$n = (int) ($argv[1] ?? $_GET['n'] ?? 100000);
$which = (string) ($argv[2] ?? 'hello');

$server = serialize([
    'PATH_INFO' => '', 'SCRIPT_FILENAME' => __FILE__, 'QUERY_STRING' => '', 'REQUEST_METHOD' => 'GET',
    'CONTENT_TYPE' => '', 'CONTENT_LENGTH' => '', 'SCRIPT_NAME' => '/w.php', 'REQUEST_URI' => '/',
    'DOCUMENT_URI' => '/w.php', 'DOCUMENT_ROOT' => __DIR__, 'SERVER_PROTOCOL' => 'HTTP/1.1',
    'REQUEST_SCHEME' => 'http', 'GATEWAY_INTERFACE' => 'CGI/1.1', 'SERVER_SOFTWARE' => 'hearth/0.1.0',
    'REMOTE_ADDR' => '127.0.0.1', 'REMOTE_PORT' => '50000', 'REMOTE_USER' => '', 'SERVER_ADDR' => '127.0.0.1',
    'SERVER_PORT' => '8080', 'SERVER_NAME' => 'localhost', 'REDIRECT_STATUS' => '200', 'HTTP_HOST' => 'localhost:8080',
    'HTTP_USER_AGENT' => 'bench', 'HTTP_ACCEPT' => '*/*', 'PHP_SELF' => '/w.php',
    'REQUEST_TIME_FLOAT' => 1700000000.5, 'REQUEST_TIME' => 1700000000,
]);

[$ours, $theirs] = stream_socket_pair(STREAM_PF_UNIX, STREAM_SOCK_STREAM, STREAM_IPPROTO_IP);
$pid = pcntl_fork();
if ($pid === 0) {
    // Client: one request at a time, like Hearth with one worker.
    fclose($ours);
    stream_set_read_buffer($theirs, 0);
    $start = hrtime(true);
    for ($i = 1; $i <= $n; $i++) {
        fwrite($theirs, Frame::encode(Frame::REQUEST, $i, $server) . Frame::encode(Frame::END, $i, ''));
        $got = '';
        while (!str_contains($got, pack('CCnN', 1, Frame::END, 0, $i) . "\0\0\0\0")
            && !str_contains($got, pack('CCnN', 1, Frame::END, 1, $i) . "\0\0\0\0")) {
            $got .= fread($theirs, 65536);
        }
    }
    $us = (hrtime(true) - $start) / 1000 / $n;
    fwrite($theirs, Frame::encode(Frame::STOP, 0, ''));
    fwrite(STDERR, sprintf("%s: %.2f us per request round trip (%d requests)\n", $which, $us, $n));
    exit(0);
}
fclose($theirs);

$handlers = [
    'hello' => static function (): void {
        echo 'Hello, World!';
    },
    'headers' => static function (): void {
        header('Content-Type: text/plain');
        header('X-Request: ' . $_SERVER['REQUEST_URI']);
        setcookie('seen', '1');
        echo 'Hello, World!';
    },
    'session' => static function (): void {
        session_start();
        $_SESSION['n'] = ($_SESSION['n'] ?? 0) + 1;
        echo 'Hello, World!';
    },
];
if ($which === 'psr7') {
    require '/usr/share/php/Nyholm/Psr7/autoload.php';
    $factory = new Nyholm\Psr7\Factory\Psr17Factory();
    $handler = static function () use ($factory): void {
        Hearth\Psr7Worker::emit($factory->createResponse(200)->withBody($factory->createStream('Hello, World!')));
        Hearth\Psr7Worker::requestFromGlobals($factory);
    };
} else {
    $handler = $handlers[$which];
}

$before = getrusage();
$run = new ReflectionMethod(Runtime::class, 'run');
$run->invoke(null, Channel::fromStreams($ours), $handler);
$after = getrusage();
pcntl_waitpid($pid, $status);
$cpu = static fn (array $r, string $k): float => $r["ru_{$k}.tv_sec"] * 1e6 + $r["ru_{$k}.tv_usec"];
fwrite(STDERR, sprintf(
    "%s: worker CPU %.2f us per request (user %.2f, system %.2f)\n",
    $which,
    ($cpu($after, 'utime') + $cpu($after, 'stime') - $cpu($before, 'utime') - $cpu($before, 'stime')) / $n,
    ($cpu($after, 'utime') - $cpu($before, 'utime')) / $n,
    ($cpu($after, 'stime') - $cpu($before, 'stime')) / $n,
));
