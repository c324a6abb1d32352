<?php

declare(strict_types=1);

namespace Hearth\Tests;

use Hearth\Internal\Frame;
use Hearth\Internal\ProtocolError;
use PHPUnit\Framework\TestCase;

/**
 * Decodes tests/vectors/protocol.json, the vectors of docs/protocol.md
 * written by tests/vectors/generate.py, an implementation of the format
 * separate from both Frame.php and the Rust crate (which decodes the same
 * file in crates/hearth-proto/tests/vectors.rs).
 */
final class ProtocolVectorsTest extends TestCase
{
    private const VECTORS = __DIR__ . '/../../tests/vectors/protocol.json';

    private const KINDS = [
        'ready' => 1,
        'request' => 2,
        'body' => 3,
        'end' => 4,
        'head' => 5,
        'error' => 6,
        'stop' => 7,
        'form' => 8,
        'call' => 9,
        'result' => 10,
        'body_file' => 11,
    ];

    private const ERRORS = [
        'version' => ProtocolError::VERSION,
        'unknown_kind' => ProtocolError::UNKNOWN_KIND,
        'too_large' => ProtocolError::TOO_LARGE,
    ];

    /** @var array<string, mixed>|null */
    private static ?array $vectors = null;

    /** @return array<string, mixed> */
    private static function vectors(): array
    {
        if (self::$vectors === null) {
            $json = file_get_contents(self::VECTORS);
            self::assertIsString($json, 'tests/vectors/protocol.json is readable');
            $vectors = json_decode($json, true, 512, JSON_THROW_ON_ERROR);
            self::assertIsArray($vectors);
            self::$vectors = $vectors;
        }
        return self::$vectors;
    }

    private static function maxPayload(): int
    {
        return self::vectors()['max_payload'];
    }

    private static function bytes(string $hex): string
    {
        $bytes = hex2bin($hex);
        self::assertIsString($bytes, 'valid hex in the vectors');
        return $bytes;
    }

    /**
     * @param array<string, mixed> $stream
     * @return list<array{kind:int,flags:int,request_id:int,payload:string}>
     */
    private static function expectedFrames(array $stream): array
    {
        $frames = [];
        foreach ($stream['frames'] as $frame) {
            self::assertArrayHasKey($frame['kind'], self::KINDS, 'known kind name');
            $frames[] = [
                'kind' => self::KINDS[$frame['kind']],
                'flags' => $frame['flags'],
                'request_id' => $frame['request_id'],
                'payload' => self::bytes($frame['payload_hex']),
            ];
        }
        return $frames;
    }

    /** @return iterable<string, array{0: array<string, mixed>}> */
    public function streams(): iterable
    {
        foreach (self::vectors()['streams'] as $stream) {
            yield $stream['name'] => [$stream];
        }
    }

    /** @return iterable<string, array{0: array<string, mixed>}> */
    public function errors(): iterable
    {
        foreach (self::vectors()['errors'] as $case) {
            yield $case['name'] => [$case];
        }
    }

    /** @return iterable<string, array{0: array<string, mixed>}> */
    public function fieldLists(): iterable
    {
        foreach (self::vectors()['fields'] as $case) {
            yield $case['name'] => [$case];
        }
    }

    /** @return iterable<string, array{0: array<string, mixed>}> */
    public function endReports(): iterable
    {
        foreach (self::vectors()['end_reports'] as $case) {
            yield $case['name'] => [$case];
        }
    }

    /** @return iterable<string, array{0: array<string, mixed>}> */
    public function heads(): iterable
    {
        foreach (self::vectors()['heads'] as $case) {
            yield $case['name'] => [$case];
        }
    }

    /** @return iterable<string, array{0: array<string, mixed>}> */
    public function requests(): iterable
    {
        foreach (self::vectors()['requests'] as $case) {
            yield $case['name'] => [$case];
        }
    }

    public function testTheLibrarySpeaksTheVersionAndKindsOfTheVectors(): void
    {
        self::assertSame(self::vectors()['protocol_version'], Frame::VERSION);
        self::assertSame(self::KINDS, array_flip(Frame::KIND_NAMES));
    }

    /**
     * @dataProvider streams
     * @param array<string, mixed> $stream
     */
    public function testStreamDecodesTheSameAtEverySplitPoint(array $stream): void
    {
        $bytes = self::bytes($stream['hex']);
        $expected = self::expectedFrames($stream);
        for ($cut = 0; $cut <= strlen($bytes); $cut++) {
            $consumed = -1;
            $frames = Frame::decodeAll(substr($bytes, 0, $cut), self::maxPayload(), $consumed);
            self::assertGreaterThanOrEqual(0, $consumed);
            self::assertLessThanOrEqual($cut, $consumed);
            $rest = substr($bytes, $consumed);
            $restConsumed = -1;
            $frames = array_merge($frames, Frame::decodeAll($rest, self::maxPayload(), $restConsumed));
            self::assertSame($expected, $frames, "cut at $cut");
            self::assertSame(strlen($rest), $restConsumed, "cut at $cut: bytes left over");
        }
    }

    /**
     * @dataProvider streams
     * @param array<string, mixed> $stream
     */
    public function testStreamEncodesToTheSameBytes(array $stream): void
    {
        $bytes = '';
        foreach (self::expectedFrames($stream) as $frame) {
            $bytes .= Frame::encode($frame['kind'], $frame['request_id'], $frame['payload'], $frame['flags']);
        }
        self::assertSame($stream['hex'], bin2hex($bytes));
    }

    /**
     * @dataProvider errors
     * @param array<string, mixed> $case
     */
    public function testBadHeaderGivesTheNamedError(array $case): void
    {
        $bytes = self::bytes($case['hex']);
        self::assertArrayHasKey($case['error'], self::ERRORS, 'known error name');
        // A header cut short is incomplete, not wrong.
        self::assertNull(Frame::header(substr($bytes, 0, Frame::HEADER_LEN - 1), 0, self::maxPayload()));
        try {
            Frame::header($bytes, 0, self::maxPayload());
            self::fail('no ProtocolError');
        } catch (ProtocolError $e) {
            self::assertSame(self::ERRORS[$case['error']], $e->getCode(), $e->getMessage());
        }
        // The same header after a whole frame, through decodeAll.
        $prefixed = Frame::encode(Frame::BODY, 1, 'ok') . $bytes;
        try {
            Frame::decodeAll($prefixed, self::maxPayload());
            self::fail('no ProtocolError from decodeAll');
        } catch (ProtocolError $e) {
            self::assertSame(self::ERRORS[$case['error']], $e->getCode(), $e->getMessage());
        }
    }

    /**
     * @dataProvider fieldLists
     * @param array<string, mixed> $case
     */
    public function testFieldListDecodesAndEncodes(array $case): void
    {
        $bytes = self::bytes($case['hex']);
        self::assertSame($case['entries'], Frame::decodeFields($bytes));
        $fields = [];
        foreach ($case['entries'] as [$key, $value]) {
            $fields[$key] = $value;
        }
        self::assertSame($case['hex'], bin2hex(Frame::fields($fields)));
    }

    /**
     * @dataProvider fieldLists
     * @param array<string, mixed> $case
     */
    public function testTruncatedFieldListIsMalformed(array $case): void
    {
        $bytes = self::bytes($case['hex']);
        $boundaries = [0 => true];
        $at = 0;
        foreach ($case['entries'] as [$key, $value]) {
            $at += 2 + strlen($key) + 4 + strlen($value);
            $boundaries[$at] = true;
        }
        self::assertSame(strlen($bytes), $at);
        for ($cut = 0; $cut < strlen($bytes); $cut++) {
            $prefix = substr($bytes, 0, $cut);
            if (isset($boundaries[$cut])) {
                self::assertCount(array_search($cut, array_keys($boundaries), true), Frame::decodeFields($prefix));
                continue;
            }
            try {
                Frame::decodeFields($prefix);
                self::fail("cut at $cut: no ProtocolError");
            } catch (ProtocolError $e) {
                self::assertSame(ProtocolError::MALFORMED, $e->getCode());
            }
        }
    }

    /**
     * @dataProvider endReports
     * @param array<string, mixed> $case
     */
    public function testEndReportEncodes(array $case): void
    {
        self::assertSame($case['hex'], bin2hex(Frame::report($case['memory'], $case['route'])));
    }

    /**
     * @dataProvider heads
     * @param array<string, mixed> $case
     */
    public function testResponseHeadEncodes(array $case): void
    {
        self::assertSame($case['hex'], bin2hex(Frame::head($case['status'], $case['lines'])));
    }

    /**
     * @dataProvider requests
     * @param array<string, mixed> $case
     */
    public function testRequestUnserializesToTheServerArray(array $case): void
    {
        $server = unserialize(self::bytes($case['hex']), ['allowed_classes' => false]);
        self::assertSame($case['server'], $server);
    }

    public function testRequestTimesKeepTheirTypes(): void
    {
        $server = unserialize(self::bytes(self::vectors()['requests'][0]['hex']), ['allowed_classes' => false]);
        self::assertIsArray($server);
        self::assertSame(1700000000, $server['REQUEST_TIME']);
        self::assertSame(1700000000.25, $server['REQUEST_TIME_FLOAT']);
    }
}
