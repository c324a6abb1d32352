<?php

// queue:work reads its restart signal from the cache; an in-process store.
return [
    'default' => 'array',
    'stores' => ['array' => ['driver' => 'array', 'serialize' => false]],
    'prefix' => 'bench',
];
