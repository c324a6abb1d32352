<?php

/**
 * The front controller for nginx + php-fpm: boot, then the page, on every
 * request. Hearth runs the same two files from worker.php instead.
 */

declare(strict_types=1);

require __DIR__ . '/../bootstrap.php';
require __DIR__ . '/../page.php';
