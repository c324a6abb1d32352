<?php

/**
 * What `composer install` would write as vendor/autoload.php for this app,
 * whose packages come from Debian: Laravel (Illuminate's autoload.php
 * loads the framework and what it requires), the shared job, and the
 * app's own classes (App\ in app/).
 */

declare(strict_types=1);

require_once '/usr/share/php/Illuminate/autoload.php';
require_once __DIR__ . '/../../jobs.php';

spl_autoload_register(static function (string $class): void {
    if (strncmp($class, 'App\\', 4) === 0) {
        $file = __DIR__ . '/../app/' . str_replace('\\', '/', substr($class, 4)) . '.php';
        if (is_file($file)) {
            require $file;
        }
    }
});
