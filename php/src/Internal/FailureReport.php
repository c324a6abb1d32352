<?php

declare(strict_types=1);

namespace Hearth\Internal;

/**
 * What a worker says about a failure: an exception nothing caught, a fatal
 * error that ends the script, and the text PHP itself would show and log
 * for them. Failures travel as values (class, message, code, file, line,
 * trace): in ERROR frames for the log (docs/protocol.md), or in a job's
 * result.
 *
 * @internal
 */
final class FailureReport
{
    /** Errors PHP cannot continue after: only shutdown functions run next. */
    private const FATAL_ERRORS = E_ERROR | E_PARSE | E_CORE_ERROR | E_COMPILE_ERROR
        | E_USER_ERROR | E_RECOVERABLE_ERROR;

    /**
     * The fatal error the script is ending with, or null when it ends for
     * another reason (exit). For shutdown functions: memory_limit is lifted
     * first, so that the report can be made after memory ran out.
     *
     * @return array{type:int,message:string,file:string,line:int}|null
     */
    public static function fatalAtShutdown(): ?array
    {
        @ini_set('memory_limit', '-1');
        $error = error_get_last();
        return $error !== null && ($error['type'] & self::FATAL_ERRORS) ? $error : null;
    }

    /**
     * Gives an exception nothing caught to the app's exception handler, as
     * PHP does.
     *
     * @return \Throwable|null what is left to report: the exception, or the
     *                         one the handler threw; null when it was handled
     */
    public static function offerToHandler(\Throwable $e): ?\Throwable
    {
        $handler = set_exception_handler(null);
        set_exception_handler($handler);
        if ($handler === null) {
            return $e;
        }
        try {
            $handler($e);
            return null;
        } catch (\Throwable $again) {
            return $again;
        }
    }

    /**
     * An exception as a value, with its trace as getTraceAsString() gives
     * it unless $trace says otherwise.
     *
     * @return array{class:string,message:string,code:int|string,file:string,line:int,trace:string}
     */
    public static function describe(\Throwable $e, ?string $trace = null): array
    {
        return [
            'class' => $e::class,
            'message' => $e->getMessage(),
            'code' => $e->getCode(),
            'file' => $e->getFile(),
            'line' => $e->getLine(),
            'trace' => $trace ?? $e->getTraceAsString(),
        ];
    }

    /**
     * The exception's trace down to the function a job called: the frames
     * of $caller (the code that called it) and below are the same for
     * every job and say nothing.
     */
    public static function traceBelow(\Throwable $e, string $caller): string
    {
        $frames = 0;
        foreach ($e->getTrace() as $frame) {
            if (($frame['class'] ?? '') === $caller) {
                break;
            }
            $frames++;
        }
        $lines = explode("\n", $e->getTraceAsString());
        if ($frames >= count($lines) - 1) {
            return implode("\n", $lines);
        }
        return implode("\n", array_slice($lines, 0, $frames)) . ($frames > 0 ? "\n" : '') . "#{$frames} {main}";
    }

    /**
     * Sends an ERROR frame for the log about the request $requestId.
     *
     * @param \Throwable|array{type:int,message:string,file:string,line:int} $failure
     *        an uncaught exception, or a fatal error from fatalAtShutdown()
     */
    public static function send(
        Channel $channel,
        int $requestId,
        \Throwable|array $failure,
        string $method,
        string $uri,
    ): void {
        if ($failure instanceof \Throwable) {
            $fields = ['kind' => 'exception'] + self::describe($failure);
            $fields['code'] = (int) $fields['code'];
        } else {
            $fields = [
                'kind' => 'fatal',
                'class' => self::errorName($failure['type']),
                'message' => $failure['message'],
                'code' => 0,
                'file' => $failure['file'],
                'line' => $failure['line'],
                'trace' => '',
            ];
        }
        $fields['method'] = $method;
        $fields['uri'] = $uri;
        try {
            $channel->send(Frame::encode(Frame::ERROR, $requestId, Frame::fields($fields)));
        } catch (\Throwable) {
            // Hearth is gone; the log line below is all that is left.
            Log::write(sprintf(
                '%s: %s in %s:%d',
                $fields['class'],
                $fields['message'],
                $fields['file'],
                $fields['line'],
            ));
        }
    }

    /**
     * What PHP does itself with an uncaught exception: shows it in the
     * output when display_errors is on, and writes it to error_log when
     * log_errors is on and error_log names a file.
     */
    public static function showAsPhpWould(\Throwable $e): void
    {
        if (ini_get('display_errors')) {
            echo self::displayed($e);
        }
        $logFile = (string) ini_get('error_log');
        if ($logFile !== '' && ini_get('log_errors')) {
            error_log('PHP Fatal error:  ' . self::text($e));
        }
    }

    private static function text(\Throwable $e): string
    {
        return sprintf("Uncaught %s\n  thrown in %s on line %d", (string) $e, $e->getFile(), $e->getLine());
    }

    private static function displayed(\Throwable $e): string
    {
        if (ini_get('html_errors')) {
            return sprintf(
                "<br />\n<b>Fatal error</b>:  Uncaught %s\n  thrown in <b>%s</b> on line <b>%d</b><br />\n",
                htmlspecialchars((string) $e, ENT_QUOTES | ENT_SUBSTITUTE),
                htmlspecialchars($e->getFile(), ENT_QUOTES | ENT_SUBSTITUTE),
                $e->getLine(),
            );
        }
        return "PHP Fatal error:  " . self::text($e) . "\n";
    }

    private static function errorName(int $type): string
    {
        return match ($type) {
            E_ERROR => 'E_ERROR',
            E_PARSE => 'E_PARSE',
            E_CORE_ERROR => 'E_CORE_ERROR',
            E_COMPILE_ERROR => 'E_COMPILE_ERROR',
            E_USER_ERROR => 'E_USER_ERROR',
            E_RECOVERABLE_ERROR => 'E_RECOVERABLE_ERROR',
            default => 'E_' . $type,
        };
    }
}
