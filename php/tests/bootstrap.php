<?php

/**
 * Loads the library without Composer, the test helpers under
 * Hearth\Tests\, and a PSR-7/PSR-17 implementation when one is installed:
 * Composer's vendor/ if present, else Debian's php-nyholm-psr7 under
 * /usr/share/php. Without one, Psr7WorkerTest skips its tests. The same
 * for Symfony's Runtime component and FrameworkBundle (Debian's
 * php-symfony-runtime and php-symfony-framework-bundle), without which
 * SymfonyRuntimeTest skips its tests.
 */

declare(strict_types=1);

require __DIR__ . '/../autoload.php';

spl_autoload_register(static function (string $class): void {
    if (strncmp($class, 'Hearth\\Tests\\', 13) !== 0) {
        return;
    }
    $file = __DIR__ . '/' . str_replace('\\', '/', substr($class, 13)) . '.php';
    if (is_file($file)) {
        require $file;
    }
});

if (is_file(__DIR__ . '/../vendor/autoload.php')) {
    require __DIR__ . '/../vendor/autoload.php';
} elseif (
    is_file('/usr/share/php/Psr/Http/Message/autoload.php')
    && is_file('/usr/share/php/Psr/Http/Message/factory-autoload.php')
    && is_file('/usr/share/php/Nyholm/Psr7/autoload.php')
    // nyholm/psr7's autoloader requires php-http's through the include path
    && stream_resolve_include_path('Http/Message/autoload.php') !== false
) {
    require_once '/usr/share/php/Psr/Http/Message/autoload.php';
    require_once '/usr/share/php/Psr/Http/Message/factory-autoload.php';
    require_once '/usr/share/php/Nyholm/Psr7/autoload.php';
}

if (
    !is_file(__DIR__ . '/../vendor/autoload.php')
    && is_file('/usr/share/php/Symfony/Component/Runtime/autoload.php')
    && is_file('/usr/share/php/Symfony/Bundle/FrameworkBundle/autoload.php')
) {
    require_once '/usr/share/php/Symfony/Component/Runtime/autoload.php';
    require_once '/usr/share/php/Symfony/Bundle/FrameworkBundle/autoload.php';
}
