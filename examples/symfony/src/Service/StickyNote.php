<?php

namespace App\Service;

/**
 * The same service without ResetInterface: nothing resets it, so in a
 * worker what one request writes here is still there for the next
 * requests that worker serves, whoever sends them, until the worker is
 * replaced. Under php-fpm it is always empty. Fine for a cache of what is
 * the same for everyone; a leak for anything about a user or a request.
 */
class StickyNote
{
    public ?string $text = null;
}
