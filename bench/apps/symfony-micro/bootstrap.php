<?php

// Loads Symfony from Debian's packages (/usr/share/php, no Composer, as
// examples/symfony does) and returns the app's kernel, not yet booted, in
// prod mode with debug off.

declare(strict_types=1);

require_once '/usr/share/php/Symfony/Bundle/FrameworkBundle/autoload.php';
require_once __DIR__ . '/Kernel.php';

return new BenchMicro\Kernel('prod', false);
