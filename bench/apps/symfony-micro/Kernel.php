<?php

declare(strict_types=1);

namespace BenchMicro;

use Symfony\Bundle\FrameworkBundle\FrameworkBundle;
use Symfony\Bundle\FrameworkBundle\Kernel\MicroKernelTrait;
use Symfony\Component\DependencyInjection\Loader\Configurator\ContainerConfigurator;
use Symfony\Component\HttpFoundation\JsonResponse;
use Symfony\Component\HttpFoundation\Request;
use Symfony\Component\HttpKernel\Kernel as BaseKernel;
use Symfony\Component\Routing\Loader\Configurator\RoutingConfigurator;

/**
 * A Symfony app of the smallest usual shape: FrameworkBundle's MicroKernel,
 * one route answering JSON, run in prod mode. Its cache (the compiled
 * container and router) lives outside the source tree, in a directory per
 * user and PHP version, so that every server of the benchmark, and anyone
 * running it without write access to the checkout, shares one warm cache.
 */
final class Kernel extends BaseKernel
{
    use MicroKernelTrait;

    public function registerBundles(): iterable
    {
        yield new FrameworkBundle();
    }

    protected function configureContainer(ContainerConfigurator $container): void
    {
        $container->extension('framework', [
            'secret' => 'bench-symfony-micro',
            'http_method_override' => false,
            'router' => ['utf8' => true],
            'php_errors' => ['log' => true],
        ]);
    }

    protected function configureRoutes(RoutingConfigurator $routes): void
    {
        $routes->add('hello', '/hello/{name}')->controller([$this, 'hello'])->methods(['GET']);
    }

    /** The one route: a JSON document built from the path and the query. */
    public function hello(Request $request, string $name): JsonResponse
    {
        return new JsonResponse([
            'message' => sprintf('Hello, %s!', $name),
            'lang' => $request->query->get('lang', 'en'),
        ]);
    }

    public function getProjectDir(): string
    {
        return __DIR__;
    }

    public function getCacheDir(): string
    {
        return self::varDir() . '/cache/' . $this->environment;
    }

    public function getLogDir(): string
    {
        return self::varDir() . '/log';
    }

    private static function varDir(): string
    {
        $user = function_exists('posix_geteuid') ? (string) posix_geteuid() : (getenv('USER') ?: 'any');
        return sys_get_temp_dir() . '/hearth-bench-symfony-micro-' . $user . '-' . PHP_VERSION
            . '-' . substr(md5(__DIR__), 0, 8);
    }
}
