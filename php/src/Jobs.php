<?php

declare(strict_types=1);

namespace Hearth;

use Hearth\Internal\FailureReport;
use Hearth\Internal\Frame;
use Hearth\Internal\ProtocolError;

/**
 * Calls a PHP function in a warm job worker of `hearth work --listen
 * unix:PATH` and returns its value: the app booted once there, so a heavy
 * call (a PDF, a report, a model) costs its own work, not a boot.
 *
 *     Hearth\Jobs::useSocket('unix:/run/app/jobs.sock');   // or HEARTH_JOBS_SOCKET in the environment
 *     $pdf = Hearth\Jobs::call('App\Pdf::render', [$invoiceId], timeout: 5);
 *
 * Works from any PHP process: php-fpm, the CLI, a Hearth worker. The
 * arguments and the value travel as JSON (objects come back as arrays). A
 * function that throws, exits or dies throws a JobError here with the
 * remote class, message, file, line and trace.
 *
 * When no listener answers (its socket file is absent, or nothing accepts
 * on it: hearth work is stopped or restarting), the function runs in this
 * process instead, as it would in the worker: its arguments and value go
 * through JSON all the same, what it prints is dropped, and what it throws
 * comes as a JobError. `fallback: false` throws a JobError then instead.
 * A listener that answers but cannot take the call (busy, past its time
 * limit, stopping) throws a JobError: the call does not run twice.
 */
final class Jobs
{
    /** The largest call (function name and JSON arguments) a listener takes. */
    public const MAX_CALL = 1 << 20;

    /** The largest answer read back. */
    private const MAX_ANSWER = 64 << 20;

    /** A connection unused for this long is not reused: the listener closes idle ones after 60 s. */
    private const REUSE_FOR = 30.0;

    /** How long past the call's timeout to wait for the listener's own answer, which says more. */
    private const ANSWER_GRACE = 1.0;

    private const JSON = JSON_THROW_ON_ERROR | JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE
        | JSON_PRESERVE_ZERO_FRACTION;

    private static ?string $socket = null;

    /** @var array<string, array{0: resource, 1: float}> open connections by socket path, with their last use */
    private static array $connections = [];

    private static int $lastId = 0;

    private function __construct()
    {
    }

    /**
     * Where calls go from now on: 'unix:/path/to.sock' (hearth work's
     * --listen), or null for the HEARTH_JOBS_SOCKET environment variable.
     */
    public static function useSocket(?string $address): void
    {
        if ($address !== null) {
            self::path($address);
        }
        self::$socket = $address;
    }

    /**
     * Calls $function with $args in a warm job worker and returns its value.
     *
     * @param string $function a function or static method the worker's bootstrap can call ('App\Pdf::render')
     * @param array<int|string, mixed> $args positional arguments, or named ones (string keys); JSON-encodable
     * @param float $timeout seconds the call may take, the wait for a free worker included; past it the
     *                       worker running it is stopped and replaced, and a JobError (timedOut) is thrown
     * @param bool $fallback run the function in this process when no listener answers
     * @param string|null $socket 'unix:PATH'; null: the one given to useSocket(), or HEARTH_JOBS_SOCKET
     *
     * @throws JobError when the function threw, exited or died, or the call could not be made
     * @throws \InvalidArgumentException when the arguments cannot be encoded as JSON
     * @throws \LengthException when the call is larger than MAX_CALL
     */
    public static function call(
        string $function,
        array $args = [],
        float $timeout = 30.0,
        bool $fallback = true,
        ?string $socket = null,
    ): mixed {
        if ($function === '') {
            throw new \InvalidArgumentException('Jobs::call() needs the name of a function to call');
        }
        if (!($timeout > 0)) {
            throw new \InvalidArgumentException("Jobs::call()'s timeout must be above 0 seconds, not {$timeout}");
        }
        try {
            $json = json_encode($args, self::JSON);
        } catch (\JsonException $e) {
            throw new \InvalidArgumentException(
                "the arguments of {$function} cannot be encoded as JSON: " . $e->getMessage(),
                0,
                $e,
            );
        }
        $address = $socket ?? self::$socket ?? (getenv('HEARTH_JOBS_SOCKET') ?: null);
        if ($address === null || $address === '') {
            if ($fallback) {
                return self::runHere($function, $json);
            }
            throw self::failure(
                'no listener is configured for Jobs::call(): give Jobs::useSocket() or HEARTH_JOBS_SOCKET '
                . 'the socket of hearth work --listen',
            );
        }
        $path = self::path($address);
        $payload = Frame::fields([
            'function' => $function,
            'args' => $json,
            'timeout_ms' => (int) ceil($timeout * 1000),
        ]);
        if (strlen($payload) > self::MAX_CALL) {
            throw new \LengthException(sprintf(
                'the call of %s is %d bytes, more than the %d a listener takes',
                $function,
                strlen($payload),
                self::MAX_CALL,
            ));
        }
        $stream = self::connect($path, $timeout);
        if ($stream === null) {
            if ($fallback) {
                return self::runHere($function, $json);
            }
            throw self::failure("no hearth work listens on unix:{$path} (the socket is absent or refuses)");
        }
        $id = self::$lastId = (self::$lastId % 0x7fffffff) + 1;
        if (!self::write($stream, Frame::encode(Frame::CALL, $id, $payload))) {
            // The listener closed this connection before reading anything
            // (it restarted, or dropped it): the call did not run; one new
            // connection is tried.
            self::forget($path);
            $stream = self::connect($path, $timeout);
            if ($stream === null || !self::write($stream, Frame::encode(Frame::CALL, $id, $payload))) {
                self::forget($path);
                if ($fallback && $stream === null) {
                    return self::runHere($function, $json);
                }
                throw self::failure("could not send the call to hearth work at unix:{$path}");
            }
        }
        $answer = self::read($stream, $path, $id, microtime(true) + $timeout + self::ANSWER_GRACE, $timeout);
        self::$connections[$path] = [$stream, microtime(true)];
        return self::result($answer);
    }

    /**
     * Closes the connections this process holds (they are reused between
     * calls, and closed at its end anyway).
     */
    public static function close(): void
    {
        foreach (array_keys(self::$connections) as $path) {
            self::forget($path);
        }
    }

    private static function path(string $address): string
    {
        if (!str_starts_with($address, 'unix:') || strlen($address) <= 5) {
            throw new \InvalidArgumentException(
                "a Jobs::call() socket is unix:PATH, as given to hearth work --listen, not {$address}",
            );
        }
        return substr($address, 5);
    }

    /**
     * An open connection to the listener at $path, or null when none
     * listens there (no socket file, or nothing accepts on it).
     *
     * @return resource|null
     */
    private static function connect(string $path, float $timeout)
    {
        $held = self::$connections[$path] ?? null;
        if ($held !== null) {
            if (microtime(true) - $held[1] < self::REUSE_FOR && !feof($held[0])) {
                return $held[0];
            }
            self::forget($path);
        }
        $errno = 0;
        $errstr = '';
        $stream = @stream_socket_client('unix://' . $path, $errno, $errstr, $timeout);
        if ($stream === false) {
            // ENOENT: no socket file; ECONNREFUSED: nobody accepts on it.
            if ($errno === 2 || $errno === 111 || !file_exists($path)) {
                return null;
            }
            $hint = $errno === 13 ? '; give this process\'s user access to the socket (hearth work --listen-mode)' : '';
            throw self::failure("cannot connect to hearth work at unix:{$path}: {$errstr} (errno {$errno}){$hint}");
        }
        stream_set_blocking($stream, true);
        self::$connections[$path] = [$stream, microtime(true)];
        return $stream;
    }

    private static function forget(string $path): void
    {
        if (isset(self::$connections[$path])) {
            @fclose(self::$connections[$path][0]);
            unset(self::$connections[$path]);
        }
    }

    /** @param resource $stream */
    private static function write($stream, string $bytes): bool
    {
        $at = 0;
        $len = strlen($bytes);
        while ($at < $len) {
            $n = @fwrite($stream, $at === 0 ? $bytes : substr($bytes, $at));
            if ($n === false || $n === 0) {
                return false;
            }
            $at += $n;
        }
        return true;
    }

    /**
     * The listener's answer to call $id: its JSON, decoded.
     *
     * @param resource $stream
     * @return array<string, mixed>
     */
    private static function read($stream, string $path, int $id, float $deadline, float $timeout): array
    {
        $header = self::readExactly($stream, Frame::HEADER_LEN, $path, $deadline, $timeout);
        try {
            [$kind, , $answerId, $length] = Frame::header($header, 0, self::MAX_ANSWER);
        } catch (ProtocolError $e) {
            self::forget($path);
            throw self::failure("hearth work at unix:{$path} answered in a way this library cannot read: "
                . $e->getMessage());
        }
        $payload = $length > 0 ? self::readExactly($stream, $length, $path, $deadline, $timeout) : '';
        $fields = array_column(Frame::decodeFields($payload), 1, 0);
        if ($kind === Frame::ERROR) {
            self::forget($path);
            $why = $fields['message'] ?? 'no reason given';
            throw self::failure("hearth work at unix:{$path} refused the call: {$why}");
        }
        if ($kind !== Frame::RESULT || $answerId !== $id) {
            self::forget($path);
            throw self::failure("hearth work at unix:{$path} answered another call ({$answerId}, not {$id})");
        }
        try {
            $answer = json_decode($fields['json'] ?? '', true, 512, JSON_THROW_ON_ERROR | JSON_BIGINT_AS_STRING);
        } catch (\JsonException $e) {
            throw self::failure("hearth work at unix:{$path} sent an answer that is not JSON: " . $e->getMessage());
        }
        if (!is_array($answer)) {
            throw self::failure("hearth work at unix:{$path} sent an answer that is not a JSON object");
        }
        return $answer;
    }

    /** @param resource $stream */
    private static function readExactly($stream, int $length, string $path, float $deadline, float $timeout): string
    {
        $data = '';
        while (strlen($data) < $length) {
            $left = $deadline - microtime(true);
            if ($left <= 0) {
                // Its answer may still come: this connection is not reused.
                self::forget($path);
                throw new JobError(
                    '',
                    sprintf(
                        'no answer from hearth work at unix:%s within the call\'s timeout of %.3fs',
                        $path,
                        $timeout,
                    ),
                    0,
                    '',
                    0,
                    '',
                    null,
                    null,
                    true,
                );
            }
            stream_set_timeout($stream, (int) $left, (int) (($left - (int) $left) * 1e6));
            $chunk = @fread($stream, min(65536, $length - strlen($data)));
            if ($chunk === false || ($chunk === '' && feof($stream))) {
                self::forget($path);
                throw self::failure("hearth work at unix:{$path} closed the connection before it answered "
                    . '(did it stop or die while running the call?)');
            }
            $data .= $chunk;
        }
        return $data;
    }

    /**
     * The value of a call, from its answer.
     *
     * @param array<string, mixed> $answer
     */
    private static function result(array $answer): mixed
    {
        if (($answer['status'] ?? null) === 0) {
            return $answer['result'] ?? null;
        }
        throw JobError::fromResult($answer);
    }

    /**
     * The fallback: the call, run in this process as a job worker runs it.
     */
    private static function runHere(string $function, string $json): mixed
    {
        $args = json_decode($json, true, 512, JSON_THROW_ON_ERROR);
        $level = ob_get_level();
        ob_start();
        try {
            if (!is_callable($function)) {
                throw new \BadFunctionCallException("{$function} is not callable (is it loaded in this process?)");
            }
            $value = \call_user_func_array($function, $args);
            try {
                $json = json_encode($value, self::JSON);
                return json_decode($json, true, 512, JSON_THROW_ON_ERROR | JSON_BIGINT_AS_STRING);
            } catch (\JsonException $e) {
                throw new \UnexpectedValueException(
                    'the job returned a value that cannot be encoded as JSON: ' . $e->getMessage(),
                    0,
                    $e,
                );
            }
        } catch (\Throwable $e) {
            throw JobError::fromThrowable($e, FailureReport::traceBelow($e, self::class));
        } finally {
            while (ob_get_level() > $level) {
                ob_end_clean();
            }
        }
    }

    private static function failure(string $message): JobError
    {
        return new JobError('', $message, 0, '', 0, '', null);
    }
}
