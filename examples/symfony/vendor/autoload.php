<?php

/**
 * What `composer install` would write as vendor/autoload.php, for an app
 * whose packages come from Debian (they install under /usr/share/php, each
 * with an autoload.php that loads what it requires): Symfony's packages,
 * Hearth's PHP library, and the app's own classes (App\ in src/, as
 * composer.json's autoload section says).
 *
 * It must not return true (Composer's returns its class loader):
 * vendor/autoload_runtime.php takes true from its require_once for "already
 * loaded", which is how it tells the front controller's second run, the
 * one it makes itself, from the first.
 */

declare(strict_types=1);

foreach (
    [
        'Symfony/Component/Runtime',
        'Symfony/Component/Dotenv',
        'Symfony/Component/Yaml',
        'Symfony/Bundle/FrameworkBundle',
        'Symfony/Bundle/TwigBundle',
        'Symfony/Component/Form',
        'Symfony/Component/Security/Csrf',
        'Symfony/Component/Validator',
        'Symfony/Component/Translation',
    ] as $package
) {
    require_once "/usr/share/php/{$package}/autoload.php";
}

// Hearth's PHP library, from this checkout. Elsewhere: where `hearth
// php-lib` puts it, or Composer's vendor/ when the app requires
// hearth/hearth.
require_once __DIR__ . '/../../../php/autoload.php';

spl_autoload_register(static function (string $class): void {
    if (strncmp($class, 'App\\', 4) === 0) {
        $file = __DIR__ . '/../src/' . str_replace('\\', '/', substr($class, 4)) . '.php';
        if (is_file($file)) {
            require $file;
        }
    }
});
