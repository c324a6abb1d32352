<?php

declare(strict_types=1);

namespace Hearth;

use Hearth\Internal\Queue\Engine;
use Hearth\Internal\Queue\FileEngine;
use Hearth\Internal\Queue\QueueUrl;
use Hearth\Internal\Queue\RedisEngine;

/**
 * Pushes jobs to a queue that `hearth work --queue URL` consumes, from any
 * PHP process (php-fpm, the CLI, a Hearth worker), with no extension and
 * no Composer package: Redis is spoken to directly (RESP over a TCP
 * socket), a file: queue through PDO's SQLite driver (php-sqlite3).
 *
 *     $queue = Hearth\Queue::open('redis://127.0.0.1:6379/mail');   // or 'file:/var/lib/app/jobs.db'
 *     $id = $queue->push('App\Mail::send', [$to], delay: 60, attempts: 5);
 *     $id = $queue->pushShell('convert a.png b.jpg', timeout: 30);
 *     $ids = $queue->pushMany([QueueJob::call('App\Mail::send', [$a]), QueueJob::call(...)]);
 *
 * A job is stored as the hearth-queue crate stores it (same keys, fields,
 * script and tables): a consumer cannot tell it from one pushed by
 * `hearth`. Its id is the queue's, unique in the queue and kept across
 * retries. See docs/queues-php.md.
 *
 * open() only reads the URL: Redis is connected to, or the file opened,
 * at the first push, and kept for the next ones (a Redis connection that
 * was closed meanwhile is opened again).
 */
final class Queue
{
    /** The largest payload a push accepts, by default: the crate's default (1 MiB). */
    public const MAX_PAYLOAD = 1 << 20;

    private function __construct(
        private readonly QueueUrl $url,
        private readonly Engine $engine,
        private readonly int $maxPayload,
    ) {
    }

    /**
     * @param string    $url            redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]/NAME or file:PATH
     * @param float     $connectTimeout Redis: seconds to wait for the TCP connection
     * @param float     $timeout        Redis: the longest wait for Redis to take or answer the next bytes;
     *                                  past it the push fails (UNAVAILABLE) and the connection is closed
     * @param float     $busyTimeout    file: how long a push waits for another process's write lock
     * @param int       $maxPayload     the largest payload accepted, in bytes; consumers' limit is theirs
     *
     * @throws QueueError (URL) for a URL that cannot be used, (INVALID) for a setting out of range,
     *                    (ENGINE) for a file: queue where PHP lacks pdo_sqlite
     */
    public static function open(
        #[\SensitiveParameter] string $url,
        float $connectTimeout = 5.0,
        float $timeout = 30.0,
        float $busyTimeout = 5.0,
        int $maxPayload = self::MAX_PAYLOAD,
    ): self {
        $parsed = QueueUrl::parse($url);
        $seconds = ['connectTimeout' => $connectTimeout, 'timeout' => $timeout, 'busyTimeout' => $busyTimeout];
        foreach ($seconds as $k => $v) {
            if (!is_finite($v) || $v <= 0) {
                throw new QueueError(QueueError::INVALID, "{$k} must be more than 0 seconds, got {$v}");
            }
        }
        if ($maxPayload < 1) {
            throw new QueueError(QueueError::INVALID, "maxPayload must be at least 1 byte, got {$maxPayload}");
        }
        $engine = $parsed->engine === 'file'
            ? new FileEngine($parsed, $busyTimeout)
            : new RedisEngine($parsed, $connectTimeout, $timeout);
        return new self($parsed, $engine, $maxPayload);
    }

    /**
     * Pushes a PHP job, run by `hearth work --php-bootstrap FILE` as
     * `{"call": $call, "args": $args}`; returns its id. The parameters are
     * QueueJob::call()'s.
     *
     * @param array<mixed> $args
     * @throws QueueError
     */
    public function push(
        string $call,
        array $args = [],
        int|float $delay = 0,
        int $attempts = QueueJob::ATTEMPTS,
        int|float|string|null $timeout = null,
        ?string $replyTo = null,
        int|float $backoff = QueueJob::BACKOFF,
        int|float $backoffMax = QueueJob::BACKOFF_MAX,
    ): int {
        $job = QueueJob::call($call, $args, $delay, $attempts, $timeout, $replyTo, $backoff, $backoffMax);
        return $this->pushMany([$job])[0];
    }

    /**
     * Pushes a shell task, run by `hearth work` as `{"cmd": $command}` (a
     * string, for /bin/sh -c) or `{"argv": $command}` (a list, without a
     * shell); returns its id. The parameters are QueueJob::shell()'s.
     *
     * @param string|list<string>        $command
     * @param array<string, string>|null $env
     * @throws QueueError
     */
    public function pushShell(
        string|array $command,
        int|float|string|null $timeout = null,
        int|float $delay = 0,
        int $attempts = QueueJob::ATTEMPTS,
        ?string $replyTo = null,
        int|float $backoff = QueueJob::BACKOFF,
        int|float $backoffMax = QueueJob::BACKOFF_MAX,
        ?array $env = null,
        ?string $cwd = null,
        ?string $stdin = null,
    ): int {
        $job = QueueJob::shell(
            $command,
            $timeout,
            $delay,
            $attempts,
            $replyTo,
            $backoff,
            $backoffMax,
            $env,
            $cwd,
            $stdin,
        );
        return $this->pushMany([$job])[0];
    }

    /**
     * Pushes a batch in one round trip (Redis: one pipeline of script
     * calls of at most 500 jobs each; file: one transaction); returns the
     * ids in the order of $jobs. Every job is checked first: one refused
     * job refuses the batch, nothing stored.
     *
     * @param iterable<QueueJob> $jobs
     * @return list<int>
     * @throws QueueError
     */
    public function pushMany(iterable $jobs): array
    {
        $list = [];
        foreach ($jobs as $i => $job) {
            if (!$job instanceof QueueJob) {
                throw new QueueError(
                    QueueError::INVALID,
                    'pushMany takes Hearth\QueueJob values (QueueJob::call(), QueueJob::shell()); at '
                    . json_encode($i) . ' is ' . get_debug_type($job),
                );
            }
            $size = strlen($job->payload);
            if ($size > $this->maxPayload) {
                throw new QueueError(
                    QueueError::TOO_LARGE,
                    "payload of {$size} bytes is over the limit of {$this->maxPayload} bytes",
                );
            }
            $list[] = $job;
        }
        if ($list === []) {
            return [];
        }
        return $this->engine->push($list);
    }

    /** The queue's URL, without its password. */
    public function url(): string
    {
        return (string) $this->url;
    }

    /**
     * Closes the connection or the file now (the next push opens it
     * again); it is closed anyway when the Queue is dropped.
     */
    public function close(): void
    {
        $this->engine->close();
    }

    /** @return array<string, string> */
    public function __debugInfo(): array
    {
        return ['url' => (string) $this->url];
    }
}
