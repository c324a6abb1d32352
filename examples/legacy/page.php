<?php

/**
 * One page of a legacy app, written as for php-fpm: superglobals, echo,
 * header(), setcookie(), a session. Nothing here knows about Hearth.
 *
 * It ends early with `return`, which ends an included file. `exit` works
 * too, under Hearth as under php-fpm, but it ends the worker process, which
 * Hearth then replaces: a page that exits on every request loses the warm
 * worker (see docs/compatibility.md).
 */

declare(strict_types=1);

global $config;

session_start();
$_SESSION['visits'] = ($_SESSION['visits'] ?? 0) + 1;

$path = parse_url($_SERVER['REQUEST_URI'] ?? '/', PHP_URL_PATH);

if ($path === '/theme') {
    $theme = ($_GET['name'] ?? '') === 'dark' ? 'dark' : 'light';
    setcookie('theme', $theme, ['expires' => time() + 86400 * 365, 'path' => '/', 'samesite' => 'Lax']);
    header('Location: /', true, 303);
    return;
}

if ($path === '/boom') {
    // A page that fails: the exception handler set in bootstrap.php
    // answers with the error page.
    throw new RuntimeException('/boom failed on purpose');
}

if ($path !== '/') {
    http_response_code(404);
    echo 'Not found: ', e((string) $path), "\n";
    return;
}

if ($_SERVER['REQUEST_METHOD'] === 'POST') {
    $name = trim((string) ($_POST['name'] ?? ''));
    $message = trim((string) ($_POST['message'] ?? ''));
    if ($name === '' || $message === '') {
        http_response_code(422);
        echo "Both a name and a message, please.\n";
        return;
    }
    guestbook_add($name, $message);
    header('Location: /', true, 303);
    return;
}

$theme = ($_COOKIE['theme'] ?? 'light') === 'dark' ? 'dark' : 'light';
header('Content-Type: text/html; charset=utf-8');
?>
<!doctype html>
<html lang="en" data-theme="<?= $theme ?>">
<title><?= e($config['site_name']) ?></title>
<link rel="stylesheet" href="/style.css">
<h1><?= e($config['site_name']) ?></h1>
<p>Your visit number <?= (int) $_SESSION['visits'] ?> in this session.
<a href="/theme?name=<?= $theme === 'dark' ? 'light' : 'dark' ?>">Switch theme</a></p>
<form method="post">
  <input name="name" placeholder="Name"> <input name="message" placeholder="Message">
  <button>Sign</button>
</form>
<ul>
<?php foreach (guestbook_entries() as $entry) : ?>
  <li><b><?= e($entry['name']) ?></b>: <?= e($entry['message']) ?></li>
<?php endforeach ?>
</ul>
