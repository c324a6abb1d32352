<?php

declare(strict_types=1);

namespace Hearth\Symfony;

use Symfony\Component\HttpKernel\HttpKernelInterface;
use Symfony\Component\Runtime\RunnerInterface;
use Symfony\Component\Runtime\SymfonyRuntime;

/**
 * Symfony's runtime (symfony/runtime) for Hearth's warm workers: an app
 * whose front controller returns a kernel,
 *
 *     require_once dirname(__DIR__) . '/vendor/autoload_runtime.php';
 *     return fn (array $context) => new Kernel($context['APP_ENV'], (bool) $context['APP_DEBUG']);
 *
 * runs unmodified in `hearth serve public/index.php` once this runtime is
 * selected: `APP_RUNTIME=Hearth\Symfony\Runtime` in the workers'
 * environment, or `extra.runtime.class` in composer.json. The kernel is
 * built and booted once per worker, and each request goes through
 * KernelRunner. Everything else (.env files, APP_ENV and APP_DEBUG, the
 * error handler, console apps, other app types) is Symfony's own
 * SymfonyRuntime, with the same options.
 *
 * Under php-fpm or any other SAPI this runtime serves the one request
 * there is, as SymfonyRuntime would, so selecting it everywhere is safe.
 */
final class Runtime extends SymfonyRuntime
{
    public function getRunner(?object $application): RunnerInterface
    {
        if ($application instanceof HttpKernelInterface) {
            return new KernelRunner($application);
        }
        return parent::getRunner($application);
    }
}
