#!/bin/sh
# Installs the Debian or Ubuntu packages a make target needs, as listed in
# packaging/deps.txt, before anything is built.
#
#   deps.sh TARGET            install what TARGET (run, test, bench, deb) needs
#   deps.sh --dry-run TARGET  say what is present, missing, installable;
#                             change nothing (exit 1 if something is missing)
#   deps.sh --list TARGET     the names of the packages TARGET needs
#   deps.sh --table           deps.txt as the table in docs/getting-started.md
#
# As root it runs apt-get itself; as a user with passwordless sudo, through
# `sudo -n`; otherwise it installs nothing and prints the one command to
# run. It never starts a system service: while apt-get installs, a
# policy-rc.d that refuses every start is in place, created only if there
# was none and removed only if it was created here. `apt-get update` runs
# only when apt's lists are empty, when a missing package has no candidate
# in them, or when an install from them failed. With everything present it
# runs one dpkg-query and nothing else.
#
# It is POSIX sh and awk, not Python, because it runs before anything else
# on a fresh machine, which may have neither Python nor PHP.
#
# Exit status: 0 when every package is present or was installed; 1 when
# something is missing and was not installed; 2 on bad usage.
#
# packaging/tests/deps_test.sh runs it against fake dpkg-query, apt-cache,
# apt-get, sudo and id found first in PATH, with these two paths moved:
# HEARTH_DEPS_POLICY_RC (default /usr/sbin/policy-rc.d) and
# HEARTH_DEPS_APT_LISTS (default /var/lib/apt/lists).
set -eu
LC_ALL=C # apt-cache's "Candidate:" is translated otherwise
export LC_ALL

here=$(cd "$(dirname "$0")" && pwd)
deps_file=$here/deps.txt
policy_rc=${HEARTH_DEPS_POLICY_RC:-/usr/sbin/policy-rc.d}
apt_lists=${HEARTH_DEPS_APT_LISTS:-/var/lib/apt/lists}
targets="run test bench deb"

say() { printf 'deps: %s\n' "$*"; }
die() {
    printf 'deps: %s\n' "$*" >&2
    exit 1
}
usage() {
    sed -n '5,9s/^#   //p' "$0" >&2
    exit 2
}

# --- Decisions: functions of the text they are given, no side effects ---

# check_list: deps.txt has three columns on every line and only known
# targets, so that a typo cannot drop a package without a word.
check_list() {
    awk -v known="$targets" '
        /^[ \t]*(#|$)/ { next }
        {
            if (NF < 3) { printf "%d: want: package targets why\n", NR; bad = 1; next }
            n = split($2, t, ",")
            for (i = 1; i <= n; i++)
                if (index(" " known " ", " " t[i] " ") == 0) {
                    printf "%d: unknown target %s (known: %s)\n", NR, t[i], known
                    bad = 1
                }
        }
        END { exit bad }' "$deps_file"
}

# needed TARGET: "package<TAB>why" for each package of deps.txt that
# TARGET needs, in the file's order.
needed() {
    awk -v target="$1" '
        /^[ \t]*(#|$)/ { next }
        {
            n = split($2, t, ",")
            for (i = 1; i <= n; i++)
                if (t[i] == target) {
                    why = $0
                    sub(/^[ \t]*[^ \t]+[ \t]+[^ \t]+[ \t]+/, "", why)
                    printf "%s\t%s\n", $1, why
                }
        }' "$deps_file"
}

# installed_names: from `dpkg-query -W -f='${Package}\t${Status}\t${Provides}\n'`,
# the name of each installed package and every name it provides.
# "deinstall ok config-files", "install ok half-installed" or "install ok
# not-installed" is not installed; "hold ok installed" is.
installed_names() {
    awk -F '\t' '
        $2 ~ / installed$/ {
            print $1
            n = split($3, p, ",")
            for (i = 1; i <= n; i++) {
                name = p[i]
                sub(/\(.*/, "", name)   # "foo (= 1.2)" provides foo
                gsub(/[ \t]/, "", name)
                if (name != "") print name
            }
        }'
}

# plan NEEDED INSTALLED: "present|missing<TAB>package<TAB>why" for each
# line of NEEDED (from needed), given INSTALLED (from installed_names).
plan() {
    NEEDED=$1 INSTALLED=$2 awk 'BEGIN {
        n = split(ENVIRON["INSTALLED"], have, "\n")
        for (i = 1; i <= n; i++) present[have[i]] = 1
        n = split(ENVIRON["NEEDED"], line, "\n")
        for (i = 1; i <= n; i++) {
            if (line[i] == "") continue
            split(line[i], f, "\t")
            printf "%s\t%s\t%s\n", (f[1] in present) ? "present" : "missing", f[1], f[2]
        }
    }'
}

# no_candidate MISSING POLICY: the names in MISSING (lines of plan), on one
# line, that
# `apt-cache policy` (POLICY, its output) gives no candidate: "Candidate:
# (none)", or not described at all, as for a name apt has never heard of.
no_candidate() {
    MISSING=$1 awk '
        /^[^ ].*:$/ { pkg = substr($0, 1, length($0) - 1); next }
        /^  Candidate:/ && pkg != "" { if ($2 != "(none)") ok[pkg] = 1; pkg = "" }
        END {
            n = split(ENVIRON["MISSING"], line, "\n")
            for (i = 1; i <= n; i++) {
                if (line[i] == "") continue
                split(line[i], f, "\t")
                if (!(f[2] in ok)) { printf "%s%s", sep, f[2]; sep = " " }
            }
        }' <<EOF
$2
EOF
}

# table: deps.txt as a Markdown table, one column per target.
table() {
    awk -v known="$targets" '
        BEGIN {
            nt = split(known, order, " ")
            printf "| Package |"; for (i = 1; i <= nt; i++) printf " `make %s` |", order[i]; print " Why |"
            printf "|---|"; for (i = 1; i <= nt; i++) printf ":-:|"; print "---|"
        }
        /^[ \t]*(#|$)/ { next }
        {
            why = $0
            sub(/^[ \t]*[^ \t]+[ \t]+[^ \t]+[ \t]+/, "", why)
            printf "| `%s` |", $1
            for (i = 1; i <= nt; i++) printf " %s |", (index("," $2 ",", "," order[i] ",") ? "yes" : "")
            printf " %s |\n", why
        }' "$deps_file"
}

# --- Effects ---

# quote WORD: WORD as one shell word.
quote() {
    case $1 in
        *[!A-Za-z0-9_./=:,+-]*) printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")" ;;
        *) printf '%s' "$1" ;;
    esac
}

names() { printf '%s\n' "$1" | awk -F '\t' 'NF { printf "%s%s", sep, $2; sep = " " }'; }

show() { printf '%s\n' "$1" | awk -F '\t' 'NF { printf "  %-29s %s\n", $2, $3 }'; }

query_installed() {
    dpkg-query -W -f='${Package}\t${Status}\t${Provides}\n' 2>/dev/null | installed_names
}

lists_empty() {
    for f in "$apt_lists"/*_Packages*; do
        [ -e "$f" ] && return 1
    done
    return 0
}

# as_root CMD...: runs CMD as root, directly or through `sudo -n`.
as_root() {
    if [ -z "$sudo" ]; then "$@"; else $sudo "$@"; fi
}

created_policy=no
remove_policy() {
    if [ "$created_policy" = yes ]; then
        as_root rm -f "$policy_rc" || say "could not remove $policy_rc, which this script wrote: remove it by hand"
        created_policy=no
    fi
}

# guard_services: packages such as nginx and php-fpm start their service
# when installed (and fail to install if port 80 is taken); the tests start
# their own. invoke-rc.d and deb-systemd-invoke ask policy-rc.d first, and
# exit status 101 means "no". An existing policy-rc.d is the machine's own
# and is left as it is.
guard_services() {
    [ -e "$policy_rc" ] && return 0
    # noclobber: the file is created here, or not at all.
    if as_root sh -c 'set -C && printf "#!/bin/sh\n# packaging/deps.sh: no service starts while it installs packages.\nexit 101\n" >"$1" && chmod 755 "$1"' sh "$policy_rc" 2>/dev/null; then
        created_policy=yes
        trap remove_policy EXIT
        trap 'exit 130' INT
        trap 'exit 143' TERM HUP
    elif [ ! -e "$policy_rc" ]; then
        die "cannot write $policy_rc, which keeps the packages from starting services while they install"
    fi
}

apt_update() {
    say "apt-get update ($1)"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q || die "apt-get update failed (above)"
    updated=yes
}

apt_install() {
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        -o DPkg::Lock::Timeout=300 "$@"
}

# --- Main ---

mode=install
case ${1:-} in
    --dry-run) mode=dry-run; shift ;;
    --list) mode=list; shift ;;
    --table) [ $# -eq 1 ] || usage; check_list >&2 || die "$deps_file is malformed (above)"; table; exit 0 ;;
    -h | --help) usage ;;
    -*) usage ;;
esac
[ $# -eq 1 ] || usage
target=$1
check_list >&2 || die "$deps_file is malformed (above)"
case " $targets " in
    *" $target "*) ;;
    *) die "unknown target '$target' (known: $targets)" ;;
esac
needs=$(needed "$target")

if [ "$mode" = list ]; then
    printf '%s\n' "$needs" | cut -f1
    exit 0
fi

if ! command -v dpkg-query >/dev/null 2>&1; then
    say "no dpkg-query: not Debian or Ubuntu, so nothing is checked. make $target needs:"
    printf '%s\n' "$needs" | awk -F '\t' 'NF { printf "  %-29s %s\n", $1, $2 }'
    exit 0
fi

decisions=$(plan "$needs" "$(query_installed)")
missing=$(printf '%s\n' "$decisions" | grep '^missing' || true)
total=$(printf '%s\n' "$decisions" | grep -c . || true)
if [ -z "$missing" ]; then
    if [ "$total" = 1 ]; then
        say "make $target: the package it needs is installed"
    else
        say "make $target: the $total packages it needs are installed"
    fi
    exit 0
fi

say "make $target needs packages that are not installed:"
show "$missing"

if [ "$(id -u)" = 0 ]; then
    sudo= how="as root"
elif ! command -v sudo >/dev/null 2>&1; then
    sudo=none why_not="not root, and no sudo"
elif sudo -n true 2>/dev/null; then
    sudo="sudo -n" how="through sudo -n"
else
    sudo=none why_not="not root, and sudo -n is refused (it would ask for a password)"
fi

if [ "$mode" = dry-run ]; then
    none=$(no_candidate "$missing" "$(apt-cache policy $(names "$missing") 2>/dev/null)")
    [ -z "$none" ] || say "no candidate in apt's lists (a real run updates them first): $none"
    case $sudo in
        none) say "would stop: $why_not" ;;
        *) say "would install them $how with apt-get install --no-install-recommends" ;;
    esac
    exit 1
fi

if [ "$sudo" = none ]; then
    script=$(quote "$here/deps.sh")
    if command -v sudo >/dev/null 2>&1; then
        command="sudo sh $script $target"
    else
        command="su root -c $(quote "sh $script $target")"
    fi
    say "$why_not: nothing installed, nothing built. Run this, then make $target again:"
    printf '    %s\n' "$command"
    exit 1
fi

updated=no
if lists_empty; then
    apt_update "apt's package lists are empty"
fi
none=$(no_candidate "$missing" "$(apt-cache policy $(names "$missing") 2>/dev/null)")
if [ -n "$none" ] && [ "$updated" = no ]; then
    apt_update "no candidate for $none"
    none=$(no_candidate "$missing" "$(apt-cache policy $(names "$missing") 2>/dev/null)")
fi
if [ -n "$none" ]; then
    die "not installable here, apt has no candidate for: $none. docs/getting-started.md compares the distributions (on Ubuntu, several are in the universe area)."
fi

guard_services
say "installing them $how: apt-get install --no-install-recommends $(names "$missing")"
# shellcheck disable=SC2046 # one argument per package name
if ! apt_install $(names "$missing"); then
    [ "$updated" = no ] || die "apt-get install failed (above)"
    apt_update "apt-get install failed; its lists may be out of date"
    apt_install $(names "$missing") || die "apt-get install failed (above)"
fi
remove_policy

still=$(plan "$needs" "$(query_installed)" | grep '^missing' || true)
[ -z "$still" ] || die "still not installed after apt-get install: $(names "$still")"
say "make $target: installed $(names "$missing")"
