<?php

declare(strict_types=1);

namespace Hearth;

use Hearth\Internal\Channel;
use Hearth\Internal\Runtime;

/**
 * Runs an app in a warm worker under `hearth serve`, and normally anywhere else.
 *
 *     require __DIR__ . '/vendor/autoload.php';
 *     $app = bootMyApp();                        // once per worker
 *     Hearth\Worker::serve(function () use ($app) {
 *         $app->run();                           // once per request
 *     });
 *
 * Inside the handler, superglobals, echo, header(), setcookie(), sessions,
 * php://input and exit behave as under php-fpm. Under php-fpm, `php -S` or
 * any other SAPI, serve() simply calls the handler once for the current
 * request, so the same script works in both places.
 */
final class Worker
{
    /**
     * Calls $handler for every request Hearth sends this worker, or once
     * when the script is not running under Hearth. Returns when Hearth asks
     * the worker to stop.
     *
     * @param callable(): mixed $handler
     */
    public static function serve(callable $handler): void
    {
        $protocol = getenv('HEARTH_PROTOCOL');
        if (Runtime::current() === null && $protocol !== false && $protocol !== (string) Internal\Frame::VERSION) {
            // Started by a Hearth that speaks another protocol: serving the
            // one request a plain SAPI has would look like a script that
            // never calls serve().
            fwrite(fopen('php://stderr', 'w'), sprintf(
                "hearth: this PHP library speaks protocol %d, but the hearth that started this worker "
                . "speaks protocol %s; use the PHP library that came with that hearth\n",
                Internal\Frame::VERSION,
                $protocol,
            ));
            exit(1);
        }
        if (!self::isManaged()) {
            $handler();
            return;
        }
        Runtime::run(Channel::fromEnvironment(), $handler);
    }

    /**
     * Whether this process is a worker started by Hearth.
     */
    public static function isManaged(): bool
    {
        return Runtime::current() !== null || getenv('HEARTH_PROTOCOL') === (string) Internal\Frame::VERSION;
    }

    /**
     * Tells the state check (`hearth serve --check-state`) what the app
     * changes on purpose, so that it is not reported: a class or interface
     * (its objects' state, and its statics), `Class::$static`, or
     * `Class->property`; `*` matches as in fnmatch(). Has no effect when
     * the check is off.
     *
     *     Hearth\Worker::ignoreState('App\Metrics\Counter', 'App\Kernel->lastRequestAt');
     */
    public static function ignoreState(string ...$patterns): void
    {
        Internal\StateCheck::ignore(...$patterns);
    }

    /**
     * Asks Hearth to replace this worker once the current request is done,
     * e.g. after a request that left the app in a state it cannot clean up.
     * Has no effect outside Hearth.
     */
    public static function replaceAfterRequest(): void
    {
        Runtime::current()?->requestClose();
    }
}
