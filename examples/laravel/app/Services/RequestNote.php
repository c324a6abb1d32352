<?php

namespace App\Services;

/** A note bound as scoped: each request gets a new one. */
class RequestNote
{
    public ?string $text = null;
}
