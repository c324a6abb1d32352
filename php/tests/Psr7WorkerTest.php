<?php

declare(strict_types=1);

namespace Hearth\Tests;

use Hearth\Internal\Globals;
use Hearth\Internal\InputStream;
use Hearth\Psr7Worker;
use Hearth\Tests\Support\PhpCgi;
use Nyholm\Psr7\Factory\Psr17Factory;
use PHPUnit\Framework\TestCase;
use Psr\Http\Message\UploadedFileInterface;

/**
 * The PSR-7 bridge outside a worker, with nyholm/psr7 as the PSR-17
 * factory (Debian's php-nyholm-psr7, or Composer's vendor/).
 */
final class Psr7WorkerTest extends TestCase
{
    private Psr17Factory $factory;
    /** @var array<string, mixed> */
    private array $saved = [];
    /** @var list<string> */
    private array $files = [];

    protected function setUp(): void
    {
        if (!class_exists(Psr17Factory::class) || !interface_exists(UploadedFileInterface::class)) {
            self::markTestSkipped('nyholm/psr7 is not installed (Debian: php-nyholm-psr7)');
        }
        require_once __DIR__ . '/fixtures/psr15.php';
        $this->factory = new Psr17Factory();
        $this->saved = [
            'server' => $_SERVER,
            'get' => $_GET,
            'post' => $_POST,
            'cookie' => $_COOKIE,
            'files' => $_FILES,
        ];
        $_GET = [];
        $_POST = [];
        $_COOKIE = [];
        $_FILES = [];
    }

    protected function tearDown(): void
    {
        InputStream::uninstall();
        if ($this->saved !== []) {
            $_SERVER = $this->saved['server'];
            $_GET = $this->saved['get'];
            $_POST = $this->saved['post'];
            $_COOKIE = $this->saved['cookie'];
            $_FILES = $this->saved['files'];
        }
        foreach ($this->files as $file) {
            if (is_file($file)) {
                unlink($file);
            }
        }
    }

    /** @param array<string, string> $server */
    private function request(array $server): \Psr\Http\Message\ServerRequestInterface
    {
        $_SERVER = $server;
        return Psr7Worker::requestFromGlobals($this->factory);
    }

    private function tempFile(string $content): string
    {
        $path = tempnam(sys_get_temp_dir(), 'php');
        self::assertIsString($path);
        file_put_contents($path, $content);
        $this->files[] = $path;
        return $path;
    }

    public function testMethodUriAndServerParams(): void
    {
        $server = [
            'REQUEST_METHOD' => 'DELETE',
            'REQUEST_URI' => '/items/7?force=1',
            'QUERY_STRING' => 'force=1',
            'HTTP_HOST' => 'example.test:8080',
            'SERVER_NAME' => 'ignored.test',
            'SERVER_PORT' => '9999',
            'SERVER_PROTOCOL' => 'HTTP/1.1',
        ];
        $request = $this->request($server);
        self::assertSame('DELETE', $request->getMethod());
        self::assertSame('http://example.test:8080/items/7?force=1', (string) $request->getUri());
        self::assertSame('example.test', $request->getUri()->getHost());
        self::assertSame(8080, $request->getUri()->getPort());
        self::assertSame('/items/7', $request->getUri()->getPath());
        self::assertSame('force=1', $request->getUri()->getQuery());
        self::assertSame($server, $request->getServerParams());
        self::assertSame('1.1', $request->getProtocolVersion());
    }

    /** @return iterable<string, array{0: array<string, string>, 1: string}> */
    public function uris(): iterable
    {
        $secure = ['HTTP_HOST' => 'secure.test', 'REQUEST_URI' => '/a'];
        yield 'https on' => [['HTTPS' => 'on'] + $secure, 'https://secure.test/a'];
        yield 'https ON' => [['HTTPS' => 'ON'] + $secure, 'https://secure.test/a'];
        yield 'https 1' => [['HTTPS' => '1'] + $secure, 'https://secure.test/a'];
        yield 'https off' => [['HTTPS' => 'off'] + $secure, 'http://secure.test/a'];
        yield 'https empty' => [['HTTPS' => ''] + $secure, 'http://secure.test/a'];
        yield 'Host with a port' => [['HTTP_HOST' => 'h.test:8080', 'REQUEST_URI' => '/'], 'http://h.test:8080/'];
        yield 'no Host: server name and default port' => [
            ['SERVER_NAME' => 'srv.test', 'SERVER_PORT' => '80', 'REQUEST_URI' => '/x'],
            'http://srv.test/x',
        ];
        yield 'no Host: server name and other port' => [
            ['SERVER_NAME' => 'srv.test', 'SERVER_PORT' => '8000', 'REQUEST_URI' => '/x'],
            'http://srv.test:8000/x',
        ];
        yield 'no Host, https on 443' => [
            ['HTTPS' => 'on', 'SERVER_NAME' => 'srv.test', 'SERVER_PORT' => '443', 'REQUEST_URI' => '/'],
            'https://srv.test/',
        ];
        yield 'no Host, https on 8443' => [
            ['HTTPS' => 'on', 'SERVER_NAME' => 'srv.test', 'SERVER_PORT' => '8443', 'REQUEST_URI' => '/'],
            'https://srv.test:8443/',
        ];
        yield 'nothing at all' => [[], 'http://localhost/'];
    }

    /**
     * @dataProvider uris
     * @param array<string, string> $server
     */
    public function testUri(array $server, string $uri): void
    {
        self::assertSame($uri, (string) $this->request($server)->getUri());
    }

    public function testHeadersComeFromHttpVariablesAndContentTypeAndLength(): void
    {
        $request = $this->request([
            'REQUEST_METHOD' => 'POST',
            'HTTP_HOST' => 'example.test',
            'HTTP_ACCEPT' => 'text/html',
            'HTTP_X_FORWARDED_FOR' => '10.0.0.1',
            'HTTP_ACCEPT_LANGUAGE' => 'fr',
            'CONTENT_TYPE' => 'application/json',
            'CONTENT_LENGTH' => '2',
            'SERVER_SOFTWARE' => 'not a header',
        ]);
        self::assertSame([
            'Host' => ['example.test'],
            'Accept' => ['text/html'],
            'X-Forwarded-For' => ['10.0.0.1'],
            'Accept-Language' => ['fr'],
            'Content-Type' => ['application/json'],
            'Content-Length' => ['2'],
        ], $request->getHeaders());
        self::assertSame('10.0.0.1', $request->getHeaderLine('x-forwarded-for'));
    }

    public function testProtocolVersion(): void
    {
        self::assertSame('1.0', $this->request(['SERVER_PROTOCOL' => 'HTTP/1.0'])->getProtocolVersion());
        self::assertSame('2.0', $this->request(['SERVER_PROTOCOL' => 'HTTP/2.0'])->getProtocolVersion());
        self::assertSame('1.1', $this->request([])->getProtocolVersion());
    }

    public function testCookiesAndQuery(): void
    {
        $_COOKIE = ['session' => 'abc', 'prefs' => ['theme' => 'dark']];
        $_GET = ['page' => '2', 'tags' => ['a', 'b']];
        $request = $this->request(['REQUEST_METHOD' => 'GET', 'QUERY_STRING' => 'page=2&tags[]=a&tags[]=b']);
        self::assertSame($_COOKIE, $request->getCookieParams());
        self::assertSame($_GET, $request->getQueryParams());
        self::assertNull($request->getParsedBody());
    }

    /** @return iterable<string, array{0: string, 1: string, 2: bool}> */
    public function parsedBodies(): iterable
    {
        yield 'POST urlencoded' => ['POST', 'application/x-www-form-urlencoded', true];
        yield 'POST urlencoded, charset, any case' => [
            'POST',
            'Application/X-WWW-Form-URLEncoded; charset=UTF-8',
            true,
        ];
        yield 'POST multipart' => ['POST', 'multipart/form-data; boundary=xyz', true];
        yield 'POST JSON' => ['POST', 'application/json', false];
        yield 'POST without a type' => ['POST', '', false];
        yield 'PUT urlencoded' => ['PUT', 'application/x-www-form-urlencoded', false];
        yield 'GET urlencoded' => ['GET', 'application/x-www-form-urlencoded', false];
    }

    /** @dataProvider parsedBodies */
    public function testParsedBodyOnlyForPostedForms(string $method, string $type, bool $parsed): void
    {
        $_POST = ['a' => '1', 'b' => ['c' => '2']];
        $request = $this->request(['REQUEST_METHOD' => $method, 'CONTENT_TYPE' => $type]);
        self::assertSame($parsed ? $_POST : null, $request->getParsedBody());
    }

    public function testBodyIsPhpInput(): void
    {
        InputStream::install('{"json":true}');
        $request = $this->request([
            'REQUEST_METHOD' => 'POST',
            'CONTENT_TYPE' => 'application/json',
            'CONTENT_LENGTH' => '13',
        ]);
        self::assertSame('{"json":true}', (string) $request->getBody());
        self::assertSame('{"json":true}', (string) $request->getBody(), 'readable again');

        $request = $this->request(['REQUEST_METHOD' => 'GET']);
        self::assertSame('', (string) $request->getBody(), 'no Content-Length, no body');
    }

    public function testUploadedFilesKeepTheShapeOfTheirNames(): void
    {
        $avatar = $this->tempFile('png bytes');
        $first = $this->tempFile('first');
        $second = $this->tempFile('second!');
        [, $_FILES] = Globals::form([
            ['avatar', 'me.png', 'image/png', $avatar, UPLOAD_ERR_OK, 9],
            ['docs[a][]', 'one.txt', 'text/plain', $first, UPLOAD_ERR_OK, 5],
            ['docs[a][]', 'dir/two.txt', 'text/plain', $second, UPLOAD_ERR_OK, 7],
            ['docs[b][x]', '', '', '', UPLOAD_ERR_NO_FILE, 0],
            ['missing', '', '', '', UPLOAD_ERR_NO_FILE, 0],
        ]);
        $files = $this->request(['REQUEST_METHOD' => 'POST', 'CONTENT_TYPE' => 'multipart/form-data; boundary=x'])
            ->getUploadedFiles();

        self::assertSame(['avatar', 'docs', 'missing'], array_keys($files));
        self::assertInstanceOf(UploadedFileInterface::class, $files['avatar']);
        self::assertSame('me.png', $files['avatar']->getClientFilename());
        self::assertSame('image/png', $files['avatar']->getClientMediaType());
        self::assertSame(9, $files['avatar']->getSize());
        self::assertSame(UPLOAD_ERR_OK, $files['avatar']->getError());
        self::assertSame('png bytes', (string) $files['avatar']->getStream());

        self::assertSame(['a', 'b'], array_keys($files['docs']));
        self::assertCount(2, $files['docs']['a']);
        self::assertSame('one.txt', $files['docs']['a'][0]->getClientFilename());
        self::assertSame('first', (string) $files['docs']['a'][0]->getStream());
        self::assertSame('two.txt', $files['docs']['a'][1]->getClientFilename());
        self::assertSame(7, $files['docs']['a'][1]->getSize());
        self::assertSame('second!', (string) $files['docs']['a'][1]->getStream());
        self::assertSame(UPLOAD_ERR_NO_FILE, $files['docs']['b']['x']->getError());

        self::assertInstanceOf(UploadedFileInterface::class, $files['missing']);
        self::assertSame(UPLOAD_ERR_NO_FILE, $files['missing']->getError());
        self::assertSame(0, $files['missing']->getSize());
    }

    public function testNoUploads(): void
    {
        self::assertSame([], $this->request(['REQUEST_METHOD' => 'GET'])->getUploadedFiles());
    }

    public function testEmitOutsideAWorkerEchoesTheBody(): void
    {
        $response = $this->factory->createResponse(404)
            ->withHeader('X-Test', 'yes')
            ->withAddedHeader('Set-Cookie', 'a=1')
            ->withAddedHeader('Set-Cookie', 'b=2')
            ->withBody($this->factory->createStream('not found'));
        ob_start();
        try {
            Psr7Worker::emit($response);
        } finally {
            $output = ob_get_clean();
        }
        // The headers: testServeOutsideHearthRunsTheAppOnceWithHeaderAndEcho
        // (PHPUnit has printed before, so header() is a no-op here).
        self::assertSame('not found', $output);
    }

    public function testServeOutsideHearthRunsTheAppOnceWithHeaderAndEcho(): void
    {
        $body = 'x=1&y[]=2';
        [$headers, $output] = PhpCgi::response(__DIR__ . '/fixtures/psr7_app.php', [
            'REQUEST_METHOD' => 'POST',
            'REQUEST_URI' => '/app/path?q=s',
            'QUERY_STRING' => 'q=s',
            'HTTP_HOST' => 'example.test',
            'HTTP_COOKIE' => 'c=d',
            'CONTENT_TYPE' => 'application/x-www-form-urlencoded',
            'CONTENT_LENGTH' => (string) strlen($body),
        ], $body);
        self::assertContains('Status: 201 Made', $headers);
        self::assertContains('X-Method: POST', $headers);
        self::assertContains('Content-Type: application/json', $headers);
        self::assertSame(['Set-Cookie: a=1', 'Set-Cookie: b=2'], array_values(preg_grep('/^Set-Cookie:/i', $headers)));
        [$json, $calls] = explode("\n", $output, 2);
        self::assertSame('calls=1', $calls);
        self::assertSame([
            'uri' => 'http://example.test/app/path?q=s',
            'query' => ['q' => 's'],
            'cookies' => ['c' => 'd'],
            'parsed' => ['x' => '1', 'y' => ['2']],
            'files' => [],
            'body' => $body,
            'host' => 'example.test',
        ], json_decode($json, true, 512, JSON_THROW_ON_ERROR));
    }

    public function testServeOutsideHearthSeesRealUploads(): void
    {
        $body = "--b\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nHi\r\n"
            . "--b\r\nContent-Disposition: form-data; name=\"doc\"; filename=\"a.txt\"\r\n"
            . "Content-Type: text/plain\r\n\r\nfile content\r\n--b--\r\n";
        [, $output] = PhpCgi::response(__DIR__ . '/fixtures/psr7_app.php', [
            'REQUEST_METHOD' => 'POST',
            'REQUEST_URI' => '/upload',
            'HTTP_HOST' => 'example.test',
            'CONTENT_TYPE' => 'multipart/form-data; boundary=b',
            'CONTENT_LENGTH' => (string) strlen($body),
        ], $body);
        [$json] = explode("\n", $output, 2);
        $seen = json_decode($json, true, 512, JSON_THROW_ON_ERROR);
        self::assertSame(['title' => 'Hi'], $seen['parsed']);
        self::assertSame(['doc' => ['a.txt', 'file content']], $seen['files']);
        self::assertSame('', $seen['body'], 'PHP gives no php://input for multipart forms');
    }

    public function testServeOutsideHearthRunsAPsr15HandlerOnceUnderPhpCgi(): void
    {
        $body = 'name=Ann';
        [$headers, $output] = PhpCgi::response(__DIR__ . '/fixtures/psr15_app.php', [
            'REQUEST_METHOD' => 'POST',
            'REQUEST_URI' => '/greet?x=1',
            'QUERY_STRING' => 'x=1',
            'HTTP_HOST' => 'example.test',
            'CONTENT_TYPE' => 'application/x-www-form-urlencoded',
            'CONTENT_LENGTH' => (string) strlen($body),
        ], $body);
        self::assertContains('Status: 202 Accepted', $headers);
        self::assertContains('X-Handled-By: handle', $headers, 'handle(), not __invoke()');
        [$json, $calls] = explode("\n", $output, 2);
        self::assertSame('calls=1', $calls);
        self::assertSame([
            'method' => 'POST',
            'uri' => 'http://example.test/greet?x=1',
            'parsed' => ['name' => 'Ann'],
        ], json_decode($json, true, 512, JSON_THROW_ON_ERROR));
    }

    public function testServeOutsideHearthRunsAPsr15HandlerOnceUnderTheCli(): void
    {
        $env = getenv();
        unset($env['HEARTH_PROTOCOL']);
        $process = proc_open(
            [PHP_BINARY, '-n', __DIR__ . '/fixtures/psr15_app.php'],
            [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']],
            $pipes,
            null,
            $env,
        );
        self::assertIsResource($process);
        $stdout = (string) stream_get_contents($pipes[1]);
        $stderr = (string) stream_get_contents($pipes[2]);
        fclose($pipes[1]);
        fclose($pipes[2]);
        self::assertSame(0, proc_close($process), $stderr);
        self::assertSame('', $stderr);
        self::assertSame(
            '{"method":"GET","uri":"http:\/\/localhost\/","parsed":null}' . "\ncalls=1",
            $stdout,
        );
    }

    public function testServeRefusesAHandlerThatIsNeitherCallableNorAPsr15Handler(): void
    {
        // A handle() method is not enough: only the interface says it takes
        // a PSR-7 request (Symfony's HttpKernel has a handle() too).
        $notAHandler = new class {
            public function handle(object $request): object
            {
                return $request;
            }
        };
        $this->expectException(\TypeError::class);
        $this->expectExceptionMessage(
            'Hearth\Psr7Worker::serve(): the handler must be a callable or a '
            . 'Psr\Http\Server\RequestHandlerInterface, class@anonymous given',
        );
        Psr7Worker::serve($this->factory, $notAHandler);
    }

    public function testEmitStreamsALargeBodyFromItsStart(): void
    {
        $resource = fopen('php://temp', 'w+');
        self::assertIsResource($resource);
        $bytes = str_repeat(random_bytes(1024), 2048) . 'end';
        fwrite($resource, $bytes);
        // The stream is left at its end, as after writing it.
        $body = $this->factory->createStreamFromResource($resource);
        self::assertSame(strlen($bytes), $body->tell());
        ob_start();
        try {
            Psr7Worker::emit($this->factory->createResponse(200)->withBody($body));
        } finally {
            $output = ob_get_clean();
        }
        self::assertSame(strlen($bytes), strlen((string) $output));
        self::assertTrue($bytes === $output, 'the body, whole and in order');
    }
}
