<?php

/**
 * The Symfony app under Hearth: the kernel boots once per worker (container
 * compiled, services built); each request then goes through handle() and
 * terminate(), and the services tagged kernel.reset (the
 * services_resetter) are reset before the next one, so no request sees
 * another's state.
 *
 *     hearth serve examples/symfony/worker.php
 */

declare(strict_types=1);

use Symfony\Component\HttpFoundation\Request;

// In an installed app: require '/path/to/hearth/php/autoload.php'.
require __DIR__ . '/../../php/autoload.php';
require __DIR__ . '/bootstrap.php';

$kernel = new App\Kernel($_SERVER['APP_ENV'] ?? 'prod', (bool) ($_SERVER['APP_DEBUG'] ?? false));
$kernel->boot();

Hearth\Worker::serve(static function () use ($kernel): void {
    $request = Request::createFromGlobals();
    $response = $kernel->handle($request);
    $response->send();
    $kernel->terminate($request, $response);

    $container = $kernel->getContainer();
    if ($container->initialized('services_resetter')) {
        $container->get('services_resetter')->reset();
    }
});
