<?php

declare(strict_types=1);

namespace Hearth\Laravel;

use Illuminate\Container\Container;
use Illuminate\Contracts\Auth\Access\Gate;
use Illuminate\Contracts\Http\Kernel;
use Illuminate\Foundation\Application;
use Illuminate\Http\Request;
use Illuminate\Pagination\PaginationState;
use Illuminate\Support\Carbon;
use Illuminate\Support\Facades\Facade;
use Illuminate\Support\NamespacedItemResolver;
use Illuminate\Support\Str;
use Illuminate\View\Factory as ViewFactory;
use Monolog\ResettableInterface;

/**
 * What Laravel Octane's listeners do between two requests
 * (config/octane.php's `listen`: RequestReceived's
 * prepareApplicationForNextOperation() and prepareApplicationForNextRequest(),
 * OperationTerminated's), for what Laravel 8 has, plus what Octane leaves
 * to the app and php-fpm does not: transactions left open are rolled back,
 * the view factory's shared data and found views are put back.
 *
 * prepare() points the services resolved at boot (shared by every
 * sandbox) at the request's sandbox; restore() points them back at the
 * booted application and empties what the request left in them, so a
 * worker waiting for its next client holds no request's state.
 */
final class Reset
{
    /**
     * @param array<string, mixed> $sharedViewData the view factory's
     *     shared data after boot
     */
    private function __construct(
        private readonly string $locale,
        private readonly string $fallbackLocale,
        private readonly array $sharedViewData,
    ) {
    }

    /** What the booted application starts each request from. */
    public static function snapshot(Application $app): self
    {
        $config = $app->make('config');
        return new self(
            (string) $config->get('app.locale', 'en'),
            (string) $config->get('app.fallback_locale', 'en'),
            $app->resolved('view') ? $app->make('view')->getShared() : [],
        );
    }

    /**
     * Makes $app the application of the container, the helpers (app(),
     * config()...) and the facades (Octane's CurrentApplication::set()).
     */
    public static function switchTo(Application $app): void
    {
        $app->instance('app', $app);
        $app->instance(Container::class, $app);
        Container::setInstance($app);
        Facade::clearResolvedInstances();
        Facade::setFacadeApplication($app);
    }

    /**
     * Before the request: its sandbox gets a configuration of its own
     * (CreateConfigurationSandbox), the shared services the sandbox
     * (GiveNewApplicationInstanceTo*), and the container the request
     * (GiveNewRequestInstanceToApplication, ...ToPaginator).
     */
    public function prepare(Application $sandbox, Request $request): void
    {
        $sandbox->instance('config', clone $sandbox->make('config'));
        self::rebind($sandbox);
        // FlushAuthenticationState, as Octane runs it before a request:
        // the guards the request makes are the sandbox's. A session guard
        // registers a `request` rebinding on the application its manager
        // has: on the booted one, that was one more callback (holding the
        // guard and its request) for every request, never removed.
        if ($sandbox->resolved('auth')) {
            $auth = $sandbox->make('auth');
            $auth->setApplication($sandbox);
            $auth->forgetGuards();
        }
        $sandbox->instance('request', $request);
    }

    /**
     * After the request, on the booted application: every service back
     * to it, and emptied of the request's state.
     */
    public function restore(Application $app, Request $idle): void
    {
        self::rebind($app);
        $this->flushRequestState($app);
        self::flushOperationState($app);
        $app->forgetScopedInstances();
        // The request's Request out of the url generator, redirector and
        // router (the `request` rebinding), for the boot one.
        $app->instance('request', $idle);
        Facade::clearResolvedInstances();
    }

    /** The shared services, pointed at $app (a sandbox or the booted one). */
    private static function rebind(Application $app): void
    {
        $set = static function (string $service, string $method) use ($app): void {
            if ($app->resolved($service)) {
                $object = $app->make($service);
                if (method_exists($object, $method)) {
                    $object->$method($app);
                }
            }
        };
        $set(Gate::class, 'setContainer');
        $set('Illuminate\\Broadcasting\\BroadcastManager', 'setApplication');
        $set('db', 'setApplication');
        $set('filesystem', 'setApplication');
        $set(Kernel::class, 'setApplication');
        $set('cache', 'setApplication');
        $set('queue', 'setApplication');
        $set('router', 'setContainer');
        $set('validator', 'setContainer');
        $set('Illuminate\\Contracts\\Pipeline\\Hub', 'setContainer');
        if ($app->resolved('mail.manager')) {
            $app->make('mail.manager')->setApplication($app);
            $app->make('mail.manager')->forgetMailers();
        }
        if ($app->resolved('Illuminate\\Notifications\\ChannelManager')) {
            $manager = $app->make('Illuminate\\Notifications\\ChannelManager');
            $manager->setContainer($app);
            $manager->forgetDrivers();
        }
        if ($app->resolved('session')) {
            $handler = $app->make('session')->driver()->getHandler();
            if ($handler instanceof \Illuminate\Session\DatabaseSessionHandler) {
                $handler->setContainer($app);
            }
        }
        if ($app->resolved('view')) {
            $view = $app->make('view');
            $view->setContainer($app);
            $view->share('app', $app);
        }
        if (class_exists(PaginationState::class)) {
            PaginationState::resolveUsing($app);
        }
    }

    /**
     * Octane's prepareApplicationForNextRequest(): locale, queued cookies,
     * session, authentication; plus the view factory's shared data and
     * finder cache, which Octane leaves.
     */
    private function flushRequestState(Application $app): void
    {
        // FlushLocaleState (App::setLocale() changed the request's config,
        // which went with its sandbox, and the shared translator).
        $translator = $app->make('translator');
        $translator->setLocale($this->locale);
        $translator->setFallback($this->fallbackLocale);
        Carbon::setLocale($this->locale);
        // FlushQueuedCookies: Cookie::queue() adds to the shared cookie
        // jar, which AddQueuedCookiesToResponse reads and never empties.
        if ($app->resolved('cookie')) {
            $app->make('cookie')->flushQueuedCookies();
        }
        // FlushSessionState: the store keeps the attributes it loaded, and
        // the next StartSession merges what it reads into them.
        if ($app->resolved('session')) {
            $session = $app->make('session')->driver();
            $session->flush();
            $session->regenerate();
        }
        // FlushAuthenticationState: the guards keep their user.
        if ($app->resolved('auth.driver')) {
            $app->forgetInstance('auth.driver');
        }
        if ($app->resolved('auth')) {
            $auth = $app->make('auth');
            $auth->setApplication($app);
            $auth->forgetGuards();
        }
        if ($app->resolved('view')) {
            $view = $app->make('view');
            if ($view instanceof ViewFactory) {
                $view->flushState();
                $view->flushFinderCache();
                // Factory has share() but no way to take a value back.
                (fn (array $shared) => $this->shared = $shared)->call($view, $this->sharedViewData);
                $view->share('app', $app);
            }
        }
        // Octane's Worker: the compiled-view engines remember which views
        // they found fresh; a view edited since is compiled again.
        if ($app->resolved('view.engine.resolver')) {
            $app->make('view.engine.resolver')->forget('blade');
            $app->make('view.engine.resolver')->forget('php');
        }
    }

    /**
     * Octane's prepareApplicationForNextOperation() flushes (database,
     * log, array cache, Str, translator), plus rolling back what a request
     * left in a transaction, which php-fpm does when the connection closes
     * with the request and Octane leaves to the app.
     */
    private static function flushOperationState(Application $app): void
    {
        if ($app->resolved('db')) {
            foreach ($app->make('db')->getConnections() as $connection) {
                if ($connection->transactionLevel() > 0) {
                    \Hearth\Internal\StateCheck::note(sprintf(
                        'a database transaction open on connection %s; Hearth rolled it back',
                        (string) $connection->getName(),
                    ));
                    $connection->rollBack(0);
                }
                $connection->forgetRecordModificationState();
                $connection->flushQueryLog();
            }
        }
        if ($app->resolved('log')) {
            $log = $app->make('log');
            $driver = $log->driver();
            if (method_exists($driver, 'withoutContext')) {
                $driver->withoutContext();
            }
            foreach ($log->getChannels() as $channel) {
                $logger = method_exists($channel, 'getLogger') ? $channel->getLogger() : null;
                if ($logger instanceof ResettableInterface) {
                    $logger->reset();
                }
            }
        }
        if ($app->resolved('cache') && $app->make('config')->get('cache.stores.array')) {
            $app->make('cache')->store('array')->flush();
        }
        Str::flushCache();
        if ($app->resolved('translator')) {
            $translator = $app->make('translator');
            if ($translator instanceof NamespacedItemResolver) {
                $translator->flushParsedKeys();
            }
        }
    }
}
