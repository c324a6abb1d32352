<?php

/**
 * The Slim app under php-fpm: the front controller boots the app on every
 * request, builds the PSR-7 request from the globals, processes it and
 * emits the response, as worker.php does once per worker.
 */

declare(strict_types=1);

use Nyholm\Psr7\Factory\Psr17Factory;

require __DIR__ . '/../../../php/autoload.php';

/** @var Slim\App $app */
$app = require __DIR__ . '/app.php';
$psr17Factory = $app->getContainer()->get(Psr17Factory::class);

$request = Hearth\Psr7Worker::requestFromGlobals($psr17Factory);
Hearth\Psr7Worker::emit($app->process($request, $psr17Factory->createResponse()));
