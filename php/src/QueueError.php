<?php

declare(strict_types=1);

namespace Hearth;

/**
 * What Hearth\Queue throws. Match on getCode() (one of the constants
 * below, the kinds of the hearth-queue crate's errors), not on the message
 * text. A message names the queue by its URL without its password.
 */
final class QueueError extends \RuntimeException
{
    /** The queue URL cannot be used (its form, its name, its port...). Nothing was tried. */
    public const URL = 1;
    /** An argument cannot make a job (a channel name with a space, 0 attempts...). Nothing was stored. */
    public const INVALID = 2;
    /** A job's payload is over the queue's limit (1 MiB by default). Nothing of the batch was stored. */
    public const TOO_LARGE = 3;
    /**
     * Redis could not be reached, stopped answering within the timeout, or
     * the queue file stayed locked past its busy timeout. For a push cut
     * while its reply was on the way, the jobs may or may not have been
     * stored; one refused before it was sent stored nothing.
     */
    public const UNAVAILABLE = 4;
    /**
     * The engine answered with an error of its own (a refused AUTH, a
     * Redis that refuses the script, a file that is not a queue or one of
     * another version, PHP without pdo_sqlite for a file: queue).
     */
    public const ENGINE = 5;

    /** @internal */
    public function __construct(int $kind, string $message, ?\Throwable $previous = null)
    {
        parent::__construct($message, $kind, $previous);
    }
}
