<?php

declare(strict_types=1);

namespace Hearth\Tests;

use Hearth\Internal\Uploads;
use PHPUnit\Framework\TestCase;

final class UploadsTest extends TestCase
{
    private string $dir = '';
    /** @var list<string> */
    private array $cleanup = [];

    protected function setUp(): void
    {
        $this->dir = sys_get_temp_dir() . '/hearth-uploads-' . bin2hex(random_bytes(6));
        self::assertTrue(mkdir($this->dir, 0700));
    }

    protected function tearDown(): void
    {
        Uploads::clear();
        foreach (array_merge(glob($this->dir . '/*') ?: [], $this->cleanup) as $file) {
            if (is_file($file)) {
                unlink($file);
            }
        }
        rmdir($this->dir);
        $this->cleanup = [];
    }

    /** A file as Hearth stores an upload: mode 0600 in the upload directory. */
    private function upload(string $content = 'uploaded'): string
    {
        $path = tempnam($this->dir, 'php');
        self::assertIsString($path);
        file_put_contents($path, $content);
        chmod($path, 0600);
        return $path;
    }

    public function testOnlyAcceptedFilesAreUploaded(): void
    {
        $a = $this->upload();
        $b = $this->upload();
        $other = $this->upload();
        Uploads::accept([$a, $b]);
        self::assertTrue(Uploads::isUploaded($a));
        self::assertTrue(Uploads::isUploaded($b));
        self::assertFalse(Uploads::isUploaded($other));
        self::assertFalse(Uploads::isUploaded(''));
        self::assertFalse(Uploads::isUploaded($this->dir . '/../' . basename($this->dir) . '/' . basename($a)));

        // The next request's uploads replace the previous ones.
        Uploads::accept([$other]);
        self::assertFalse(Uploads::isUploaded($a));
        self::assertTrue(Uploads::isUploaded($other));
        Uploads::accept([]);
        self::assertFalse(Uploads::isUploaded($other));
    }

    public function testClearForgetsEveryUpload(): void
    {
        $a = $this->upload();
        Uploads::accept([$a]);
        Uploads::clear();
        self::assertFalse(Uploads::isUploaded($a));
        self::assertFalse(Uploads::move($a, $this->dir . '/moved'));
        self::assertFileExists($a);
    }

    public function testMoveRenamesTheFile(): void
    {
        $a = $this->upload('content of a');
        Uploads::accept([$a]);
        $to = $this->dir . '/moved.txt';
        self::assertTrue(Uploads::move($a, $to));
        self::assertFileDoesNotExist($a);
        self::assertSame('content of a', file_get_contents($to));
        // Moved once: no longer an upload, as in PHP.
        self::assertFalse(Uploads::isUploaded($a));
        self::assertFalse(Uploads::move($a, $this->dir . '/again.txt'));
        self::assertFileDoesNotExist($this->dir . '/again.txt');
    }

    public function testMoveReplacesAnExistingFile(): void
    {
        $a = $this->upload('new');
        $to = $this->dir . '/existing.txt';
        file_put_contents($to, 'old');
        Uploads::accept([$a]);
        self::assertTrue(Uploads::move($a, $to));
        self::assertSame('new', file_get_contents($to));
    }

    public function testMoveRefusesFilesThatWereNotUploaded(): void
    {
        $accepted = $this->upload();
        $notUploaded = $this->upload('secret');
        Uploads::accept([$accepted]);
        $to = $this->dir . '/stolen.txt';
        self::assertFalse(Uploads::move($notUploaded, $to));
        self::assertFalse(Uploads::move($this->dir . '/missing', $to));
        self::assertFileDoesNotExist($to);
        self::assertSame('secret', file_get_contents($notUploaded));
    }

    /** @return iterable<string, array{0: int}> */
    public function umasks(): iterable
    {
        yield '022' => [0022];
        yield '077' => [0077];
        yield '002' => [0002];
        yield '000' => [0000];
    }

    /** @dataProvider umasks */
    public function testMovedFileGetsThePermissionsOfTheUmask(int $umask): void
    {
        $a = $this->upload();
        Uploads::accept([$a]);
        $to = $this->dir . '/perm.txt';
        $old = umask($umask);
        try {
            self::assertTrue(Uploads::move($a, $to));
        } finally {
            umask($old);
        }
        clearstatcache();
        self::assertSame(sprintf('%o', 0666 & ~$umask), sprintf('%o', fileperms($to) & 0777));
    }

    public function testMoveToAnotherFilesystemCopies(): void
    {
        $shm = '/dev/shm';
        if (!is_dir($shm) || !is_writable($shm) || @stat($shm)['dev'] === @stat($this->dir)['dev']) {
            self::markTestSkipped('needs /dev/shm on a filesystem other than ' . sys_get_temp_dir());
        }
        $a = $this->upload('across');
        Uploads::accept([$a]);
        $to = $shm . '/hearth-upload-' . bin2hex(random_bytes(6));
        $this->cleanup[] = $to;
        self::assertTrue(Uploads::move($a, $to));
        self::assertFileDoesNotExist($a);
        self::assertSame('across', file_get_contents($to));
        self::assertFalse(Uploads::isUploaded($a));
    }

    public function testAFailedMoveWarnsAndKeepsTheUpload(): void
    {
        $a = $this->upload();
        Uploads::accept([$a]);
        $to = $this->dir . '/no/such/dir/file.txt';
        $warnings = [];
        set_error_handler(static function (int $type, string $message) use (&$warnings): bool {
            if (error_reporting() & $type) {
                $warnings[] = [$type, $message];
            }
            return true;
        });
        try {
            $moved = Uploads::move($a, $to);
        } finally {
            restore_error_handler();
        }
        self::assertFalse($moved);
        self::assertCount(1, $warnings);
        self::assertSame(E_USER_WARNING, $warnings[0][0]);
        self::assertStringStartsWith(
            sprintf('move_uploaded_file(): Unable to move "%s" to "%s"', $a, $to),
            $warnings[0][1],
        );
        self::assertFileExists($a);
        self::assertTrue(Uploads::isUploaded($a), 'the app may try again elsewhere');
        self::assertTrue(Uploads::move($a, $this->dir . '/second-try.txt'));
    }
}
