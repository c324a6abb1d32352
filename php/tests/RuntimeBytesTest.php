<?php

declare(strict_types=1);

namespace Hearth\Tests;

use Hearth\Internal\Runtime;
use PHPUnit\Framework\TestCase;

/** Runtime::bytes() reads ini quantities such as post_max_size. */
final class RuntimeBytesTest extends TestCase
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
        yield 'blanks around' => [" 8M\t", 8388608];
        yield 'no limit' => ['-1', -1];
    }

    /** @dataProvider quantities */
    public function testBytes(string $value, int $bytes): void
    {
        self::assertSame($bytes, Runtime::bytes($value));
    }

    /** @dataProvider quantities */
    public function testBytesAgreesWithPhp(string $value, int $bytes): void
    {
        if (!function_exists('ini_parse_quantity')) {
            self::markTestSkipped('ini_parse_quantity() needs PHP 8.2');
        }
        self::assertSame(ini_parse_quantity($value), Runtime::bytes($value));
    }
}
