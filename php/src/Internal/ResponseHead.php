<?php

declare(strict_types=1);

namespace Hearth\Internal;

/**
 * The head of a response, status and header lines, as PHP would send it:
 * from header() and http_response_code(), or given whole through the PSR-7
 * bridge; with the Content-Type PHP adds when the app sets none,
 * X-Powered-By when expose_php is on, and without the session cookie that
 * only a worker would send.
 *
 * @internal
 */
final class ResponseHead
{
    public function __construct(private readonly bool $exposePhp)
    {
    }

    /**
     * The HEAD payload of the current response.
     *
     * @param array{0:int,1:list<string>}|null $explicit status and header lines
     *        set through the PSR-7 bridge, sent after header()'s, or null
     * @param string|null $sessionName the name of the session cookie the
     *        worker read before the app ran
     * @param string|null $cookieSessionId the session id it found there
     */
    public function payload(?array $explicit, ?string $sessionName, ?string $cookieSessionId): string
    {
        $lines = headers_list();
        if ($sessionName !== null && $cookieSessionId !== null) {
            $lines = self::withoutEchoedSessionCookie($lines, $sessionName, $cookieSessionId);
        }
        if ($explicit !== null) {
            // After what header() set, as the PSR-7 emitter adds them under
            // php-fpm (header($line, false)).
            [$status, $explicitLines] = $explicit;
            $lines = [...$lines, ...self::asHeaderWould($explicitLines)];
        } else {
            $status = (int) http_response_code();
        }
        if (!self::hasContentType($lines)) {
            $default = self::defaultContentType();
            if ($default !== '') {
                $lines[] = $default;
            }
        }
        return Frame::head($status, $lines);
    }

    /** No headers but the ones PHP starts every request with. */
    public function reset(): void
    {
        header_remove();
        http_response_code(200);
        if ($this->exposePhp) {
            header('X-Powered-By: PHP/' . PHP_VERSION);
        }
    }

    /**
     * Before the worker exits: php-cgi prints the response headers of its
     * one CGI request at exit; with none left and no default type that is
     * a blank line.
     */
    public static function clearForExit(): void
    {
        // Headers already sent (a response of the extension's output
        // layer) are not printed again, and cannot be removed.
        if (!headers_sent()) {
            header_remove();
        }
        ini_set('default_mimetype', '');
    }

    /**
     * Header lines given directly (PSR-7) as header() would have stored
     * them: text/* content types get the default charset. (X-Powered-By,
     * when expose_php is on, is among the lines of headers_list(), put
     * there at the start of the request.) The same script then answers the
     * same under php-fpm, where the PSR-7 emitter calls header().
     *
     * @param list<string> $lines
     * @return list<string>
     */
    private static function asHeaderWould(array $lines): array
    {
        $charset = (string) ini_get('default_charset');
        foreach ($lines as $i => $line) {
            if ($charset !== '' && strncasecmp($line, 'content-type:', 13) === 0) {
                $type = ltrim(substr($line, 13), ' ');
                if (str_starts_with($type, 'text/') && !str_contains($type, 'charset=')) {
                    $lines[$i] = 'Content-type: ' . $type . ';charset=' . $charset;
                }
            }
        }
        return $lines;
    }

    /**
     * The session id came from the client's cookie; PHP would not send that
     * cookie back, and the Set-Cookie that session_id() caused must go.
     * It stays in the headers when the session ends (session_destroy()
     * forgets the id, not the header), so it goes whatever the session id
     * is now. A new id (session_regenerate_id()) replaces it in the
     * headers and is kept.
     *
     * @param list<string> $lines
     * @return list<string>
     */
    private static function withoutEchoedSessionCookie(array $lines, string $sessionName, string $sessionId): array
    {
        $cookie = self::sessionCookie($sessionName, $sessionId);
        foreach ($lines as $i => $line) {
            if ($line === $cookie || str_starts_with($line, $cookie . ';')) {
                unset($lines[$i]);
                return array_values($lines);
            }
        }
        return $lines;
    }

    /** The Set-Cookie line of a session id, as PHP writes it: the name as it is, the id URL-encoded. */
    public static function sessionCookie(string $sessionName, string $sessionId): string
    {
        return 'Set-Cookie: ' . $sessionName . '=' . urlencode($sessionId);
    }

    /** @param list<string> $lines */
    private static function hasContentType(array $lines): bool
    {
        foreach ($lines as $line) {
            if (strncasecmp($line, 'content-type:', 13) === 0) {
                return true;
            }
        }
        return false;
    }

    /** The Content-Type PHP adds when the app sets none. */
    private static function defaultContentType(): string
    {
        $type = (string) ini_get('default_mimetype');
        $charset = (string) ini_get('default_charset');
        if ($type === '') {
            return '';
        }
        if ($charset !== '' && str_starts_with($type, 'text/')) {
            $type .= '; charset=' . $charset;
        }
        return 'Content-type: ' . $type;
    }
}
