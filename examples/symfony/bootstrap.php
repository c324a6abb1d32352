<?php

/**
 * Loads Symfony from Debian's packages (php-symfony-framework-bundle) and
 * the app's kernel. A Composer app has `require 'vendor/autoload.php'` here.
 */

declare(strict_types=1);

require_once '/usr/share/php/Symfony/Bundle/FrameworkBundle/autoload.php';
require_once __DIR__ . '/src/Kernel.php';
