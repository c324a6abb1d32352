<?php

declare(strict_types=1);

namespace Hearth\Tests\Support;

/**
 * A write-only stream on which fwrite() comes back short: each fwrite()
 * stores at most a few bytes and then reports that nothing more fits, as
 * a socket with a send timeout does. Whoever writes must loop.
 *
 *     $stream = ShortWriteStream::open(3);
 *     fwrite($stream, 'abcdef');             // 3
 *     ShortWriteStream::written($stream);    // "abc"
 */
final class ShortWriteStream
{
    private const SCHEME = 'hearth-test-short-writes';

    /** @var array<int, array{perWrite: int, bytes: string, writes: int}> */
    private static array $streams = [];
    private static int $next = 0;

    /** @var resource|null */
    public $context;

    private int $id = 0;
    private bool $full = false;

    /** @return resource */
    public static function open(int $perWrite)
    {
        if (!in_array(self::SCHEME, stream_get_wrappers(), true)) {
            stream_wrapper_register(self::SCHEME, self::class);
        }
        $id = ++self::$next;
        self::$streams[$id] = ['perWrite' => $perWrite, 'bytes' => '', 'writes' => 0];
        $stream = fopen(self::SCHEME . '://' . $id, 'w');
        if ($stream === false) {
            throw new \RuntimeException('cannot open a short-write stream');
        }
        return $stream;
    }

    /** @param resource $stream */
    public static function written($stream): string
    {
        return self::$streams[self::id($stream)]['bytes'];
    }

    /**
     * How many fwrite() calls the stream saw.
     *
     * @param resource $stream
     */
    public static function writes($stream): int
    {
        return self::$streams[self::id($stream)]['writes'];
    }

    /** @param resource $stream */
    private static function id($stream): int
    {
        return (int) substr(stream_get_meta_data($stream)['uri'], strlen(self::SCHEME) + 3);
    }

    // phpcs:disable PSR1.Methods.CamelCapsMethodName.NotCamelCaps -- names fixed by PHP's stream wrapper protocol

    public function stream_open(string $path, string $mode, int $options, ?string &$openedPath): bool
    {
        $this->id = (int) substr($path, strlen(self::SCHEME) + 3);
        return isset(self::$streams[$this->id]);
    }

    public function stream_write(string $data): int
    {
        // PHP calls this again for what is left until it returns 0; then
        // fwrite() returns what was stored so far.
        if ($this->full) {
            $this->full = false;
            return 0;
        }
        $this->full = true;
        $stored = substr($data, 0, self::$streams[$this->id]['perWrite']);
        self::$streams[$this->id]['bytes'] .= $stored;
        self::$streams[$this->id]['writes']++;
        return strlen($stored);
    }

    public function stream_eof(): bool
    {
        return false;
    }

    public function stream_set_option(int $option, int $arg1, ?int $arg2): bool
    {
        return false;
    }
}
