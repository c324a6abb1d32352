<?php

// Laravel 8's redis connection as the skeleton's config/queue.php has it,
// with block_for set, as Laravel's documentation suggests ("Blocking"), so
// that an idle worker waits in BLPOP instead of polling every --sleep.
return [
    'default' => 'redis',
    'connections' => [
        'redis' => [
            'driver' => 'redis',
            'connection' => 'default',
            'queue' => 'bench',
            'retry_after' => 90,
            'block_for' => 5,
            'after_commit' => false,
        ],
    ],
    'failed' => ['driver' => 'null'],
];
