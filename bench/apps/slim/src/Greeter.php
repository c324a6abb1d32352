<?php

declare(strict_types=1);

namespace HearthBench\Slim;

/**
 * The app's domain service: turns a name into a greeting.
 */
final class Greeter
{
    public function __construct(private readonly string $greeting)
    {
    }

    public function greet(string $name): string
    {
        $name = trim($name);
        return sprintf('%s, %s!', $this->greeting, $name === '' ? 'stranger' : $name);
    }
}
