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

// PHP's own sessions, started by the routes that use them, as a Slim 3
// session middleware does. The cookie session_start() sets goes out with
// the PSR-7 response, under Hearth as under php-fpm.
$session = function (Request $request, Response $response, callable $next): Response {
    session_start();
    return $next($request, $response);
};

$app->get('/visits', function (Request $request, Response $response): Response {
    $_SESSION['visits'] = ($_SESSION['visits'] ?? 0) + 1;
    $name = $_SESSION['name'] ?? 'stranger';
    $response->getBody()->write("Hello {$name}, visit number {$_SESSION['visits']} in this session\n");
    return $response->withHeader('Content-Type', 'text/plain; charset=utf-8');
})->add($session);

// A form: a name kept in the session, then a redirect (303) to the page
// that shows it.
$app->post('/name', function (Request $request, Response $response): Response {
    $name = ((array) $request->getParsedBody())['name'] ?? '';
    $name = is_string($name) ? trim($name) : '';
    if ($name === '') {
        $response->getBody()->write("A name, please.\n");
        return $response->withStatus(422)->withHeader('Content-Type', 'text/plain; charset=utf-8');
    }
    $_SESSION['name'] = $name;
    return $response->withStatus(303)->withHeader('Location', '/visits');
})->add($session);

// A route that fails: Slim's error handler logs it (php-fpm's log, or
// Hearth's) and answers 500 without its details (displayErrorDetails).
$app->get('/boom', function (): Response {
    throw new RuntimeException('/boom failed on purpose');
});

return $app;
