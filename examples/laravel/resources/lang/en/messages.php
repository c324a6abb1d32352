<?php

return [
    'title' => 'Hello',
    'hello' => 'Hello :name!',
];
