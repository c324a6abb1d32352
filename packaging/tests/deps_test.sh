#!/bin/sh
# Tests of packaging/deps.sh that never touch the machine: each case builds
# a fake one in a temporary directory (dpkg's database, apt's candidates,
# whether sudo works, the user id) and runs a copy of the script with a
# PATH holding only fakes of dpkg-query, apt-cache, apt-get, sudo and id,
# and links to the plain tools the script uses. The fakes log every call,
# so a case checks what the script decided and what it ran, and as whom.
#
#   sh packaging/tests/deps_test.sh     (make test runs it)
#
# Exit status 1 if any check failed, each named on a FAIL line.
set -u

root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/deps-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
checks=0
failures=0
case_name=

# The plain tools the script and the fakes use; nothing else is reachable.
mkdir "$work/tools"
for tool in sh awk sed grep cut dirname chmod rm env cat cp tr true; do
    for dir in /usr/local/bin /usr/bin /bin; do
        if [ -x "$dir/$tool" ]; then
            ln -s "$dir/$tool" "$work/tools/$tool"
            break
        fi
    done
    [ -e "$work/tools/$tool" ] || { echo "deps_test.sh: no $tool in /usr/local/bin, /usr/bin or /bin" >&2; exit 1; }
done

pass() { checks=$((checks + 1)); }
fail() {
    checks=$((checks + 1))
    failures=$((failures + 1))
    printf 'FAIL %s: %s\n' "$case_name" "$*"
}
# has FILE TEXT / lacks FILE TEXT: whether FILE has a line containing TEXT.
has() { if grep -qF -- "$2" "$1" 2>/dev/null; then pass; else fail "$(basename "$1") lacks '$2'"; fi; }
lacks() { if grep -qF -- "$2" "$1" 2>/dev/null; then fail "$(basename "$1") has '$2'"; else pass; fi; }
status_is() {
    got=$(cat "$m/status")
    if [ "$got" = "$1" ]; then pass; else fail "exit status $got, want $1; output:$(printf '\n'; cat "$m/out")"; fi
}
exists() { if [ -e "$1" ]; then pass; else fail "$1 does not exist"; fi; }
absent() { if [ -e "$1" ]; then fail "$1 exists"; else pass; fi; }

# machine NAME: a fresh fake machine in $m, run as root with apt's lists
# filled and nothing installed, and a copy of the real deps.sh and deps.txt
# (a case may write its own $m/pkg/deps.txt).
machine() {
    case_name=$1
    m=$work/$1
    mkdir -p "$m/bin" "$m/pkg" "$m/lists"
    cp "$root/packaging/deps.sh" "$m/pkg/deps.sh"
    cp "$root/packaging/deps.txt" "$m/pkg/deps.txt"
    : >"$m/dpkg"
    : >"$m/candidates"
    : >"$m/log"
    touch "$m/lists/deb.debian.org_debian_dists_bookworm_main_binary-amd64_Packages.lz4"
    echo 0 >"$m/uid"

    # dpkg-query -W -f=...: the status database, "name<TAB>status<TAB>provides".
    cat >"$m/bin/dpkg-query" <<'EOF'
#!/bin/sh
m=$(cd "$(dirname "$0")/.." && pwd)
echo "dpkg-query $*" >>"$m/log"
cat "$m/dpkg"
EOF
    # apt-cache policy NAME...: apt's format, from "name version" lines;
    # nothing at all for a name apt does not know, as apt-cache does.
    cat >"$m/bin/apt-cache" <<'EOF'
#!/bin/sh
m=$(cd "$(dirname "$0")/.." && pwd)
echo "apt-cache $*" >>"$m/log"
[ "$1" = policy ] || exit 100
shift
for name in "$@"; do
    awk -v n="$name" '$1 == n {
        printf "%s:\n  Installed: (none)\n  Candidate: %s\n  Version table:\n", n, $2
        if ($2 != "(none)") printf "     %s 500\n        500 http://deb.debian.org/debian bookworm/main amd64 Packages\n", $2
    }' "$m/candidates"
done
EOF
    # apt-get update: the lists become candidates.updated, if given.
    # apt-get install: logs who ran it and what policy-rc.d said, then marks
    # the packages installed, unless install-fails holds a count left.
    cat >"$m/bin/apt-get" <<'EOF'
#!/bin/sh
m=$(cd "$(dirname "$0")/.." && pwd)
if [ "$(cat "$m/uid")" = 0 ] || [ "${FAKE_SUDO:-}" = yes ]; then who=root; else who=user; fi
echo "apt-get($who, DEBIAN_FRONTEND=${DEBIAN_FRONTEND:-}) $*" >>"$m/log"
case $1 in
update)
    [ ! -e "$m/candidates.updated" ] || cp "$m/candidates.updated" "$m/candidates"
    ;;
install)
    if [ -e "$m/policy-rc.d" ]; then
        echo "policy-rc.d during install: $(grep -v '^#' "$m/policy-rc.d" | tr '\n' ' ')" >>"$m/log"
    else
        echo "policy-rc.d during install: none" >>"$m/log"
    fi
    if [ -s "$m/install-fails" ]; then
        left=$(cat "$m/install-fails")
        echo $((left - 1)) >"$m/install-fails"
        [ "$left" -le 0 ] || exit 100
    fi
    [ ! -e "$m/install-does-nothing" ] || exit 0
    for a in "$@"; do
        case $a in -*|install|DPkg::*) ;; *) printf '%s\tinstall ok installed\t\n' "$a" >>"$m/dpkg" ;; esac
    done
    ;;
esac
EOF
    # sudo -n CMD: runs CMD "as root" if sudo-ok exists; never prompts.
    cat >"$m/bin/sudo" <<'EOF'
#!/bin/sh
m=$(cd "$(dirname "$0")/.." && pwd)
echo "sudo $*" >>"$m/log"
[ "$1" = -n ] || { echo "sudo without -n: would prompt" >>"$m/log"; exit 1; }
shift
[ -e "$m/sudo-ok" ] || { echo "sudo: a password is required" >&2; exit 1; }
FAKE_SUDO=yes exec "$@"
EOF
    cat >"$m/bin/id" <<'EOF'
#!/bin/sh
m=$(cd "$(dirname "$0")/.." && pwd)
[ "$1" = -u ] && cat "$m/uid"
EOF
    chmod +x "$m/bin/"*
}

# deps ARGS...: runs the machine's copy of deps.sh; output in $m/out,
# exit status in $m/status.
deps() {
    (
        cd "$m" &&
            PATH="$m/bin:$work/tools" HEARTH_DEPS_POLICY_RC="$m/policy-rc.d" \
                HEARTH_DEPS_APT_LISTS="$m/lists" sh "$m/pkg/deps.sh" "$@"
    ) >"$m/out" 2>&1
    echo $? >"$m/status"
}

installed() { printf '%s\tinstall ok installed\t%s\n' "$1" "${2:-}" >>"$m/dpkg"; }
candidate() { printf '%s %s\n' "$1" "$2" >>"$m/candidates"; }

# two_packages: a short deps.txt for the machine.
two_packages() {
    cat >"$m/pkg/deps.txt" <<'EOF'
# package   targets   why
php-cgi     run,test  the workers
nginx       test      the reference
EOF
}

# --- What counts as present ---

machine everything-present
two_packages
installed php-cgi
installed nginx
deps test
status_is 0
has "$m/out" "make test: the 2 packages it needs are installed"
has "$m/log" "dpkg-query"
lacks "$m/log" "apt-cache"
lacks "$m/log" "apt-get"
lacks "$m/log" "sudo"
absent "$m/policy-rc.d"

machine provided-by-an-installed-package
two_packages
installed php8.2-cgi "php-cgi, php-json, php8.2-json, phpapi-20220829"
installed nginx-light "httpd, nginx (= 1.22.1)"
deps test
status_is 0
lacks "$m/log" "apt-get"

machine not-quite-installed
two_packages
printf 'php-cgi\tdeinstall ok config-files\t\n' >>"$m/dpkg"
printf 'nginx\tinstall ok half-installed\t\n' >>"$m/dpkg"
printf 'nginx-full\tinstall ok half-configured\tnginx\n' >>"$m/dpkg"
printf 'php8.2-cgi\tinstall ok not-installed\tphp-cgi\n' >>"$m/dpkg"
candidate php-cgi 2:8.2+93
candidate nginx 1.22.1-9
deps --dry-run test
status_is 1
has "$m/out" "  php-cgi"
has "$m/out" "  nginx"
has "$m/out" "would install them as root"
lacks "$m/log" "apt-get"

machine held-counts-as-installed
two_packages
printf 'php-cgi\thold ok installed\t\n' >>"$m/dpkg"
installed nginx
deps test
status_is 0

machine only-what-the-target-needs
two_packages
installed php-cgi
deps run
status_is 0
has "$m/out" "make run: the package it needs is installed"

# --- Installing as root ---

machine root-installs-missing
two_packages
installed php-cgi
candidate nginx 1.22.1-9
deps test
status_is 0
has "$m/out" "nginx"
has "$m/out" "the reference"
has "$m/log" "apt-get(root, DEBIAN_FRONTEND=noninteractive) install -y -q --no-install-recommends -o DPkg::Lock::Timeout=300 nginx"
has "$m/log" "policy-rc.d during install: exit 101"
lacks "$m/log" "apt-get(root, DEBIAN_FRONTEND=noninteractive) update"
lacks "$m/log" "sudo"
absent "$m/policy-rc.d"
has "$m/out" "make test: installed nginx"
# A second run finds everything and runs neither apt-cache nor apt-get.
: >"$m/log"
deps test
status_is 0
has "$m/out" "the 2 packages it needs are installed"
lacks "$m/log" "apt-"

machine policy-of-the-machine-is-kept
two_packages
candidate php-cgi 2:8.2+93
candidate nginx 1.22.1-9
printf '#!/bin/sh\nexit 0\n' >"$m/policy-rc.d"
deps test
status_is 0
has "$m/log" "policy-rc.d during install: exit 0"
exists "$m/policy-rc.d"
has "$m/policy-rc.d" "exit 0"

machine policy-removed-when-install-fails
two_packages
candidate php-cgi 2:8.2+93
candidate nginx 1.22.1-9
echo 2 >"$m/install-fails"
deps test
status_is 1
has "$m/out" "apt-get install failed"
absent "$m/policy-rc.d"

# --- As a user ---

machine user-with-passwordless-sudo
two_packages
echo 1000 >"$m/uid"
touch "$m/sudo-ok"
candidate php-cgi 2:8.2+93
candidate nginx 1.22.1-9
deps test
status_is 0
has "$m/out" "installing them through sudo -n"
has "$m/log" "sudo -n env DEBIAN_FRONTEND=noninteractive apt-get install"
has "$m/log" "apt-get(root, DEBIAN_FRONTEND=noninteractive) install"
has "$m/log" "policy-rc.d during install: exit 101"
lacks "$m/log" "apt-get(user"
lacks "$m/log" "would prompt"
absent "$m/policy-rc.d"

machine user-whose-sudo-wants-a-password
two_packages
echo 1000 >"$m/uid"
installed nginx
candidate php-cgi 2:8.2+93
deps test
status_is 1
has "$m/out" "php-cgi"
has "$m/out" "sudo -n is refused"
has "$m/out" "nothing installed, nothing built"
has "$m/out" "    sudo sh $m/pkg/deps.sh test"
lacks "$m/log" "apt-get"
lacks "$m/log" "apt-cache"
lacks "$m/log" "would prompt"
absent "$m/policy-rc.d"

machine user-without-sudo
two_packages
echo 1000 >"$m/uid"
rm "$m/bin/sudo"
deps run
status_is 1
has "$m/out" "not root, and no sudo"
has "$m/out" "    su root -c 'sh $m/pkg/deps.sh run'"
lacks "$m/log" "apt-get"

# --- When apt-get update runs ---

machine update-when-a-missing-package-has-no-candidate
two_packages
installed php-cgi
printf 'nginx 1.22.1-9\n' >"$m/candidates.updated"
deps test
status_is 0
has "$m/out" "apt-get update (no candidate for nginx)"
has "$m/log" "apt-get(root, DEBIAN_FRONTEND=noninteractive) update -q"
has "$m/log" "install -y -q --no-install-recommends -o DPkg::Lock::Timeout=300 nginx"

machine update-when-the-lists-are-empty
two_packages
rm "$m/lists/"*
candidate php-cgi 2:8.2+93
candidate nginx 1.22.1-9
deps test
status_is 0
has "$m/out" "apt-get update (apt's package lists are empty)"
has "$m/log" "update -q"

machine update-and-retry-when-install-fails
two_packages
candidate php-cgi 2:8.2+93
candidate nginx 1.22.1-9
echo 1 >"$m/install-fails"
deps test
status_is 0
has "$m/out" "apt-get update (apt-get install failed; its lists may be out of date)"
has "$m/dpkg" "nginx"

machine not-installable
two_packages
installed nginx
candidate php-cgi "(none)"
deps test
status_is 1
has "$m/out" "not installable here, apt has no candidate for: php-cgi"
has "$m/log" "update -q"
lacks "$m/log" "install -y"
absent "$m/policy-rc.d"

machine unknown-to-apt
two_packages
installed php-cgi
deps test
status_is 1
has "$m/out" "apt has no candidate for: nginx"
lacks "$m/log" "install -y"

machine still-missing-after-install
two_packages
candidate php-cgi 2:8.2+93
candidate nginx 1.22.1-9
touch "$m/install-does-nothing"
deps test
status_is 1
has "$m/out" "still not installed after apt-get install: php-cgi nginx"

machine dry-run-changes-nothing
two_packages
candidate php-cgi 2:8.2+93
deps --dry-run test
status_is 1
has "$m/out" "no candidate in apt's lists (a real run updates them first): nginx"
lacks "$m/log" "apt-get"
absent "$m/policy-rc.d"

machine several-without-candidate
two_packages
deps test
status_is 1
has "$m/out" "apt has no candidate for: php-cgi nginx."

machine update-fails
two_packages
rm "$m/lists/"*
printf '#!/bin/sh\nexit 100\n' >"$m/bin/apt-get"
deps test
status_is 1
has "$m/out" "apt-get update failed"
absent "$m/policy-rc.d"

# --- Outputs captured from Debian 12 (packaging/tests/fixtures/) ---

machine outputs-of-debian-12
cat >"$m/pkg/deps.txt" <<'EOF'
php-cgi                 test  provided by php8.2-cgi
php-cli                 test  provided by php8.2-cli
nginx                   test  installed
httpd                   test  provided by nginx
php-fpm                 test  removed, its configuration kept
no-such-package-hearth  test  unknown to apt
EOF
cp "$root/packaging/tests/fixtures/dpkg-query.txt" "$m/dpkg"
printf 'php8.2-fpm\tdeinstall ok config-files\tphp-fpm, php-json, php8.2-json, phpapi-20220829\n' >>"$m/dpkg"
cat >"$m/bin/apt-cache" <<EOF
#!/bin/sh
echo "apt-cache \$*" >>"$m/log"
cat "$root/packaging/tests/fixtures/apt-cache-policy.txt"
EOF
deps --dry-run test
status_is 1
has "$m/out" "  php-fpm                       removed, its configuration kept"
has "$m/out" "  no-such-package-hearth        unknown to apt"
lacks "$m/out" "  php-cgi"
lacks "$m/out" "  httpd"
has "$m/out" "no candidate in apt's lists (a real run updates them first): no-such-package-hearth"
deps test
status_is 1
has "$m/out" "apt has no candidate for: no-such-package-hearth."
lacks "$m/log" "install -y"

# --- The list itself ---

machine list-has-unknown-target
echo 'php-cgi     run,tset  the workers' >"$m/pkg/deps.txt"
deps run
status_is 1
has "$m/out" "unknown target tset"

machine list-line-without-why
echo 'php-cgi     run' >"$m/pkg/deps.txt"
deps run
status_is 1
has "$m/out" "want: package targets why"

machine unknown-target-asked
two_packages
deps lint
status_is 1
has "$m/out" "unknown target 'lint'"

machine real-list-for-run
installed php8.2-cgi "php-cgi"
installed php8.2-dev "php-dev"
deps --list run
status_is 0
has "$m/out" "php-cgi"
has "$m/out" "php-dev"
lacks "$m/out" "phpunit"
deps run
status_is 0

machine real-list-for-test
deps --list test
for name in php-cgi php-dev php-cli php-fpm nginx phpunit php-codesniffer php-slim php-nyholm-psr7 \
    php-symfony-framework-bundle curl procps; do
    has "$m/out" "$name"
done

# docs/getting-started.md shows deps.txt: the table there is the one
# `deps.sh --table` prints.
case_name=docs-table-matches-the-list
sh "$root/packaging/deps.sh" --table >"$work/table"
awk '/^<!-- packages: begin/ { on = 1; next } /^<!-- packages: end/ { on = 0 } on' \
    "$root/docs/getting-started.md" >"$work/docs-table"
if [ -s "$work/docs-table" ] && cmp -s "$work/table" "$work/docs-table"; then
    pass
else
    fail "the table between <!-- packages: begin --> and <!-- packages: end --> in docs/getting-started.md is not the output of sh packaging/deps.sh --table; paste that output there"
fi

if [ "$failures" -gt 0 ]; then
    echo "packaging/tests/deps_test.sh: $failures of $checks checks failed"
    exit 1
fi
echo "packaging/tests/deps_test.sh: $checks checks passed"
