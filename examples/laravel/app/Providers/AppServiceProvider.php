<?php

namespace App\Providers;

use App\Services\RequestNote;
use App\Services\StickyNote;
use App\Services\Tally;
use Illuminate\Support\ServiceProvider;

class AppServiceProvider extends ServiceProvider
{
    public function register()
    {
        // One per request: Laravel forgets scoped instances between
        // requests (Octane, and Hearth's worker, call
        // forgetScopedInstances()).
        $this->app->scoped(RequestNote::class);
        // One per application: under php-fpm that is one per request,
        // under a warm worker one per worker (see /state).
        $this->app->singleton(StickyNote::class);
        $this->app->singleton(Tally::class);
    }

    public function boot()
    {
    }
}
