<?php

return [
    'title' => 'Bonjour',
    'hello' => 'Bonjour :name !',
];
