<?php

declare(strict_types=1);

namespace Hearth\Internal;

/**
 * Fills superglobals the way PHP's own request startup does, from userland.
 *
 * Names go through parse_str(), which is the engine's own variable
 * registration (php_register_variable): "a[b][]" makes arrays, "a.b" becomes
 * "a_b", max_input_vars applies. Only what parse_str() cannot know is done here.
 *
 * @internal
 */
final class Globals
{
    /**
     * $_COOKIE from a Cookie header, as PHP builds it: pairs split on ";",
     * leading blanks of names dropped, names left undecoded, values
     * raw-URL-decoded ("+" stays "+"), and a cookie with a plain name (no
     * "[...]" index) is dropped when its key is already taken, by an earlier
     * plain cookie or by an array ("a[x]=1; a=2" keeps the array); a name
     * that mangling would turn into "__Host-..." or "__Secure-..." is dropped.
     *
     * @return array<array-key, mixed>
     */
    public static function cookies(string $header): array
    {
        $query = '';
        $taken = [];
        foreach (explode(';', $header) as $pair) {
            $pair = ltrim($pair, " \t\n\r\v\f");
            if ($pair === '') {
                continue;
            }
            $eq = strpos($pair, '=');
            if ($eq === 0) {
                continue;
            }
            $name = $eq === false ? $pair : substr($pair, 0, $eq);
            $value = $eq === false ? '' : rawurldecode(substr($pair, $eq + 1));
            [$key, $plain] = self::cookieKey($name);
            // A forbidden name is dropped before it can take its key, so a
            // later, real "__Host-x" still gets in.
            if ($key === '' || self::isForbiddenName($key, $name) || ($plain && isset($taken[$key]))) {
                continue;
            }
            $taken[$key] = true;
            // parse_str() URL-decodes names; cookie names are not decoded,
            // so escape what decoding would change or what would split the pair.
            $query .= ($query === '' ? '' : '&')
                . strtr($name, ['%' => '%25', '+' => '%2B', '&' => '%26'])
                . '=' . rawurlencode($value);
        }
        $cookies = [];
        if ($query !== '') {
            parse_str($query, $cookies);
        }
        return $cookies;
    }

    /**
     * $_POST and $_FILES from a multipart form that Hearth parsed.
     *
     * Each entry is [name, value] for a field, or [name, full_path, type,
     * tmp_name, error, size] for a file, in the order they arrived, so
     * "files[]" numbers them as PHP would. Like PHP, a file whose name has
     * brackets that would need repairing ("a[b", "a]", "a[b]c") is dropped,
     * and so is every file after it in the form (main/rfc1867.c never
     * resets its skip_upload flag); fields are kept.
     *
     * @param list<array<int, string|int>> $entries
     * @return array{0: array<array-key, mixed>, 1: array<array-key, mixed>, 2: list<string>}
     *         $_POST, $_FILES and the temporary files to accept in move_uploaded_file()
     */
    public static function form(array $entries): array
    {
        $fields = '';
        $files = [];
        $uploaded = [];
        $skipFiles = false;
        foreach ($entries as $entry) {
            $name = (string) $entry[0];
            if (count($entry) === 2) {
                $fields .= ($fields === '' ? '' : '&') . self::encodeName($name)
                    . '=' . rawurlencode((string) $entry[1]);
                continue;
            }
            $skipFiles = $skipFiles || !self::hasCleanBrackets($name);
            if ($skipFiles) {
                continue;
            }
            [, $fullPath, $type, $tmp, $error, $size] = $entry;
            $attributes = [
                'name' => self::basename((string) $fullPath),
                'full_path' => (string) $fullPath,
                'type' => (string) $type,
                'tmp_name' => (string) $tmp,
                'error' => (int) $error,
                'size' => (int) $size,
            ];
            self::registerFile($files, $name, $attributes);
            if ($tmp !== '') {
                $uploaded[] = (string) $tmp;
            }
        }
        $post = [];
        if ($fields !== '') {
            parse_str($fields, $post);
        }
        return [$post, $files, $uploaded];
    }

    /**
     * Adds one file to $_FILES under `$name`, each attribute inserted after
     * the name's first segment, as PHP does: "doc[a][]" becomes
     * "doc[name][a][]", "doc[type][a][]"...
     *
     * Unlike fields, files do not count against max_input_vars in PHP, so
     * they are not registered through one parse_str() of them all (which
     * stops at max_input_vars variables, six per file). parse_str() of the
     * name alone still says what PHP makes of it (" " and "." in the first
     * segment become "_", numeric keys become integers, a name too deeply
     * nested is dropped); a "[]" segment appends, as in PHP.
     *
     * @param array<array-key, mixed> $files
     * @param array<string, string|int> $attributes
     */
    private static function registerFile(array &$files, string $name, array $attributes): void
    {
        $probe = [];
        parse_str(self::encodeName($name) . '=', $probe);
        if ($probe === []) {
            return;
        }
        // The keys PHP made of the name, one per segment: parse_str() of
        // a single variable gives a chain of one-entry arrays.
        $keys = [];
        $node = $probe;
        while (is_array($node) && $node !== []) {
            $key = array_key_first($node);
            $keys[] = $key;
            $node = $node[$key];
        }
        // Which segments were "[]": a clean name is its first segment and
        // then "[...]" groups with no bracket inside.
        $open = strpos($name, '[');
        $groups = $open === false ? [] : explode('][', substr($name, $open + 1, -1));
        foreach ($attributes as $attribute => $value) {
            $at = &$files;
            $path = array_merge([$keys[0], $attribute], array_slice($keys, 1));
            $last = count($path) - 1;
            foreach ($path as $level => $key) {
                if (!is_array($at)) {
                    $at = [];
                }
                // Levels 0 and 1 are the first segment and the attribute.
                $append = $level >= 2 && ($groups[$level - 2] ?? null) === '';
                if ($append) {
                    $at[] = $level === $last ? $value : [];
                    $at = &$at[array_key_last($at)];
                    continue;
                }
                if ($level === $last) {
                    $at[$key] = $value;
                    continue;
                }
                $at = &$at[$key];
            }
            unset($at);
        }
    }

    /**
     * Merges the request variables in request_order (or variables_order)
     * into $_REQUEST, later sources overriding earlier ones as PHP does.
     *
     * @param array<array-key, mixed> $get
     * @param array<array-key, mixed> $post
     * @param array<array-key, mixed> $cookie
     * @return array<array-key, mixed>
     */
    public static function request(string $order, array $get, array $post, array $cookie): array
    {
        $request = [];
        foreach (str_split($order) as $source) {
            $values = match ($source) {
                'g', 'G' => $get,
                'p', 'P' => $post,
                'c', 'C' => $cookie,
                default => [],
            };
            if ($values !== []) {
                $request = $request === [] ? $values : array_replace_recursive($request, $values);
            }
        }
        return $request;
    }

    /**
     * The key of $_COOKIE a cookie name lands in, and whether the name is
     * plain. PHP makes " " and "." in the name "_" up to the first "[";
     * "a[b]" is an array under "a"; "a[b", with no "]" after the "[", is no
     * index at all and becomes the plain name "a_b" (" ", "." and "[" made
     * "_" throughout). PHP drops a plain cookie whose key exists
     * (main/php_variables.c); cookies in arrays are never dropped.
     *
     * @return array{0: string, 1: bool}
     */
    private static function cookieKey(string $name): array
    {
        $open = strpos($name, '[');
        if ($open === false) {
            return [strtr($name, ' .', '__'), true];
        }
        if (strpos($name, ']', $open + 1) === false) {
            return [strtr($name, ' .[', '___'), true];
        }
        return [strtr(substr($name, 0, $open), ' .', '__'), false];
    }

    /**
     * PHP's fix for CVE-2022-31629 (php_is_forbidden_variable_name() in
     * main/php_variables.c): a name that mangling made start with "__Host-"
     * or "__Secure-" is not registered, so a cookie a sibling subdomain set
     * as "..Host-x" never passes for the "__Host-x" only this host can set.
     */
    private static function isForbiddenName(string $key, string $name): bool
    {
        $name = ltrim($name, ' ');
        foreach (['__Host-', '__Secure-'] as $prefix) {
            if (str_starts_with($key, $prefix) && !str_starts_with($name, $prefix)) {
                return true;
            }
        }
        return false;
    }

    /**
     * PHP's test for upload names it accepts: brackets balanced, never
     * closed before they open, and a "]" followed by nothing or by "[".
     */
    private static function hasCleanBrackets(string $name): bool
    {
        if (strpbrk($name, '[]') === false) {
            return true;
        }
        $depth = 0;
        $length = strlen($name);
        for ($i = 0; $i < $length; $i++) {
            if ($name[$i] === '[') {
                $depth++;
            } elseif ($name[$i] === ']') {
                $depth--;
                if ($depth < 0 || ($i + 1 < $length && $name[$i + 1] !== '[')) {
                    return false;
                }
            }
        }
        return $depth === 0;
    }

    private static function encodeName(string $name): string
    {
        return strtr($name, ['%' => '%25', '+' => '%2B', '&' => '%26', '=' => '%3D']);
    }

    /** PHP's upload basename: whatever follows the last slash or backslash. */
    private static function basename(string $path): string
    {
        $cut = max((int) strrpos($path, '/'), (int) strrpos($path, '\\'));
        if ($cut === 0 && $path !== '' && $path[0] !== '/' && $path[0] !== '\\') {
            return $path;
        }
        return substr($path, $cut + 1);
    }
}
