<?php

declare(strict_types=1);

namespace Hearth\Internal\Queue;

use Hearth\QueueError;

/**
 * Pushes to a file: queue exactly as the hearth-queue crate does (its
 * src/file.rs and src/file/store.rs), through PDO's SQLite driver: WAL
 * mode, `synchronous=NORMAL`, a busy timeout, the crate's tables created
 * in one BEGIN IMMEDIATE transaction when the file has none (FileSchema),
 * a file of another schema version refused, and each push one BEGIN
 * IMMEDIATE transaction (the rows, then the `pushed` counter).
 *
 * A file another process holds locked is waited for up to the busy
 * timeout; past it the push fails as UNAVAILABLE, nothing stored.
 *
 * @internal
 */
final class FileEngine implements Engine
{
    /** SQLite's result codes for a file locked by another connection. */
    private const SQLITE_BUSY = 5;
    private const SQLITE_LOCKED = 6;

    private ?\PDO $pdo = null;
    private ?\PDOStatement $insert = null;

    public function __construct(private readonly QueueUrl $url, private readonly float $busyTimeout)
    {
        if (!self::available()) {
            throw new QueueError(
                QueueError::ENGINE,
                "{$url}: a file: queue needs PHP's pdo_sqlite extension, which is not loaded: "
                . 'install php-sqlite3 (Debian, Ubuntu), or enable pdo_sqlite in php.ini',
            );
        }
    }

    /** Whether this PHP has PDO's SQLite driver. */
    public static function available(): bool
    {
        return class_exists(\PDO::class, false) && in_array('sqlite', \PDO::getAvailableDrivers(), true);
    }

    public function push(array $jobs): array
    {
        $pdo = $this->pdo ?? $this->open();
        try {
            $pdo->exec('BEGIN IMMEDIATE');
        } catch (\PDOException $e) {
            throw $this->failure('push', $e);
        }
        try {
            $now = (int) floor(microtime(true) * 1000);
            $insert = $this->insert ??= $pdo->prepare(
                'INSERT INTO jobs (state, payload, attempts, max_attempts, backoff_ms, backoff_max_ms, '
                . 'reply_to, enqueued_at, due_at) VALUES (0, ?, 0, ?, ?, ?, ?, ?, ?)'
            );
            $ids = [];
            foreach ($jobs as $job) {
                // A BLOB, as the crate binds its payload bytes.
                $insert->bindValue(1, $job->payload, \PDO::PARAM_LOB);
                $insert->bindValue(2, $job->attempts, \PDO::PARAM_INT);
                $insert->bindValue(3, $job->backoffMs, \PDO::PARAM_INT);
                $insert->bindValue(4, $job->backoffMaxMs, \PDO::PARAM_INT);
                $insert->bindValue(5, $job->replyTo, $job->replyTo === null ? \PDO::PARAM_NULL : \PDO::PARAM_STR);
                $insert->bindValue(6, $now, \PDO::PARAM_INT);
                $insert->bindValue(7, $now + $job->delayMs, \PDO::PARAM_INT);
                $insert->execute();
                $ids[] = (int) $pdo->lastInsertId();
            }
            $bump = $pdo->prepare(
                'INSERT INTO counters (name, value) VALUES (\'pushed\', ?) '
                . 'ON CONFLICT (name) DO UPDATE SET value = value + excluded.value'
            );
            $bump->bindValue(1, count($jobs), \PDO::PARAM_INT);
            $bump->execute();
            $pdo->exec('COMMIT');
            return $ids;
        } catch (\PDOException $e) {
            $this->rollBack();
            throw $this->failure('push', $e);
        }
    }

    public function close(): void
    {
        $this->insert = null;
        $this->pdo = null;
    }

    /** @return array<string, string> */
    public function __debugInfo(): array
    {
        return ['url' => (string) $this->url, 'open' => $this->pdo !== null ? 'yes' : 'no'];
    }

    private function open(): \PDO
    {
        try {
            $pdo = new \PDO('sqlite:' . $this->url->path, null, null, [
                \PDO::ATTR_ERRMODE => \PDO::ERRMODE_EXCEPTION,
                \PDO::ATTR_STRINGIFY_FETCHES => false,
            ]);
            $pdo->exec('PRAGMA busy_timeout = ' . max(1, (int) round($this->busyTimeout * 1000)));
            // WAL: readers never wait for the writer, and a commit is one
            // append; NORMAL: a commit survives the process, as the crate's.
            $pdo->query('PRAGMA journal_mode = WAL')?->fetchAll();
            $pdo->exec('PRAGMA synchronous = NORMAL');
            $version = $this->version($pdo);
            if ($version === null) {
                $pdo->exec('BEGIN IMMEDIATE');
                try {
                    $pdo->exec(FileSchema::SQL);
                    $pdo->exec('COMMIT');
                } catch (\PDOException $e) {
                    $pdo->exec('ROLLBACK');
                    throw $e;
                }
                $version = $this->version($pdo);
            }
        } catch (\PDOException $e) {
            throw $this->failure('open', $e);
        }
        if ($version !== FileSchema::VERSION) {
            throw new QueueError(
                QueueError::ENGINE,
                "{$this->url->path}: a queue file of another version (" . ($version ?? 'none') . ')',
            );
        }
        return $this->pdo = $pdo;
    }

    /** The file's schema version; null when it has no tables yet. */
    private function version(\PDO $pdo): ?string
    {
        $found = $pdo->query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'")?->fetchColumn();
        if ($found === false || $found === null) {
            return null;
        }
        $value = $pdo->query("SELECT value FROM meta WHERE key = 'schema'")?->fetchColumn();
        return is_string($value) ? $value : null;
    }

    private function rollBack(): void
    {
        try {
            $this->pdo?->exec('ROLLBACK');
        } catch (\PDOException) {
            // Nothing was begun, or SQLite ended the transaction itself.
        }
    }

    private function failure(string $what, \PDOException $e): QueueError
    {
        $code = (int) ($e->errorInfo[1] ?? 0);
        $busy = $code === self::SQLITE_BUSY || $code === self::SQLITE_LOCKED;
        if ($what === 'open') {
            $this->pdo = null;
        }
        return new QueueError(
            $busy ? QueueError::UNAVAILABLE : QueueError::ENGINE,
            "{$this->url->path}: {$what}: " . ($busy
                ? "the file stayed locked by another process for the busy timeout ({$this->busyTimeout} s)"
                : $e->getMessage()),
            $e,
        );
    }
}
