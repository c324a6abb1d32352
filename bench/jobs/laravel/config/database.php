<?php

// No database (artisan's commands need the service to exist); Redis only,
// through phpredis (the skeleton's default client).
[$host, $port] = explode(':', (string) getenv('BENCH_REDIS')) + [1 => '6379'];

return [
    'default' => 'none',
    'connections' => [],
    'redis' => [
        'client' => 'phpredis',
        'options' => ['prefix' => ''],
        'default' => ['host' => $host, 'port' => (int) $port, 'database' => 0],
    ],
];
