<?php

declare(strict_types=1);

namespace Hearth\Internal;

/**
 * What every request starts from: the settings, timezone and time limit
 * the worker had once the app booted, and the output buffer the runtime
 * captures responses with. After each request, what the app changed is put
 * back, as php-fpm starts every request from php.ini; but the session
 * settings, which apps configure once, stay as the app set them.
 *
 * @internal
 */
final class Baseline
{
    /**
     * Settings apps change at runtime for a request (ini_set(),
     * error_reporting(), set_include_path()...). They are compared with
     * their boot values after every request. ini_get_all() would cover
     * everything but costs ~11 µs a call (it sorts all ~240 entries each
     * time), more than the rest of a request's bookkeeping, so the full
     * comparison runs every FULL_INI_CHECK requests and logs what it finds
     * outside this list. With the Hearth extension, PHP's own record of the
     * settings changed at runtime says what to put back, every setting
     * after every request (see $everySetting), and neither the list nor
     * the full comparison is used.
     */
    public const WATCHED_INI = [
        'display_errors', 'display_startup_errors', 'error_reporting', 'html_errors', 'log_errors',
        'error_log', 'default_charset', 'default_mimetype', 'date.timezone', 'memory_limit',
        'precision', 'serialize_precision', 'include_path', 'user_agent',
        'default_socket_timeout', 'auto_detect_line_endings', 'arg_separator.output',
        'url_rewriter.tags', 'ignore_user_abort', 'zend.assertions', 'assert.active', 'assert.exception',
        'mbstring.language', 'mbstring.internal_encoding', 'mbstring.substitute_character',
        'pcre.backtrack_limit', 'pcre.recursion_limit', 'zlib.output_compression',
        // Locale::setDefault(): Symfony's and Laravel's locale listeners
        // set it from each request.
        'intl.default_locale',
    ];

    /**
     * Settings that configure a part of PHP for the app rather than one
     * request: never restored. Frameworks set them when they build a
     * long-lived service, which a worker does once, during the first
     * request that needs it (Symfony's session storage sets
     * session.cache_limiter, session.name... in its constructor; its file
     * handler sets session.save_path). Restoring them would undo that
     * configuration for every later request.
     */
    private const APP_CONFIGURATION_PREFIXES = ['session.'];

    public const FULL_INI_CHECK = 64;

    /** max_execution_time, given to each request (0: no limit). */
    public readonly int $timeLimit;
    private float $timeLimitSetAt = 0.0;
    /** @var array<string, string|null> every setting at boot */
    private readonly array $ini;
    /** @var array<string, string|false> the watched settings at boot */
    private readonly array $watched;
    private readonly string $timezone;
    private int $requests = 0;
    /**
     * Every setting a request changed is put back after it, found from
     * PHP's own record (hearth_ini_changed(), from the Hearth extension).
     */
    public readonly bool $everySetting;

    /**
     * Takes the baseline once the app has booted. max_execution_time
     * applies to each request, as under php-fpm (renewTimeLimit()); between
     * requests the worker is not limited.
     *
     * @param int $outputLevel the level of the runtime's own output buffer
     * @param bool $native the worker runs on the Hearth extension
     */
    public function __construct(public readonly int $outputLevel, bool $native = false)
    {
        $this->timeLimit = (int) ini_get('max_execution_time');
        set_time_limit(0);
        $ini = ini_get_all(null, false);
        unset($ini['max_execution_time']);
        $this->ini = $ini;
        $watched = [];
        foreach (self::WATCHED_INI as $name) {
            if (array_key_exists($name, $ini)) {
                $watched[$name] = ini_get($name);
            }
        }
        $this->watched = $watched;
        $this->timezone = date_default_timezone_get();
        $this->everySetting = $native && function_exists('hearth_ini_changed');
        if ($this->everySetting) {
            \hearth_ini_mark();
        }
    }

    /**
     * Gives the request max_execution_time, as php-fpm does.
     *
     * set_time_limit() is a setitimer() system call. The timer counts CPU
     * time, which never exceeds wall time, so while less than 1% of the
     * limit has passed on the wall clock since the last renewal the current
     * request still has at least 99% of its time; only then is the call
     * skipped. Under load that saves a system call on nearly every request.
     */
    public function renewTimeLimit(): void
    {
        $now = hrtime(true) / 1e9;
        if ($now - $this->timeLimitSetAt > $this->timeLimit * 0.01) {
            set_time_limit($this->timeLimit);
            $this->timeLimitSetAt = $now;
        }
    }

    /**
     * Flushes the buffers the app left open into the runtime's, as PHP
     * does at the end of a request.
     *
     * @return bool false when one could not be removed: it would leak
     *              into the next request
     */
    public function flushAppBuffers(): bool
    {
        while (ob_get_level() > $this->outputLevel) {
            $status = ob_get_status();
            if (!(($status['flags'] ?? 0) & PHP_OUTPUT_HANDLER_REMOVABLE) || !ob_end_flush()) {
                return false;
            }
        }
        return true;
    }

    /**
     * Discards what is left of the app's buffers.
     *
     * @return bool false when the runtime's own buffer is gone: the worker
     *              cannot capture another response
     */
    public function discardAppBuffers(): bool
    {
        while (ob_get_level() > $this->outputLevel && @ob_end_clean()) {
        }
        return ob_get_level() >= $this->outputLevel;
    }

    /** Puts back the time limit, the settings and the timezone. */
    public function restore(): void
    {
        if ((int) ini_get('max_execution_time') !== $this->timeLimit) {
            // The app changed its own limit (set_time_limit()); put it back.
            set_time_limit($this->timeLimit);
            $this->timeLimitSetAt = hrtime(true) / 1e9;
        }
        $this->restoreIni();
        if (date_default_timezone_get() !== $this->timezone) {
            date_default_timezone_set($this->timezone);
        }
        error_clear_last();
    }

    private function restoreIni(): void
    {
        if ($this->everySetting) {
            foreach (\hearth_ini_changed() as $name) {
                // The time limit has its own treatment (restore()).
                if ($name !== 'max_execution_time' && !self::isAppConfiguration($name)) {
                    self::put($name, array_key_exists($name, $this->ini) ? $this->ini[$name] : null);
                }
            }
            return;
        }
        foreach ($this->watched as $name => $value) {
            if (ini_get($name) !== $value) {
                self::put($name, $value);
            }
        }
        if (++$this->requests % self::FULL_INI_CHECK !== 0) {
            return;
        }
        foreach (ini_get_all(null, false) as $name => $value) {
            $boot = array_key_exists($name, $this->ini) ? $this->ini[$name] : $value;
            if ($boot !== $value && !isset($this->watched[$name]) && !self::isAppConfiguration($name)) {
                Log::write(sprintf(
                    'the app changed %s from %s to %s at runtime; restored '
                    . '(settings outside the watched list are checked every %d requests)',
                    $name,
                    var_export($boot, true),
                    var_export($value, true),
                    self::FULL_INI_CHECK,
                ));
                self::put($name, $boot);
            }
        }
    }

    /**
     * Sets $name back to $value. Some settings refuse a value they start
     * with (intl.default_locale refuses ''): those go back to php.ini's
     * value with ini_restore(), which is where they started.
     */
    private static function put(string $name, string|false|null $value): void
    {
        if (@ini_set($name, (string) $value) === false || ini_get($name) !== $value) {
            ini_restore($name);
        }
    }

    /** Whether $name configures the app for the worker's life (see APP_CONFIGURATION_PREFIXES). */
    private static function isAppConfiguration(string $name): bool
    {
        foreach (self::APP_CONFIGURATION_PREFIXES as $prefix) {
            if (str_starts_with($name, $prefix)) {
                return true;
            }
        }
        return false;
    }
}
