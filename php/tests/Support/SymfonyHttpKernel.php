<?php

declare(strict_types=1);

namespace Hearth\Tests\Support;

use Symfony\Component\HttpFoundation\Request;
use Symfony\Component\HttpFoundation\RequestStack;
use Symfony\Component\HttpFoundation\Response;
use Symfony\Component\HttpKernel\HttpKernelInterface;
use Symfony\Component\HttpKernel\TerminableInterface;

/**
 * The app behind the test kernel: it pushes each request on the request
 * stack and leaves it there (as a request that failed half-way can), then
 * answers with what $answer returns (or throws), and records terminate().
 */
final class SymfonyHttpKernel implements HttpKernelInterface, TerminableInterface
{
    /** @var list<Request> */
    public array $handled = [];
    /** @var list<array{Request, Response}> */
    public array $terminated = [];

    /** @param \Closure(Request): Response $answer */
    public function __construct(private readonly RequestStack $stack, private readonly \Closure $answer)
    {
    }

    public function handle(Request $request, int $type = self::MAIN_REQUEST, bool $catch = true): Response
    {
        $this->handled[] = $request;
        $this->stack->push($request);
        return ($this->answer)($request);
    }

    public function terminate(Request $request, Response $response): void
    {
        $this->terminated[] = [$request, $response];
    }
}
