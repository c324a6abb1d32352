<?php

// The front controller nginx + php-fpm runs: the kernel is built and booted
// on every request, as in Symfony's public/index.php (OPcache keeps the
// compiled files, the cache directory the compiled container).

declare(strict_types=1);

use Symfony\Component\HttpFoundation\Request;

$kernel = require __DIR__ . '/bootstrap.php';
$request = Request::createFromGlobals();
$response = $kernel->handle($request);
$response->send();
$kernel->terminate($request, $response);
