#!/bin/sh
# Makes a fresh, private, writable copy of Debian's DokuWiki (package
# `dokuwiki`) for tests and benchmarks, configured so that no install
# wizard is needed:
#
#   dokuwiki.sh DIR
#
# DIR must not exist, or be an empty directory. Afterwards it holds:
#
#   DIR/root/   the document root: a copy of /usr/share/dokuwiki, with the
#               package's symlinks (lib/tpl, lib/plugins -> /var/lib/...)
#               replaced by copies; serve it with
#               `hearth serve --root DIR/root` or nginx + php-fpm
#   DIR/conf/   the configuration: a copy of /etc/dokuwiki, with its own
#               local.php, users.auth.php and acl.auth.php
#   DIR/data/   pages, media, cache, locks, index, PHP's sessions: a new,
#               small wiki
#
# conf/ and data/ sit outside the document root, as /etc/dokuwiki and
# /var/lib/dokuwiki do in Debian's layout, so neither server can send the
# password hashes or the raw pages. Only DIR/root/inc/preload.php is
# changed from the package's files: Debian's names /etc/dokuwiki, and the
# copy's names DIR/conf. Nothing under /etc, /var or /usr is written.
#
# The wiki: title "Hearth DokuWiki", ACLs on (anyone may read, users may
# edit and upload), one user `admin` in group `admin`, the superuser, with
# the password DOKUWIKI_PASSWORD (default: hearth-admin), and the pages
# start, wiki:welcome and playground:playground. DokuWiki's update check
# and DNS lookups are off: a test must not reach the network.
#
# Run as root, conf/ and data/ are given to DOKUWIKI_USER (default
# www-data), the user PHP runs as; run as another user, they stay that
# user's, as PHP then runs as the same user.
set -eu

die() {
    echo "dokuwiki.sh: $*" >&2
    exit 1
}

[ $# -eq 1 ] || die "usage: $0 DIR"
share=/usr/share/dokuwiki
etc=/etc/dokuwiki
lib=/var/lib/dokuwiki/lib
[ -f "$share/doku.php" ] || die "$share/doku.php not found: install Debian's package (apt-get install dokuwiki)"
[ -d "$lib/tpl" ] && [ -d "$lib/plugins" ] || die "$lib/tpl or $lib/plugins not found: is the dokuwiki package installed?"

mkdir -p "$1"
dir=$(cd "$1" && pwd -P)
[ -z "$(ls -A "$dir")" ] || die "$dir is not empty"
password=${DOKUWIKI_PASSWORD:-hearth-admin}
owner=${DOKUWIKI_USER:-www-data}
# The copy may live under a private temporary directory; PHP, as another
# user, must still reach it.
chmod 755 "$dir"

# code SRC DST: the package's code, which PHP only reads, as hard links
# where the filesystem and fs.protected_hardlinks allow (5,000 files in a
# fraction of a second, where copying them takes seconds on a slow disk),
# else as a copy. Either way the files are root's, mode 0644: PHP running
# as www-data cannot change them, and DokuWiki writes only to conf/ and
# data/.
code() {
    cp -R -P -l "$1" "$2" 2>/dev/null || {
        rm -rf "$2"
        cp -R "$1" "$2"
    }
}

# --- root/: the code, symlinks into /var/lib and /etc resolved ---
code "$share" "$dir/root"
rm "$dir/root/lib/tpl" "$dir/root/lib/plugins" "$dir/root/.htaccess"
code "$lib/tpl" "$dir/root/lib/tpl"
mkdir "$dir/root/lib/plugins"
for plugin in "$lib/plugins"/*; do
    # Debian ships the `testing` plugin unreadable (0700 root), so that no
    # web server loads it; the copy leaves it out.
    [ "$(basename "$plugin")" = testing ] && continue
    code "$plugin" "$dir/root/lib/plugins/$(basename "$plugin")"
done
cp "$etc/htaccess" "$dir/root/.htaccess"
# The one changed file: Debian's preload.php points DokuWiki at
# /etc/dokuwiki (and its farm at /etc and /var/lib); the copy's at conf/.
# (A new file, not written through the hard link.)
rm "$dir/root/inc/preload.php"
sed -e "s|/etc/dokuwiki|$dir/conf|g" -e "s|/var/lib/dokuwiki|$dir|g" \
    "$share/inc/preload.php" >"$dir/root/inc/preload.php"
grep -q "/etc/dokuwiki\|/var/lib/dokuwiki" "$dir/root/inc/preload.php" &&
    die "preload.php still names /etc/dokuwiki or /var/lib/dokuwiki"

# --- conf/: Debian's configuration, with the copy's own local settings ---
mkdir "$dir/conf"
for f in "$etc"/* "$etc"/.htaccess; do
    # acl.auth.php and users.auth.php are symlinks into /var/lib/dokuwiki
    # (readable by www-data only): written below instead.
    [ -L "$f" ] && continue
    cp "$f" "$dir/conf/"
done
cat >"$dir/conf/local.php" <<PHP
<?php
// Written by bench/reference/dokuwiki.sh.
\$conf['title'] = 'Hearth DokuWiki';
\$conf['license'] = 'cc-by-sa';
\$conf['savedir'] = '$dir/data';
\$conf['useacl'] = 1;
\$conf['superuser'] = '@admin';
\$conf['updatecheck'] = 0;
\$conf['dnslookups'] = 0;
PHP
# Debian's preload.php includes conf/preload.php, the administrator's
# hook: PHP's sessions (one per anonymous visitor) are kept in the copy,
# not in /var/lib/php/sessions.
cat >"$dir/conf/preload.php" <<PHP
<?php
// Written by bench/reference/dokuwiki.sh.
session_save_path('$dir/data/sessions');
PHP
hash=$(DOKUWIKI_PASSWORD=$password php -r 'echo password_hash(getenv("DOKUWIKI_PASSWORD"), PASSWORD_BCRYPT);') ||
    die "php -r password_hash failed (apt-get install php-cli)"
cat >"$dir/conf/users.auth.php" <<USERS
# users.auth.php
# <?php exit()?>
# Don't modify the lines above
#
# login:passwordhash:Real Name:email:groups,comma,separated

admin:$hash:Wiki Admin:admin@example.org:admin,user
USERS
chmod 600 "$dir/conf/users.auth.php"
cat >"$dir/conf/acl.auth.php" <<'ACL'
# acl.auth.php
# <?php exit()?>
# Don't modify the lines above
#
# namespace/page  user/@group  permission (1 read, 2 edit, 4 create, 8 upload, 16 delete)
*               @ALL          1
*               @user         8
ACL

# --- data/: a new wiki ---
for d in attic cache index locks log log/deprecated log/error log/debug media media_attic \
    media_meta meta pages pages/wiki pages/playground sessions tmp; do
    mkdir -p "$dir/data/$d"
done
cat >"$dir/data/pages/start.txt" <<'PAGE'
====== Welcome to Hearth's DokuWiki ======

This wiki is served from flat files. See [[wiki:welcome]] and the [[playground:playground]].

===== A section =====

Some **bold** text, some //italic// text, and a list:

  * one
  * two
PAGE
cat >"$dir/data/pages/wiki/welcome.txt" <<'PAGE'
====== Welcome ======

DokuWiki is a simple to use and highly versatile Open Source wiki software that doesn't require a database.

Back to the [[:start]].
PAGE
cat >"$dir/data/pages/playground/playground.txt" <<'PAGE'
====== PlayGround ======

Edit this page freely.
PAGE
# The pages' times, shown in their footers, are fixed, so that two copies
# made at different moments show the same page.
find "$dir/data/pages" "$dir/conf" -type f -exec touch -d "2024-01-01 00:00:00 UTC" {} +

if [ "$(id -u)" = 0 ]; then
    id "$owner" >/dev/null 2>&1 || die "no user $owner (set DOKUWIKI_USER)"
    chown -R "$owner" "$dir/conf" "$dir/data"
fi
echo "$dir/root"
