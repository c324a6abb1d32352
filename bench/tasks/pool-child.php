<?php

/**
 * The child half of method (c), the seed's separate-process design: a small
 * PHP process that runs the ProcessPool over a JSONL task file and prints
 * one JSON line per finished task on stdout.
 *
 *     php pool-child.php TASKS.jsonl CONCURRENCY
 *
 * Each input line is {"id": ..., "cmd": ...}; each output line is
 * {"id", "status", "stdout", "stderr"}. As in the seed, the file is read
 * twice, line by line, so the child stays small however many tasks there
 * are: once to validate every line, once to start the tasks.
 */

declare(strict_types=1);

require __DIR__ . '/ProcessPool.php';

/** @return \Generator<int, string> the file's lines, numbered from 1 */
function taskLines(string $file): \Generator
{
    $handle = fopen($file, 'r');
    if ($handle === false) {
        throw new \RuntimeException("cannot open $file");
    }
    try {
        $number = 0;
        while (($line = fgets($handle)) !== false) {
            yield ++$number => $line;
        }
    } finally {
        fclose($handle);
    }
}

function fail(string $message): never
{
    fwrite(STDERR, "pool-child.php: $message\n");
    exit(2);
}

[, $file, $concurrency] = $argv + [null, '', '0'];
if (!is_file($file) || !ctype_digit($concurrency) || (int) $concurrency < 1) {
    fail('usage: php pool-child.php TASKS.jsonl CONCURRENCY');
}

foreach (taskLines($file) as $number => $line) {
    $task = json_decode($line, true);
    if (!is_array($task) || !isset($task['id'], $task['cmd'])) {
        fail("$file:$number: not a JSON object with id and cmd");
    }
}

$pool = new HearthBench\ProcessPool(
    (int) $concurrency,
    static function (string $id, int $status, string $stdout, string $stderr): void {
        echo json_encode(
            ['id' => $id, 'status' => $status, 'stdout' => $stdout, 'stderr' => $stderr],
            JSON_UNESCAPED_SLASHES | JSON_INVALID_UTF8_SUBSTITUTE
        ), "\n";
    }
);
foreach (taskLines($file) as $line) {
    $task = json_decode($line, true);
    $pool->add((string) $task['id'], (string) $task['cmd']);
}
$pool->finish();
