#!/bin/sh
# Builds the Debian package of Hearth from this repository (make deb):
#
#   build.sh BINARY EXT_DIR OUTDIR
#
# BINARY is a release build of hearth, EXT_DIR where ext/build.sh put the
# Hearth extension (hearth-phpX.Y.so, for the PHP php-config names), and
# OUTDIR receives hearth_VERSION_ARCH.deb (and the tree it was built
# from, in OUTDIR/build/debian/hearth). Prints the package's path last.
#
# The package installs:
#   /usr/bin/hearth                        the binary, stripped
#   /usr/share/php/Hearth/                 the PHP library: with Debian's
#                                          include_path (.:/usr/share/php),
#                                          require 'Hearth/autoload.php'
#   /usr/lib/hearth/hearth-phpX.Y.so       the extension; hearth serve
#                                          --php-extension auto finds it in
#                                          ../lib/hearth from /usr/bin
#   /lib/systemd/system/hearth.service     not enabled, not started
#   /etc/hearth/hearth.toml                a conffile: the demo on
#                                          127.0.0.1:8080, PHP as www-data
#   /usr/share/man/man1/hearth*.1.gz       from packaging/debian/man/
#   /usr/share/doc/hearth/                 copyright, changelog
#
# It needs dpkg-deb, dpkg-shlibdeps (dpkg-dev, for the libc the binary
# needs), strip (binutils), gzip and php-config (php-dev): make deb
# installs them through packaging/deps.sh. Run as any user: the files are
# owned by root in the package (dpkg-deb --root-owner-group).
#
# DEBFULLNAME and DEBEMAIL, as for dch, name the maintainer;
# SOURCE_DATE_EPOCH, when set, dates the changelog and every file (by
# default the last commit's date), so that two builds of one commit give
# the same package.
set -eu

die() {
    printf 'packaging/debian/build.sh: %s\n' "$*" >&2
    exit 1
}

[ $# -eq 3 ] || die "usage: build.sh BINARY EXT_DIR OUTDIR"
binary=$1 ext_dir=$2 out=$3
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

for tool in dpkg-deb dpkg-shlibdeps strip gzip php-config md5sum; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool is not installed (make deb installs it: sh packaging/deps.sh deb)"
done
[ -x "$binary" ] || die "no hearth binary at $binary (cargo build --release -p hearth)"

version=$("$binary" --version | sed -n 's/^hearth \([0-9][0-9A-Za-z.+~]*\)$/\1/p')
[ -n "$version" ] || die "$binary --version does not say 'hearth VERSION'"
arch=$(dpkg --print-architecture)
php_version=$(php-config --version | cut -d. -f1,2)
ext=$ext_dir/hearth-php$php_version.so
[ -f "$ext" ] || die "no Hearth extension for PHP $php_version at $ext (make ext)"
maintainer="${DEBFULLNAME:-The Hearth developers} <${DEBEMAIL:-hearth@users.noreply.github.com}>"
epoch=${SOURCE_DATE_EPOCH:-$(git -C "$repo" log -1 --format=%ct 2>/dev/null || date +%s)}
# systemd's own answer where it has one (Debian 12: /lib/systemd/system,
# Debian 13: /usr/lib/systemd/system).
unit_dir=$(pkg-config --variable=systemdsystemunitdir systemd 2>/dev/null || true)
unit_dir=${unit_dir:-/lib/systemd/system}

mkdir -p "$out"
out=$(cd "$out" && pwd)
# dpkg-shlibdeps wants the tree as debian/PACKAGE beside a debian/control.
work=$out/build
root=$work/debian/hearth
rm -rf "$work"
mkdir -p "$root/DEBIAN"
umask 022

dir() { install -d -m 0755 "$root$1"; }
file() { install -m 0644 "$1" "$root$2"; }

dir /usr/bin
install -m 0755 "$binary" "$root/usr/bin/hearth"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$root/usr/bin/hearth"

# The PHP library: autoload.php and src/, not the tests or Composer's file.
dir /usr/share/php/Hearth
file "$repo/php/autoload.php" /usr/share/php/Hearth/autoload.php
(cd "$repo/php" && find src -type d) | while read -r d; do dir "/usr/share/php/Hearth/$d"; done
(cd "$repo/php" && find src -type f -name '*.php') | while read -r f; do file "$repo/php/$f" "/usr/share/php/Hearth/$f"; done

dir /usr/lib/hearth
file "$ext" "/usr/lib/hearth/hearth-php$php_version.so"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$root/usr/lib/hearth/hearth-php$php_version.so"

dir "$unit_dir"
file "$here/hearth.service" "$unit_dir/hearth.service"
dir /etc/hearth
file "$here/hearth.toml" /etc/hearth/hearth.toml

dir /usr/share/man/man1
for page in "$here"/man/*.1; do
    gzip -9n <"$page" >"$root/usr/share/man/man1/$(basename "$page").gz"
    chmod 0644 "$root/usr/share/man/man1/$(basename "$page").gz"
done

dir /usr/share/doc/hearth
{
    printf 'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n'
    printf 'Upstream-Name: hearth\nSource: https://github.com/hearth-php/hearth\n\n'
    printf 'Files: *\nCopyright: %s\nLicense: Expat\n' "$(sed -n 's/^Copyright (c) //p' "$repo/LICENSE")"
    # The license's text after its title and copyright line, each line
    # indented and each empty line a ".", as the format wants.
    sed '1,/^Copyright/d' "$repo/LICENSE" | sed '/./,$!d' | sed 's/^$/./; s/^/ /'
} >"$root/usr/share/doc/hearth/copyright"
chmod 0644 "$root/usr/share/doc/hearth/copyright"
{
    printf 'hearth (%s) unstable; urgency=medium\n\n' "$version"
    printf '  * Built from the repository with make deb (packaging/debian/build.sh).\n\n'
    printf ' -- %s  %s\n' "$maintainer" "$(LC_ALL=C date -u -R -d "@$epoch")"
} | gzip -9n >"$root/usr/share/doc/hearth/changelog.gz"
chmod 0644 "$root/usr/share/doc/hearth/changelog.gz"

for script in postinst prerm postrm; do
    install -m 0755 "$here/$script" "$root/DEBIAN/$script"
done
printf '/etc/hearth/hearth.toml\n' >"$root/DEBIAN/conffiles"
chmod 0644 "$root/DEBIAN/conffiles"

# The shared libraries the binary and the extension link to, with the
# versions their symbols need: "libc6 (>= 2.34), libgcc-s1 (>= 4.2)". Not
# warned about: the symbols of PHP the extension uses, which php-cgi has.
printf 'Source: hearth\n\nPackage: hearth\nArchitecture: any\n' >"$work/debian/control"
shlibs=$(cd "$work" && dpkg-shlibdeps -O -e"debian/hearth/usr/bin/hearth" \
    -e"debian/hearth/usr/lib/hearth/hearth-php$php_version.so" --warnings=2 | sed -n 's/^shlibs:Depends=//p')
[ -n "$shlibs" ] || die "dpkg-shlibdeps found no shared library dependency"

# dpkg's own measure: the files' sizes in KiB, rounded up one by one.
installed_size=$(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%s\n' |
    awk '{ kib += int(($1 + 1023) / 1024) } END { print kib + 0 }')
cat >"$root/DEBIAN/control" <<EOF
Package: hearth
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $installed_size
Depends: $shlibs, php-cgi
Recommends: php-fpm
Section: httpd
Priority: optional
Homepage: https://github.com/hearth-php/hearth
Description: PHP apps in warm workers: an HTTP server and task runner
 Hearth runs PHP applications in warm worker processes: each worker boots
 the application once, then serves request after request, behind an HTTP
 server (HTTP/1.1, HTTP/2, TLS) that starts, watches and replaces the
 workers. Legacy code keeps its superglobals, header(), sessions and exit;
 PSR-7 code gets a request object. Classic multi-script sites are served
 through php-fpm. hearth run runs batches of shell commands or PHP calls
 in parallel.
 .
 This package has the hearth binary, its PHP library (require
 'Hearth/autoload.php'), the Hearth extension for PHP $php_version, and a
 systemd unit, hearth.service, reading /etc/hearth/hearth.toml.
EOF
chmod 0644 "$root/DEBIAN/control"

# Every file but the conffiles, whose sums dpkg keeps itself.
(cd "$root" && find . -path ./DEBIAN -prune -o -path ./etc -prune -o -type f -print |
    sed 's|^\./||' | LC_ALL=C sort | xargs md5sum) >"$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/md5sums"

find "$root" -exec touch -h -d "@$epoch" {} +
deb=$out/hearth_${version}_$arch.deb
SOURCE_DATE_EPOCH=$epoch dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
