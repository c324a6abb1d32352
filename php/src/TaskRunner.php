<?php

declare(strict_types=1);

namespace Hearth;

use Hearth\Internal\TaskRunnerProcess;

/**
 * Runs many shell commands in parallel through `hearth run`, one small
 * process started once, so a large PHP process never pays for a fork per
 * task.
 *
 *     $runner = new Hearth\TaskRunner(8);              // 8 at once; 0: one per CPU
 *     for ($i = 0; $i < 100; $i++) {
 *         $runner->add("task_$i", "echo $i");
 *     }
 *     $sum = 0;
 *     $runner->runAndWait(function (array $result, int $completed, int $total) use (&$sum) {
 *         $sum += (int) $result['stdout'];             // also: id, status, stderr, signal...
 *     });
 *
 * Tasks stream to the runner while results stream back, so outputs of any
 * size and batches of any length are fine, and with a callback memory stays
 * flat. TaskRunner::map() calls a PHP function for each element of a list,
 * in warm workers that load your bootstrap file once.
 *
 * Hearth's binary is `$binary` when given, else the HEARTH_BIN environment
 * variable, else `hearth` on PATH.
 */
final class TaskRunner
{
    private const TASK_OPTIONS = ['env', 'cwd', 'stdin', 'timeout'];

    /** @var list<string> tasks not yet run, as JSON lines ending in "\n" */
    private array $lines = [];
    /** @var array<int|string, true> ids of those tasks */
    private array $ids = [];
    private int $failed = 0;
    /** @var list<string> options placed before the others (map(): the PHP bootstrap) */
    private array $leadingOptions = [];

    /**
     * Each optional parameter maps to a `hearth run` option; see
     * docs/task-runner.md for the details.
     *
     * @param int             $concurrency tasks run at once; 0: Hearth's default, the number of CPUs (-j)
     * @param string|null     $binary      path to Hearth's binary; default: HEARTH_BIN, else `hearth` on PATH
     * @param float|null      $timeout     seconds before a task is stopped: SIGTERM, then SIGKILL (--timeout)
     * @param float|null      $killAfter   seconds between that SIGTERM and SIGKILL; default 2 (--kill-after)
     * @param int             $retries     run a failed task up to this many more times (--retries)
     * @param string|null     $halt        on the first failure, 'now': stop running tasks; 'soon': start
     *                                     no more (--halt; also 'now,fail=N' and 'soon,fail=N')
     * @param string|null     $joblog      append a line per finished task to this file (--joblog); without
     *                                     $resume or $resumeFailed, a file that already lists tasks is refused
     * @param bool            $resume      with $joblog: skip the tasks it lists as finished; their
     *                                     results say `skipped` (--resume)
     * @param bool            $resumeFailed with $joblog: skip only the tasks it lists as succeeded, run
     *                                     the failed ones again (--resume-failed)
     * @param bool            $keepOrder   report results in the order the tasks were added (--keep-order)
     * @param int|string|null $maxOutput   keep at most this many bytes of each task's stdout and stderr,
     *                                     e.g. 1048576 or '1M'; default 16M (--max-output)
     *
     * @throws \InvalidArgumentException when a value is out of range
     */
    public function __construct(
        private readonly int $concurrency = 0,
        private readonly ?string $binary = null,
        private readonly ?float $timeout = null,
        private readonly ?float $killAfter = null,
        private readonly int $retries = 0,
        private readonly ?string $halt = null,
        private readonly ?string $joblog = null,
        private readonly bool $resume = false,
        private readonly bool $keepOrder = false,
        private readonly int|string|null $maxOutput = null,
        private readonly bool $resumeFailed = false,
    ) {
        if ($concurrency < 0) {
            throw new \InvalidArgumentException("concurrency must be 0 (one per CPU) or more, got {$concurrency}");
        }
        if ($binary !== null && ($binary === '' || str_contains($binary, "\0"))) {
            throw new \InvalidArgumentException('binary must be a path to Hearth\'s binary');
        }
        self::checkSeconds('timeout', $timeout, false);
        self::checkSeconds('killAfter', $killAfter, true);
        if ($retries < 0) {
            throw new \InvalidArgumentException("retries must be 0 or more, got {$retries}");
        }
        if ($halt !== null && preg_match('/\A(now|soon)(,fail=[1-9][0-9]*)?\z/', $halt) !== 1) {
            throw new \InvalidArgumentException(
                "halt must be 'now' or 'soon' (or 'now,fail=N', 'soon,fail=N'), got '{$halt}'"
            );
        }
        if ($joblog !== null && ($joblog === '' || str_contains($joblog, "\0"))) {
            throw new \InvalidArgumentException('joblog must be a file path');
        }
        if (($resume || $resumeFailed) && $joblog === null) {
            throw new \InvalidArgumentException(
                'resume needs a joblog: it skips the tasks the joblog lists as finished'
            );
        }
        if ($resume && $resumeFailed) {
            throw new \InvalidArgumentException('resume and resumeFailed exclude each other: pick one');
        }
        if (
            (is_int($maxOutput) && $maxOutput < 0)
            || (is_string($maxOutput) && preg_match('/\A[0-9]+ ?([KMG]i?)?B?\z/i', $maxOutput) !== 1)
        ) {
            throw new \InvalidArgumentException(
                "maxOutput must be a number of bytes, or one followed by K, M or G (e.g. '16M'), got "
                . var_export($maxOutput, true)
            );
        }
    }

    /**
     * Adds a shell command, run with /bin/sh -c.
     *
     * @param string $id      comes back as the result's `id` (and its key in runAndWait()'s array)
     * @param array{env?: array<string, string>, cwd?: string, stdin?: string, timeout?: int|float} $options
     *        env: extra environment variables; cwd: working directory; stdin: the task's
     *        standard input (UTF-8 text; default empty); timeout: seconds, for this task
     *
     * @throws \InvalidArgumentException when the id is taken or an option is not usable
     */
    public function add(string $id, string $cmd, array $options = []): static
    {
        if ($cmd === '') {
            throw new \InvalidArgumentException("task '{$id}': the command is empty");
        }
        self::checkText("task '{$id}': the command", $cmd, false);
        return $this->addTask($id, ['cmd' => $cmd], $options);
    }

    /**
     * Adds a program with its arguments, run without a shell: nothing in
     * them is interpreted.
     *
     *     $runner->addArgv('thumb', ['convert', $upload, '-resize', '200x200', $thumb]);
     *
     * @param list<string> $argv    the program (a path, or a name looked up on PATH) then its arguments
     * @param array{env?: array<string, string>, cwd?: string, stdin?: string, timeout?: int|float} $options
     *        as for add()
     *
     * @throws \InvalidArgumentException when the id is taken or argv or an option is not usable
     */
    public function addArgv(string $id, array $argv, array $options = []): static
    {
        if ($argv === [] || !array_is_list($argv)) {
            throw new \InvalidArgumentException(
                "task '{$id}': argv must be a non-empty list: the program, then its arguments"
            );
        }
        foreach ($argv as $i => $arg) {
            if (!is_string($arg) && !is_int($arg) && !is_float($arg)) {
                throw new \InvalidArgumentException(
                    "task '{$id}': argv[{$i}] is " . get_debug_type($arg) . ', not a string'
                );
            }
            $argv[$i] = (string) $arg;
            self::checkText("task '{$id}': argv[{$i}]", $argv[$i], false);
        }
        if ($argv[0] === '') {
            throw new \InvalidArgumentException("task '{$id}': argv[0], the program, is empty");
        }
        return $this->addTask($id, ['argv' => $argv], $options);
    }

    /**
     * Runs the tasks added so far and returns when all are done. Calls
     * $callback with each result as its task finishes, in completion order
     * (the order they were added with $keepOrder); $completed counts from
     * 1 to $total.
     *
     * A result is an array with `id`, `status` (the exit code, null when
     * killed by a signal or never started), `signal` ("SIGKILL"... or
     * null), `stdout` and `stderr` (the bytes, exactly), `duration_ms`,
     * `attempts`, `seq` (position in the batch, from 1), and when they
     * apply `timed_out`, `error` (why the task could not start),
     * `stdout_truncated`/`stdout_bytes` (past $maxOutput), same for stderr,
     * and `skipped` (a task $resume did not run again: its output is '').
     * With $halt, the tasks it stopped or never started have no result.
     *
     * A failed task is a result, not an exception: see failed(). The runner
     * is empty afterwards, ready for the next batch.
     *
     * @param (callable(array<string, mixed>, int, int): mixed)|null $callback
     * @return array<int|string, array<string, mixed>> the results keyed by id without a callback; [] with one
     *
     * @throws TaskRunnerException when there is no Hearth binary, or `hearth run` refused the batch or
     *                             stopped before its end; an exception from $callback stops the batch
     *                             (running tasks are stopped) and is thrown as is
     */
    public function runAndWait(?callable $callback = null): array
    {
        $results = [];
        $this->run(static function (array $result, int $completed, int $total) use ($callback, &$results): void {
            if ($callback === null) {
                $results[$result['id']] = $result;
            } else {
                $callback($result, $completed, $total);
            }
        });
        return $results;
    }

    /**
     * How many tasks of the last batch failed (a status other than 0: a
     * non-zero exit, a signal, a timeout, a failure to start).
     */
    public function failed(): int
    {
        return $this->failed;
    }

    /**
     * Calls a PHP function once per element of $argsList, in parallel, in
     * warm PHP workers that each load $bootstrap once (your autoloader, a
     * container...), and returns what each call returned.
     *
     *     $sizes = Hearth\TaskRunner::map(__DIR__ . '/bootstrap.php', 'App\Jobs\resize', [
     *         'a.jpg' => ['in/a.jpg', 200],              // resize('in/a.jpg', 200)
     *         'b.jpg' => ['path' => 'in/b.jpg', 'width' => 300],   // named arguments
     *     ]);
     *
     * Returns an array with $argsList's keys in $argsList's order. Each value
     * is what the call returned, through JSON (objects come back as arrays),
     * or a JobError when it threw, called exit, timed out or its worker died;
     * the other calls are not affected. What a job prints is discarded.
     *
     * @param string                       $bootstrap the PHP file each worker loads once
     * @param string                       $function  a function or static method: 'App\f', 'App\C::m'
     * @param iterable<int|string, array<int|string, mixed>> $argsList the arguments of each call:
     *                                                a list for positional ones, string keys for named ones
     * @param int                          $concurrency workers; 0: one per CPU
     * @param string|null                  $binary    path to Hearth's binary (see the class doc)
     * @param float|null                   $timeout   seconds a call may take; its worker is then replaced
     * @param int                          $retries   run a failed call up to this many more times
     * @param string|null                  $php       the PHP binary for the workers; default `php`
     * @return array<int|string, mixed|JobError>
     *
     * @throws \InvalidArgumentException when an argument is not usable (checked before anything runs)
     * @throws TaskRunnerException as runAndWait()
     */
    public static function map(
        string $bootstrap,
        string $function,
        iterable $argsList,
        int $concurrency = 0,
        ?string $binary = null,
        ?float $timeout = null,
        int $retries = 0,
        ?string $php = null,
    ): array {
        if (str_contains($bootstrap, "\0") || !is_file($bootstrap)) {
            throw new \InvalidArgumentException("bootstrap: no such file: {$bootstrap}");
        }
        $name = '[A-Za-z_\x80-\xff][A-Za-z0-9_\x80-\xff]*';
        if (preg_match("/\\A\\\\?{$name}(\\\\{$name})*(::{$name})?\\z/", $function) !== 1) {
            throw new \InvalidArgumentException(
                "function must name a function or a static method, like 'App\\resize' or "
                . "'App\\Image::resize', got '{$function}'"
            );
        }
        if ($php !== null && ($php === '' || str_contains($php, "\0"))) {
            throw new \InvalidArgumentException('php must be a path to a PHP binary');
        }

        $runner = new self($concurrency, $binary, $timeout, retries: $retries);
        $runner->leadingOptions = ['--php-bootstrap=' . $bootstrap];
        if ($php !== null) {
            $runner->leadingOptions[] = '--php=' . $php;
        }
        $results = [];
        foreach ($argsList as $key => $args) {
            if (!is_int($key) && !is_string($key)) {
                throw new \InvalidArgumentException(
                    'argsList keys must be integers or strings, got ' . get_debug_type($key)
                );
            }
            if (array_key_exists($key, $results)) {
                throw new \InvalidArgumentException("argsList has the key '{$key}' twice");
            }
            if (!is_array($args)) {
                throw new \InvalidArgumentException(
                    "argsList['{$key}'] must be an array of arguments, got " . get_debug_type($args)
                );
            }
            $runner->lines[] = self::encode(['id' => $key, 'call' => $function, 'args' => $args], "argsList['{$key}']");
            $results[$key] = null;
        }

        $runner->run(static function (array $result) use (&$results): void {
            $id = $result['id'];
            if ((!is_int($id) && !is_string($id)) || !array_key_exists($id, $results)) {
                throw TaskRunnerException::runnerFailed(
                    'hearth run reported a job that was not sent: ' . json_encode($id)
                );
            }
            // A job stopped for its timeout failed, even if it then returned.
            $results[$id] = $result['status'] === 0 && empty($result['timed_out'])
                ? ($result['result'] ?? null)
                : JobError::fromResult($result);
        });
        return $results;
    }

    /**
     * @param array<string, mixed> $task
     * @param array<mixed>         $options
     */
    private function addTask(string $id, array $task, array $options): static
    {
        self::checkText('a task id', $id, true);
        if (isset($this->ids[$id])) {
            throw new \InvalidArgumentException("task '{$id}': the id is taken by another task of this batch");
        }
        $unknown = array_diff(array_keys($options), self::TASK_OPTIONS);
        if ($unknown !== []) {
            throw new \InvalidArgumentException(
                "task '{$id}': unknown option '" . implode("', '", $unknown) . "' (known: "
                . implode(', ', self::TASK_OPTIONS) . ')'
            );
        }
        $line = ['id' => $id] + $task;
        if (isset($options['env'])) {
            $line['env'] = self::checkEnv($id, $options['env']);
        }
        if (isset($options['cwd'])) {
            if (!is_string($options['cwd']) || $options['cwd'] === '') {
                throw new \InvalidArgumentException("task '{$id}': cwd must be a directory path");
            }
            self::checkText("task '{$id}': cwd", $options['cwd'], false);
            $line['cwd'] = $options['cwd'];
        }
        if (isset($options['stdin'])) {
            if (!is_string($options['stdin'])) {
                throw new \InvalidArgumentException("task '{$id}': stdin must be a string");
            }
            self::checkText("task '{$id}': stdin", $options['stdin'], true);
            $line['stdin'] = $options['stdin'];
        }
        if (isset($options['timeout'])) {
            if (!is_int($options['timeout']) && !is_float($options['timeout'])) {
                throw new \InvalidArgumentException("task '{$id}': timeout must be a number of seconds");
            }
            self::checkSeconds("task '{$id}': timeout", (float) $options['timeout'], false);
            $line['timeout'] = $options['timeout'];
        }
        $this->lines[] = self::encode($line, "task '{$id}'");
        $this->ids[$id] = true;
        return $this;
    }

    /**
     * Streams the batch through one `hearth run` and calls $onResult with
     * each decoded result.
     *
     * @param callable(array<string, mixed>, int, int): void $onResult
     */
    private function run(callable $onResult): void
    {
        $command = $this->command($this->findBinary());
        $lines = $this->lines;
        $this->lines = [];
        $this->ids = [];
        $this->failed = 0;
        if ($lines === []) {
            return;
        }
        $count = function (array $result, int $completed, int $total) use ($onResult): void {
            if ($result['status'] !== 0 || !empty($result['timed_out'])) {
                $this->failed++;
            }
            // A task --resume skipped comes without output.
            $onResult($result + ['stdout' => '', 'stderr' => ''], $completed, $total);
        };
        // --halt ends a batch early on purpose: the tasks it stops or never starts have no result.
        TaskRunnerProcess::run($command, $lines, $count, $this->halt !== null, $this->killAfter ?? 2.0);
    }

    /**
     * @return list<string>
     */
    private function command(string $binary): array
    {
        $command = [$binary, 'run', ...$this->leadingOptions];
        if ($this->concurrency > 0) {
            $command[] = '--jobs=' . $this->concurrency;
        }
        if ($this->keepOrder) {
            $command[] = '--keep-order';
        }
        if ($this->timeout !== null) {
            $command[] = '--timeout=' . self::formatSeconds($this->timeout);
        }
        if ($this->killAfter !== null) {
            $command[] = '--kill-after=' . self::formatSeconds($this->killAfter);
        }
        if ($this->retries > 0) {
            // `hearth run --retries` counts attempts in all, as GNU parallel.
            $command[] = '--retries=' . ($this->retries + 1);
        }
        if ($this->halt !== null) {
            $command[] = '--halt=' . $this->halt;
        }
        if ($this->joblog !== null) {
            $command[] = '--joblog=' . $this->joblog;
        }
        if ($this->resume) {
            $command[] = '--resume';
        }
        if ($this->resumeFailed) {
            $command[] = '--resume-failed';
        }
        // A result is read whole into this PHP process: its output is
        // capped (16M unless told), where `hearth run` alone keeps it all.
        $command[] = '--max-output=' . ($this->maxOutput ?? '16M');
        $command[] = '-';
        return $command;
    }

    /**
     * The binary to run: $binary, else HEARTH_BIN, else `hearth` on PATH.
     */
    private function findBinary(): string
    {
        $fix = "Install hearth on PATH, set HEARTH_BIN=/path/to/hearth, or pass binary: '/path/to/hearth'.";
        $env = getenv('HEARTH_BIN');
        [$binary, $source] = match (true) {
            $this->binary !== null => [$this->binary, 'the binary argument'],
            is_string($env) && $env !== '' => [$env, 'HEARTH_BIN'],
            default => ['hearth', null],
        };
        if (str_contains($binary, '/')) {
            if (is_file($binary) && is_executable($binary)) {
                return $binary;
            }
            $problem = file_exists($binary) ? 'is not an executable file' : 'does not exist';
            throw TaskRunnerException::binaryNotFound("Hearth's binary {$binary} (from {$source}) {$problem}. {$fix}");
        }
        $path = (string) getenv('PATH');
        foreach (explode(PATH_SEPARATOR, $path) as $dir) {
            $candidate = ($dir === '' ? '.' : rtrim($dir, '/')) . '/' . $binary;
            if (is_file($candidate) && is_executable($candidate)) {
                return $candidate;
            }
        }
        $from = $source === null ? 'HEARTH_BIN is not set, and there is' : "{$source} says `{$binary}`, but there is";
        throw TaskRunnerException::binaryNotFound(
            "Cannot find Hearth's binary: {$from} no executable `{$binary}` on PATH ({$path}). {$fix}"
        );
    }

    /**
     * @param array<string, mixed> $value
     */
    private static function encode(array $value, string $what): string
    {
        try {
            $flags = JSON_THROW_ON_ERROR | JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE
                | JSON_PRESERVE_ZERO_FRACTION;
            return json_encode($value, $flags) . "\n";
        } catch (\JsonException $e) {
            throw new \InvalidArgumentException("{$what} cannot be sent as JSON: " . $e->getMessage(), 0, $e);
        }
    }

    /**
     * @return object the variables, as a JSON object even when empty or numbered
     */
    private static function checkEnv(string $id, mixed $env): object
    {
        if (!is_array($env)) {
            throw new \InvalidArgumentException("task '{$id}': env must be an array of NAME => value");
        }
        $checked = [];
        foreach ($env as $name => $value) {
            $name = (string) $name;
            if ($name === '' || str_contains($name, '=')) {
                throw new \InvalidArgumentException("task '{$id}': '{$name}' is not an environment variable name");
            }
            if (!is_string($value) && !is_int($value) && !is_float($value)) {
                throw new \InvalidArgumentException(
                    "task '{$id}': env['{$name}'] is " . get_debug_type($value) . ', not a string'
                );
            }
            self::checkText("task '{$id}': env name '{$name}'", $name, false);
            self::checkText("task '{$id}': env['{$name}']", (string) $value, false);
            $checked[$name] = (string) $value;
        }
        return (object) $checked;
    }

    /**
     * Text goes to hearth as JSON, which holds UTF-8; nothing a process gets
     * as an argument, a variable or a path may hold a NUL byte.
     */
    private static function checkText(string $what, string $text, bool $nulAllowed): void
    {
        if (preg_match('//u', $text) !== 1) {
            throw new \InvalidArgumentException("{$what} is not valid UTF-8");
        }
        if (!$nulAllowed && str_contains($text, "\0")) {
            throw new \InvalidArgumentException("{$what} contains a NUL byte");
        }
    }

    private static function checkSeconds(string $what, ?float $seconds, bool $zeroAllowed): void
    {
        if ($seconds !== null && (!is_finite($seconds) || $seconds < 0 || (!$zeroAllowed && $seconds == 0))) {
            throw new \InvalidArgumentException(
                "{$what} must be a number of seconds, " . ($zeroAllowed ? '0 or more' : 'more than 0')
                . ", got {$seconds}"
            );
        }
    }

    private static function formatSeconds(float $seconds): string
    {
        return rtrim(rtrim(sprintf('%.6F', $seconds), '0'), '.');
    }
}
