<?php

declare(strict_types=1);

namespace Hearth\Tests;

use Hearth\Internal\Queue\QueueUrl;
use Hearth\Queue;
use Hearth\QueueError;
use PHPUnit\Framework\TestCase;

/**
 * Queue URLs read as the crate reads them (its src/url.rs and its tests):
 * the same accepted forms, the same refusals, the password never shown.
 */
final class QueueUrlTest extends TestCase
{
    public function testRedisUrls(): void
    {
        $r = QueueUrl::parse('redis://127.0.0.1:6380/2/mail');
        self::assertSame(['redis', '127.0.0.1', 6380, 2, 'mail'], [$r->engine, $r->host, $r->port, $r->db, $r->name]);
        $r = QueueUrl::parse('redis://cache/jobs');
        self::assertSame(['cache', 6379, 0, 'jobs'], [$r->host, $r->port, $r->db, $r->name]);
        $r = QueueUrl::parse('redis://cache/5');
        self::assertSame([0, '5'], [$r->db, $r->name], 'one segment is the name');
        $r = QueueUrl::parse('redis://:s%40cret@[::1]:7000/jobs');
        self::assertSame(['::1', 7000, null, 's@cret'], [$r->host, $r->port, $r->user, $r->password()]);
        self::assertSame('redis://:***@[::1]:7000/0/jobs', (string) $r);
        $r = QueueUrl::parse('redis://app:pw@H/jobs');
        self::assertSame(['app', 'pw', 'h'], [$r->user, $r->password(), $r->host]);
        self::assertSame('redis://app:***@h:6379/0/jobs', (string) $r);
        self::assertSame('redis://app@h:6379/0/jobs', (string) QueueUrl::parse('redis://app@h/jobs'));
        self::assertSame('redis://h:6379/0/jobs', Queue::open('redis://h:/jobs')->url());
    }

    public function testFileUrls(): void
    {
        self::assertSame('/var/q.db', QueueUrl::parse('file:/var/q.db')->path);
        self::assertSame('q.db', QueueUrl::parse('file:q.db')->path);
        self::assertSame('/var/q.db', QueueUrl::parse('file:///var/q.db')->path);
        self::assertSame('file', QueueUrl::parse('file:q.db')->engine);
        self::assertSame('file:/var/q.db', (string) QueueUrl::parse('file:///var/q.db'));
    }

    /** @return iterable<array{string}> */
    public function refused(): iterable
    {
        foreach (
            [
                'redis://h',
                'redis://h/',
                'redis://h/x/y/z',
                'redis://h/-1/q',
                'redis://h/db/q',
                'redis://h/q?x=1',
                'redis://h/q#f',
                'redis://h/bad%20name',
                'redis://h/a{b}',
                'redis://h/0/..',
                'redis://h/.',
                'redis://h:0/q',
                'redis://h:abc/q',
                'redis://h h/q',
                'redis://[::g]/q',
                'redis://h/' . str_repeat('a', 129),
                'rediss://h/q',
                'redis+unix:///tmp/redis.sock',
                'amqp://h/q',
                'redis://:topsecret@/q',
                'redis://u:topsecret@h:99999/q',
                'redis://u:topsecret@h/q?x',
                'redis://:%ff%fetopsecret@h/q',
                'file://host/q.db',
                'file:',
                "file:/q\0.db",
            ] as $url
        ) {
            yield $url => [$url];
        }
    }

    /** @dataProvider refused */
    public function testRefusedUrlsSaySoWithoutThePassword(string $url): void
    {
        // Traces with their arguments, as a development php.ini has them.
        $previous = ini_set('zend.exception_ignore_args', '0');
        try {
            Queue::open($url);
        } catch (QueueError $e) {
            self::assertSame(QueueError::URL, $e->getCode(), $e->getMessage());
            self::assertStringStartsWith('queue URL: ', $e->getMessage());
            self::assertStringNotContainsString('topsecret', $e->getMessage());
            // The library's frames (the test runner's below hold the data sets).
            $ours = array_filter(
                $e->getTrace(),
                fn (array $f) => preg_match('/\A Hearth\\\\(?!Tests)/x', $f['class'] ?? '') === 1,
            );
            self::assertNotEmpty($ours);
            self::assertStringNotContainsString('topsecret', var_export($ours, true));
            return;
        } finally {
            ini_set('zend.exception_ignore_args', (string) $previous);
        }
        self::fail("{$url} was accepted");
    }

    public function testTheLongestNameIsAccepted(): void
    {
        $name = str_repeat('a', 128);
        self::assertSame($name, QueueUrl::parse("redis://h/{$name}")->name);
        self::assertSame('a.b_c-D9', QueueUrl::parse('redis://h/1/a.b_c-D9')->name);
    }

    public function testRedactHidesOnlyThePassword(): void
    {
        self::assertSame('redis://u:***@h/q', QueueUrl::redact('redis://u:p@ss@h/q'));
        self::assertSame('redis://u@h/q', QueueUrl::redact('redis://u@h/q'));
        self::assertSame('redis://h/q', QueueUrl::redact('redis://h/q'));
        self::assertSame('no scheme', QueueUrl::redact('no scheme'));
    }

    public function testSettingsOutOfRangeAreRefused(): void
    {
        foreach (
            [
                fn () => Queue::open('redis://h/q', connectTimeout: 0),
                fn () => Queue::open('redis://h/q', timeout: -1),
                fn () => Queue::open('redis://h/q', timeout: NAN),
                fn () => Queue::open('file:q.db', busyTimeout: 0),
                fn () => Queue::open('redis://h/q', maxPayload: 0),
            ] as $open
        ) {
            try {
                $open();
                self::fail('accepted');
            } catch (QueueError $e) {
                self::assertSame(QueueError::INVALID, $e->getCode(), $e->getMessage());
            }
        }
    }
}
