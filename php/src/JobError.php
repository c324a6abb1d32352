<?php

declare(strict_types=1);

namespace Hearth;

/**
 * How a job failed: what it threw, or how it ended when it did not throw
 * (it called exit, its worker died, it timed out). TaskRunner::map() returns
 * it as a value in place of the job's result; Jobs::call() throws it.
 *
 *     foreach (TaskRunner::map($bootstrap, 'App\resize', $files) as $file => $result) {
 *         if ($result instanceof Hearth\JobError) {
 *             $logger->error("resize $file: $result");   // class, message, file:line, trace
 *             continue;
 *         }
 *         ...
 *     }
 *
 *     try {
 *         $pdf = Hearth\Jobs::call('App\Pdf::render', [$id], timeout: 5);
 *     } catch (Hearth\JobError $e) {
 *         $logger->error((string) $e);      // the remote class, message, file:line and trace
 *     }
 *
 * The exception itself stays in the worker; this is a copy of what it said.
 * Read its properties ($class, $message, $code, $file, $line, $trace, ...)
 * or the Throwable methods: getMessage(), getCode(), getFile() and getLine()
 * give the remote exception's; getPrevious() is the exception itself when
 * Jobs::call() ran the function in this process.
 */
final class JobError extends \RuntimeException
{
    /** @var string what went wrong, never empty */
    public $message;

    /** @var int|string the exception's code (a string for e.g. PDOException) */
    public $code;

    /** where it was thrown; '' otherwise */
    public string $file;

    /** the line in $file; 0 otherwise */
    public int $line;

    /**
     * @param string     $class   the class of what the job threw; 'exit' when it called exit()
     *                            or die(); '' when its worker died or it timed out
     * @param string     $message what went wrong, never empty
     * @param int|string $code    the exception's code (a string for e.g. PDOException)
     * @param string     $file    where it was thrown; '' otherwise
     * @param int        $line    the line in $file; 0 otherwise
     * @param string     $trace   the stack trace, as Throwable::getTraceAsString() prints it
     * @param int|null   $status  the job's status: 1 when it threw or called exit, null when its worker died
     * @param string|null $signal the signal that ended the job's worker ("SIGKILL", "SIGSEGV", ...)
     * @param bool       $timedOut whether the job was stopped because it ran past its timeout
     * @param \Throwable|null $previous the exception itself, when it was thrown in this process
     */
    public function __construct(
        public readonly string $class,
        string $message,
        int|string $code = 0,
        string $file = '',
        int $line = 0,
        public readonly string $trace = '',
        public readonly ?int $status = 1,
        public readonly ?string $signal = null,
        public readonly bool $timedOut = false,
        ?\Throwable $previous = null,
    ) {
        parent::__construct($message, 0, $previous);
        $this->message = $message;
        $this->code = $code;
        $this->file = $file;
        $this->line = $line;
    }

    /**
     * The copy of an exception thrown in this process (Jobs::call()'s
     * fallback), the same as one thrown in a worker would give.
     */
    public static function fromThrowable(\Throwable $e, string $trace): self
    {
        return new self(
            $e::class,
            $e->getMessage() !== '' ? $e->getMessage() : $e::class . ' (no message)',
            $e->getCode(),
            $e->getFile(),
            $e->getLine(),
            $trace,
            1,
            null,
            false,
            $e,
        );
    }

    /**
     * Builds the error from a failed job's result line, as `hearth run
     * --php-bootstrap` writes it (decoded).
     *
     * @param array<string, mixed> $result
     */
    public static function fromResult(array $result): self
    {
        $status = is_int($result['status'] ?? null) ? $result['status'] : null;
        $signal = is_string($result['signal'] ?? null) ? $result['signal'] : null;
        $timedOut = ($result['timed_out'] ?? false) === true;
        $error = $result['error'] ?? null;
        if (is_string($error)) {
            $error = ['message' => $error];
        }
        if (!is_array($error)) {
            $error = [];
        }

        $message = is_string($error['message'] ?? null) ? $error['message'] : '';
        if ($message === '') {
            $message = self::describe($status, $signal, $timedOut);
        }
        $code = $error['code'] ?? 0;
        $trace = $error['trace'] ?? '';
        if (is_array($trace)) {
            $trace = json_encode($trace, JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES | JSON_PARTIAL_OUTPUT_ON_ERROR);
        }

        return new self(
            is_string($error['class'] ?? null) ? $error['class'] : '',
            $message,
            is_int($code) || is_string($code) ? $code : 0,
            is_string($error['file'] ?? null) ? $error['file'] : '',
            is_int($error['line'] ?? null) ? $error['line'] : 0,
            is_string($trace) ? $trace : '',
            $status,
            $signal,
            $timedOut,
        );
    }

    /**
     * The error the way PHP prints an uncaught exception: class, message,
     * where it was thrown and the stack trace.
     */
    public function __toString(): string
    {
        $text = ($this->class !== '' ? $this->class . ': ' : '') . $this->message;
        if ($this->file !== '') {
            $text .= ' in ' . $this->file . ':' . $this->line;
        }
        if ($this->trace !== '') {
            $text .= "\nStack trace:\n" . $this->trace;
        }
        return $text;
    }

    private static function describe(?int $status, ?string $signal, bool $timedOut): string
    {
        if ($timedOut) {
            return 'the job ran past its timeout and was stopped' . ($signal !== null ? " ({$signal})" : '');
        }
        if ($signal !== null) {
            return "the job's worker was killed by {$signal}";
        }
        return $status === null ? 'the job did not run' : "the job failed with status {$status}";
    }
}
