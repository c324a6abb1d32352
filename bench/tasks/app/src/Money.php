<?php

declare(strict_types=1);

namespace BenchApp;

/** An amount in cents of one currency. */
final class Money
{
    public function __construct(public readonly int $cents, public readonly string $currency)
    {
    }

    public function add(self $other): self
    {
        if ($other->currency !== $this->currency) {
            throw new \InvalidArgumentException("cannot add {$other->currency} to {$this->currency}");
        }
        return new self($this->cents + $other->cents, $this->currency);
    }

    public function times(float $factor): self
    {
        return new self((int) round($this->cents * $factor), $this->currency);
    }

    public function format(): string
    {
        return sprintf('%s %s.%02d', $this->currency, number_format(intdiv($this->cents, 100)), $this->cents % 100);
    }
}
