<?php

/**
 * The Slim 3 app both entry points run: worker.php boots it once per Hearth
 * worker, index.php boots it on every php-fpm request. Returns the app; its
 * container holds the PSR-17 factory under Psr17Factory::class.
 */

declare(strict_types=1);

use HearthBench\Slim\Greeter;
use HearthBench\Slim\Responder;
use HearthBench\Slim\StandardHeaders;
use Nyholm\Psr7\Factory\Psr17Factory;
use Psr\Container\ContainerInterface;
use Psr\Http\Message\ResponseInterface;
use Psr\Http\Message\ServerRequestInterface;
use Slim\App;

require_once '/usr/share/php/Slim/autoload.php';
require_once '/usr/share/php/Nyholm/Psr7/autoload.php';
require_once __DIR__ . '/src/Greeter.php';
require_once __DIR__ . '/src/Responder.php';
require_once __DIR__ . '/src/StandardHeaders.php';

return (static function (): App {
    $app = new App([
        'settings' => [
            'displayErrorDetails' => false,
            'greeting' => 'Hello',
        ],
    ]);

    $container = $app->getContainer();
    $container[Psr17Factory::class] = static fn (): Psr17Factory => new Psr17Factory();
    $container[Greeter::class] = static fn (ContainerInterface $c): Greeter
        => new Greeter($c->get('settings')['greeting']);
    $container[Responder::class] = static fn (ContainerInterface $c): Responder
        => new Responder($c->get(Psr17Factory::class));

    $app->add(new StandardHeaders());

    $app->get('/', function (ServerRequestInterface $request, ResponseInterface $response): ResponseInterface {
        /** @var ContainerInterface $this */
        return $this->get(Responder::class)->json($response, [
            'message' => $this->get(Greeter::class)->greet('World'),
            'framework' => 'Slim 3',
            'psr7' => 'nyholm/psr7',
            'links' => ['self' => '/', 'hello' => '/hello/{name}'],
        ]);
    })->setName('home');

    $app->get('/hello/{name}', function (
        ServerRequestInterface $request,
        ResponseInterface $response,
        array $args,
    ): ResponseInterface {
        /** @var ContainerInterface $this */
        $greeting = $this->get(Greeter::class)->greet($args['name']);
        $html = '<h1>' . htmlspecialchars($greeting, ENT_QUOTES | ENT_HTML5, 'UTF-8') . '</h1>';
        return $this->get(Responder::class)->html($response, $greeting, $html);
    })->setName('hello');

    return $app;
})();
