<?php

declare(strict_types=1);

namespace Hearth\Tests;

use Hearth\Symfony\KernelRunner;
use Hearth\Symfony\Runtime;
use Hearth\Tests\Support\SymfonyHttpKernel;
use Hearth\Tests\Support\SymfonyKernel;
use PHPUnit\Framework\TestCase;
use Symfony\Component\DependencyInjection\Container;
use Symfony\Component\HttpFoundation\Request;
use Symfony\Component\HttpFoundation\RequestStack;
use Symfony\Component\HttpFoundation\Response;
use Symfony\Component\HttpKernel\DependencyInjection\ServicesResetter;
use Symfony\Component\HttpKernel\HttpKernelInterface;
use Symfony\Component\Runtime\Runner\Symfony\ResponseRunner;
use Symfony\Contracts\Service\ResetInterface;

/**
 * Hearth\Symfony\Runtime outside Hearth, where Worker::serve() runs its
 * handler once: what KernelRunner does around each request. Under Hearth,
 * with real workers, tests/symfony.rs.
 */
final class SymfonyRuntimeTest extends TestCase
{
    /** @var array<string, mixed> */
    private array $server;
    /** @var string|false */
    private $protocol = false;

    protected function setUp(): void
    {
        if (!class_exists(Runtime::class) || !class_exists(Container::class)) {
            self::markTestSkipped(
                'needs symfony/runtime, symfony/http-kernel and symfony/dependency-injection '
                . '(Debian: php-symfony-runtime php-symfony-framework-bundle)',
            );
        }
        $this->server = $_SERVER;
        $this->protocol = getenv('HEARTH_PROTOCOL');
        putenv('HEARTH_PROTOCOL');
    }

    protected function tearDown(): void
    {
        $_SERVER = $this->server;
        $_SESSION = [];
        putenv($this->protocol === false ? 'HEARTH_PROTOCOL' : 'HEARTH_PROTOCOL=' . $this->protocol);
    }

    /**
     * @param \Closure(Request): Response $answer
     * @return array{SymfonyKernel, SymfonyHttpKernel, RequestStack, ResetInterface}
     */
    private static function kernel(\Closure $answer): array
    {
        $stack = new RequestStack();
        $app = new SymfonyHttpKernel($stack, $answer);
        $note = new class implements ResetInterface {
            public ?string $text = null;
            public int $resets = 0;

            public function reset(): void
            {
                $this->text = null;
                $this->resets++;
            }
        };
        $container = new Container();
        $container->set('http_kernel', $app);
        $container->set('request_stack', $stack);
        $container->set('note', $note);
        $container->set('services_resetter', new ServicesResetter(
            new \ArrayIterator(['note' => $note]),
            ['note' => 'reset'],
        ));
        return [new SymfonyKernel($container), $app, $stack, $note];
    }

    public function testTheRuntimeRunsKernelsWithItsRunnerAndLeavesTheRestToSymfony(): void
    {
        $runtime = new Runtime(['debug' => false, 'error_handler' => false, 'disable_dotenv' => true]);
        [$kernel] = self::kernel(static fn (): Response => new Response());
        self::assertInstanceOf(KernelRunner::class, $runtime->getRunner($kernel));
        self::assertInstanceOf(ResponseRunner::class, $runtime->getRunner(new Response('x')));
    }

    public function testARequestIsHandledSentAndTerminated(): void
    {
        $_SERVER['REQUEST_URI'] = '/hello?name=ann';
        $_SERVER['QUERY_STRING'] = 'name=ann';
        $_GET = ['name' => 'ann'];
        [$kernel, $app] = self::kernel(
            static fn (Request $r): Response => new Response('hello ' . $r->query->get('name')),
        );
        $this->expectOutputString('hello ann');
        self::assertSame(0, (new KernelRunner($kernel))->run());
        self::assertCount(1, $app->handled);
        self::assertSame('/hello', $app->handled[0]->getPathInfo());
        self::assertCount(1, $app->terminated);
        self::assertSame($app->handled[0], $app->terminated[0][0]);
        self::assertSame('hello ann', $app->terminated[0][1]->getContent());
    }

    public function testAfterARequestTheServicesAreResetAndTheRequestStackIsEmpty(): void
    {
        [$kernel, , $stack, $note] = self::kernel(static function () use (&$note): Response {
            $note->text = 'from the request';
            return new Response('ok');
        });
        $this->expectOutputString('ok');
        (new KernelRunner($kernel))->run();
        self::assertNull($stack->getCurrentRequest(), 'the request was left on the stack');
        self::assertNull($note->text);
        self::assertSame(1, $note->resets);
        // Symfony's Kernel would reset them again when the next request
        // begins: it does not, it knows they were.
        $kernel->boot();
        self::assertSame(1, $note->resets);
    }

    public function testARequestThatThrowsIsResetToo(): void
    {
        [$kernel, $app, $stack, $note] = self::kernel(static function () use (&$note): Response {
            $note->text = 'from the failed request';
            $_SESSION = ['user' => 'ann'];
            throw new \DomainException('failed');
        });
        try {
            (new KernelRunner($kernel))->run();
            self::fail('the exception went missing');
        } catch (\DomainException $e) {
            self::assertSame('failed', $e->getMessage());
        }
        self::assertCount(1, $app->handled);
        self::assertSame([], $app->terminated);
        self::assertNull($stack->getCurrentRequest());
        self::assertNull($note->text);
        self::assertSame([], $_SESSION);
    }

    public function testTheSessionDataIsClearedAfterARequest(): void
    {
        [$kernel] = self::kernel(static function (): Response {
            $_SESSION = ['user' => 'ann'];
            return new Response('');
        });
        (new KernelRunner($kernel))->run();
        self::assertSame([], $_SESSION);
    }

    public function testEachRequestGetsTheVariablesOfTheWorkersStartUnderItsOwn(): void
    {
        [$kernel, $app] = self::kernel(static fn (): Response => new Response(''));
        $boot = KernelRunner::bootVariables([
            'APP_ENV' => 'prod',
            'APP_SECRET' => 'from .env',
            'REQUEST_URI' => '/from-the-boot',
            'HTTP_X_BOOT' => 'a header of no request',
        ]);
        self::assertSame(['APP_ENV' => 'prod', 'APP_SECRET' => 'from .env', 'REQUEST_URI' => '/from-the-boot'], $boot);
        $_SERVER = ['REQUEST_URI' => '/mine', 'REQUEST_METHOD' => 'GET', 'APP_ENV' => 'request'];
        (new KernelRunner($kernel))->serve($boot);
        $request = $app->handled[0];
        self::assertSame('/mine', $request->getRequestUri());
        self::assertSame('request', $request->server->get('APP_ENV'));
        self::assertSame('from .env', $request->server->get('APP_SECRET'));
        self::assertFalse($request->headers->has('X-Boot'));
    }

    public function testAKernelThatIsNotSymfonysIsHandledAndTerminatedOnly(): void
    {
        $kernel = new class implements HttpKernelInterface {
            public int $calls = 0;

            public function handle(Request $request, int $type = self::MAIN_REQUEST, bool $catch = true): Response
            {
                $this->calls++;
                return new Response('plain');
            }
        };
        $this->expectOutputString('plain');
        (new KernelRunner($kernel))->run();
        self::assertSame(1, $kernel->calls);
    }

    public function testWithoutSymfonysRuntimeTheClassesDoNotExist(): void
    {
        $code = 'require ' . var_export(__DIR__ . '/../autoload.php', true) . ';'
            . 'var_export([class_exists(\'Hearth\\\\Symfony\\\\Runtime\'), class_exists(\'Hearth\\\\Worker\')]);';
        $process = proc_open(
            [PHP_BINARY, '-n', '-d', 'include_path=.', '-r', $code],
            [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']],
            $pipes,
        );
        self::assertIsResource($process);
        $stdout = stream_get_contents($pipes[1]);
        $stderr = stream_get_contents($pipes[2]);
        fclose($pipes[1]);
        fclose($pipes[2]);
        self::assertSame(0, proc_close($process), (string) $stderr);
        self::assertSame("array (\n  0 => false,\n  1 => true,\n)", $stdout);
    }
}
