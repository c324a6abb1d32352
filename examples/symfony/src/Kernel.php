<?php

declare(strict_types=1);

namespace App;

use Symfony\Bundle\FrameworkBundle\FrameworkBundle;
use Symfony\Bundle\FrameworkBundle\Kernel\MicroKernelTrait;
use Symfony\Component\DependencyInjection\Loader\Configurator\ContainerConfigurator;
use Symfony\Component\HttpFoundation\JsonResponse;
use Symfony\Component\HttpFoundation\Request;
use Symfony\Component\HttpKernel\Kernel as BaseKernel;
use Symfony\Component\Routing\Loader\Configurator\RoutingConfigurator;

/**
 * A Symfony 5.4 app in one class (MicroKernelTrait), using Debian's
 * php-symfony-framework-bundle. Its cache and logs go to the system's
 * temporary directory, so that any user the workers run as can write them.
 */
final class Kernel extends BaseKernel
{
    use MicroKernelTrait;

    /** Requests this kernel instance handled: 1 under php-fpm, growing under Hearth. */
    private int $handled = 0;

    public function registerBundles(): iterable
    {
        return [new FrameworkBundle()];
    }

    public function getProjectDir(): string
    {
        return \dirname(__DIR__);
    }

    public function getCacheDir(): string
    {
        return $this->varDir() . '/cache/' . $this->environment;
    }

    public function getLogDir(): string
    {
        return $this->varDir() . '/log';
    }

    /** One directory per user, so that a cache one user wrote never stops another. */
    private function varDir(): string
    {
        $user = function_exists('posix_geteuid') ? (string) posix_geteuid() : get_current_user();
        return sys_get_temp_dir() . "/hearth-example-symfony-{$user}";
    }

    protected function configureContainer(ContainerConfigurator $container): void
    {
        $container->extension('framework', [
            'secret' => 'change-me',
            'http_method_override' => false,
            'session' => ['storage_factory_id' => 'session.storage.factory.native', 'handler_id' => null],
            'router' => ['utf8' => true],
        ]);
    }

    protected function configureRoutes(RoutingConfigurator $routes): void
    {
        $routes->add('home', '/')->controller([$this, 'home']);
        $routes->add('hello', '/hello/{name}')->controller([$this, 'hello']);
    }

    public function home(): JsonResponse
    {
        return new JsonResponse(['framework' => 'Symfony ' . self::VERSION, 'environment' => $this->environment]);
    }

    public function hello(Request $request, string $name): JsonResponse
    {
        $session = $request->getSession();
        $session->set('visits', $session->get('visits', 0) + 1);
        return new JsonResponse([
            'hello' => $name,
            'visits_in_session' => $session->get('visits'),
            'handled_by_this_kernel' => ++$this->handled,
        ]);
    }
}
