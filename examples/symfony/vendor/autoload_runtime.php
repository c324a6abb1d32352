<?php

/**
 * The file Symfony Runtime's Composer plugin (symfony/runtime) writes as
 * vendor/autoload_runtime.php, from its autoload_runtime.template, for an
 * app with no `extra.runtime` in its composer.json. Debian's
 * php-symfony-runtime ships the template but no Composer to run the
 * plugin, so this example has it written out; a Composer app gets it from
 * `composer install` and never edits it.
 *
 * public/index.php requires it and returns the app's closure; this file
 * then builds the runtime and runs the app. The runtime is Symfony's
 * (SymfonyRuntime) unless APP_RUNTIME names another, which is how
 * hearth.toml selects Hearth\Symfony\Runtime. Under php-fpm,
 * $_SERVER['SCRIPT_FILENAME'] is the front controller; Hearth sets it in
 * its workers' environment too, to the worker script.
 */

if (true === (require_once __DIR__ . '/autoload.php') || empty($_SERVER['SCRIPT_FILENAME'])) {
    return;
}

$app = require $_SERVER['SCRIPT_FILENAME'];

if (!is_object($app)) {
    throw new TypeError(sprintf(
        'Invalid return value: callable object expected, "%s" returned from "%s".',
        get_debug_type($app),
        $_SERVER['SCRIPT_FILENAME'],
    ));
}

$runtime = $_SERVER['APP_RUNTIME'] ?? $_ENV['APP_RUNTIME'] ?? 'Symfony\\Component\\Runtime\\SymfonyRuntime';
$runtime = new $runtime(($_SERVER['APP_RUNTIME_OPTIONS'] ?? $_ENV['APP_RUNTIME_OPTIONS'] ?? []) + [
    'project_dir' => dirname(__DIR__, 1),
]);

[$app, $args] = $runtime
    ->getResolver($app)
    ->resolve();

$app = $app(...$args);

exit(
    $runtime
        ->getRunner($app)
        ->run()
);
