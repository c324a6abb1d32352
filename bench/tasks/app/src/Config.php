<?php

declare(strict_types=1);

namespace BenchApp;

/** Read-only settings with dotted keys: `tax_rates.DE.books`. */
final class Config
{
    /** @param array<string, mixed> $values */
    public function __construct(private readonly array $values)
    {
    }

    public static function fromFile(string $file): self
    {
        return new self(require $file);
    }

    public function get(string $key): mixed
    {
        $value = $this->values;
        foreach (explode('.', $key) as $part) {
            if (!is_array($value) || !array_key_exists($part, $value)) {
                throw new \OutOfBoundsException("no setting $key");
            }
            $value = $value[$part];
        }
        return $value;
    }
}
