<?php

declare(strict_types=1);

namespace Hearth\Tests\Support;

use Hearth\Internal\Queue\QueueUrl;
use Hearth\Internal\Queue\RedisConnection;
use Hearth\Internal\Queue\RedisErrorReply;
use PHPUnit\Framework\Assert;

/**
 * A real redis-server for a test: on a free port of 127.0.0.1, in a
 * temporary directory (AOF on, no snapshots), killed and its directory
 * removed by stop(). Tests skip when redis-server is not installed
 * (packaging/deps.txt installs it for make test).
 */
final class RedisServer
{
    /** @var resource|null */
    private $process = null;
    /** @var array<int, RedisConnection> administrator's connections, by database */
    private array $admin = [];

    /**
     * @param list<string> $args      more configuration, as redis-server's --name value arguments
     * @param string       $adminAuth ':PASSWORD' or 'USER:PASSWORD' for command(), when $args want one
     */
    private function __construct(
        public readonly int $port,
        public readonly string $dir,
        private readonly array $args,
        private readonly string $adminAuth,
    ) {
    }

    /** @param list<string> $args */
    public static function start(array $args = [], string $adminAuth = ''): self
    {
        $binary = self::binary();
        if ($binary === null) {
            Assert::markTestSkipped('redis-server is not installed (Debian: apt install redis-server)');
        }
        $dir = sys_get_temp_dir() . '/hearth-redis-' . bin2hex(random_bytes(6));
        mkdir($dir, 0700);
        $server = new self(self::freePort(), $dir, $args, $adminAuth);
        $server->spawn($binary);
        return $server;
    }

    /** A port nothing listens on now. */
    public static function freePort(): int
    {
        $socket = stream_socket_server('tcp://127.0.0.1:0');
        Assert::assertIsResource($socket);
        $name = (string) stream_socket_get_name($socket, false);
        fclose($socket);
        return (int) substr($name, (int) strrpos($name, ':') + 1);
    }

    public function url(string $name = 'q', string $auth = '', int $db = 0): string
    {
        $at = $auth === '' ? '' : "{$auth}@";
        return "redis://{$at}127.0.0.1:{$this->port}/{$db}/{$name}";
    }

    /**
     * Runs one command in database 0 on an administrator's connection and
     * returns its reply; an error reply fails the test.
     */
    public function command(string ...$args): mixed
    {
        return $this->commandIn(0, ...$args);
    }

    /** command() in database $db. */
    public function commandIn(int $db, string ...$args): mixed
    {
        $this->admin[$db] ??= new RedisConnection(
            QueueUrl::parse($this->url('admin', $this->adminAuth, $db)),
            5.0,
            10.0,
        );
        $reply = $this->admin[$db]->pipeline([$args])[0];
        Assert::assertNotInstanceOf(
            RedisErrorReply::class,
            $reply,
            implode(' ', $args) . ': ' . ($reply instanceof RedisErrorReply ? $reply->message : ''),
        );
        return $reply;
    }

    /**
     * A stat of INFO commandstats: calls or failed_calls of command $name
     * (0 when it was never called).
     */
    public function commandStat(string $name, string $stat = 'calls'): int
    {
        $info = (string) $this->command('INFO', 'commandstats');
        if (preg_match('/^cmdstat_' . preg_quote($name, '/') . ':.*\\b' . $stat . '=([0-9]+)/m', $info, $m) !== 1) {
            return 0;
        }
        return (int) $m[1];
    }

    /** SIGKILL, then the same port and directory again (the AOF is read back). */
    public function restart(): void
    {
        $this->kill();
        $binary = self::binary();
        Assert::assertNotNull($binary);
        $this->spawn($binary);
    }

    public function stop(): void
    {
        $this->kill();
        exec('rm -rf ' . escapeshellarg($this->dir));
    }

    private function kill(): void
    {
        foreach ($this->admin as $connection) {
            $connection->close();
        }
        $this->admin = [];
        if ($this->process !== null) {
            proc_terminate($this->process, 9);
            proc_close($this->process);
            $this->process = null;
        }
    }

    private static function binary(): ?string
    {
        foreach (array_merge(explode(PATH_SEPARATOR, (string) getenv('PATH')), ['/usr/bin', '/usr/sbin']) as $dir) {
            if ($dir !== '' && is_executable("{$dir}/redis-server")) {
                return "{$dir}/redis-server";
            }
        }
        return null;
    }

    private function spawn(string $binary): void
    {
        $command = [
            $binary,
            '--port', (string) $this->port,
            '--bind', '127.0.0.1',
            '--dir', $this->dir,
            '--save', '',
            '--appendonly', 'yes',
            // Every write reaches the file before its reply: with the
            // default (everysec), a write waiting for a slow fsync is
            // lost to the SIGKILL of restart().
            '--appendfsync', 'always',
            '--daemonize', 'no',
            '--logfile', "{$this->dir}/redis.log",
            ...$this->args,
        ];
        $null = ['file', '/dev/null', 'r+'];
        $process = proc_open($command, [$null, $null, $null], $pipes);
        Assert::assertIsResource($process, 'redis-server starts');
        $this->process = $process;
        // Ready once it answers PING with PONG, not LOADING (or with
        // NOAUTH: it answers, and wants a password).
        $giveUp = microtime(true) + 30;
        while (true) {
            $socket = @stream_socket_client("tcp://127.0.0.1:{$this->port}", $errno, $errstr, 1.0);
            if ($socket !== false) {
                stream_set_timeout($socket, 1);
                fwrite($socket, "PING\r\n");
                $line = (string) fgets($socket);
                fclose($socket);
                if (str_starts_with($line, '+PONG') || str_starts_with($line, '-NOAUTH')) {
                    return;
                }
            }
            $status = proc_get_status($process);
            if (!$status['running'] || microtime(true) > $giveUp) {
                Assert::fail("redis-server on port {$this->port} did not start: "
                    . @file_get_contents("{$this->dir}/redis.log"));
            }
            usleep(20_000);
        }
    }
}
