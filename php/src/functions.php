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

namespace Hearth {
    /**
     * Sends a 103 Early Hints response with these `Link` header values
     * before the response, so that a browser starts fetching what the page
     * will need while the app still works on it:
     *
     *     Hearth\early_hints('</app.css>; rel=preload; as=style');
     *
     * Returns whether the hints went to Hearth: false outside a request,
     * once the response's head has gone (after output was flushed), or
     * when no value is a valid header value. Hearth sends them to clients
     * that speak HTTP/1.1 or HTTP/2, not HTTP/1.0 (docs/early-hints.md).
     * The values are not added to the response itself: send them there
     * too with header('Link: ...', false) when the page should carry them.
     */
    function early_hints(string ...$links): bool
    {
        $runtime = \Hearth\Internal\Runtime::current();
        if ($runtime !== null) {
            return $runtime->earlyHints(array_values($links));
        }
        if (function_exists('headers_send') && !headers_sent()) {
            // FrankenPHP: the headers set so far go out in the 103, and stay.
            foreach ($links as $link) {
                header('Link: ' . $link, false);
            }
            headers_send(103);
            return true;
        }
        return false;
    }

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

        if (!function_exists('headers_send')) {
            /**
             * FrankenPHP's headers_send(), for its early hints: with 103, the
             * `Link` headers set so far (header('Link: ...')) go out in a 103
             * Early Hints response, and stay set for the response. Any other
             * status becomes the response's status (http_response_code()).
             * Returns 1 when a 103 was sent, 0 otherwise.
             */
            function headers_send(int $status = 200): int
            {
                if ($status !== 103) {
                    http_response_code($status);
                    return 0;
                }
                $links = [];
                foreach (headers_list() as $line) {
                    [$name, $value] = array_pad(explode(':', $line, 2), 2, '');
                    if (strcasecmp(trim($name), 'link') === 0) {
                        $links[] = trim($value);
                    }
                }
                return \Hearth\Internal\Runtime::current()?->earlyHints($links) ? 1 : 0;
            }
        }
    }
}
