<?php

/*
| The worker script `hearth serve` runs in place of public/index.php: the
| application boots once per worker, and serves each request the worker
| gets, reset between them as Laravel Octane resets it (docs/laravel.md).
| Under php-fpm or `php -S` it serves the one request there is.
*/

use App\Services\Tally;

require __DIR__ . '/vendor/autoload.php';

$app = require __DIR__ . '/bootstrap/app.php';

// Tally is a singleton that lives as long as the worker (it is resolved
// at boot, below): its per-request count is put back after each request
// by a reset callback of the app's own.
Hearth\Laravel\Worker::onReset(static function ($app): void {
    $app->make(Tally::class)->requests = 0;
});

Hearth\Laravel\Worker::serve($app, warm: [Tally::class, App\Services\StickyNote::class]);
