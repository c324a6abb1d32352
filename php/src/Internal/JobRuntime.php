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

    private bool $inJob = false;
    private int $jobId = 0;
    private int $baseLevel = 0;

    private function __construct(private readonly Channel $channel)
    {
    }

    /**
     * The job worker's entry point (`hearth run` writes the script that
     * calls it, after the app's bootstrap file).
     */
    public static function main(): void
    {
        self::run(Channel::fromEnvironment());
    }

    /**
     * Serves jobs until Hearth says stop. Call it after the app's bootstrap.
     */
    public static function run(Channel $channel): void
    {
        $runtime = new self($channel);
        $runtime->boot();
        try {
            while (($request = $channel->receive()) !== null) {
                if (!$request->call) {
                    throw ProtocolError::unexpected(Frame::REQUEST, 'sent to a job worker');
                }
                $runtime->handle($request);
            }
        } catch (ProtocolError $e) {
            Log::write('protocol error on the Hearth channel, exiting: ' . $e->getMessage());
        }
    }

    private function boot(): void
    {
        Log::startupOutput('output of the bootstrap: ');
        ob_start();
        $this->baseLevel = ob_get_level();
        register_shutdown_function($this->onShutdown(...));
        Channel::hideEnvironment();
        $this->channel->send(Frame::ready());
    }

    private function handle(Request $request): void
    {
        $this->jobId = $request->id;
        $this->inJob = true;
        $fields = [];
        try {
            $fields = array_column(Frame::decodeFields($request->server), 1, 0);
            self::exposeJob($fields);
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
            $json = self::failure(FailureReport::describe($e, FailureReport::traceBelow($e, self::class)));
        } finally {
            unset($_SERVER['HEARTH_JOB_ID'], $_SERVER['HEARTH_JOB_ATTEMPT']);
        }
        $this->inJob = false;
        $this->send($json, 0);
    }

    /**
     * A job taken from a queue (`hearth work`) sees its id and attempt in
     * `$_SERVER['HEARTH_JOB_ID']` and `['HEARTH_JOB_ATTEMPT']` during the
     * call, as a shell task sees them in its environment, to make its
     * effect idempotent; a call without them (`hearth run`, a call through
     * `hearth work --listen`) sees neither.
     *
     * @param array<string, string> $fields
     */
    private static function exposeJob(array $fields): void
    {
        unset($_SERVER['HEARTH_JOB_ID'], $_SERVER['HEARTH_JOB_ATTEMPT']);
        if (isset($fields['job_id'], $fields['job_attempt'])) {
            $_SERVER['HEARTH_JOB_ID'] = $fields['job_id'];
            $_SERVER['HEARTH_JOB_ATTEMPT'] = $fields['job_attempt'];
        }
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
        $room = $this->channel->maxPayload - 64;
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
        $error = FailureReport::fatalAtShutdown();
        if ($error !== null) {
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
            Log::write('could not report the job\'s end while shutting down: ' . $e->getMessage());
        }
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
