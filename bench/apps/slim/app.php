<?php

/**
 * The Slim 3 app both entry points run: worker.php boots it once per Hearth
 * worker, index.php boots it on every php-fpm request. A small app of the
 * usual shape: settings from a file, a handful of services in the
 * container, three middlewares, a dozen routes (one group of REST routes),
 * and error handlers of its own. Returns the app; its container holds the
 * PSR-17 factory under Psr17Factory::class.
 */

declare(strict_types=1);

use HearthBench\Slim\ArticleRepository;
use HearthBench\Slim\Greeter;
use HearthBench\Slim\JsonBody;
use HearthBench\Slim\RequestId;
use HearthBench\Slim\Responder;
use HearthBench\Slim\StandardHeaders;
use Nyholm\Psr7\Factory\Psr17Factory;
use Psr\Container\ContainerInterface;
use Psr\Http\Message\ResponseInterface;
use Psr\Http\Message\ServerRequestInterface;
use Slim\App;

require_once '/usr/share/php/Slim/autoload.php';
require_once '/usr/share/php/Nyholm/Psr7/autoload.php';
foreach (['Greeter', 'Responder', 'StandardHeaders', 'RequestId', 'JsonBody', 'ArticleRepository'] as $class) {
    require_once __DIR__ . "/src/{$class}.php";
}

return (static function (): App {
    $app = new App(['settings' => require __DIR__ . '/config.php']);

    $container = $app->getContainer();
    $container[Psr17Factory::class] = static fn (): Psr17Factory => new Psr17Factory();
    $container[Greeter::class] = static fn (ContainerInterface $c): Greeter
        => new Greeter($c->get('settings')['greeting']);
    $container[Responder::class] = static fn (ContainerInterface $c): Responder
        => new Responder($c->get(Psr17Factory::class));
    $container[ArticleRepository::class] = static fn (ContainerInterface $c): ArticleRepository
        => new ArticleRepository($c->get('settings')['articles']);
    $container['notFoundHandler'] = static fn (ContainerInterface $c) => static fn (
        ServerRequestInterface $request,
        ResponseInterface $response,
    ): ResponseInterface => $c->get(Responder::class)->json($response, [
        'error' => 'not found',
        'path' => $request->getUri()->getPath(),
    ], 404);
    $container['notAllowedHandler'] = static fn (ContainerInterface $c) => static fn (
        ServerRequestInterface $request,
        ResponseInterface $response,
        array $methods,
    ): ResponseInterface => $c->get(Responder::class)->json($response, [
        'error' => 'method not allowed',
        'allowed' => $methods,
    ], 405)->withHeader('Allow', implode(', ', $methods));
    $container['errorHandler'] = static fn (ContainerInterface $c) => static fn (
        ServerRequestInterface $request,
        ResponseInterface $response,
        \Throwable $e,
    ): ResponseInterface => $c->get(Responder::class)->json($response, ['error' => 'internal error'], 500);

    $app->add(new JsonBody());
    $app->add(new RequestId());
    $app->add(new StandardHeaders());

    $app->get('/', function (ServerRequestInterface $request, ResponseInterface $response): ResponseInterface {
        /** @var ContainerInterface $this */
        return $this->get(Responder::class)->json($response, [
            'message' => $this->get(Greeter::class)->greet('World'),
            'framework' => 'Slim 3',
            'psr7' => 'nyholm/psr7',
            'links' => ['self' => '/', 'hello' => '/hello/{name}', 'articles' => '/api/articles'],
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

    $app->get('/health', function (ServerRequestInterface $request, ResponseInterface $response): ResponseInterface {
        /** @var ContainerInterface $this */
        return $this->get(Responder::class)->json($response, ['status' => 'ok']);
    })->setName('health');

    $app->get('/about', function (ServerRequestInterface $request, ResponseInterface $response): ResponseInterface {
        /** @var ContainerInterface $this */
        $app = $this->get('settings')['app'];
        $html = sprintf('<p>%s %s</p>', htmlspecialchars($app['name']), htmlspecialchars($app['version']));
        return $this->get(Responder::class)->html($response, 'About', $html);
    })->setName('about');

    $app->group('/api/articles', function (): void {
        /** @var App $this */
        $this->get('', function (ServerRequestInterface $request, ResponseInterface $response): ResponseInterface {
            /** @var ContainerInterface $this */
            $size = $this->get('settings')['page_size'];
            $articles = $this->get(ArticleRepository::class);
            return $this->get(Responder::class)->json($response, [
                'total' => $articles->count(),
                'items' => $articles->latest($size),
            ]);
        })->setName('articles');

        $this->get('/{id:[0-9]+}', function (
            ServerRequestInterface $request,
            ResponseInterface $response,
            array $args,
        ): ResponseInterface {
            /** @var ContainerInterface $this */
            $article = $this->get(ArticleRepository::class)->find((int) $args['id']);
            return $article === null
                ? $this->get(Responder::class)->json($response, ['error' => 'no such article'], 404)
                : $this->get(Responder::class)->json($response, $article);
        })->setName('article');

        $this->post('', function (ServerRequestInterface $request, ResponseInterface $response): ResponseInterface {
            /** @var ContainerInterface $this */
            $data = (array) $request->getParsedBody();
            if (!isset($data['title']) || !is_string($data['title'])) {
                return $this->get(Responder::class)->json($response, ['error' => 'title is required'], 422);
            }
            $article = $this->get(ArticleRepository::class)->add([
                'title' => $data['title'],
                'author' => (string) ($data['author'] ?? 'anonymous'),
                'tags' => [],
                'published' => date('Y-m-d'),
            ]);
            return $this->get(Responder::class)->json($response, $article, 201);
        })->setName('article-create');

        $this->map(['PUT', 'PATCH'], '/{id:[0-9]+}', function (
            ServerRequestInterface $request,
            ResponseInterface $response,
            array $args,
        ): ResponseInterface {
            /** @var ContainerInterface $this */
            return $this->get(Responder::class)->json($response, ['updated' => (int) $args['id']]);
        })->setName('article-update');

        $this->delete('/{id:[0-9]+}', function (
            ServerRequestInterface $request,
            ResponseInterface $response,
        ): ResponseInterface {
            return $response->withStatus(204);
        })->setName('article-delete');

        $this->get('/{id:[0-9]+}/comments', function (
            ServerRequestInterface $request,
            ResponseInterface $response,
            array $args,
        ): ResponseInterface {
            /** @var ContainerInterface $this */
            return $this->get(Responder::class)->json($response, ['article' => (int) $args['id'], 'comments' => []]);
        })->setName('article-comments');
    });

    $app->get('/users/{name:[a-z]+}', function (
        ServerRequestInterface $request,
        ResponseInterface $response,
        array $args,
    ): ResponseInterface {
        /** @var ContainerInterface $this */
        return $this->get(Responder::class)->json($response, ['user' => $args['name']]);
    })->setName('user');

    return $app;
})();
