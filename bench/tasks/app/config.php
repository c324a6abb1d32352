<?php

// The app's settings, as a framework would read them from a config file.

declare(strict_types=1);

return [
    'currency' => 'EUR',
    'region' => 'DE',
    'catalog_size' => 200,
    'tax_rates' => [
        'DE' => ['books' => 0.07, 'food' => 0.07, 'default' => 0.19],
        'FR' => ['books' => 0.055, 'food' => 0.055, 'default' => 0.20],
    ],
    'categories' => ['books', 'food', 'tools', 'toys', 'garden'],
    'discounts' => [
        // Order subtotal in cents => discount in percent.
        10000 => 2,
        25000 => 5,
        50000 => 8,
    ],
];
