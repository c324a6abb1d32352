<?php

declare(strict_types=1);

namespace BenchApp;

/** Prices an order: lines, discount by subtotal, tax by category and region. */
final class InvoiceService
{
    public function __construct(private readonly Catalog $catalog, private readonly Config $config)
    {
    }

    /**
     * The lines of order $orderId (made up from the id, as a repository
     * would load them).
     *
     * @return list<array{sku: string, quantity: int}>
     */
    public function orderLines(int $orderId): array
    {
        $lines = [];
        for ($k = 0; $k < $orderId % 5 + 1; $k++) {
            $lines[] = [
                'sku' => sprintf('SKU-%04d', ($orderId * 7 + $k * 13) % $this->catalog->size()),
                'quantity' => ($orderId + $k) % 4 + 1,
            ];
        }
        return $lines;
    }

    /** @return array{order: int, lines: int, subtotal: int, discount: int, tax: int, total: int, formatted: string} */
    public function invoice(int $orderId): array
    {
        $currency = (string) $this->config->get('currency');
        $region = (string) $this->config->get('region');
        $rates = (array) $this->config->get("tax_rates.$region");
        $subtotal = new Money(0, $currency);
        $taxable = [];
        foreach ($this->orderLines($orderId) as $line) {
            $product = $this->catalog->product($line['sku']);
            $amount = $product['price']->times($line['quantity']);
            $subtotal = $subtotal->add($amount);
            $taxable[$product['category']] = ($taxable[$product['category']] ?? new Money(0, $currency))->add($amount);
        }
        $percent = 0;
        foreach ((array) $this->config->get('discounts') as $threshold => $discount) {
            if ($subtotal->cents >= $threshold) {
                $percent = $discount;
            }
        }
        $tax = new Money(0, $currency);
        foreach ($taxable as $category => $amount) {
            $rate = (float) ($rates[$category] ?? $rates['default']);
            $tax = $tax->add($amount->times((1 - $percent / 100) * $rate));
        }
        $discount = $subtotal->times($percent / 100);
        $total = $subtotal->add($discount->times(-1))->add($tax);
        return [
            'order' => $orderId,
            'lines' => count($taxable),
            'subtotal' => $subtotal->cents,
            'discount' => $discount->cents,
            'tax' => $tax->cents,
            'total' => $total->cents,
            'formatted' => $total->format(),
        ];
    }
}
