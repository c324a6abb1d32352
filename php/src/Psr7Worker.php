<?php

declare(strict_types=1);

namespace Hearth;

use Hearth\Internal\InputStream;
use Hearth\Internal\Runtime;
use Psr\Http\Message\ResponseInterface;
use Psr\Http\Message\ServerRequestInterface;
use Psr\Http\Message\UploadedFileInterface;

/**
 * Runs a PSR-7 app in a warm worker:
 *
 *     $factory = new Nyholm\Psr7\Factory\Psr17Factory();
 *     $app = bootMyApp();
 *     Hearth\Psr7Worker::serve($factory, fn (ServerRequestInterface $r) => $app->handle($r));
 *
 * or, for a PSR-15 request handler (a Slim 4 app, a middleware pipe):
 *
 *     Hearth\Psr7Worker::serve($factory, $app);
 *
 * The factory is any PSR-17 implementation (server request, stream,
 * uploaded file and URI factories; nyholm/psr7's Psr17Factory is all four).
 * Hearth itself depends on no PSR package: it only calls these methods, and
 * knows a PSR-15 handler by its interface's name.
 * Under php-fpm the same script builds the request from the globals and
 * emits the response with header() and echo.
 */
final class Psr7Worker
{
    private const EMIT_CHUNK = 65536;
    /** PSR-15's handler interface (psr/http-server-handler), which the library does not require. */
    private const PSR15_HANDLER = 'Psr\\Http\\Server\\RequestHandlerInterface';

    /**
     * Serves every request through $handler: a callable, or a PSR-15
     * request handler (Psr\Http\Server\RequestHandlerInterface), whose
     * handle() is called even when the object is also callable. The
     * handler reads the body from the request's stream; php://input is
     * left to PHP (and empty), so that the streams the app opens
     * (php://temp, php://memory) are PHP's own, as PSR-7 libraries expect.
     *
     * @param object $factory PSR-17 ServerRequestFactory, StreamFactory,
     *                        UploadedFileFactory and UriFactory in one object
     * @param (callable(ServerRequestInterface): ResponseInterface)|\Psr\Http\Server\RequestHandlerInterface $handler
     * @throws \TypeError when $handler is neither
     */
    public static function serve(object $factory, callable|object $handler): void
    {
        $handle = self::handler($handler);
        InputStream::leaveBuiltInWrapper();
        Worker::serve(static function () use ($factory, $handle): void {
            self::emit($handle(self::requestFromGlobals($factory)));
        });
    }

    /**
     * The callable serve() calls for each request. A PSR-15 handler is
     * known by its interface's name, so that psr/http-server-handler is
     * needed only by apps that use it: instanceof loads no class, and is
     * false for an interface that was never declared.
     *
     * @return callable(ServerRequestInterface): ResponseInterface
     */
    private static function handler(callable|object $handler): callable
    {
        if ($handler instanceof \Psr\Http\Server\RequestHandlerInterface) {
            return $handler->handle(...);
        }
        if (is_callable($handler)) {
            return $handler;
        }
        throw new \TypeError(sprintf(
            'Hearth\Psr7Worker::serve(): the handler must be a callable or a %s, %s given',
            self::PSR15_HANDLER,
            get_debug_type($handler),
        ));
    }

    /**
     * The current request as a PSR-7 server request.
     *
     * With nyholm/psr7's factory the request is built by one constructor
     * call (the body stream only when there is a body); with any other
     * PSR-17 factory through the factory and with*() calls. Both skip the
     * with*() calls (each a clone) for parts the request does not have.
     */
    public static function requestFromGlobals(object $factory): ServerRequestInterface
    {
        $server = $_SERVER;
        $method = (string) ($server['REQUEST_METHOD'] ?? 'GET');
        $protocol = (string) ($server['SERVER_PROTOCOL'] ?? 'HTTP/1.1');
        $version = str_starts_with($protocol, 'HTTP/') ? substr($protocol, 5) : '1.1';
        $headers = self::headers($server);
        $hasBody = ($server['CONTENT_LENGTH'] ?? '') !== '';
        if ($factory instanceof \Nyholm\Psr7\Factory\Psr17Factory) {
            $request = new \Nyholm\Psr7\ServerRequest(
                $method,
                self::uri($server),
                $headers,
                $hasBody ? self::body($factory) : null,
                $version,
                $server,
            );
        } else {
            $request = $factory->createServerRequest($method, $factory->createUri(self::uri($server)), $server);
            foreach ($headers as $name => $value) {
                $request = $request->withHeader($name, $value);
            }
            if ($version !== '1.1') {
                $request = $request->withProtocolVersion($version);
            }
            if ($hasBody) {
                $request = $request->withBody(self::body($factory));
            }
        }
        if ($_COOKIE !== []) {
            $request = $request->withCookieParams($_COOKIE);
        }
        if ($_GET !== []) {
            $request = $request->withQueryParams($_GET);
        }
        if ($_FILES !== []) {
            $request = $request->withUploadedFiles(self::uploadedFiles($factory, $_FILES));
        }
        if ($method === 'POST' && self::isForm((string) ($server['CONTENT_TYPE'] ?? ''))) {
            $request = $request->withParsedBody($_POST);
        }
        return $request;
    }

    /**
     * Sends a PSR-7 response: straight to Hearth inside a worker, with
     * header() and echo anywhere else.
     */
    public static function emit(ResponseInterface $response): void
    {
        $lines = [];
        foreach ($response->getHeaders() as $name => $values) {
            foreach ($values as $value) {
                $lines[] = $name . ': ' . $value;
            }
        }
        $runtime = Runtime::current();
        if ($runtime !== null) {
            $runtime->setHead($response->getStatusCode(), $lines);
        } else {
            if (!headers_sent()) {
                header(sprintf(
                    'HTTP/%s %d %s',
                    $response->getProtocolVersion(),
                    $response->getStatusCode(),
                    $response->getReasonPhrase(),
                ), true, $response->getStatusCode());
                foreach ($lines as $line) {
                    header($line, false);
                }
            }
        }
        $body = $response->getBody();
        $size = $body->getSize();
        if ($size !== null && $size <= self::EMIT_CHUNK * 16) {
            echo (string) $body;
            return;
        }
        if ($body->isSeekable()) {
            $body->rewind();
        }
        while (!$body->eof()) {
            $chunk = $body->read(self::EMIT_CHUNK);
            if ($chunk === '') {
                break;
            }
            echo $chunk;
        }
    }

    /** @param array<string, mixed> $server */
    /**
     * The request body as a PSR-7 stream: inside a worker the body Hearth
     * delivered (see Psr7Worker::serve()), elsewhere php://input.
     *
     * @return \Psr\Http\Message\StreamInterface
     */
    private static function body(object $factory): object
    {
        $body = Runtime::current() !== null ? InputStream::body() : null;
        return $body !== null
            ? $factory->createStreamFromResource($body)
            : $factory->createStreamFromFile('php://input', 'r');
    }

    private static function uri(array $server): string
    {
        $https = ($server['HTTPS'] ?? '') !== '' && strtolower((string) $server['HTTPS']) !== 'off';
        $host = (string) ($server['HTTP_HOST'] ?? '');
        if ($host === '') {
            $host = (string) ($server['SERVER_NAME'] ?? 'localhost');
            $port = (string) ($server['SERVER_PORT'] ?? '');
            if ($port !== '' && $port !== ($https ? '443' : '80')) {
                $host .= ':' . $port;
            }
        }
        return ($https ? 'https' : 'http') . '://' . $host . (string) ($server['REQUEST_URI'] ?? '/');
    }

    /**
     * @param array<string, mixed> $server
     * @return array<string, string>
     */
    private static function headers(array $server): array
    {
        /** @var array<string, string> $names HTTP_X_FOO => X-Foo, kept across requests */
        static $names = [];
        $headers = [];
        foreach ($server as $key => $value) {
            if (str_starts_with((string) $key, 'HTTP_')) {
                $name = $names[$key] ??= str_replace(
                    ' ',
                    '-',
                    ucwords(strtolower(str_replace('_', ' ', substr((string) $key, 5)))),
                );
                $headers[$name] = (string) $value;
            }
        }
        foreach (['CONTENT_TYPE' => 'Content-Type', 'CONTENT_LENGTH' => 'Content-Length'] as $key => $name) {
            if (($server[$key] ?? '') !== '') {
                $headers[$name] = (string) $server[$key];
            }
        }
        return $headers;
    }

    private static function isForm(string $contentType): bool
    {
        $type = strtolower(trim(explode(';', $contentType, 2)[0]));
        return $type === 'application/x-www-form-urlencoded' || $type === 'multipart/form-data';
    }

    /**
     * $_FILES in PSR-7 shape: one UploadedFileInterface per file, nested
     * as the field names are.
     *
     * @param array<array-key, mixed> $files
     * @return array<array-key, mixed>
     */
    private static function uploadedFiles(object $factory, array $files): array
    {
        $out = [];
        foreach ($files as $key => $file) {
            if (is_array($file) && isset($file['tmp_name'], $file['error'])) {
                $out[$key] = self::fileTree(
                    $factory,
                    $file['tmp_name'],
                    $file['size'] ?? 0,
                    $file['error'],
                    $file['name'] ?? null,
                    $file['type'] ?? null,
                );
            } elseif (is_array($file)) {
                $out[$key] = self::uploadedFiles($factory, $file);
            }
        }
        return $out;
    }

    /** @return UploadedFileInterface|array<array-key, mixed> */
    private static function fileTree(
        object $factory,
        mixed $tmp,
        mixed $size,
        mixed $error,
        mixed $name,
        mixed $type,
    ): mixed {
        if (is_array($tmp)) {
            $out = [];
            foreach ($tmp as $k => $t) {
                $out[$k] = self::fileTree(
                    $factory,
                    $t,
                    $size[$k] ?? 0,
                    $error[$k] ?? UPLOAD_ERR_NO_FILE,
                    $name[$k] ?? null,
                    $type[$k] ?? null,
                );
            }
            return $out;
        }
        $stream = (int) $error === UPLOAD_ERR_OK
            ? $factory->createStreamFromFile((string) $tmp, 'r')
            : $factory->createStream('');
        return $factory->createUploadedFile($stream, (int) $size, (int) $error, $name, $type);
    }
}
