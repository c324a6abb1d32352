<?php

/*
| Laravel 8's public/index.php, unmodified but for LARAVEL_START, which
| nothing in this app reads (and PSR-12 does not allow beside code): the
| front controller nginx + php-fpm run on every request, which boots the
| application each time. Hearth runs hearth.php instead.
*/

use Illuminate\Contracts\Http\Kernel;
use Illuminate\Http\Request;

if (file_exists($maintenance = __DIR__ . '/../storage/framework/maintenance.php')) {
    require $maintenance;
}

require __DIR__ . '/../vendor/autoload.php';

$app = require_once __DIR__ . '/../bootstrap/app.php';

$kernel = $app->make(Kernel::class);

$response = $kernel->handle(
    $request = Request::capture()
)->send();

$kernel->terminate($request, $response);
