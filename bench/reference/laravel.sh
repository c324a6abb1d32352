#!/bin/sh
# Makes a fresh, private copy of the Laravel example (examples/laravel)
# for bench/http.py, deployed as Laravel's deployment guide says for
# production, so that Hearth and nginx + php-fpm each serve one of their
# own:
#
#   laravel.sh DIR
#
# DIR must not exist, or be an empty directory. Afterwards it holds
# DIR/examples/laravel, a copy of the example without what running it in
# this checkout may have left (its database, caches, sessions, logs), and
# DIR/php, a link to this checkout's PHP library, where the example's
# vendor/autoload.php looks for it (../../php from the app). In the copy:
#
#   - database/database.sqlite, made by `php artisan migrate --seed
#     --force` (as examples/README.md says);
#   - the configuration, the routes and the Blade views cached
#     (`php artisan config:cache`, `route:cache`, `view:cache`, the
#     "Optimization" steps of Laravel's deployment guide): php-fpm then
#     reads one file for the configuration and one for the routes on every
#     request instead of registering them.
#
# The app runs in production mode, without debug (its .env). storage/,
# bootstrap/cache/ and database/ belong to the user who runs this script,
# the user both servers' PHP runs as in the benchmark (root's PHP runs as
# root there: `hearth serve --user root`, `php-fpm -R`).
#
# Prints the app's directory, DIR/examples/laravel, on its last line:
# Hearth serves it with `--config DIR/examples/laravel/hearth.toml`
# (hearth.php), nginx + php-fpm its public/ with public/index.php as the
# front controller (the example's nginx.conf).
set -eu

die() {
    echo "laravel.sh: $*" >&2
    exit 1
}

[ $# -eq 1 ] || die "usage: $0 DIR"
root=$(cd "$(dirname "$0")/../.." && pwd -P)
example=$root/examples/laravel
[ -f "$example/public/index.php" ] || die "$example/public/index.php not found"
[ -f /usr/share/php/Illuminate/autoload.php ] ||
    die "Laravel not found: apt-get install php-laravel-framework php-sqlite3 (examples/README.md)"

mkdir -p "$1"
dir=$(cd "$1" && pwd -P)
[ -z "$(ls -A "$dir")" ] || die "$dir is not empty"
# PHP, as another user (www-data), may have to reach the copy.
chmod 755 "$dir"
mkdir "$dir/examples"
app=$dir/examples/laravel
cp -R "$example" "$app"
# What someone who ran the example in this checkout left is not this
# copy's (the paths in examples/laravel/.gitignore).
rm -f "$app/database/database.sqlite" "$app"/bootstrap/cache/*.php
find "$app/storage/framework/sessions" "$app/storage/framework/views" \
    "$app/storage/framework/cache/data" "$app/storage/logs" \
    -mindepth 1 ! -name .gitkeep -exec rm -rf {} +
ln -s "$root/php" "$dir/php"

cd "$app"
touch database/database.sqlite
for command in "migrate --seed --force" config:cache route:cache view:cache; do
    # shellcheck disable=SC2086 # the command's words
    php artisan $command >&2 || die "php artisan $command failed"
done
[ -f bootstrap/cache/config.php ] && [ -f bootstrap/cache/routes-v7.php ] ||
    die "no bootstrap/cache/config.php or routes-v7.php after config:cache and route:cache"
echo "$app"
