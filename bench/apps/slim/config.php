<?php

// Settings of the benchmark app, as a real app keeps them in a file.

return [
    'displayErrorDetails' => false,
    'addContentLengthHeader' => false,
    'greeting' => 'Hello',
    'articles' => 50,
    'page_size' => 5,
    'app' => ['name' => 'Hearth benchmark app', 'version' => '1.0.0'],
];
