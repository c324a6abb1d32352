<?php

/**
 * The bootstrap of `hearth work --php-bootstrap` in bench/jobs.py: the
 * shared job code (and, with it, the invoice app's boot). Jobs are pushed
 * as calls of BenchJobs\run with [KIND, ARG].
 */

declare(strict_types=1);

require __DIR__ . '/jobs.php';
