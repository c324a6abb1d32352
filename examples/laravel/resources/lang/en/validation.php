<?php

// The messages of the rules the example uses (a Laravel app has the
// skeleton's full file, which Debian's package does not ship).
return [
    'required' => 'The :attribute field is required.',
    'email' => 'The :attribute must be a valid email address.',
    'max' => [
        'string' => 'The :attribute must not be greater than :max characters.',
    ],
    'min' => [
        'string' => 'The :attribute must be at least :min characters.',
    ],
    'attributes' => [],
];
