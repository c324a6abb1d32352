<?php

declare(strict_types=1);

namespace Hearth\Tests;

use Hearth\JobError;
use Hearth\Jobs;
use PHPUnit\Framework\TestCase;

/**
 * Jobs::call() against a real `hearth work --listen` (HEARTH_BIN, else the
 * debug build in target/), and its in-process fallback. tests/calls.rs
 * makes the same calls from php-fpm behind nginx.
 */
final class JobsTest extends TestCase
{
    private const FIXTURE = __DIR__ . '/../../tests/fixtures/calls/jobs.php';

    private string $dir = '';
    /** @var resource|null */
    private $listener = null;

    public static function setUpBeforeClass(): void
    {
        require_once self::FIXTURE;
    }

    protected function setUp(): void
    {
        $this->dir = sys_get_temp_dir() . '/hearth-jobs-' . bin2hex(random_bytes(6));
        mkdir($this->dir);
    }

    protected function tearDown(): void
    {
        Jobs::close();
        Jobs::useSocket(null);
        if ($this->listener !== null) {
            $status = proc_get_status($this->listener);
            if ($status['running']) {
                posix_kill($status['pid'], SIGTERM);
            }
            proc_close($this->listener);
            $this->listener = null;
        }
        exec('rm -rf ' . escapeshellarg($this->dir));
    }

    public function testWithNoListenerConfiguredTheCallRunsHereAsAWorkerWouldRunIt(): void
    {
        putenv('HEARTH_JOBS_SOCKET');
        self::assertSame(5, Jobs::call('CallsFixture\add', [2, 3]));
        self::assertSame('hi, Ada', Jobs::call('CallsFixture\greet', ['greeting' => 'hi', 'name' => 'Ada']));
        // The value goes through JSON as it would from a worker.
        self::assertSame(
            ['list' => [1, 2.0, 'three'], 'object' => ['k' => 'v'], 'null' => null],
            Jobs::call('CallsFixture\shape'),
        );
        self::assertSame(getmypid(), Jobs::call('CallsFixture\pid'), 'what it prints is dropped');
        $this->expectOutputString('');
    }

    public function testWhenTheSocketIsAbsentOrRefusesTheCallRunsHere(): void
    {
        self::assertSame(getmypid(), Jobs::call('CallsFixture\pid', socket: "unix:{$this->dir}/none.sock"));
        // A socket file nobody accepts on (a stopped listener's).
        $server = stream_socket_server("unix://{$this->dir}/stale.sock");
        self::assertIsResource($server);
        fclose($server);
        self::assertFileExists("{$this->dir}/stale.sock");
        self::assertSame(7, Jobs::call('CallsFixture\add', [3, 4], socket: "unix:{$this->dir}/stale.sock"));
    }

    public function testWithoutFallbackAnAbsentListenerIsAJobError(): void
    {
        try {
            Jobs::call('CallsFixture\add', [1, 2], fallback: false, socket: "unix:{$this->dir}/none.sock");
            self::fail('no JobError');
        } catch (JobError $e) {
            self::assertStringContainsString('no hearth work listens on unix:', $e->getMessage());
            self::assertNull($e->status);
        }
        putenv('HEARTH_JOBS_SOCKET');
        $this->expectException(JobError::class);
        $this->expectExceptionMessage('no listener is configured');
        Jobs::call('CallsFixture\add', [1, 2], fallback: false);
    }

    public function testWhatTheFunctionThrowsHereComesAsAJobErrorWithTheException(): void
    {
        try {
            Jobs::call('CallsFixture\fail', ['here']);
            self::fail('no JobError');
        } catch (JobError $e) {
            self::assertSame(\DomainException::class, $e->class);
            self::assertSame('it failed: here', $e->getMessage());
            self::assertSame(7, $e->getCode());
            self::assertSame(realpath(self::FIXTURE), $e->getFile());
            self::assertSame(self::lineOf('the line JobError reports'), $e->getLine());
            self::assertStringContainsString('CallsFixture\fail(', $e->trace);
            self::assertStringNotContainsString('Hearth\Jobs', $e->trace, 'the trace stops at the call');
            self::assertInstanceOf(\DomainException::class, $e->getPrevious());
            self::assertStringStartsWith('DomainException: it failed: here in ', (string) $e);
        }
        try {
            Jobs::call('CallsFixture\nothing');
            self::fail('no JobError');
        } catch (JobError $e) {
            self::assertSame(\BadFunctionCallException::class, $e->class);
        }
    }

    public function testCallsThatCannotBeMadeAreRefusedBeforeAnythingRuns(): void
    {
        foreach (
            [
                [fn () => Jobs::call('CallsFixture\add', [NAN, 1]), \InvalidArgumentException::class, 'JSON'],
                [fn () => Jobs::call('', []), \InvalidArgumentException::class, 'needs the name'],
                [fn () => Jobs::call('CallsFixture\add', [1], timeout: 0), \InvalidArgumentException::class, 'above 0'],
                [fn () => Jobs::call('CallsFixture\add', [1], socket: '/x'), \InvalidArgumentException::class, 'unix:'],
                [
                    fn () => Jobs::call('CallsFixture\greet', [str_repeat('x', Jobs::MAX_CALL)], socket: $this->sock()),
                    \LengthException::class,
                    'more than the',
                ],
            ] as [$call, $class, $message]
        ) {
            try {
                $call();
                self::fail("no {$class}");
            } catch (\Throwable $e) {
                self::assertInstanceOf($class, $e);
                self::assertStringContainsString($message, $e->getMessage());
            }
        }
    }

    public function testAListenerRunsTheCallInAWarmWorker(): void
    {
        $socket = $this->startListener();
        Jobs::useSocket($socket);
        self::assertSame(5, Jobs::call('CallsFixture\add', [2, 3]));
        $remote = Jobs::call('CallsFixture\pid');
        self::assertNotSame(getmypid(), $remote);
        self::assertSame(
            ['list' => [1, 2.0, 'three'], 'object' => ['k' => 'v'], 'null' => null],
            Jobs::call('CallsFixture\shape'),
        );
        for ($i = 0; $i < 50; $i++) {
            self::assertSame($i + 1, Jobs::call('CallsFixture\add', [$i, 1]), 'one connection, call after call');
        }
        try {
            Jobs::call('CallsFixture\fail', ['there']);
            self::fail('no JobError');
        } catch (JobError $e) {
            self::assertSame(\DomainException::class, $e->class);
            self::assertSame('it failed: there', $e->getMessage());
            self::assertSame(self::lineOf('the line JobError reports'), $e->getLine());
            self::assertNull($e->getPrevious(), 'thrown in the worker');
        }
        try {
            Jobs::call('CallsFixture\sleepFor', [20], timeout: 0.3);
            self::fail('no JobError');
        } catch (JobError $e) {
            self::assertTrue($e->timedOut);
            self::assertStringContainsString('ran past its time limit of 0.300s', $e->getMessage());
        }
        self::assertSame(2, Jobs::call('CallsFixture\add', [1, 1]), 'served again after the timeout');
        // The listener restarts: the connection this process held is gone,
        // and the next call takes a new one.
        $this->stopListener();
        self::assertSame(getmypid(), Jobs::call('CallsFixture\pid'), 'stopped: the call runs here');
        $this->startListener();
        self::assertNotSame(getmypid(), Jobs::call('CallsFixture\pid'));
    }

    private function startListener(): string
    {
        $bin = getenv('HEARTH_BIN');
        if ($bin === false || $bin === '') {
            $bin = dirname(__DIR__, 2) . '/target/debug/hearth';
        }
        if (!is_executable($bin)) {
            if (getenv('HEARTH_BIN')) {
                self::fail("HEARTH_BIN={$bin} is not an executable");
            }
            self::markTestSkipped('no hearth binary: set HEARTH_BIN, or build it (make test does both)');
        }
        $socket = "{$this->dir}/jobs.sock";
        $log = "{$this->dir}/log-" . bin2hex(random_bytes(4));
        $this->listener = proc_open(
            [$bin, 'work', '--listen', "unix:{$socket}", '--php-bootstrap', self::FIXTURE, '-j', '2'],
            [0 => ['file', '/dev/null', 'r'], 1 => ['file', '/dev/null', 'w'], 2 => ['file', $log, 'w']],
            $pipes,
        ) ?: null;
        self::assertNotNull($this->listener);
        $deadline = microtime(true) + 60;
        while (!str_contains((string) @file_get_contents($log), 'taking calls')) {
            self::assertLessThan($deadline, microtime(true), 'hearth work did not start: '
                . @file_get_contents($log));
            usleep(20000);
        }
        return "unix:{$socket}";
    }

    private function stopListener(): void
    {
        $status = proc_get_status($this->listener);
        posix_kill($status['pid'], SIGTERM);
        proc_close($this->listener);
        $this->listener = null;
    }

    private function sock(): string
    {
        return "unix:{$this->dir}/x.sock";
    }

    private static function lineOf(string $marker): int
    {
        foreach (file(self::FIXTURE) as $i => $line) {
            if (str_contains($line, $marker)) {
                return $i + 1;
            }
        }
        self::fail("no line with {$marker}");
    }
}
