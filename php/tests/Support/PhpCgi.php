<?php

declare(strict_types=1);

namespace Hearth\Tests\Support;

use PHPUnit\Framework\Assert;

/**
 * Runs a script under php-cgi as a web server would run it for one request
 * (CGI/1.1 environment, body on standard input), so that tests can compare
 * what the library emulates with what PHP itself does. PHP starts with no
 * php.ini (-n): its built-in defaults, plus the settings a test passes.
 */
final class PhpCgi
{
    /**
     * The php-cgi of the running PHP version, or null when none is
     * installed. HEARTH_TEST_PHP_CGI names another one (empty: none).
     */
    public static function binary(): ?string
    {
        static $binary = false;
        if ($binary !== false) {
            return $binary;
        }
        $override = getenv('HEARTH_TEST_PHP_CGI');
        if ($override !== false) {
            return $binary = $override === '' ? null : $override;
        }
        $dir = dirname(PHP_BINARY);
        $candidates = [
            $dir . '/php-cgi' . PHP_MAJOR_VERSION . '.' . PHP_MINOR_VERSION,
            $dir . '/php-cgi',
        ];
        foreach (explode(PATH_SEPARATOR, (string) getenv('PATH')) as $path) {
            if ($path !== '') {
                $candidates[] = $path . '/php-cgi';
            }
        }
        $binary = null;
        foreach ($candidates as $candidate) {
            if (is_file($candidate) && is_executable($candidate)) {
                $binary = $candidate;
                break;
            }
        }
        return $binary;
    }

    /** Skips the calling test when php-cgi is not installed. */
    public static function require(): string
    {
        $binary = self::binary();
        if ($binary === null) {
            Assert::markTestSkipped('php-cgi is not installed; cannot compare with PHP itself');
        }
        return $binary;
    }

    /**
     * Runs $script for one request and returns what it printed (the
     * response body, CGI headers removed).
     *
     * @param array<string, string> $env CGI variables (REQUEST_METHOD, HTTP_COOKIE...)
     * @param array<string, string> $ini settings passed with -d
     */
    public static function run(string $script, array $env, string $stdin = '', array $ini = []): string
    {
        return self::response($script, $env, $stdin, $ini)[1];
    }

    /**
     * Runs $script for one request and returns the CGI response: its
     * header lines and its body.
     *
     * @param array<string, string> $env
     * @param array<string, string> $ini
     * @return array{0: list<string>, 1: string}
     */
    public static function response(string $script, array $env, string $stdin = '', array $ini = []): array
    {
        $command = [self::require(), '-n'];
        foreach ($ini + ['display_errors' => 'stderr'] as $name => $value) {
            $command[] = '-d';
            $command[] = $name . '=' . $value;
        }
        $env += [
            'REQUEST_METHOD' => 'GET',
            'REDIRECT_STATUS' => '200',
            'SCRIPT_FILENAME' => $script,
            'GATEWAY_INTERFACE' => 'CGI/1.1',
        ];
        $pipeSpec = [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']];
        $process = proc_open($command, $pipeSpec, $pipes, null, $env);
        Assert::assertIsResource($process, 'php-cgi starts');
        fwrite($pipes[0], $stdin);
        fclose($pipes[0]);
        $output = (string) stream_get_contents($pipes[1]);
        $errors = (string) stream_get_contents($pipes[2]);
        fclose($pipes[1]);
        fclose($pipes[2]);
        $status = proc_close($process);
        Assert::assertSame(0, $status, "php-cgi exit status; stderr: $errors");
        Assert::assertSame('', $errors, 'php-cgi stderr');
        $parts = preg_split('/\r?\n\r?\n/', $output, 2);
        Assert::assertIsArray($parts);
        Assert::assertCount(2, $parts, "php-cgi output has headers and a body: $output");
        $headers = preg_split('/\r?\n/', $parts[0]);
        Assert::assertIsArray($headers);
        return [$headers, $parts[1]];
    }

    /**
     * Runs tests/fixtures/superglobals.php and returns the superglobals PHP
     * built: get, post, cookie, files, request, and uploads (how many
     * temporary files PHP kept for the request).
     *
     * @param array<string, string> $env
     * @param array<string, string> $ini
     * @return array<string, mixed>
     */
    public static function superglobals(array $env, string $stdin = '', array $ini = []): array
    {
        $body = self::run(dirname(__DIR__) . '/fixtures/superglobals.php', $env, $stdin, $ini);
        $globals = unserialize($body, ['allowed_classes' => false]);
        Assert::assertIsArray($globals, "the fixture printed a serialized array: $body");
        return $globals;
    }
}
