<?php

namespace App\Services;

/**
 * A singleton the worker keeps, whose count of this request's
 * increments hearth.php puts back to 0 after each request
 * (Hearth\Laravel\Worker::onReset).
 */
class Tally
{
    public int $requests = 0;
}
