<?php

/**
 * The Slim app under Hearth: booted once per worker, then every request
 * goes through App::process() with nyholm/psr7 messages.
 *
 *     hearth serve bench/apps/slim/worker.php
 */

declare(strict_types=1);

use Nyholm\Psr7\Factory\Psr17Factory;
use Psr\Http\Message\ServerRequestInterface;

require __DIR__ . '/../../../php/autoload.php';

/** @var Slim\App $app */
$app = require __DIR__ . '/app.php';
$psr17Factory = $app->getContainer()->get(Psr17Factory::class);

Hearth\Psr7Worker::serve(
    $psr17Factory,
    static fn (ServerRequestInterface $request) => $app->process($request, $psr17Factory->createResponse()),
);
