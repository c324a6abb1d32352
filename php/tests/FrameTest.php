<?php

declare(strict_types=1);

namespace Hearth\Tests;

use Hearth\Internal\Frame;
use PHPUnit\Framework\TestCase;

/** The frames a worker builds from what it has to say (docs/protocol.md). */
final class FrameTest extends TestCase
{
    public function testOutputGoesInBodyFramesOfAtMost4MiB(): void
    {
        $body = str_repeat('0123456789abcdef', 589824);
        $frames = Frame::decodeAll(Frame::bodies(7, $body), 67108864);
        self::assertSame([4194304, 4194304, 1048576], array_map(fn ($f) => strlen($f['payload']), $frames));
        self::assertSame([Frame::BODY], array_values(array_unique(array_column($frames, 'kind'))));
        self::assertSame([7], array_values(array_unique(array_column($frames, 'request_id'))));
        self::assertSame($body, implode('', array_column($frames, 'payload')));
    }

    public function testSmallOutputIsOneBodyFrame(): void
    {
        self::assertSame(Frame::encode(Frame::BODY, 3, 'hello'), Frame::bodies(3, 'hello'));
    }

    public function testReadySaysWhoTheWorkerIsThenItsSettings(): void
    {
        [$frame] = Frame::decodeAll(Frame::ready(['post_max_size' => '8M', 'file_uploads' => true]), 65536);
        self::assertSame(Frame::READY, $frame['kind']);
        self::assertSame([
            ['protocol', (string) Frame::VERSION],
            ['pid', (string) getmypid()],
            ['php_version', PHP_VERSION],
            ['sapi', PHP_SAPI],
            ['library', Frame::LIBRARY_VERSION],
            ['post_max_size', '8M'],
            ['file_uploads', '1'],
        ], Frame::decodeFields($frame['payload']));
    }
}
