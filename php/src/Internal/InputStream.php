<?php

declare(strict_types=1);

namespace Hearth\Internal;

/**
 * Makes php://input return the request body inside a worker.
 *
 * PHP fills php://input from the SAPI at request startup, which a worker
 * never goes through again, and userland cannot feed the built-in wrapper.
 * So for requests that have a body this class takes over the "php" scheme:
 * php://input reads the body (re-readable, seekable within the body, as
 * in PHP 8; fstat() gives its size). A small body came in memory; a large
 * one is in a file Hearth spooled it to, which is opened once when the
 * request begins (so it stays readable after Hearth removes it, once the
 * response has gone) and read lazily, piece by piece, by every
 * php://input stream at its own position. php://filter over a php:// resource
 * applies its filters here, so that ".../resource=php://input" reads the
 * body too; every other php:// URL (temp, memory, output, stderr...) is
 * opened with the built-in wrapper and proxied. Requests without a body
 * keep the built-in wrapper untouched, whose php://input is then empty as
 * it should be.
 *
 * Streams opened through a user wrapper are not quite the built-in ones:
 * stream_get_meta_data() says "user-space" and gives the mode as the
 * caller wrote it, so nyholm/psr7 takes a php://temp opened "rw+" for
 * read-only. PSR-7 workers read the body from the request's stream, not
 * from php://input, so Psr7Worker leaves the scheme alone
 * (leaveBuiltInWrapper()) and builds that stream from body().
 *
 * @internal
 */
final class InputStream
{
    private static string $body = '';
    /** @var resource|null the file holding the body, when it is not in $body */
    private static $file = null;
    /** Where reading $file left its position, to seek only when another stream read in between. */
    private static int $filePosition = 0;
    private static int $size = 0;
    private static bool $installed = false;
    /** Whether install() takes over the "php" scheme (not for PSR-7 workers). */
    private static bool $takeOver = true;

    /** @var resource|null */
    public $context;

    /** @var resource|null */
    private $inner = null;
    private int $position = 0;

    /**
     * Makes php://input read $body, or the file at $file when given.
     */
    public static function install(string $body, ?string $file = null): void
    {
        self::$body = $body;
        self::$size = strlen($body);
        if ($file !== null) {
            $handle = @fopen($file, 'rb');
            if ($handle === false) {
                // Removed before this request began: its client went away
                // while it waited behind another request.
                $error = error_get_last()['message'] ?? 'unknown error';
                error_clear_last();
                Log::write("cannot open the request body file {$file}, php://input is empty: {$error}");
            } else {
                self::$file = $handle;
                self::$filePosition = 0;
                self::$size = (int) (fstat($handle)['size'] ?? 0);
            }
        }
        if (self::$takeOver && !self::$installed) {
            stream_wrapper_unregister('php');
            stream_wrapper_register('php', self::class);
            self::$installed = true;
        }
    }

    /**
     * From now on, requests leave the built-in "php" wrapper in place:
     * php://input is empty and the body is read from body().
     */
    public static function leaveBuiltInWrapper(): void
    {
        self::uninstall();
        self::$takeOver = false;
    }

    /**
     * The body of the current request as a built-in stream at its start: the
     * spooled file itself, or a php://temp holding the body. Null without a
     * body. Valid until the request ends.
     *
     * @return resource|null
     */
    public static function body()
    {
        if (self::$file !== null) {
            rewind(self::$file);
            self::$filePosition = 0;
            return self::$file;
        }
        if (self::$body === '') {
            return null;
        }
        $stream = fopen('php://temp', 'w+b');
        if ($stream === false) {
            return null;
        }
        fwrite($stream, self::$body);
        rewind($stream);
        return $stream;
    }

    /** The whole body, for parsing a form (which PHP too reads whole). */
    public static function contents(): string
    {
        if (self::$file === null) {
            return self::$body;
        }
        rewind(self::$file);
        $contents = (string) stream_get_contents(self::$file);
        self::$filePosition = strlen($contents);
        return $contents;
    }

    public static function uninstall(): void
    {
        self::$body = '';
        self::$size = 0;
        if (self::$file !== null) {
            fclose(self::$file);
            self::$file = null;
        }
        if (self::$installed) {
            stream_wrapper_restore('php');
            self::$installed = false;
        }
    }

    /**
     * Whether bodies Hearth spools to files in $dir can be read here
     * (open_basedir may forbid the directory). Reported at the handshake:
     * Hearth sends bodies in memory to workers that cannot.
     */
    public static function canRead(string $dir): bool
    {
        return @is_dir($dir) && @is_readable($dir);
    }

    public static function isInstalled(): bool
    {
        return self::$installed;
    }

    // phpcs:disable PSR1.Methods.CamelCapsMethodName.NotCamelCaps -- names fixed by PHP's stream wrapper protocol

    public function stream_open(string $path, string $mode, int $options, ?string &$openedPath): bool
    {
        $target = substr($path, 6);
        if (strcasecmp(rtrim($target, '/'), 'input') === 0) {
            $this->position = 0;
            return true;
        }
        $filtered = self::filteredPhpStream($target);
        if ($filtered !== null) {
            $inner = $this->openFiltered($filtered[0], $filtered[1], $mode, $options);
        } else {
            stream_wrapper_restore('php');
            try {
                $inner = $this->open($path, $mode, $options);
            } finally {
                stream_wrapper_unregister('php');
                stream_wrapper_register('php', self::class);
            }
        }
        if ($inner === false) {
            if ($options & STREAM_REPORT_ERRORS) {
                trigger_error(sprintf('fopen(%s): Failed to open stream', $path), E_USER_WARNING);
            }
            return false;
        }
        $this->inner = $inner;
        return true;
    }

    public function stream_read(int $count): string|false
    {
        if ($this->inner !== null) {
            return fread($this->inner, $count);
        }
        if (self::$file === null) {
            $chunk = (string) substr(self::$body, $this->position, $count);
        } elseif ($this->position >= self::$size || $count <= 0) {
            $chunk = '';
        } else {
            if (self::$filePosition !== $this->position) {
                fseek(self::$file, $this->position);
            }
            $chunk = (string) fread(self::$file, min($count, self::$size - $this->position));
            self::$filePosition = $this->position + strlen($chunk);
        }
        $this->position += strlen($chunk);
        return $chunk;
    }

    public function stream_write(string $data): int
    {
        if ($this->inner !== null) {
            return (int) fwrite($this->inner, $data);
        }
        return 0;
    }

    public function stream_eof(): bool
    {
        if ($this->inner !== null) {
            return feof($this->inner);
        }
        return $this->position >= self::$size;
    }

    public function stream_tell(): int
    {
        if ($this->inner !== null) {
            return (int) ftell($this->inner);
        }
        return $this->position;
    }

    public function stream_seek(int $offset, int $whence): bool
    {
        if ($this->inner !== null) {
            return fseek($this->inner, $offset, $whence) === 0;
        }
        $length = self::$size;
        $target = match ($whence) {
            SEEK_SET => $offset,
            SEEK_CUR => $this->position + $offset,
            SEEK_END => $length + $offset,
            default => null,
        };
        // PHP's own php://input refuses positions outside the body.
        if ($target === null || $target < 0 || $target > $length) {
            return false;
        }
        $this->position = $target;
        return true;
    }

    public function stream_flush(): bool
    {
        return $this->inner !== null ? fflush($this->inner) : true;
    }

    public function stream_truncate(int $size): bool
    {
        return $this->inner !== null && ftruncate($this->inner, $size);
    }

    public function stream_lock(int $operation): bool
    {
        return $this->inner !== null && flock($this->inner, $operation);
    }

    /** @return array<int|string, int>|false */
    public function stream_stat(): array|false
    {
        if ($this->inner !== null) {
            return fstat($this->inner);
        }
        return ['size' => self::$size, 'mode' => 0100444];
    }

    public function stream_set_option(int $option, int $arg1, ?int $arg2): bool
    {
        if ($this->inner === null) {
            return false;
        }
        return match ($option) {
            STREAM_OPTION_BLOCKING => stream_set_blocking($this->inner, (bool) $arg1),
            STREAM_OPTION_READ_TIMEOUT => stream_set_timeout($this->inner, $arg1, (int) $arg2),
            STREAM_OPTION_WRITE_BUFFER => stream_set_write_buffer($this->inner, (int) $arg2) === 0,
            STREAM_OPTION_READ_BUFFER => stream_set_read_buffer($this->inner, (int) $arg2) === 0,
            default => false,
        };
    }

    /** @return resource|false */
    public function stream_cast(int $castAs)
    {
        return $this->inner ?? false;
    }

    public function stream_close(): void
    {
        if ($this->inner !== null) {
            fclose($this->inner);
            $this->inner = null;
        }
    }

    // phpcs:enable

    /**
     * For php://filter/<chains>/resource=php://...: the chains and the
     * resource. The built-in filter wrapper would open that resource with
     * the built-in "php" wrapper, whose php://input is empty in a worker.
     *
     * @return array{0: string, 1: string}|null
     */
    private static function filteredPhpStream(string $target): ?array
    {
        if (strncasecmp($target, 'filter/', 7) !== 0) {
            return null;
        }
        $spec = substr($target, 6);
        $at = strpos($spec, '/resource=');
        if ($at === false || strncasecmp(substr($spec, $at + 10), 'php:', 4) !== 0) {
            return null;
        }
        return [substr($spec, 0, $at), substr($spec, $at + 10)];
    }

    /**
     * Opens $resource through this class and appends the filters of
     * $chains as ext/standard/php_fopen_wrapper.c does: "/"-separated
     * chains, each "read=a|b", "write=a|b" or "a|b" (for the directions
     * $mode opens), each filter name URL-decoded.
     *
     * @return resource|false
     */
    private function openFiltered(string $chains, string $resource, string $mode, int $options)
    {
        $inner = $this->open($resource, $mode, $options);
        if ($inner === false) {
            return false;
        }
        $both = (strpbrk($mode, 'r+') !== false ? STREAM_FILTER_READ : 0)
            | (strpbrk($mode, 'wa+') !== false ? STREAM_FILTER_WRITE : 0);
        foreach (explode('/', $chains) as $chain) {
            [$chain, $direction] = match (true) {
                strncasecmp($chain, 'read=', 5) === 0 => [substr($chain, 5), STREAM_FILTER_READ],
                strncasecmp($chain, 'write=', 6) === 0 => [substr($chain, 6), STREAM_FILTER_WRITE],
                default => [$chain, $both],
            };
            foreach (explode('|', $chain) as $filter) {
                if ($filter === '' || $direction === 0) {
                    continue;
                }
                $filter = urldecode($filter);
                if (@stream_filter_append($inner, $filter, $direction) === false) {
                    trigger_error(sprintf('Unable to create filter (%s)', $filter), E_USER_WARNING);
                }
            }
        }
        return $inner;
    }

    /** @return resource|false */
    private function open(string $path, string $mode, int $options)
    {
        return $this->context !== null
            ? @fopen($path, $mode, (bool) ($options & STREAM_USE_PATH), $this->context)
            : @fopen($path, $mode, (bool) ($options & STREAM_USE_PATH));
    }
}
