<?php

declare(strict_types=1);

namespace Hearth\Laravel;

use Hearth\Internal\StateCheck;
use Illuminate\Contracts\Http\Kernel;
use Illuminate\Foundation\Application;
use Illuminate\Http\Request;

/**
 * The worker entry for a Laravel 8 app: a worker script in place of
 * public/index.php,
 *
 *     require __DIR__ . '/vendor/autoload.php';
 *     $app = require __DIR__ . '/bootstrap/app.php';
 *     Hearth\Laravel\Worker::serve($app);
 *
 * boots the application once per worker (the HTTP kernel's bootstrappers,
 * the deferred providers, the services Octane warms) and serves every
 * request of the worker with it, as public/index.php serves its one:
 * Request::capture(), the kernel's handle(), send(), terminate(). Each
 * request runs in a copy of the booted application (a sandbox, as Laravel
 * Octane does), and what it leaves in the services the copies share is
 * put back after it (RequestCycle, Reset): docs/laravel.md lists what.
 *
 * Under php-fpm or any other SAPI, serve() runs the one request there is
 * as public/index.php would, so the same script works in both places.
 */
final class Worker
{
    /**
     * What Laravel, or this worker's reset, rewrites on every request, for
     * the state check (`hearth serve --check-state`): the request settings
     * Laravel's HTTP kernel and TrustProxies middleware set from the
     * configuration, the paginator's resolvers and the auth manager's user
     * resolver (given each request's application, as Octane does), the
     * router and its routes (the current route and request), the
     * transactions manager (reported as a transaction left open), and
     * Blade's compiler scratch state.
     */
    public const STATE_CHECK_IGNORES = [
        'Symfony\\Component\\HttpFoundation\\Request::$httpMethodParameterOverride',
        'Symfony\\Component\\HttpFoundation\\Request::$trustedProxies',
        'Symfony\\Component\\HttpFoundation\\Request::$trustedHeaderSet',
        'Symfony\\Component\\HttpFoundation\\Request::$trustedHostPatterns',
        'Symfony\\Component\\HttpFoundation\\Request::$trustedHosts',
        'Illuminate\\Pagination\\AbstractPaginator',
        'Illuminate\\Pagination\\AbstractCursorPaginator',
        'Illuminate\\Auth\\AuthManager->userResolver',
        'Illuminate\\Routing\\Router',
        'Illuminate\\Routing\\Route',
        'Illuminate\\Database\\DatabaseTransactionsManager',
        'Illuminate\\View\\Compilers\\BladeCompiler',
    ];

    /** @var list<callable(Application): void> */
    private static array $resetCallbacks = [];

    /**
     * Serves every request Hearth sends this worker; returns when Hearth
     * asks the worker to stop.
     *
     * @param list<string> $warm services (container bindings) to resolve
     *     at boot, besides Octane's default list: they are shared by every
     *     request of the worker, and kept from one to the next
     */
    public static function serve(Application $app, array $warm = []): void
    {
        if (!\Hearth\Worker::isManaged()) {
            $kernel = $app->make(Kernel::class);
            $request = Request::capture();
            $response = $kernel->handle($request)->send();
            $kernel->terminate($request, $response);
            return;
        }
        StateCheck::ignore(...self::STATE_CHECK_IGNORES);
        $cycle = RequestCycle::boot($app, $warm);
        $boot = RequestCycle::bootVariables($_SERVER);
        \Hearth\Worker::serve(static function () use ($cycle, $boot): void {
            $cycle->handle($boot);
        });
    }

    /**
     * Adds a callback run after each request, once Hearth's own reset is
     * done, with the worker's application: put back there what the app
     * keeps in its own long-lived objects (a singleton resolved at boot, a
     * static cache). A callback that throws gets the worker replaced after
     * the request.
     *
     * @param callable(Application): void $callback
     */
    public static function onReset(callable $callback): void
    {
        self::$resetCallbacks[] = $callback;
    }

    /** @return list<callable(Application): void> */
    public static function resetCallbacks(): array
    {
        return self::$resetCallbacks;
    }

    /** Forgets the callbacks of onReset() (for tests). */
    public static function clearResetCallbacks(): void
    {
        self::$resetCallbacks = [];
    }
}
