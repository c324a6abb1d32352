<?php

declare(strict_types=1);

namespace Hearth\Internal;

/**
 * The frame format of docs/protocol.md: a 12-byte header (version, kind,
 * flags, request id, payload length; big-endian) and a payload.
 *
 * @internal
 */
final class Frame
{
    public const VERSION = 1;
    public const HEADER_LEN = 12;

    /** The library's version, sent in READY. */
    public const LIBRARY_VERSION = '0.1.0';

    /** Output larger than this goes in several BODY frames (one echo can be huge). */
    private const BODY_MAX = 4194304;

    public const READY = 1;
    public const REQUEST = 2;
    public const BODY = 3;
    public const END = 4;
    public const HEAD = 5;
    public const ERROR = 6;
    public const STOP = 7;
    public const FORM = 8;
    public const CALL = 9;
    public const RESULT = 10;
    /** To a worker, instead of BODY frames: the path of a file holding the body. */
    public const BODY_FILE = 11;

    /** On END from a worker: this worker exits after the request. */
    public const FLAG_CLOSE = 0x0001;
    /** On HEAD: the body is streamed as the app flushes it. */
    public const FLAG_STREAM = 0x0002;
    /** On END: the response is complete; the request goes on, a final END follows. */
    public const FLAG_DETACHED = 0x0004;
    /** On END from a worker: the payload reports on the worker (Frame::report()). */
    public const FLAG_REPORT = 0x0008;
    /** On HEAD from a worker: an interim response (103 Early Hints); the response's own HEAD follows. */
    public const FLAG_INTERIM = 0x0010;
    /** On FORM from Hearth: parts past max_multipart_body_parts were not parsed. */
    public const FLAG_PARTS_LIMIT = 0x0100;
    /** On FORM from Hearth: files past max_file_uploads were dropped. */
    public const FLAG_UPLOADS_LIMIT = 0x0200;

    public const KIND_NAMES = [
        self::READY => 'ready',
        self::REQUEST => 'request',
        self::BODY => 'body',
        self::END => 'end',
        self::HEAD => 'head',
        self::ERROR => 'error',
        self::STOP => 'stop',
        self::FORM => 'form',
        self::CALL => 'call',
        self::RESULT => 'result',
        self::BODY_FILE => 'body_file',
    ];

    public static function encode(int $kind, int $requestId, string $payload, int $flags = 0): string
    {
        return pack('CCnNN', self::VERSION, $kind, $flags, $requestId, strlen($payload)) . $payload;
    }

    /**
     * Decodes the header at $offset of $buffer.
     *
     * Returns null when fewer than HEADER_LEN bytes are available, else
     * [kind, flags, requestId, payloadLength].
     *
     * @return array{0:int,1:int,2:int,3:int}|null
     * @throws ProtocolError on a wrong version, an unknown kind or a payload
     *                       larger than $maxPayload (checked before reading it)
     */
    public static function header(string $buffer, int $offset, int $maxPayload): ?array
    {
        if (strlen($buffer) - $offset < self::HEADER_LEN) {
            return null;
        }
        $h = unpack('Cv/Ck/nf/Ni/Nl', $buffer, $offset);
        if ($h['v'] !== self::VERSION) {
            throw ProtocolError::version($h['v']);
        }
        if (!isset(self::KIND_NAMES[$h['k']])) {
            throw ProtocolError::unknownKind($h['k']);
        }
        if ($h['l'] > $maxPayload) {
            throw ProtocolError::tooLarge($h['l'], $maxPayload);
        }
        return [$h['k'], $h['f'], $h['i'], $h['l']];
    }

    /**
     * Decodes every whole frame in $bytes, for tests and tools.
     *
     * @return list<array{kind:int,flags:int,request_id:int,payload:string}>
     */
    public static function decodeAll(string $bytes, int $maxPayload, int &$consumed = 0): array
    {
        $frames = [];
        $at = 0;
        while (($h = self::header($bytes, $at, $maxPayload)) !== null) {
            if (strlen($bytes) - $at - self::HEADER_LEN < $h[3]) {
                break;
            }
            $frames[] = [
                'kind' => $h[0],
                'flags' => $h[1],
                'request_id' => $h[2],
                'payload' => (string) substr($bytes, $at + self::HEADER_LEN, $h[3]),
            ];
            $at += self::HEADER_LEN + $h[3];
        }
        $consumed = $at;
        return $frames;
    }

    /**
     * Encodes a field list (READY and ERROR payloads): for each entry a
     * 16-bit key length, the key, a 32-bit value length and the value.
     *
     * @param array<string, string|int|float|bool> $fields
     */
    public static function fields(array $fields): string
    {
        $out = '';
        foreach ($fields as $key => $value) {
            $value = is_bool($value) ? ($value ? '1' : '0') : (string) $value;
            $out .= pack('n', strlen((string) $key)) . $key . pack('N', strlen($value)) . $value;
        }
        return $out;
    }

    /**
     * The payload of an END with FLAG_REPORT: $memory, memory_get_usage()
     * once the previous request (or the boot) had been cleaned up, and
     * the route name the app gave the request, if it gave one.
     */
    public static function report(int $memory, ?string $route): string
    {
        // Once per request: the keys' length prefixes are written out.
        $memory = (string) $memory;
        $out = "\x00\x06memory" . pack('N', strlen($memory)) . $memory;
        return $route === null ? $out : $out . "\x00\x05route" . pack('N', strlen($route)) . $route;
    }

    /** BODY frames carrying $body, none larger than BODY_MAX. */
    public static function bodies(int $requestId, string $body): string
    {
        $length = strlen($body);
        if ($length <= self::BODY_MAX) {
            return self::encode(self::BODY, $requestId, $body);
        }
        $out = '';
        for ($at = 0; $at < $length; $at += self::BODY_MAX) {
            $out .= self::encode(self::BODY, $requestId, substr($body, $at, self::BODY_MAX));
        }
        return $out;
    }

    /**
     * The READY frame a worker sends once booted: who it is, and $settings
     * (the PHP settings an HTTP worker reports).
     *
     * @param array<string, string|int|float|bool> $settings
     */
    public static function ready(array $settings = []): string
    {
        return self::encode(self::READY, 0, self::fields([
            'protocol' => self::VERSION,
            'pid' => getmypid(),
            'php_version' => PHP_VERSION,
            'sapi' => PHP_SAPI,
            'library' => self::LIBRARY_VERSION,
        ] + $settings));
    }

    /**
     * Decodes a field list.
     *
     * @return list<array{0:string,1:string}>
     * @throws ProtocolError when an entry is truncated
     */
    public static function decodeFields(string $payload): array
    {
        $entries = [];
        $at = 0;
        $len = strlen($payload);
        while ($at < $len) {
            if ($len - $at < 2) {
                throw ProtocolError::malformed('truncated field key length');
            }
            $klen = unpack('n', $payload, $at)[1];
            $at += 2;
            if ($len - $at < $klen) {
                throw ProtocolError::malformed('truncated field key');
            }
            $key = (string) substr($payload, $at, $klen);
            $at += $klen;
            if ($len - $at < 4) {
                throw ProtocolError::malformed('truncated field value length');
            }
            $vlen = unpack('N', $payload, $at)[1];
            $at += 4;
            if ($len - $at < $vlen) {
                throw ProtocolError::malformed('truncated field value');
            }
            $entries[] = [$key, (string) substr($payload, $at, $vlen)];
            $at += $vlen;
        }
        return $entries;
    }

    /**
     * Encodes a HEAD payload: the status, then the header lines joined by
     * "\n" (PHP refuses CR and LF inside a header, so a line cannot contain one).
     *
     * @param list<string> $lines
     */
    public static function head(int $status, array $lines): string
    {
        return pack('n', $status) . implode("\n", $lines);
    }
}
