<?php

declare(strict_types=1);

namespace HearthBench\Slim;

use Psr\Http\Message\ResponseInterface;
use Psr\Http\Message\ServerRequestInterface;

/**
 * Middleware: decodes JSON request bodies into the parsed body, as most
 * API apps do.
 */
final class JsonBody
{
    public function __invoke(
        ServerRequestInterface $request,
        ResponseInterface $response,
        callable $next,
    ): ResponseInterface {
        if (str_starts_with($request->getHeaderLine('Content-Type'), 'application/json')) {
            $data = json_decode((string) $request->getBody(), true);
            if (is_array($data)) {
                $request = $request->withParsedBody($data);
            }
        }
        return $next($request, $response);
    }
}
