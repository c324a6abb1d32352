<?php

declare(strict_types=1);

namespace Hearth\Tests;

use Hearth\Internal\Globals;
use Hearth\Tests\Support\PhpCgi;
use PHPUnit\Framework\TestCase;

/**
 * Globals fills $_COOKIE, $_POST, $_FILES and $_REQUEST the way PHP's
 * request startup does. The tables below are run through php-cgi, and
 * whatever PHP builds is what Globals must build.
 */
final class GlobalsTest extends TestCase
{
    private const BOUNDARY = '----hearth-boundary-7MA4YWxkTrZu0gW';

    /** @var list<string> */
    private array $dirs = [];

    protected function tearDown(): void
    {
        foreach ($this->dirs as $dir) {
            foreach (glob($dir . '/*') ?: [] as $file) {
                unlink($file);
            }
            rmdir($dir);
        }
        $this->dirs = [];
    }

    /** @return iterable<string, array{0: string}> */
    public function cookieHeaders(): iterable
    {
        $headers = [
            'a=1; a=2',
            'a=1;a=2;a=3',
            'a[k]=1; a[k]=2',
            'a[]=1; a[]=2',
            'a[x]=1; a=2',
            'a=1; a[x]=2',
            'x[]=1; x=2',
            'a=1; a[b]=2; a=3',
            'a[b][c]=1; a[b][d]=2; a[b]=3',
            'a[b=1; a[b=2',
            'a_b=0; a[b=1',
            'a[b c.d[e=1; x[y.z=2',
            'a[=1; a_=2',
            'a b=1; a.b=2; a_b=3',
            'a.b[c.d]=1; a.b[c.d]=2',
            ' x=+%20; =y; ;;z',
            "\ta=1;\x0bb=2;\r c=3",
            '  spaced  =  v  ',
            'a%5Bb%5D=1; c+d=2; e%20f=3; %=4; %41=5',
            'a&b=1; c=d&e=f',
            'eq=a=b=c',
            'noval; noval=late',
            '[x]=1; y=2',
            '1=a; 1=b; 01=c; -1=d; -1=e',
            'a=1, b=2',
            'n=%zz%2; m=%41%c3%a9; p=%2B+',
            'PHPSESSID=abc; PHPSESSID=def',
            'utf=%E2%82%AC; ünï=raw€',
            ';',
            '',
            // CVE-2022-31629: mangling never makes a name __Host- or __Secure-
            // (php-src ext/standard/tests/bug81727.phpt, ghsa-wpj3-hf5j-x4v4.phpt).
            '..Host-test=ignore; __Host-test=correct; . Secure-test=ignore; . Elephpant=Awesome;',
            self::cookieNamesOfGhsaWpj3(),
            '__Host-a=1; ..Host-a=2; __Secure-b=3; .[Secure-b=4',
            ' __Host-x=1; _.Host-y[]=2; [_Secure-z=3; __Secure-=4; __Host=5; ._Host=6',
            '_.Host-u=1; __Host-u=2; .Secure-v=3; _Secure-v=4',
            // Quotes, backslashes, dots, spaces and brackets (tests/basic/028.phpt's names).
            'n\\4=a; n\\\\5=b; n\\\'6=c; n\\"7=d; \'n8\'=e; "n9"=f',
            'a.b c[d.e f]=1; a.b c[x y][z.w]=2; q[ a]=3; r[ ]=4; s[]x=5; t]=6',
        ];
        foreach ($headers as $header) {
            yield var_export($header, true) => [$header];
        }
    }

    /** ghsa-wpj3-hf5j-x4v4.phpt's cookies: every way to spell "__Host-" and "__Secure-". */
    private static function cookieNamesOfGhsaWpj3(): string
    {
        $pairs = [];
        foreach (['Host', 'Secure'] as $prefix) {
            $n = 0;
            foreach (['', '[]'] as $suffix) {
                foreach (['..', '._', '.[', '_.', '__', '_[', '[.', '[_', '[['] as $start) {
                    $n++;
                    $pairs[] = $start . $prefix . '-test' . $suffix . '=v_' . $n;
                }
            }
        }
        return implode('; ', $pairs);
    }

    /** @dataProvider cookieHeaders */
    public function testCookiesAreParsedAsPhpParsesThem(string $header): void
    {
        $php = PhpCgi::superglobals(['HTTP_COOKIE' => $header]);
        self::assertSame($php['cookie'], Globals::cookies($header));
    }

    public function testCookieRules(): void
    {
        // The first plain cookie wins; values are raw-URL-decoded ("+"
        // stays "+"), names are not decoded; leading blanks are dropped.
        self::assertSame(
            ['a' => '1+ é', 'b%20c' => 'x', 'd' => '2'],
            Globals::cookies('a=1+%20%C3%A9; a=2; b%20c=x;   d=2'),
        );
        // Brackets make arrays; "." and " " in names become "_"; empty names are skipped.
        self::assertSame(
            ['a' => ['b' => '1', 0 => '2'], 'c_d_e' => '3', 'f' => ''],
            Globals::cookies('a[b]=1; a[]=2; c.d e=3; =4; f'),
        );
        // An array taking a name first keeps it from a later plain cookie.
        self::assertSame(['a' => ['x' => '1']], Globals::cookies('a[x]=1; a=2'));
        // "a[b" is no array, just the name "a_b", and the first one wins.
        self::assertSame(['a_b' => '1'], Globals::cookies('a[b=1; a[b=2'));
    }

    /**
     * Each part is [name, filename or null for a field, content type, content].
     *
     * @return iterable<string, array{0: list<array{0: string, 1: string|null, 2: string, 3: string}>}>
     */
    public function forms(): iterable
    {
        yield 'fields and files, nested and numbered' => [[
            ['title', null, '', 'Hello'],
            ['doc', 'a.txt', 'text/plain', 'hello'],
            ['files[a][]', 'dir/b.txt', 'text/plain', 'x'],
            ['files[a][]', 'C:\\x\\c.txt', 'image/png', 'yy'],
            ['files[b][k]', '/abs/d.txt', 'text/csv', 'z'],
            ['many[]', 'm1.bin', 'application/octet-stream', ''],
            ['many[]', '', 'application/octet-stream', ''],
            ['many[]', 'm3', 'a/b', "\x00\xff"],
            ['f[]', null, '', 'v1'],
            ['f[]', null, '', 'v2'],
            ['a+b%41&c=d', null, '', 'p&q=r+s%20'],
            ['q.r s', 'n.txt', 'text/plain', '2'],
            ['x[y z]', null, '', 'nested'],
            ['deep[a][b][]', null, '', '1'],
            ['deep[a][b][]', null, '', '2'],
            ['ünï', 'ünï.txt', 'text/plain', 'é'],
        ]];
        yield 'explicit and automatic indices' => [[
            ['a[]', 'x', 't/t', '1'],
            ['a[5]', 'y', 't/t', '22'],
            ['a[]', 'z', 't/t', '1'],
            ['b[]', null, '', '1'],
            ['b[7]', null, '', '2'],
            ['b[]', null, '', '3'],
        ]];
        yield 'same name twice, the last one stays' => [[
            ['doc', null, '', 'v'],
            ['doc', 'x.txt', 't/t', '1'],
            ['doc', 'y.txt', 't/t', '22'],
            ['doc', null, '', 'w'],
        ]];
        yield 'a file name with an unclosed bracket drops it and every later file' => [[
            ['before', 'b.txt', 't/t', '1'],
            ['arr[x', 'z.txt', 't/t', '1'],
            ['after', 'n.txt', 't/t', '2'],
            ['field', null, '', 'kept'],
            ['after2[]', 'm.txt', 't/t', '3'],
        ]];
        yield 'a file name with text after "]" is dropped' => [[
            ['ok', 'a', 't/t', '1'],
            ['x[a]b', 'f', 't/t', '1'],
            ['y', 'g', 't/t', '1'],
        ]];
        yield 'a file name closing a bracket it never opened is dropped' => [[
            ['x]', 'f', 't/t', '1'],
            ['y[]', 'g', 't/t', '1'],
        ]];
        yield 'field names are repaired, not dropped' => [[
            ['arr[x', null, '', 'v'],
            ['x[a]b', null, '', 'w'],
            ['y]', null, '', 'z'],
            ['file', 'f.txt', 't/t', 'ok'],
        ]];
        yield 'no files' => [[
            ['only', null, '', 'field'],
        ]];
        // Six variables a file: more than max_input_vars (1000) has room
        // for, which files do not count against in PHP.
        $many = [];
        for ($i = 0; $i < 120; $i++) {
            $many[] = ["e$i", '', 'application/octet-stream', ''];
            $many[] = ['list[]', '', 'application/octet-stream', ''];
        }
        $many[] = ['list[]', 'last.txt', 'text/plain', 'x'];
        $many[] = ['field', null, '', 'after'];
        yield 'more files than max_input_vars counts variables' => [$many];
        yield 'no fields' => [[
            ['only', 'file.txt', 'text/plain', 'content'],
        ]];
    }

    /**
     * @dataProvider forms
     * @param list<array{0: string, 1: string|null, 2: string, 3: string}> $parts
     */
    public function testFormsGiveWhatPhpGives(array $parts): void
    {
        $body = '';
        $entries = [];
        $fakeTmp = [];
        foreach ($parts as $i => [$name, $filename, $type, $content]) {
            $body .= '--' . self::BOUNDARY . "\r\n" . 'Content-Disposition: form-data; name="' . $name . '"';
            if ($filename === null) {
                $body .= "\r\n\r\n" . $content . "\r\n";
                $entries[] = [$name, $content];
                continue;
            }
            $body .= '; filename="' . $filename . "\"\r\nContent-Type: " . $type . "\r\n\r\n" . $content . "\r\n";
            // What Hearth sends for a file (crates/hearth-http/src/body.rs).
            if ($filename === '') {
                $entries[] = [$name, '', '', '', UPLOAD_ERR_NO_FILE, 0];
            } else {
                $fakeTmp[] = $tmp = "/hearth/tmp/php$i";
                $entries[] = [$name, $filename, $type, $tmp, UPLOAD_ERR_OK, strlen($content)];
            }
        }
        $body .= '--' . self::BOUNDARY . "--\r\n";

        $tmpDir = $this->tempDir();
        $php = PhpCgi::superglobals([
            'REQUEST_METHOD' => 'POST',
            'CONTENT_TYPE' => 'multipart/form-data; boundary=' . self::BOUNDARY,
            'CONTENT_LENGTH' => (string) strlen($body),
        ], $body, ['upload_tmp_dir' => $tmpDir]);

        [$post, $files, $uploaded] = Globals::form($entries);
        self::assertSame($php['post'], $post, '$_POST');
        self::assertSame(self::maskTmpNames($php['files']), self::maskTmpNames($files), '$_FILES');
        // The files move_uploaded_file() accepts: the ones PHP stored.
        self::assertCount($php['uploads'], $uploaded);
        self::assertSame($uploaded, array_values(array_intersect($fakeTmp, $uploaded)));
        foreach (self::tmpNames($files) as $tmp) {
            self::assertContains($tmp, $uploaded);
        }
    }

    public function testFormShapes(): void
    {
        [$post, $files, $uploaded] = Globals::form([
            ['title', 'Hello'],
            ['tags[]', 'a'],
            ['tags[]', 'b'],
            ['doc', 'dir/a.txt', 'text/plain', '/tmp/php1', 0, 5],
            ['files[a][]', 'b.txt', 'text/plain', '/tmp/php2', 0, 1],
            ['files[a][]', '', '', '', UPLOAD_ERR_NO_FILE, 0],
            ['bad]', 'c.txt', 'text/plain', '/tmp/php3', 0, 1],
            ['late', 'd.txt', 'text/plain', '/tmp/php4', 0, 1],
        ]);
        self::assertSame(['title' => 'Hello', 'tags' => ['a', 'b']], $post);
        self::assertSame([
            'doc' => [
                'name' => 'a.txt',
                'full_path' => 'dir/a.txt',
                'type' => 'text/plain',
                'tmp_name' => '/tmp/php1',
                'error' => 0,
                'size' => 5,
            ],
            'files' => [
                'name' => ['a' => ['b.txt', '']],
                'full_path' => ['a' => ['b.txt', '']],
                'type' => ['a' => ['text/plain', '']],
                'tmp_name' => ['a' => ['/tmp/php2', '']],
                'error' => ['a' => [0, UPLOAD_ERR_NO_FILE]],
                'size' => ['a' => [1, 0]],
            ],
        ], $files);
        self::assertSame(['/tmp/php1', '/tmp/php2'], $uploaded);
        self::assertSame([[], [], []], Globals::form([]));
    }

    /** @return iterable<string, array{0: string}> */
    public function requestOrders(): iterable
    {
        foreach (['GP', 'PG', 'CGP', 'GPC', 'CPG', 'gpc', 'EGPCS', 'G', 'C', ''] as $order) {
            yield var_export($order, true) => [$order];
        }
    }

    /** @dataProvider requestOrders */
    public function testRequestMergesAsPhpDoes(string $order): void
    {
        $body = 'a=post&b[x]=post&c=post&n[]=p&p=post';
        $php = PhpCgi::superglobals([
            'REQUEST_METHOD' => 'POST',
            'QUERY_STRING' => 'a=get&b[y]=get&b[x]=get&d=get&n[]=g&n[]=g2&p[k]=get',
            'HTTP_COOKIE' => 'a=cookie; b[z]=cookie; c=cookie; n[]=c; p=cookie',
            'CONTENT_TYPE' => 'application/x-www-form-urlencoded',
            'CONTENT_LENGTH' => (string) strlen($body),
        ], $body, ['request_order' => $order, 'variables_order' => 'EGPCS']);
        self::assertNotSame([], $php['get']);
        self::assertNotSame([], $php['post']);
        self::assertNotSame([], $php['cookie']);
        self::assertSame($php['request'], Globals::request($order, $php['get'], $php['post'], $php['cookie']));
    }

    public function testRequestOrder(): void
    {
        $get = ['a' => 'get', 'b' => ['x' => 'get', 'y' => 'get']];
        $post = ['a' => 'post', 'b' => ['x' => 'post'], 'c' => 'post'];
        $cookie = ['a' => 'cookie', 'b' => ['z' => 'cookie']];
        self::assertSame(
            ['a' => 'post', 'b' => ['x' => 'post', 'y' => 'get'], 'c' => 'post'],
            Globals::request('GP', $get, $post, $cookie),
        );
        self::assertSame(
            ['a' => 'post', 'b' => ['z' => 'cookie', 'x' => 'post', 'y' => 'get'], 'c' => 'post'],
            Globals::request('CGP', $get, $post, $cookie),
        );
        self::assertSame([], Globals::request('', $get, $post, $cookie));
    }

    private function tempDir(): string
    {
        $dir = sys_get_temp_dir() . '/hearth-test-' . bin2hex(random_bytes(6));
        self::assertTrue(mkdir($dir, 0700));
        $this->dirs[] = $dir;
        return $dir;
    }

    /**
     * $_FILES with each temporary file name replaced by "TMP": PHP's and
     * Hearth's differ, and nothing else may.
     *
     * @param array<array-key, mixed> $files
     * @return array<array-key, mixed>
     */
    private static function maskTmpNames(array $files): array
    {
        foreach ($files as &$file) {
            if (is_array($file) && array_key_exists('tmp_name', $file)) {
                $file['tmp_name'] = self::mask($file['tmp_name']);
            }
        }
        return $files;
    }

    private static function mask(mixed $value): mixed
    {
        if (is_array($value)) {
            return array_map(self::mask(...), $value);
        }
        return $value === '' ? '' : 'TMP';
    }

    /**
     * @param array<array-key, mixed> $files
     * @return list<string>
     */
    private static function tmpNames(array $files): array
    {
        $names = [];
        foreach ($files as $file) {
            if (is_array($file) && isset($file['tmp_name'])) {
                $tmp = (array) $file['tmp_name'];
                array_walk_recursive($tmp, static function (mixed $leaf) use (&$names): void {
                    if ($leaf !== '') {
                        $names[] = $leaf;
                    }
                });
            }
        }
        return $names;
    }
}
