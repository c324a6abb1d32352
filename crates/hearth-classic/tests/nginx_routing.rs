//! The router against the real thing: nginx + php-fpm with the classic
//! configuration (`bench/reference/nginx-fpm.sh` with `NGINX_SITE=classic`)
//! serve a tree of scripts and files, and for every request of a table the
//! router's decision must be what they did: the same status, the same
//! script run (its marker), and the same SCRIPT_FILENAME, SCRIPT_NAME,
//! PATH_INFO, PATH_TRANSLATED, PHP_SELF, DOCUMENT_ROOT, DOCUMENT_URI and
//! QUERY_STRING as PHP printed them. Where the router is stricter by design,
//! a second table says what nginx does and what the router does instead.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use hearth_classic::{normalize_uri, Options, Route, Router};

/// The keys the scripts print, hex-encoded (a path may be any bytes).
const KEYS: [&str; 8] = [
    "SCRIPT_FILENAME",
    "SCRIPT_NAME",
    "PATH_INFO",
    "PATH_TRANSLATED",
    "PHP_SELF",
    "DOCUMENT_ROOT",
    "DOCUMENT_URI",
    "QUERY_STRING",
];

const SHOW: &str = r#"<?php
$out = ['marker' => $marker];
foreach (['SCRIPT_FILENAME', 'SCRIPT_NAME', 'PATH_INFO', 'PATH_TRANSLATED', 'PHP_SELF',
          'DOCUMENT_ROOT', 'DOCUMENT_URI', 'QUERY_STRING'] as $k) {
    $out[$k] = array_key_exists($k, $_SERVER) ? bin2hex((string) $_SERVER[$k]) : null;
}
echo json_encode($out);
"#;

/// The site: scripts printing their marker, an index-only directory, an
/// empty one, an upload with PHP code in it, dotfiles and symlinks.
fn build_site(root: &Path, outside: &Path) {
    for d in [
        "sub",
        "sub2",
        "empty",
        "uploads",
        "dir.php",
        ".git",
        "sp ace",
        "odd \u{e9}#%?\"+",
        "q<>\\^`{|}'[]!$&()*,;=:@~",
    ] {
        std::fs::create_dir(root.join(d)).expect("mkdir");
    }
    std::fs::write(root.join("show.inc"), SHOW).expect("write");
    for script in [
        "index.php",
        "admin.php",
        "sub/index.php",
        "dir.php/inner.php",
    ] {
        let depth = script.matches('/').count();
        let body = format!(
            "<?php $marker = '{script}'; require __DIR__ . '/{}show.inc';\n",
            "../".repeat(depth)
        );
        std::fs::write(root.join(script), body).expect("write");
    }
    for (file, body) in [
        ("sub/index.html", "<h1>sub</h1>\n"),
        ("sub2/index.html", "<h1>sub2</h1>\n"),
        ("sp ace/index.html", "<h1>space</h1>\n"),
        ("static.txt", "static\n"),
        ("uploads/evil.jpg", "<?php echo 'EVIL';\n"),
        ("upper.PHP", "<?php echo 'UPPER';\n"),
        (".env", "SECRET=1\n"),
        (".git/config", "[core]\n"),
        (".user.ini", "; nothing\n"),
        (".htaccess", "deny from all\n"),
    ] {
        std::fs::write(root.join(file), body).expect("write");
    }
    std::fs::write(outside.join("outside.php"), "<?php echo 'OUTSIDE';\n").expect("write");
    std::fs::write(outside.join("secret.txt"), "outside secret\n").expect("write");
    symlink("admin.php", root.join("alias.php")).expect("symlink");
    symlink("uploads/evil.jpg", root.join("jpg.php")).expect("symlink");
    symlink(outside.join("outside.php"), root.join("out.php")).expect("symlink");
    symlink(outside.join("secret.txt"), root.join("link.txt")).expect("symlink");
}

/// nginx + php-fpm serving `docroot` as a classic site, stopped when dropped.
struct Reference {
    state: tempfile::TempDir,
    addr: SocketAddr,
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/reference/nginx-fpm.sh")
}

impl Reference {
    fn start(docroot: &Path) -> Reference {
        let state = tempfile::tempdir().expect("tempdir");
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let out = Command::new(script())
            .arg("start")
            .arg(state.path())
            .arg(docroot)
            .arg("index.php")
            .arg(port.to_string())
            .arg("2")
            .env("NGINX_SITE", "classic")
            .output()
            .expect("run bench/reference/nginx-fpm.sh (needs nginx and php8.2-fpm)");
        assert!(
            out.status.success(),
            "nginx + php-fpm did not start:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Reference {
            state,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
        }
    }

    /// One HTTP/1.0 request (so nginx sends no chunks) for `target` as is:
    /// status, Location, body.
    fn get(&self, target: &str) -> (u16, Option<String>, Vec<u8>) {
        let mut stream = TcpStream::connect(self.addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        write!(stream, "GET {target} HTTP/1.0\r\nHost: localhost\r\n\r\n").expect("send");
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).expect("response");
        let end = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("a response head");
        let head = String::from_utf8_lossy(&raw[..end]).into_owned();
        let status = head[9..12].parse().expect("status");
        let location = head
            .lines()
            .find_map(|l| l.strip_prefix("Location: "))
            .map(str::to_owned);
        (status, location, raw[end + 4..].to_vec())
    }
}

impl Drop for Reference {
    fn drop(&mut self) {
        let _ = Command::new(script())
            .arg("stop")
            .arg(self.state.path())
            .status();
    }
}

/// The router's decision for a request target, as nginx's `$uri` and
/// `$args` would give it.
fn decide(router: &Router, target: &str) -> Route {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    match normalize_uri(path.as_bytes()) {
        Ok(uri) => router.route(&uri, query.as_bytes()),
        Err(_) => Route::BadRequest,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Checks that nginx's answer is the router's decision; `Err` says how not.
fn compare(router: &Router, reference: &Reference, target: &str) -> Result<String, String> {
    let route = decide(router, target);
    let (status, location, body) = reference.get(target);
    let body_text = String::from_utf8_lossy(&body).into_owned();
    let seen = format!("nginx {status} {location:?} {body_text:.120}");
    let fail = |why: &str| Err(format!("{target}: {why}; router {route:?}; {seen}"));
    match &route {
        Route::Static(path) => {
            let file = std::fs::read(path).expect("read");
            if status != 200 || body != file {
                return fail("not the same static file");
            }
        }
        Route::Redirect(to) => {
            let location = location.unwrap_or_default();
            let path = location
                .strip_prefix(&format!("http://localhost:{}", reference.addr.port()))
                .unwrap_or(&location);
            if status != 301 || path.as_bytes() != to.as_slice() {
                return fail("not the same redirect");
            }
        }
        Route::NotFound if status != 404 => return fail("nginx did not answer 404"),
        Route::Forbidden if status != 403 => return fail("nginx did not answer 403"),
        Route::BadRequest if status != 400 => return fail("nginx did not answer 400"),
        Route::Php(target_params) => {
            let Ok(printed) = serde_json::from_slice::<serde_json::Value>(&body) else {
                return fail("no script printed its $_SERVER");
            };
            let real = Path::new(std::ffi::OsStr::from_bytes(&target_params.script_filename))
                .canonicalize()
                .expect("script");
            let marker = real.strip_prefix(router.root()).expect("inside");
            if status != 200 || printed["marker"] != marker.to_string_lossy().as_ref() {
                return fail("not the same script");
            }
            let expected = [
                Some(&target_params.script_filename),
                Some(&target_params.script_name),
                Some(&target_params.path_info),
                target_params.path_translated.as_ref(),
                Some(&target_params.php_self()),
                Some(&target_params.document_root),
                Some(&target_params.document_uri),
                Some(&target_params.query_string),
            ];
            for (key, want) in KEYS.iter().zip(expected) {
                let want = want.map(|v| serde_json::Value::String(hex(v)));
                let want = want.unwrap_or(serde_json::Value::Null);
                if printed[key] != want {
                    return fail(&format!(
                        "{key}: PHP printed {}, router {want}",
                        printed[key]
                    ));
                }
            }
        }
        _ => {}
    }
    Ok(format!("{target} -> {seen}"))
}

/// Requests where the router must do what nginx + php-fpm did.
const SAME: &[&str] = &[
    "/",
    "/index.php",
    "/admin.php",
    "/admin.php?a=b&c=%20d",
    "/index.php/some/path",
    "/index.php/some/path?x=1",
    "/sub/index.php/a/b",
    "/index.php/x.php",
    "/admin.php/",
    "/admin.php/a%20b",
    "/alias.php",
    "/alias.php/p",
    "/sub",
    "/sub?x=1",
    "/sub/",
    "/sub/index.html",
    "/sub2",
    "/sub2/",
    "/sp%20ace",
    "/sp%20ace?a=%20b",
    "/odd%20%C3%A9%23%25%3F%22+",
    "/q%3C%3E%5C%5E%60%7B%7C%7D%27%5B%5D!$&()*,;=:@~",
    "/empty",
    "/empty/",
    "/missing",
    "/missing?q=1&r=2",
    "/missing/deeper/",
    "/.missing",
    "/missing.php",
    "/missing.php/x",
    "/static.txt",
    "/static.txt/",
    "/uploads/evil.jpg",
    "/uploads/evil.jpg/x.php",
    "/uploads/evil.jpg/.php",
    "/evil.jpg/.php",
    "/x.php%00.jpg",
    "/index.php%00.jpg",
    "/index.php/%0a",
    "/index.php/x%0a",
    "/index.php/a%0ab",
    "/index.php/%0a%0a",
    "/admin.php%0a",
    "/dir.php",
    "/dir.php/",
    "/dir.php/inner.php",
    "/../etc/passwd",
    "/index.php/../..",
    "/a/..%2F..%2Fx",
    "/sub/../admin.php",
    "/a/%2e%2e/admin.php",
    "/sub/.",
    "/sub/..",
    "/sub/./index.php",
    "//admin.php",
    "/sub//index.php",
    "/index.php//x//y",
    "/ad%6din.php",
    "/sub%2findex.php",
    "/index.php/a%2Fb",
    "/index.php/a%25b",
    "/index.php/a+b",
    "/index.php/%C3%A9",
    "/index.php/%ff",
    "/zz%zz",
    "/index.php/a%2",
];

/// Requests where the router is stricter than nginx + php-fpm on purpose:
/// the target, nginx's status, what nginx sent, the router's decision.
const STRICTER: &[(&str, u16, &str)] = &[
    ("/.env", 200, "SECRET=1\n"),
    ("/.git/config", 200, "[core]\n"),
    ("/.user.ini", 200, "; nothing\n"),
    ("/.htaccess", 200, "deny from all\n"),
    ("/upper.PHP", 200, "<?php echo 'UPPER';\n"),
    ("/jpg.php", 200, "EVIL"),
    ("/out.php", 200, "OUTSIDE"),
    ("/link.txt", 200, "outside secret\n"),
];

#[test]
fn the_router_decides_what_nginx_and_php_fpm_do() {
    let site = tempfile::tempdir().expect("tempdir");
    let outside = tempfile::tempdir().expect("tempdir");
    let root = site.path().canonicalize().expect("root");
    build_site(&root, &outside.path().canonicalize().expect("outside"));
    let router = Router::new(&root, Options::default()).expect("router");
    let reference = Reference::start(&root);

    let mut failures = Vec::new();
    for target in SAME {
        match compare(&router, &reference, target) {
            Ok(line) => println!("same: {line}"),
            Err(why) => failures.push(why),
        }
    }
    for &(target, status, body) in STRICTER {
        let (seen, _, sent) = reference.get(target);
        let route = decide(&router, target);
        println!("stricter: {target} -> nginx {seen}, router {route:?}");
        if seen != status || sent != body.as_bytes() || route != Route::Forbidden {
            failures.push(format!(
                "{target}: expected nginx {status} {body:?} and the router 403; \
                 nginx {seen} {:?}, router {route:?}",
                String::from_utf8_lossy(&sent)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(SAME.len() + STRICTER.len() >= 40);
}
