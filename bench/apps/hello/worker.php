<?php

// Hello world under Hearth; the same file answers one request under php-fpm.

declare(strict_types=1);

require __DIR__ . '/../../../php/autoload.php';

Hearth\Worker::serve(static function (): void {
    echo 'Hello, World!';
});
