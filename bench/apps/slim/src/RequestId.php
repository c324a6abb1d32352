<?php

declare(strict_types=1);

namespace HearthBench\Slim;

use Psr\Http\Message\ResponseInterface;
use Psr\Http\Message\ServerRequestInterface;

/**
 * Middleware: carries the client's X-Request-Id through (or makes one up)
 * and puts it on the request as an attribute and on the response.
 */
final class RequestId
{
    public function __invoke(
        ServerRequestInterface $request,
        ResponseInterface $response,
        callable $next,
    ): ResponseInterface {
        $id = $request->getHeaderLine('X-Request-Id');
        if ($id === '' || strlen($id) > 64) {
            $id = bin2hex(random_bytes(8));
        }
        /** @var ResponseInterface $response */
        $response = $next($request->withAttribute('request_id', $id), $response);
        return $response->withHeader('X-Request-Id', $id);
    }
}
