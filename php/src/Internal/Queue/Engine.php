<?php

declare(strict_types=1);

namespace Hearth\Internal\Queue;

use Hearth\QueueError;
use Hearth\QueueJob;

/**
 * Where Hearth\Queue stores jobs: Redis, or a SQLite file.
 *
 * @internal
 */
interface Engine
{
    /**
     * Stores $jobs (already checked) in order; returns their ids in the
     * same order.
     *
     * @param non-empty-list<QueueJob> $jobs
     * @return list<int>
     * @throws QueueError
     */
    public function push(array $jobs): array;

    /** Lets go of the connection or the file; the next push opens it again. */
    public function close(): void;
}
