<?php

/**
 * The legacy app under Hearth: bootstrap.php runs once per worker, page.php
 * once per request, unchanged from php-fpm.
 *
 *     hearth serve examples/legacy/worker.php
 *
 * Files included here are compiled once per worker; a page that declares
 * functions or classes must be split like this (declarations in the
 * bootstrap, the page in its own file), since PHP cannot declare a
 * function twice in one process.
 */

declare(strict_types=1);

// In an installed app: require '/path/to/hearth/php/autoload.php'.
require __DIR__ . '/../../php/autoload.php';
require __DIR__ . '/bootstrap.php';

Hearth\Worker::serve(static function (): void {
    require __DIR__ . '/page.php';
});
