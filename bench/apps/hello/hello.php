<?php

// The plain script php-fpm is measured with: nothing to load, its best case.

echo 'Hello, World!';
