<?php

/**
 * A Slim 3 app with nyholm/psr7 (Debian's php-slim and php-nyholm-psr7),
 * as both entry points boot it: worker.php once per Hearth worker,
 * public/index.php on every php-fpm request.
 */

declare(strict_types=1);

use Nyholm\Psr7\Factory\Psr17Factory;
use Psr\Http\Message\ResponseInterface as Response;
use Psr\Http\Message\ServerRequestInterface as Request;
use Slim\App;

require_once '/usr/share/php/Slim/autoload.php';
require_once '/usr/share/php/Nyholm/Psr7/autoload.php';

$app = new App(['settings' => ['displayErrorDetails' => false]]);
$container = $app->getContainer();
$container[Psr17Factory::class] = static fn (): Psr17Factory => new Psr17Factory();

// State that lives as long as the worker: under php-fpm it starts at zero
// on every request, under Hearth it counts the requests this worker served.
$container['served'] = new ArrayObject(['count' => 0]);
$app->add(function (Request $request, Response $response, callable $next): Response {
    /** @var \Slim\Container $this */
    $this->get('served')['count']++;
    return $next($request, $response);
});

$app->get('/', function (Request $request, Response $response): Response {
    $response->getBody()->write("Hello from Slim\n");
    return $response->withHeader('Content-Type', 'text/plain; charset=utf-8');
});

$app->get('/hello/{name}', function (Request $request, Response $response, array $args): Response {
    /** @var \Slim\Container $this */
    $body = json_encode([
        'hello' => $args['name'],
        'query' => $request->getQueryParams(),
        'served_by_this_process' => $this->get('served')['count'],
    ]);
    $response->getBody()->write($body . "\n");
    return $response->withHeader('Content-Type', 'application/json');
});

$app->post('/echo', function (Request $request, Response $response): Response {
    $response->getBody()->write(json_encode(['received' => $request->getParsedBody()]) . "\n");
    return $response->withStatus(201)->withHeader('Content-Type', 'application/json');
});

return $app;
