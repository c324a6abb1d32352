#!/bin/sh
# Tests of the Debian package (packaging/debian/build.sh, make deb). As any
# user: builds the package from BINARY and EXT_DIR into a temporary
# directory and checks what is in it (files, owners, modes, control
# fields, md5sums, the PHP library, the man pages). As root, also on this
# machine: installs it with dpkg -i, checks /usr/bin/hearth, the PHP
# library from PHP's default include_path, serves the built-in demo with
# hearth.service's own ExecStart (its config, PHP as www-data, the
# extension from /usr/lib/hearth) and reloads it with its ExecReload, then
# removes and purges the package and checks that nothing is left.
#
#   sh packaging/tests/deb_test.sh BINARY EXT_DIR     (make test runs it)
#
# As root it refuses to run where the hearth package is already installed
# (it would remove it). Exit status 1 if any check failed, each named on a
# FAIL line.
set -u

[ $# -eq 2 ] || { echo "usage: deb_test.sh BINARY EXT_DIR" >&2; exit 2; }
binary=$1 ext_dir=$2
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/deb-test.XXXXXX")
chmod 0755 "$work"
checks=0
failures=0
case_name=
installed=no
server=

cleanup() {
    if [ -n "$server" ]; then
        kill -KILL "$server" 2>/dev/null
        wait "$server" 2>/dev/null
    fi
    if [ "$installed" = yes ]; then
        dpkg_locked -P hearth >/dev/null 2>&1
    fi
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

pass() { checks=$((checks + 1)); }
fail() {
    checks=$((checks + 1))
    failures=$((failures + 1))
    printf 'FAIL %s: %s\n' "$case_name" "$*"
}
check() { # check WHAT COMMAND...: passes when COMMAND succeeds.
    what=$1
    shift
    if "$@" >"$work/out" 2>&1; then pass; else fail "$what: $* failed:$(printf '\n'; cat "$work/out")"; fi
}
equals() { if [ "$1" = "$2" ]; then pass; else fail "$3: got '$1', want '$2'"; fi; }
has() { if grep -qF -- "$2" "$1" 2>/dev/null; then pass; else fail "$(basename "$1") lacks '$2'"; return 1; fi; }
absent() { if [ -e "$1" ] || [ -L "$1" ]; then fail "$1 is still there"; else pass; fi; }

# dpkg_locked ARGS...: dpkg ARGS, waiting up to 120 s for dpkg's lock
# when another dpkg or apt holds it (dpkg has no lock timeout of its own).
dpkg_locked() {
    tries=0
    while :; do
        dpkg "$@" >"$work/dpkg.out" 2>&1 && { cat "$work/dpkg.out"; return 0; }
        if grep -q 'lock' "$work/dpkg.out" && [ "$tries" -lt 120 ]; then
            tries=$((tries + 1))
            sleep 1
            continue
        fi
        cat "$work/dpkg.out"
        return 1
    done
}

# wait_for FILE TEXT SECONDS [PID]: whether FILE has a line with TEXT
# within SECONDS (polled every 0.1 s), or before process PID has exited.
wait_for() {
    n=0
    while [ "$n" -lt $(($3 * 10)) ]; do
        grep -qF -- "$2" "$1" 2>/dev/null && return 0
        if [ -n "${4:-}" ] && ! kill -0 "$4" 2>/dev/null; then
            grep -qF -- "$2" "$1" 2>/dev/null
            return
        fi
        sleep 0.1
        n=$((n + 1))
    done
    return 1
}

# --- As any user: the package as built ---

case_name=build
if ! deb=$(sh "$repo/packaging/debian/build.sh" "$binary" "$ext_dir" "$work/out-deb" 2>"$work/build.err" | tail -n 1) || [ ! -f "$deb" ]; then
    fail "packaging/debian/build.sh failed:$(printf '\n'; cat "$work/build.err")"
    echo "deb_test.sh: $failures of $checks checks failed"
    exit 1
fi
pass
version=$("$binary" --version | sed 's/^hearth //')
php_version=$(php-config --version | cut -d. -f1,2)
so=hearth-php$php_version.so
echo "deb_test.sh: built $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB)"

case_name=control
equals "$(dpkg-deb -f "$deb" Package)" hearth "Package"
equals "$(dpkg-deb -f "$deb" Version)" "$version" "Version"
equals "$(dpkg-deb -f "$deb" Architecture)" "$(dpkg --print-architecture)" "Architecture"
dpkg-deb -f "$deb" Depends >"$work/depends"
has "$work/depends" "libc6 (>= "
has "$work/depends" "php-cgi"
equals "$(dpkg-deb -f "$deb" Recommends)" php-fpm "Recommends"
mkdir "$work/ctrl"
dpkg-deb -e "$deb" "$work/ctrl"
equals "$(cat "$work/ctrl/conffiles")" /etc/hearth/hearth.toml "conffiles"

case_name=contents
dpkg-deb -c "$deb" >"$work/contents"
# "MODE OWNER SIZE DATE TIME PATH" for the files that matter.
mode_of() { awk -v p="./$1" '$6 == p { print $1, $2 }' "$work/contents"; }
equals "$(mode_of usr/bin/hearth)" "-rwxr-xr-x root/root" "usr/bin/hearth"
equals "$(mode_of "usr/lib/hearth/$so")" "-rw-r--r-- root/root" "usr/lib/hearth/$so"
equals "$(mode_of usr/share/php/Hearth/autoload.php)" "-rw-r--r-- root/root" "usr/share/php/Hearth/autoload.php"
equals "$(mode_of usr/share/php/Hearth/src/Worker.php)" "-rw-r--r-- root/root" "usr/share/php/Hearth/src/Worker.php"
equals "$(mode_of etc/hearth/hearth.toml)" "-rw-r--r-- root/root" "etc/hearth/hearth.toml"
equals "$(mode_of usr/share/man/man1/hearth.1.gz)" "-rw-r--r-- root/root" "usr/share/man/man1/hearth.1.gz"
equals "$(mode_of usr/share/man/man1/hearth-serve.1.gz)" "-rw-r--r-- root/root" "usr/share/man/man1/hearth-serve.1.gz"
equals "$(mode_of usr/share/doc/hearth/copyright)" "-rw-r--r-- root/root" "usr/share/doc/hearth/copyright"
unit=$(awk '$6 ~ /\/systemd\/system\/hearth\.service$/ { print substr($6, 2) }' "$work/contents")
equals "$(mode_of "${unit#/}")" "-rw-r--r-- root/root" "the unit hearth.service"
# Nothing but root's, no file writable by group or others, no tests.
awk '$2 != "root/root" || $1 ~ /^.....w/ || $1 ~ /^........w/' "$work/contents" >"$work/odd"
equals "$(cat "$work/odd")" "" "files not root's or writable by others"
equals "$(grep -c '/php/Hearth/tests' "$work/contents")" 0 "PHPUnit tests in the package"

case_name=md5sums
dpkg-deb -x "$deb" "$work/x"
check "every file's sum" sh -c "cd '$work/x' && md5sum -c --quiet '$work/ctrl/md5sums'"
(cd "$work/x" && find . -type f ! -path './etc/*' | sed 's|^\./||' | sort) >"$work/files"
sed 's/^[0-9a-f]*  //' "$work/ctrl/md5sums" | sort >"$work/summed"
check "md5sums lists every file but the conffiles" cmp "$work/files" "$work/summed"

case_name=php-library
php -d include_path="$work/x/usr/share/php" -r "require 'Hearth/autoload.php'; echo class_exists('Hearth\\Worker') ? 'ok' : 'no';" >"$work/php.out" 2>&1
equals "$(cat "$work/php.out")" ok "require 'Hearth/autoload.php' with include_path $work/x/usr/share/php"

case_name=man-pages
for page in hearth hearth-serve hearth-run hearth-status hearth-reload hearth-stop hearth-php-lib; do
    gzip -dc "$work/x/usr/share/man/man1/$page.1.gz" >"$work/$page.1" 2>/dev/null
    has "$work/$page.1" ".TH $page 1"
done
if command -v groff >/dev/null 2>&1; then
    groff -man -ww -z "$work/hearth-serve.1" >"$work/groff.out" 2>&1
    equals "$(cat "$work/groff.out")" "" "groff's warnings on hearth-serve.1"
fi

case_name=binary
equals "$("$work/x/usr/bin/hearth" --version)" "hearth $version" "the packaged (stripped) binary's --version"

if [ "$(id -u)" != 0 ]; then
    echo "deb_test.sh: installing, serving and removing the package skipped: they need root (run make test as root)"
    echo "deb_test.sh: $((checks - failures)) passed, $failures failed"
    [ "$failures" = 0 ]
    exit
fi

# --- As root: installed, served, removed ---

case_name=install
if dpkg-query -W -f='${Status}' hearth 2>/dev/null | grep -q 'installed\|config-files' || [ -e /usr/bin/hearth ]; then
    fail "the hearth package (or a /usr/bin/hearth) is on this machine already: this test installs and purges it. Remove it first (dpkg -P hearth)"
    echo "deb_test.sh: $((checks - failures)) passed, $failures failed"
    exit 1
fi
installed=yes
check "dpkg -i" dpkg_locked -i "$deb"
equals "$(dpkg-query -W -f='${Status}' hearth 2>/dev/null)" "install ok installed" "dpkg's status of hearth"
equals "$(/usr/bin/hearth --version)" "hearth $version" "/usr/bin/hearth --version"
# Installed, not enabled: the admin edits the config first.
absent /etc/systemd/system/multi-user.target.wants/hearth.service
(cd / && php -r "require 'Hearth/autoload.php'; echo class_exists('Hearth\\Worker') ? 'ok' : 'no';") >"$work/php.out" 2>&1
equals "$(cat "$work/php.out")" ok "require 'Hearth/autoload.php' with PHP's default include_path"
# systemd-analyze verify exits 0 on an unknown key or a bad value, and
# only says so: its output must be empty.
if command -v systemd-analyze >/dev/null 2>&1; then
    check "systemd-analyze verify $unit" systemd-analyze verify --man=no "$unit"
    equals "$(cat "$work/out")" "" "systemd-analyze verify's complaints about $unit"
fi

# The unit's ExecStart as systemd would run it (its RuntimeDirectory made
# first), on a free port instead of the config's 8080.
case_name=serve
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
exec_reload=$(sed -n 's/^ExecReload=//p' "$unit")
equals "$(sed -n 's/^RuntimeDirectory=//p' "$unit")" hearth "the unit's RuntimeDirectory"
install -d -m "$(sed -n 's/^RuntimeDirectoryMode=//p' "$unit")" /run/hearth
# shellcheck disable=SC2086 # the unit's command line, split as systemd splits it (no quotes in it)
NO_COLOR=1 $exec_start --listen 127.0.0.1:0 >"$work/serve.log" 2>&1 &
server=$!
if wait_for "$work/serve.log" "workers ready" 60 "$server"; then
    pass
    port=$(sed -n 's|.* on http://127\.0\.0\.1:\([0-9]*\) .*|\1|p' "$work/serve.log" | head -n 1)
    has "$work/serve.log" "Hearth extension /usr/lib/hearth/$so" || cat "$work/serve.log"
    code=$(curl -s -o "$work/page" -w '%{http_code}' --max-time 10 "http://127.0.0.1:$port/")
    equals "$code" 200 "GET / on the demo"
    has "$work/page" "Hearth"
    # The workers run as the config's user.
    equals "$(ps -o user= --ppid "$server" | sort -u | tr -d ' ')" www-data "the workers' user"
    case_name=reload
    # shellcheck disable=SC2086
    check "the unit's ExecReload" $exec_reload
    case_name=stop
    check "hearth stop" /usr/bin/hearth stop --control-socket /run/hearth/hearth.sock
    if wait_for "$work/serve.log" "INFO stopped" 30; then pass; else fail "hearth serve did not stop:$(printf '\n'; cat "$work/serve.log")"; fi
else
    fail "no 'workers ready' within 60 s, or hearth serve exited:$(printf '\n'; cat "$work/serve.log")"
fi
kill -KILL "$server" 2>/dev/null
wait "$server" 2>/dev/null
server=

# Enabled (systemctl enable works without a running systemd),
# it stays enabled through an upgrade (here: the same package again).
case_name=upgrade
check "systemctl enable" systemctl enable hearth.service
check "dpkg -i over the installed package" dpkg_locked -i "$deb"
if [ -L /etc/systemd/system/multi-user.target.wants/hearth.service ]; then pass; else fail "hearth.service is no longer enabled after the upgrade"; fi

case_name=remove
check "dpkg -r" dpkg_locked -r hearth
for path in /usr/bin/hearth /usr/share/php/Hearth /usr/lib/hearth "$unit" /usr/share/man/man1/hearth.1.gz /usr/share/doc/hearth; do
    absent "$path"
done
if [ -f /etc/hearth/hearth.toml ]; then pass; else fail "dpkg -r removed the conffile /etc/hearth/hearth.toml"; fi

case_name=purge
check "dpkg -P" dpkg_locked -P hearth
installed=no
absent /etc/hearth
absent /var/lib/systemd/deb-systemd-helper-enabled/hearth.service.dsh-also
absent /etc/systemd/system/multi-user.target.wants/hearth.service
equals "$(dpkg-query -W -f='${Status}' hearth 2>/dev/null)" "" "dpkg's status of hearth after the purge"
# No file of the package is left anywhere.
awk '$1 !~ /^d/ { print substr($6, 2) }' "$work/contents" | while read -r path; do
    [ -e "$path" ] && echo "$path"
done >"$work/left"
equals "$(cat "$work/left")" "" "files of the package left after the purge"

echo "deb_test.sh: $((checks - failures)) passed, $failures failed"
[ "$failures" = 0 ]
