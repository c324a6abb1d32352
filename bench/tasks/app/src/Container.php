<?php

declare(strict_types=1);

namespace BenchApp;

/** A minimal service container: lazy factories, one shared instance each. */
final class Container
{
    /** @var array<string, \Closure(self): object> */
    private array $factories = [];
    /** @var array<string, object> */
    private array $instances = [];

    /** @param \Closure(self): object $factory */
    public function set(string $id, \Closure $factory): void
    {
        $this->factories[$id] = $factory;
        unset($this->instances[$id]);
    }

    /**
     * @template T of object
     * @param class-string<T> $id
     * @return T
     */
    public function get(string $id): object
    {
        if (!isset($this->instances[$id])) {
            if (!isset($this->factories[$id])) {
                throw new \LogicException("no service $id");
            }
            $this->instances[$id] = ($this->factories[$id])($this);
        }
        return $this->instances[$id];
    }
}
