<?php

declare(strict_types=1);

namespace Hearth\Internal;

/**
 * The request loop of a worker process under Hearth.
 *
 * For each request it does what PHP's request startup and shutdown would:
 * fills the superglobals, captures output, runs the handler, collects
 * status, headers and body, writes the session, and then puts back what the
 * request changed (headers, output buffers, ini settings, timezone) so the
 * next client starts clean. ResponseHead makes the status and header lines,
 * Baseline keeps what each request starts from, and FailureReport reports
 * uncaught exceptions and fatal errors.
 *
 * @internal
 */
final class Runtime
{
    /**
     * Output beyond this many bytes is streamed instead of buffered, in
     * BODY frames of at most this size.
     */
    private const OUTPUT_CHUNK = 1048576;

    private const UNSERIALIZE = ['allowed_classes' => false];

    private static ?self $current = null;

    private int $requestId = 0;
    private bool $inRequest = false;
    /** The HEAD frame of the current response is already on its way. */
    private bool $headSent = false;
    /** The current response has been sent in full (fastcgi_finish_request()). */
    private bool $responseDone = false;
    /** The app removed the base output buffer; output escapes to stdout. */
    private bool $bufferLost = false;
    /** This worker exits after the current response. */
    private bool $closeAfter = false;
    /** @var array{0:int,1:list<string>}|null status and header lines set through the PSR-7 bridge */
    private ?array $explicitHead = null;
    private bool $sessionsUsed = false;
    /** The name of the session cookie begin() read, and the id it found there. */
    private ?string $presetSessionName = null;
    private ?string $presetSessionId = null;
    /** The app changed the session name during a request, which was logged. */
    private bool $sessionRenameLogged = false;
    private ResponseHead $head;

    /** @var array<string, string> */
    private array $env;
    private Baseline $baseline;
    /** The baseline's time limit, which begin() renews. */
    private int $timeLimit;
    private string $requestOrder;
    private bool $parsePost;
    private int $postMaxSize;
    /** Parts of a multipart body PHP parses at most, for its warning. */
    private int $partsLimit;
    private string $method = '';
    private string $uri = '';
    /**
     * The Hearth extension is loaded: PHP's own request startup builds the
     * request's globals (hearth_request_begin()), not this class.
     */
    private bool $native = false;
    /** The state check (`--check-state`), when Hearth asked for it. */
    private ?StateCheck $check = null;
    /** Hearth asked for a report on the worker in each final END (HEARTH_REPORT=1). */
    private bool $report = false;
    /**
     * memory_get_usage() once the last request (or the boot) had been
     * cleaned up: what the next final END reports.
     */
    private int $settled = 0;
    /** @var array<mixed> the worker's own $_SERVER, put back between requests */
    private array $ownServer = [];
    /** The route name the app gave the current request (Hearth\route_name()). */
    private ?string $routeName = null;

    private function __construct(private readonly Channel $channel)
    {
    }

    public static function current(): ?self
    {
        return self::$current;
    }

    /**
     * Runs $handler once per request until Hearth says stop.
     */
    public static function run(Channel $channel, callable $handler): void
    {
        $runtime = new self($channel);
        self::$current = $runtime;
        $check = StateCheck::requested();
        $runtime->boot();
        if ($check) {
            $runtime->check = StateCheck::start($handler, $runtime->baseline->everySetting);
        }
        try {
            while (($request = $channel->receive()) !== null) {
                $runtime->handle($handler, $request);
                if ($runtime->closeAfter) {
                    break;
                }
                $request = null;
                $runtime->settle();
            }
        } catch (ProtocolError $e) {
            Log::write('protocol error on the Hearth channel, exiting: ' . $e->getMessage());
        } finally {
            self::$current = null;
            ResponseHead::clearForExit();
        }
    }

    private function boot(): void
    {
        Log::startupOutput('output before Worker::serve(): ');
        $this->native = function_exists('hearth_request_begin') && get_cfg_var('hearth.native') !== '0';
        if (!$this->native) {
            // With the extension, PHP's own output layer makes each
            // response (hearth_response_begin()).
            ob_start($this->onOutput(...), self::OUTPUT_CHUNK);
        }
        register_shutdown_function($this->onShutdown(...));
        $this->baseline = new Baseline($this->native ? 0 : ob_get_level(), $this->native);
        $this->timeLimit = $this->baseline->timeLimit;

        $this->report = getenv('HEARTH_REPORT') === '1';
        $this->ownServer = $_SERVER;
        Channel::hideEnvironment();
        $this->env = getenv();
        $order = (string) ini_get('request_order');
        $this->requestOrder = $order !== '' ? $order : (string) ini_get('variables_order');
        $this->parsePost = (bool) ini_get('enable_post_data_reading');
        $this->postMaxSize = IniQuantity::bytes((string) ini_get('post_max_size'));
        $parts = ini_get('max_multipart_body_parts');
        $this->partsLimit = $parts === false || (int) $parts < 0
            ? (int) ini_get('max_input_vars') + (int) ini_get('max_file_uploads')
            : (int) $parts;
        $this->head = new ResponseHead((bool) ini_get('expose_php'));
        $this->head->reset();
        $tmpDir = ini_get('upload_tmp_dir') ?: sys_get_temp_dir();

        $this->channel->send(Frame::ready([
            'post_max_size' => (string) ini_get('post_max_size'),
            'upload_max_filesize' => (string) ini_get('upload_max_filesize'),
            'max_file_uploads' => (string) ini_get('max_file_uploads'),
            'max_input_vars' => (string) ini_get('max_input_vars'),
            'max_multipart_body_parts' => (string) ini_get('max_multipart_body_parts'),
            'file_uploads' => (bool) ini_get('file_uploads'),
            'enable_post_data_reading' => $this->parsePost,
            'upload_tmp_dir' => $tmpDir,
            'body_files' => InputStream::canRead($tmpDir),
            'native' => $this->native,
        ]));
        $this->settled = memory_get_usage();
    }

    private function handle(callable $handler, Request $request): void
    {
        $this->begin($request);
        $this->check?->beforeHandler();
        try {
            $handler();
        } catch (\Throwable $e) {
            $this->uncaught($e);
        }
        if ($this->native) {
            // The shutdown functions the request registered run now, as at
            // the end of a PHP request, and their output is the response's.
            try {
                \hearth_request_shutdown_functions();
            } catch (\Throwable $e) {
                $this->uncaught($e);
            }
        }
        $this->check?->afterHandler();
        $this->finish(0);
        $this->check?->afterRequest($this->method, $this->uri);
    }

    private function begin(Request $request): void
    {
        if ($this->native) {
            // Before the request's variables, as PHP starts its output
            // layer before them.
            \hearth_response_begin($request->id);
            // Only now: the last response's headers were sent, and PHP
            // keeps sent headers as they are.
            $this->head->reset();
        } elseif (ob_get_length()) {
            // Printed between requests (a destructor, a shutdown of a library).
            self::log('output between requests: ' . rtrim((string) ob_get_contents()));
            ob_clean();
        }
        $server = unserialize($request->server, self::UNSERIALIZE);
        if (!is_array($server)) {
            throw ProtocolError::malformed('request: not a serialized array');
        }
        $this->requestId = $request->id;
        $this->method = (string) ($server['REQUEST_METHOD'] ?? '');
        $this->uri = (string) ($server['REQUEST_URI'] ?? '');
        $params = $server;
        if (isset($server['HTTP_AUTHORIZATION'])) {
            $server += self::authVariables($server['HTTP_AUTHORIZATION']);
        }
        if ($this->native && $request->form === null) {
            \hearth_request_begin(
                $params,
                $this->env === [] ? $server : $server + $this->env,
                $request->body,
                $request->bodyFile,
            );
        } else {
            $this->globals($request, $server);
        }

        $this->presetSessionName = null;
        $this->presetSessionId = null;
        if ($this->sessionsUsed) {
            // session_start() reads $_COOKIE[session_name()] only while no
            // id is set at all. After a worker's first session one always
            // is: the previous request's, or the empty id session_id('')
            // leaves, which starts a new session without a look at the
            // cookie (only the end of a PHP request unsets it). So the id
            // is set here from this request's cookie, under the name in
            // force now: the app's, kept from its boot or earlier requests.
            $name = session_name();
            $cookie = $_COOKIE[$name] ?? null;
            $this->presetSessionName = $name;
            $this->presetSessionId = is_string($cookie) && $cookie !== '' ? $cookie : null;
            session_id($this->presetSessionId ?? '');
            if ($this->native && $this->presetSessionId !== null) {
                \hearth_response_drop_header(ResponseHead::sessionCookie($name, $this->presetSessionId));
            }
        }
        if ($this->timeLimit > 0) {
            $this->renewTimeLimit();
        }
        $this->headSent = false;
        $this->responseDone = false;
        $this->explicitHead = null;
        $this->inRequest = true;
    }

    /**
     * The request's globals made by this library, where the Hearth
     * extension is not loaded (see docs/compatibility.md for what differs).
     *
     * @param array<string, mixed> $server
     */
    private function globals(Request $request, array $server): void
    {
        $_SERVER = $this->env === [] ? $server : $server + $this->env;
        $_GET = [];
        if (($server['QUERY_STRING'] ?? '') !== '') {
            parse_str($server['QUERY_STRING'], $_GET);
        }
        $_COOKIE = isset($server['HTTP_COOKIE']) ? Globals::cookies($server['HTTP_COOKIE']) : [];
        $_POST = [];
        $_FILES = [];
        if ($request->form !== null || $request->body !== '' || $request->bodyFile !== null) {
            $this->body($request, $server);
        }
        $_REQUEST = $_POST === [] && $this->requestOrder === 'GP'
            ? $_GET
            : Globals::request($this->requestOrder, $_GET, $_POST, $_COOKIE);
    }

    /** @param array<string, mixed> $server */
    private function body(Request $request, array $server): void
    {
        $isPost = $this->method === 'POST';
        $contentType = (string) ($server['CONTENT_TYPE'] ?? '');
        $length = (int) ($server['CONTENT_LENGTH'] ?? 0);
        // post_max_size keeps PHP from parsing a POST, not the app from
        // reading it: php://input still holds the whole body.
        $overLimit = $isPost && $this->parsePost && $this->postMaxSize > 0 && $length > $this->postMaxSize;
        if ($overLimit) {
            trigger_error(sprintf(
                // PHP's multipart parser says it without the prefix.
                '%sPOST Content-Length of %d bytes exceeds the limit of %d bytes',
                self::isMultipart($contentType) ? '' : 'PHP Request Startup: ',
                $length,
                $this->postMaxSize,
            ), E_USER_WARNING);
        }
        if ($request->form !== null) {
            $entries = unserialize($request->form, self::UNSERIALIZE);
            if (is_array($entries)) {
                [$_POST, $_FILES, $uploaded] = Globals::form($entries);
                Uploads::accept($uploaded);
            }
            // What PHP's multipart parser says when it stops (without the
            // prefix for files, as it does).
            if (($request->formFlags & Frame::FLAG_UPLOADS_LIMIT) !== 0) {
                trigger_error('Maximum number of allowable file uploads has been exceeded', E_USER_WARNING);
            }
            if (($request->formFlags & Frame::FLAG_PARTS_LIMIT) !== 0) {
                trigger_error(sprintf(
                    'PHP Request Startup: Multipart body parts limit exceeded %d. '
                    . 'To increase the limit change max_multipart_body_parts in php.ini.',
                    $this->partsLimit,
                ), E_USER_WARNING);
            }
            return;
        }
        InputStream::install($request->body, $request->bodyFile);
        if (!$overLimit && $isPost && $this->parsePost && self::isUrlEncoded($contentType)) {
            parse_str(InputStream::contents(), $_POST);
        }
    }

    /**
     * Ends the current request: sends what it produced and resets state.
     *
     * @param int $flags END flags (Frame::FLAG_CLOSE when the worker exits)
     */
    public function finish(int $flags): void
    {
        if (!$this->inRequest) {
            return;
        }
        $flags |= $this->closeAfter || $this->bufferLost ? Frame::FLAG_CLOSE : 0;
        if (!$this->responseDone) {
            $this->sendResponse($flags);
        } else {
            // After fastcgi_finish_request() the response is out; this END
            // tells Hearth the worker is free again.
            $this->closeSession();
            $this->channel->send($this->endFrame($flags));
        }
        $this->inRequest = false;
        $this->reset();
    }

    /**
     * Sends the response now and lets the handler go on without a client
     * (fastcgi_finish_request()). Output after this point is discarded.
     */
    public function finishEarly(): bool
    {
        if (!$this->inRequest || $this->responseDone) {
            return false;
        }
        $this->sendResponse(Frame::FLAG_DETACHED);
        return true;
    }

    private function sendResponse(int $flags): void
    {
        if ($this->native) {
            // As at the end of a PHP request: every buffer ends into the
            // response, the session is written, the response ends.
            \hearth_response_output_end();
            if (!($flags & Frame::FLAG_DETACHED)) {
                $this->closeSession();
            }
            $this->responseDone = true;
            $ended = $this->report && !($flags & Frame::FLAG_DETACHED)
                ? \hearth_response_end($flags | Frame::FLAG_REPORT, Frame::report($this->settled, $this->routeName))
                : \hearth_response_end($flags);
            if (!$ended) {
                throw new \RuntimeException('writing to Hearth failed: the channel is closed');
            }
            return;
        }
        if (!$this->baseline->flushAppBuffers()) {
            $this->closeAfter = true;
            if (!($flags & Frame::FLAG_DETACHED)) {
                $flags |= Frame::FLAG_CLOSE;
            }
        }
        if (!($flags & Frame::FLAG_DETACHED)) {
            // The session is written before the response leaves, so the
            // client's next request sees it. (A detached request may still
            // change it: it is written when the request ends.)
            $this->closeSession();
        }
        $body = $this->bufferLost ? '' : (string) ob_get_contents();
        if ($body !== '') {
            ob_clean();
        }
        $out = $this->headSent ? '' : $this->headFrame();
        if ($body !== '') {
            $out .= Frame::bodies($this->requestId, $body);
        }
        $out .= $flags & Frame::FLAG_DETACHED
            ? Frame::encode(Frame::END, $this->requestId, '', $flags)
            : $this->endFrame($flags);
        $this->responseDone = true;
        $this->headSent = true;
        $this->channel->send($out);
    }

    private function closeSession(): void
    {
        $active = session_status() === PHP_SESSION_ACTIVE;
        if ($active) {
            session_write_close();
        }
        if ($this->presetSessionName !== null && session_name() !== $this->presetSessionName) {
            $this->sessionRenamed($active);
        }
        // A session closed early (session_write_close(), read_and_close)
        // leaves its id set too: the next request must not start with it.
        if (session_id() !== '') {
            $this->sessionsUsed = true;
        }
    }

    /**
     * The app changed the session name after begin() had taken the session
     * id from the cookie of the previous name: a session it started got
     * that id (or a new one), not the one in the cookie of the new name.
     * From the next request on the new name is used, so an app that names
     * its session the same way on every request only renames it in the
     * first request after boot that used a session, which is not affected.
     */
    private function sessionRenamed(bool $active): void
    {
        $started = $active || session_id() !== ($this->presetSessionId ?? '');
        if (!$started || $this->sessionRenameLogged) {
            return;
        }
        $this->sessionRenameLogged = true;
        Log::write(sprintf(
            'the app changed the session name from %1$s to %2$s during the request, after the worker had read '
            . 'the session id from the %1$s cookie: the %2$s cookie was not read. A worker reads the cookie of '
            . 'the name in force when a request begins: set the session name at boot, before Worker::serve(), '
            . 'or the same on every request (logged once per worker; %3$s %4$s)',
            $this->presetSessionName,
            session_name(),
            $this->method,
            $this->uri,
        ));
    }

    private function headFrame(int $flags = 0): string
    {
        $payload = $this->head->payload($this->explicitHead, $this->presetSessionName, $this->presetSessionId);
        return Frame::encode(Frame::HEAD, $this->requestId, $payload, $flags);
    }

    /**
     * Output handler of the base buffer: output the app flushes explicitly
     * (ob_flush(), or past OUTPUT_CHUNK bytes) is streamed to Hearth.
     */
    private function onOutput(string $buffer, int $phase): string
    {
        if ($phase & PHP_OUTPUT_HANDLER_FINAL && $this->inRequest) {
            $this->bufferLost = true;
            Log::write(sprintf(
                'the app removed the output buffer Hearth captures responses with (ob_end_*() at level %d); '
                . 'output after this point is lost and the worker will be replaced (%s %s)',
                $this->baseline->outputLevel,
                $this->method,
                $this->uri,
            ));
        }
        if ($buffer === '' || $phase & PHP_OUTPUT_HANDLER_CLEAN) {
            return '';
        }
        if (!$this->inRequest || $this->responseDone) {
            if (!$this->inRequest) {
                Log::write('output between requests: ' . rtrim($buffer));
            }
            return '';
        }
        $this->stream($buffer);
        return '';
    }

    /**
     * Sends $buffer as BODY frames, after the head if it has not gone yet.
     *
     * One write of a large string (`echo str_repeat('x', 30000000)`) comes
     * here whole: PHP has copied it into the base buffer and again into
     * $buffer, and that is as much as it may cost. So it leaves in frames
     * of OUTPUT_CHUNK bytes, each built and written in turn, never as one
     * string of frames (which, with the copies, killed a worker at 30 MB
     * under a 128M memory_limit).
     */
    private function stream(string $buffer): void
    {
        $length = strlen($buffer);
        $head = '';
        if (!$this->headSent) {
            $head = $this->headFrame(Frame::FLAG_STREAM);
            $this->headSent = true;
        }
        if ($length <= self::OUTPUT_CHUNK) {
            $this->channel->send($head . Frame::encode(Frame::BODY, $this->requestId, $buffer));
            return;
        }
        if ($head !== '') {
            $this->channel->send($head);
        }
        for ($at = 0; $at < $length; $at += self::OUTPUT_CHUNK) {
            $this->channel->send(
                Frame::encode(Frame::BODY, $this->requestId, substr($buffer, $at, self::OUTPUT_CHUNK)),
            );
        }
    }

    /**
     * Gives back the memory of a base buffer that a large write grew: PHP
     * keeps an output buffer as large as the largest write it held, for
     * the buffer's life, which is the worker's; php-fpm frees it when the
     * request ends.
     */
    private function shrinkOutputBuffer(): void
    {
        if (ob_get_level() !== $this->baseline->outputLevel) {
            return;
        }
        if ((ob_get_status()['buffer_size'] ?? 0) <= 2 * self::OUTPUT_CHUNK) {
            return;
        }
        // Between requests the handler takes this for what it is.
        ob_end_clean();
        ob_start($this->onOutput(...), self::OUTPUT_CHUNK);
    }

    private function uncaught(\Throwable $e): void
    {
        $e = FailureReport::offerToHandler($e);
        if ($e === null) {
            return;
        }
        FailureReport::send($this->channel, $this->requestId, $e, $this->method, $this->uri);
        if (!$this->headersGone() && self::failureIs500()) {
            http_response_code(500);
        }
        FailureReport::showAsPhpWould($e);
    }

    private function onShutdown(): void
    {
        if (!$this->inRequest) {
            return;
        }
        // exit or a fatal error in the handler: PHP is shutting down, so
        // answer this request and let Hearth start a new worker.
        $error = FailureReport::fatalAtShutdown();
        if ($error !== null) {
            FailureReport::send($this->channel, $this->requestId, $error, $this->method, $this->uri);
            if (!$this->headersGone() && self::failureIs500()) {
                http_response_code(500);
            }
        }
        if ($this->native && !$this->responseDone) {
            // The request's own shutdown functions would run after this
            // one, the worker's; their output is the response's.
            try {
                \hearth_request_shutdown_functions();
            } catch (\Throwable $e) {
                $this->uncaught($e);
            }
        }
        $this->closeAfter = true;
        try {
            $this->finish(Frame::FLAG_CLOSE);
        } catch (\Throwable $e) {
            Log::write('could not deliver the response while shutting down: ' . $e->getMessage());
        }
        ResponseHead::clearForExit();
    }

    /**
     * Lets go of what the request brought and measures what it left
     * behind, for the next END's report. The request's frame is gone by
     * now; its input arrays go too (the next request makes its own) and
     * $_SERVER is the worker's own again, as after the extension's request
     * end, so that a long query or a large form is not counted as growth
     * of its route.
     */
    private function settle(): void
    {
        if (!$this->native) {
            $_GET = $_POST = $_COOKIE = $_FILES = $_REQUEST = [];
            $_SERVER = $this->ownServer;
        }
        $this->method = $this->uri = '';
        $this->settled = memory_get_usage();
    }

    /** The final END of the current request, with the report Hearth asked for. */
    private function endFrame(int $flags): string
    {
        if (!$this->report) {
            return Frame::encode(Frame::END, $this->requestId, '', $flags);
        }
        return Frame::encode(
            Frame::END,
            $this->requestId,
            Frame::report($this->settled, $this->routeName),
            $flags | Frame::FLAG_REPORT,
        );
    }

    /**
     * Names the current request's route (Hearth\route_name()): Hearth
     * counts its memory growth under this name instead of its path.
     */
    public function nameRoute(string $name): void
    {
        if ($this->inRequest) {
            $this->routeName = $name;
        }
    }

    /** Puts back what the request changed, so the next one starts clean. */
    private function reset(): void
    {
        if ($this->native) {
            // hearth_response_end() ended every buffer.
        } elseif (!$this->baseline->discardAppBuffers() || $this->bufferLost) {
            $this->closeAfter = true;
        } else {
            $this->shrinkOutputBuffer();
        }
        if ($this->native) {
            \hearth_request_end();
        } else {
            $this->head->reset();
        }
        if (InputStream::isInstalled()) {
            InputStream::uninstall();
        }
        Uploads::clear();
        $this->routeName = null;
        $_SESSION = [];
        $this->baseline->restore();
    }

    /**
     * Whether a fatal error (an uncaught exception included) turns the
     * response into a 500, as PHP decides it (php_error_cb()): only when
     * errors are not displayed and the app has not set a status of its
     * own. With display_errors on, php-fpm answers 200 with the error text.
     */
    private static function failureIs500(): bool
    {
        $display = strtolower(trim((string) ini_get('display_errors')));
        $displayed = !in_array($display, ['', '0', 'off', 'no', 'false', 'none'], true);
        return !$displayed && http_response_code() === 200;
    }

    /** Whether the response's head has gone, and header() no longer counts. */
    private function headersGone(): bool
    {
        return $this->native ? headers_sent() : $this->headSent;
    }

    /** begin() renews the time limit through this. */
    private function renewTimeLimit(): void
    {
        $this->baseline->renewTimeLimit();
    }

    /**
     * Sends a 103 Early Hints response with these `Link` values ahead of
     * the response (Hearth\early_hints(), headers_send(103)). False when
     * the response's head has gone already, or no value is a valid header
     * value.
     *
     * @param list<string> $links
     */
    public function earlyHints(array $links): bool
    {
        if (!$this->inRequest || $this->responseDone || $this->headersGone()) {
            return false;
        }
        $lines = [];
        foreach ($links as $link) {
            $link = trim($link, " \t");
            // What header() refuses, and what would break the head's lines.
            if ($link !== '' && strpbrk($link, "\r\n\0") === false) {
                $lines[] = 'Link: ' . $link;
            }
        }
        if ($lines === []) {
            return false;
        }
        $this->channel->send(
            Frame::encode(Frame::HEAD, $this->requestId, Frame::head(103, $lines), Frame::FLAG_INTERIM),
        );
        return true;
    }

    public function requestClose(): void
    {
        $this->closeAfter = true;
    }

    /**
     * Sets the head of a PSR-7 response: its status, and its header lines
     * added to those header(), setcookie() and session_start() set while
     * the handler ran, as Psr7Worker::emit() sends them under php-fpm
     * (header($line, false)). A PSR-7 app's PHP session keeps its cookie.
     *
     * @param list<string> $lines
     */
    public function setHead(int $status, array $lines): void
    {
        if ($this->native) {
            // PHP's own head: header() as the PSR-7 emitter calls it.
            http_response_code($status);
            foreach ($lines as $line) {
                header($line, false);
            }
            return;
        }
        $this->explicitHead = [$status, $lines];
    }

    /** begin() logs through this. */
    private static function log(string $message): void
    {
        Log::write($message);
    }

    /**
     * What PHP's SAPI layer derives from an Authorization header.
     *
     * @return array<string, string>
     */
    private static function authVariables(string $authorization): array
    {
        if (strncasecmp($authorization, 'Basic ', 6) === 0) {
            $decoded = base64_decode(substr($authorization, 6), false);
            if ($decoded !== false && str_contains($decoded, ':')) {
                [$user, $password] = explode(':', $decoded, 2);
                return ['PHP_AUTH_USER' => $user, 'PHP_AUTH_PW' => $password];
            }
            return [];
        }
        if (strncasecmp($authorization, 'Digest ', 7) === 0) {
            return ['PHP_AUTH_DIGEST' => substr($authorization, 7)];
        }
        return [];
    }

    private static function isUrlEncoded(string $contentType): bool
    {
        return self::mediaType($contentType) === 'application/x-www-form-urlencoded';
    }

    private static function isMultipart(string $contentType): bool
    {
        return self::mediaType($contentType) === 'multipart/form-data';
    }

    private static function mediaType(string $contentType): string
    {
        $semicolon = strpos($contentType, ';');
        return strtolower(trim($semicolon === false ? $contentType : substr($contentType, 0, $semicolon)));
    }
}
