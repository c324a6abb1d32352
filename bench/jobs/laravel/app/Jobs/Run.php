<?php

namespace App\Jobs;

use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;

/** The queued job, as `php artisan make:job` writes one: it runs the shared job. */
class Run implements ShouldQueue
{
    use Dispatchable;
    use InteractsWithQueue;
    use Queueable;

    public function __construct(public string $kind, public int $arg)
    {
    }

    public function handle(): void
    {
        \BenchJobs\run($this->kind, $this->arg);
    }
}
