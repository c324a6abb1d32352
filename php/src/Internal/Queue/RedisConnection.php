<?php

declare(strict_types=1);

namespace Hearth\Internal\Queue;

use Hearth\QueueError;

/**
 * One connection to Redis, speaking RESP2 over a TCP stream (written by
 * hand: the library must run on a stock PHP, without phpredis or a
 * Composer package). Commands go out as a pipeline, so a batch, or AUTH
 * and SELECT with the first command, is one round trip.
 *
 * The socket is non-blocking and every wait is a stream_select() bounded
 * by $timeout: the longest Redis may take to accept the next bytes or
 * send the next ones. A connection that failed or timed out in the middle
 * of a pipeline is closed (a late reply must never be read as the answer
 * to the next command); one Redis closed while it sat idle (a restart,
 * Redis's `timeout`) is opened again before the next pipeline.
 *
 * Replies are bounded: a line of at most 64 KiB, a bulk string of at most
 * 1 MiB, an array of at most 65,536 elements, 4 levels deep; anything
 * larger is not a reply to the commands this class sends.
 *
 * @internal
 */
final class RedisConnection
{
    private const MAX_LINE = 65536;
    private const MAX_BULK = 1 << 20;
    private const MAX_ARRAY = 65536;
    private const MAX_DEPTH = 4;
    private const READ_CHUNK = 65536;

    /** @var resource|null */
    private $socket = null;
    private string $buffer = '';

    public function __construct(
        private readonly QueueUrl $url,
        private readonly float $connectTimeout,
        private readonly float $timeout,
    ) {
    }

    /**
     * Sends $commands in one write and returns their replies in order: a
     * string, an int, null, a list of those, or a RedisErrorReply.
     *
     * @param list<list<string|int>> $commands
     * @return list<mixed>
     * @throws QueueError (UNAVAILABLE) when Redis cannot be reached or does not answer in time;
     *                    (ENGINE) when it refuses AUTH or SELECT, or answers with something else than RESP
     */
    public function pipeline(array $commands): array
    {
        $handshake = $this->socket === null || $this->closedByPeer() ? $this->connect() : [];
        $out = '';
        foreach (array_merge($handshake, $commands) as $command) {
            $out .= self::encode($command);
        }
        try {
            $this->write($out);
            unset($out);
            foreach ($handshake as $command) {
                $reply = $this->readReply(0);
                if ($reply instanceof RedisErrorReply) {
                    throw new QueueError(
                        $reply->isTransient() ? QueueError::UNAVAILABLE : QueueError::ENGINE,
                        "{$this->url}: {$command[0]} refused: " . $this->hide($reply->message),
                    );
                }
            }
            $replies = [];
            foreach ($commands as $_) {
                $replies[] = $this->readReply(0);
            }
            return $replies;
        } catch (\Throwable $e) {
            $this->close();
            throw $e;
        }
    }

    public function close(): void
    {
        if ($this->socket !== null) {
            fclose($this->socket);
            $this->socket = null;
        }
        $this->buffer = '';
    }

    /** @return array<string, string> */
    public function __debugInfo(): array
    {
        return ['url' => (string) $this->url, 'connected' => $this->socket !== null ? 'yes' : 'no'];
    }

    /**
     * Opens the socket; returns the commands that must come first on it
     * (AUTH, SELECT).
     *
     * @return list<list<string>>
     */
    private function connect(): array
    {
        $this->close();
        $host = str_contains($this->url->host, ':') ? "[{$this->url->host}]" : $this->url->host;
        $context = stream_context_create(['socket' => ['tcp_nodelay' => true]]);
        $errno = 0;
        $errstr = '';
        $socket = @stream_socket_client(
            "tcp://{$host}:{$this->url->port}",
            $errno,
            $errstr,
            $this->connectTimeout,
            STREAM_CLIENT_CONNECT,
            $context,
        );
        if ($socket === false) {
            $why = $errstr !== '' ? $errstr : (error_get_last()['message'] ?? 'unknown error');
            throw new QueueError(QueueError::UNAVAILABLE, "{$this->url}: cannot connect: {$why}");
        }
        stream_set_blocking($socket, false);
        stream_set_read_buffer($socket, 0);
        $this->socket = $socket;
        $handshake = [];
        $password = $this->url->password();
        if ($password !== null) {
            $handshake[] = $this->url->user !== null
                ? ['AUTH', $this->url->user, $password]
                : ['AUTH', $password];
        }
        if ($this->url->db !== 0) {
            $handshake[] = ['SELECT', (string) $this->url->db];
        }
        return $handshake;
    }

    /**
     * Whether Redis closed the idle connection: a socket with nothing
     * asked of it that reads as ready has hit its end (or holds bytes
     * nobody asked for); either way it is not to be used again.
     */
    private function closedByPeer(): bool
    {
        if ($this->socket === null || feof($this->socket)) {
            return true;
        }
        $read = [$this->socket];
        $none = null;
        return @stream_select($read, $none, $none, 0) !== 0;
    }

    /** @param list<string|int> $command */
    private static function encode(#[\SensitiveParameter] array $command): string
    {
        $out = '*' . count($command) . "\r\n";
        foreach ($command as $arg) {
            $arg = (string) $arg;
            $out .= '$' . strlen($arg) . "\r\n" . $arg . "\r\n";
        }
        return $out;
    }

    private function write(#[\SensitiveParameter] string $bytes): void
    {
        $socket = $this->socket;
        assert($socket !== null);
        $offset = 0;
        $length = strlen($bytes);
        while ($offset < $length) {
            $written = @fwrite($socket, $offset === 0 ? $bytes : substr($bytes, $offset));
            if ($written === false) {
                throw $this->lost('cannot send');
            }
            $offset += $written;
            if ($offset < $length && $written === 0) {
                $this->wait(false, 'send');
            }
        }
    }

    private function readReply(int $depth): mixed
    {
        $line = $this->readLine();
        $type = $line[0] ?? '';
        $rest = substr($line, 1);
        switch ($type) {
            case '+':
                return $rest;
            case '-':
                return new RedisErrorReply($rest);
            case ':':
                return $this->number($rest);
            case '$':
                $length = $this->number($rest);
                if ($length < 0) {
                    return null;
                }
                if ($length > self::MAX_BULK) {
                    throw $this->protocol("a bulk string of {$length} bytes (at most " . self::MAX_BULK . ')');
                }
                $this->fill($length + 2);
                if (substr($this->buffer, $length, 2) !== "\r\n") {
                    throw $this->protocol('a bulk string without its CRLF');
                }
                $value = substr($this->buffer, 0, $length);
                $this->buffer = substr($this->buffer, $length + 2);
                return $value;
            case '*':
                $count = $this->number($rest);
                if ($count < 0) {
                    return null;
                }
                if ($count > self::MAX_ARRAY || $depth >= self::MAX_DEPTH) {
                    throw $this->protocol("an array of {$count} elements at depth {$depth}");
                }
                $items = [];
                for ($i = 0; $i < $count; $i++) {
                    $items[] = $this->readReply($depth + 1);
                }
                return $items;
            default:
                throw $this->protocol('not a RESP reply: ' . json_encode(
                    substr($line, 0, 40),
                    JSON_INVALID_UTF8_SUBSTITUTE | JSON_UNESCAPED_SLASHES,
                ));
        }
    }

    private function number(string $text): int
    {
        if (preg_match('/\A-?[0-9]{1,19}\z/', $text) !== 1) {
            throw $this->protocol('a number that is not one: ' . substr($text, 0, 40));
        }
        return (int) $text;
    }

    private function readLine(): string
    {
        while (true) {
            $end = strpos($this->buffer, "\r\n");
            if ($end !== false) {
                $line = substr($this->buffer, 0, $end);
                $this->buffer = substr($this->buffer, $end + 2);
                return $line;
            }
            if (strlen($this->buffer) > self::MAX_LINE) {
                throw $this->protocol('a line longer than ' . self::MAX_LINE . ' bytes');
            }
            $this->receive();
        }
    }

    private function fill(int $bytes): void
    {
        while (strlen($this->buffer) < $bytes) {
            $this->receive();
        }
    }

    /** Appends what the socket has to the buffer, waiting for it up to the timeout. */
    private function receive(): void
    {
        $socket = $this->socket;
        assert($socket !== null);
        while (true) {
            $chunk = @fread($socket, self::READ_CHUNK);
            if ($chunk === false) {
                throw $this->lost('cannot read');
            }
            if ($chunk !== '') {
                $this->buffer .= $chunk;
                return;
            }
            if (feof($socket)) {
                throw $this->lost('Redis closed the connection');
            }
            $this->wait(true, 'reply');
        }
    }

    private function wait(bool $read, string $what): void
    {
        $socket = $this->socket;
        assert($socket !== null);
        $r = $read ? [$socket] : null;
        $w = $read ? null : [$socket];
        $e = null;
        $seconds = (int) floor($this->timeout);
        $micro = (int) (($this->timeout - $seconds) * 1e6);
        $ready = @stream_select($r, $w, $e, $seconds, $micro);
        if ($ready === false) {
            throw $this->lost("waiting to {$what} failed");
        }
        if ($ready === 0) {
            $verb = $read ? 'no reply' : 'Redis took nothing';
            throw new QueueError(
                QueueError::UNAVAILABLE,
                "{$this->url}: {$verb} within {$this->timeout} s; the connection is closed",
            );
        }
    }

    private function lost(string $why): QueueError
    {
        return new QueueError(QueueError::UNAVAILABLE, "{$this->url}: {$why}: connection lost");
    }

    private function protocol(string $why): QueueError
    {
        return new QueueError(QueueError::ENGINE, "{$this->url}: not a Redis server? it sent {$why}");
    }

    /** $message with the password hidden, should Redis ever echo it. */
    private function hide(string $message): string
    {
        $password = $this->url->password();
        return $password === null || $password === '' ? $message : str_replace($password, '***', $message);
    }
}
