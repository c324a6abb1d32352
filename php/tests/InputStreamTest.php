<?php

declare(strict_types=1);

namespace Hearth\Tests;

use Hearth\Internal\InputStream;
use Hearth\Tests\Support\PhpCgi;
use PHPUnit\Framework\TestCase;

use function Hearth\Tests\Fixtures\inputProbe;

final class InputStreamTest extends TestCase
{
    private const BODY = "Line One\nline two é\n\x00\xff binary\nlast";

    /** @var list<string> */
    private array $files = [];

    protected function tearDown(): void
    {
        InputStream::uninstall();
        foreach ($this->files as $file) {
            @unlink($file);
        }
    }

    public function testReadsAsPhpsOwnInputDoes(): void
    {
        require_once __DIR__ . '/fixtures/input_probe.php';
        $body = PhpCgi::run(__DIR__ . '/fixtures/input.php', [
            'REQUEST_METHOD' => 'POST',
            'CONTENT_TYPE' => 'application/octet-stream',
            'CONTENT_LENGTH' => (string) strlen(self::BODY),
        ], self::BODY);
        $php = unserialize($body, ['allowed_classes' => false]);
        self::assertIsArray($php, $body);
        self::assertSame([self::BODY, self::BODY], $php['twice'], 'php-cgi saw the body');

        InputStream::install(self::BODY);
        self::assertSame($php, inputProbe());

        // The same from a body Hearth spooled to a file.
        $file = $this->spooled(self::BODY);
        InputStream::install('', $file);
        self::assertSame($php, inputProbe());
    }

    public function testASpooledBodyIsReadInPiecesByEachStreamAtItsOwnPosition(): void
    {
        $body = '';
        for ($i = 0; $i < 300000; $i++) {
            $body .= chr(($i * 7) % 256);
        }
        InputStream::install('', $this->spooled($body));
        $a = fopen('php://input', 'rb');
        $b = fopen('php://input', 'rb');
        self::assertSame(substr($body, 0, 10), fread($a, 10));
        self::assertSame(substr($body, 0, 3), fread($b, 3));
        self::assertSame(substr($body, 10, 5), fread($a, 5));
        self::assertSame(0, fseek($a, -4, SEEK_END));
        self::assertSame(substr($body, -4), fread($a, 100));
        self::assertTrue(feof($a));
        self::assertSame(substr($body, 3), stream_get_contents($b));
        self::assertSame(strlen($body), fstat($a)['size']);
        self::assertSame($body, InputStream::contents());
        // After the whole file was read for a form, streams start afresh.
        self::assertTrue(rewind($a));
        self::assertSame(substr($body, 0, 8), fread($a, 8));
        self::assertSame($body, file_get_contents('php://input'));
    }

    public function testASpooledBodyStaysReadableOnceItsFileIsRemoved(): void
    {
        $file = $this->spooled('spooled body');
        InputStream::install('', $file);
        // Hearth removes the file when the response is complete, which
        // fastcgi_finish_request() makes happen before the request ends.
        unlink($file);
        self::assertSame('spooled body', file_get_contents('php://input'));
    }

    public function testAMissingBodyFileReadsAsAnEmptyBody(): void
    {
        $file = $this->spooled('gone');
        unlink($file);
        InputStream::install('', $file);
        self::assertSame('', file_get_contents('php://input'));
        self::assertNull(error_get_last(), 'no warning reaches the app');
    }

    public function testOnlyReadableDirectoriesTakeSpooledBodies(): void
    {
        self::assertTrue(InputStream::canRead(sys_get_temp_dir()));
        self::assertFalse(InputStream::canRead(sys_get_temp_dir() . '/hearth-no-such-dir'));
    }

    /** A temporary file holding $body, removed after the test. */
    private function spooled(string $body): string
    {
        $file = (string) tempnam(sys_get_temp_dir(), 'hearth-body-test-');
        file_put_contents($file, $body);
        $this->files[] = $file;
        return $file;
    }

    public function testBodyCanBeReadTwice(): void
    {
        InputStream::install('a=1&b=2');
        self::assertTrue(InputStream::isInstalled());
        self::assertSame('a=1&b=2', file_get_contents('php://input'));
        self::assertSame('a=1&b=2', file_get_contents('php://input'));
    }

    public function testStreamFunctions(): void
    {
        InputStream::install('body');
        $h = fopen('php://input', 'rb');
        self::assertIsResource($h);
        self::assertSame('bo', fread($h, 2));
        self::assertSame(2, ftell($h));
        self::assertFalse(feof($h));
        self::assertSame('dy', fread($h, 100));
        self::assertTrue(feof($h));
        self::assertSame(0, fseek($h, 1));
        self::assertSame(1, ftell($h));
        self::assertSame('od', fread($h, 2));
        self::assertSame(0, fseek($h, -1, SEEK_END));
        self::assertSame('y', fread($h, 10));
        self::assertSame(0, fseek($h, -3, SEEK_CUR));
        self::assertSame('ody', stream_get_contents($h));
        self::assertSame(-1, fseek($h, -1));
        self::assertSame(-1, fseek($h, 5));
        self::assertSame(0, fseek($h, 4));
        $stat = fstat($h);
        self::assertIsArray($stat);
        self::assertSame(4, $stat['size']);
        self::assertTrue(stream_get_meta_data($h)['seekable']);
        self::assertTrue(fclose($h));
    }

    public function testInstallingAgainReplacesTheBody(): void
    {
        InputStream::install('first');
        $bytes = '';
        for ($i = 0; $i < 4096; $i++) {
            $bytes .= chr($i % 256);
        }
        InputStream::install($bytes);
        self::assertSame($bytes, file_get_contents('php://input'));
        InputStream::install('');
        self::assertSame('', file_get_contents('php://input'));
    }

    public function testTempAndMemoryStreamsStillWork(): void
    {
        InputStream::install('body');
        foreach (['php://temp', 'php://memory', 'php://temp/maxmemory:16', 'PHP://MEMORY'] as $url) {
            $h = fopen($url, 'w+');
            self::assertIsResource($h, $url);
            self::assertSame('user-space', stream_get_meta_data($h)['wrapper_type'], "$url goes through the proxy");
            $data = str_repeat("$url\n", 10);
            self::assertSame(strlen($data), fwrite($h, $data), $url);
            self::assertSame(strlen($data), ftell($h), $url);
            self::assertTrue(rewind($h), $url);
            self::assertSame($data, fread($h, 8192), $url);
            self::assertTrue(feof($h), $url);
            self::assertTrue(ftruncate($h, 3), $url);
            self::assertTrue(rewind($h), $url);
            self::assertSame(substr($url, 0, 3), stream_get_contents($h), $url);
            $stat = fstat($h);
            self::assertIsArray($stat, $url);
            self::assertSame(3, $stat['size'], $url);
            self::assertTrue(fclose($h), $url);
        }
    }

    public function testOutputGoesToTheOutputBuffer(): void
    {
        InputStream::install('body');
        ob_start();
        try {
            $h = fopen('php://output', 'w');
            self::assertIsResource($h);
            self::assertSame(6, fwrite($h, 'output'));
            fclose($h);
            file_put_contents('php://output', ' again');
        } finally {
            $output = ob_get_clean();
        }
        self::assertSame('output again', $output);
    }

    public function testFiltersReadTheBody(): void
    {
        InputStream::install('Body');
        self::assertSame('BODY', file_get_contents('php://filter/read=string.toupper/resource=php://input'));
        self::assertSame('BODY', file_get_contents('php://filter/string.toupper/resource=php://input'));
        self::assertSame(
            'OBQL',
            file_get_contents('php://filter/read=string.toupper|string.rot13/resource=php://input'),
        );
        self::assertSame(
            'OBQL',
            file_get_contents(
                'php://filter/read=string.toupper/resource=php://filter/string.rot13/resource=php://input',
            ),
        );
        $temp = 'php://filter/write=string.toupper/resource=php://memory';
        $h = fopen($temp, 'w+');
        self::assertIsResource($h);
        fwrite($h, 'lower');
        rewind($h);
        self::assertSame('LOWER', stream_get_contents($h));
    }

    public function testAnUnknownFilterWarns(): void
    {
        InputStream::install('body');
        [$result, $warnings] = self::withWarnings(
            static fn () => file_get_contents('php://filter/read=no.such.filter/resource=php://input'),
        );
        self::assertSame('body', $result);
        self::assertSame(['Unable to create filter (no.such.filter)'], $warnings);
    }

    public function testAnUnknownPhpUrlFailsToOpen(): void
    {
        InputStream::install('body');
        [$h, $warnings] = self::withWarnings(static fn () => fopen('php://no-such-stream', 'r'));
        self::assertFalse($h);
        self::assertNotSame([], $warnings);
        self::assertTrue(InputStream::isInstalled(), 'the wrapper is registered again after the failed open');
        self::assertSame('body', file_get_contents('php://input'));
    }

    public function testUninstallBringsBackTheBuiltInWrapper(): void
    {
        InputStream::install('body');
        InputStream::uninstall();
        self::assertFalse(InputStream::isInstalled());
        // The CLI has no request body.
        self::assertSame('', file_get_contents('php://input'));
        $h = fopen('php://memory', 'w+');
        self::assertIsResource($h);
        self::assertSame('PHP', stream_get_meta_data($h)['wrapper_type']);
        fclose($h);
        InputStream::uninstall();
        self::assertSame('', file_get_contents('php://input'));
    }

    /**
     * Runs $call, collecting the warnings it raises instead of failing on them.
     *
     * @return array{0: mixed, 1: list<string>} the result and the warning messages
     */
    private static function withWarnings(callable $call): array
    {
        $warnings = [];
        set_error_handler(static function (int $type, string $message) use (&$warnings): bool {
            if (error_reporting() & $type) {
                $warnings[] = $message;
            }
            return true;
        });
        try {
            return [$call(), $warnings];
        } finally {
            restore_error_handler();
        }
    }
}
