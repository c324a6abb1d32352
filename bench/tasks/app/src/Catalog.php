<?php

declare(strict_types=1);

namespace BenchApp;

/**
 * The products, seeded at boot: a stand-in for the database layer a real
 * app would set up there.
 */
final class Catalog
{
    /** @var array<string, array{sku: string, name: string, category: string, price: Money}> */
    private array $products = [];

    /** @param list<string> $categories */
    public function __construct(int $size, array $categories, string $currency)
    {
        for ($i = 0; $i < $size; $i++) {
            $sku = sprintf('SKU-%04d', $i);
            $this->products[$sku] = [
                'sku' => $sku,
                'name' => ucfirst($categories[$i % count($categories)]) . " item $i",
                'category' => $categories[$i % count($categories)],
                'price' => new Money(199 + ($i * 7919) % 9800, $currency),
            ];
        }
    }

    /** @return array{sku: string, name: string, category: string, price: Money} */
    public function product(string $sku): array
    {
        return $this->products[$sku] ?? throw new \OutOfBoundsException("no product $sku");
    }

    public function size(): int
    {
        return count($this->products);
    }
}
