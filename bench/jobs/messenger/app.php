<?php

/**
 * The Symfony Messenger side of bench/jobs.py: a small console app built
 * from Debian's Symfony 5.4 packages (php-symfony-messenger,
 * php-symfony-redis-messenger, their autoloaders under /usr/share/php; no
 * Composer), with one message, BenchJobs\Messenger\Run, one handler that
 * calls the shared job (../jobs.php), and one transport, `redis`: the
 * Redis transport (a Redis stream and a consumer group, through phpredis).
 *
 * The bus has the two middlewares that move a message: send (to the
 * transport the routing names) and handle (call the handler of a received
 * message). FrameworkBundle's default bus adds a few more (bus name stamp,
 * reject redelivered, dispatch after current bus, failed message
 * processing); they are left out, which can only make Messenger faster.
 *
 * Environment: BENCH_REDIS=HOST:PORT, MESSENGER_CONSUMER (this consumer's
 * name in the group; each consumer process needs its own, as Symfony's
 * documentation says for several workers).
 *
 * Returns a function that builds [bus, console application].
 */

declare(strict_types=1);

namespace BenchJobs\Messenger;

require_once '/usr/share/php/Symfony/Component/Messenger/autoload.php';
require_once '/usr/share/php/Symfony/Component/Console/autoload.php';
require_once '/usr/share/php/Symfony/Component/EventDispatcher/autoload.php';
require_once dirname(__DIR__) . '/jobs.php';

use Psr\Container\ContainerInterface;
use Psr\Container\NotFoundExceptionInterface;
use Symfony\Component\Console\Application;
use Symfony\Component\EventDispatcher\EventDispatcher;
use Symfony\Component\Messenger\Bridge\Redis\Transport\RedisTransportFactory;
use Symfony\Component\Messenger\Command\ConsumeMessagesCommand;
use Symfony\Component\Messenger\EventListener\StopWorkerOnSigtermSignalListener;
use Symfony\Component\Messenger\Handler\HandlersLocator;
use Symfony\Component\Messenger\MessageBus;
use Symfony\Component\Messenger\Middleware\HandleMessageMiddleware;
use Symfony\Component\Messenger\Middleware\SendMessageMiddleware;
use Symfony\Component\Messenger\RoutableMessageBus;
use Symfony\Component\Messenger\Transport\Sender\SendersLocator;
use Symfony\Component\Messenger\Transport\Serialization\PhpSerializer;

/** The message: which job, with what argument. */
final class Run
{
    public function __construct(public string $kind, public int $arg)
    {
    }
}

/** Its handler: the shared job. */
final class RunHandler
{
    public function __invoke(Run $message): void
    {
        \BenchJobs\run($message->kind, $message->arg);
    }
}

/** A PSR-11 container of fixed services (what FrameworkBundle's service locators are). */
final class Services implements ContainerInterface
{
    /** @param array<string, object> $services */
    public function __construct(private array $services)
    {
    }

    public function get(string $id): object
    {
        return $this->services[$id] ?? throw new class ("no service $id") extends \RuntimeException implements NotFoundExceptionInterface {
        };
    }

    public function has(string $id): bool
    {
        return isset($this->services[$id]);
    }
}

return static function (): array {
    $redis = (string) getenv('BENCH_REDIS');
    $consumer = (string) (getenv('MESSENGER_CONSUMER') ?: 'producer');
    // The DSN of Symfony's documentation, redis://HOST:PORT/STREAM/GROUP/CONSUMER;
    // delete_after_ack as Messenger 6 defaults to (5.4 asks for it to be set).
    $transport = (new RedisTransportFactory())->createTransport(
        "redis://$redis/bench-messages/bench/$consumer",
        ['delete_after_ack' => true],
        new PhpSerializer(),
    );
    $transports = new Services(['redis' => $transport]);
    $bus = new MessageBus([
        new SendMessageMiddleware(new SendersLocator([Run::class => ['redis']], $transports)),
        new HandleMessageMiddleware(new HandlersLocator([Run::class => [new RunHandler()]])),
    ]);
    $dispatcher = new EventDispatcher();
    $dispatcher->addSubscriber(new StopWorkerOnSigtermSignalListener());
    $console = new Application('bench-messenger');
    $console->add(new ConsumeMessagesCommand(
        new RoutableMessageBus(new Services([]), $bus),
        $transports,
        $dispatcher,
        null,
        ['redis'],
    ));
    return [$bus, $console];
};
