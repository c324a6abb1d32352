<?php

declare(strict_types=1);

namespace Hearth\Tests\Support;

/**
 * A read-only stream that hands out preset chunks, one per read, then
 * reports end of stream: short reads at exactly the places a test picks.
 * Opened "endless", it never ends: a read past the chunks throws instead,
 * for tests that must prove nothing more was read.
 *
 *     $stream = ChunkedStream::open(['ab', 'c']);   // reads give "ab", "c", then EOF
 */
final class ChunkedStream
{
    private const SCHEME = 'hearth-test-chunks';

    /** @var array<int, array{0: list<string>, 1: bool}> */
    private static array $pending = [];
    private static int $next = 0;

    /** @var resource|null */
    public $context;

    /** @var list<string> */
    private array $chunks = [];
    private bool $endless = false;

    /**
     * @param list<string> $chunks
     * @return resource
     */
    public static function open(array $chunks, bool $endless = false)
    {
        if (!in_array(self::SCHEME, stream_get_wrappers(), true)) {
            stream_wrapper_register(self::SCHEME, self::class);
        }
        $id = ++self::$next;
        self::$pending[$id] = [array_values(array_filter($chunks, static fn (string $c): bool => $c !== '')), $endless];
        $stream = fopen(self::SCHEME . '://' . $id, 'r');
        if ($stream === false) {
            throw new \RuntimeException('cannot open a chunked stream');
        }
        return $stream;
    }

    // phpcs:disable PSR1.Methods.CamelCapsMethodName.NotCamelCaps -- names fixed by PHP's stream wrapper protocol

    public function stream_open(string $path, string $mode, int $options, ?string &$openedPath): bool
    {
        $id = (int) substr($path, strlen(self::SCHEME) + 3);
        if (!isset(self::$pending[$id])) {
            return false;
        }
        [$this->chunks, $this->endless] = self::$pending[$id];
        unset(self::$pending[$id]);
        return true;
    }

    public function stream_read(int $count): string
    {
        if ($this->chunks === [] && $this->endless) {
            throw new \LogicException('read past the bytes the test provided');
        }
        $chunk = array_shift($this->chunks) ?? '';
        if (strlen($chunk) > $count) {
            array_unshift($this->chunks, substr($chunk, $count));
            $chunk = substr($chunk, 0, $count);
        }
        return $chunk;
    }

    public function stream_eof(): bool
    {
        return $this->chunks === [] && !$this->endless;
    }

    public function stream_set_option(int $option, int $arg1, ?int $arg2): bool
    {
        return false;
    }
}
