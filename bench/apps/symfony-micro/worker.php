<?php

// The app under Hearth: the kernel boots once per worker, and Hearth's
// Symfony runner (Hearth\Symfony\KernelRunner) serves each request with
// handle(), send() and terminate(), then resets the services tagged
// kernel.reset through the container's services_resetter.

declare(strict_types=1);

require __DIR__ . '/../../../php/autoload.php';
// KernelRunner is a runner of Symfony's Runtime component (Debian's
// php-symfony-runtime), which Hearth's autoloader looks for.
require_once '/usr/share/php/Symfony/Component/Runtime/autoload.php';

$kernel = require __DIR__ . '/bootstrap.php';
(new Hearth\Symfony\KernelRunner($kernel))->run();
