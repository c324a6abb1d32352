<?php

declare(strict_types=1);

namespace Hearth\Laravel;

use Illuminate\Contracts\Http\Kernel;
use Illuminate\Foundation\Application;
use Illuminate\Foundation\Bootstrap\LoadConfiguration;
use Illuminate\Foundation\Bootstrap\SetRequestForConsole;
use Illuminate\Http\Request;
use Illuminate\Routing\Route;
use Throwable;

/**
 * One booted application and the requests of a worker, each in a sandbox
 * (a clone of the booted application, as Laravel Octane's Worker makes
 * one): what a request binds or first resolves in the container is the
 * sandbox's and goes with it; what it changes in the services resolved at
 * boot, which every sandbox shares, Reset puts back.
 */
final class RequestCycle
{
    /**
     * Octane's default `warm` list (Octane::defaultServicesToWarm()): the
     * services resolved at boot, and shared by every request.
     */
    public const WARM = [
        'auth', 'cache', 'cache.store', 'config', 'cookie', 'db', 'db.factory',
        'db.transactions', 'encrypter', 'files', 'hash', 'log', 'router', 'routes',
        'session', 'session.store', 'translator', 'url', 'view',
    ];

    /** @param array<string, mixed> $sharedViewData */
    private function __construct(
        private readonly Application $app,
        private readonly Reset $reset,
        private readonly Request $idleRequest,
    ) {
    }

    /**
     * Boots $app as the HTTP kernel would on its first request, with a
     * request made from APP_URL in the container meanwhile (as Octane
     * does: a provider's boot() may ask for one), then loads the deferred
     * providers and resolves the services to warm.
     *
     * @param list<string> $warm
     */
    public static function boot(Application $app, array $warm = []): self
    {
        $app->afterBootstrapping(LoadConfiguration::class, static function (Application $app): void {
            (new SetRequestForConsole())->bootstrap($app);
        });
        $kernel = $app->make(Kernel::class);
        if (method_exists($kernel, 'bootstrap')) {
            $kernel->bootstrap();
        }
        $app->loadDeferredProviders();
        foreach ([...self::WARM, ...$warm] as $service) {
            if ($app->bound($service)) {
                $app->make($service);
            }
        }
        $idle = $app->make('request');
        return new self($app, Reset::snapshot($app), $idle);
    }

    /**
     * One request. $boot holds the server variables of the worker's start
     * that describe no request (what .env set: APP_ENV, APP_KEY...):
     * Hearth builds each request's $_SERVER afresh, so they are added to
     * it, under the request's own, as php-fpm's env[] would.
     *
     * @param array<string, mixed> $boot
     */
    public function handle(array $boot): void
    {
        $_SERVER += $boot;
        $sandbox = clone $this->app;
        Reset::switchTo($sandbox);
        try {
            $request = Request::capture();
            $this->reset->prepare($sandbox, $request);
            $kernel = $sandbox->make(Kernel::class);
            $response = $kernel->handle($request);
            $route = $request->route();
            if ($route instanceof Route) {
                // Hearth counts memory growth by route: the route's name,
                // or its method and URI pattern when it has none.
                \Hearth\route_name($route->getName() ?? $request->getMethod() . ' /' . ltrim($route->uri(), '/'));
            }
            $response->send();
            $kernel->terminate($request, $response);
            if ($route instanceof Route) {
                $route->flushController();
            }
        } finally {
            $this->finish($sandbox);
        }
    }

    /**
     * Back to the booted application, with what the request left in it
     * put back; a reset that fails gets the worker replaced.
     */
    private function finish(Application $sandbox): void
    {
        Reset::switchTo($this->app);
        try {
            $this->reset->restore($this->app, $this->idleRequest);
            foreach (Worker::resetCallbacks() as $callback) {
                $callback($this->app);
            }
        } catch (Throwable $e) {
            \Hearth\Worker::replaceAfterRequest();
            throw $e;
        } finally {
            $sandbox->flush();
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
}
