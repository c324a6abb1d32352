#!/usr/bin/env bash
# Starts and stops a private MariaDB server for the PHP sites Hearth is
# tested and benchmarked with (WordPress, phpMyAdmin): its own data
# directory and unix socket under STATE_DIR, no TCP port, no system
# configuration file read (--no-defaults), never the machine's MariaDB.
#
#   mariadb.sh start    STATE_DIR          a fresh server (STATE_DIR must
#                                          not hold one already); prints
#                                          `socket=PATH` and `pid=PID`
#   mariadb.sh database STATE_DIR NAME     a fresh database NAME (dropped
#                                          first if it exists) and a user
#                                          NAME@localhost, password NAME,
#                                          with every privilege on it;
#                                          prints `database=NAME user=NAME
#                                          password=NAME`
#   mariadb.sh sql      STATE_DIR [ARGS]   the `mariadb` client as the
#                                          server's administrator (the
#                                          user running the script, by
#                                          its unix socket)
#                                          (SQL on stdin or with -e)
#   mariadb.sh stop     STATE_DIR          stops the server (SIGTERM, then
#                                          SIGKILL after 30 s); STATE_DIR
#                                          stays for the caller to remove
#
# The socket is STATE_DIR/mysqld.sock: a PHP process of another user (php-fpm's
# www-data) reaches it only if STATE_DIR and its parents can be traversed
# by that user; `start` makes STATE_DIR itself 0755. As root the server
# runs as root (`--user=root`: it is private and has no port); as any
# other user, as that user. Its log is STATE_DIR/error.log.
#
# Durability is traded for speed (innodb_flush_log_at_trx_commit=0, no
# doublewrite buffer, no binary log), as befits a throwaway server.
# Needs mariadb-server (mariadbd, mariadb-install-db) and its client.
set -euo pipefail

die() { echo "mariadb.sh: $*" >&2; exit 1; }

need() {
    command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] ||
        die "$1 not found (apt-get install mariadb-server)"
}

# The server's user option: root must say so, anyone else runs as itself.
user_opts() {
    if [ "$(id -u)" = 0 ]; then echo "--user=root"; fi
}

# The server's administrator: the user running this script, by its unix
# socket (`mariadb-install-db --auth-root-socket-user`), root or not.
client() {
    local state=$1; shift
    mariadb --no-defaults --socket="$state/mysqld.sock" --user="$(id -un)" "$@"
}

start() {
    local state=$1
    need mariadbd
    need mariadb-install-db
    need mariadb
    mkdir -p "$state"
    state=$(cd "$state" && pwd)
    chmod 0755 "$state"
    [ ! -e "$state/data" ] || die "$state/data exists: stop and remove that server first"
    # A unix socket path is limited to 107 bytes.
    [ ${#state} -le 90 ] || die "$state is too long a path for a unix socket"
    local server_opts=(
        --no-defaults
        --datadir="$state/data"
        --innodb-log-file-size=8M
        --innodb-buffer-pool-size=64M
    )
    # shellcheck disable=SC2046 # user_opts prints nothing or one word
    mariadb-install-db "${server_opts[@]}" $(user_opts) \
        --auth-root-authentication-method=socket --auth-root-socket-user="$(id -un)" \
        --skip-test-db \
        --skip-name-resolve >"$state/install.log" 2>&1 ||
        die "mariadb-install-db failed (see $state/install.log)"
    local mariadbd; mariadbd=$(command -v mariadbd || echo /usr/sbin/mariadbd)
    # Its own session, so that a terminal's Ctrl-C or the caller's process
    # group does not reach it; `stop` ends it.
    # shellcheck disable=SC2046
    setsid "$mariadbd" "${server_opts[@]}" $(user_opts) \
        --socket="$state/mysqld.sock" --skip-networking \
        --pid-file="$state/mysqld.pid" --log-error="$state/error.log" \
        --skip-log-bin --innodb-flush-log-at-trx-commit=0 --innodb-doublewrite=0 \
        --innodb-use-native-aio=0 --skip-name-resolve \
        </dev/null >/dev/null 2>&1 &
    local pid=$!
    for _ in $(seq 300); do
        if client "$state" -e 'SELECT 1' >/dev/null 2>&1; then
            echo "$pid" >"$state/server.pid"
            echo "socket=$state/mysqld.sock"
            echo "pid=$pid"
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || die "mariadbd exited at start (see $state/error.log)"
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    die "mariadbd did not answer on $state/mysqld.sock within 30 s (see $state/error.log)"
}

database() {
    local state=$1 name=$2
    [[ $name =~ ^[A-Za-z0-9_]{1,32}$ ]] || die "database name must be 1 to 32 letters, digits or _: $name"
    client "$state" <<SQL
DROP DATABASE IF EXISTS \`$name\`;
CREATE DATABASE \`$name\` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;
CREATE OR REPLACE USER '$name'@'localhost' IDENTIFIED BY '$name';
GRANT ALL PRIVILEGES ON \`$name\`.* TO '$name'@'localhost';
SQL
    echo "database=$name user=$name password=$name"
}

stop() {
    local state=$1
    local pidfile="$state/server.pid"
    [ -f "$pidfile" ] || return 0
    local pid; pid=$(cat "$pidfile")
    # Only the process this script started: its pid, if it is still mariadbd.
    if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = mariadbd ]; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 300); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
}

case "${1:-}" in
    start) shift; [ $# -eq 1 ] || die "usage: $0 start STATE_DIR"; start "$@" ;;
    database) shift; [ $# -eq 2 ] || die "usage: $0 database STATE_DIR NAME"; database "$@" ;;
    sql) shift; [ $# -ge 1 ] || die "usage: $0 sql STATE_DIR [MARIADB_ARGS...]"; client "$@" ;;
    stop) shift; [ $# -eq 1 ] || die "usage: $0 stop STATE_DIR"; stop "$@" ;;
    *) die "usage: $0 start|database|sql|stop STATE_DIR ..." ;;
esac
