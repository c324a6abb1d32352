<?php

declare(strict_types=1);

namespace Hearth;

/**
 * One job for Hearth\Queue::pushMany(): what `hearth work` will run (its
 * payload, a JSON object in the format of a `hearth run` task line) and
 * how the queue keeps it (attempts, backoff, delay, reply-to channel).
 *
 *     $queue->pushMany([
 *         QueueJob::call('App\Mail::send', [$to], delay: 60, attempts: 5),
 *         QueueJob::shell(['convert', 'a.png', 'b.jpg'], timeout: 30),
 *     ]);
 *
 * Times are seconds (int or float), kept to the millisecond. Every value
 * is checked here: a QueueJob that exists is one the queue accepts, but
 * for the size of its payload, which the queue checks (its limit is the
 * queue's).
 */
final class QueueJob
{
    /** The attempts a job gets by default, as the crate's NewJob. */
    public const ATTEMPTS = 3;
    /** The wait after a first failed attempt, by default (doubling after each). */
    public const BACKOFF = 1;
    /** The longest wait between two attempts, by default. */
    public const BACKOFF_MAX = 300;
    /** The longest delay, timeout or backoff taken (about 31 years): anything longer is a mistake. */
    private const MAX_SECONDS = 1e9;
    private const MAX_ATTEMPTS = 4294967295;
    private const NAME = '[A-Za-z_\x80-\xff][A-Za-z0-9_\x80-\xff]*';

    private function __construct(
        /** The JSON task line `hearth work` runs. */
        public readonly string $payload,
        /** Attempts in all before the dead-letter store, at least 1. */
        public readonly int $attempts,
        /** The wait after the first failed attempt, in ms (doubling, up to $backoffMaxMs). */
        public readonly int $backoffMs,
        /** The longest wait between two attempts, in ms. */
        public readonly int $backoffMaxMs,
        /** Not deliverable before this many ms from the push. */
        public readonly int $delayMs,
        /** The results channel the outcome is recorded to, if any. */
        public readonly ?string $replyTo,
    ) {
    }

    /**
     * A PHP job: `hearth work --php-bootstrap FILE` calls $call with $args
     * in a warm worker, as `hearth run` runs `{"call": ..., "args": ...}`.
     *
     * @param string              $call       a function ('App\send') or a static method ('App\Mail::send')
     * @param array<mixed>        $args       positional arguments (a list) or named ones (string keys),
     *                                        encoded with json_encode() as `hearth run` decodes them
     * @param int|float           $delay      seconds before the job may run
     * @param int                 $attempts   attempts in all (the first and the retries)
     * @param int|float|string|null $timeout  the job's own time limit: seconds, or '500ms', '2m'...
     * @param string|null         $replyTo    a results channel for the job's outcome
     * @param int|float           $backoff    seconds after the first failure, doubling after each
     * @param int|float           $backoffMax the longest wait between attempts, in seconds
     *
     * @throws QueueError (INVALID) naming the value that cannot be used
     */
    public static function call(
        string $call,
        array $args = [],
        int|float $delay = 0,
        int $attempts = self::ATTEMPTS,
        int|float|string|null $timeout = null,
        ?string $replyTo = null,
        int|float $backoff = self::BACKOFF,
        int|float $backoffMax = self::BACKOFF_MAX,
    ): self {
        $name = self::NAME;
        if (preg_match("/\\A\\\\?{$name}(\\\\{$name})*(::{$name})?\\z/", $call) !== 1) {
            throw self::invalid(
                'call must name a function (\'App\\send\') or a static method (\'App\\Mail::send\'), got '
                . self::quote($call)
            );
        }
        if (!array_is_list($args)) {
            foreach (array_keys($args) as $key) {
                if (!is_string($key)) {
                    throw self::invalid(
                        'args must be a list (positional arguments) or have only string keys (named arguments), '
                        . 'not both'
                    );
                }
            }
        }
        $task = ['call' => ltrim($call, '\\'), 'args' => array_is_list($args) ? $args : (object) $args];
        if ($timeout !== null) {
            $task['timeout'] = self::timeout($timeout);
        }
        return self::make($task, $delay, $attempts, $replyTo, $backoff, $backoffMax);
    }

    /**
     * A shell task: a command line for /bin/sh -c (a string), or a program
     * and its arguments run without a shell (a list), as `hearth run` runs
     * `{"cmd": ...}` and `{"argv": [...]}`.
     *
     * @param string|list<string>        $command
     * @param int|float|string|null      $timeout the task's own time limit: seconds, or '500ms', '2m'...
     * @param array<string, string>|null $env     extra environment variables
     * @param string|null                $cwd     the working directory
     * @param string|null                $stdin   written to the task's standard input
     *
     * @throws QueueError (INVALID) naming the value that cannot be used
     */
    public static function shell(
        string|array $command,
        int|float|string|null $timeout = null,
        int|float $delay = 0,
        int $attempts = self::ATTEMPTS,
        ?string $replyTo = null,
        int|float $backoff = self::BACKOFF,
        int|float $backoffMax = self::BACKOFF_MAX,
        ?array $env = null,
        ?string $cwd = null,
        ?string $stdin = null,
    ): self {
        if (is_string($command)) {
            if (trim($command) === '') {
                throw self::invalid('the shell command is empty');
            }
            $task = ['cmd' => $command];
        } else {
            if ($command === [] || !array_is_list($command)) {
                throw self::invalid('a command as an array must be a list: the program, then its arguments');
            }
            foreach ($command as $arg) {
                if (!is_string($arg)) {
                    throw self::invalid('every element of the command must be a string, got ' . get_debug_type($arg));
                }
            }
            $task = ['argv' => $command];
        }
        if ($env !== null) {
            foreach ($env as $key => $value) {
                if (!is_string($key) || $key === '' || str_contains($key, '=') || !is_string($value)) {
                    throw self::invalid('env must map variable names (without =) to strings');
                }
            }
            $task['env'] = (object) $env;
        }
        if ($cwd !== null) {
            if ($cwd === '') {
                throw self::invalid('cwd must be a directory path');
            }
            $task['cwd'] = $cwd;
        }
        if ($stdin !== null) {
            $task['stdin'] = $stdin;
        }
        if ($timeout !== null) {
            $task['timeout'] = self::timeout($timeout);
        }
        return self::make($task, $delay, $attempts, $replyTo, $backoff, $backoffMax);
    }

    /** @param array<string, mixed> $task */
    private static function make(
        array $task,
        int|float $delay,
        int $attempts,
        ?string $replyTo,
        int|float $backoff,
        int|float $backoffMax,
    ): self {
        if ($attempts < 1 || $attempts > self::MAX_ATTEMPTS) {
            throw self::invalid("attempts must be from 1 to " . self::MAX_ATTEMPTS . ", got {$attempts}");
        }
        if ($replyTo !== null && !Internal\Queue\QueueUrl::validName($replyTo)) {
            throw self::invalid(
                'reply-to channel ' . self::quote($replyTo) . ': expected 1 to '
                . Internal\Queue\QueueUrl::MAX_NAME_LEN . ' of A-Z a-z 0-9 . _ -'
            );
        }
        try {
            $payload = json_encode(
                $task,
                JSON_THROW_ON_ERROR | JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_PRESERVE_ZERO_FRACTION,
            );
        } catch (\JsonException $e) {
            throw self::invalid('the job cannot be encoded as JSON: ' . $e->getMessage(), $e);
        }
        return new self(
            $payload,
            $attempts,
            self::milliseconds('backoff', $backoff),
            self::milliseconds('backoffMax', $backoffMax),
            self::milliseconds('delay', $delay),
            $replyTo,
        );
    }

    /** A task line's `timeout`: seconds above 0, or a duration in `hearth run`'s syntax. */
    private static function timeout(int|float|string $timeout): int|float|string
    {
        if (is_string($timeout)) {
            $seconds = 0.0;
            if (preg_match('/\A\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(ms|s|m|h)?\s*\z/', $timeout, $m) === 1) {
                $seconds = (float) $m[1] * ['ms' => 0.001, '' => 1, 's' => 1, 'm' => 60, 'h' => 3600][$m[2] ?? ''];
            }
        } else {
            $seconds = (float) $timeout;
        }
        if (!is_finite($seconds) || $seconds <= 0 || $seconds >= self::MAX_SECONDS) {
            throw self::invalid(
                'timeout must be a positive number of seconds or a duration like \'500ms\', got '
                . self::quote((string) $timeout)
            );
        }
        return $timeout;
    }

    private static function milliseconds(string $what, int|float $seconds): int
    {
        if (!is_finite((float) $seconds) || $seconds < 0 || $seconds >= self::MAX_SECONDS) {
            throw self::invalid("{$what} must be 0 or more seconds (below 1e9), got " . self::quote((string) $seconds));
        }
        return (int) round($seconds * 1000);
    }

    private static function quote(string $value): string
    {
        return (string) json_encode($value, JSON_UNESCAPED_SLASHES | JSON_INVALID_UTF8_SUBSTITUTE);
    }

    private static function invalid(string $why, ?\Throwable $previous = null): QueueError
    {
        return new QueueError(QueueError::INVALID, $why, $previous);
    }
}
