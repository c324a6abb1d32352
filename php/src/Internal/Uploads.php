<?php

declare(strict_types=1);

namespace Hearth\Internal;

/**
 * The uploads of the current request, for move_uploaded_file() and
 * is_uploaded_file().
 *
 * Under Hearth the worker is started with those two functions disabled so
 * that src/functions.php can define them over this registry: PHP's own
 * versions only know files that PHP itself received, and Hearth receives
 * uploads before a worker is involved.
 *
 * @internal
 */
final class Uploads
{
    /** @var array<string, true> */
    private static array $files = [];

    /** @param list<string> $paths */
    public static function accept(array $paths): void
    {
        self::$files = $paths === [] ? [] : array_fill_keys($paths, true);
    }

    public static function clear(): void
    {
        self::$files = [];
    }

    public static function isUploaded(string $path): bool
    {
        return isset(self::$files[$path]);
    }

    public static function move(string $from, string $to): bool
    {
        if (!isset(self::$files[$from])) {
            return false;
        }
        if (!@rename($from, $to)) {
            if (!@copy($from, $to)) {
                $error = error_get_last();
                trigger_error(
                    sprintf(
                        'move_uploaded_file(): Unable to move "%s" to "%s"%s',
                        $from,
                        $to,
                        $error ? ': ' . $error['message'] : '',
                    ),
                    E_USER_WARNING,
                );
                return false;
            }
            @unlink($from);
        }
        unset(self::$files[$from]);
        @chmod($to, 0666 & ~umask());
        return true;
    }
}
