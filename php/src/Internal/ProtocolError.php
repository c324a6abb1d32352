<?php

declare(strict_types=1);

namespace Hearth\Internal;

/**
 * The bytes on the worker socket are not the protocol this library speaks.
 * The worker cannot go on: it exits and Hearth starts a fresh one.
 *
 * @internal
 */
final class ProtocolError extends \RuntimeException
{
    public const VERSION = 1;
    public const UNKNOWN_KIND = 2;
    public const TOO_LARGE = 3;
    public const MALFORMED = 4;
    public const UNEXPECTED = 5;

    public static function version(int $version): self
    {
        return new self(
            sprintf('unsupported protocol version %d (this library speaks %d)', $version, Frame::VERSION),
            self::VERSION,
        );
    }

    public static function unknownKind(int $kind): self
    {
        return new self(sprintf('unknown frame kind %d', $kind), self::UNKNOWN_KIND);
    }

    public static function tooLarge(int $length, int $max): self
    {
        return new self(sprintf('frame payload of %d bytes exceeds the limit of %d', $length, $max), self::TOO_LARGE);
    }

    public static function malformed(string $what): self
    {
        return new self('malformed payload: ' . $what, self::MALFORMED);
    }

    public static function unexpected(int $kind, string $when): self
    {
        $name = Frame::KIND_NAMES[$kind] ?? (string) $kind;
        return new self(sprintf('unexpected %s frame %s', $name, $when), self::UNEXPECTED);
    }
}
