<?php

declare(strict_types=1);

namespace Hearth\Internal;

use Hearth\TaskRunnerException;

/**
 * One `hearth run` process for TaskRunner: writes the task lines to its
 * stdin while reading result lines from its stdout, whichever is ready,
 * so that neither side waits on the other however many tasks there are or
 * however large their outputs. Its stderr is read too (the last 64 KiB is
 * kept for error messages), so it never blocks on a full pipe either.
 *
 * @internal
 */
final class TaskRunnerProcess
{
    private const CHUNK = 65536;
    private const STDERR_TAIL = 65536;
    /** `hearth run`'s exit status for anything but failed tasks: a refused command line or input. */
    private const ERROR_STATUS = 255;

    private int $completed = 0;
    private int $failed = 0;
    private string $stderr = '';

    /**
     * @param \Closure(array<string, mixed>, int, int): void $onResult
     */
    private function __construct(private readonly \Closure $onResult, private readonly int $total)
    {
    }

    /**
     * Runs $command with $lines on its stdin and calls $onResult with each
     * decoded result, as it arrives.
     *
     * @param list<string>                                   $command the command, run without a shell
     * @param list<string>                                   $lines   task lines, each ending in "\n"
     * @param callable(array<string, mixed>, int, int): void $onResult with the result, how many
     *                                                       have come so far, how many tasks
     * @param bool $mayEndEarly whether hearth may stop short of a result per task (--halt)
     * @param float $killAfter   hearth's --kill-after: how long its tasks may take to stop
     *
     * @throws TaskRunnerException when hearth refused the batch or did not run it to its end;
     *                             an exception from $onResult stops hearth and is thrown as is
     */
    public static function run(
        array $command,
        array $lines,
        callable $onResult,
        bool $mayEndEarly,
        float $killAfter,
    ): void {
        $pipes = [];
        $process = @proc_open($command, [['pipe', 'r'], ['pipe', 'w'], ['pipe', 'w']], $pipes);
        if ($process === false) {
            $error = error_get_last()['message'] ?? 'unknown error';
            throw TaskRunnerException::runnerFailed("could not start {$command[0]}: {$error}");
        }
        $self = new self(\Closure::fromCallable($onResult), count($lines));
        $self->drive($process, $pipes, $lines, $mayEndEarly, $killAfter);
    }

    /**
     * @param resource                                     $process
     * @param array{0: resource, 1: resource, 2: resource} $pipes
     * @param list<string>                                 $lines
     */
    private function drive($process, array $pipes, array $lines, bool $mayEndEarly, float $killAfter): void
    {
        foreach ($pipes as $pipe) {
            stream_set_blocking($pipe, false);
            stream_set_read_buffer($pipe, 0);
            stream_set_write_buffer($pipe, 0);
        }
        [$in, $out, $err] = $pipes;
        $next = 0;          // the next line to queue
        $pending = '';      // bytes queued for hearth's stdin
        $sent = 0;          // how many of them are written
        $buffer = '';       // hearth's stdout, not yet a whole line

        try {
            while ($out !== null) {
                if ($in !== null && $sent === strlen($pending)) {
                    $pending = '';
                    $sent = 0;
                    while ($next < $this->total && strlen($pending) < self::CHUNK) {
                        $pending .= $lines[$next];
                        unset($lines[$next++]);
                    }
                    if ($pending === '') {
                        fclose($in);
                        $in = null;
                    }
                }
                $read = $err === null ? [$out] : [$out, $err];
                $write = $in === null ? [] : [$in];
                if (!self::select($read, $write, null)) {
                    continue;
                }
                if ($write !== []) {
                    $n = @fwrite($in, substr($pending, $sent, self::CHUNK));
                    if ($n === false) {
                        // hearth closed its stdin: it is exiting, and its exit status says why.
                        fclose($in);
                        $in = null;
                    } else {
                        $sent += $n;
                    }
                }
                if ($err !== null && in_array($err, $read, true)) {
                    $err = $this->readStderr($err, false);
                }
                if (in_array($out, $read, true)) {
                    $chunk = @fread($out, self::CHUNK);
                    if ($chunk !== false && $chunk !== '') {
                        $buffer .= $chunk;
                        if (str_contains($chunk, "\n")) {
                            $end = strrpos($buffer, "\n");
                            foreach (explode("\n", substr($buffer, 0, $end)) as $line) {
                                $this->deliver($line);
                            }
                            $buffer = (string) substr($buffer, $end + 1);
                        }
                    } elseif (feof($out)) {
                        fclose($out);
                        $out = null;
                    }
                }
            }
            if ($in !== null) {
                fclose($in);
                $in = null;
            }
            $status = $this->waitForExit($process, $err);
        } catch (\Throwable $e) {
            if ($in !== null) {
                fclose($in);
            }
            self::stop($process, array_filter([$out, $err]), $killAfter);
            throw $e;
        }
        proc_close($process);
        if (trim($buffer) !== '' && !$status['signaled'] && $status['exitcode'] >= 0 && $status['exitcode'] <= 101) {
            // A last line without its newline. When hearth died mid-line, check() says so instead.
            $this->deliver($buffer);
        }
        $this->check($status, $mayEndEarly);
    }

    /**
     * Decodes one result line and hands it on.
     */
    private function deliver(string $line): void
    {
        if (trim($line) === '') {
            return;
        }
        try {
            $result = json_decode($line, true, 512, JSON_THROW_ON_ERROR);
        } catch (\JsonException $e) {
            throw TaskRunnerException::runnerFailed(
                'hearth run wrote a line that is not JSON (' . $e->getMessage() . '): ' . self::excerpt($line),
                null,
                $this->stderr,
                $e,
            );
        }
        if (
            !is_array($result)
            || !array_key_exists('status', $result)
            || (!is_int($result['id'] ?? null) && !is_string($result['id'] ?? null))
        ) {
            throw TaskRunnerException::runnerFailed(
                'hearth run wrote a line that is not a result: ' . self::excerpt($line)
            );
        }
        foreach (['stdout', 'stderr'] as $stream) {
            if (($result[$stream . '_encoding'] ?? null) === 'base64') {
                $bytes = base64_decode((string) $result[$stream], true);
                if ($bytes === false) {
                    throw TaskRunnerException::runnerFailed(
                        "hearth run wrote a {$stream} that is not base64: " . self::excerpt($line)
                    );
                }
                $result[$stream] = $bytes;
            }
            unset($result[$stream . '_encoding']);
        }
        // As `hearth run` counts for its exit status: the tasks of the batch that did not exit 0 in
        // time, those --resume skipped included (their line says how they ended).
        if ($result['status'] !== 0 || !empty($result['timed_out'])) {
            $this->failed++;
        }
        ($this->onResult)($result, ++$this->completed, $this->total);
    }

    /**
     * Throws unless `hearth run` ended the way a finished batch ends: exit
     * status 0, or the number of failed tasks (1-100; 101 for more).
     *
     * @param array{exitcode: int, signaled: bool, termsig: int} $status
     */
    private function check(array $status, bool $mayEndEarly): void
    {
        $progress = "after {$this->completed} of {$this->total} results";
        if ($status['signaled']) {
            throw TaskRunnerException::runnerFailed(
                'hearth run died: it was killed by ' . self::signalName($status['termsig']) . ' ' . $progress,
                null,
                $this->stderr,
            );
        }
        $exit = $status['exitcode'];
        // As GNU parallel's: 0-101 count failed tasks, 255 is every other error.
        if ($exit === self::ERROR_STATUS) {
            throw TaskRunnerException::invalidInput($this->stderr);
        }
        if ($exit < 0 || $exit > 101) {
            $why = [130 => ' (it was sent SIGINT)', 143 => ' (it was sent SIGTERM)'][$exit] ?? '';
            throw TaskRunnerException::runnerFailed(
                "hearth run stopped with exit status {$exit}{$why} {$progress}",
                $exit,
                $this->stderr,
            );
        }
        // A batch that --halt ended early exits with its number of failures; anything else means hearth
        // died.
        if ($this->completed < $this->total && (!$mayEndEarly || $exit !== min($this->failed, 101))) {
            throw TaskRunnerException::runnerFailed(
                "hearth run died: it exited with status {$exit} {$progress}",
                $exit,
                $this->stderr,
            );
        }
    }

    /**
     * Waits for `hearth run` to exit once its stdout has closed, still
     * reading its stderr so that it cannot block on a full pipe.
     *
     * @param resource      $process
     * @param resource|null $err     set to null once closed
     * @return array{exitcode: int, signaled: bool, termsig: int}
     */
    private function waitForExit($process, &$err): array
    {
        while (true) {
            // Before PHP 8.3 only the first call that sees the exit reports its status: keep that one.
            $status = proc_get_status($process);
            if (!$status['running']) {
                // What is left; a process hearth started may still hold the pipe open.
                while ($err !== null) {
                    $err = $this->readStderr($err, true);
                }
                return $status;
            }
            $read = $err === null ? [] : [$err];
            $write = [];
            if ($read === []) {
                usleep(2000);
            } elseif (self::select($read, $write, 20000)) {
                $err = $this->readStderr($err, false);
            }
        }
    }

    /**
     * Reads what is there from hearth's stderr, keeping the last 64 KiB.
     *
     * @param resource $err
     * @param bool     $last close the pipe once nothing more is there, even if it is still open
     * @return resource|null null once it is closed
     */
    private function readStderr($err, bool $last)
    {
        $chunk = @fread($err, self::CHUNK);
        if ($chunk === false || ($chunk === '' && ($last || feof($err)))) {
            fclose($err);
            if (strlen($this->stderr) > self::STDERR_TAIL) {
                $this->stderr = substr($this->stderr, -self::STDERR_TAIL);
            }
            return null;
        }
        $this->stderr .= $chunk;
        if (strlen($this->stderr) > 2 * self::STDERR_TAIL) {
            $this->stderr = substr($this->stderr, -self::STDERR_TAIL);
        }
        return $err;
    }

    /**
     * Stops `hearth run` and its tasks after an error on this side. Like GNU
     * parallel, it takes a first SIGTERM as "start nothing more" and a
     * second as "stop the running tasks" (SIGTERM, then SIGKILL after
     * --kill-after); two signals close together may count as one, so
     * SIGTERM goes again every 100 ms. SIGKILL comes only if hearth is still
     * there well after its tasks must have stopped: it would leave them
     * running.
     *
     * Its stdout and stderr stay open and are read (and dropped) until it
     * has exited: a full pipe would keep it from exiting, and a closed
     * stderr makes it exit at once, leaving its tasks running.
     *
     * @param resource        $process
     * @param array<resource> $pipes   its stdout and stderr, when still open
     */
    private static function stop($process, array $pipes, float $killAfter): void
    {
        $deadline = microtime(true) + $killAfter + 5;
        for ($i = 0; proc_get_status($process)['running']; $i++) {
            if (microtime(true) > $deadline) {
                proc_terminate($process, 9);
                break;
            }
            if ($i % 10 === 0) {
                proc_terminate($process, 15);
            }
            foreach ($pipes as $key => $pipe) {
                for ($reads = 0; $reads < 16; $reads++) {
                    $dropped = @fread($pipe, self::CHUNK);
                    if ($dropped === false || $dropped === '') {
                        break;
                    }
                }
                if (feof($pipe)) {
                    fclose($pipe);
                    unset($pipes[$key]);
                }
            }
            usleep(10000);
        }
        foreach ($pipes as $pipe) {
            fclose($pipe);
        }
        proc_close($process);
    }

    /**
     * stream_select() that takes an interrupting signal as "nothing ready".
     *
     * @param array<resource> $read
     * @param array<resource> $write
     * @param int|null        $microseconds how long to wait; null: until something is ready
     */
    private static function select(array &$read, array &$write, ?int $microseconds): bool
    {
        $except = null;
        $ready = @stream_select($read, $write, $except, $microseconds === null ? null : 0, $microseconds ?? 0);
        if ($ready === false) {
            $error = error_get_last()['message'] ?? '';
            if (str_contains($error, 'Interrupted system call')) {
                $read = $write = [];
                return false;
            }
            throw TaskRunnerException::runnerFailed("waiting on hearth run failed: {$error}");
        }
        return $ready > 0;
    }

    private static function signalName(int $signal): string
    {
        $names = [
            1 => 'SIGHUP', 2 => 'SIGINT', 3 => 'SIGQUIT', 6 => 'SIGABRT',
            9 => 'SIGKILL', 11 => 'SIGSEGV', 13 => 'SIGPIPE', 15 => 'SIGTERM',
        ];
        return $names[$signal] ?? "signal {$signal}";
    }

    private static function excerpt(string $line): string
    {
        return strlen($line) > 200 ? substr($line, 0, 200) . '...' : $line;
    }
}
