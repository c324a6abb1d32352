<?php

declare(strict_types=1);

namespace Hearth\Tests;

use Hearth\JobError;
use Hearth\TaskRunner;
use Hearth\TaskRunnerException;
use PHPUnit\Framework\TestCase;

/**
 * TaskRunner against the real `hearth run` (HEARTH_BIN, else the debug
 * build in target/): `make test-php` sets HEARTH_BIN. Only the tests of a
 * runner that dies use small fake binaries, written to a temporary folder.
 */
final class TaskRunnerTest extends TestCase
{
    private const JOBS = __DIR__ . '/fixtures/taskrunner/jobs.php';
    private const NS = 'Hearth\\Tests\\Fixtures\\TaskRunner\\';

    private static string $hearth = '';
    /** @var string|false */
    private $hearthBin = false;
    /** @var string|false */
    private $path = false;
    private string $dir = '';

    public static function setUpBeforeClass(): void
    {
        $bin = getenv('HEARTH_BIN');
        if ($bin === false || $bin === '') {
            $bin = dirname(__DIR__, 2) . '/target/debug/hearth';
        }
        self::$hearth = is_executable($bin) ? $bin : '';
    }

    protected function setUp(): void
    {
        if (self::$hearth === '') {
            $bin = getenv('HEARTH_BIN');
            if ($bin !== false && $bin !== '') {
                // make test sets it: a missing binary there is a failure, not a skip.
                self::fail("HEARTH_BIN={$bin} is not an executable");
            }
            self::markTestSkipped('no hearth binary: set HEARTH_BIN, or build it (make test does both)');
        }
        $this->hearthBin = getenv('HEARTH_BIN');
        $this->path = getenv('PATH');
        putenv('HEARTH_BIN=' . self::$hearth);
        $this->dir = sys_get_temp_dir() . '/hearth-taskrunner-' . bin2hex(random_bytes(6));
        mkdir($this->dir);
    }

    protected function tearDown(): void
    {
        putenv($this->hearthBin === false ? 'HEARTH_BIN' : 'HEARTH_BIN=' . $this->hearthBin);
        putenv($this->path === false ? 'PATH' : 'PATH=' . $this->path);
        if ($this->dir !== '') {
            exec('rm -rf ' . escapeshellarg($this->dir));
        }
    }

    // Shell tasks

    public function testABatchOfEchoesReportsEachResultWithItsProgress(): void
    {
        $runner = new TaskRunner(8);
        for ($i = 0; $i < 100; $i++) {
            $runner->add("task_{$i}", "echo {$i}");
        }
        $sum = 0;
        $seen = [];
        $progress = [];
        $returned = $runner->runAndWait(function ($result, $completed, $total) use (&$sum, &$seen, &$progress) {
            $sum += (int) $result['stdout'];
            $seen[$result['id']] = $result;
            $progress[] = [$completed, $total];
        });

        self::assertSame([], $returned);
        self::assertSame(4950, $sum);
        self::assertCount(100, $seen);
        self::assertSame(array_map(null, range(1, 100), array_fill(0, 100, 100)), $progress);
        $result = $seen['task_42'];
        self::assertSame('task_42', $result['id']);
        self::assertSame(0, $result['status']);
        self::assertNull($result['signal']);
        self::assertSame("42\n", $result['stdout']);
        self::assertSame('', $result['stderr']);
        self::assertSame(43, $result['seq']);
        self::assertSame(1, $result['attempts']);
        self::assertSame(0, $runner->failed());
    }

    public function testWithoutACallbackResultsComeBackKeyedById(): void
    {
        $ids = ['a', '0', '01', '', 'tâche "spéciale" \\ /', '123456789012345678901234567890'];
        $runner = new TaskRunner();
        foreach ($ids as $n => $id) {
            $runner->add($id, "echo {$n}");
        }
        $results = $runner->runAndWait();

        self::assertCount(count($ids), $results);
        foreach ($ids as $n => $id) {
            self::assertSame($id, $results[$id]['id']);
            self::assertSame("{$n}\n", $results[$id]['stdout']);
        }
    }

    public function testTheRunnerIsEmptyAfterABatchAndTakesTheNext(): void
    {
        $runner = new TaskRunner(2);
        $runner->add('a', 'echo first');
        self::assertSame(['a'], array_keys($runner->runAndWait()));
        $runner->add('a', 'echo second')->add('b', 'echo third');
        $results = $runner->runAndWait();
        self::assertSame("second\n", $results['a']['stdout']);
        self::assertSame("third\n", $results['b']['stdout']);
        self::assertSame([], $runner->runAndWait());
    }

    /** The seed library deadlocked on an output of 64 KiB + 1 byte (the pipe buffer). */
    public function testOutputJustPastThePipeBufferComesBackWhole(): void
    {
        $results = (new TaskRunner(2))
            ->add('over', "head -c 65537 /dev/zero | tr '\\000' a; head -c 70000 /dev/zero | tr '\\000' b >&2")
            ->add('exact', "head -c 65536 /dev/zero | tr '\\000' c")
            ->runAndWait();

        self::assertSame(str_repeat('a', 65537), $results['over']['stdout']);
        self::assertSame(str_repeat('b', 70000), $results['over']['stderr']);
        self::assertSame(str_repeat('c', 65536), $results['exact']['stdout']);
    }

    public function testTenMebibytesOfBinaryOutputAndLargeInputSurviveByteForByte(): void
    {
        $bytes = random_bytes(10 * 1024 * 1024);
        file_put_contents($this->dir . '/random', $bytes);
        $text = str_repeat("héllo wörld\n", 200000);

        $results = (new TaskRunner(3))
            ->add('binary', 'cat random', ['cwd' => $this->dir])
            ->add('text', 'cat', ['stdin' => $text])
            ->add('small', 'echo small')
            ->runAndWait();

        self::assertSame(strlen($bytes), strlen($results['binary']['stdout']));
        self::assertTrue($bytes === $results['binary']['stdout'], 'the 10 MiB differ');
        self::assertTrue($text === $results['text']['stdout'], 'the text read back from stdin differs');
        self::assertSame("small\n", $results['small']['stdout']);
        self::assertArrayNotHasKey('stdout_encoding', $results['binary']);
    }

    public function testOutputThatIsNotUtf8ComesBackAsTheRawBytes(): void
    {
        $results = (new TaskRunner())
            ->add('bytes', "printf '\\377\\376\\000\\200ok'; printf '\\351t\\351' >&2")
            ->add('utf8', "printf 'caf\\303\\251'")
            ->runAndWait();

        self::assertSame("\xff\xfe\x00\x80ok", $results['bytes']['stdout']);
        self::assertSame("\xe9t\xe9", $results['bytes']['stderr']);
        self::assertSame('café', $results['utf8']['stdout']);
        self::assertArrayNotHasKey('stdout_encoding', $results['bytes']);
        self::assertArrayNotHasKey('stderr_encoding', $results['bytes']);
    }

    public function testStderrAndANonZeroStatusAreReportedAndCounted(): void
    {
        $runner = new TaskRunner();
        $results = $runner
            ->add('fails', 'echo out; echo err >&2; exit 3')
            ->add('fails too', 'exit 1')
            ->add('succeeds', 'true')
            ->runAndWait();

        self::assertSame(3, $results['fails']['status']);
        self::assertSame("out\n", $results['fails']['stdout']);
        self::assertSame("err\n", $results['fails']['stderr']);
        self::assertSame(1, $results['fails too']['status']);
        self::assertSame(0, $results['succeeds']['status']);
        // Two failures: `hearth run` exits with 2, which must not be taken for "unusable input".
        self::assertSame(2, $runner->failed());
    }

    public function testEnvCwdAndStdinReachTheTask(): void
    {
        $results = (new TaskRunner())
            ->add('all', 'printf "%s|%s|%s|" "$GREETING" "$EMPTY" "$(pwd -P)"; cat', [
                'env' => ['GREETING' => 'hello world', 'EMPTY' => ''],
                'cwd' => $this->dir,
                'stdin' => "line 1\nline 2\n",
            ])
            ->add('defaults', 'printf "%s|" "${GREETING-unset}"; cat')
            ->runAndWait();

        self::assertSame('hello world||' . realpath($this->dir) . "|line 1\nline 2\n", $results['all']['stdout']);
        self::assertSame('unset|', $results['defaults']['stdout']);
    }

    public function testArgvTasksRunWithoutAShell(): void
    {
        $results = (new TaskRunner())
            ->addArgv('printf', ['printf', '%s|', 'a b', '$HOME', "it's", '*', '; echo no'])
            ->addArgv('cwd', ['pwd', '-P'], ['cwd' => $this->dir])
            ->addArgv('env', ['sh', '-c', 'echo "$ANSWER"'], ['env' => ['ANSWER' => 42]])
            ->runAndWait();

        self::assertSame("a b|\$HOME|it's|*|; echo no|", $results['printf']['stdout']);
        self::assertSame(realpath($this->dir) . "\n", $results['cwd']['stdout']);
        self::assertSame("42\n", $results['env']['stdout']);
    }

    public function testAProgramThatCannotStartIsAFailedTask(): void
    {
        $runner = new TaskRunner();
        $results = $runner->addArgv('missing', [$this->dir . '/no-such-program'])->runAndWait();

        self::assertNotSame(0, $results['missing']['status']);
        self::assertSame(1, $runner->failed());
    }

    public function testTasksPastTheirTimeoutAreStoppedWithASignal(): void
    {
        $runner = new TaskRunner(3, timeout: 0.3, killAfter: 0.2);
        $results = $runner
            ->add('slow', 'sleep 30')
            ->add('quick', 'sleep 0.05; echo done')
            ->add('patient', 'sleep 0.6; echo done', ['timeout' => 10])
            ->runAndWait();

        self::assertTrue($results['slow']['timed_out'] ?? false);
        self::assertNull($results['slow']['status']);
        self::assertIsString($results['slow']['signal']);
        self::assertSame("done\n", $results['quick']['stdout']);
        self::assertArrayNotHasKey('timed_out', $results['quick']);
        self::assertSame(0, $results['patient']['status'], 'a task timeout overrides the runner\'s');
        self::assertSame(1, $runner->failed());
    }

    public function testAFailedTaskIsRetried(): void
    {
        $marker = escapeshellarg($this->dir . '/tried');
        $runner = new TaskRunner(retries: 2);
        $results = $runner
            ->add('flaky', "if [ -e {$marker} ]; then echo second; else touch {$marker}; echo first; exit 1; fi")
            ->add('broken', 'exit 7')
            ->runAndWait();

        self::assertSame(0, $results['flaky']['status']);
        self::assertSame("second\n", $results['flaky']['stdout']);
        self::assertSame(2, $results['flaky']['attempts']);
        self::assertSame(7, $results['broken']['status']);
        self::assertSame(3, $results['broken']['attempts']);
        self::assertSame(1, $runner->failed());
    }

    public function testHaltSoonStartsNothingAfterTheFirstFailure(): void
    {
        $runner = new TaskRunner(1, halt: 'soon');
        $runner->add('fails', 'exit 1');
        for ($i = 0; $i < 5; $i++) {
            $runner->add("later {$i}", 'touch ' . escapeshellarg("{$this->dir}/later{$i}"));
        }
        $results = $runner->runAndWait();

        self::assertSame(1, $results['fails']['status']);
        self::assertSame([], glob($this->dir . '/later*'));
        self::assertGreaterThanOrEqual(1, $runner->failed());
    }

    public function testHaltNowStopsRunningTasks(): void
    {
        $marker = escapeshellarg($this->dir . '/finished');
        $runner = new TaskRunner(2, halt: 'now', killAfter: 0.5);
        $results = $runner
            ->add('fails', 'sleep 0.2; exit 1')
            ->add('long', "sleep 30; touch {$marker}")
            ->add('later', "touch {$marker}")
            ->runAndWait();

        self::assertSame(1, $results['fails']['status']);
        if (isset($results['long'])) {
            self::assertNotSame(0, $results['long']['status']);
        }
        self::assertFileDoesNotExist($this->dir . '/finished');
    }

    /** `hearth run` exits with 2 both for two failures and for unusable input. */
    public function testTwoFailuresUnderHaltAreNotTakenForUnusableInput(): void
    {
        $runner = new TaskRunner(1, halt: 'soon,fail=2');
        $results = $runner
            ->add('f1', 'exit 1')
            ->add('f2', 'exit 1')
            ->add('later', 'touch ' . escapeshellarg($this->dir . '/later'))
            ->runAndWait();

        self::assertSame(['f1', 'f2'], array_keys($results));
        self::assertSame(2, $runner->failed());
        self::assertFileDoesNotExist($this->dir . '/later');
    }

    public function testKeepOrderReportsResultsInTheOrderTasksWereAdded(): void
    {
        $runner = new TaskRunner(4, keepOrder: true);
        foreach ([0.3, 0.2, 0.1, 0] as $n => $delay) {
            $runner->add("t{$n}", "sleep {$delay}; echo {$n}");
        }
        $order = [];
        $runner->runAndWait(function (array $result) use (&$order): void {
            $order[] = $result['id'];
        });
        self::assertSame(['t0', 't1', 't2', 't3'], $order);
    }

    public function testMaxOutputKeepsTheStartOfLongOutputs(): void
    {
        $results = (new TaskRunner(maxOutput: 10))
            ->add('long', "head -c 100000 /dev/zero | tr '\\000' x")
            ->runAndWait();
        self::assertSame('xxxxxxxxxx', $results['long']['stdout']);
        self::assertTrue($results['long']['stdout_truncated']);
        self::assertSame(100000, $results['long']['stdout_bytes']);

        $results = (new TaskRunner(maxOutput: '1K'))
            ->add('long', "head -c 5000 /dev/zero | tr '\\000' y")
            ->runAndWait();
        self::assertSame(str_repeat('y', 1024), $results['long']['stdout']);
    }

    public function testTheJoblogRecordsTasksAndResumeSkipsThem(): void
    {
        $joblog = $this->dir . '/joblog';
        (new TaskRunner(joblog: $joblog))->add('a', 'echo a')->add('b', 'echo b')->runAndWait();
        $lines = file($joblog, FILE_IGNORE_NEW_LINES | FILE_SKIP_EMPTY_LINES);
        self::assertIsArray($lines);
        self::assertGreaterThanOrEqual(2, count($lines));

        $results = (new TaskRunner(joblog: $joblog, resume: true))
            ->add('a', 'echo a')
            ->add('b', 'echo b')
            ->add('c', 'echo c')
            ->runAndWait();
        self::assertSame(['a', 'b', 'c'], array_keys($results));
        self::assertTrue($results['a']['skipped'] ?? false);
        self::assertSame('', $results['a']['stdout'], 'a skipped task has no output');
        self::assertSame('', $results['b']['stderr']);
        self::assertSame("c\n", $results['c']['stdout']);
        self::assertArrayNotHasKey('skipped', $results['c']);
    }

    public function testResumeCountsTheFailuresOfTheWholeBatch(): void
    {
        $joblog = $this->dir . '/joblog';
        $first = new TaskRunner(joblog: $joblog);
        $first->add('a', 'exit 1')->add('b', 'echo b')->runAndWait();
        self::assertSame(1, $first->failed());

        // a failed before and is skipped; c and d fail now: hearth exits 3, the batch's failures.
        $again = new TaskRunner(joblog: $joblog, resume: true);
        $results = $again->add('a', 'exit 1')->add('b', 'echo b')->add('c', 'exit 1')->add('d', 'exit 1')
            ->runAndWait();
        self::assertTrue($results['a']['skipped'] ?? false);
        self::assertSame(1, $results['a']['status']);
        self::assertSame(1, $results['d']['status']);
        self::assertSame(3, $again->failed(), 'the skipped failure counts for the batch');

        $retry = new TaskRunner(joblog: $joblog, resumeFailed: true);
        $results = $retry->add('a', 'echo fixed')->add('b', 'echo b')->add('c', 'true')->add('d', 'true')
            ->runAndWait();
        self::assertSame("fixed\n", $results['a']['stdout'], 'a failed task runs again');
        self::assertTrue($results['b']['skipped'] ?? false, 'a succeeded task is skipped');
        self::assertSame(0, $retry->failed());
    }

    /**
     * Issue 8: `hearth run --resume` exits with the failures of the whole batch, skipped ones
     * included; under halt, a batch that ends early must not be taken for a runner that died.
     */
    public function testAResumedBatchThatHaltsCountsTheSkippedFailures(): void
    {
        $joblog = $this->dir . '/joblog';
        (new TaskRunner(joblog: $joblog))->add('a', 'exit 1')->runAndWait();

        $runner = new TaskRunner(1, joblog: $joblog, resume: true, halt: 'soon');
        $results = $runner->add('a', 'exit 1')->add('b', 'exit 2')->add('c', 'echo never')->runAndWait();
        self::assertSame(['a', 'b'], array_keys($results));
        self::assertTrue($results['a']['skipped'] ?? false);
        self::assertSame(2, $results['b']['status']);
        self::assertSame(2, $runner->failed());
    }

    public function testATaskThatExitsZeroPastItsTimeoutFailed(): void
    {
        $runner = new TaskRunner(timeout: 0.2, killAfter: 1.0);
        $results = $runner->add('t', 'trap "exit 0" TERM; sleep 30 & wait')->runAndWait();
        self::assertTrue($results['t']['timed_out'] ?? false);
        self::assertSame(1, $runner->failed());
    }

    public function testThousandsOfTasksStreamThrough(): void
    {
        $runner = new TaskRunner();
        for ($i = 1; $i <= 2000; $i++) {
            $runner->add("n{$i}", "echo {$i}");
        }
        $sum = 0;
        $last = 0;
        $runner->runAndWait(function (array $result, int $completed, int $total) use (&$sum, &$last): void {
            self::assertSame($last + 1, $completed);
            self::assertSame(2000, $total);
            $last = $completed;
            $sum += (int) $result['stdout'];
        });
        self::assertSame(2000, $last);
        self::assertSame(2001000, $sum);
    }

    public function testAnExceptionFromTheCallbackStopsTheBatchAndIsThrown(): void
    {
        $pidFile = escapeshellarg($this->dir . '/slow.pid');
        $runner = new TaskRunner(2);
        $runner
            ->add('quick', "while [ ! -s {$pidFile} ]; do sleep 0.01; done; echo quick")
            ->add('slow', "echo \$\$ > {$pidFile}; exec sleep 30");
        try {
            $runner->runAndWait(static function (): void {
                throw new \LogicException('stop here');
            });
            self::fail('the exception was swallowed');
        } catch (\LogicException $e) {
            self::assertSame('stop here', $e->getMessage());
        }
        // The running task was stopped with the runner, not left behind.
        $pid = (int) file_get_contents($this->dir . '/slow.pid');
        self::assertGreaterThan(0, $pid);
        self::assertFalse(posix_kill($pid, 0), "task process {$pid} is still running");
        // The runner is still usable.
        self::assertSame("again\n", $runner->add('again', 'echo again')->runAndWait()['again']['stdout']);
    }

    // Checks before anything runs

    /**
     * @return iterable<string, array{0: callable(): mixed, 1: string}>
     */
    public static function unusableInput(): iterable
    {
        yield 'negative concurrency' => [fn () => new TaskRunner(-1), 'concurrency'];
        yield 'zero timeout' => [fn () => new TaskRunner(timeout: 0), 'timeout'];
        yield 'negative kill-after' => [fn () => new TaskRunner(killAfter: -1), 'killAfter'];
        yield 'negative retries' => [fn () => new TaskRunner(retries: -1), 'retries'];
        yield 'unknown halt' => [fn () => new TaskRunner(halt: 'later'), 'halt'];
        yield 'resume without joblog' => [fn () => new TaskRunner(resume: true), 'joblog'];
        yield 'odd max-output' => [fn () => new TaskRunner(maxOutput: 'lots'), 'maxOutput'];
        yield 'empty command' => [fn () => (new TaskRunner())->add('a', ''), 'empty'];
        yield 'NUL in command' => [fn () => (new TaskRunner())->add('a', "echo \0"), 'NUL'];
        yield 'id taken' => [fn () => (new TaskRunner())->add('a', 'true')->add('a', 'false'), 'taken'];
        yield 'id not UTF-8' => [fn () => (new TaskRunner())->add("\xff", 'true'), 'UTF-8'];
        yield 'unknown option' => [fn () => (new TaskRunner())->add('a', 'true', ['cwdd' => '/']), 'cwdd'];
        yield 'env not an array' => [fn () => (new TaskRunner())->add('a', 'true', ['env' => 'X=1']), 'env'];
        yield 'env name with =' => [fn () => (new TaskRunner())->add('a', 'true', ['env' => ['A=B' => '1']]), 'A=B'];
        yield 'env value not text' => [fn () => (new TaskRunner())->add('a', 'true', ['env' => ['A' => []]]), 'A'];
        yield 'stdin not UTF-8' => [fn () => (new TaskRunner())->add('a', 'cat', ['stdin' => "\xff"]), 'stdin'];
        yield 'zero task timeout' => [fn () => (new TaskRunner())->add('a', 'true', ['timeout' => 0]), 'timeout'];
        yield 'empty argv' => [fn () => (new TaskRunner())->addArgv('a', []), 'argv'];
        yield 'argv not a list' => [fn () => (new TaskRunner())->addArgv('a', ['x' => 'ls']), 'argv'];
        yield 'argv with an array' => [fn () => (new TaskRunner())->addArgv('a', ['ls', ['-l']]), 'argv[1]'];
        yield 'map: no bootstrap' => [fn () => TaskRunner::map('/nonexistent.php', 'f', []), 'bootstrap'];
        yield 'map: not a function' => [fn () => TaskRunner::map(self::JOBS, 'f()', []), 'function'];
        yield 'map: args not an array' => [fn () => TaskRunner::map(self::JOBS, 'f', ['a' => 1]), "argsList['a']"];
        yield 'map: args not JSON' => [fn () => TaskRunner::map(self::JOBS, 'f', ['a' => [INF]]), "argsList['a']"];
    }

    /**
     * @dataProvider unusableInput
     * @param callable(): mixed $call
     */
    public function testUnusableInputIsRefusedUpFront(callable $call, string $named): void
    {
        $this->expectException(\InvalidArgumentException::class);
        $this->expectExceptionMessage($named);
        $call();
    }

    // Finding the binary

    public function testAMissingBinarySaysWhereItLooked(): void
    {
        $runner = (new TaskRunner(binary: '/nonexistent/hearth'))->add('a', 'true');
        $e = $this->runExpectingFailure($runner);
        self::assertSame(TaskRunnerException::BINARY_NOT_FOUND, $e->getCode());
        self::assertStringContainsString('/nonexistent/hearth', $e->getMessage());
        self::assertStringContainsString('HEARTH_BIN', $e->getMessage());

        putenv('HEARTH_BIN=/nonexistent/from-env');
        $e = $this->runExpectingFailure((new TaskRunner())->add('a', 'true'));
        self::assertSame(TaskRunnerException::BINARY_NOT_FOUND, $e->getCode());
        self::assertStringContainsString('/nonexistent/from-env (from HEARTH_BIN) does not exist', $e->getMessage());
    }

    public function testWithoutHearthBinItLooksOnPath(): void
    {
        putenv('HEARTH_BIN');
        putenv('PATH=' . $this->dir);
        $e = $this->runExpectingFailure((new TaskRunner())->add('a', 'true'));
        self::assertSame(TaskRunnerException::BINARY_NOT_FOUND, $e->getCode());
        self::assertStringContainsString('HEARTH_BIN is not set', $e->getMessage());
        self::assertStringContainsString("on PATH ({$this->dir})", $e->getMessage());

        symlink(self::$hearth, $this->dir . '/hearth');
        putenv('PATH=/nonexistent:' . $this->dir . ':' . $this->path);
        $results = (new TaskRunner())->add('a', 'echo found')->runAndWait();
        self::assertSame("found\n", $results['a']['stdout']);
    }

    // A runner that fails (small fake binaries)

    public function testARunnerThatExitsEarlyIsReportedWithItsStderr(): void
    {
        $runner = new TaskRunner(binary: $this->fake("echo 'fake hearth: out of cheese' >&2\nexit 3"));
        for ($i = 0; $i < 2000; $i++) {
            // More than a pipe buffer of input that nobody reads.
            $runner->add("t{$i}", 'echo ' . str_repeat('x', 100));
        }
        $e = $this->runExpectingFailure($runner);
        self::assertSame(TaskRunnerException::RUNNER_FAILED, $e->getCode());
        self::assertSame(3, $e->exitStatus());
        self::assertStringContainsString('exited with status 3 after 0 of 2000 results', $e->getMessage());
        self::assertStringContainsString('out of cheese', $e->getMessage());
        self::assertSame("fake hearth: out of cheese\n", $e->stderr());
    }

    public function testARunnerKilledByASignalIsReported(): void
    {
        $runner = (new TaskRunner(binary: $this->fake("cat >/dev/null\nkill -9 \$\$")))->add('a', 'true');
        $e = $this->runExpectingFailure($runner);
        self::assertSame(TaskRunnerException::RUNNER_FAILED, $e->getCode());
        self::assertNull($e->exitStatus());
        self::assertStringContainsString('killed by SIGKILL', $e->getMessage());
    }

    public function testARunnerThatReportsTooFewResultsDied(): void
    {
        $line = '{"id":"a","seq":1,"status":0,"signal":null,"stdout":"","stderr":"","duration_ms":1,"attempts":1}';
        $runner = (new TaskRunner(binary: $this->fake("cat >/dev/null\necho '{$line}'")))
            ->add('a', 'true')->add('b', 'true')->add('c', 'true');
        $seen = [];
        try {
            $runner->runAndWait(function (array $result) use (&$seen): void {
                $seen[] = $result['id'];
            });
            self::fail('no exception');
        } catch (TaskRunnerException $e) {
            self::assertSame(TaskRunnerException::RUNNER_FAILED, $e->getCode());
            self::assertStringContainsString('exited with status 0 after 1 of 3 results', $e->getMessage());
        }
        self::assertSame(['a'], $seen);
    }

    public function testUnderHaltARunnerThatDiesIsStillReported(): void
    {
        // Fewer results than tasks is normal under --halt, but not with a status that is not the failures'.
        $fake = $this->fake("cat >/dev/null\necho \"thread 'main' panicked\" >&2\nexit 101");
        $e = $this->runExpectingFailure((new TaskRunner(binary: $fake, halt: 'soon'))->add('a', 'true'));
        self::assertSame(TaskRunnerException::RUNNER_FAILED, $e->getCode());
        self::assertSame(101, $e->exitStatus());
        self::assertStringContainsString('panicked', $e->getMessage());
    }

    /**
     * Issue 8: as GNU parallel, `hearth run` exits with 255 for an error (a refused command line or
     * input), and its 1-101 count failed tasks: 2 is "two tasks failed", never an error.
     */
    public function testExitStatus255IsAnErrorAndTwoIsTwoFailures(): void
    {
        $fake = $this->fake("echo 'hearth run: line 1: expected a JSON object' >&2\nexit 255");
        $e = $this->runExpectingFailure((new TaskRunner(binary: $fake))->add('a', 'true'));
        self::assertSame(TaskRunnerException::INVALID_INPUT, $e->getCode());
        self::assertSame(255, $e->exitStatus());
        self::assertStringContainsString('line 1: expected a JSON object', $e->getMessage());

        $e = $this->runExpectingFailure((new TaskRunner(joblog: $this->dir . '/no/such/dir/joblog'))->add('a', 'true'));
        self::assertSame(TaskRunnerException::INVALID_INPUT, $e->getCode());
        self::assertSame(255, $e->exitStatus());
        self::assertStringContainsString('cannot write the job log', $e->getMessage());

        $runner = (new TaskRunner())->add('a', 'exit 1')->add('b', 'exit 2')->add('c', 'true');
        $results = $runner->runAndWait();
        self::assertCount(3, $results);
        self::assertSame(2, $runner->failed());
    }

    public function testARunnerWritingSomethingElseThanResultsIsReported(): void
    {
        $fake = $this->fake("cat >/dev/null\necho 'Segmentation fault? no: just text'");
        $e = $this->runExpectingFailure((new TaskRunner(binary: $fake))->add('a', 'true'));
        self::assertSame(TaskRunnerException::RUNNER_FAILED, $e->getCode());
        self::assertStringContainsString('not JSON', $e->getMessage());
    }

    // map(): PHP jobs in warm workers

    public function testMapReturnsEachResultUnderItsKeyInOrder(): void
    {
        $results = TaskRunner::map(self::JOBS, self::NS . 'subtract', [
            'x' => [10, 3],
            7 => [1, 2],
            'named' => ['b' => 5, 'a' => 20],
            0 => [0, 0],
        ], 2);
        self::assertSame(['x' => 7, 7 => -1, 'named' => 15, 0 => 0], $results);
    }

    public function testMapTakesAnyIterableAndStaticMethods(): void
    {
        $sides = (static function () {
            yield 'one' => [1];
            yield 'three' => [3];
        })();
        $results = TaskRunner::map(self::JOBS, self::NS . 'Geometry::square', $sides, php: PHP_BINARY);

        self::assertSame(['one', 'three'], array_keys($results));
        self::assertSame(
            ['side' => 3, 'area' => 9, 'ratio' => 1.0, 'tags' => ['a', 'é'], 'none' => null],
            $results['three'],
        );
        self::assertSame([], TaskRunner::map(self::JOBS, self::NS . 'subtract', []));
    }

    public function testJobsRunInWarmWorkersAndWhatTheyPrintStaysOut(): void
    {
        $results = TaskRunner::map(self::JOBS, self::NS . 'behave', [
            ['pid'], ['pid'], ['pid'], ['echo', 'kept'], ['return', ['a' => [1, 2]]],
        ], 1);

        self::assertIsInt($results[0]);
        self::assertNotSame(getmypid(), $results[0]);
        self::assertSame([$results[0], $results[0]], [$results[1], $results[2]], 'one worker ran them all');
        self::assertSame('kept', $results[3]);
        self::assertSame(['a' => [1, 2]], $results[4]);
    }

    public function testAJobThatThrowsGivesAJobError(): void
    {
        $results = TaskRunner::map(self::JOBS, self::NS . 'behave', [
            'before' => ['return', 1],
            'throws' => ['throw', 'thing'],
            'after' => ['return', 2],
        ], 2);

        self::assertSame(1, $results['before']);
        self::assertSame(2, $results['after']);
        $error = $results['throws'];
        self::assertInstanceOf(JobError::class, $error);
        self::assertSame('DomainException', $error->class);
        self::assertSame('no such thing: thing', $error->message);
        self::assertSame('no such thing: thing', $error->getMessage());
        self::assertSame(42, $error->code);
        self::assertSame(realpath(self::JOBS), realpath($error->file));
        self::assertSame(self::lineOf('the line JobError reports'), $error->line);
        self::assertStringContainsString('behave', $error->trace);
        self::assertSame(1, $error->status);
        self::assertNull($error->signal);
        self::assertStringStartsWith(
            'DomainException: no such thing: thing in ' . $error->file . ':' . $error->line,
            (string) $error,
        );
    }

    public function testAJobThatCallsExitGivesAJobErrorAndTheOthersRun(): void
    {
        $results = TaskRunner::map(self::JOBS, self::NS . 'behave', [
            'a' => ['return', 'a'],
            'exits' => ['exit'],
            'b' => ['return', 'b'],
            'c' => ['return', 'c'],
        ], 1);

        self::assertSame('a', $results['a']);
        self::assertSame('b', $results['b']);
        self::assertSame('c', $results['c']);
        self::assertInstanceOf(JobError::class, $results['exits']);
        self::assertSame(1, $results['exits']->status);
        self::assertContains($results['exits']->class, ['exit', '']);
        self::assertStringContainsString('exit', $results['exits']->message);
    }

    public function testAJobThatKillsItsWorkerGivesAJobErrorWithTheSignal(): void
    {
        $results = TaskRunner::map(self::JOBS, self::NS . 'behave', [
            'a' => ['return', 'a'],
            'dies' => ['kill'],
            'b' => ['return', 'b'],
            'c' => ['return', 'c'],
        ], 2);

        self::assertSame('a', $results['a']);
        self::assertSame('b', $results['b']);
        self::assertSame('c', $results['c']);
        $error = $results['dies'];
        self::assertInstanceOf(JobError::class, $error);
        self::assertNull($error->status);
        self::assertSame('SIGKILL', $error->signal);
        self::assertNotSame('', $error->message);
    }

    public function testAJobPastItsTimeoutGivesAJobError(): void
    {
        $results = TaskRunner::map(self::JOBS, self::NS . 'behave', [
            'slow' => ['sleep', 30],
            'fast' => ['return', 'fast'],
            'outlast' => ['outlast'],
        ], 3, timeout: 0.5);

        self::assertSame('fast', $results['fast']);
        self::assertInstanceOf(JobError::class, $results['slow']);
        self::assertTrue($results['slow']->timedOut);
        self::assertInstanceOf(JobError::class, $results['outlast'], 'returning after the time limit is too late');
        self::assertTrue($results['outlast']->timedOut);
    }

    public function testCallingAFunctionThatDoesNotExistGivesAJobError(): void
    {
        $results = TaskRunner::map(self::JOBS, 'Nowhere\\missing', ['a' => []]);
        self::assertInstanceOf(JobError::class, $results['a']);
        self::assertStringContainsString('missing', $results['a']->message);
    }

    public function testAJobErrorFromAWorkerThatDiedHasSensibleDefaults(): void
    {
        $error = JobError::fromResult(['id' => 1, 'status' => null, 'signal' => 'SIGSEGV', 'stdout' => '']);
        self::assertSame('', $error->class);
        self::assertSame("the job's worker was killed by SIGSEGV", $error->message);
        self::assertSame(0, $error->code);
        self::assertSame('', $error->file);
        self::assertSame(0, $error->line);
        self::assertSame('', $error->trace);
        self::assertSame("the job's worker was killed by SIGSEGV", (string) $error);

        $error = JobError::fromResult(['id' => 1, 'status' => null, 'signal' => 'SIGKILL', 'error' => 'worker died']);
        self::assertSame('worker died', $error->message);
        self::assertSame('SIGKILL', $error->signal);
    }

    private function runExpectingFailure(TaskRunner $runner): TaskRunnerException
    {
        try {
            $runner->runAndWait();
        } catch (TaskRunnerException $e) {
            return $e;
        }
        self::fail('no TaskRunnerException');
    }

    /** A stand-in for `hearth` running the given shell script. */
    private function fake(string $script): string
    {
        $path = $this->dir . '/fake-hearth-' . bin2hex(random_bytes(4));
        file_put_contents($path, "#!/bin/sh\n{$script}\n");
        chmod($path, 0755);
        return $path;
    }

    private static function lineOf(string $marker): int
    {
        foreach ((array) file(self::JOBS) as $n => $line) {
            if (str_contains((string) $line, $marker)) {
                return $n + 1;
            }
        }
        self::fail("no line with {$marker} in " . self::JOBS);
    }
}
