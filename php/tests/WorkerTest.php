<?php

declare(strict_types=1);

namespace Hearth\Tests;

use Hearth\Worker;
use Hearth\Tests\Support\PhpCgi;
use PHPUnit\Framework\TestCase;

/** Worker outside Hearth: the same script runs once per request, as under php-fpm. */
final class WorkerTest extends TestCase
{
    /** @var string|false */
    private $protocol = false;

    protected function setUp(): void
    {
        $this->protocol = getenv('HEARTH_PROTOCOL');
        putenv('HEARTH_PROTOCOL');
    }

    protected function tearDown(): void
    {
        putenv($this->protocol === false ? 'HEARTH_PROTOCOL' : 'HEARTH_PROTOCOL=' . $this->protocol);
    }

    public function testIsNotManagedOutsideHearth(): void
    {
        self::assertFalse(Worker::isManaged());
    }

    public function testIsManagedWhenHearthStartedTheProcess(): void
    {
        putenv('HEARTH_PROTOCOL=1');
        self::assertTrue(Worker::isManaged());
        // A Hearth speaking another protocol version is not ours to serve.
        putenv('HEARTH_PROTOCOL=2');
        self::assertFalse(Worker::isManaged());
    }

    public function testServeCallsTheHandlerOnceAndReturns(): void
    {
        $calls = 0;
        Worker::serve(static function () use (&$calls): void {
            $calls++;
        });
        self::assertSame(1, $calls);
    }

    public function testServeLetsTheHandlersExceptionsThrough(): void
    {
        $this->expectException(\DomainException::class);
        $this->expectExceptionMessage('from the app');
        Worker::serve(static function (): void {
            throw new \DomainException('from the app');
        });
    }

    public function testReplaceAfterRequestDoesNothingOutsideHearth(): void
    {
        Worker::replaceAfterRequest();
        self::assertFalse(Worker::isManaged());
    }

    public function testEarlyHintsSendNothingOutsideHearth(): void
    {
        // PHPUnit runs under the CLI, where FrankenPHP's headers_send() is
        // not defined either.
        self::assertFalse(function_exists('headers_send'));
        self::assertFalse(\Hearth\early_hints('</app.css>; rel=preload; as=style'));
        self::assertSame([], headers_list());
    }

    public function testAWorkerStartedByAHearthOfAnotherProtocolSaysSoAndExits(): void
    {
        $env = getenv();
        $env['HEARTH_PROTOCOL'] = '99';
        $process = proc_open(
            [PHP_BINARY, '-n', __DIR__ . '/fixtures/worker_app.php'],
            [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']],
            $pipes,
            null,
            $env,
        );
        self::assertIsResource($process);
        $stdout = stream_get_contents($pipes[1]);
        $stderr = stream_get_contents($pipes[2]);
        fclose($pipes[1]);
        fclose($pipes[2]);
        self::assertSame(1, proc_close($process));
        self::assertSame('', $stdout, 'the handler never ran');
        self::assertStringContainsString('speaks protocol 99', (string) $stderr);
    }

    public function testAWorkerScriptServesOneRequestUnderPhpCgi(): void
    {
        [$headers, $body] = PhpCgi::response(__DIR__ . '/fixtures/worker_app.php', [
            'REQUEST_METHOD' => 'GET',
            'QUERY_STRING' => 'name=php-cgi',
        ]);
        self::assertContains('X-App: yes', $headers);
        self::assertSame("hello php-cgi (managed: no)\nafter serve, 1 call\n", $body);
    }
}
