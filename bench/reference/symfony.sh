#!/bin/sh
# Makes a fresh, private copy of the Symfony example (examples/symfony) for
# bench/http.py, deployed as Symfony's deployment guide says for
# production, so that Hearth and nginx + php-fpm each serve one of their
# own:
#
#   symfony.sh DIR
#
# DIR must not exist, or be an empty directory. Afterwards it holds
# DIR/examples/symfony, a copy of the example without its var/, and
# DIR/php, a link to this checkout's PHP library, where the example's
# vendor/autoload.php looks for it (../../php from the app). The app runs
# in prod mode (its .env says APP_ENV=prod; APP_DEBUG is then off), and
# its cache, var/cache/prod, is warmed as `bin/console cache:warmup`
# would: the container compiled, and the optional warmers (Twig's
# templates, the router, the translations) run. var/ belongs to the user
# who runs this script, the user both servers' PHP runs as in the
# benchmark (root's PHP runs as root there: `hearth serve --user root`,
# `php-fpm -R`).
#
# Prints the app's directory, DIR/examples/symfony, on its last line:
# Hearth serves it with `--config DIR/examples/symfony/hearth.toml`,
# nginx + php-fpm its public/ with public/index.php as the front controller
# (the example's nginx.conf).
set -eu

die() {
    echo "symfony.sh: $*" >&2
    exit 1
}

[ $# -eq 1 ] || die "usage: $0 DIR"
root=$(cd "$(dirname "$0")/../.." && pwd -P)
example=$root/examples/symfony
[ -f "$example/public/index.php" ] || die "$example/public/index.php not found"
[ -f /usr/share/php/Symfony/Bundle/FrameworkBundle/autoload.php ] ||
    die "Symfony not found: apt-get install the packages examples/README.md lists"

mkdir -p "$1"
dir=$(cd "$1" && pwd -P)
[ -z "$(ls -A "$dir")" ] || die "$dir is not empty"
# PHP, as another user (www-data), may have to reach the copy.
chmod 755 "$dir"
mkdir "$dir/examples"
app=$dir/examples/symfony
cp -R "$example" "$app"
# A var/ left by someone who ran the example in this checkout is not this
# copy's cache.
rm -rf "$app/var"
ln -s "$root/php" "$dir/php"

# The cache warmed, as `bin/console cache:warmup` does after a deployment
# (the example has no bin/console: the same console application, run
# here). The environment comes from .env, as under both servers.
(cd "$app" && php -r '
    require "vendor/autoload.php";
    (new Symfony\Component\Dotenv\Dotenv())->bootEnv(getcwd() . "/.env");
    $kernel = new App\Kernel($_SERVER["APP_ENV"], (bool) $_SERVER["APP_DEBUG"]);
    $console = new Symfony\Bundle\FrameworkBundle\Console\Application($kernel);
    $console->setAutoExit(false);
    exit($console->run(new Symfony\Component\Console\Input\ArrayInput(["command" => "cache:warmup"])));
') >&2 || die "cache:warmup failed"
[ -d "$app/var/cache/prod" ] || die "no var/cache/prod after cache:warmup (is APP_ENV prod in .env?)"
echo "$app"
