<?php

/**
 * The parent half of method (c), the seed's separate-process design (its
 * `TaskRunner` class): add() appends a task to a JSONL temp file, and
 * runAndWait() starts pool-child.php on that file, a small PHP process that
 * forks the tasks instead of the big one, and decodes one JSON result line
 * at a time from its stdout.
 */

declare(strict_types=1);

namespace HearthBench;

final class SeparatePool
{
    private string $file;
    /** @var resource */
    private $handle;
    private int $total = 0;

    public function __construct(private readonly int $concurrency)
    {
        $file = tempnam(sys_get_temp_dir(), 'hearth-bench-tasks-');
        $handle = $file === false ? false : fopen($file, 'w');
        if ($handle === false) {
            throw new \RuntimeException('cannot create the JSONL task file');
        }
        $this->file = $file;
        $this->handle = $handle;
    }

    public function __destruct()
    {
        if (is_resource($this->handle)) {
            fclose($this->handle);
        }
        if (is_file($this->file)) {
            unlink($this->file);
        }
    }

    public function add(string $id, string $command): void
    {
        fwrite($this->handle, json_encode(['id' => $id, 'cmd' => $command], JSON_UNESCAPED_SLASHES) . "\n");
        $this->total++;
    }

    /**
     * Runs every task added so far and waits for them.
     *
     * @param \Closure(array{id: string, status: int, stdout: string, stderr: string}, int, int): void $onResult
     *        called with each result, the number completed so far and the total
     */
    public function runAndWait(\Closure $onResult): void
    {
        fclose($this->handle);
        $child = proc_open(
            [PHP_BINARY, __DIR__ . '/pool-child.php', $this->file, (string) $this->concurrency],
            [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => STDERR],
            $pipes
        );
        if ($child === false) {
            throw new \RuntimeException('cannot start pool-child.php');
        }
        $completed = 0;
        while (($line = fgets($pipes[1])) !== false) {
            $result = json_decode($line, true, flags: JSON_THROW_ON_ERROR);
            $onResult($result, ++$completed, $this->total);
        }
        fclose($pipes[1]);
        $status = proc_close($child);
        unlink($this->file);
        if ($status !== 0) {
            throw new \RuntimeException("pool-child.php exited with status $status");
        }
    }
}
