<?php

/**
 * The Slim app under Hearth: booted once per worker; every request then
 * arrives as a PSR-7 request and goes through App::process().
 *
 *     hearth serve examples/slim/worker.php
 */

declare(strict_types=1);

use Nyholm\Psr7\Factory\Psr17Factory;
use Psr\Http\Message\ServerRequestInterface;

// In an installed app: require '/path/to/hearth/php/autoload.php'.
require __DIR__ . '/../../php/autoload.php';

/** @var Slim\App $app */
$app = require __DIR__ . '/app.php';
$factory = $app->getContainer()->get(Psr17Factory::class);

Hearth\Psr7Worker::serve(
    $factory,
    static fn (ServerRequestInterface $request) => $app->process($request, $factory->createResponse()),
);
