<?php

declare(strict_types=1);

namespace Hearth\Tests;

use Hearth\QueueError;
use Hearth\QueueJob;
use PHPUnit\Framework\TestCase;

/**
 * A job's payload is a `hearth run` task line (docs/task-runner.md), and
 * its options the crate's NewJob in ms; what cannot make a job is refused
 * here, naming the value.
 */
final class QueueJobTest extends TestCase
{
    /** @return iterable<string, array{QueueJob, string}> */
    public function payloads(): iterable
    {
        yield 'positional arguments' => [
            QueueJob::call('App\Mail::send', ['a@b.c', 2]),
            '{"call":"App\\\\Mail::send","args":["a@b.c",2]}',
        ];
        yield 'named arguments' => [
            QueueJob::call('App\greet', ['name' => 'Bob', 'greeting' => 'Hi']),
            '{"call":"App\\\\greet","args":{"name":"Bob","greeting":"Hi"}}',
        ];
        yield 'no arguments' => [QueueJob::call('strtoupper'), '{"call":"strtoupper","args":[]}'];
        yield 'a leading backslash' => [QueueJob::call('\App\f'), '{"call":"App\\\\f","args":[]}'];
        yield 'floats stay floats, text as it is' => [
            QueueJob::call('f', [1.0, 'é/€', null, true, ['k' => [1]]]),
            '{"call":"f","args":[1.0,"é/€",null,true,{"k":[1]}]}',
        ];
        yield 'a timeout in seconds' => [QueueJob::call('f', timeout: 1.5), '{"call":"f","args":[],"timeout":1.5}'];
        yield 'a timeout as a duration' => [
            QueueJob::call('f', timeout: '500ms'),
            '{"call":"f","args":[],"timeout":"500ms"}',
        ];
        yield 'a shell command' => [
            QueueJob::shell('convert a.png b.jpg', timeout: 30),
            '{"cmd":"convert a.png b.jpg","timeout":30}',
        ];
        yield 'a program and its arguments' => [
            QueueJob::shell(['wc', '-c', 'b c.txt']),
            '{"argv":["wc","-c","b c.txt"]}',
        ];
        yield 'every shell key' => [
            QueueJob::shell('cat', timeout: '2m', env: ['A' => '1'], cwd: '/tmp', stdin: "in\n"),
            '{"cmd":"cat","env":{"A":"1"},"cwd":"/tmp","stdin":"in\n","timeout":"2m"}',
        ];
        yield 'an empty env is an object' => [QueueJob::shell('true', env: []), '{"cmd":"true","env":{}}'];
    }

    /** @dataProvider payloads */
    public function testThePayloadIsATaskLine(QueueJob $job, string $payload): void
    {
        self::assertSame($payload, $job->payload);
        self::assertIsArray(json_decode($job->payload, true, 512, JSON_THROW_ON_ERROR));
    }

    public function testDefaultsAreTheCratesAndTimesAreMilliseconds(): void
    {
        $job = QueueJob::call('f');
        $options = fn (QueueJob $j) => [$j->attempts, $j->backoffMs, $j->backoffMaxMs, $j->delayMs, $j->replyTo];
        self::assertSame([3, 1000, 300000, 0, null], $options($job));
        $job = QueueJob::shell('true', delay: 1.5, attempts: 7, replyTo: 'a-b_c.1', backoff: 0.25, backoffMax: 2);
        self::assertSame([7, 250, 2000, 1500, 'a-b_c.1'], $options($job));
        self::assertSame(0, QueueJob::call('f', backoff: 0, backoffMax: 0)->backoffMs);
        self::assertSame(4294967295, QueueJob::call('f', attempts: 4294967295)->attempts);
    }

    /** @return iterable<string, array{callable(): QueueJob, string}> */
    public function refused(): iterable
    {
        yield 'an empty call' => [fn () => QueueJob::call(''), 'call must name a function'];
        yield 'a call that is no name' => [fn () => QueueJob::call('App\Mail->send'), 'call must name a function'];
        yield 'a closure\'s text' => [fn () => QueueJob::call('fn() => 1'), 'call must name a function'];
        yield 'mixed arguments' => [fn () => QueueJob::call('f', [1, 'name' => 2]), 'not both'];
        yield 'arguments JSON cannot hold' => [fn () => QueueJob::call('f', ["\xff"]), 'cannot be encoded as JSON'];
        yield 'INF' => [fn () => QueueJob::call('f', [INF]), 'cannot be encoded as JSON'];
        yield 'no attempt' => [fn () => QueueJob::call('f', attempts: 0), 'attempts must be from 1'];
        yield 'too many attempts' => [fn () => QueueJob::call('f', attempts: 4294967296), 'attempts must be from 1'];
        yield 'a negative delay' => [fn () => QueueJob::call('f', delay: -1), 'delay must be 0 or more'];
        yield 'a NAN delay' => [fn () => QueueJob::call('f', delay: NAN), 'delay must be 0 or more'];
        yield 'a delay of centuries' => [fn () => QueueJob::call('f', delay: 1e10), 'delay must be 0 or more'];
        yield 'a negative backoff' => [fn () => QueueJob::call('f', backoff: -0.5), 'backoff must be 0 or more'];
        yield 'an INF backoff cap' => [
            fn () => QueueJob::shell('true', backoffMax: INF),
            'backoffMax must be 0 or more',
        ];
        yield 'a zero timeout' => [fn () => QueueJob::call('f', timeout: 0), 'timeout must be a positive'];
        yield 'a zero duration' => [fn () => QueueJob::call('f', timeout: '0ms'), 'timeout must be a positive'];
        yield 'a duration in days' => [fn () => QueueJob::shell('true', timeout: '1d'), 'timeout must be a positive'];
        yield 'a duration with an exponent' => [
            fn () => QueueJob::shell('true', timeout: '1e3'),
            'timeout must be a positive',
        ];
        yield 'a reply-to with a space' => [fn () => QueueJob::call('f', replyTo: 'a b'), 'reply-to channel "a b"'];
        yield 'a reply-to of ..' => [fn () => QueueJob::call('f', replyTo: '..'), 'reply-to channel ".."'];
        yield 'an empty reply-to' => [fn () => QueueJob::call('f', replyTo: ''), 'reply-to channel ""'];
        yield 'a reply-to too long' => [
            fn () => QueueJob::call('f', replyTo: str_repeat('a', 129)),
            'expected 1 to 128',
        ];
        yield 'an empty command' => [fn () => QueueJob::shell(' '), 'the shell command is empty'];
        yield 'an empty argv' => [fn () => QueueJob::shell([]), 'must be a list'];
        yield 'an argv with a number' => [fn () => QueueJob::shell(['sleep', 1]), 'must be a string, got int'];
        yield 'an env name with =' => [fn () => QueueJob::shell('true', env: ['A=B' => 'c']), 'env must map'];
        yield 'an env value not a string' => [fn () => QueueJob::shell('true', env: ['A' => 1]), 'env must map'];
        yield 'an empty cwd' => [fn () => QueueJob::shell('true', cwd: ''), 'cwd must be'];
    }

    /**
     * @dataProvider refused
     * @param callable(): QueueJob $make
     */
    public function testWhatCannotMakeAJobIsRefusedByName(callable $make, string $why): void
    {
        try {
            $make();
        } catch (QueueError $e) {
            self::assertSame(QueueError::INVALID, $e->getCode());
            self::assertStringContainsString($why, $e->getMessage());
            return;
        }
        self::fail('accepted');
    }

    public function testTheLongestNameIsAccepted(): void
    {
        self::assertSame(str_repeat('a', 128), QueueJob::call('f', replyTo: str_repeat('a', 128))->replyTo);
    }
}
