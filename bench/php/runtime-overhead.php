<?php

/**
 * What the PHP library costs per request, without HTTP or Hearth.
 *
 * This script (run with the CLI) starts a php-cgi worker as Hearth does
 * when open_basedir is set (a socket on stdin, output_buffering=1; Hearth
 * otherwise uses pipes), sends it N requests one at a time, and prints
 * the worker's CPU time per request (user and system)
 * as the worker measured it with getrusage(): what the library and the
 * handler add on top of the kernel's share.
 *
 *   php bench/php/runtime-overhead.php [N] [handler] [php-cgi binary]
 *
 * With HEARTH_OVERHEAD_WRAP set, the worker runs under that command, e.g.
 * "valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.%p" to count
 * instructions, which unlike times do not drift with the machine's load.
 *
 * handler: hello (echo), headers (header() + setcookie()), session
 * (session_start()), psr7 (a PSR-7 round trip with nyholm/psr7), slim (the
 * Slim app of bench/apps/slim).
 */

declare(strict_types=1);

require __DIR__ . '/../../php/autoload.php';

use Hearth\Internal\Frame;

if (getenv('HEARTH_OVERHEAD_WORKER') !== false) {
    worker((string) getenv('HEARTH_OVERHEAD_WORKER'), (int) getenv('HEARTH_OVERHEAD_N'));
    exit;
}

$n = (int) ($argv[1] ?? 20000);
$which = (string) ($argv[2] ?? 'hello');
$phpCgi = (string) ($argv[3] ?? 'php-cgi');

$server = serialize([
    'PATH_INFO' => '', 'SCRIPT_FILENAME' => __FILE__, 'QUERY_STRING' => '', 'REQUEST_METHOD' => 'GET',
    'CONTENT_TYPE' => '', 'CONTENT_LENGTH' => '', 'SCRIPT_NAME' => '/w.php', 'REQUEST_URI' => '/',
    'DOCUMENT_URI' => '/w.php', 'DOCUMENT_ROOT' => __DIR__, 'SERVER_PROTOCOL' => 'HTTP/1.1',
    'REQUEST_SCHEME' => 'http', 'GATEWAY_INTERFACE' => 'CGI/1.1', 'SERVER_SOFTWARE' => 'hearth/0.1.0',
    'REMOTE_ADDR' => '127.0.0.1', 'REMOTE_PORT' => '50000', 'REMOTE_USER' => '', 'SERVER_ADDR' => '127.0.0.1',
    'SERVER_PORT' => '8080', 'SERVER_NAME' => 'localhost', 'REDIRECT_STATUS' => '200',
    'HTTP_HOST' => 'localhost:8080', 'HTTP_USER_AGENT' => 'bench', 'HTTP_ACCEPT' => '*/*', 'PHP_SELF' => '/w.php',
    'REQUEST_TIME_FLOAT' => 1700000000.5, 'REQUEST_TIME' => 1700000000,
]);

[$ours, $theirs] = stream_socket_pair(STREAM_PF_UNIX, STREAM_SOCK_STREAM, STREAM_IPPROTO_IP);
$env = getenv() + [
    'HEARTH_PROTOCOL' => '1',
    'HEARTH_OVERHEAD_WORKER' => $which,
    'HEARTH_OVERHEAD_N' => (string) $n,
];
$wrap = getenv('HEARTH_OVERHEAD_WRAP');
$proc = proc_open(
    array_merge(
        $wrap ? explode(' ', $wrap) : [],
        [$phpCgi, '-d', 'output_buffering=1', '-d', 'disable_functions=move_uploaded_file,is_uploaded_file', __FILE__],
    ),
    [0 => $theirs, 1 => ['file', '/dev/null', 'w'], 2 => STDERR],
    $pipes,
    __DIR__,
    $env,
);
fclose($theirs);
stream_set_read_buffer($ours, 0);

$buffer = '';
$readFrame = static function () use ($ours, &$buffer): array {
    while (true) {
        if (strlen($buffer) >= Frame::HEADER_LEN) {
            $h = unpack('Cv/Ck/nf/Ni/Nl', $buffer);
            if (strlen($buffer) >= Frame::HEADER_LEN + $h['l']) {
                $buffer = (string) substr($buffer, Frame::HEADER_LEN + $h['l']);
                return $h;
            }
        }
        $chunk = fread($ours, 65536);
        if ($chunk === false || ($chunk === '' && feof($ours))) {
            throw new RuntimeException('the worker went away');
        }
        $buffer .= $chunk;
    }
};
$readFrame(); // READY
for ($i = 1; $i <= $n; $i++) {
    fwrite($ours, Frame::encode(Frame::REQUEST, $i, $server) . Frame::encode(Frame::END, $i, ''));
    do {
        $h = $readFrame();
    } while ($h['k'] !== Frame::END);
}
fwrite($ours, Frame::encode(Frame::STOP, 0, ''));
proc_close($proc);

/** Runs inside php-cgi: the library's request loop around one handler. */
function worker(string $which, int $n): void
{
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
    if ($which === 'psr7' || $which === 'slim') {
        require '/usr/share/php/Nyholm/Psr7/autoload.php';
    }
    if ($which === 'psr7') {
        $factory = new Nyholm\Psr7\Factory\Psr17Factory();
        $handler = static function () use ($factory): void {
            Hearth\Psr7Worker::requestFromGlobals($factory);
            Hearth\Psr7Worker::emit($factory->createResponse(200)->withBody($factory->createStream('Hello, World!')));
        };
    } elseif ($which === 'slim') {
        $app = require __DIR__ . '/../apps/slim/app.php';
        $factory = $app->getContainer()->get(Nyholm\Psr7\Factory\Psr17Factory::class);
        $handler = static function () use ($app, $factory): void {
            $request = Hearth\Psr7Worker::requestFromGlobals($factory);
            Hearth\Psr7Worker::emit($app->process($request, $factory->createResponse()));
        };
    } else {
        $handler = $handlers[$which];
    }
    $before = getrusage();
    Hearth\Worker::serve($handler);
    $after = getrusage();
    $cpu = static fn (array $r, string $k): float => $r["ru_{$k}.tv_sec"] * 1e6 + $r["ru_{$k}.tv_usec"];
    fwrite(fopen('php://stderr', 'w'), sprintf(
        "%s: worker CPU %.2f us per request (user %.2f, system %.2f)\n",
        $which,
        ($cpu($after, 'utime') + $cpu($after, 'stime') - $cpu($before, 'utime') - $cpu($before, 'stime')) / $n,
        ($cpu($after, 'utime') - $cpu($before, 'utime')) / $n,
        ($cpu($after, 'stime') - $cpu($before, 'stime')) / $n,
    ));
}
