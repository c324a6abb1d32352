<?php

declare(strict_types=1);

namespace Hearth\Internal;

/**
 * The worker's end of its channel to Hearth: a Unix stream socket on
 * standard input, both ways (any SAPI can open php://stdin; only the CLI
 * can open other descriptors by number).
 *
 * Plain PHP streams wait with poll() before each recv(), on purpose: a
 * worker blocked in recv() itself (ext/sockets) is also woken each time
 * Hearth reads a response, because that frees space on the worker's side
 * of the socket; poll() waits for input only. Short reads and writes are
 * normal and handled here.
 *
 * @internal
 */
final class Channel
{
    private const READ_SIZE = 65536;

    /** What Hearth tells a worker about its channel (docs/protocol.md). */
    private const ENVIRONMENT = ['HEARTH_PROTOCOL', 'HEARTH_MAX_PAYLOAD', 'HEARTH_CHECK_STATE', 'HEARTH_REPORT'];

    /** @var resource */
    private $in;
    /** @var resource */
    private $out;
    private string $buffer = '';

    /**
     * @param resource $in  stream to read requests from
     * @param resource $out stream to write responses to (may be $in)
     */
    private function __construct($in, $out, public readonly int $maxPayload, private readonly bool $socket = false)
    {
        foreach ([$in, $out] as $stream) {
            stream_set_read_buffer($stream, 0);
            stream_set_write_buffer($stream, 0);
            stream_set_blocking($stream, true);
            // An idle worker waits for its next request as long as it takes
            // (on a socket, default_socket_timeout would end the wait).
            @stream_set_timeout($stream, 31536000);
        }
        $this->in = $in;
        $this->out = $out;
    }

    /**
     * Opens the channel Hearth set up for this process, with the payload
     * limit Hearth gave (HEARTH_MAX_PAYLOAD): at most 64 MiB, the
     * protocol's hard cap, and 16 MiB when it gave none.
     *
     * @throws \RuntimeException when standard input is not a socket: not
     *         started by Hearth, or by a Hearth older than this library
     *         (which gave its workers a pipe and a FIFO)
     */
    public static function fromEnvironment(): self
    {
        $maxPayload = (int) getenv('HEARTH_MAX_PAYLOAD');
        $maxPayload = $maxPayload > 0 ? min($maxPayload, 67108864) : 16777216;
        $stream = @fopen('php://stdin', 'r+');
        if ($stream === false) {
            throw new \RuntimeException('cannot open the Hearth channel on standard input');
        }
        $mode = fstat($stream)['mode'] ?? 0;
        if (($mode & 0170000) !== 0140000) {
            throw new \RuntimeException(
                'the Hearth channel is not on standard input, which is not a socket: '
                . 'run this worker with the hearth binary this PHP library came with'
            );
        }
        return new self($stream, $stream, $maxPayload, true);
    }

    /**
     * Removes the variables Hearth set for the library, and the
     * SCRIPT_FILENAME it set for the worker script's boot (each request has
     * its own): the app has no use for them.
     */
    public static function hideEnvironment(): void
    {
        foreach (self::ENVIRONMENT as $name) {
            putenv($name);
        }
        putenv('SCRIPT_FILENAME');
    }

    /**
     * For tests: a channel over a connected stream socket, or over a pair
     * of streams (one to read, one to write).
     *
     * @param resource      $in
     * @param resource|null $out
     */
    public static function fromStreams($in, $out = null, int $maxPayload = 16777216): self
    {
        return new self($in, $out ?? $in, $maxPayload);
    }

    /**
     * Blocks until the next request has arrived whole: its REQUEST frame,
     * any BODY, BODY_FILE or FORM frames, and the END frame that closes
     * them; or a job's CALL frame, which comes alone.
     *
     * Returns null when Hearth asks the worker to stop or has gone away.
     *
     * @throws ProtocolError when the bytes are not this protocol
     */
    public function receive(): ?Request
    {
        $id = -1;
        $server = '';
        $body = '';
        $form = null;
        $formFlags = 0;
        $bodyFile = null;
        $buffer = $this->buffer;
        $at = 0;
        while (true) {
            $available = strlen($buffer);
            while ($available - $at >= Frame::HEADER_LEN) {
                $h = unpack('Cv/Ck/nf/Ni/Nl', $buffer, $at);
                if ($h['v'] !== Frame::VERSION) {
                    throw ProtocolError::version($h['v']);
                }
                $len = $h['l'];
                if ($len > $this->maxPayload) {
                    throw ProtocolError::tooLarge($len, $this->maxPayload);
                }
                if ($available - $at - Frame::HEADER_LEN < $len) {
                    break;
                }
                $payload = $len === 0 ? '' : substr($buffer, $at + Frame::HEADER_LEN, $len);
                $at += Frame::HEADER_LEN + $len;
                switch ($h['k']) {
                    case Frame::REQUEST:
                        if ($id !== -1) {
                            throw ProtocolError::unexpected(Frame::REQUEST, 'before the previous request ended');
                        }
                        $id = $h['i'];
                        $server = $payload;
                        break;
                    case Frame::BODY:
                        $body .= $payload;
                        break;
                    case Frame::FORM:
                        $form = ($form ?? '') . $payload;
                        $formFlags |= $h['f'];
                        break;
                    case Frame::BODY_FILE:
                        $bodyFile = $payload;
                        break;
                    case Frame::END:
                        if ($id === -1) {
                            throw ProtocolError::unexpected(Frame::END, 'without a request');
                        }
                        $this->buffer = $at === $available ? '' : substr($buffer, $at);
                        return new Request($id, $server, $body, $form, false, $bodyFile, $formFlags);
                    case Frame::CALL:
                        if ($id !== -1) {
                            throw ProtocolError::unexpected(Frame::CALL, 'before the previous request ended');
                        }
                        $this->buffer = $at === $available ? '' : substr($buffer, $at);
                        return new Request($h['i'], $payload, '', null, true);
                    case Frame::STOP:
                        $this->buffer = '';
                        return null;
                    default:
                        throw isset(Frame::KIND_NAMES[$h['k']])
                            ? ProtocolError::unexpected($h['k'], 'sent to a worker')
                            : ProtocolError::unknownKind($h['k']);
                }
            }
            if ($at > 0) {
                $buffer = $at === $available ? '' : substr($buffer, $at);
                $at = 0;
            }
            $chunk = $this->read();
            if ($chunk === null) {
                $this->buffer = '';
                return null;
            }
            $buffer .= $chunk;
        }
    }

    /**
     * Writes all of $bytes, however many writes it takes.
     *
     * @throws \RuntimeException when Hearth has gone away
     */
    public function send(string $bytes): void
    {
        $length = strlen($bytes);
        $done = 0;
        while ($done < $length) {
            $n = @fwrite($this->out, $done === 0 ? $bytes : substr($bytes, $done));
            if ($n === false || $n === 0) {
                throw new \RuntimeException('writing to Hearth failed: the channel is closed');
            }
            $done += $n;
        }
    }

    /** One read; null at end of stream. */
    private function read(): ?string
    {
        if ($this->socket) {
            // One recvfrom() that waits for the next request, where fread()
            // on a socket stream polls first: a system call less per
            // request. An empty string is Hearth's end of the channel,
            // false an error: fread() below tells them apart.
            $data = @stream_socket_recvfrom($this->in, self::READ_SIZE);
            if (is_string($data) && $data !== '') {
                return $data;
            }
        }
        while (true) {
            $data = @fread($this->in, self::READ_SIZE);
            if ($data !== false && $data !== '') {
                return $data;
            }
            if (stream_get_meta_data($this->in)['timed_out'] ?? false) {
                continue;
            }
            if ($data === false || feof($this->in)) {
                return null;
            }
        }
    }
}
