<?php

/**
 * Functions Hearth provides inside its workers.
 *
 * Hearth starts workers with move_uploaded_file() and is_uploaded_file()
 * disabled, because PHP's versions only accept files that PHP received
 * itself; these replacements accept the uploads Hearth received for the
 * current request. fastcgi_finish_request() exists so that apps (Symfony,
 * Laravel) that call it to send the response early keep doing so. Outside
 * Hearth none of these is defined and PHP's own functions are used.
 *
 * Hearth\route_name() is defined everywhere, and does nothing outside
 * Hearth.
 */

declare(strict_types=1);

namespace Hearth {
    if (!function_exists('Hearth\\route_name')) {
        /**
         * Names the route of the current request, e.g.
         * `Hearth\route_name('users.show')`: `hearth serve` counts the
         * memory the request makes its worker grow under this name instead
         * of under its method and path (see docs/memory.md). The last call
         * in a request counts. The Symfony and Laravel integrations call it
         * with the framework's route name.
         */
        function route_name(string $name): void
        {
            \Hearth\Internal\Runtime::current()?->nameRoute($name);
        }
    }
}

namespace {
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
}
