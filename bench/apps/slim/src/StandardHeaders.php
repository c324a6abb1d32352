<?php

declare(strict_types=1);

namespace HearthBench\Slim;

use Psr\Http\Message\ResponseInterface;
use Psr\Http\Message\ServerRequestInterface;

/**
 * App middleware (Slim 3 double-pass style): adds the headers every
 * response of the app carries. It also sets Content-Length when the body
 * size is known, which Slim's own App::run() does but App::process(),
 * used by both entry points, does not.
 */
final class StandardHeaders
{
    public function __invoke(
        ServerRequestInterface $request,
        ResponseInterface $response,
        callable $next,
    ): ResponseInterface {
        /** @var ResponseInterface $response */
        $response = $next($request, $response);
        $response = $response
            ->withHeader('X-Content-Type-Options', 'nosniff')
            ->withHeader('Cache-Control', 'no-store');
        $size = $response->getBody()->getSize();
        if ($size !== null && !$response->hasHeader('Content-Length')) {
            $response = $response->withHeader('Content-Length', (string) $size);
        }
        return $response;
    }
}
