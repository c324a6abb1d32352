<?php

declare(strict_types=1);

namespace Hearth\Internal\Queue;

use Hearth\QueueError;

/**
 * A queue URL, read as the hearth-queue crate reads it (its src/url.rs):
 *
 * - `redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]/NAME`: queue NAME in
 *   database DB (0 when left out) on HOST:PORT (6379 when left out); with
 *   one path segment it is the name. USER and PASSWORD are
 *   percent-decoded.
 * - `file:PATH` or `file:///ABSOLUTE/PATH`: the SQLite file PATH.
 *
 * A name is 1 to 128 of `A-Z a-z 0-9 . _ -`, and not `.` or `..`; result
 * channels follow the same rule. TLS and unix sockets are not supported.
 * The password is never shown: not by __toString(), not in an error, not
 * by var_dump().
 *
 * @internal
 */
final class QueueUrl
{
    public const MAX_NAME_LEN = 128;

    private function __construct(
        public readonly string $engine,
        public readonly string $host,
        public readonly int $port,
        public readonly int $db,
        public readonly ?string $user,
        private readonly ?string $password,
        public readonly string $name,
        public readonly string $path,
    ) {
    }

    /** @throws QueueError (URL) saying what is wrong, without the password */
    public static function parse(#[\SensitiveParameter] string $input): self
    {
        if (str_starts_with($input, 'file:')) {
            return self::parseFile(substr($input, 5));
        }
        if (str_starts_with($input, 'redis://')) {
            return self::parseRedis($input);
        }
        $shown = self::redact($input);
        if (str_starts_with($input, 'rediss://') || str_starts_with($input, 'redis+unix:')) {
            throw self::error("{$shown}: TLS and unix sockets are not supported; use redis://HOST:PORT/NAME");
        }
        throw self::error("{$shown}: expected redis://HOST[:PORT][/DB]/NAME or file:PATH");
    }

    /** Whether $name is a valid queue or results channel name. */
    public static function validName(string $name): bool
    {
        return $name !== '.' && $name !== '..' && strlen($name) <= self::MAX_NAME_LEN
            && preg_match('/\A[A-Za-z0-9._-]+\z/', $name) === 1;
    }

    /** The password, for AUTH only. */
    public function password(): ?string
    {
        return $this->password;
    }

    /** The URL without its password, as the crate shows it. */
    public function __toString(): string
    {
        if ($this->engine === 'file') {
            return 'file:' . $this->path;
        }
        $auth = '';
        if ($this->user !== null || $this->password !== null) {
            $auth = ($this->user ?? '') . ($this->password !== null ? ':***' : '') . '@';
        }
        $host = str_contains($this->host, ':') ? "[{$this->host}]" : $this->host;
        return "redis://{$auth}{$host}:{$this->port}/{$this->db}/{$this->name}";
    }

    /** @return array<string, string> */
    public function __debugInfo(): array
    {
        return ['url' => (string) $this];
    }

    /**
     * $input with any password replaced, for messages about a URL too
     * broken to parse (as the crate's redact()).
     */
    public static function redact(#[\SensitiveParameter] string $input): string
    {
        $scheme = strpos($input, '://');
        if ($scheme === false) {
            return $input;
        }
        $start = $scheme + 3;
        $end = strcspn($input, '/?#', $start) + $start;
        $at = strrpos(substr($input, $start, $end - $start), '@');
        if ($at === false) {
            return $input;
        }
        $at += $start;
        $colon = strpos(substr($input, $start, $at - $start), ':');
        if ($colon === false) {
            return $input;
        }
        return substr($input, 0, $start + $colon) . ':***' . substr($input, $at);
    }

    private static function parseFile(string $rest): self
    {
        $path = $rest;
        if (str_starts_with($rest, '//')) {
            if (!str_starts_with($rest, '///')) {
                throw self::error("file:{$rest}: a host is not allowed; use file:PATH or file:///ABSOLUTE/PATH");
            }
            $path = substr($rest, 2);
        }
        if ($path === '') {
            throw self::error('file: needs a path, as in file:/var/lib/hearth/jobs.db');
        }
        if (str_contains($path, "\0")) {
            throw self::error('file: the path has a NUL byte');
        }
        return new self('file', '', 0, 0, null, null, '', $path);
    }

    private static function parseRedis(#[\SensitiveParameter] string $input): self
    {
        $shown = self::redact($input);
        if (strpbrk($input, '?#') !== false) {
            throw self::error("{$shown}: no query or fragment is allowed");
        }
        $rest = substr($input, 8);
        $slash = strpos($rest, '/');
        $authority = $slash === false ? $rest : substr($rest, 0, $slash);
        $path = $slash === false ? '' : substr($rest, $slash + 1);

        $user = null;
        $password = null;
        $at = strrpos($authority, '@');
        if ($at !== false) {
            $info = substr($authority, 0, $at);
            $authority = substr($authority, $at + 1);
            $colon = strpos($info, ':');
            $rawUser = $colon === false ? $info : substr($info, 0, $colon);
            if ($rawUser !== '') {
                $user = self::decode($rawUser, 'user', $shown);
            }
            if ($colon !== false) {
                $password = self::decode(substr($info, $colon + 1), 'password', $shown);
            }
        }

        if (preg_match('/\A\[([0-9A-Fa-f:.]+)\](?::([0-9]*))?\z/', $authority, $m) === 1) {
            if (filter_var($m[1], FILTER_VALIDATE_IP, FILTER_FLAG_IPV6) === false) {
                throw self::error("{$shown}: invalid IPv6 address");
            }
            $host = strtolower($m[1]);
            $port = $m[2] ?? '';
        } elseif (preg_match('/\A([A-Za-z0-9._~-]*)(?::([0-9]*))?\z/', $authority, $m) === 1) {
            $host = strtolower($m[1]);
            $port = $m[2] ?? '';
        } else {
            throw self::error("{$shown}: invalid host or port");
        }
        if ($host === '') {
            throw self::error("{$shown}: a host is needed");
        }
        if ($port === '') {
            $port = 6379;
        } elseif (strlen($port) > 5 || (int) $port > 65535 || (int) $port === 0) {
            throw self::error("{$shown}: invalid port number");
        } else {
            $port = (int) $port;
        }

        $segments = explode('/', $path);
        if (count($segments) === 1 && $segments[0] !== '') {
            [$db, $name] = ['0', $segments[0]];
        } elseif (count($segments) === 2 && $segments[1] !== '') {
            [$db, $name] = $segments;
            if (preg_match('/\A[0-9]{1,18}\z/', $db) !== 1) {
                throw self::error("{$shown}: database " . json_encode($db) . ' is not a number');
            }
        } else {
            throw self::error("{$shown}: the path is the queue's name: redis://HOST:PORT[/DB]/NAME");
        }
        if (!self::validName($name)) {
            throw self::error("{$shown}: queue name " . json_encode($name, JSON_UNESCAPED_SLASHES)
                . ': expected 1 to ' . self::MAX_NAME_LEN . ' of A-Z a-z 0-9 . _ -');
        }
        return new self('redis', $host, $port, (int) $db, $user, $password, $name, '');
    }

    private static function decode(#[\SensitiveParameter] string $raw, string $what, string $shown): string
    {
        $decoded = rawurldecode($raw);
        if (preg_match('//u', $decoded) !== 1) {
            throw self::error("{$shown}: the {$what} is not UTF-8");
        }
        return $decoded;
    }

    private static function error(string $why): QueueError
    {
        return new QueueError(QueueError::URL, "queue URL: {$why}");
    }
}
