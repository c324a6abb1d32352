<?php

declare(strict_types=1);

namespace Hearth\Internal;

/**
 * Lines for Hearth's log, which is where a worker's standard error goes:
 * "hearth: " and the message, its further lines indented.
 *
 * @internal
 */
final class Log
{
    public static function write(string $message): void
    {
        static $stderr = null;
        $stderr ??= fopen('php://stderr', 'w');
        if ($stderr !== false) {
            fwrite($stderr, 'hearth: ' . str_replace("\n", "\n  ", $message) . "\n");
        }
    }

    /**
     * Empties the startup buffer (Hearth starts PHP with output_buffering=1)
     * into the log: what the app printed while booting belongs there.
     */
    public static function startupOutput(string $prefix): void
    {
        $stray = '';
        while (ob_get_level() > 0) {
            $status = ob_get_status();
            if (($status['flags'] ?? 0) & PHP_OUTPUT_HANDLER_REMOVABLE) {
                $stray .= (string) ob_get_clean();
            } else {
                break;
            }
        }
        if ($stray !== '') {
            self::write($prefix . rtrim($stray));
        }
    }
}
