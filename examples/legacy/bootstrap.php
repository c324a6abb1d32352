<?php

/**
 * What a legacy app does before every page: configuration, helper
 * functions, a database handle. Under php-fpm this runs on every request;
 * under Hearth, once per worker (see worker.php).
 */

declare(strict_types=1);

// phpcs:disable PSR1.Files.SideEffects -- a legacy bootstrap sets globals and declares functions in one file

$config = [
    'site_name' => 'Guestbook',
    'max_entries' => 20,
];

/**
 * The guestbook's storage: one file in the system's temporary directory
 * (GUESTBOOK_FILE in the environment chooses another), one per user.
 */
function guestbook_file(): string
{
    $file = getenv('GUESTBOOK_FILE');
    if (is_string($file) && $file !== '') {
        return $file;
    }
    $user = function_exists('posix_geteuid') ? (string) posix_geteuid() : get_current_user();
    return sys_get_temp_dir() . "/hearth-example-guestbook-{$user}.json";
}

/** @return list<array{name: string, message: string, at: string}> */
function guestbook_entries(): array
{
    $raw = @file_get_contents(guestbook_file());
    $entries = $raw === false ? [] : json_decode($raw, true);
    return is_array($entries) ? $entries : [];
}

function guestbook_add(string $name, string $message): void
{
    global $config;
    $entries = guestbook_entries();
    array_unshift($entries, ['name' => $name, 'message' => $message, 'at' => date(DATE_ATOM)]);
    $entries = array_slice($entries, 0, $config['max_entries']);
    file_put_contents(guestbook_file(), json_encode($entries), LOCK_EX);
}

function e(string $text): string
{
    return htmlspecialchars($text, ENT_QUOTES);
}

// The error page: an exception no page caught is logged (php-fpm's log,
// or Hearth's) and the visitor gets a 500 without its details. Set here,
// once per worker under Hearth, it stays for every request after.
set_exception_handler(static function (Throwable $e): void {
    error_log(sprintf('guestbook: uncaught %s: %s', get_class($e), $e->getMessage()));
    if (!headers_sent()) {
        http_response_code(500);
        header('Content-Type: text/html; charset=utf-8');
    }
    echo "<!doctype html>\n<title>Error</title>\n<h1>Something went wrong</h1>\n";
});
