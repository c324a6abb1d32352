<?php

declare(strict_types=1);

namespace Hearth\Tests;

use Hearth\Internal\Frame;
use PHPUnit\Framework\TestCase;

/**
 * The report on the worker in each request's final END (docs/protocol.md,
 * "END from the worker"), from a real worker process whose channel is a
 * socket on its standard input, as under Hearth.
 */
final class RouteReportTest extends TestCase
{
    /** @var resource */
    private $process;
    /** @var resource Hearth's end of the channel */
    private $channel;

    private function start(bool $report): void
    {
        $pair = stream_socket_pair(STREAM_PF_UNIX, STREAM_SOCK_STREAM, STREAM_IPPROTO_IP);
        self::assertIsArray($pair);
        $env = getenv();
        $env['HEARTH_PROTOCOL'] = '1';
        $env['HEARTH_MAX_PAYLOAD'] = '16777216';
        unset($env['HEARTH_REPORT']);
        if ($report) {
            $env['HEARTH_REPORT'] = '1';
        }
        $process = proc_open(
            [PHP_BINARY, '-n', __DIR__ . '/fixtures/route_app.php'],
            [0 => $pair[1], 1 => ['file', '/dev/null', 'w'], 2 => ['file', '/dev/null', 'w']],
            $pipes,
            null,
            $env,
        );
        self::assertIsResource($process);
        fclose($pair[1]);
        $this->process = $process;
        $this->channel = $pair[0];
        stream_set_timeout($this->channel, 30);
        $ready = $this->frame();
        self::assertSame(Frame::READY, $ready['kind']);
    }

    protected function tearDown(): void
    {
        if (isset($this->channel)) {
            fwrite($this->channel, Frame::encode(Frame::STOP, 0, ''));
            fclose($this->channel);
        }
        if (isset($this->process)) {
            proc_close($this->process);
        }
    }

    /** @return array{kind:int,flags:int,request_id:int,payload:string} */
    private function frame(): array
    {
        $header = $this->read(Frame::HEADER_LEN);
        [$kind, $flags, $id, $length] = Frame::header($header, 0, 1 << 24) ?? [0, 0, 0, 0];
        return ['kind' => $kind, 'flags' => $flags, 'request_id' => $id, 'payload' => $this->read($length)];
    }

    private function read(int $n): string
    {
        $out = '';
        while (strlen($out) < $n) {
            $chunk = fread($this->channel, $n - strlen($out));
            self::assertNotFalse($chunk);
            self::assertNotSame('', $chunk, 'the worker answered in time');
            $out .= $chunk;
        }
        return $out;
    }

    /**
     * Sends a GET for $uri and returns the final END of its response.
     *
     * @return array{kind:int,flags:int,request_id:int,payload:string}
     */
    private function get(int $id, string $uri): array
    {
        $query = (string) parse_url($uri, PHP_URL_QUERY);
        $server = serialize(['REQUEST_METHOD' => 'GET', 'REQUEST_URI' => $uri, 'QUERY_STRING' => $query]);
        fwrite($this->channel, Frame::encode(Frame::REQUEST, $id, $server) . Frame::encode(Frame::END, $id, ''));
        do {
            $frame = $this->frame();
            self::assertSame($id, $frame['request_id']);
        } while ($frame['kind'] !== Frame::END);
        return $frame;
    }

    /** @return array<string, string> */
    private static function report(array $end): array
    {
        self::assertSame(Frame::FLAG_REPORT, $end['flags'] & Frame::FLAG_REPORT, 'the END has REPORT');
        $fields = [];
        foreach (Frame::decodeFields($end['payload']) as [$key, $value]) {
            $fields[$key] ??= $value;
        }
        return $fields;
    }

    public function testEachEndReportsTheMemoryAfterThePreviousRequestAndTheRouteName(): void
    {
        $this->start(true);
        $memory = [];
        $routes = [];
        $uris = ['/a', '/leak', '/a', '/leak', '/named', '/a?q=' . str_repeat('y', 4000), '/a', '/a'];
        foreach ($uris as $i => $uri) {
            $report = self::report($this->get($i + 1, $uri));
            self::assertMatchesRegularExpression('/^[0-9]+$/', $report['memory']);
            $memory[] = (int) $report['memory'];
            $routes[] = $report['route'] ?? null;
        }
        // Report n measures what request n-1 left behind.
        $growth = static fn (int $n): int => $memory[$n + 1] - $memory[$n];
        self::assertGreaterThanOrEqual(8192, $growth(1), 'a /leak request keeps 8 KiB');
        self::assertGreaterThanOrEqual(8192, $growth(3));
        self::assertSame(0, $growth(2), '/a keeps nothing');
        // The first query string of the worker may leave a few bytes (a
        // one-time allocation), never its 4 KiB.
        self::assertLessThan(256, $growth(5), 'a long query string is let go with its request');
        self::assertSame(0, $growth(6));
        self::assertSame(
            [null, null, null, null, 'users.show', null, null, null],
            $routes,
            'the last name counts, for its request only',
        );
    }

    public function testWithoutHearthReportEveryEndIsEmpty(): void
    {
        $this->start(false);
        foreach (['/a', '/named'] as $i => $uri) {
            $end = $this->get($i + 1, $uri);
            self::assertSame(0, $end['flags'] & Frame::FLAG_REPORT);
            self::assertSame('', $end['payload']);
        }
    }

    public function testRouteNameDoesNothingOutsideHearth(): void
    {
        \Hearth\route_name('anything');
        self::assertNull(\Hearth\Internal\Runtime::current());
    }
}
