<?php

declare(strict_types=1);

namespace Hearth\Tests;

use Hearth\Internal\Queue\FileSchema;
use Hearth\Queue;
use Hearth\QueueError;
use Hearth\QueueJob;
use PHPUnit\Framework\TestCase;

/**
 * Hearth\Queue on a file: queue (a temporary SQLite file, through PDO).
 * That the crate takes these jobs as its own is
 * crates/hearth-queue/tests/php_producer.rs; here, what is stored, and the
 * file's life: created, refused, locked, and PHP without pdo_sqlite.
 */
final class QueueFileTest extends TestCase
{
    private string $dir = '';

    protected function setUp(): void
    {
        if (!in_array('sqlite', \PDO::getAvailableDrivers(), true)) {
            self::markTestSkipped('pdo_sqlite is not loaded (Debian: apt install php-sqlite3)');
        }
        $this->dir = sys_get_temp_dir() . '/hearth-queue-file-' . bin2hex(random_bytes(6));
        mkdir($this->dir, 0700);
    }

    protected function tearDown(): void
    {
        if ($this->dir !== '') {
            exec('rm -rf ' . escapeshellarg($this->dir));
        }
    }

    private function path(): string
    {
        return "{$this->dir}/jobs.db";
    }

    private function db(): \PDO
    {
        return new \PDO('sqlite:' . $this->path(), null, null, [\PDO::ATTR_ERRMODE => \PDO::ERRMODE_EXCEPTION]);
    }

    /** @return list<array<string, mixed>> */
    private function rows(string $sql): array
    {
        return $this->db()->query($sql)->fetchAll(\PDO::FETCH_ASSOC);
    }

    private static function assertQueueError(int $kind, callable $f): QueueError
    {
        try {
            $f();
        } catch (QueueError $e) {
            self::assertSame($kind, $e->getCode(), $e->getMessage());
            return $e;
        }
        self::fail('no QueueError was thrown');
    }

    public function testAJobIsARowAsTheCrateWritesIt(): void
    {
        $before = (int) floor(microtime(true) * 1000);
        $queue = Queue::open('file:' . $this->path());
        $id = $queue->push('App\Mail::send', ['ann@example.com'], delay: 60, attempts: 5, replyTo: 'batch-1');
        $after = (int) ceil(microtime(true) * 1000);
        self::assertSame(1, $id);
        $rows = $this->rows(
            'SELECT id, state, typeof(payload) AS type, payload, attempts, max_attempts, backoff_ms, '
            . 'backoff_max_ms, reply_to, enqueued_at, due_at - enqueued_at AS delay, consumer, touched_at, '
            . 'last_error, dead_reason, dead_at FROM jobs',
        );
        $row = $rows[0];
        self::assertGreaterThanOrEqual($before, $row['enqueued_at']);
        self::assertLessThanOrEqual($after, $row['enqueued_at']);
        unset($row['enqueued_at']);
        self::assertSame([
            'id' => 1,
            'state' => 0,
            'type' => 'blob',
            'payload' => '{"call":"App\\\\Mail::send","args":["ann@example.com"]}',
            'attempts' => 0,
            'max_attempts' => 5,
            'backoff_ms' => 1000,
            'backoff_max_ms' => 300000,
            'reply_to' => 'batch-1',
            'delay' => 60000,
            'consumer' => null,
            'touched_at' => null,
            'last_error' => null,
            'dead_reason' => null,
            'dead_at' => null,
        ], $row);
        self::assertSame([['name' => 'pushed', 'value' => 1]], $this->rows('SELECT * FROM counters'));
        self::assertSame(
            [['key' => 'schema', 'value' => FileSchema::VERSION]],
            $this->rows('SELECT * FROM meta'),
        );
        self::assertSame('wal', $this->db()->query('PRAGMA journal_mode')->fetchColumn());
    }

    public function testABatchIsOneTransactionAndItsIdsComeInOrder(): void
    {
        $queue = Queue::open('file:' . $this->path());
        self::assertSame([1], [$queue->pushShell('true')]);
        $jobs = [];
        for ($i = 0; $i < 1000; $i++) {
            $jobs[] = $i % 2 === 0 ? QueueJob::call('App\n', [$i]) : QueueJob::shell("echo {$i}", replyTo: 'r');
        }
        self::assertSame(range(2, 1001), $queue->pushMany($jobs));
        self::assertSame([['value' => 1001]], $this->rows("SELECT value FROM counters WHERE name = 'pushed'"));
        self::assertSame(
            [['payload' => '{"cmd":"echo 999"}', 'reply_to' => 'r']],
            $this->rows('SELECT payload, reply_to FROM jobs WHERE id = 1001'),
        );
    }

    public function testARefusedJobRefusesTheBatch(): void
    {
        $queue = Queue::open('file:' . $this->path(), maxPayload: 100);
        $e = self::assertQueueError(
            QueueError::TOO_LARGE,
            fn () => $queue->pushMany([QueueJob::call('App\a'), QueueJob::call('App\b', [str_repeat('x', 100)])]),
        );
        self::assertStringContainsString('over the limit of 100 bytes', $e->getMessage());
        self::assertFileDoesNotExist($this->path(), 'nothing was even opened');
    }

    public function testAFileTheCrateWouldRefuseIsRefused(): void
    {
        $db = $this->db();
        $db->exec(FileSchema::SQL);
        $db->exec("UPDATE meta SET value = 'hearth-queue 2' WHERE key = 'schema'");
        $e = self::assertQueueError(QueueError::ENGINE, fn () => Queue::open('file:' . $this->path())->push('App\a'));
        self::assertSame(
            "{$this->path()}: a queue file of another version (hearth-queue 2)",
            $e->getMessage(),
        );
        self::assertSame([], $this->rows('SELECT * FROM jobs'));

        file_put_contents("{$this->dir}/junk.db", str_repeat("not a database\n", 100));
        $e = self::assertQueueError(
            QueueError::ENGINE,
            fn () => Queue::open("file:{$this->dir}/junk.db")->push('App\a'),
        );
        self::assertStringContainsString("{$this->dir}/junk.db: open: ", $e->getMessage());
        self::assertStringContainsString('not a database', $e->getMessage());

        $e = self::assertQueueError(
            QueueError::ENGINE,
            fn () => Queue::open("file:{$this->dir}/missing/jobs.db")->push('App\a'),
        );
        self::assertStringContainsString("{$this->dir}/missing/jobs.db: open: ", $e->getMessage());
    }

    public function testALockedFileIsWaitedForThenUnavailable(): void
    {
        $queue = Queue::open('file:' . $this->path(), busyTimeout: 0.3);
        self::assertSame(1, $queue->push('App\a'));
        $other = $this->db();
        $other->exec('BEGIN IMMEDIATE');
        $started = microtime(true);
        $e = self::assertQueueError(QueueError::UNAVAILABLE, fn () => $queue->push('App\b'));
        self::assertGreaterThanOrEqual(0.25, microtime(true) - $started, 'the busy timeout was waited for');
        self::assertStringContainsString('locked by another process', $e->getMessage());
        $other->exec('COMMIT');
        self::assertSame(2, $queue->push('App\c'), 'the same handle pushes again once the lock is gone');
        self::assertSame([['n' => 2]], $this->rows('SELECT COUNT(*) AS n FROM jobs'));
    }

    public function testAFileUrlWithoutPdoSqliteSaysWhatToInstall(): void
    {
        // -n: PHP without php.ini, so without the shared pdo_sqlite
        $script = 'require ' . var_export(dirname(__DIR__) . '/autoload.php', true) . ';'
            . 'try { Hearth\Queue::open("file:' . $this->path() . '"); echo "opened"; }'
            . 'catch (Hearth\QueueError $e) { echo $e->getCode(), " ", $e->getMessage(); }';
        exec(escapeshellarg(PHP_BINARY) . ' -n -r ' . escapeshellarg($script) . ' 2>&1', $output, $status);
        self::assertSame(0, $status, implode("\n", $output));
        self::assertSame(
            [QueueError::ENGINE . " file:{$this->path()}: a file: queue needs PHP's pdo_sqlite extension, "
                . 'which is not loaded: install php-sqlite3 (Debian, Ubuntu), or enable pdo_sqlite in php.ini'],
            $output,
        );
    }
}
