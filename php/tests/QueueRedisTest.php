<?php

declare(strict_types=1);

namespace Hearth\Tests;

use Hearth\Internal\Queue\RedisPushScript;
use Hearth\Queue;
use Hearth\QueueError;
use Hearth\QueueJob;
use Hearth\Tests\Support\RedisServer;
use PHPUnit\Framework\TestCase;

/**
 * Hearth\Queue against a real redis-server started for each test. That a
 * consumer (the hearth-queue crate) takes these jobs as its own is
 * crates/hearth-queue/tests/php_producer.rs; here, what is stored, and the
 * connection: AUTH, SELECT, NOSCRIPT, timeouts, reconnects, errors.
 */
final class QueueRedisTest extends TestCase
{
    private ?RedisServer $redis = null;

    protected function tearDown(): void
    {
        $this->redis?->stop();
        $this->redis = null;
    }

    private function redis(array $args = [], string $adminAuth = ''): RedisServer
    {
        return $this->redis = RedisServer::start($args, $adminAuth);
    }

    /** @return array<string, string> the fields of a stream entry, in their order */
    private static function fields(array $entry): array
    {
        $out = [];
        for ($i = 0; $i < count($entry[1]); $i += 2) {
            $out[$entry[1][$i]] = $entry[1][$i + 1];
        }
        return $out;
    }

    private static function assertQueueError(int $kind, callable $f): QueueError
    {
        try {
            $f();
        } catch (QueueError $e) {
            self::assertSame($kind, $e->getCode(), $e->getMessage());
            return $e;
        }
        self::fail('no QueueError was thrown');
    }

    public function testAJobIsStoredWithTheFieldsOfTheCrate(): void
    {
        $redis = $this->redis();
        $queue = Queue::open($redis->url('mail'));
        $before = (int) $redis->command('TIME')[0] * 1000;
        $id = $queue->push('App\Mail::send', ['ann@example.com'], attempts: 5, replyTo: 'batch-1', backoff: 0.25);
        $after = ((int) $redis->command('TIME')[0] + 1) * 1000;
        self::assertSame(1, $id);

        $entries = $redis->command('XRANGE', 'hearth:{mail}:ready', '-', '+');
        self::assertCount(1, $entries);
        $fields = self::fields($entries[0]);
        self::assertSame(
            ['id', 'payload', 'attempts', 'max', 'backoff', 'backoff_max', 'at', 'reply'],
            array_keys($fields),
        );
        self::assertSame('1', $fields['id']);
        self::assertSame('{"call":"App\\\\Mail::send","args":["ann@example.com"]}', $fields['payload']);
        self::assertSame(['0', '5', '250', '300000', 'batch-1'], [
            $fields['attempts'], $fields['max'], $fields['backoff'], $fields['backoff_max'], $fields['reply'],
        ]);
        self::assertGreaterThanOrEqual($before, (int) $fields['at']);
        self::assertLessThanOrEqual($after, (int) $fields['at']);
        self::assertSame('1', $redis->command('GET', 'hearth:{mail}:seq'));
        self::assertSame(['pushed', '1'], $redis->command('HGETALL', 'hearth:{mail}:stats'));
    }

    public function testAJobWithoutReplyToHasNoReplyField(): void
    {
        $redis = $this->redis();
        Queue::open($redis->url())->pushShell(['convert', 'a.png', 'b.jpg'], timeout: 30);
        $fields = self::fields($redis->command('XRANGE', 'hearth:{q}:ready', '-', '+')[0]);
        self::assertArrayNotHasKey('reply', $fields);
        self::assertSame('{"argv":["convert","a.png","b.jpg"],"timeout":30}', $fields['payload']);
        self::assertSame('3', $fields['max']);
    }

    public function testADelayedJobWaitsInTheSortedSetForItsTime(): void
    {
        $redis = $this->redis();
        $id = Queue::open($redis->url())->push('App\later', delay: 60.5, replyTo: 'r');
        self::assertSame(0, $redis->command('XLEN', 'hearth:{q}:ready'));
        // The member is the msgpack'd field list, as the crate's script packs it.
        $fields = $redis->command(
            'EVAL',
            "return cmsgpack.unpack(redis.call('ZRANGE', KEYS[1], 0, 0)[1])",
            '1',
            'hearth:{q}:delayed',
        );
        $score = (int) $redis->command('ZRANGE', 'hearth:{q}:delayed', '0', '0', 'WITHSCORES')[1];
        $named = self::fields([0, $fields]);
        self::assertSame((string) $id, $named['id']);
        self::assertSame('{"call":"App\\\\later","args":[]}', $named['payload']);
        self::assertSame('r', $named['reply']);
        self::assertSame(60500, $score - (int) $named['at']);
    }

    public function testABatchIsCutAsTheCrateCutsIt(): void
    {
        $redis = $this->redis();
        $jobs = [];
        for ($i = 0; $i < 1201; $i++) {
            $jobs[] = QueueJob::call('App\n', [$i]);
        }
        $ids = Queue::open($redis->url())->pushMany($jobs);
        self::assertSame(range(1, 1201), $ids);
        self::assertSame(1201, $redis->command('XLEN', 'hearth:{q}:ready'));
        // 500 + 500 + 201 jobs: three script calls (the first one's
        // NOSCRIPT answered with EVAL, the script being new to Redis).
        self::assertSame(3, $redis->commandStat('evalsha') + $redis->commandStat('eval')
            - $redis->commandStat('evalsha', 'failed_calls'));
        $last = self::fields($redis->command('XREVRANGE', 'hearth:{q}:ready', '+', '-', 'COUNT', '1')[0]);
        self::assertSame('{"call":"App\\\\n","args":[1200]}', $last['payload']);
    }

    public function testNoscriptFallsBackToEvalThenTheCachedScriptIsUsed(): void
    {
        $redis = $this->redis();
        $queue = Queue::open($redis->url());
        $queue->push('App\one');
        self::assertSame(1, $redis->commandStat('evalsha', 'failed_calls'));
        self::assertSame(1, $redis->commandStat('eval'));
        self::assertSame([1], $redis->command('SCRIPT', 'EXISTS', sha1(RedisPushScript::TEXT)));
        $queue->push('App\two');
        self::assertSame(2, $redis->commandStat('evalsha'));
        self::assertSame(1, $redis->commandStat('eval'), 'no EVAL once the script is cached');

        $redis->command('SCRIPT', 'FLUSH');
        self::assertSame(3, $queue->push('App\three'));
        self::assertSame(2, $redis->commandStat('eval'));
        self::assertSame(3, $redis->command('XLEN', 'hearth:{q}:ready'));
    }

    public function testPasswordUserAndDatabase(): void
    {
        $redis = $this->redis(
            ['--requirepass', 's@cr/t', '--user', 'app', 'on', '>app:pw', '~*', '&*', '+@all'],
            ':s%40cr%2Ft',
        );
        Queue::open($redis->url('q', ':s%40cr%2Ft', 3))->push('App\a');
        Queue::open($redis->url('q', 'app:app%3Apw', 3))->push('App\b');
        self::assertSame(0, $redis->command('XLEN', 'hearth:{q}:ready'));
        self::assertSame(2, $redis->commandIn(3, 'XLEN', 'hearth:{q}:ready'));
    }

    public function testARefusedPasswordIsAnEngineErrorThatNeverShowsIt(): void
    {
        $redis = $this->redis(['--requirepass', 'right'], ':right');
        $previous = ini_set('zend.exception_ignore_args', '0');
        try {
            $url = $redis->url('q', 'app:wrong-topsecret');
            $queue = Queue::open($url);
            $e = self::assertQueueError(QueueError::ENGINE, fn () => $queue->push('App\a'));
            self::assertStringContainsString("redis://app:***@127.0.0.1:{$redis->port}/0/q", $e->getMessage());
            self::assertStringContainsString('AUTH refused', $e->getMessage());
            // The library's frames, with their arguments (the test runner's
            // below them hold the other tests' data sets).
            $ours = array_filter(
                $e->getTrace(),
                fn (array $f) => preg_match('/\A Hearth\\\\(?!Tests)/x', $f['class'] ?? '') === 1,
            );
            self::assertCount(4, $ours);
            $trace = var_export($ours, true);
            foreach ([$e->getMessage(), $e->getTraceAsString(), print_r($queue, true), $trace] as $shown) {
                self::assertStringNotContainsString('topsecret', $shown);
            }
            ob_start();
            var_dump($queue);
            self::assertStringNotContainsString('topsecret', (string) ob_get_clean());
            // Without a password at all.
            $e = self::assertQueueError(QueueError::ENGINE, fn () => Queue::open($redis->url())->push('App\a'));
            self::assertStringContainsString('Redis wants a password', $e->getMessage());
        } finally {
            ini_set('zend.exception_ignore_args', (string) $previous);
        }
        self::assertSame(0, $redis->command('XLEN', 'hearth:{q}:ready'));
    }

    public function testAnUnreachableRedisIsUnavailable(): void
    {
        $port = RedisServer::freePort();
        $queue = Queue::open("redis://:topsecret@127.0.0.1:{$port}/q", connectTimeout: 2.0);
        $e = self::assertQueueError(QueueError::UNAVAILABLE, fn () => $queue->push('App\a'));
        self::assertStringContainsString("redis://:***@127.0.0.1:{$port}/0/q: cannot connect", $e->getMessage());
        self::assertStringNotContainsString('topsecret', $e->getMessage());
    }

    public function testARedisThatDoesNotAnswerTimesOutAndTheConnectionIsClosed(): void
    {
        // Connections queue in the backlog of a socket nobody accepts from:
        // connected, written to, never answered.
        $server = stream_socket_server('tcp://127.0.0.1:0');
        self::assertIsResource($server);
        $name = (string) stream_socket_get_name($server, false);
        $queue = Queue::open("redis://{$name}/q", timeout: 0.2);
        $started = microtime(true);
        $e = self::assertQueueError(QueueError::UNAVAILABLE, fn () => $queue->push('App\a'));
        self::assertStringContainsString('no reply within 0.2 s', $e->getMessage());
        self::assertGreaterThanOrEqual(0.2, microtime(true) - $started);
        // The next push connects again (it does not read the late reply
        // of the last one): a second connection arrives.
        $first = stream_socket_accept($server, 1);
        self::assertIsResource($first);
        self::assertQueueError(QueueError::UNAVAILABLE, fn () => $queue->push('App\b'));
        $second = stream_socket_accept($server, 1);
        self::assertIsResource($second, 'the push after a timeout opens a new connection');
        fclose($first);
        fclose($second);
        fclose($server);
    }

    public function testAConnectionRedisClosedIsOpenedAgainBeforeThePush(): void
    {
        $redis = $this->redis();
        $queue = Queue::open($redis->url());
        self::assertSame(1, $queue->push('App\a'));
        $redis->command('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
        self::assertSame(2, $queue->push('App\b'));
        $redis->restart();
        self::assertSame(3, $queue->push('App\c'), 'the sequence survives a restart (AOF)');
        self::assertSame(3, $redis->command('XLEN', 'hearth:{q}:ready'));
    }

    /**
     * Runs $test with a port where a process (not Redis) answers the first
     * connection's first bytes with $answer.
     *
     * @param callable(int): void $test
     */
    private static function withFakeRedis(string $answer, callable $test): void
    {
        $port = RedisServer::freePort();
        $script = '$s = stream_socket_server("tcp://127.0.0.1:' . $port . '"); echo "ready\n";'
            . '$c = stream_socket_accept($s, 10); fread($c, 100);'
            . 'fwrite($c, ' . var_export($answer, true) . '); sleep(5);';
        $process = proc_open([PHP_BINARY, '-n', '-r', $script], [1 => ['pipe', 'w']], $pipes);
        self::assertIsResource($process);
        try {
            self::assertSame("ready\n", fgets($pipes[1]));
            $test($port);
        } finally {
            proc_terminate($process, 9);
            proc_close($process);
        }
    }

    public function testSomethingElseThanRedisIsAnEngineError(): void
    {
        self::withFakeRedis("HTTP/1.1 400 Bad Request\r\n\r\n", function (int $port): void {
            $e = self::assertQueueError(
                QueueError::ENGINE,
                fn () => Queue::open("redis://127.0.0.1:{$port}/q", timeout: 5.0)->push('App\a'),
            );
            self::assertStringContainsString('not a Redis server?', $e->getMessage());
        });
    }

    public function testARedisLoadingItsDataIsUnavailable(): void
    {
        $loading = "-LOADING Redis is loading the dataset in memory\r\n";
        self::withFakeRedis($loading, function (int $port): void {
            $e = self::assertQueueError(
                QueueError::UNAVAILABLE,
                fn () => Queue::open("redis://127.0.0.1:{$port}/q")->push('App\a'),
            );
            self::assertStringContainsString('LOADING', $e->getMessage());
            self::assertStringContainsString('nothing was stored', $e->getMessage());
        });
        self::withFakeRedis($loading, function (int $port): void {
            $e = self::assertQueueError(
                QueueError::UNAVAILABLE,
                fn () => Queue::open("redis://:pw@127.0.0.1:{$port}/q")->push('App\a'),
            );
            self::assertStringContainsString('AUTH refused: LOADING', $e->getMessage());
        });
    }

    public function testAPayloadOverTheLimitRefusesTheBatch(): void
    {
        $redis = $this->redis();
        $queue = Queue::open($redis->url());
        $overhead = strlen('{"call":"f","args":[""]}');
        $atLimit = QueueJob::call('f', [str_repeat('x', Queue::MAX_PAYLOAD - $overhead)]);
        self::assertSame(Queue::MAX_PAYLOAD, strlen($atLimit->payload));
        $over = QueueJob::call('f', [str_repeat('x', Queue::MAX_PAYLOAD - $overhead + 1)]);
        $e = self::assertQueueError(QueueError::TOO_LARGE, fn () => $queue->pushMany([$atLimit, $over]));
        self::assertSame('payload of 1048577 bytes is over the limit of 1048576 bytes', $e->getMessage());
        self::assertSame(0, $redis->command('EXISTS', 'hearth:{q}:ready'), 'nothing of the batch was stored');
        self::assertSame([1], $queue->pushMany([$atLimit]));

        $small = Queue::open($redis->url(), maxPayload: 10);
        self::assertQueueError(QueueError::TOO_LARGE, fn () => $small->push('App\a'));
    }

    public function testARefusingRedisSaysNothingWasStored(): void
    {
        $redis = $this->redis();
        $redis->command('SET', 'hearth:{q}:ready', 'not a stream');
        $e = self::assertQueueError(QueueError::ENGINE, fn () => Queue::open($redis->url())->push('App\a'));
        self::assertStringContainsString('WRONGTYPE', $e->getMessage());
        self::assertStringContainsString('nothing was stored', $e->getMessage());
    }

    public function testABatchRefusedPartwaySaysWhatWasStored(): void
    {
        $redis = $this->redis();
        $redis->command('SET', 'hearth:{q}:delayed', 'not a sorted set');
        $jobs = array_fill(0, 500, QueueJob::call('App\now'));
        $jobs[] = QueueJob::call('App\later', delay: 10);
        $e = self::assertQueueError(QueueError::ENGINE, fn () => Queue::open($redis->url())->pushMany($jobs));
        self::assertStringContainsString('push of jobs 501 to 501 of 501: WRONGTYPE', $e->getMessage());
        self::assertStringContainsString('; 500 jobs of the batch were stored by its other calls', $e->getMessage());
        self::assertSame(500, $redis->command('XLEN', 'hearth:{q}:ready'));
    }

    public function testAnEmptyBatchStoresNothingAndConnectsToNothing(): void
    {
        $queue = Queue::open('redis://127.0.0.1:' . RedisServer::freePort() . '/q');
        self::assertSame([], $queue->pushMany([]));
    }
}
