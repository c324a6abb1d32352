#!/usr/bin/env bash
# Starts and stops the reference stack Hearth is compared with: Debian's
# nginx + php-fpm with Debian's defaults (snippets/fastcgi-php.conf, the fpm
# php.ini), configured as a front controller, on 127.0.0.1 only.
#
#   nginx-fpm.sh start STATE_DIR DOCROOT SCRIPT PORT [CHILDREN]
#   nginx-fpm.sh stop  STATE_DIR
#
# SCRIPT is the front controller under DOCROOT (e.g. index.php): every
# request for a path that is not a file goes to it, as with
# `try_files $uri /index.php$is_args$args`. php-fpm runs pm = static with
# CHILDREN processes (default 2); FPM_MAX_REQUESTS in the environment sets
# pm.max_requests (default 0, never recycle), and CLIENT_MAX_BODY_SIZE
# nginx's client_max_body_size (default nginx's own, 1m). Access logs are
# off on both sides of any comparison, so neither pays for them.
# NGINX_SITE=classic serves DOCROOT as a classic multi-script site instead:
# `index index.php index.html`, `try_files $uri $uri/ /SCRIPT?$query_string`
# and every existing `.php` file run through snippets/fastcgi-php.conf
# (the configuration Hearth's classic mode follows).
# NGINX_SERVER=FILE serves DOCROOT with the server block of FILE instead
# (an example's nginx.conf: a `server { ... }` block, comments around it),
# with its `listen`, `root` and `fastcgi_pass` pointed at PORT, DOCROOT
# and this php-fpm; it must have one of each.
set -euo pipefail

die() { echo "nginx-fpm.sh: $*" >&2; exit 1; }

find_fpm() {
    for candidate in php-fpm8.2 php-fpm8.3 php-fpm8.1 php-fpm; do
        for dir in /usr/sbin /usr/bin /usr/local/sbin; do
            [ -x "$dir/$candidate" ] && { echo "$dir/$candidate"; return; }
        done
    done
    die "php-fpm not found (apt-get install php8.2-fpm)"
}

# The index and the locations before the PHP one, and the PHP location's
# opening line, for NGINX_SITE (front-controller by default, or classic).
site_locations() {
    local script=$1
    case "${NGINX_SITE:-front-controller}" in
        front-controller)
            echo "        index $script;"
            echo '        location / {'
            echo '            try_files $uri /'"$script"'$is_args$args;'
            echo '        }'
            echo '        location ~ \.php$ {'
            ;;
        classic)
            echo '        index index.php index.html;'
            echo '        location / {'
            echo '            try_files $uri $uri/ /'"$script"'?$query_string;'
            echo '        }'
            echo '        location ~ [^/]\.php(/|$) {'
            ;;
        *) die "NGINX_SITE must be front-controller or classic, not $NGINX_SITE" ;;
    esac
}

# FILE's server block with its listen, root and fastcgi_pass lines
# rewritten for this run.
server_from_file() {
    local file=$1 port=$2 docroot=$3 socket=$4
    [ -f "$file" ] || die "NGINX_SERVER: $file does not exist"
    local directive count
    for directive in listen root fastcgi_pass; do
        count=$(grep -cE "^[[:space:]]*$directive[[:space:]]" "$file" || true)
        [ "$count" = 1 ] || die "NGINX_SERVER: $file has $count '$directive' lines, not one"
    done
    sed -E \
        -e "s|^([[:space:]]*)listen[[:space:]][^;]*;|\\1listen 127.0.0.1:$port;|" \
        -e "s|^([[:space:]]*)root[[:space:]][^;]*;|\\1root $docroot;|" \
        -e "s|^([[:space:]]*)fastcgi_pass[[:space:]][^;]*;|\\1fastcgi_pass unix:$socket;|" \
        "$file"
}

# The server block: generated for NGINX_SITE, or NGINX_SERVER's.
server_block() {
    local state=$1 docroot=$2 script=$3 port=$4
    if [ -n "${NGINX_SERVER:-}" ]; then
        server_from_file "$NGINX_SERVER" "$port" "$docroot" "$state/php-fpm.sock"
        return
    fi
    cat <<CONF
    server {
        listen 127.0.0.1:$port;
        server_name localhost;
        root $docroot;
$(site_locations "$script")
            include snippets/fastcgi-php.conf;
            fastcgi_pass unix:$state/php-fpm.sock;
        }
    }
CONF
}

start() {
    local state=$1 docroot=$2 script=$3 port=$4 children=${5:-2}
    command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || die "nginx not found (apt-get install nginx)"
    local nginx_bin; nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
    local fpm; fpm=$(find_fpm)
    mkdir -p "$state"
    state=$(cd "$state" && pwd)
    docroot=$(cd "$docroot" && pwd)
    [ -f "$docroot/$script" ] || die "$docroot/$script does not exist"
    for f in fastcgi.conf fastcgi_params mime.types snippets; do
        ln -sfn "/etc/nginx/$f" "$state/$f"
    done
    mkdir -p "$state/tmp"
    # Before php-fpm starts, so that a bad NGINX_SERVER leaves nothing running.
    local server; server=$(server_block "$state" "$docroot" "$script" "$port")

    cat > "$state/php-fpm.conf" <<CONF
[global]
pid = $state/php-fpm.pid
error_log = $state/php-fpm.log
daemonize = yes

[www]
listen = $state/php-fpm.sock
listen.mode = 0666
pm = static
pm.max_children = $children
pm.max_requests = ${FPM_MAX_REQUESTS:-0}
CONF
    local user_opts=()
    if [ "$(id -u)" = 0 ]; then
        user_opts=(-R)
    fi
    "$fpm" --fpm-config "$state/php-fpm.conf" "${user_opts[@]}"

    cat > "$state/nginx.conf" <<CONF
worker_processes auto;
pid $state/nginx.pid;
error_log $state/nginx-error.log;
$( [ "$(id -u)" = 0 ] && echo "user root;" )
events {
    worker_connections 768;
}
http {
    sendfile on;
    tcp_nopush on;
    types_hash_max_size 2048;
    include mime.types;
    default_type application/octet-stream;
    access_log off;
    client_max_body_size ${CLIENT_MAX_BODY_SIZE:-1m};
    client_body_temp_path $state/tmp/body;
    fastcgi_temp_path $state/tmp/fastcgi;
    proxy_temp_path $state/tmp/proxy;
    uwsgi_temp_path $state/tmp/uwsgi;
    scgi_temp_path $state/tmp/scgi;
$server
}
CONF
    "$nginx_bin" -p "$state" -c "$state/nginx.conf" -e "$state/nginx-error.log"
    for _ in $(seq 100); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            return 0
        fi
        sleep 0.05
    done
    die "nginx did not start listening on 127.0.0.1:$port (see $state/nginx-error.log)"
}

stop() {
    local state=$1
    for name in nginx php-fpm; do
        local pidfile="$state/$name.pid"
        if [ -f "$pidfile" ]; then
            local pid; pid=$(cat "$pidfile")
            kill -QUIT "$pid" 2>/dev/null || true
            for _ in $(seq 100); do
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.05
            done
            kill -KILL "$pid" 2>/dev/null || true
            rm -f "$pidfile"
        fi
    done
}

case "${1:-}" in
    start) shift; [ $# -ge 4 ] || die "usage: $0 start STATE_DIR DOCROOT SCRIPT PORT [CHILDREN]"; start "$@" ;;
    stop) shift; [ $# -eq 1 ] || die "usage: $0 stop STATE_DIR"; stop "$@" ;;
    *) die "usage: $0 start|stop ..." ;;
esac
