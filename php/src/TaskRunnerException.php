<?php

declare(strict_types=1);

namespace Hearth;

/**
 * A TaskRunner batch could not run to its end: Hearth's binary is missing,
 * `hearth run` refused its input or options, or it stopped before it had
 * reported every task.
 *
 * A task that fails is not an exception: its result says so (a non-zero
 * `status`) and TaskRunner::failed() counts it. Match on getCode() (one of
 * the constants below), not on the message text.
 */
final class TaskRunnerException extends \RuntimeException
{
    /** No `hearth` binary where TaskRunner looked for one; nothing was started. */
    public const BINARY_NOT_FOUND = 1;
    /**
     * `hearth run` exited with status 255: it refused its options or input (a job log it cannot
     * write, a bootstrap that fails to boot...), or another error stopped it. Its stderr says which.
     */
    public const INVALID_INPUT = 2;
    /** `hearth run` died, was killed, or stopped before reporting every task. */
    public const RUNNER_FAILED = 3;

    private function __construct(
        string $message,
        int $code,
        private readonly ?int $exitStatus = null,
        private readonly string $stderr = '',
        ?\Throwable $previous = null,
    ) {
        parent::__construct($message, $code, $previous);
    }

    /** @internal */
    public static function binaryNotFound(string $message): self
    {
        return new self($message, self::BINARY_NOT_FOUND);
    }

    /** @internal */
    public static function invalidInput(string $stderr): self
    {
        $detail = trim($stderr);
        return new self(
            'hearth run refused its input or options (exit status 255): '
            . ($detail === '' ? '(it wrote nothing on stderr)' : $detail),
            self::INVALID_INPUT,
            255,
            $stderr,
        );
    }

    /** @internal */
    public static function runnerFailed(
        string $what,
        ?int $exitStatus = null,
        string $stderr = '',
        ?\Throwable $previous = null,
    ): self {
        $detail = trim($stderr);
        if ($detail !== '') {
            $what .= "; its stderr ended with:\n" . $detail;
        }
        return new self($what, self::RUNNER_FAILED, $exitStatus, $stderr, $previous);
    }

    /**
     * The exit status of `hearth run`, when it exited (null when it was
     * killed by a signal, or never started).
     */
    public function exitStatus(): ?int
    {
        return $this->exitStatus;
    }

    /**
     * The last 64 KiB `hearth run` wrote on its stderr.
     */
    public function stderr(): string
    {
        return $this->stderr;
    }
}
