#!/bin/sh
# A private, installed WordPress site with its own MariaDB, in one
# directory: the shape bench/http.py's classic apps take (`SCRIPT DIR`
# prints the document root on its last line; `SCRIPT stop DIR` ends what
# it started).
#
#   wordpress-site.sh DIR        MariaDB in DIR/db (unix socket only),
#                                database `wordpress`, Debian's WordPress
#                                copied to DIR/root and installed
#                                (bench/reference/wordpress.sh); prints
#                                DIR/root
#   wordpress-site.sh stop DIR   stops DIR/db's MariaDB
set -eu
here=$(cd "$(dirname "$0")" && pwd)
if [ "${1:-}" = stop ]; then
    [ $# -eq 2 ] || { echo "usage: $0 stop DIR" >&2; exit 2; }
    exec "$here/mariadb.sh" stop "$2/db"
fi
[ $# -eq 1 ] || { echo "usage: $0 DIR | $0 stop DIR" >&2; exit 2; }
dir=$1
mkdir -p "$dir"
socket=
eval "$("$here/mariadb.sh" start "$dir/db" | grep '^socket=')"
[ -n "$socket" ] || { echo "$0: MariaDB did not say its socket" >&2; exit 1; }
"$here/mariadb.sh" database "$dir/db" wordpress >&2
"$here/wordpress.sh" prepare "$dir/root" "$socket" wordpress >&2
"$here/wordpress.sh" install "$dir/root" >&2
echo "$dir/root"
