<?php

/**
 * The demo Hearth serves when no worker script is given (`make run`).
 *
 * Everything above Worker::serve() runs once, when the worker boots; the
 * closure runs for every request, in a process that is already warm.
 */

declare(strict_types=1);

require __DIR__ . '/../php/autoload.php';

$bootedAt = microtime(true);
$served = 0;

Hearth\Worker::serve(static function () use ($bootedAt, &$served): void {
    $served++;
    $path = parse_url($_SERVER['REQUEST_URI'] ?? '/', PHP_URL_PATH) ?: '/';
    $worker = [
        'pid' => getmypid(),
        'requests_served' => $served,
        'booted_at' => date(DATE_ATOM, (int) $bootedAt),
        'uptime_seconds' => round(microtime(true) - $bootedAt, 3),
        'php' => PHP_VERSION,
        'sapi' => PHP_SAPI,
    ];

    if ($path === '/status.json') {
        header('Content-Type: application/json');
        echo json_encode(['running' => true, 'worker' => $worker], JSON_PRETTY_PRINT), "\n";
        return;
    }
    if ($path !== '/') {
        http_response_code(404);
        echo '<!doctype html><title>Not found</title><p>Nothing at ', htmlspecialchars($path), '. <a href="/">Home</a></p>';
        return;
    }

    session_start();
    $_SESSION['visits'] = ($_SESSION['visits'] ?? 0) + 1;
    $name = trim((string) ($_POST['name'] ?? $_GET['name'] ?? ''));
    $e = static fn (mixed $v): string => htmlspecialchars((string) $v, ENT_QUOTES);
    ?>
<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Hearth is running</title>
<style>
  body { font: 16px/1.5 system-ui, sans-serif; max-width: 44rem; margin: 3rem auto; padding: 0 1rem; color: #222; }
  h1 { font-size: 1.6rem; margin-bottom: .2rem; }
  table { border-collapse: collapse; margin: 1rem 0; }
  td { padding: .25rem 1rem .25rem 0; vertical-align: top; }
  td:first-child { color: #666; }
  code { background: #f4f4f4; padding: .1rem .3rem; border-radius: 3px; }
</style>
</head>
<body>
<h1>&#128293; Hearth is running</h1>
<p>This page was served by a warm PHP worker: the app booted once, and this
request ran in a process that was already waiting for it.</p>
<table>
  <tr><td>Worker pid</td><td><?= $e($worker['pid']) ?></td></tr>
  <tr><td>Requests served by this worker</td><td><?= $e($served) ?></td></tr>
  <tr><td>Worker booted at</td><td><?= $e($worker['booted_at']) ?> (<?= $e($worker['uptime_seconds']) ?> s ago)</td></tr>
  <tr><td>PHP</td><td><?= $e(PHP_VERSION) ?> (<?= $e(PHP_SAPI) ?>)</td></tr>
  <tr><td>Your visits (session)</td><td><?= $e($_SESSION['visits']) ?></td></tr>
  <tr><td>Request</td><td><code><?= $e($_SERVER['REQUEST_METHOD']) ?> <?= $e($_SERVER['REQUEST_URI']) ?></code> from <?= $e($_SERVER['REMOTE_ADDR']) ?></td></tr>
</table>
<?php if ($name !== '') : ?>
<p>Hello, <strong><?= $e($name) ?></strong>!</p>
<?php endif ?>
<form method="post" action="/">
  <label>Your name <input name="name" value="<?= $e($name) ?>"></label>
  <button>Say hello (POST)</button>
</form>
<p>Reload to see the request counter climb, or fetch <a href="/status.json">/status.json</a>.
To serve your own app: <code>hearth serve app/worker.php</code>.</p>
</body>
</html>
    <?php
});
