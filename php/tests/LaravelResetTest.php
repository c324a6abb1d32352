<?php

declare(strict_types=1);

namespace Hearth\Tests;

use Hearth\Laravel\RequestCycle;
use Hearth\Laravel\Reset;
use Hearth\Laravel\Worker;
use Illuminate\Config\Repository;
use Illuminate\Cookie\CookieServiceProvider;
use Illuminate\Database\DatabaseServiceProvider;
use Illuminate\Events\EventServiceProvider;
use Illuminate\Filesystem\FilesystemServiceProvider;
use Illuminate\Foundation\Application;
use Illuminate\Http\Request;
use Illuminate\Translation\TranslationServiceProvider;
use PHPUnit\Framework\TestCase;

/**
 * Hearth\Laravel\Reset on a small Laravel application, in this process:
 * what a request changes in the services every request shares is put back.
 * Under Hearth, with real workers and the example app, tests/laravel.rs.
 */
final class LaravelResetTest extends TestCase
{
    private string $dir;

    protected function setUp(): void
    {
        if (!class_exists(Application::class) && stream_resolve_include_path('Illuminate/autoload.php')) {
            require_once 'Illuminate/autoload.php';
        }
        if (!class_exists(Application::class) || !extension_loaded('pdo_sqlite')) {
            self::markTestSkipped('needs Laravel and SQLite (Debian: php-laravel-framework php-sqlite3)');
        }
        $this->dir = sys_get_temp_dir() . '/hearth-laravel-' . getmypid();
        @mkdir($this->dir . '/resources/lang', 0777, true);
    }

    protected function tearDown(): void
    {
        Worker::clearResetCallbacks();
        @rmdir($this->dir . '/resources/lang');
        @rmdir($this->dir . '/resources');
        @rmdir($this->dir);
    }

    private function app(): Application
    {
        $app = new Application($this->dir);
        $app->instance('config', new Repository([
            'app' => ['locale' => 'en', 'fallback_locale' => 'en'],
            'session' => ['path' => '/', 'domain' => null, 'secure' => false, 'same_site' => 'lax'],
            'database' => [
                'default' => 'sqlite',
                'connections' => ['sqlite' => ['driver' => 'sqlite', 'database' => ':memory:', 'prefix' => '']],
            ],
        ]));
        foreach (
            [
                EventServiceProvider::class,
                FilesystemServiceProvider::class,
                TranslationServiceProvider::class,
                CookieServiceProvider::class,
                DatabaseServiceProvider::class,
            ] as $provider
        ) {
            $app->register($provider);
        }
        $app->instance('request', Request::create('http://localhost/'));
        return $app;
    }

    public function testWhatARequestLeavesInSharedServicesIsPutBack(): void
    {
        $app = $this->app();
        $db = $app->make('db')->connection();
        $db->statement('create table notes (text varchar)');
        // Resolved before the first request, as RequestCycle::boot() warms
        // them: shared by every sandbox.
        $app->make('translator');
        $app->make('cookie');
        $reset = Reset::snapshot($app);
        $idle = $app->make('request');

        $sandbox = clone $app;
        Reset::switchTo($sandbox);
        $request = Request::create('http://localhost/a');
        $reset->prepare($sandbox, $request);
        self::assertSame($request, $sandbox->make('request'));
        self::assertSame($sandbox, \Illuminate\Container\Container::getInstance());
        $sandbox->setLocale('fr');
        $sandbox->make('cookie')->queue('note', 'a', 1);
        $db->beginTransaction();
        $db->insert('insert into notes values (?)', ['uncommitted']);
        self::assertSame('fr', $app->make('translator')->getLocale());
        self::assertSame('en', $app->make('config')->get('app.locale'), 'the request has its own config');

        Reset::switchTo($app);
        $reset->restore($app, $idle);

        self::assertSame('en', $app->make('translator')->getLocale());
        self::assertSame([], $app->make('cookie')->getQueuedCookies());
        self::assertSame(0, $db->transactionLevel());
        self::assertSame([], $db->select('select * from notes'));
        self::assertSame($idle, $app->make('request'));
        self::assertSame($app, \Illuminate\Container\Container::getInstance());
    }

    public function testResetCallbacksAreKeptInOrder(): void
    {
        $first = static function (): void {
        };
        $second = static function (): void {
        };
        Worker::onReset($first);
        Worker::onReset($second);
        self::assertSame([$first, $second], Worker::resetCallbacks());
    }

    public function testBootVariablesLeaveOutRequestHeaders(): void
    {
        self::assertSame(
            ['APP_ENV' => 'production', 'PATH' => '/usr/bin'],
            RequestCycle::bootVariables(['APP_ENV' => 'production', 'HTTP_HOST' => 'x', 'PATH' => '/usr/bin']),
        );
    }
}
