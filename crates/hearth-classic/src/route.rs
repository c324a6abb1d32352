//! What nginx would do with a request for a classic PHP site.
//!
//! The model is this nginx server block with Debian's snippets, the one
//! `bench/reference/nginx-fpm.sh` writes with `NGINX_SITE=classic`:
//!
//! ```nginx
//! root DOCROOT;
//! index index.php index.html;
//! location / {
//!     try_files $uri $uri/ /index.php?$query_string;
//! }
//! location ~ [^/]\.php(/|$) {
//!     # snippets/fastcgi-php.conf:
//!     fastcgi_split_path_info ^(.+?\.php)(/.*)$;
//!     try_files $fastcgi_script_name =404;
//!     set $path_info $fastcgi_path_info;
//!     fastcgi_param PATH_INFO $path_info;
//!     fastcgi_index index.php;
//!     include fastcgi.conf;
//!     fastcgi_pass ...;
//! }
//! ```
//!
//! with php-fpm's defaults (`cgi.fix_pathinfo=1`,
//! `security.limit_extensions = .php`). Where [`Router`] is stricter than
//! that configuration, the item saying so starts with **Stricter**:
//! dotfiles, `.php` sources, and symlinks leading out of the root.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::uri::is_normalized;

/// How many internal redirects (index, fallback) one request may take;
/// nginx allows 10 before answering 500.
const MAX_INTERNAL_REDIRECTS: usize = 10;

/// The choices a classic site makes, with nginx's directive for each.
#[derive(Debug, Clone)]
pub struct Options {
    /// `index index.php index.html;`: the files tried, in order, for a
    /// request ending in `/`. Names only, no slash.
    pub index: Vec<String>,
    /// The last argument of `try_files $uri $uri/ /index.php?$query_string;`:
    /// the front controller a request for nothing on disk goes to, with the
    /// query string unchanged. `None` for a site without one: such a miss
    /// is a 404 (`try_files $uri $uri/ =404;`).
    pub fallback: Option<String>,
    /// Directories outside the root that symlinks under it may lead to.
    /// nginx follows every symlink (`disable_symlinks off`, its default);
    /// **Stricter**: by default nothing is served or run whose real path is
    /// outside the root's real path (403, as nginx with `disable_symlinks
    /// on`), unless it is under one of these. Debian's `wordpress` package,
    /// for one, links `wp-content` to `/var/lib/wordpress/wp-content`.
    pub symlink_targets: Vec<PathBuf>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            index: vec!["index.php".into(), "index.html".into()],
            fallback: Some("/index.php".into()),
            symlink_targets: Vec::new(),
        }
    }
}

/// What to do with one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Send this file (its real path, checked to be inside the root).
    Static(PathBuf),
    /// Run this PHP script with these FastCGI parameters.
    Php(PhpTarget),
    /// 301 to this location (path and query, no scheme or host): nginx's
    /// static module answers so for a directory asked without its slash,
    /// the path escaped as nginx escapes it and the query string as sent.
    Redirect(Vec<u8>),
    /// 404.
    NotFound,
    /// 403: a directory with no index file (nginx, `autoindex off`), and
    /// what this router refuses where nginx would serve (see the module doc).
    Forbidden,
    /// 400: a path [`normalize_uri`](crate::normalize_uri) would not have
    /// given (it was not normalized first).
    BadRequest,
}

/// The FastCGI parameters nginx + `snippets/fastcgi-php.conf` +
/// `fastcgi.conf` send for a PHP script (the ones that depend on routing;
/// the caller adds REQUEST_URI, REQUEST_METHOD, the headers and the rest
/// of `fastcgi.conf`). All bytes, as nginx's variables are.
///
/// PHP (php-fpm with `cgi.fix_pathinfo=1`) keeps each of these in
/// `$_SERVER` as sent, for a script that exists, and adds `PHP_SELF`
/// itself: [`PhpTarget::php_self`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhpTarget {
    /// `SCRIPT_FILENAME $document_root$fastcgi_script_name` (the path under
    /// the root as requested, not with its symlinks resolved).
    pub script_filename: Vec<u8>,
    /// `SCRIPT_NAME $fastcgi_script_name`: the first capture of
    /// `fastcgi_split_path_info ^(.+?\.php)(/.*)$`.
    pub script_name: Vec<u8>,
    /// `PATH_INFO $path_info`: the second capture, empty without one.
    pub path_info: Vec<u8>,
    /// `PATH_TRANSLATED`: nginx's `fastcgi.conf` does not send it and
    /// php-fpm adds it to `$_SERVER` only for a SCRIPT_FILENAME that does
    /// not exist (never the case here), so PHP shows none: always `None`.
    pub path_translated: Option<Vec<u8>>,
    /// `DOCUMENT_ROOT $document_root`: the root's real path.
    pub document_root: Vec<u8>,
    /// `DOCUMENT_URI $document_uri`: `try_files $fastcgi_script_name`
    /// sets `$uri` to the script name, so this is the script name too,
    /// without the path info.
    pub document_uri: Vec<u8>,
    /// `QUERY_STRING $query_string`: the request's query string, unchanged
    /// by the fallback (`/index.php?$query_string`).
    pub query_string: Vec<u8>,
}

impl PhpTarget {
    /// `$_SERVER['PHP_SELF']` as php-fpm computes it (`cgi.fix_pathinfo=1`):
    /// SCRIPT_NAME followed by PATH_INFO. Not a FastCGI parameter.
    pub fn php_self(&self) -> Vec<u8> {
        [self.script_name.as_slice(), &self.path_info].concat()
    }
}

/// Routes request paths for one document root.
#[derive(Debug, Clone)]
pub struct Router {
    root: PathBuf,
    options: Options,
}

impl Router {
    /// A router for `root` (`root` directive), resolved to its real path
    /// now: a root that is missing or not a directory is an error naming it.
    pub fn new(root: &Path, mut options: Options) -> Result<Router, Error> {
        let root = real_dir(root)?;
        for name in &options.index {
            if name.is_empty() || name.contains('/') || name == "." || name == ".." {
                return Err(Error::bad_option(&format!("index file name {name:?}")));
            }
        }
        if let Some(fallback) = &options.fallback {
            if !is_normalized(fallback.as_bytes()) || fallback.ends_with('/') {
                return Err(Error::bad_option(&format!(
                    "fallback {fallback:?} (a path under the root such as /index.php)"
                )));
            }
        }
        options.symlink_targets = options
            .symlink_targets
            .iter()
            .map(|dir| real_dir(dir))
            .collect::<Result<_, _>>()?;
        Ok(Router { root, options })
    }

    /// The document root's real path.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// What nginx would do with `uri` (nginx's `$uri`, as given by
    /// [`normalize_uri`](crate::normalize_uri)) and `query` (`$args`,
    /// without the `?`).
    pub fn route(&self, uri: &[u8], query: &[u8]) -> Route {
        if !is_normalized(uri) {
            return Route::BadRequest;
        }
        let mut uri = uri.to_vec();
        for _ in 0..MAX_INTERNAL_REDIRECTS {
            match self.step(&uri, query) {
                Step::Done(route) => return route,
                Step::InternalRedirect(next) => uri = next,
            }
        }
        // nginx answers 500 ("rewrite or internal redirection cycle"); only
        // a fallback that is itself missing and not PHP gets here.
        Route::NotFound
    }

    /// One pass through nginx's locations for `uri`.
    fn step(&self, uri: &[u8], query: &[u8]) -> Step {
        if is_php_location(uri) {
            return Step::Done(self.php(uri, query));
        }
        // location / { try_files $uri $uri/ FALLBACK; }
        let path = self.fs_path(uri);
        let is_dir_uri = uri.ends_with(b"/");
        let found = std::fs::metadata(&path);
        // Stricter: nginx serves dotfiles (Debian's default site only has
        // `location ~ /\.ht { deny all; }`, commented out); here a file or
        // directory under a segment starting with `.` is 403. A miss still
        // goes to the fallback, as in nginx.
        if found.is_ok() && has_dot_segment(uri) {
            return Step::Done(Route::Forbidden);
        }
        match found {
            Ok(meta) if meta.is_file() && !is_dir_uri => {
                return Step::Done(self.static_file(&path))
            }
            Ok(meta) if meta.is_dir() => {
                if !is_dir_uri {
                    // ngx_http_static_handler: 301 to the path with a slash,
                    // escaped (NGX_ESCAPE_URI), the query string kept.
                    let mut location = escape_uri(uri);
                    location.push(b'/');
                    if !query.is_empty() {
                        location.push(b'?');
                        location.extend_from_slice(query);
                    }
                    return Step::Done(Route::Redirect(location));
                }
                // ngx_http_index_module: the first index that exists, by an
                // internal redirect; none is 403 (autoindex off).
                for name in &self.options.index {
                    let candidate = [uri, name.as_bytes()].concat();
                    if std::fs::metadata(self.fs_path(&candidate)).is_ok() {
                        return Step::InternalRedirect(candidate);
                    }
                }
                return Step::Done(Route::Forbidden);
            }
            _ => {}
        }
        match &self.options.fallback {
            Some(fallback) if fallback.as_bytes() != uri => {
                Step::InternalRedirect(fallback.as_bytes().to_vec())
            }
            _ => Step::Done(Route::NotFound),
        }
    }

    /// `location ~ [^/]\.php(/|$)` with `snippets/fastcgi-php.conf`.
    fn php(&self, uri: &[u8], query: &[u8]) -> Route {
        let (script_name, path_info) = split_path_info(uri);
        // Stricter: a script under a dot directory (`/.git/x.php`) is
        // refused as a dotfile would be.
        if has_dot_segment(script_name) {
            return Route::Forbidden;
        }
        // try_files $fastcgi_script_name =404; and security.limit_extensions
        // = .php (the name must end in .php, which the split guarantees
        // unless it failed, as for `/x.php\n`).
        if !script_name.ends_with(b".php") {
            return Route::NotFound;
        }
        let path = self.fs_path(script_name);
        match std::fs::metadata(&path) {
            Ok(meta) if meta.is_file() => {}
            _ => return Route::NotFound,
        }
        // Stricter: the real file must be a .php file inside the root (or a
        // configured symlink target), so a symlink `x.php -> evil.jpg` or out
        // of the root does not run.
        match self.real_inside(&path) {
            Some(real) if real.as_os_str().as_bytes().ends_with(b".php") => {}
            _ => return Route::Forbidden,
        }
        let document_root = self.root.as_os_str().as_bytes().to_vec();
        Route::Php(PhpTarget {
            script_filename: [document_root.as_slice(), script_name].concat(),
            script_name: script_name.to_vec(),
            path_info: path_info.to_vec(),
            path_translated: None,
            document_root,
            document_uri: script_name.to_vec(),
            query_string: query.to_vec(),
        })
    }

    /// A file found by `try_files $uri`.
    fn static_file(&self, path: &Path) -> Route {
        match self.real_inside(path) {
            // Stricter: nginx sends a `.php` file outside the PHP location
            // (`/x.PHP`, a symlink `a.txt -> x.php`) as text; never its source.
            Some(real) if !is_php_name(real.as_os_str().as_bytes()) => Route::Static(real),
            _ => Route::Forbidden,
        }
    }

    /// `path`'s real path if it is inside the root (or a configured symlink
    /// target) and names no dotfile there.
    fn real_inside(&self, path: &Path) -> Option<PathBuf> {
        let real = path.canonicalize().ok()?;
        let inside = std::iter::once(&self.root)
            .chain(&self.options.symlink_targets)
            .find_map(|base| real.strip_prefix(base).ok())?;
        let rest = inside.as_os_str().as_bytes();
        if has_dot_segment(&[b"/", rest].concat()) {
            return None;
        }
        Some(real)
    }

    /// `$document_root$uri`.
    fn fs_path(&self, uri: &[u8]) -> PathBuf {
        let mut bytes = self.root.as_os_str().as_bytes().to_vec();
        bytes.extend_from_slice(uri);
        PathBuf::from(OsStr::from_bytes(&bytes))
    }
}

enum Step {
    Done(Route),
    InternalRedirect(Vec<u8>),
}

fn real_dir(dir: &Path) -> Result<PathBuf, Error> {
    let real = dir.canonicalize().map_err(|e| Error::missing(dir, e))?;
    if !real.is_dir() {
        return Err(Error::not_directory(dir));
    }
    Ok(real)
}

/// Whether the regex location `~ [^/]\.php(/|$)` matches: `.php` after a
/// byte that is not `/`, then `/` or the end. PCRE's `$` also matches just
/// before a final newline, so `/x.php\n` matches too.
pub fn is_php_location(uri: &[u8]) -> bool {
    (1..uri.len()).any(|at| {
        uri[at..].starts_with(b".php")
            && uri[at - 1] != b'/'
            && matches!(&uri[at + 4..], [] | [b'/', ..] | [b'\n'])
    })
}

/// `fastcgi_split_path_info ^(.+?\.php)(/.*)$;`: the shortest script name
/// ending in `.php` followed by a path info starting with `/`. `.` matches
/// no newline and `$` matches at the end or before a final newline, so a
/// newline inside the path info makes the split fail (the whole `$uri` is
/// then the script name, and `try_files` answers 404: CVE-2019-11043), and
/// a final one is dropped from PATH_INFO. Without a match, the script name
/// is the whole URI and the path info empty.
pub(crate) fn split_path_info(uri: &[u8]) -> (&[u8], &[u8]) {
    for end in 5..=uri.len() {
        let (script, rest) = uri.split_at(end);
        if script.contains(&b'\n') {
            break;
        }
        if !script.ends_with(b".php") || rest.first() != Some(&b'/') {
            continue;
        }
        let info = rest.strip_suffix(b"\n").unwrap_or(rest);
        if !info.contains(&b'\n') {
            return (script, info);
        }
    }
    (uri, b"")
}

/// `ngx_escape_uri(.., NGX_ESCAPE_URI)` as nginx 1.22 applies it to a
/// redirect: control bytes, space, `"#%<>?\^`{|}`, DEL and every non-ASCII
/// byte as `%XX` (upper-case hex); `'[]!$&()*+,;=:@~` stay as they are.
fn escape_uri(uri: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(uri.len());
    for &b in uri {
        if b <= b' ' || b"\"#%<>?\\^`{|}".contains(&b) || b >= 0x7f {
            out.extend_from_slice(format!("%{b:02X}").as_bytes());
        } else {
            out.push(b);
        }
    }
    out
}

/// Whether a segment of `uri` starts with `.` (a dotfile or dot directory),
/// other than `/.well-known/` (RFC 8615, ACME challenges).
fn has_dot_segment(uri: &[u8]) -> bool {
    uri.split(|&b| b == b'/')
        .any(|segment| segment.first() == Some(&b'.') && segment != b".well-known")
}

/// Whether a file name has an extension PHP runs, in any case (`x.PHP`
/// is PHP source; Debian's Apache config hands `.ph(ar|p|tml)`,
/// `.php3`-`.php8`, `.phps`, `.pht` to PHP): the same family worker
/// mode's static files never send. Takes a path or a file name.
pub fn is_php_name(path: &[u8]) -> bool {
    let name = path.rsplit(|&b| b == b'/').next().unwrap_or(path);
    let Some(dot) = name.iter().rposition(|&b| b == b'.') else {
        return false;
    };
    let ext = name[dot + 1..].to_ascii_lowercase();
    matches!(
        ext.as_slice(),
        b"php"
            | b"phtml"
            | b"phar"
            | b"pht"
            | b"phps"
            | b"phpt"
            | b"php3"
            | b"php4"
            | b"php5"
            | b"php7"
            | b"php8"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    /// The tree the integration test serves too, smaller.
    fn site() -> (tempfile::TempDir, tempfile::TempDir, Router) {
        let dir = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        for d in ["sub", "sub2", "empty", "uploads", "dir.php", ".git"] {
            fs::create_dir(root.join(d)).expect("mkdir");
        }
        for f in [
            "index.php",
            "admin.php",
            "sub/index.php",
            "sub/index.html",
            "sub2/index.html",
            "static.txt",
            "uploads/evil.jpg",
            ".env",
            ".git/config",
            ".user.ini",
            ".htaccess",
            "upper.PHP",
            "page.phtml",
            "lib.phar",
            "old.php5",
            "dir.php/inner.php",
        ] {
            fs::write(root.join(f), "x").expect("write");
        }
        fs::write(outside.path().join("out.php"), "x").expect("write");
        fs::write(outside.path().join("out.txt"), "x").expect("write");
        symlink("admin.php", root.join("alias.php")).expect("symlink");
        symlink("uploads/evil.jpg", root.join("jpg.php")).expect("symlink");
        symlink(".env", root.join("env.txt")).expect("symlink");
        symlink(outside.path().join("out.php"), root.join("out.php")).expect("symlink");
        symlink(outside.path().join("out.txt"), root.join("out.txt")).expect("symlink");
        let router = Router::new(root, Options::default()).expect("router");
        (dir, outside, router)
    }

    fn php(router: &Router, script: &str, path_info: &str, query: &str) -> Route {
        let root = router.root().as_os_str().as_bytes().to_vec();
        Route::Php(PhpTarget {
            script_filename: [root.as_slice(), script.as_bytes()].concat(),
            script_name: script.into(),
            path_info: path_info.into(),
            path_translated: None,
            document_root: root,
            document_uri: script.into(),
            query_string: query.into(),
        })
    }

    fn route(router: &Router, uri: &str) -> Route {
        router.route(uri.as_bytes(), b"")
    }

    #[test]
    fn root_must_be_an_existing_directory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = dir.path().join("nope");
        let err = Router::new(&missing, Options::default()).expect_err("missing");
        assert!(err.is_missing());
        assert!(err.to_string().contains(&*missing.to_string_lossy()));
        let file = dir.path().join("file");
        fs::write(&file, "x").expect("write");
        let err = Router::new(&file, Options::default()).expect_err("file");
        assert!(err.is_not_directory());
        assert!(err.to_string().contains(&*file.to_string_lossy()));
    }

    #[test]
    fn root_is_canonicalized() {
        let dir = tempfile::tempdir().expect("tempdir");
        let real = dir.path().canonicalize().expect("real");
        fs::create_dir(real.join("r")).expect("mkdir");
        symlink(real.join("r"), real.join("link")).expect("symlink");
        let router = Router::new(&real.join("link/../link/."), Options::default()).expect("ok");
        assert_eq!(router.root(), real.join("r"));
    }

    #[test]
    fn bad_options_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        for options in [
            Options {
                index: vec!["a/b".into()],
                ..Options::default()
            },
            Options {
                index: vec!["".into()],
                ..Options::default()
            },
            Options {
                fallback: Some("index.php".into()),
                ..Options::default()
            },
            Options {
                fallback: Some("/a/../index.php".into()),
                ..Options::default()
            },
        ] {
            let err = Router::new(dir.path(), options).expect_err("refused");
            assert!(err.is_bad_option(), "{err}");
        }
        let options = Options {
            symlink_targets: vec![dir.path().join("nope")],
            ..Options::default()
        };
        assert!(Router::new(dir.path(), options)
            .expect_err("missing")
            .is_missing());
    }

    #[test]
    fn existing_scripts_run_with_nginx_params() {
        let (_d, _o, r) = site();
        assert_eq!(
            r.route(b"/admin.php", b"a=b"),
            php(&r, "/admin.php", "", "a=b")
        );
        assert_eq!(
            route(&r, "/index.php/some/path"),
            php(&r, "/index.php", "/some/path", "")
        );
        assert_eq!(route(&r, "/admin.php/"), php(&r, "/admin.php", "/", ""));
        assert_eq!(
            route(&r, "/index.php/x.php"),
            php(&r, "/index.php", "/x.php", "")
        );
        assert_eq!(route(&r, "/alias.php"), php(&r, "/alias.php", "", ""));
        let Route::Php(target) = route(&r, "/index.php/a/b") else {
            panic!("php")
        };
        assert_eq!(target.php_self(), b"/index.php/a/b");
    }

    #[test]
    fn directories_redirect_then_run_their_index() {
        let (_d, _o, r) = site();
        assert_eq!(route(&r, "/"), php(&r, "/index.php", "", ""));
        assert_eq!(route(&r, "/sub"), Route::Redirect(b"/sub/".to_vec()));
        assert_eq!(
            r.route(b"/sub", b"x=1"),
            Route::Redirect(b"/sub/?x=1".to_vec())
        );
        assert_eq!(route(&r, "/sub/"), php(&r, "/sub/index.php", "", ""));
        let html = r.root().join("sub2/index.html");
        assert_eq!(route(&r, "/sub2/"), Route::Static(html));
        assert_eq!(route(&r, "/empty/"), Route::Forbidden);
    }

    #[test]
    fn misses_go_to_the_front_controller_or_404() {
        let (d, _o, r) = site();
        assert_eq!(
            r.route(b"/missing", b"q=1"),
            php(&r, "/index.php", "", "q=1")
        );
        assert_eq!(route(&r, "/static.txt/"), php(&r, "/index.php", "", ""));
        assert_eq!(route(&r, "/missing.php"), Route::NotFound);
        assert_eq!(route(&r, "/missing.php/x"), Route::NotFound);
        let none = Router::new(
            d.path(),
            Options {
                fallback: None,
                ..Options::default()
            },
        )
        .expect("router");
        assert_eq!(route(&none, "/missing"), Route::NotFound);
        let absent = Options {
            fallback: Some("/nope.html".into()),
            ..Options::default()
        };
        let absent = Router::new(d.path(), absent).expect("router");
        assert_eq!(route(&absent, "/missing"), Route::NotFound);
        let index = Options {
            index: vec!["index.html".into()],
            ..Options::default()
        };
        let index = Router::new(d.path(), index).expect("router");
        assert_eq!(
            route(&index, "/sub/"),
            Route::Static(index.root().join("sub/index.html"))
        );
    }

    #[test]
    fn static_files_are_served_from_their_real_path() {
        let (_d, _o, r) = site();
        assert_eq!(
            route(&r, "/static.txt"),
            Route::Static(r.root().join("static.txt"))
        );
        assert_eq!(
            route(&r, "/uploads/evil.jpg"),
            Route::Static(r.root().join("uploads/evil.jpg"))
        );
    }

    #[test]
    fn non_php_files_never_run() {
        let (_d, _o, r) = site();
        assert_eq!(route(&r, "/uploads/evil.jpg/x.php"), Route::NotFound);
        assert_eq!(
            route(&r, "/uploads/evil.jpg/.php"),
            php(&r, "/index.php", "", "")
        );
        assert_eq!(route(&r, "/dir.php"), Route::NotFound);
        assert_eq!(route(&r, "/dir.php/"), Route::NotFound);
        assert_eq!(route(&r, "/dir.php/inner.php"), Route::NotFound);
        // A symlink named .php to a non-PHP file (nginx + php-fpm run it).
        assert_eq!(route(&r, "/jpg.php"), Route::Forbidden);
    }

    #[test]
    fn newlines_follow_pcre_as_nginx_does() {
        let (_d, _o, r) = site();
        assert_eq!(route(&r, "/index.php/\n"), php(&r, "/index.php", "/", ""));
        assert_eq!(route(&r, "/index.php/x\n"), php(&r, "/index.php", "/x", ""));
        assert_eq!(route(&r, "/index.php/a\nb"), Route::NotFound);
        assert_eq!(route(&r, "/index.php/\n\n"), Route::NotFound);
        assert_eq!(route(&r, "/admin.php\n"), Route::NotFound);
    }

    #[test]
    fn dotfiles_and_php_sources_are_never_sent() {
        let (_d, _o, r) = site();
        for uri in [
            "/.env",
            "/.git/config",
            "/.git",
            "/.git/",
            "/.user.ini",
            "/.htaccess",
            "/env.txt",
        ] {
            assert_eq!(route(&r, uri), Route::Forbidden, "{uri}");
        }
        assert_eq!(route(&r, "/.git/x.php"), Route::Forbidden);
        assert_eq!(route(&r, "/upper.PHP"), Route::Forbidden);
        // The other extensions PHP runs: their source is never sent.
        for uri in ["/page.phtml", "/lib.phar", "/old.php5"] {
            assert_eq!(route(&r, uri), Route::Forbidden, "{uri}");
        }
        assert_eq!(
            route(&r, "/.well-known/missing"),
            php(&r, "/index.php", "", "")
        );
    }

    #[test]
    fn symlinks_out_of_the_root_are_refused_unless_allowed() {
        let (d, o, r) = site();
        assert_eq!(route(&r, "/out.php"), Route::Forbidden);
        assert_eq!(route(&r, "/out.txt"), Route::Forbidden);
        let options = Options {
            symlink_targets: vec![o.path().to_path_buf()],
            ..Options::default()
        };
        let allowed = Router::new(d.path(), options).expect("router");
        assert_eq!(
            route(&allowed, "/out.php"),
            php(&allowed, "/out.php", "", "")
        );
        let real = o.path().canonicalize().expect("real").join("out.txt");
        assert_eq!(route(&allowed, "/out.txt"), Route::Static(real));
    }

    #[test]
    fn unnormalized_paths_are_bad_requests() {
        let (_d, _o, r) = site();
        for uri in [
            "",
            "admin.php",
            "/sub/../admin.php",
            "//admin.php",
            "/a\0.php",
        ] {
            assert_eq!(route(&r, uri), Route::BadRequest, "{uri:?}");
        }
    }

    #[test]
    fn the_php_location_regex() {
        for yes in [
            "/a.php",
            "/a.php/",
            "/a.php/b",
            "/a/b.php",
            "/a.php\n",
            "/x.php.php",
        ] {
            assert!(is_php_location(yes.as_bytes()), "{yes:?}");
        }
        for no in [
            "/.php",
            "/a/.php",
            "/a.phpx",
            "/a.PHP",
            "/a.php\n\n",
            "/a.php.jpg",
            "/",
        ] {
            assert!(!is_php_location(no.as_bytes()), "{no:?}");
        }
    }

    #[test]
    fn redirects_are_escaped_as_nginx_escapes_them() {
        assert_eq!(
            escape_uri(b"/a b/\xc3\xa9#%?\"+\x7f\n<>\\^`{|}'[]!$&()*,;=:@~"),
            b"/a%20b/%C3%A9%23%25%3F%22+%7F%0A%3C%3E%5C%5E%60%7B%7C%7D'[]!$&()*,;=:@~"
        );
    }

    #[test]
    fn the_split_is_lazy() {
        let split = |uri: &str| {
            let (s, p) = split_path_info(uri.as_bytes());
            (
                String::from_utf8_lossy(s).into_owned(),
                String::from_utf8_lossy(p).into_owned(),
            )
        };
        assert_eq!(
            split("/a.php/b.php/c"),
            ("/a.php".into(), "/b.php/c".into())
        );
        assert_eq!(
            split("/a.phpx/b.php/c"),
            ("/a.phpx/b.php".into(), "/c".into())
        );
        assert_eq!(split("/.php/x"), ("/.php".into(), "/x".into()));
        assert_eq!(split("/a.php"), ("/a.php".into(), "".into()));
        assert_eq!(split(".php/x"), (".php/x".into(), "".into()));
    }
}
