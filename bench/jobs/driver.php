<?php

/**
 * The producer side of bench/jobs.py, for each system with its own API:
 *
 *   hearth     Hearth\Queue::open('redis://HOST:PORT/bench')->pushMany()
 *              (push() one at a time for latency)
 *   messenger  $bus->dispatch(new Run(...)) on the Messenger app's bus
 *              (messenger/app.php): one XADD each
 *   laravel    App\Jobs\Run::dispatch(...) in the booted Laravel app
 *              (laravel/): one EVAL (RPUSH to the queue and its notify list) each
 *
 *   php driver.php --mode push --system S --kind trivial|invoice -m M
 *       Pushes jobs ARG = 1..M and prints one JSON line: {"pushed": M,
 *       "expected_sum": the sum of BenchJobs\value() over them, "seconds"}.
 *   php driver.php --mode latency --system S -m K [--gap MS]
 *       With a consumer running: one warm-up job, then K times: wait --gap ms
 *       (default 20), note microtime(true), push one latency job, wait for
 *       its "K START" on bench:lat (BLPOP). Prints {"samples": [START - PUSH
 *       in seconds, ...]}.
 *
 * Environment: BENCH_REDIS=HOST:PORT. Exits 1 when a latency job answers
 * out of turn or not within 30 s.
 */

declare(strict_types=1);

$options = getopt('m:', ['mode:', 'system:', 'kind:', 'gap:']);
$mode = (string) ($options['mode'] ?? '');
$system = (string) ($options['system'] ?? '');
$kind = (string) ($options['kind'] ?? 'trivial');
$m = (int) ($options['m'] ?? 0);
$gapMs = (float) ($options['gap'] ?? 20);
if (
    !in_array($mode, ['push', 'latency'], true) || !in_array($system, ['hearth', 'messenger', 'laravel'], true)
    || !in_array($kind, ['trivial', 'invoice'], true) || $m < 1
) {
    fwrite(STDERR, "usage: php driver.php --mode push|latency --system hearth|messenger|laravel [--kind trivial|invoice] -m M\n");
    exit(2);
}
$redis = (string) getenv('BENCH_REDIS');

/** @return callable(list<array{string, int}>): void pushes jobs [kind, arg] */
function producer(string $system, string $redis): callable
{
    switch ($system) {
        case 'hearth':
            require_once dirname(__DIR__, 2) . '/php/autoload.php';
            require_once __DIR__ . '/jobs.php';
            $queue = Hearth\Queue::open("redis://$redis/bench");
            return static function (array $jobs) use ($queue): void {
                if (count($jobs) === 1) {
                    $queue->push('BenchJobs\run', $jobs[0]);
                    return;
                }
                $queue->pushMany(array_map(static fn (array $job) => Hearth\QueueJob::call('BenchJobs\run', $job), $jobs));
            };
        case 'messenger':
            [$bus] = (require __DIR__ . '/messenger/app.php')();
            return static function (array $jobs) use ($bus): void {
                foreach ($jobs as [$kind, $arg]) {
                    $bus->dispatch(new BenchJobs\Messenger\Run($kind, $arg));
                }
            };
        default:
            require __DIR__ . '/laravel/bootstrap/autoload.php';
            $app = require __DIR__ . '/laravel/bootstrap/app.php';
            $app->make(Illuminate\Contracts\Console\Kernel::class)->bootstrap();
            return static function (array $jobs): void {
                foreach ($jobs as [$kind, $arg]) {
                    App\Jobs\Run::dispatch($kind, $arg);
                }
            };
    }
}

$push = producer($system, $redis);

if ($mode === 'push') {
    $jobs = [];
    $expected = 0;
    for ($i = 1; $i <= $m; $i++) {
        $jobs[] = [$kind, $i];
        $expected += BenchJobs\value($kind, $i);
    }
    $started = hrtime(true);
    $push($jobs);
    $seconds = (hrtime(true) - $started) / 1e9;
    echo json_encode(['pushed' => $m, 'expected_sum' => $expected, 'seconds' => $seconds]), "\n";
    exit(0);
}

$wait = new Redis();
[$host, $port] = explode(':', $redis);
$wait->connect($host, (int) $port, 5.0);
$wait->setOption(Redis::OPT_READ_TIMEOUT, 40);
$samples = [];
for ($k = 0; $k <= $m; $k++) {
    usleep((int) ($gapMs * 1000));
    $pushed = microtime(true);
    $push([['latency', $k]]);
    $got = $wait->blPop(['bench:lat'], 30);
    if (!is_array($got) || count($got) !== 2) {
        fwrite(STDERR, "driver.php: latency job $k did not start within 30 s\n");
        exit(1);
    }
    [$seen, $start] = explode(' ', $got[1]);
    if ((int) $seen !== $k) {
        fwrite(STDERR, "driver.php: waited for latency job $k, got job $seen\n");
        exit(1);
    }
    if ($k > 0) {  // job 0 warms up: the consumer's first job
        $samples[] = (float) $start - $pushed;
    }
}
echo json_encode(['samples' => $samples]), "\n";
