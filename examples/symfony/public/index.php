<?php

/**
 * The same app under nginx + php-fpm: one request per boot.
 */

declare(strict_types=1);

use Symfony\Component\HttpFoundation\Request;

require __DIR__ . '/../bootstrap.php';

$kernel = new App\Kernel($_SERVER['APP_ENV'] ?? 'prod', (bool) ($_SERVER['APP_DEBUG'] ?? false));
$request = Request::createFromGlobals();
$response = $kernel->handle($request);
$response->send();
$kernel->terminate($request, $response);
