<?php

declare(strict_types=1);

namespace Hearth\Tests\Support;

use Symfony\Component\Config\Loader\LoaderInterface;
use Symfony\Component\DependencyInjection\Container;
use Symfony\Component\HttpKernel\Kernel;

/**
 * A Symfony Kernel already booted with a container made by hand (its
 * http_kernel, request_stack, services_resetter...), so that the runtime's
 * tests drive Symfony's own Kernel::handle(), terminate() and boot()
 * without compiling a container.
 */
final class SymfonyKernel extends Kernel
{
    public function __construct(Container $container)
    {
        parent::__construct('test', false);
        $this->container = $container;
        $this->booted = true;
    }

    public function registerBundles(): iterable
    {
        return [];
    }

    public function registerContainerConfiguration(LoaderInterface $loader): void
    {
    }
}
