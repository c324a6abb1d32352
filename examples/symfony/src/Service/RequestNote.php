<?php

namespace App\Service;

use Symfony\Contracts\Service\ResetInterface;

/**
 * A service with per-request state, done right: it implements
 * ResetInterface, so Symfony tags it kernel.reset (autoconfigure) and the
 * services_resetter empties it after every request. Under php-fpm this
 * makes no difference; in a worker it keeps one client's data from the
 * next.
 */
class RequestNote implements ResetInterface
{
    public ?string $text = null;

    public function reset(): void
    {
        $this->text = null;
    }
}
