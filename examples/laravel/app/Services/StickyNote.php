<?php

namespace App\Services;

/**
 * A note bound as a singleton and resolved when the worker boots: it keeps
 * what a request wrote for the requests after it in the same worker, as
 * any object that lives as long as the application does. Under php-fpm
 * it is new on every request.
 */
class StickyNote
{
    public ?string $text = null;
}
