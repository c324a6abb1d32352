#!/bin/sh
# Builds the Hearth extension (ext/hearth) for the PHP that php-config
# names, as OUTDIR/hearth-phpX.Y.so, where `hearth serve` looks for it
# when OUTDIR is target/php-ext (see docs/extension.md). Rebuilds only when
# a source is newer than the built file.
#
# Without phpize and php-config (Debian's php-dev) it says so and exits 0:
# the workers then use the PHP library's own request startup.
set -eu

out=${1:?usage: ext/build.sh OUTDIR}
src=$(cd "$(dirname "$0")/hearth" && pwd)
PHPIZE=${PHPIZE:-phpize}
PHP_CONFIG=${PHP_CONFIG:-php-config}

if ! command -v "$PHPIZE" >/dev/null 2>&1 || ! command -v "$PHP_CONFIG" >/dev/null 2>&1; then
	echo "ext/build.sh: $PHPIZE and $PHP_CONFIG are not installed (package php-dev): not building the Hearth extension; workers use the PHP library's request startup" >&2
	exit 0
fi

version=$("$PHP_CONFIG" --version | cut -d. -f1,2)
so="$out/hearth-php$version.so"
mkdir -p "$out"
out=$(cd "$out" && pwd)
so="$out/hearth-php$version.so"
if [ -f "$so" ] && [ -z "$(find "$src" "$0" -newer "$so" -type f)" ]; then
	exit 0
fi

build="$out/build-php$version"
rm -rf "$build"
mkdir -p "$build"
cp "$src"/config.m4 "$src"/*.c "$src"/*.h "$build"/
log="$build/build.log"
if ! (cd "$build" && "$PHPIZE" && ./configure --with-php-config="$(command -v "$PHP_CONFIG")" && make) >"$log" 2>&1; then
	cat "$log" >&2
	echo "ext/build.sh: building the Hearth extension failed (log above, and in $log)" >&2
	exit 1
fi
cp "$build/modules/hearth.so" "$so.tmp"
mv "$so.tmp" "$so"
echo "built $so"
