<?php

/**
 * Functions Hearth provides inside its workers.
 *
 * Hearth starts workers with move_uploaded_file() and is_uploaded_file()
 * disabled, because PHP's versions only accept files that PHP received
 * itself; these replacements accept the uploads Hearth received for the
 * current request. fastcgi_finish_request() exists so that apps (Symfony,
 * Laravel) that call it to send the response early keep doing so. Outside
 * Hearth nothing here is defined and PHP's own functions are used.
 */

declare(strict_types=1);

if (getenv('HEARTH_PROTOCOL') !== false) {
    if (!function_exists('move_uploaded_file')) {
        function move_uploaded_file(string $from, string $to): bool
        {
            return \Hearth\Internal\Uploads::move($from, $to);
        }
    }

    if (!function_exists('is_uploaded_file')) {
        function is_uploaded_file(string $filename): bool
        {
            return \Hearth\Internal\Uploads::isUploaded($filename);
        }
    }

    if (!function_exists('fastcgi_finish_request')) {
        function fastcgi_finish_request(): bool
        {
            return \Hearth\Internal\Runtime::current()?->finishEarly() ?? false;
        }
    }
}
