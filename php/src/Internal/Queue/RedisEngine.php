<?php

declare(strict_types=1);

namespace Hearth\Internal\Queue;

use Hearth\QueueError;
use Hearth\QueueJob;

/**
 * Pushes to a Redis queue exactly as the hearth-queue crate does (its
 * src/redis.rs): the crate's push script (RedisPushScript) run with
 * EVALSHA, or EVAL when Redis answers NOSCRIPT (a restart or SCRIPT FLUSH
 * emptied its cache), on the keys `hearth:{NAME}:ready`, `:delayed`,
 * `:seq` and `:stats`, at most 500 jobs or 8 MiB of payload per call (a
 * large batch never holds Redis long). The calls of one pushMany() go out
 * as one pipeline: one round trip.
 *
 * The stream's consumer group is not created here: consumers create it
 * from the stream's start, so jobs pushed before any consumer existed are
 * delivered too, and a push costs no extra round trip.
 *
 * @internal
 */
final class RedisEngine implements Engine
{
    /** As the crate's PUSH_CHUNK and PUSH_CHUNK_BYTES. */
    private const CHUNK_JOBS = 500;
    private const CHUNK_BYTES = 8 << 20;

    private readonly RedisConnection $connection;
    private readonly string $sha;
    /** @var list<string> */
    private readonly array $keys;

    public function __construct(private readonly QueueUrl $url, float $connectTimeout, float $timeout)
    {
        $this->connection = new RedisConnection($url, $connectTimeout, $timeout);
        $this->sha = sha1(RedisPushScript::TEXT);
        $prefix = "hearth:{{$url->name}}:";
        $this->keys = ["{$prefix}ready", "{$prefix}delayed", "{$prefix}seq", "{$prefix}stats"];
    }

    public function push(array $jobs): array
    {
        $chunks = self::chunks($jobs);
        $replies = $this->connection->pipeline(array_map(fn (array $c) => $this->call('EVALSHA', $c), $chunks));
        $again = [];
        foreach ($replies as $i => $reply) {
            if ($reply instanceof RedisErrorReply && $reply->code() === 'NOSCRIPT') {
                $again[$i] = $this->call('EVAL', $chunks[$i]);
            }
        }
        if ($again !== []) {
            // NOSCRIPT: that call ran nothing; run it again with the script's text.
            foreach ($this->connection->pipeline(array_values($again)) as $n => $reply) {
                $replies[array_keys($again)[$n]] = $reply;
            }
        }
        $ids = [];
        $refused = null;
        foreach ($replies as $i => $reply) {
            if (!is_array($reply)) {
                $refused ??= [$i, $reply];
                continue;
            }
            foreach ($reply as $id) {
                if (!is_int($id)) {
                    throw new QueueError(QueueError::ENGINE, "{$this->url}: push: a job id is not a number");
                }
                $ids[] = $id;
            }
        }
        if ($refused !== null) {
            // The pipeline's other calls ran: say what of the batch they stored.
            [$i, $reply] = $refused;
            $stored = $ids === []
                ? 'nothing was stored'
                : count($ids) . ' jobs of the batch were stored by its other calls';
            $first = 1 + array_sum(array_map('count', array_slice($chunks, 0, $i)));
            throw new QueueError(
                $reply instanceof RedisErrorReply && $reply->isTransient()
                    ? QueueError::UNAVAILABLE
                    : QueueError::ENGINE,
                "{$this->url}: push of jobs {$first} to " . ($first + count($chunks[$i]) - 1) . ' of '
                . count($jobs) . ': ' . self::why($reply) . "; {$stored}",
            );
        }
        if (count($ids) !== count($jobs)) {
            throw new QueueError(QueueError::ENGINE, "{$this->url}: push returned " . count($ids)
                . ' ids for ' . count($jobs) . ' jobs');
        }
        return $ids;
    }

    public function close(): void
    {
        $this->connection->close();
    }

    /**
     * The script call for $jobs: KEYS ready, delayed, seq, stats; ARGV n,
     * then per job payload, max, backoff, backoff_max, reply, delay_ms.
     *
     * @param list<QueueJob> $jobs
     * @return list<string|int>
     */
    private function call(string $verb, array $jobs): array
    {
        $command = [$verb, $verb === 'EVAL' ? RedisPushScript::TEXT : $this->sha, 4, ...$this->keys, count($jobs)];
        foreach ($jobs as $job) {
            array_push(
                $command,
                $job->payload,
                $job->attempts,
                $job->backoffMs,
                $job->backoffMaxMs,
                $job->replyTo ?? '',
                $job->delayMs,
            );
        }
        return $command;
    }

    private static function why(mixed $reply): string
    {
        if (!$reply instanceof RedisErrorReply) {
            return 'an answer that is not a list of ids';
        }
        if ($reply->code() === 'NOAUTH' || str_contains($reply->message, 'unauthenticated')) {
            // Redis 7 answers a large command from a client without AUTH with a protocol error.
            return "Redis wants a password, as in redis://:PASSWORD@HOST/NAME ({$reply->message})";
        }
        return $reply->message;
    }

    /**
     * $jobs cut into runs of at most CHUNK_JOBS jobs and about CHUNK_BYTES
     * of payload (a run has one job at least), as the crate's chunks().
     *
     * @param list<QueueJob> $jobs
     * @return list<list<QueueJob>>
     */
    private static function chunks(array $jobs): array
    {
        $out = [];
        $run = [];
        $bytes = 0;
        foreach ($jobs as $job) {
            $size = strlen($job->payload);
            if ($run !== [] && (count($run) === self::CHUNK_JOBS || $bytes + $size > self::CHUNK_BYTES)) {
                $out[] = $run;
                $run = [];
                $bytes = 0;
            }
            $run[] = $job;
            $bytes += $size;
        }
        if ($run !== []) {
            $out[] = $run;
        }
        return $out;
    }
}
