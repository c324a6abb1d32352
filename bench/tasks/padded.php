<?php

/**
 * One measurement run of bench/tasks.py: pads this PHP process's heap to
 * --mb megabytes, then runs the same N shell tasks through each --methods,
 * for each --tests, and prints one JSON line per (test, method) on stdout.
 *
 *     php bench/tasks/padded.php --mb 500 -n 1000 --methods exec-loop,proc-pool \
 *         --tests spawn,sleep [--spawn-pool 8] [--sleep-pool 16] [--hearth BIN]
 *
 * Tests (the seed's two, test/benchmark.php):
 *   spawn  task i is `echo i`                        (the seed's -s0, pool 8)
 *   sleep  task i is `sleep 0.00X && echo i`, X = i % 10 + 1 ms, from
 *          0.001 to 0.01 s                           (the seed's default, -p16)
 *
 * Methods:
 *   exec-loop      (a) shell_exec() per task, one after the other
 *   proc-pool      (b) ProcessPool in this (padded) process
 *   separate-pool  (c) ProcessPool in a small child PHP process (SeparatePool)
 *   hearth         (d) Hearth\TaskRunner (`hearth run`)
 *   xargs          (e) `xargs -P` started from this process, `sh -c` per task
 *
 * Every run checks that the outputs sum to 0 + 1 + ... + (N - 1) and that
 * every task exited 0, and exits 1 (after printing what it got) otherwise.
 */

declare(strict_types=1);

require __DIR__ . '/ProcessPool.php';
require __DIR__ . '/SeparatePool.php';

use HearthBench\ProcessPool;
use HearthBench\SeparatePool;

const METHODS = ['exec-loop', 'proc-pool', 'separate-pool', 'hearth', 'xargs'];
const TESTS = ['spawn', 'sleep'];

/** The padding: kept alive for the whole run, as the seed's static $datas. */
$GLOBALS['padding'] = [];

/**
 * The seed's increaseMemoryUsage(): rows of five 10-character random
 * strings, 100 rows at a time, until memory_get_usage(true) reaches $mb MB.
 */
function pad(int $mb): int
{
    $alphabet = '0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ';
    $target = $mb * 1024 * 1024;
    while (memory_get_usage(true) < $target) {
        for ($i = 0; $i < 100; $i++) {
            $row = [];
            for ($p = 0; $p < 5; $p++) {
                $row["property_$p"] = substr(str_shuffle($alphabet), 0, 10);
            }
            $GLOBALS['padding'][] = $row;
        }
    }
    return count($GLOBALS['padding']);
}

/** @return list<string> the seed's task commands */
function commands(string $test, int $n): array
{
    $commands = [];
    for ($i = 0; $i < $n; $i++) {
        // The seed's "sleep " . round(($i % 10 + 1) / 1000, 3): 0.001 ... 0.01.
        $commands[] = $test === 'sleep' ? 'sleep ' . round(($i % 10 + 1) / 1000, 3) . " && echo $i" : "echo $i";
    }
    return $commands;
}

function rssMb(): float
{
    preg_match('/^VmRSS:\s+(\d+) kB/m', (string) file_get_contents('/proc/self/status'), $m);
    return round((int) ($m[1] ?? 0) / 1024, 1);
}

/**
 * Runs $commands through $method.
 *
 * @param list<string> $commands
 * @return array{sum: int, results: int, failed: int} the sum of the outputs,
 *         how many results came back and how many tasks did not exit 0
 */
function runMethod(string $method, array $commands, int $concurrency, string $hearth): array
{
    $sum = 0;
    $results = 0;
    $failed = 0;
    $collect = static function (int $status, string $stdout) use (&$sum, &$results, &$failed): void {
        $sum += (int) $stdout;
        $results++;
        $failed += $status === 0 ? 0 : 1;
    };
    switch ($method) {
        case 'exec-loop':
            // The seed's ForLoopExec: shell_exec() gives no exit status.
            foreach ($commands as $command) {
                $collect(0, (string) shell_exec($command));
            }
            break;
        case 'proc-pool':
            $pool = new ProcessPool(
                $concurrency,
                static fn (string $id, int $status, string $out, string $err) => $collect($status, $out)
            );
            foreach ($commands as $i => $command) {
                $pool->add("job$i", $command);
            }
            $pool->finish();
            break;
        case 'separate-pool':
            $runner = new SeparatePool($concurrency);
            foreach ($commands as $i => $command) {
                $runner->add("job$i", $command);
            }
            $runner->runAndWait(static fn (array $r) => $collect((int) $r['status'], (string) $r['stdout']));
            break;
        case 'hearth':
            $runner = new Hearth\TaskRunner($concurrency, binary: $hearth);
            foreach ($commands as $i => $command) {
                $runner->add("task_$i", $command);
            }
            $runner->runAndWait(static function (array $r) use ($collect): void {
                $collect(is_int($r['status'] ?? null) ? $r['status'] : -1, (string) ($r['stdout'] ?? ''));
            });
            break;
        case 'xargs':
            // One command per line; -d '\n' passes each line, unparsed, as
            // the single argument of `sh -c`, the shell proc_open() uses.
            $list = tempnam(sys_get_temp_dir(), 'hearth-bench-xargs-');
            file_put_contents($list, implode("\n", $commands) . "\n");
            $xargs = proc_open(
                ['xargs', '-d', '\n', '-P', (string) $concurrency, '-n', '1', 'sh', '-c'],
                [0 => ['file', $list, 'r'], 1 => ['pipe', 'w'], 2 => STDERR],
                $pipes
            );
            if ($xargs === false) {
                throw new RuntimeException('cannot start xargs');
            }
            $out = (string) stream_get_contents($pipes[1]);
            fclose($pipes[1]);
            $status = proc_close($xargs);
            unlink($list);
            // Every task writes one line with one write(2): lines never mix.
            foreach (explode("\n", rtrim($out, "\n")) as $line) {
                $collect(0, $line);
            }
            // xargs exits 123 when any task failed.
            $failed += $status === 0 ? 0 : count($commands);
            break;
        default:
            throw new InvalidArgumentException("unknown method $method");
    }
    return ['sum' => $sum, 'results' => $results, 'failed' => $failed];
}

$options = getopt('n:', ['mb:', 'methods:', 'tests:', 'spawn-pool:', 'sleep-pool:', 'hearth:', 'autoload:']);
$mb = (int) ($options['mb'] ?? 0);
$n = (int) ($options['n'] ?? 1000);
$methods = explode(',', (string) ($options['methods'] ?? implode(',', METHODS)));
$tests = explode(',', (string) ($options['tests'] ?? implode(',', TESTS)));
$pools = ['spawn' => (int) ($options['spawn-pool'] ?? 8), 'sleep' => (int) ($options['sleep-pool'] ?? 16)];
$hearth = (string) ($options['hearth'] ?? '');
foreach ([...array_diff($methods, METHODS), ...array_diff($tests, TESTS)] as $unknown) {
    fwrite(STDERR, "padded.php: unknown method or test '$unknown'\n");
    exit(2);
}
if (in_array('hearth', $methods, true)) {
    require (string) ($options['autoload'] ?? dirname(__DIR__, 2) . '/php/autoload.php');
}

$started = hrtime(true);
$rows = pad($mb);
echo json_encode([
    'event' => 'padded', 'mb' => $mb, 'rows' => $rows, 'seconds' => (hrtime(true) - $started) / 1e9,
    'heap_mb' => memory_get_usage(true) / 1048576, 'rss_mb' => rssMb(),
]), "\n";

$expected = intdiv($n * ($n - 1), 2);
foreach ($tests as $test) {
    $commands = commands($test, $n);
    foreach ($methods as $method) {
        $concurrency = $method === 'exec-loop' ? 1 : $pools[$test];
        $started = hrtime(true);
        $got = runMethod($method, $commands, $concurrency, $hearth);
        $seconds = (hrtime(true) - $started) / 1e9;
        $ok = $got['sum'] === $expected && $got['results'] === $n && $got['failed'] === 0;
        echo json_encode([
            'event' => 'measured', 'test' => $test, 'method' => $method, 'mb' => $mb, 'n' => $n,
            'concurrency' => $concurrency, 'seconds' => $seconds, 'tps' => $n / $seconds,
            'sum' => $got['sum'], 'expected_sum' => $expected, 'results' => $got['results'],
            'failed' => $got['failed'], 'ok' => $ok,
            'heap_mb' => memory_get_usage(true) / 1048576, 'rss_mb' => rssMb(),
        ]), "\n";
        if (!$ok) {
            fwrite(STDERR, "padded.php: $test/$method at {$mb} MB: sum {$got['sum']} (expected $expected), "
                . "{$got['results']} results (expected $n), {$got['failed']} failed\n");
            exit(1);
        }
    }
}
