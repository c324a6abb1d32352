<?php

declare(strict_types=1);

namespace HearthBench\Slim;

use Psr\Http\Message\ResponseInterface;
use Psr\Http\Message\StreamFactoryInterface;

/**
 * Writes JSON and HTML bodies into responses with the app's PSR-17
 * stream factory, so every body the routes produce is a nyholm stream.
 */
final class Responder
{
    public function __construct(private readonly StreamFactoryInterface $streams)
    {
    }

    /** @param array<string, mixed> $data */
    public function json(ResponseInterface $response, array $data, int $status = 200): ResponseInterface
    {
        $json = json_encode($data, JSON_THROW_ON_ERROR | JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE);
        return $response
            ->withStatus($status)
            ->withHeader('Content-Type', 'application/json')
            ->withBody($this->streams->createStream($json));
    }

    public function html(ResponseInterface $response, string $title, string $bodyHtml): ResponseInterface
    {
        $page = sprintf(
            "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>%s</title>\n</head>\n"
            . "<body>\n%s\n</body>\n</html>\n",
            htmlspecialchars($title, ENT_QUOTES | ENT_HTML5, 'UTF-8'),
            $bodyHtml,
        );
        return $response
            ->withHeader('Content-Type', 'text/html; charset=utf-8')
            ->withBody($this->streams->createStream($page));
    }
}
