<?php

/**
 * bin/console of the Messenger app (app.php):
 *
 *   BENCH_REDIS=127.0.0.1:6379 MESSENGER_CONSUMER=c1 php console.php messenger:consume redis
 */

declare(strict_types=1);

[, $console] = (require __DIR__ . '/app.php')();
exit($console->run());
