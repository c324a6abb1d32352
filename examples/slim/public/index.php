<?php

/**
 * The same app under nginx + php-fpm: boot, handle one request, emit.
 * (`$app->run()` would do as well; this mirrors worker.php.)
 */

declare(strict_types=1);

use Nyholm\Psr7\Factory\Psr17Factory;

require __DIR__ . '/../../../php/autoload.php';

/** @var Slim\App $app */
$app = require __DIR__ . '/../app.php';
$factory = $app->getContainer()->get(Psr17Factory::class);

$request = Hearth\Psr7Worker::requestFromGlobals($factory);
Hearth\Psr7Worker::emit($app->process($request, $factory->createResponse()));
