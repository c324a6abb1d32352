#!/usr/bin/env bash
# Prepares a private WordPress site from Debian's `wordpress` package, for
# the tests and benchmarks that serve one with Hearth's classic mode and
# with nginx + php-fpm (bench/reference/nginx-fpm.sh, NGINX_SITE=classic).
#
#   wordpress.sh prepare DIR SOCKET DATABASE
#       A fresh, self-contained copy of the package's WordPress in DIR
#       (which must not exist, or be empty): the document root to serve,
#       with index.php as its front controller. Its wp-config.php uses
#       database DATABASE on the MariaDB unix socket SOCKET, with user and
#       password DATABASE (what `mariadb.sh database STATE_DIR DATABASE`
#       creates). The site is not installed: its first request goes to
#       WordPress's installer (/wp-admin/install.php).
#   wordpress.sh install DIR [HOST]
#       Runs WordPress's installer without HTTP (php-cli), as
#       /wp-admin/install.php?step=2 would: site title "Hearth", user
#       `admin` with password WP_ADMIN_PASSWORD (default `admin`), email
#       admin@example.com. HOST (default localhost) is the Host the
#       installer sees; it shows only in the sample page's links.
#
# A benchmark of the home page, for example:
#
#   eval "$(bench/reference/mariadb.sh start "$state/db")"   # sets socket=
#   bench/reference/mariadb.sh database "$state/db" wordpress
#   bench/reference/wordpress.sh prepare "$state/site" "$socket" wordpress
#   bench/reference/wordpress.sh install "$state/site"
#   hearth serve --root "$state/site" ...     # or nginx-fpm.sh start ...
#   ...                                       # GET / (about 30 KB of HTML)
#   bench/reference/mariadb.sh stop "$state/db"
#
# How the copy differs from the package as installed (Debian's
# /usr/share/wordpress reads /etc/wordpress/config-HOST.php and keeps
# wp-content in /var/lib/wordpress, linked back to /usr/share):
# - Everything is copied with symlinks followed (the package links
#   JavaScript libraries and getID3 from other packages, and wp-content's
#   themes and plugins back to /usr/share/wordpress), so nothing under DIR
#   leads outside it. wp-content is the package's own (its themes and
#   plugins), with an empty uploads/ and nothing from /var/lib/wordpress:
#   each copy starts the same. The Apache-only .htaccess is left out.
# - wp-config.php is DIR's own (ABSPATH is DIR) and:
#   WP_HOME and WP_SITEURL follow the request's Host header (and HTTPS),
#   so one copy answers on any address and port, and a comparison of two
#   servers differs only by their port;
#   the keys and salts are fixed, so two copies are alike (never use them
#   for a site anyone else can reach);
#   DISABLE_WP_CRON: no page load fires a loopback request to wp-cron.php
#   (WordPress's pseudo-cron), which would come back to the server under
#   test at a moment of its own;
#   WP_HTTP_BLOCK_EXTERNAL and AUTOMATIC_UPDATER_DISABLED: no request
#   leaves the machine (update and PHP version checks, on the dashboard).
# - wp-content/mu-plugins/url-rewrite.php tells WordPress that the server
#   rewrites URLs (the `got_url_rewrite` filter): WordPress believes it only
#   of Apache, nginx and IIS, by their SERVER_SOFTWARE, and otherwise puts
#   /index.php/ in the permalinks it offers. Under nginx it changes nothing.
#
# Needs wordpress (and its theme, wordpress-theme-twentytwentythree) and
# php-cli (and php-mysql) for `install`.
set -euo pipefail

die() { echo "wordpress.sh: $*" >&2; exit 1; }

package=/usr/share/wordpress

prepare() {
    local dir=$1 socket=$2 database=$3
    [ -f "$package/wp-settings.php" ] || die "$package not found (apt-get install wordpress)"
    [[ $database =~ ^[A-Za-z0-9_]{1,32}$ ]] || die "database name must be 1 to 32 letters, digits or _: $database"
    case $socket in
        /*) ;;
        *) die "SOCKET must be an absolute path: $socket" ;;
    esac
    [[ $socket != *"'"* && $socket != *"\\"* ]] || die "SOCKET must not contain ' or \\: $socket"
    if [ -e "$dir" ] && [ -n "$(ls -A "$dir")" ]; then
        die "$dir is not empty"
    fi
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    # Modes and times kept: two copies send the same Last-Modified and ETag.
    cp -RL --preserve=mode,timestamps "$package/." "$dir/"
    rm -f "$dir/.htaccess"
    mkdir -p "$dir/wp-content/uploads" "$dir/wp-content/mu-plugins"
    cat >"$dir/wp-content/mu-plugins/url-rewrite.php" <<'PHP'
<?php
/*
 * Written by bench/reference/wordpress.sh prepare. WordPress tells from
 * $_SERVER['SERVER_SOFTWARE'] whether the server rewrites URLs (Apache
 * with mod_rewrite, nginx, IIS); Hearth's classic mode sends every URL that
 * is not a file to index.php as nginx's try_files does, so say so.
 */
add_filter('got_url_rewrite', '__return_true');
PHP
    cat >"$dir/wp-config.php" <<PHP
<?php
/* Written by bench/reference/wordpress.sh prepare: see there. */
define('DB_NAME', '$database');
define('DB_USER', '$database');
define('DB_PASSWORD', '$database');
define('DB_HOST', 'localhost:$socket');
define('DB_CHARSET', 'utf8mb4');
define('DB_COLLATE', '');

/* Fixed, so that two copies are alike: for a private site only. */
define('AUTH_KEY', 'hearth-wordpress-auth-key');
define('SECURE_AUTH_KEY', 'hearth-wordpress-secure-auth-key');
define('LOGGED_IN_KEY', 'hearth-wordpress-logged-in-key');
define('NONCE_KEY', 'hearth-wordpress-nonce-key');
define('AUTH_SALT', 'hearth-wordpress-auth-salt');
define('SECURE_AUTH_SALT', 'hearth-wordpress-secure-auth-salt');
define('LOGGED_IN_SALT', 'hearth-wordpress-logged-in-salt');
define('NONCE_SALT', 'hearth-wordpress-nonce-salt');

\$table_prefix = 'wp_';

/* The site's address is the one it was asked for, on any port. */
if (isset(\$_SERVER['HTTP_HOST'])) {
    \$hearth_scheme = (!empty(\$_SERVER['HTTPS']) && \$_SERVER['HTTPS'] !== 'off') ? 'https' : 'http';
    define('WP_HOME', \$hearth_scheme . '://' . \$_SERVER['HTTP_HOST']);
    define('WP_SITEURL', WP_HOME);
}

define('DISABLE_WP_CRON', true);
define('WP_HTTP_BLOCK_EXTERNAL', true);
define('AUTOMATIC_UPDATER_DISABLED', true);
define('WP_AUTO_UPDATE_CORE', false);
define('WP_DEBUG', false);

if (!defined('ABSPATH')) {
    define('ABSPATH', __DIR__ . '/');
}
require_once ABSPATH . 'wp-settings.php';
PHP
}

install() {
    local dir=$1 host=${2:-localhost}
    [ -f "$dir/wp-config.php" ] || die "$dir has no wp-config.php (run: $0 prepare ...)"
    [[ $host =~ ^[A-Za-z0-9.:_-]+$ ]] || die "HOST must be a host name or address, with an optional port: $host"
    WP_DIR=$(cd "$dir" && pwd) WP_HOST=$host WP_ADMIN_PASSWORD=${WP_ADMIN_PASSWORD:-admin} \
        php -d display_errors=stderr -r '
        $_SERVER["HTTP_HOST"] = getenv("WP_HOST");
        $_SERVER["REQUEST_URI"] = "/wp-admin/install.php?step=2";
        define("WP_INSTALLING", true);
        require getenv("WP_DIR") . "/wp-load.php";
        require ABSPATH . "wp-admin/includes/upgrade.php";
        if (is_blog_installed()) {
            fwrite(STDERR, "wordpress.sh: already installed\n");
            exit(1);
        }
        $result = wp_install("Hearth", "admin", "admin@example.com", true, "",
            wp_slash(getenv("WP_ADMIN_PASSWORD")));
        echo "installed: ", home_url("/"), " user admin (id ", $result["user_id"], ")\n";
    '
}

case "${1:-}" in
    prepare) shift; [ $# -eq 3 ] || die "usage: $0 prepare DIR SOCKET DATABASE"; prepare "$@" ;;
    install) shift; [ $# -ge 1 ] && [ $# -le 2 ] || die "usage: $0 install DIR [HOST]"; install "$@" ;;
    *) die "usage: $0 prepare|install ..." ;;
esac
