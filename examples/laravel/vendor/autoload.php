<?php

/**
 * What `composer install` would write as vendor/autoload.php, for an app
 * whose packages come from Debian (php-laravel-framework installs
 * Illuminate under /usr/share/php, with an autoload.php that loads the
 * whole framework and what it requires): Laravel, Hearth's PHP library,
 * and the app's own classes (App\ in app/, Database\Seeders\ in
 * database/seeders/, as a Laravel app's composer.json says).
 */

declare(strict_types=1);

require_once '/usr/share/php/Illuminate/autoload.php';

// Hearth's PHP library, from this checkout. Elsewhere: where `hearth
// php-lib` puts it, or Composer's vendor/ when the app requires
// hearth/hearth.
require_once __DIR__ . '/../../../php/autoload.php';

spl_autoload_register(static function (string $class): void {
    foreach (['App\\' => '/../app/', 'Database\\Seeders\\' => '/../database/seeders/'] as $prefix => $dir) {
        if (strncmp($class, $prefix, strlen($prefix)) === 0) {
            $file = __DIR__ . $dir . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
            if (is_file($file)) {
                require $file;
            }
            return;
        }
    }
});
