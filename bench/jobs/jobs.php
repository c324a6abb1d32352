<?php

/**
 * The job every system of bench/jobs.py runs: the same PHP code, called by
 * `hearth work` (hearth-bootstrap.php), by a Symfony Messenger handler
 * (messenger/app.php) and by a Laravel job's handle() (laravel/app/).
 *
 *   BenchJobs\run('trivial', $i)   does nothing but report (value $i)
 *   BenchJobs\run('invoice', $i)   prices order $i with the task benchmark's
 *                                  app (../tasks/app: BenchApp\Jobs\invoice)
 *                                  and reports the invoice's total
 *   BenchJobs\run('latency', $k)   records when it started, first thing
 *
 * A job reports to the benchmark's Redis (BENCH_REDIS=HOST:PORT) in one
 * round trip, a Lua script: it counts the job (bench:done), adds its value
 * to bench:sum, and keeps the earliest start (bench:first) and the latest
 * end (bench:last), both microtime(true). bench/jobs.py checks the count
 * and the sum against what the producer pushed, and takes the throughput
 * from the earliest start to the latest end. A latency job pushes
 * "K START" to the list bench:lat, which the producer waits on (BLPOP).
 *
 * Requiring this file boots the invoice app (config, container, catalog):
 * each consumer process pays that once, at start, whatever the system.
 */

declare(strict_types=1);

namespace BenchJobs;

require_once dirname(__DIR__) . '/tasks/app/bootstrap.php';

/** The job. */
function run(string $kind, int $arg): void
{
    $started = microtime(true);
    if ($kind === 'latency') {
        Report::redis()->rPush('bench:lat', sprintf('%d %.6F', $arg, $started));
        return;
    }
    Report::done($started, value($kind, $arg), microtime(true));
}

/** What job ($kind, $arg) adds to bench:sum; the producer adds these up to check. */
function value(string $kind, int $arg): int
{
    return match ($kind) {
        'trivial' => $arg,
        'invoice' => \BenchApp\Jobs\invoice($arg)['total'],
        default => throw new \InvalidArgumentException("unknown job kind: $kind"),
    };
}

/** The consumer process's connection to the benchmark's Redis (phpredis). */
final class Report
{
    private const SCRIPT = <<<'LUA'
        local first = redis.call('GET', KEYS[1])
        if not first or tonumber(ARGV[1]) < tonumber(first) then
            redis.call('SET', KEYS[1], ARGV[1])
        end
        local last = redis.call('GET', KEYS[4])
        if not last or tonumber(ARGV[3]) > tonumber(last) then
            redis.call('SET', KEYS[4], ARGV[3])
        end
        redis.call('INCRBY', KEYS[3], ARGV[2])
        return redis.call('INCR', KEYS[2])
        LUA;

    private static ?\Redis $redis = null;

    public static function redis(): \Redis
    {
        if (self::$redis === null) {
            $address = (string) getenv('BENCH_REDIS');
            if (!preg_match('/^([0-9.]+):([0-9]+)$/', $address, $m)) {
                throw new \RuntimeException("BENCH_REDIS must be HOST:PORT, not '$address'");
            }
            $redis = new \Redis();
            $redis->connect($m[1], (int) $m[2], 5.0);
            self::$redis = $redis;
        }
        return self::$redis;
    }

    public static function done(float $started, int $value, float $ended): void
    {
        $redis = self::redis();
        $args = ['bench:first', 'bench:done', 'bench:sum', 'bench:last',
            sprintf('%.6F', $started), (string) $value, sprintf('%.6F', $ended)];
        $n = $redis->evalSha(sha1(self::SCRIPT), $args, 4);
        if ($n === false) {
            $redis->clearLastError();
            $n = $redis->eval(self::SCRIPT, $args, 4);
        }
        if (!is_int($n)) {
            throw new \RuntimeException('reporting to Redis failed: ' . (string) $redis->getLastError());
        }
    }
}
