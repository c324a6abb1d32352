<?php

/**
 * The bootstrap of the PHP-jobs benchmark: a small app of the usual shape,
 * booted once per process (config file, container, a catalog seeded at
 * boot), and the job function, BenchApp\Jobs\invoice().
 *
 * `hearth run --php-bootstrap` loads it once per warm worker; the `php -r`
 * side of the benchmark loads it once per job.
 */

declare(strict_types=1);

namespace BenchApp {
    require_once __DIR__ . '/src/Config.php';
    require_once __DIR__ . '/src/Container.php';
    require_once __DIR__ . '/src/Money.php';
    require_once __DIR__ . '/src/Catalog.php';
    require_once __DIR__ . '/src/InvoiceService.php';

    /** The app's container, built on first use (at boot, below). */
    function app(): Container
    {
        static $container = null;
        if ($container === null) {
            $container = new Container();
            $container->set(Config::class, static fn () => Config::fromFile(__DIR__ . '/config.php'));
            $container->set(Catalog::class, static fn (Container $c) => new Catalog(
                (int) $c->get(Config::class)->get('catalog_size'),
                (array) $c->get(Config::class)->get('categories'),
                (string) $c->get(Config::class)->get('currency'),
            ));
            $container->set(InvoiceService::class, static fn (Container $c) => new InvoiceService(
                $c->get(Catalog::class),
                $c->get(Config::class),
            ));
        }
        return $container;
    }

    // Boot: what a framework does before the first request or job.
    app()->get(InvoiceService::class);
}

namespace BenchApp\Jobs {
    use BenchApp\InvoiceService;

    use function BenchApp\app;

    /**
     * The job: price order $orderId.
     *
     * @return array{order: int, lines: int, subtotal: int, discount: int, tax: int, total: int, formatted: string}
     */
    function invoice(int $orderId): array
    {
        return app()->get(InvoiceService::class)->invoice($orderId);
    }
}
