<?php

declare(strict_types=1);

namespace Hearth\Internal;

/**
 * Bytes in an ini quantity such as post_max_size ("8M"), read as the
 * running PHP reads its own settings; 0 or less means no limit.
 *
 * @internal
 */
final class IniQuantity
{
    public static function bytes(string $value): int
    {
        if (function_exists('ini_parse_quantity')) {
            // PHP 8.2+. It warns about malformed values; PHP has already
            // warned about its own setting at startup.
            return @ini_parse_quantity($value);
        }
        return self::beforePhp82($value);
    }

    /**
     * What PHP 8.1 makes of a quantity (zend_atol()): strtol() in base 0
     * (after optional blanks and a sign, "0x" starts a hexadecimal number
     * and "0" an octal one; a number too large stops at the largest
     * integer), then a last character k, m or g multiplies by 1024 once,
     * twice or three times, wrapping around on overflow.
     *
     * ini_parse_quantity() reads every value the same way, malformed ones
     * included, except where PHP 8.2 changed the reading: blanks at the
     * end, "0b" and "0o" prefixes, and digits beyond the integer range.
     * Public so that tests check this on PHP 8.2 as well.
     */
    public static function beforePhp82(string $value): int
    {
        $length = strlen($value);
        $at = strspn($value, " \t\n\v\f\r");
        $negative = false;
        if ($at < $length && ($value[$at] === '+' || $value[$at] === '-')) {
            $negative = $value[$at] === '-';
            $at++;
        }
        $base = 10;
        if ($at < $length && $value[$at] === '0') {
            $base = 8;
            if (
                $at + 2 < $length
                && ($value[$at + 1] === 'x' || $value[$at + 1] === 'X')
                && self::digit($value[$at + 2], 16) !== null
            ) {
                $base = 16;
                $at += 2;
            }
        }
        // The digits' value, negated: its range reaches PHP_INT_MIN.
        $negated = 0;
        for (; $at < $length; $at++) {
            $digit = self::digit($value[$at], $base);
            if ($digit === null) {
                break;
            }
            if ($negated < intdiv(PHP_INT_MIN + $digit, $base)) {
                $negated = PHP_INT_MIN;
                break;
            }
            $negated = $negated * $base - $digit;
        }
        if ($negative) {
            $number = $negated;
        } else {
            $number = $negated === PHP_INT_MIN ? PHP_INT_MAX : -$negated;
        }
        $shift = match ($length > 0 ? $value[$length - 1] : '') {
            'k', 'K' => 10,
            'm', 'M' => 20,
            'g', 'G' => 30,
            default => 0,
        };
        // << wraps around as C's unsigned multiplication does.
        return $number << $shift;
    }

    private static function digit(string $char, int $base): ?int
    {
        $at = strpos('0123456789abcdefABCDEF', $char);
        if ($at === false) {
            return null;
        }
        $digit = $at < 16 ? $at : $at - 6;
        return $digit < $base ? $digit : null;
    }
}
