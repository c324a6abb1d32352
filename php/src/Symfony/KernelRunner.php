<?php

declare(strict_types=1);

namespace Hearth\Symfony;

use Hearth\Internal\StateCheck;
use Hearth\Worker;
use Symfony\Component\HttpFoundation\Request;
use Symfony\Component\HttpFoundation\RequestStack;
use Symfony\Component\HttpKernel\HttpKernelInterface;
use Symfony\Component\HttpKernel\Kernel;
use Symfony\Component\HttpKernel\KernelInterface;
use Symfony\Component\HttpKernel\TerminableInterface;
use Symfony\Component\Runtime\RunnerInterface;

/**
 * Serves every request of a worker with one booted kernel, as Symfony's
 * HttpKernelRunner serves the one request of a php-fpm process:
 * Request::createFromGlobals(), handle(), send(), terminate(); then puts
 * back what the request left in the kernel, so the next client starts as
 * under php-fpm:
 *
 * - a session still open is written and closed, and $_SESSION emptied
 *   (Hearth then starts the next request without a session id unless its
 *   client sends the cookie);
 * - the request stack is emptied (a request that threw may have left
 *   itself on it);
 * - the services tagged `kernel.reset` are reset through the container's
 *   `services_resetter`, at the end of the request rather than at the
 *   beginning of the next one, where Symfony's Kernel would do it: a
 *   worker waiting for its next client holds no request's state.
 *
 * The kernel boots before the worker says it is ready, so a kernel that
 * cannot boot (a broken configuration) stops the worker at start, where
 * Hearth logs it, rather than failing every request.
 */
final class KernelRunner implements RunnerInterface
{
    /**
     * What Symfony rewrites on every request or keeps as a cache by design,
     * for the state check (`hearth serve --check-state`): the router's
     * request context, the error handler's exception handler (set from
     * each request by the DebugHandlersListener), the event dispatcher's
     * listeners (resolved on first use), session storage (read again when
     * a session starts), the validators' context (set for each
     * validation).
     */
    public const STATE_CHECK_IGNORES = [
        'Symfony\\Component\\Routing\\RequestContext',
        'Symfony\\Component\\ErrorHandler\\ErrorHandler',
        'Symfony\\Component\\EventDispatcher\\EventDispatcher',
        'Symfony\\Component\\HttpFoundation\\Session\\Storage\\*',
        'Symfony\\Component\\Validator\\ConstraintValidatorInterface',
    ];

    public function __construct(private readonly HttpKernelInterface $kernel)
    {
        StateCheck::ignore(...self::STATE_CHECK_IGNORES);
    }

    public function run(): int
    {
        if ($this->kernel instanceof KernelInterface) {
            $this->kernel->boot();
        }
        $boot = self::bootVariables($_SERVER);
        Worker::serve(function () use ($boot): void {
            $this->serve($boot);
        });
        return 0;
    }

    /**
     * One request. $boot holds the server variables of the worker's start
     * that describe no request (what .env files and the runtime set: APP_ENV,
     * APP_DEBUG, APP_SECRET...): Hearth builds each request's $_SERVER
     * afresh, so they are added to it, under the request's own.
     *
     * @param array<string, mixed> $boot
     */
    public function serve(array $boot): void
    {
        $_SERVER += $boot;
        try {
            $request = Request::createFromGlobals();
            $response = $this->kernel->handle($request);
            // The router's name for the route (Symfony names unnamed
            // routes too): Hearth counts memory growth by it.
            $route = $request->attributes->get('_route');
            if (is_string($route) && $route !== '') {
                \Hearth\route_name($route);
            }
            $response->send();
            if ($this->kernel instanceof TerminableInterface) {
                $this->kernel->terminate($request, $response);
            }
        } finally {
            $this->reset();
        }
    }

    /**
     * The server variables of the worker's start, without those of a
     * request (HTTP_* headers), which each request brings its own of.
     *
     * @param array<string, mixed> $server
     * @return array<string, mixed>
     */
    public static function bootVariables(array $server): array
    {
        return array_filter(
            $server,
            static fn (string|int $name): bool => !str_starts_with((string) $name, 'HTTP_'),
            ARRAY_FILTER_USE_KEY,
        );
    }

    /** What a request leaves in the worker, put back. */
    private function reset(): void
    {
        // Symfony's session listener saved the session with the response;
        // one started after it (in terminate) is written now, before the
        // services_resetter resets the session listener, which would
        // abort it.
        if (session_status() === PHP_SESSION_ACTIVE) {
            session_write_close();
        }
        $_SESSION = [];
        if (!$this->kernel instanceof KernelInterface) {
            return;
        }
        $container = $this->kernel->getContainer();
        if ($container->has('request_stack')) {
            $stack = $container->get('request_stack');
            if ($stack instanceof RequestStack) {
                while ($stack->pop() !== null) {
                }
            }
        }
        if ($this->kernel instanceof Kernel) {
            // Between requests, boot() on a booted kernel is Symfony's own
            // reset: the services_resetter's reset(), after which the
            // kernel does not reset them again when the next request
            // begins (and, in debug, the profiler's clock restarts).
            $this->kernel->boot();
        } elseif ($container->has('services_resetter')) {
            $container->get('services_resetter')->reset();
        }
    }
}
