<?php

declare(strict_types=1);

namespace Hearth\Internal;

/**
 * Makes php://input return the request body inside a worker.
 *
 * PHP fills php://input from the SAPI at request startup, which a worker
 * never goes through again, and userland cannot feed the built-in wrapper.
 * So for requests that have a body this class takes over the "php" scheme:
 * php://input reads the body (re-readable, seekable, as in PHP 8); every
 * other php:// URL (temp, memory, output, stderr, filter...) is opened with
 * the built-in wrapper and proxied. Requests without a body keep the
 * built-in wrapper untouched, whose php://input is then empty as it should be.
 *
 * @internal
 */
final class InputStream
{
    private static string $body = '';
    private static bool $installed = false;

    /** @var resource|null */
    public $context;

    /** @var resource|null */
    private $inner = null;
    private int $position = 0;

    public static function install(string $body): void
    {
        self::$body = $body;
        if (!self::$installed) {
            stream_wrapper_unregister('php');
            stream_wrapper_register('php', self::class);
            self::$installed = true;
        }
    }

    public static function uninstall(): void
    {
        self::$body = '';
        if (self::$installed) {
            stream_wrapper_restore('php');
            self::$installed = false;
        }
    }

    public static function isInstalled(): bool
    {
        return self::$installed;
    }

    public function stream_open(string $path, string $mode, int $options, ?string &$openedPath): bool
    {
        if (strcasecmp(rtrim(substr($path, 6), '/'), 'input') === 0) {
            $this->position = 0;
            return true;
        }
        stream_wrapper_restore('php');
        try {
            $inner = $this->context !== null
                ? @fopen($path, $mode, (bool) ($options & STREAM_USE_PATH), $this->context)
                : @fopen($path, $mode, (bool) ($options & STREAM_USE_PATH));
        } finally {
            stream_wrapper_unregister('php');
            stream_wrapper_register('php', self::class);
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
        $chunk = (string) substr(self::$body, $this->position, $count);
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
        return $this->position >= strlen(self::$body);
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
        $length = strlen(self::$body);
        $target = match ($whence) {
            SEEK_SET => $offset,
            SEEK_CUR => $this->position + $offset,
            SEEK_END => $length + $offset,
            default => -1,
        };
        if ($target < 0) {
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
        return ['size' => strlen(self::$body), 'mode' => 0100444];
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
}
