<?php

declare(strict_types=1);

namespace Hearth\Tests;

use Hearth\Internal\Channel;
use Hearth\Internal\Frame;
use Hearth\Internal\ProtocolError;
use Hearth\Internal\Request;
use Hearth\Tests\Support\ChunkedStream;
use Hearth\Tests\Support\ShortWriteStream;
use PHPUnit\Framework\TestCase;

final class ChannelTest extends TestCase
{
    private const MAX_PAYLOAD = 256;

    /** @var list<resource> */
    private array $streams = [];

    protected function tearDown(): void
    {
        foreach ($this->streams as $stream) {
            if (is_resource($stream)) {
                fclose($stream);
            }
        }
        $this->streams = [];
    }

    /**
     * A connected pair of Unix stream sockets: the worker's end and Hearth's.
     *
     * @return array{0: resource, 1: resource}
     */
    private function socketPair(): array
    {
        $pair = stream_socket_pair(STREAM_PF_UNIX, STREAM_SOCK_STREAM, STREAM_IPPROTO_IP);
        self::assertIsArray($pair);
        [$worker, $peer] = $pair;
        $this->streams[] = $worker;
        $this->streams[] = $peer;
        return [$worker, $peer];
    }

    /** @param resource $peer */
    private static function write($peer, string $bytes): void
    {
        self::assertSame(strlen($bytes), fwrite($peer, $bytes));
    }

    private static function server(string $uri): string
    {
        return serialize(['REQUEST_METHOD' => 'POST', 'REQUEST_URI' => $uri, 'REQUEST_TIME' => 1700000000]);
    }

    /** Two requests, the second a multipart form. */
    private static function conversation(): string
    {
        return Frame::encode(Frame::REQUEST, 1, self::server('/one'))
            . Frame::encode(Frame::BODY, 1, 'a=1&')
            . Frame::encode(Frame::BODY, 1, '')
            . Frame::encode(Frame::BODY, 1, "b=\x00\xff")
            . Frame::encode(Frame::END, 1, '')
            . Frame::encode(Frame::REQUEST, 2, self::server('/two'))
            . Frame::encode(Frame::FORM, 2, serialize([['title', 'Hello']]))
            . Frame::encode(Frame::END, 2, '');
    }

    private static function assertConversation(Channel $channel, string $where = ''): void
    {
        $first = $channel->receive();
        self::assertInstanceOf(Request::class, $first, $where);
        self::assertSame(1, $first->id, $where);
        self::assertSame(self::server('/one'), $first->server, $where);
        self::assertSame("a=1&b=\x00\xff", $first->body, $where);
        self::assertNull($first->form, $where);

        $second = $channel->receive();
        self::assertInstanceOf(Request::class, $second, $where);
        self::assertSame(2, $second->id, $where);
        self::assertSame(self::server('/two'), $second->server, $where);
        self::assertSame('', $second->body, $where);
        self::assertSame(serialize([['title', 'Hello']]), $second->form, $where);
    }

    public function testReceivesRequestsWrittenInOneGo(): void
    {
        [$worker, $peer] = $this->socketPair();
        self::write($peer, self::conversation() . Frame::encode(Frame::STOP, 0, ''));
        $channel = Channel::fromStreams($worker);
        self::assertConversation($channel);
        self::assertNull($channel->receive());
    }

    public function testReceivesARequestWhoseBodyIsInAFile(): void
    {
        [$worker, $peer] = $this->socketPair();
        self::write($peer, Frame::encode(Frame::REQUEST, 4, serialize(['REQUEST_METHOD' => 'PUT']))
            . Frame::encode(Frame::BODY_FILE, 4, '/tmp/hearth-body-Xy12Ab')
            . Frame::encode(Frame::END, 4, ''));
        $request = Channel::fromStreams($worker)->receive();
        self::assertNotNull($request);
        self::assertSame(4, $request->id);
        self::assertSame('', $request->body);
        self::assertNull($request->form);
        self::assertSame('/tmp/hearth-body-Xy12Ab', $request->bodyFile);
    }

    public function testReceivesARequestWrittenOneByteAtATime(): void
    {
        [$worker, $peer] = $this->socketPair();
        // Each one-byte write takes a whole socket buffer entry, so the
        // request is kept small enough for all of them to fit.
        $server = serialize(['REQUEST_METHOD' => 'PUT']);
        $bytes = Frame::encode(Frame::REQUEST, 9, $server)
            . Frame::encode(Frame::BODY, 9, 'ab')
            . Frame::encode(Frame::BODY, 9, 'c')
            . Frame::encode(Frame::END, 9, '')
            . Frame::encode(Frame::STOP, 0, '');
        stream_set_blocking($peer, false);
        foreach (str_split($bytes) as $byte) {
            self::write($peer, $byte);
        }
        $channel = Channel::fromStreams($worker);
        $request = $channel->receive();
        self::assertInstanceOf(Request::class, $request);
        self::assertSame(9, $request->id);
        self::assertSame($server, $request->server);
        self::assertSame('abc', $request->body);
        self::assertNull($request->form);
        self::assertNull($channel->receive());
    }

    public function testReceivesRequestsWhoseBytesArriveInPiecesFromAnotherProcess(): void
    {
        [$worker, $peer] = $this->socketPair();
        $process = proc_open(
            [PHP_BINARY, __DIR__ . '/fixtures/trickle.php', bin2hex(self::conversation())],
            [0 => ['file', '/dev/null', 'r'], 1 => $peer, 2 => ['pipe', 'w']],
            $pipes,
        );
        self::assertIsResource($process);
        fclose($peer);
        $channel = Channel::fromStreams($worker);
        self::assertConversation($channel);
        // The writer exits: end of stream.
        self::assertNull($channel->receive());
        self::assertSame('', stream_get_contents($pipes[2]));
        fclose($pipes[2]);
        self::assertSame(0, proc_close($process));
    }

    public function testShortReadsAtEverySplitPoint(): void
    {
        $bytes = self::conversation();
        for ($cut = 1; $cut < strlen($bytes); $cut++) {
            $channel = Channel::fromStreams(ChunkedStream::open([substr($bytes, 0, $cut), substr($bytes, $cut)]));
            self::assertConversation($channel, "cut at $cut");
            self::assertNull($channel->receive(), "cut at $cut");
        }
        $channel = Channel::fromStreams(ChunkedStream::open(str_split($bytes)));
        self::assertConversation($channel, 'one byte per read');
        self::assertNull($channel->receive());
    }

    public function testStopEndsTheLoop(): void
    {
        [$worker, $peer] = $this->socketPair();
        self::write($peer, Frame::encode(Frame::STOP, 0, ''));
        self::assertNull(Channel::fromStreams($worker)->receive());
    }

    public function testEndOfStreamEndsTheLoop(): void
    {
        [$worker, $peer] = $this->socketPair();
        fclose($peer);
        self::assertNull(Channel::fromStreams($worker)->receive());
    }

    public function testEndOfStreamInsideARequestEndsTheLoop(): void
    {
        [$worker, $peer] = $this->socketPair();
        $body = Frame::encode(Frame::BODY, 3, 'partial body');
        self::write($peer, Frame::encode(Frame::REQUEST, 3, self::server('/')) . substr($body, 0, 15));
        fclose($peer);
        self::assertNull(Channel::fromStreams($worker)->receive());
    }

    /** @return iterable<string, array{0: string, 1: int}> */
    public function protocolErrors(): iterable
    {
        $request = Frame::encode(Frame::REQUEST, 1, self::server('/'));
        yield 'wrong version' => [
            "\x02" . substr(Frame::encode(Frame::REQUEST, 1, 'x'), 1),
            ProtocolError::VERSION,
        ];
        yield 'wrong version after a request frame' => [
            $request . "\x00" . substr(Frame::encode(Frame::END, 1, ''), 1),
            ProtocolError::VERSION,
        ];
        yield 'payload over the limit, header only' => [
            $request . pack('CCnNN', Frame::VERSION, Frame::BODY, 0, 1, self::MAX_PAYLOAD + 1),
            ProtocolError::TOO_LARGE,
        ];
        yield 'payload of 4 GiB - 1, header only' => [
            pack('CCnNN', Frame::VERSION, Frame::REQUEST, 0, 1, 0xFFFFFFFF),
            ProtocolError::TOO_LARGE,
        ];
        yield 'END without REQUEST' => [Frame::encode(Frame::END, 1, ''), ProtocolError::UNEXPECTED];
        yield 'BODY and END without REQUEST' => [
            Frame::encode(Frame::BODY, 1, 'x') . Frame::encode(Frame::END, 1, ''),
            ProtocolError::UNEXPECTED,
        ];
        yield 'REQUEST inside a request' => [$request . $request, ProtocolError::UNEXPECTED];
        yield 'HEAD sent to a worker' => [Frame::encode(Frame::HEAD, 1, "\x00\xc8"), ProtocolError::UNEXPECTED];
        yield 'READY sent to a worker' => [Frame::encode(Frame::READY, 0, ''), ProtocolError::UNEXPECTED];
        yield 'ERROR sent to a worker' => [$request . Frame::encode(Frame::ERROR, 1, ''), ProtocolError::UNEXPECTED];
        yield 'unknown kind 12' => [pack('CCnNN', Frame::VERSION, 12, 0, 1, 0), ProtocolError::UNKNOWN_KIND];
        yield 'unknown kind 0' => [pack('CCnNN', Frame::VERSION, 0, 0, 1, 0), ProtocolError::UNKNOWN_KIND];
    }

    /** @dataProvider protocolErrors */
    public function testBytesThatAreNotTheProtocolThrow(string $bytes, int $code): void
    {
        [$worker, $peer] = $this->socketPair();
        self::write($peer, $bytes);
        // Closed, so that a channel that waited for more would see the end
        // of the stream instead of hanging.
        fclose($peer);
        $channel = Channel::fromStreams($worker, null, self::MAX_PAYLOAD);
        try {
            $request = $channel->receive();
            self::fail('no ProtocolError; receive() gave ' . var_export($request, true));
        } catch (ProtocolError $e) {
            self::assertSame($code, $e->getCode(), $e->getMessage());
        }
    }

    public function testAnOversizePayloadIsRefusedBeforeItIsRead(): void
    {
        $header = pack('CCnNN', Frame::VERSION, Frame::BODY, 0, 1, self::MAX_PAYLOAD + 1);
        $bytes = Frame::encode(Frame::REQUEST, 1, self::server('/')) . $header;
        foreach ([[$bytes], str_split($bytes)] as $chunks) {
            $channel = Channel::fromStreams(ChunkedStream::open($chunks, true), null, self::MAX_PAYLOAD);
            try {
                $channel->receive();
                self::fail('no ProtocolError');
            } catch (ProtocolError $e) {
                self::assertSame(ProtocolError::TOO_LARGE, $e->getCode(), $e->getMessage());
            }
        }
    }

    public function testPayloadAtTheLimitIsAccepted(): void
    {
        [$worker, $peer] = $this->socketPair();
        $body = str_repeat('b', self::MAX_PAYLOAD);
        self::write($peer, Frame::encode(Frame::REQUEST, 5, 'x') . Frame::encode(Frame::BODY, 5, $body)
            . Frame::encode(Frame::END, 5, ''));
        $request = Channel::fromStreams($worker, null, self::MAX_PAYLOAD)->receive();
        self::assertInstanceOf(Request::class, $request);
        self::assertSame($body, $request->body);
    }

    public function testSendWritesToTheOutputStream(): void
    {
        [$in, $inPeer] = $this->socketPair();
        [$out, $outPeer] = $this->socketPair();
        $channel = Channel::fromStreams($in, $out);
        $bytes = Frame::encode(Frame::HEAD, 1, Frame::head(200, ['X-A: 1'])) . Frame::encode(Frame::END, 1, '');
        $channel->send($bytes);
        stream_set_blocking($outPeer, false);
        self::assertSame($bytes, fread($outPeer, 8192));
        stream_set_blocking($inPeer, false);
        self::assertSame('', fread($inPeer, 8192));
    }

    public function testSendDeliversEverythingToAReaderProcess(): void
    {
        [$worker, $peer] = $this->socketPair();
        $reader = proc_open(
            [PHP_BINARY, __DIR__ . '/fixtures/drain.php'],
            [0 => $peer, 1 => ['pipe', 'w'], 2 => ['pipe', 'w']],
            $pipes,
        );
        self::assertIsResource($reader);
        fclose($peer);
        // Far more than a socket buffer holds: the writer waits for the reader.
        $bytes = random_bytes(4 * 1048576 + 3);
        $channel = Channel::fromStreams($worker);
        $channel->send($bytes);
        $channel->send('');
        $channel->send('tail');
        stream_socket_shutdown($worker, STREAM_SHUT_WR);
        $report = stream_get_contents($pipes[1]);
        self::assertSame('', stream_get_contents($pipes[2]));
        fclose($pipes[1]);
        fclose($pipes[2]);
        self::assertSame(0, proc_close($reader));
        self::assertSame((strlen($bytes) + 4) . ' ' . sha1($bytes . 'tail'), $report);
    }

    /**
     * Runs tests/fixtures/channel_env.php with $stdin as its standard
     * input, as Hearth starts a worker.
     *
     * @param resource|array{0: string, 1: string} $stdin
     * @return array{0: resource, 1: array<int, resource>}
     */
    private static function worker($stdin): array
    {
        $env = getenv();
        $env['HEARTH_PROTOCOL'] = (string) Frame::VERSION;
        $process = proc_open(
            [PHP_BINARY, __DIR__ . '/fixtures/channel_env.php'],
            [0 => $stdin, 1 => ['pipe', 'w'], 2 => ['pipe', 'w']],
            $pipes,
            null,
            $env,
        );
        self::assertIsResource($process);
        return [$process, $pipes];
    }

    public function testAWorkerTalksToHearthOverTheSocketOnItsStandardInput(): void
    {
        [$worker, $hearth] = $this->socketPair();
        [$process, $pipes] = self::worker($worker);
        fclose($worker);
        self::write($hearth, Frame::encode(Frame::REQUEST, 9, 'x') . Frame::encode(Frame::BODY, 9, 'both ways')
            . Frame::encode(Frame::END, 9, ''));
        self::assertSame(Frame::encode(Frame::END, 9, 'both ways'), stream_get_contents($hearth));
        self::assertSame('', stream_get_contents($pipes[2]));
        fclose($pipes[1]);
        fclose($pipes[2]);
        self::assertSame(0, proc_close($process));
    }

    public function testAWorkerRefusesAStandardInputThatIsNotASocket(): void
    {
        // What a Hearth older than this library gave its workers: a pipe.
        [$process, $pipes] = self::worker(['pipe', 'r']);
        fclose($pipes[0]);
        $error = stream_get_contents($pipes[2]);
        fclose($pipes[1]);
        fclose($pipes[2]);
        self::assertSame(3, proc_close($process));
        self::assertStringContainsString('not a socket', $error);
    }

    public function testSendLoopsOverShortWrites(): void
    {
        $out = ShortWriteStream::open(5);
        $short = fwrite($out, 'abcdefgh');
        self::assertSame(5, $short, 'the stream does write short');
        $channel = Channel::fromStreams(ChunkedStream::open([]), $out);
        $bytes = Frame::encode(Frame::BODY, 7, str_repeat('0123456789', 10)) . Frame::encode(Frame::END, 7, '');
        $channel->send($bytes);
        self::assertSame('abcde' . $bytes, ShortWriteStream::written($out));
        self::assertSame(1 + (int) ceil(strlen($bytes) / 5), ShortWriteStream::writes($out));
    }

    public function testSendToAClosedPeerThrows(): void
    {
        [$worker, $peer] = $this->socketPair();
        fclose($peer);
        $this->expectException(\RuntimeException::class);
        Channel::fromStreams($worker)->send('bytes');
    }
}
