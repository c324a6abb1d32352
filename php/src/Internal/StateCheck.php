<?php

declare(strict_types=1);

namespace Hearth\Internal;

/**
 * The state check (`hearth serve --check-state`, for staging): after each
 * request, what the worker kept that the next request will find, logged
 * with the request that left it.
 *
 * After boot, and again after every request, it takes a snapshot of what
 * outlives a request in a PHP process: global variables, static
 * properties of the loaded classes, static variables of their methods and
 * of functions, and every object reachable from those and from the worker
 * handler's bound variables (the booted app), with the values of their
 * properties. A request is then compared with the snapshot before it:
 *
 * - a value that existed and was changed (a static, a global, a property
 *   of an object that outlived the request), or a global that is new, is
 *   state the next request sees;
 * - a request object (Symfony's, Laravel's or a PSR-7 one) made by the
 *   request and still reachable after it is a request held by the app;
 * - a PDO, Laravel or Doctrine connection still in a transaction, and a
 *   Symfony or Laravel session still started, are left open;
 * - output buffers the request left open and settings it changed, which
 *   Hearth closes and puts back (another worker server might not);
 * - memory that keeps growing: reported at every MiB past what the worker
 *   used after its first request.
 *
 * What a request only adds is not reported as such: an array that gains
 * keys (a cache filling), a property or static set for the first time (a
 * service built lazily, a memoized value), objects created and kept (the
 * services of a first request). Those are how frameworks finish booting
 * during the first requests; if they keep growing, the memory report says
 * so. Each place is reported once per worker, at the first request that
 * changed it. Values are shown by type (and integers, floats and booleans
 * by value), never the content of strings, which may be personal data.
 *
 * It costs a walk over the app's objects after every request (milliseconds
 * for a framework app): for staging and tests, not production.
 *
 * @internal
 */
final class StateCheck
{
    /** Objects visited per snapshot at most; the rest is not checked. */
    private const MAX_OBJECTS = 250000;

    /** Nested arrays are compared element by element to this depth, then as a whole. */
    private const MAX_DEPTH = 6;

    /** Memory growth past the first request is reported in steps of this. */
    private const MEMORY_STEP = 1048576;

    /** Shorter values of a request are not looked for in what it left. */
    private const MIN_REQUEST_DATA = 4;

    /** An array that gains entries on this many repeats of one kind of request is reported as growing. */
    private const GROWING_REPEATS = 3;

    /** Findings listed per request at most; the rest are counted. */
    private const MAX_FINDINGS = 40;

    private const SUPERGLOBALS = [
        'GLOBALS', '_GET', '_POST', '_COOKIE', '_FILES', '_SERVER', '_ENV', '_REQUEST', '_SESSION',
        'argv', 'argc', 'http_response_header',
    ];

    /** Request classes: one made by a request and still reachable after it is held by the app. */
    private const REQUEST_CLASSES = [
        'Symfony\Component\HttpFoundation\Request',
        'Psr\Http\Message\ServerRequestInterface',
    ];

    /** @var \WeakMap<object, array<string, string|array<mixed>>> every object of the snapshot and its properties */
    private \WeakMap $objects;
    /** @var array<string, string|array<mixed>> globals, statics and static variables, by place */
    private array $slots = [];
    /** @var array<string, string> where each object of the snapshot was found, by object id */
    private array $paths = [];
    /** @var array<class-string, list<\ReflectionProperty>> static properties declared by each user class */
    private array $staticProperties = [];
    /** @var array<class-string, list<\ReflectionMethod>> methods with static variables, by user class */
    private array $staticMethods = [];
    /** @var array<string, true> classes and functions already looked at */
    private array $known = [];
    /** @var array<string, true> places already reported */
    private array $reported = [];
    /** @var list<string> what this request left, beyond the snapshot's comparison */
    private array $notes = [];
    /** @var array<string, string|null> the settings at boot */
    private readonly array $ini;
    /** Hearth puts back every setting after every request (see start()). */
    private bool $everySetting = false;
    private int $outputLevel = 0;
    private int $requests = 0;
    /** Memory in use after the last request. */
    private int $memoryBefore = 0;
    /** @var array<string, int> memory kept by the repeats of each kind of request */
    private array $kinds = [];
    private int $repeatedGrowth = 0;
    /** The request being compared is of a kind seen before (same method, path but for numbers). */
    private bool $repeat = false;
    private string $kind = '';
    /** @var array<string, int> arrays, by place and kind of request, and how many repeats of it added to them */
    private array $growing = [];
    private int $memoryReported = 0;
    private bool $limitLogged = false;
    /** @var list<string> values the current request brought (query, form, cookies, path segments) */
    private array $requestData = [];
    /** @var \WeakMap<object, string> request objects, and the request that made each */
    private \WeakMap $requestObjects;
    /**
     * What libraries used without a Hearth integration rewrite by design
     * (see ignore()): Twig's and the YAML parser's scratch state while
     * they compile and parse, a Slim 3 route's arguments (put back when
     * the route is next dispatched) and its flag of having been built;
     * and Hearth\Jobs' connections, kept open from call to call on purpose.
     */
    private const LIBRARY_IGNORES = [
        'Hearth\\Jobs::$connections',
        'Hearth\\Jobs::$lastId',
        'Twig\\Compiler',
        'Twig\\Lexer',
        'Twig\\Parser',
        'Symfony\\Component\\Yaml\\*',
        'Slim\\Route->arguments',
        'Slim\\Route->finalized',
    ];

    /** @var list<string> patterns of what changes by design (see ignore()) */
    private static array $ignored = self::LIBRARY_IGNORES;
    /** @var array<string, bool> ignored(), by class */
    private static array $ignoredClasses = [];

    private static ?self $current = null;

    /**
     * @param list<mixed> $roots what the worker's handler holds (its bound
     *                           variables and object), walked as the app
     */
    private function __construct(private readonly array $roots)
    {
        $ini = ini_get_all(null, false);
        unset($ini['max_execution_time']);
        $this->ini = $ini;
        $this->objects = new \WeakMap();
        $this->requestObjects = new \WeakMap();
        $this->snapshot();
        foreach ($this->objects as $object => $_) {
            if (self::isRequest($object)) {
                // The app's own, from its boot (an idle request).
                $this->requestObjects[$object] = '';
            }
        }
        gc_collect_cycles();
        $this->memoryBefore = memory_get_usage();
    }

    /**
     * What changes by design: a class (or an interface or parent class of
     * it; `*` matches as in fnmatch()), whose objects' state is neither
     * compared nor walked into; a static, `Class::$name`; a property,
     * `Class->name`. Hearth's framework integrations add the parts of
     * their framework that are rewritten on every request or keep
     * scratch state.
     */
    public static function ignore(string ...$patterns): void
    {
        array_push(self::$ignored, ...$patterns);
        self::$ignoredClasses = [];
    }

    /** Whether a property is ignored (a pattern `Class->name`, for the class or a parent or interface). */
    private function ignoredProperty(object $object, string $name): bool
    {
        foreach (self::$ignored as $pattern) {
            $at = strpos($pattern, '->');
            if ($at !== false && substr($pattern, $at + 2) === $name && $object instanceof (substr($pattern, 0, $at))) {
                return true;
            }
        }
        return false;
    }

    /** Whether a class, or a static as `Class::$name`, is ignored: by name, or for a class by a parent or interface. */
    private static function ignored(string $name): bool
    {
        foreach (self::$ignored as $pattern) {
            if (str_contains($pattern, '*') ? fnmatch($pattern, $name, FNM_NOESCAPE) : $pattern === $name) {
                return true;
            }
        }
        if (!str_contains($name, '::')) {
            foreach ([...class_parents($name) ?: [], ...class_implements($name) ?: []] as $parent) {
                if (in_array($parent, self::$ignored, true)) {
                    return true;
                }
            }
        }
        return false;
    }

    /** Whether Hearth asked for the check (`--check-state`). */
    public static function requested(): bool
    {
        return getenv('HEARTH_CHECK_STATE') === '1';
    }

    /**
     * Starts the check once the app has booted; $handler is the worker's
     * request handler. $everySetting: Hearth puts back every setting after
     * every request (Baseline::$everySetting), so none can reach the next.
     */
    public static function start(callable $handler, bool $everySetting = false): self
    {
        $roots = [];
        try {
            $closure = \Closure::fromCallable($handler);
            $function = new \ReflectionFunction($closure);
            $this_ = $function->getClosureThis();
            if ($this_ !== null) {
                $roots['$this'] = $this_;
            }
            foreach ($function->getStaticVariables() as $name => $value) {
                $roots['$' . $name] = $value;
            }
        } catch (\ReflectionException) {
        }
        self::$current = new self($roots);
        self::$current->everySetting = $everySetting;
        Log::write('state check on: after each request this worker reports what it kept for the next one '
            . '(for staging: it costs a walk over the app\'s objects per request)');
        return self::$current;
    }

    /**
     * Something the app's integration put back after a request, for the
     * report (a transaction Hearth's Laravel worker rolled back).
     */
    public static function note(string $finding): void
    {
        if (self::$current !== null) {
            self::$current->notes[] = $finding;
        }
    }

    /** Just before the handler runs. */
    public function beforeHandler(): void
    {
        $this->outputLevel = ob_get_level();
        $data = [];
        array_walk_recursive($_GET, static function (mixed $v) use (&$data): void {
            $data[] = (string) $v;
        });
        array_walk_recursive($_POST, static function (mixed $v) use (&$data): void {
            $data[] = (string) $v;
        });
        foreach ($_COOKIE as $v) {
            if (is_string($v)) {
                $data[] = $v;
            }
        }
        $path = (string) parse_url((string) ($_SERVER['REQUEST_URI'] ?? ''), PHP_URL_PATH);
        array_push($data, ...explode('/', rawurldecode($path)));
        $this->requestData = array_values(array_unique(array_filter(
            $data,
            static fn (string $v): bool => strlen($v) >= self::MIN_REQUEST_DATA,
        )));
    }

    /** Just after the handler returns, before Hearth ends the response and puts settings back. */
    public function afterHandler(): void
    {
        $open = ob_get_level() - $this->outputLevel;
        if ($open > 0) {
            $names = array_map(
                static fn (array $s): string => (string) ($s['name'] ?? '?'),
                array_slice(ob_get_status(true), -$open),
            );
            $this->notes[] = sprintf(
                '%d output buffer%s open (%s); Hearth ended %s',
                $open,
                $open === 1 ? '' : 's',
                implode(', ', $names),
                $open === 1 ? 'it' : 'them',
            );
        }
        // Settings Hearth puts back after every request (Baseline's
        // watched list, the timezone; with the extension, all of them)
        // cannot reach the next one.
        if (!$this->everySetting) {
            $this->settingsLeft();
        }
    }

    /**
     * Without the extension: settings outside Baseline's watched list the
     * request changed, which Hearth puts back only every FULL_INI_CHECK
     * requests.
     */
    private function settingsLeft(): void
    {
        foreach (ini_get_all(null, false) as $name => $value) {
            $boot = array_key_exists($name, $this->ini) ? $this->ini[$name] : $value;
            if (
                $boot !== $value && $name !== 'max_execution_time' && !str_starts_with($name, 'session.')
                && !in_array($name, Baseline::WATCHED_INI, true)
            ) {
                $this->once('ini ' . $name, sprintf(
                    'setting %s changed from %s to %s (Hearth puts such settings back every %d requests; '
                    . 'set it at boot, or put it back)',
                    $name,
                    var_export($boot, true),
                    var_export($value, true),
                    Baseline::FULL_INI_CHECK,
                ));
            }
        }
    }

    /** Once the request is over and reset: compares, reports, and takes the next snapshot. */
    public function afterRequest(string $method, string $uri): void
    {
        $this->requests++;
        $before = $this->objects;
        $beforeSlots = $this->slots;
        $findings = $this->notes;
        $this->notes = [];

        $this->objects = new \WeakMap();
        $this->slots = [];
        $this->paths = [];
        $open = $this->snapshot();
        $this->requestData = [];
        $kind = $method . ' ' . preg_replace('/\d+/', '#', (string) parse_url($uri, PHP_URL_PATH));
        $this->repeat = isset($this->kinds[$kind]);
        $this->kind = $kind;

        foreach ($this->slots as $place => $value) {
            if (array_key_exists($place, $beforeSlots)) {
                $this->compare($place, $beforeSlots[$place], $value, $findings);
            } elseif (str_starts_with($place, '$')) {
                $finding = sprintf('a new global variable, %s (%s)', $place, self::describe($value));
                $this->once($place, $finding, $findings);
            }
        }
        foreach ($this->objects as $object => $properties) {
            if (isset($before[$object])) {
                $path = $this->paths[spl_object_id($object)] ?? get_class($object);
                foreach ($properties as $name => $value) {
                    if (array_key_exists($name, $before[$object]) && !$this->ignoredProperty($object, (string) $name)) {
                        $this->compare($path . '->' . $name, $before[$object][$name], $value, $findings);
                    }
                }
            }
            if (self::isRequest($object)) {
                // The last request held until the next replaces it (a
                // router's context, an error handler's) is how frameworks
                // work; one still held after the next request is stale.
                if (!isset($this->requestObjects[$object])) {
                    $this->requestObjects[$object] = sprintf('%s %s', $method, $uri);
                } elseif ($this->requestObjects[$object] !== '') {
                    $path = $this->paths[spl_object_id($object)] ?? get_class($object);
                    $this->once('request ' . $path, sprintf(
                        'the %s of an earlier request (%s) still held at %s',
                        get_class($object),
                        $this->requestObjects[$object],
                        $path,
                    ), $findings);
                    $this->requestObjects[$object] = '';
                }
            }
        }
        foreach ($open as $place => $what) {
            $this->once('open ' . $place, sprintf('%s open, at %s', $what, $place), $findings);
        }

        // A request seen before (same method, same path but for numbers)
        // that still keeps memory is a leak; the first of its kind may
        // build services and fill caches for good.
        gc_collect_cycles();
        $memory = memory_get_usage();
        $kept = $memory - $this->memoryBefore;
        $this->memoryBefore = $memory;
        if ($this->repeat && $kept > 0) {
            $this->kinds[$kind] += $kept;
            $this->repeatedGrowth += $kept;
            if ($this->repeatedGrowth >= $this->memoryReported + self::MEMORY_STEP) {
                arsort($this->kinds);
                $findings[] = sprintf(
                    'memory growing: repeated requests have kept %.1f MiB (the worker now uses %.1f MiB); '
                    . 'most by %s (%.1f MiB)',
                    $this->repeatedGrowth / 1048576,
                    $memory / 1048576,
                    array_key_first($this->kinds),
                    reset($this->kinds) / 1048576,
                );
                $this->memoryReported = $this->repeatedGrowth - $this->repeatedGrowth % self::MEMORY_STEP;
            }
        } else {
            $this->kinds[$kind] ??= 0;
        }

        $more = count($findings) - self::MAX_FINDINGS;
        foreach (array_slice($findings, 0, self::MAX_FINDINGS) as $finding) {
            Log::write(sprintf('state check: %s %s left %s', $method, $uri, $finding));
        }
        if ($more > 0) {
            Log::write(sprintf('state check: %s %s left %d more changes', $method, $uri, $more));
        }
    }

    /**
     * Reports a place once per worker.
     *
     * @param list<string>|null $findings where to add it (the current request's, when null)
     */
    private function once(string $place, string $finding, ?array &$findings = null): void
    {
        if (isset($this->reported[$place])) {
            return;
        }
        $this->reported[$place] = true;
        if ($findings === null) {
            $this->notes[] = $finding;
        } else {
            $findings[] = $finding;
        }
    }

    /**
     * A value before and after a request, as fingerprint() made them.
     *
     * @param string|array<mixed> $old
     * @param string|array<mixed> $new
     * @param list<string>        $findings
     */
    private function compare(string $place, string|array $old, string|array $new, array &$findings): void
    {
        if ($old === $new) {
            return;
        }
        if (is_array($old) && is_array($new)) {
            // Keys added are a cache filling, unless requests seen before
            // keep adding them; a key kept is compared.
            if ($this->repeat && count(array_diff_key($new, $old)) > 0) {
                $key = $place . "\0" . $this->kind;
                $this->growing[$key] = ($this->growing[$key] ?? 0) + 1;
                if ($this->growing[$key] === self::GROWING_REPEATS) {
                    $this->once($place . ' grows', sprintf(
                        '%s growing: entries added by %d repeats of this request (now %d)',
                        $place,
                        self::GROWING_REPEATS,
                        count($new),
                    ), $findings);
                }
            }
            foreach ($old as $key => $value) {
                if (array_key_exists($key, $new)) {
                    $this->compare($place . '[' . var_export($key, true) . ']', $value, $new[$key], $findings);
                }
            }
            return;
        }
        if (
            is_string($old) && is_string($new) && $old !== '' && $new !== ''
            && ($old[0] === 's' || $old[0] === 'S') && ($new[0] === 's' || $new[0] === 'S')
            && substr($old, 1) === substr($new, 1)
        ) {
            return;
        }
        if (is_string($new) && self::unset($new)) {
            // Emptied: nothing is carried to the next request.
            return;
        }
        if (is_string($old) && is_string($new) && str_starts_with($old, 'c:') && str_starts_with($new, 'o:')) {
            // A factory replaced by what it made: a service resolved lazily.
            return;
        }
        if (self::unset($old) && !(is_string($new) && str_starts_with($new, 'S:'))) {
            // Set for the first time (a service, a cache, a flag built
            // lazily) with nothing from the request in it.
            return;
        }
        $finding = sprintf('%s changed: %s -> %s', $place, self::describe($old), self::describe($new, $old));
        $this->once($place, $finding, $findings);
    }

    /** @param string|array<mixed> $value */
    private static function unset(string|array $value): bool
    {
        return $value === 'n' || $value === 'u' || $value === 'a:0' || $value === [];
    }

    /**
     * A fingerprint, for the log.
     *
     * @param string|array<mixed>      $value
     * @param string|array<mixed>|null $was  the value it replaced
     */
    private static function describe(string|array $value, string|array|null $was = null): string
    {
        if (
            is_string($was) && is_string($value) && $was !== '' && $value[0] === 's'
            && ($was[0] === 's' || $was[0] === 'S')
        ) {
            return 'another string(' . explode(':', $value, 3)[1] . ')';
        }
        if (is_array($value)) {
            return 'array(' . count($value) . ')';
        }
        return match ($value[0]) {
            'n' => 'null',
            'u' => 'uninitialized',
            'b' => $value === 'b:1' ? 'true' : 'false',
            'i' => 'int ' . substr($value, 2),
            'd' => 'float ' . substr($value, 2),
            's' => 'string(' . explode(':', $value, 3)[1] . ')',
            'S' => 'string(' . explode(':', $value, 3)[1] . ') with data from the request',
            'o' => explode('#', substr($value, 2), 2)[0] . ' object',
            'c' => 'a Closure',
            'e' => 'enum ' . substr($value, 2),
            'r' => 'resource ' . explode('#', substr($value, 2), 2)[0],
            'a' => 'array(' . substr($value, 2) . ')',
            default => $value,
        };
    }

    /**
     * Takes the snapshot: every place that outlives a request, and every
     * object reachable from them.
     *
     * @return array<string, string> what is left open (transactions, sessions), by where it was found
     */
    private function snapshot(): array
    {
        /** @var list<array{object, string}> $queue */
        $queue = [];
        foreach ($GLOBALS as $name => $value) {
            if (!in_array($name, self::SUPERGLOBALS, true)) {
                $this->slots['$' . $name] = $this->fingerprint($value, '$' . $name, $queue, 0);
            }
        }
        foreach ($this->roots as $name => $value) {
            $this->slots['handler ' . $name] = $this->fingerprint($value, $name, $queue, 0);
        }
        $this->learnClasses();
        foreach ($this->staticProperties as $class => $properties) {
            foreach ($properties as $property) {
                $place = $class . '::$' . $property->getName();
                if (self::$ignored !== [] && (self::ignored($class) || self::ignored($place))) {
                    continue;
                }
                $value = $property->isInitialized() ? $property->getValue() : null;
                $this->slots[$place] = $property->isInitialized()
                    ? $this->fingerprint($value, $place, $queue, 0)
                    : 'u';
            }
        }
        foreach ($this->staticMethods as $class => $methods) {
            if (self::$ignored !== [] && self::ignored($class)) {
                continue;
            }
            foreach ($methods as $method) {
                foreach ($method->getStaticVariables() as $name => $value) {
                    $place = $class . '::' . $method->getName() . '() static $' . $name;
                    $this->slots[$place] = $this->fingerprint($value, $place, $queue, 0);
                }
            }
        }
        foreach (get_defined_functions()['user'] as $function) {
            foreach ((new \ReflectionFunction($function))->getStaticVariables() as $name => $value) {
                $place = $function . '() static $' . $name;
                $this->slots[$place] = $this->fingerprint($value, $place, $queue, 0);
            }
        }

        $open = [];
        $visited = 0;
        // Breadth first, so that each object is named by its shortest path.
        for ($next = 0; $next < count($queue); $next++) {
            [$object, $path] = $queue[$next];
            if (isset($this->objects[$object])) {
                continue;
            }
            if (++$visited > self::MAX_OBJECTS) {
                if (!$this->limitLogged) {
                    $this->limitLogged = true;
                    Log::write(sprintf(
                        'state check: the app holds more than %d objects; the rest are not checked',
                        self::MAX_OBJECTS,
                    ));
                }
                break;
            }
            $this->paths[spl_object_id($object)] = $path;
            $this->objects[$object] = $this->properties($object, $path, $queue);
            $left = self::leftOpen($object);
            if ($left !== null) {
                $open[$path] = $left;
            }
        }
        return $open;
    }

    /** Finds the static properties and the methods with static variables of classes loaded since the last snapshot. */
    private function learnClasses(): void
    {
        foreach (get_declared_classes() as $class) {
            if (isset($this->known[$class])) {
                continue;
            }
            $this->known[$class] = true;
            $reflection = new \ReflectionClass($class);
            if ($reflection->isInternal() || str_starts_with($class, 'Hearth\\Internal\\')) {
                continue;
            }
            $statics = [];
            foreach ($reflection->getProperties(\ReflectionProperty::IS_STATIC) as $property) {
                if ($property->getDeclaringClass()->getName() === $class) {
                    $statics[] = $property;
                }
            }
            $methods = [];
            foreach ($reflection->getMethods() as $method) {
                if ($method->getDeclaringClass()->getName() === $class && $method->getStaticVariables() !== []) {
                    $methods[] = $method;
                }
            }
            if ($statics !== []) {
                $this->staticProperties[$class] = $statics;
                if ($this->requests > 0) {
                    // Loaded by the last request: compared with its declared defaults.
                    foreach ($statics as $property) {
                        $place = $class . '::$' . $property->getName();
                        $none = [];
                        $this->slots[$place] = $property->hasDefaultValue()
                            ? $this->fingerprint($property->getDefaultValue(), $place, $none, self::MAX_DEPTH)
                            : 'u';
                    }
                }
            }
            if ($methods !== []) {
                $this->staticMethods[$class] = $methods;
            }
        }
    }

    /**
     * An object's properties, fingerprinted; the objects they hold are queued.
     *
     * @param list<array{object, string}> $queue
     * @return array<string, string|array<mixed>>
     */
    private function properties(object $object, string $path, array &$queue): array
    {
        if ($object instanceof \Closure) {
            $function = new \ReflectionFunction($object);
            $properties = [];
            $this_ = $function->getClosureThis();
            if ($this_ !== null) {
                $properties['$this'] = $this->fingerprint($this_, $path . ' $this', $queue, 0);
            }
            foreach ($function->getStaticVariables() as $name => $value) {
                $properties['$' . $name] = $this->fingerprint($value, $path . ' $' . $name, $queue, 0);
            }
            return $properties;
        }
        if (self::isOpaque($object)) {
            return [];
        }
        $properties = [];
        $vars = $object instanceof \ArrayObject || $object instanceof \ArrayIterator
            ? ['storage' => $object->getArrayCopy()]
            : get_mangled_object_vars($object);
        foreach ($vars as $name => $value) {
            $name = (string) $name;
            if ($name !== '' && $name[0] === "\0") {
                $name = substr($name, strrpos($name, "\0") + 1);
            }
            $properties[$name] = $this->fingerprint($value, $path . '->' . $name, $queue, 0);
        }
        if ($object instanceof \SplObjectStorage) {
            $i = 0;
            foreach ($object as $member) {
                $properties['[' . $i . ']'] = $this->fingerprint($member, $path . '[' . $i . ']', $queue, 0);
                $i++;
            }
        }
        return $properties;
    }

    /**
     * A value as the snapshot keeps it: a string for a scalar, an object
     * (its class and identity) or a resource; an array of those for an
     * array. Objects are queued to be walked.
     *
     * @param list<array{object, string}> $queue
     * @return string|array<mixed>
     */
    private function fingerprint(mixed $value, string $path, array &$queue, int $depth): string|array
    {
        switch (true) {
            case $value === null:
                return 'n';
            case is_bool($value):
                return $value ? 'b:1' : 'b:0';
            case is_int($value):
                return 'i:' . $value;
            case is_float($value):
                return 'd:' . var_export($value, true);
            case is_string($value):
                return ($this->fromRequest($value) ? 'S:' : 's:') . strlen($value) . ':'
                    . (strlen($value) <= 32 ? $value : md5($value));
            case is_array($value):
                if ($depth >= self::MAX_DEPTH) {
                    return 'a:' . count($value) . ':' . md5(serialize(self::shallow($value)));
                }
                $out = [];
                foreach ($value as $key => $item) {
                    $where = $path . '[' . var_export($key, true) . ']';
                    $out[$key] = $this->fingerprint($item, $where, $queue, $depth + 1);
                }
                return $out;
            case $value instanceof \UnitEnum:
                return 'e:' . $value::class . '::' . $value->name;
            case $value instanceof \Closure:
                $queue[] = [$value, $path];
                return 'c:' . spl_object_id($value);
            case is_object($value):
                if (!isset($this->objects[$value])) {
                    $queue[] = [$value, $path];
                }
                return 'o:' . $value::class . '#' . spl_object_id($value);
            default:
                return 'r:' . get_resource_type($value) . '#' . get_resource_id($value);
        }
    }

    /** Whether $value holds a value the current request brought. */
    private function fromRequest(string $value): bool
    {
        if (strlen($value) < self::MIN_REQUEST_DATA) {
            return false;
        }
        foreach ($this->requestData as $data) {
            if (str_contains($value, $data)) {
                return true;
            }
        }
        return false;
    }

    /**
     * A deep array with its objects replaced by their identity, to hash.
     *
     * @param array<mixed> $value
     * @return array<mixed>
     */
    private static function shallow(array $value): array
    {
        array_walk_recursive($value, static function (mixed &$item): void {
            if (is_object($item)) {
                $item = 'o#' . spl_object_id($item);
            } elseif (is_resource($item)) {
                $item = 'r#' . get_resource_id($item);
            }
        });
        return $value;
    }

    /** Objects whose state is not theirs to show, or not the app's. */
    private static function isOpaque(object $object): bool
    {
        return $object instanceof \WeakMap || $object instanceof \WeakReference || $object instanceof \Generator
            || $object instanceof \Fiber || $object instanceof \Reflector || $object instanceof self
            || str_starts_with($object::class, 'Hearth\\Internal\\')
            // A request's content is that request's; one held too long is
            // reported as a whole. A session's data is read again when the
            // next request starts it; one left started is reported.
            || self::isRequest($object)
            || $object instanceof \Symfony\Component\HttpFoundation\Session\SessionInterface
            || $object instanceof \Illuminate\Session\Store
            || $object instanceof \SimpleXMLElement
            || (self::$ignored !== [] && (self::$ignoredClasses[$object::class] ??= self::ignored($object::class)));
    }

    private static function isRequest(object $object): bool
    {
        foreach (self::REQUEST_CLASSES as $class) {
            if ($object instanceof $class) {
                return true;
            }
        }
        return false;
    }

    /** What $object holds open for the next request: a transaction, a session. */
    private static function leftOpen(object $object): ?string
    {
        try {
            return match (true) {
                $object instanceof \PDO => $object->inTransaction() ? 'a PDO transaction' : null,
                $object instanceof \Illuminate\Database\Connection => $object->transactionLevel() > 0
                    ? 'a database transaction (' . $object->getName() . ')' : null,
                $object instanceof \Doctrine\DBAL\Connection => $object->isTransactionActive()
                    ? 'a Doctrine transaction' : null,
                $object instanceof \Symfony\Component\HttpFoundation\Session\SessionInterface,
                $object instanceof \Illuminate\Session\Store => $object->isStarted() ? 'a started session' : null,
                default => null,
            };
        } catch (\Throwable) {
            return null;
        }
    }
}
