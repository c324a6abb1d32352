<?php

declare(strict_types=1);

namespace Hearth\Internal\Queue;

/**
 * An error reply from Redis (`-NOSCRIPT ...`, `-WRONGPASS ...`), a value
 * in a pipeline's replies: one command's error does not stop the reading
 * of the others.
 *
 * @internal
 */
final class RedisErrorReply
{
    public function __construct(public readonly string $message)
    {
    }

    /** The error's code, its first word (NOSCRIPT, ERR, LOADING...). */
    public function code(): string
    {
        return strtok($this->message, ' ') ?: '';
    }

    /**
     * Whether the error means Redis is away for now (loading its data,
     * busy with a script, a replica without its primary), not that it
     * refuses the command.
     */
    public function isTransient(): bool
    {
        return in_array($this->code(), ['LOADING', 'BUSY', 'MASTERDOWN', 'TRYAGAIN'], true);
    }
}
