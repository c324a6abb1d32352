<?php

/**
 * The process pool of tomlau10/TaskRunner.php, rewritten for the benchmark:
 * the same design, so that methods (b) and (c) of bench/tasks.py measure
 * what the seed measures.
 *
 * - every task is `proc_open($command)` (a string: `/bin/sh -c COMMAND`),
 *   stdin from /dev/null, stdout and stderr on pipes;
 * - when the pool is full, and at the end, it polls `proc_get_status()` on
 *   every running task, and sleeps 5 ms between polls when none finished;
 * - a task's pipes are read only after it exited (so a task that writes
 *   more than a pipe buffer, 64 KiB, would hang: the seed's documented
 *   caveat, harmless here where every task prints a number).
 */

declare(strict_types=1);

namespace HearthBench;

final class ProcessPool
{
    private const DESCRIPTORS = [
        0 => ['file', '/dev/null', 'r'],
        1 => ['pipe', 'w'],
        2 => ['pipe', 'w'],
    ];

    /** Microseconds between two polls when no task finished (the seed's 5 ms). */
    private const POLL_SLEEP_US = 5000;

    /**
     * @var array<int, array{process: resource, pipes: array<int, resource>, id: string, exitcode: ?int}>
     *      by pid
     */
    private array $running = [];

    /**
     * @param \Closure(string, int, string, string): void $onDone called with
     *        the task's id, exit code, stdout and stderr
     */
    public function __construct(private readonly int $concurrency, private readonly \Closure $onDone)
    {
        if ($concurrency < 1) {
            throw new \InvalidArgumentException("concurrency must be at least 1, got $concurrency");
        }
    }

    /** Starts $command, after waiting for a free slot when the pool is full. */
    public function add(string $id, string $command): void
    {
        if (count($this->running) >= $this->concurrency) {
            $this->reap(false);
        }
        $process = proc_open($command, self::DESCRIPTORS, $pipes);
        if ($process === false) {
            throw new \RuntimeException("proc_open failed for task $id");
        }
        // Before PHP 8.3, only the proc_get_status() call that first sees the
        // exit has the exit code (later ones say -1), and a task as short as
        // `echo` may be gone already here: keep the code if so. The seed
        // drops it (its benchmark never looks at statuses); this check
        // costs nothing.
        $status = proc_get_status($process);
        $this->running[$status['pid']] = [
            'process' => $process,
            'pipes' => $pipes,
            'id' => $id,
            'exitcode' => $status['running'] ? null : $status['exitcode'],
        ];
    }

    /** Waits for every task still running. */
    public function finish(): void
    {
        $this->reap(true);
    }

    /** Polls until at least one task finished ($all false) or all did ($all true). */
    private function reap(bool $all): void
    {
        while ($this->running !== []) {
            $finished = false;
            foreach ($this->running as $pid => $task) {
                $status = proc_get_status($task['process']);
                if ($status['running']) {
                    continue;
                }
                $exitcode = $task['exitcode'] ?? $status['exitcode'];
                $finished = true;
                $stdout = (string) stream_get_contents($task['pipes'][1]);
                $stderr = (string) stream_get_contents($task['pipes'][2]);
                fclose($task['pipes'][1]);
                fclose($task['pipes'][2]);
                proc_close($task['process']);
                unset($this->running[$pid]);
                ($this->onDone)($task['id'], (int) $exitcode, $stdout, $stderr);
            }
            if ($finished && !$all) {
                return;
            }
            if ($this->running !== []) {
                usleep(self::POLL_SLEEP_US);
            }
        }
    }
}
