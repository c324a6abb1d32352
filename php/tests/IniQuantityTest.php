<?php

declare(strict_types=1);

namespace Hearth\Tests;

use Hearth\Internal\IniQuantity;
use PHPUnit\Framework\TestCase;

/**
 * IniQuantity reads ini quantities such as post_max_size as PHP does: with
 * ini_parse_quantity() on PHP 8.2+, and on PHP 8.1 as PHP 8.1 itself
 * (zend_atol()). The PHP 8.1 reading is checked here on any version.
 */
final class IniQuantityTest extends TestCase
{
    /** @return iterable<string, array{0: string, 1: int}> */
    public function quantities(): iterable
    {
        yield '8M' => ['8M', 8388608];
        yield '512K' => ['512K', 524288];
        yield '1G' => ['1G', 1073741824];
        yield '0' => ['0', 0];
        yield 'empty' => ['', 0];
        yield 'plain bytes' => ['1500', 1500];
        yield 'lower case k' => ['2k', 2048];
        yield 'lower case m' => ['16m', 16777216];
        yield 'lower case g' => ['2g', 2147483648];
        yield 'blanks before' => [" \t8M", 8388608];
        yield 'blank before the multiplier' => ['8 M', 8388608];
        yield 'no limit' => ['-1', -1];
        yield 'hexadecimal' => ['0x10M', 16777216];
        yield 'octal' => ['010', 8];
        yield 'a fraction stops the number' => ['1.5M', 1048576];
        yield 'an unknown multiplier is ignored' => ['12kb', 12];
    }

    /** @dataProvider quantities */
    public function testBytes(string $value, int $bytes): void
    {
        self::assertSame($bytes, IniQuantity::bytes($value));
    }

    /** @dataProvider quantities */
    public function testBeforePhp82(string $value, int $bytes): void
    {
        self::assertSame($bytes, IniQuantity::beforePhp82($value));
    }

    /**
     * The readings PHP 8.2 changed, as PHP 8.1 made them: a blank at the
     * end hides the multiplier, "0b" and "0o" are no prefixes (the number
     * is the 0 before them), and a number too large is the largest.
     *
     * @return iterable<string, array{0: string, 1: int}>
     */
    public function readingsPhp82Changed(): iterable
    {
        yield 'blank after' => ['8M ', 8];
        yield 'tab after' => ["8M\t", 8];
        yield 'binary' => ['0b11', 0];
        yield 'octal with 0o' => ['0o17', 0];
        yield 'too large' => ['9223372036854775808', PHP_INT_MAX];
        yield 'far too large' => ['99999999999999999999', PHP_INT_MAX];
        yield 'too small' => ['-9223372036854775809', PHP_INT_MIN];
        yield 'too large, in K' => ['99999999999999999999K', PHP_INT_MAX << 10];
    }

    /** @dataProvider readingsPhp82Changed */
    public function testBeforePhp82ReadsAsPhp81(string $value, int $bytes): void
    {
        self::assertSame($bytes, IniQuantity::beforePhp82($value));
    }

    /**
     * Apart from the readings it changed, PHP 8.2 reads every quantity as
     * PHP 8.1 did, malformed ones included ("interpreting as ... for
     * backwards compatibility"): the PHP 8.1 reading must agree with
     * ini_parse_quantity() on all of these.
     */
    public function testBeforePhp82AgreesWithIniParseQuantity(): void
    {
        if (!function_exists('ini_parse_quantity')) {
            self::markTestSkipped('ini_parse_quantity() needs PHP 8.2');
        }
        $checked = 0;
        foreach (self::inputs() as $value) {
            self::assertSame(
                @ini_parse_quantity($value),
                IniQuantity::beforePhp82($value),
                'ini quantity ' . var_export($value, true),
            );
            $checked++;
        }
        self::assertGreaterThan(10000, $checked);
    }

    /**
     * Quantities well-formed and not: blanks and signs before, numbers in
     * each base (up to the largest integer, random ones included), and
     * what may follow them; none out of the integer range.
     *
     * @return iterable<string>
     */
    private static function inputs(): iterable
    {
        yield from ['', ' ', 'M', 'k', '+', '-', '+-1', '--1', '0x', '0X', '0xg', '0x-1', '0.5G', 'x1'];
        yield from ['08', '09k', '0179', '0178K', '1e3', '1E3k'];
        mt_srand(8);
        $numbers = [0, 1, 7, 8, 9, 10, 15, 16, 99, 1023, 1024, 1500, 65535, 2147483647, 2147483648,
            4294967296, 10 ** 12, 10 ** 15, PHP_INT_MAX >> 30, PHP_INT_MAX >> 20, PHP_INT_MAX >> 10, PHP_INT_MAX];
        for ($i = 0; $i < 40; $i++) {
            $numbers[] = mt_rand(0, mt_getrandmax()) * mt_rand(1, 1 << 20);
        }
        // None of them digits: more digits could take a number out of range.
        $suffixes = ['', 'k', 'K', 'm', 'M', 'g', 'G', ' M', "\tk", '.5M', 'xyz', 'kb', 'x', '_1'];
        foreach ($numbers as $number) {
            $forms = [(string) $number, sprintf('0x%x', $number), sprintf('0X%X', $number), sprintf('0%o', $number)];
            foreach ($forms as $digits) {
                foreach (['', ' ', "\t", "\n "] as $blanks) {
                    foreach (['', '+', '-'] as $sign) {
                        foreach ($suffixes as $suffix) {
                            yield $blanks . $sign . $digits . $suffix;
                        }
                    }
                }
            }
        }
    }
}
