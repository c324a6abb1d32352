<?php

declare(strict_types=1);

namespace Hearth\Internal;

/**
 * The loop of a job worker under `hearth run --php-bootstrap`: the app's
 * bootstrap file has run once; each CALL frame is one call of a PHP
 * function, answered with one RESULT frame.
 *
 * A job's return value goes back as JSON; what it printed goes back as its
 * output; an exception it throws goes back as a value (class, message,
 * code, file, line, trace). A job that calls exit, or hits a fatal error,
 * is answered from the shutdown function and the worker exits (Hearth
 * starts another).
 *
 * @internal
 */
final class JobRuntime
{
    private const JSON = JSON_THROW_ON_ERROR | JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE
        | JSON_PRESERVE_ZERO_FRACTION;

    private const FATAL_ERRORS = E_ERROR | E_PARSE | E_CORE_ERROR | E_COMPILE_ERROR
        | E_USER_ERROR | E_RECOVERABLE_ERROR;

    private bool $inJob = false;
    private int $jobId = 0;
    private int $baseLevel = 0;

    private function __construct(private readonly Channel $channel, private readonly int $maxPayload)
    {
    }

    /**
     * The job worker's entry point (`hearth run` writes the script that
     * calls it, after the app's bootstrap file).
     */
    public static function main(): void
    {
        $max = (int) getenv('HEARTH_MAX_PAYLOAD');
        // 64 MiB is the protocol's hard cap whatever Hearth asks for.
        $max = $max > 0 ? min($max, 67108864) : 16777216;
        self::run(Channel::fromEnvironment($max), $max);
    }

    /**
     * Serves jobs until Hearth says stop. Call it after the app's bootstrap.
     */
    public static function run(Channel $channel, int $maxPayload = 16777216): void
    {
        $runtime = new self($channel, $maxPayload);
        $runtime->boot();
        try {
            while (($request = $channel->receive()) !== null) {
                if (!$request->call) {
                    throw ProtocolError::unexpected(Frame::REQUEST, 'sent to a job worker');
                }
                $runtime->handle($request);
            }
        } catch (ProtocolError $e) {
            Runtime::log('protocol error on the Hearth channel, exiting: ' . $e->getMessage());
        }
    }

    private function boot(): void
    {
        Runtime::logStartupOutput('output of the bootstrap: ');
        ob_start();
        $this->baseLevel = ob_get_level();
        register_shutdown_function($this->onShutdown(...));
        putenv('HEARTH_PROTOCOL');
        putenv('HEARTH_MAX_PAYLOAD');
        putenv('HEARTH_RESPONSES');
        $this->channel->send(Frame::encode(Frame::READY, 0, Frame::fields([
            'protocol' => Frame::VERSION,
            'pid' => getmypid(),
            'php_version' => PHP_VERSION,
            'sapi' => PHP_SAPI,
            'library' => Runtime::LIBRARY_VERSION,
        ])));
    }

    private function handle(Request $request): void
    {
        $this->jobId = $request->id;
        $this->inJob = true;
        try {
            $fields = array_column(Frame::decodeFields($request->server), 1, 0);
            $function = $fields['function'] ?? '';
            $args = json_decode($fields['args'] ?? '[]', true, 512, JSON_THROW_ON_ERROR);
            if (!is_array($args)) {
                throw new \InvalidArgumentException('the job\'s args must be a JSON array or object');
            }
            if (!is_callable($function)) {
                throw new \BadFunctionCallException("{$function} is not callable (is it defined by the bootstrap?)");
            }
            // Called from this file, so arguments are checked as under
            // strict_types: a JSON 1 is no string.
            $value = \call_user_func_array($function, $args);
            try {
                $json = json_encode(['status' => 0, 'result' => $value], self::JSON);
            } catch (\JsonException $e) {
                throw new \UnexpectedValueException(
                    'the job returned a value that cannot be encoded as JSON: ' . $e->getMessage(),
                    0,
                    $e,
                );
            }
        } catch (\Throwable $e) {
            $json = self::failure(self::describe($e));
        }
        $this->inJob = false;
        $this->send($json, 0);
    }

    private function send(string $json, int $flags): void
    {
        // Buffers the job left open hold output too: fold them into ours.
        while (ob_get_level() > $this->baseLevel && @ob_end_flush()) {
        }
        $output = '';
        if (ob_get_level() === $this->baseLevel) {
            $output = (string) ob_get_contents();
            ob_clean();
        }
        while (ob_get_level() < $this->baseLevel) {
            ob_start();
        }
        // One frame carries the result: what does not fit in Hearth's
        // payload limit is cut (the output) or refused (the value).
        $room = $this->maxPayload - 64;
        if (strlen($json) > $room) {
            $json = self::failure([
                'class' => \LengthException::class,
                'message' => sprintf(
                    'the job returned %d bytes of JSON, more than the %d a result may carry',
                    strlen($json),
                    $room,
                ),
                'code' => 0,
                'file' => '',
                'line' => 0,
                'trace' => '',
            ]);
        }
        $printed = strlen($output);
        if ($printed > $room - strlen($json)) {
            $output = substr($output, 0, max(0, $room - strlen($json)));
        }
        $this->channel->send(Frame::encode(
            Frame::RESULT,
            $this->jobId,
            Frame::fields(['json' => $json, 'output' => $output, 'output_bytes' => $printed]),
            $flags,
        ));
    }

    private function onShutdown(): void
    {
        if (!$this->inJob) {
            return;
        }
        $this->inJob = false;
        @ini_set('memory_limit', '-1');
        $error = error_get_last();
        if ($error !== null && ($error['type'] & self::FATAL_ERRORS)) {
            $failure = [
                'class' => 'fatal error',
                'message' => $error['message'],
                'code' => $error['type'],
                'file' => $error['file'],
                'line' => $error['line'],
                'trace' => '',
            ];
        } else {
            $failure = [
                'class' => 'exit',
                'message' => 'the job called exit() or die(); its worker exits and is replaced',
                'code' => 0,
                'file' => '',
                'line' => 0,
                'trace' => '',
            ];
        }
        try {
            $this->send(self::failure($failure), Frame::FLAG_CLOSE);
        } catch (\Throwable $e) {
            Runtime::log('could not report the job\'s end while shutting down: ' . $e->getMessage());
        }
    }

    /**
     * @return array{class:string,message:string,code:int|string,file:string,line:int,trace:string}
     */
    private static function describe(\Throwable $e): array
    {
        return [
            'class' => $e::class,
            'message' => $e->getMessage(),
            'code' => $e->getCode(),
            'file' => $e->getFile(),
            'line' => $e->getLine(),
            'trace' => self::traceOfJob($e),
        ];
    }

    /**
     * The exception's trace down to the job's function: the frames of this
     * runtime below it are the same for every job and say nothing.
     */
    private static function traceOfJob(\Throwable $e): string
    {
        $frames = 0;
        foreach ($e->getTrace() as $frame) {
            if (($frame['class'] ?? '') === self::class) {
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

    /** @param array<string, mixed> $error */
    private static function failure(array $error): string
    {
        $flags = JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_INVALID_UTF8_SUBSTITUTE
            | JSON_PARTIAL_OUTPUT_ON_ERROR;
        return json_encode(['status' => 1, 'error' => $error], $flags)
            ?: '{"status":1,"error":{"class":"","message":"the job failed in a way that cannot be described"}}';
    }
}
