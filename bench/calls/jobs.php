<?php

/**
 * The bootstrap of the calls benchmark (bench/calls.py): the tasks
 * benchmark's app (its invoice job, booted once) and a trivial function.
 * `hearth work --listen --php-bootstrap` loads it once per warm worker;
 * `php -r` loads it once per call; roundtrip.php loads it once.
 */

declare(strict_types=1);

namespace BenchCalls {
    require_once __DIR__ . '/../tasks/app/bootstrap.php';

    /** The trivial call: what a round trip costs with no work in it. */
    function add(int $a, int $b): int
    {
        return $a + $b;
    }
}
