<?php

/**
 * Loads the Hearth library without Composer:
 *
 *     require '/path/to/hearth/php/autoload.php';
 *
 * Hearth\Symfony\ (the runtime for symfony/runtime) is loaded only where
 * Symfony's Runtime component can be: without it those classes do not
 * exist (class_exists() says false) rather than fail to load. Likewise
 * Hearth\Laravel\ (the worker entry for Laravel apps) is loaded only where
 * Laravel's Illuminate\Foundation\Application can be.
 */

declare(strict_types=1);

spl_autoload_register(static function (string $class): void {
    if (strncmp($class, 'Hearth\\', 7) !== 0) {
        return;
    }
    if (
        strncmp($class, 'Hearth\\Symfony\\', 15) === 0
        && !class_exists('Symfony\\Component\\Runtime\\SymfonyRuntime')
    ) {
        return;
    }
    if (
        strncmp($class, 'Hearth\\Laravel\\', 15) === 0
        && !class_exists('Illuminate\\Foundation\\Application')
    ) {
        return;
    }
    $file = __DIR__ . '/src/' . str_replace('\\', '/', substr($class, 7)) . '.php';
    if (is_file($file)) {
        require $file;
    }
});

require_once __DIR__ . '/src/functions.php';
