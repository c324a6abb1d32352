//! `hearth serve --root`: static files from a document root in front of a
//! PHP front controller, over real HTTP with real PHP workers. The
//! traversal table is the point: no request may ever return the bytes of
//! a file Hearth must not serve.

#[path = "support/mod.rs"]
mod support;

use std::io::Read as _;
use std::os::unix::fs::symlink;
use std::path::PathBuf;

use support::{Req, Response, Server};

/// In every file that must never be served: PHP source, dotfiles, and a
/// file outside the root.
const MARKER: &str = "HEARTH-SECRET-MARKER-5d41402a";

/// A site: `public/` (the root, with the worker as index.php) and a secret
/// next to it.
struct Site {
    dir: tempfile::TempDir,
}

impl Site {
    fn new() -> Site {
        let dir = support::tempdir();
        let base = dir.path();
        let public = base.join("public");
        let write = |rel: &str, bytes: &[u8]| {
            let path = public.join(rel);
            std::fs::create_dir_all(path.parent().expect("set up the site"))
                .expect("set up the site");
            std::fs::write(path, bytes).expect("set up the site");
        };
        let worker = format!(
            r#"<?php
// {MARKER}: PHP source must never be served.
declare(strict_types=1);
require '{lib}';
Hearth\Worker::serve(static function (): void {{
    $path = parse_url($_SERVER['REQUEST_URI'], PHP_URL_PATH);
    if ($path === '/big-text') {{
        header('Content-Type: text/plain');
        echo str_repeat("hearth php text\n", 500);
        return;
    }}
    header('Content-Type: application/json');
    echo json_encode([
        'php' => true,
        'method' => $_SERVER['REQUEST_METHOD'],
        'uri' => $_SERVER['REQUEST_URI'],
        'SCRIPT_FILENAME' => $_SERVER['SCRIPT_FILENAME'],
        'SCRIPT_NAME' => $_SERVER['SCRIPT_NAME'],
        'DOCUMENT_ROOT' => $_SERVER['DOCUMENT_ROOT'],
    ], JSON_UNESCAPED_SLASHES);
}});
"#,
            lib = support::root().join("php/autoload.php").display()
        );
        write("index.php", worker.as_bytes());
        for php in ["x.PHP", "y.phtml", "lib.phar"] {
            write(php, format!("<?php // {MARKER}").as_bytes());
        }
        write(".env", format!("APP_KEY={MARKER}").as_bytes());
        write(".git/config", format!("[core] # {MARKER}").as_bytes());
        write(".well-known/.secret", MARKER.as_bytes());
        write(
            ".well-known/security.txt",
            b"Contact: mailto:security@example.test\n",
        );
        std::fs::write(base.join("secret.txt"), MARKER).expect("set up the site");
        symlink(base.join("secret.txt"), public.join("link.txt")).expect("set up the site");
        symlink(public.join("index.php"), public.join("source.txt")).expect("set up the site");
        symlink(public.join(".env"), public.join("env.txt")).expect("set up the site");
        symlink(base, public.join("up")).expect("set up the site");
        // A precompressed sibling may not lead to a secret either.
        write("leak.css", &"a{}".repeat(500).into_bytes());
        symlink(public.join(".env"), public.join("leak.css.gz")).expect("set up the site");

        write("style.css", &css().into_bytes());
        write("data.json", br#"{"static": true}"#);
        write("small.txt", b"small\n");
        write("image.png", &png());
        write("big.bin", &big());
        write("app.js", &js().into_bytes());
        write("app.js.gz", b"pretend gzip");
        write("app.js.br", b"pretend brotli");
        write("page.svg", &svg().into_bytes());
        std::fs::create_dir_all(public.join("dir")).expect("set up the site");
        Site { dir }
    }

    fn root(&self) -> PathBuf {
        self.dir
            .path()
            .join("public")
            .canonicalize()
            .expect("root path")
    }

    /// Worker mode's static files (`--classic off`): a mixed site, the
    /// default with php-fpm installed, routes as classic mode does
    /// (tests/mixed.rs).
    fn start(&self, extra: &[&str]) -> Server {
        let root = self.root();
        let mut args = vec![
            "--root",
            root.to_str().expect("root path"),
            "--workers",
            "1",
        ];
        if !extra.contains(&"--classic") {
            args.extend(["--classic", "off"]);
        }
        args.extend_from_slice(extra);
        Server::start(&root.join("index.php"), &args)
    }
}

fn css() -> String {
    "body { color: #333; margin: 0 auto; }\n".repeat(100)
}

fn js() -> String {
    "console.log('hearth static file');\n".repeat(100)
}

fn svg() -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\">{}</svg>",
        "<rect width=\"1\" height=\"1\"/>".repeat(100)
    )
}

fn png() -> Vec<u8> {
    let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
    bytes.extend((0..4000u32).map(|i| (i * 7 % 251) as u8));
    bytes
}

/// 3 MiB of bytes that do not repeat in a way a bug could hide.
fn big() -> Vec<u8> {
    (0..3u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect()
}

fn get(server: &Server, path: &str, headers: &[(&str, &str)]) -> Response {
    let mut req = Req::new("GET", path);
    for (n, v) in headers {
        req = req.header(n, v);
    }
    req.send(server.addr)
}

fn is_php(r: &Response) -> bool {
    r.header("content-type") == Some("application/json")
        && serde_json::from_slice::<serde_json::Value>(&r.body)
            .is_ok_and(|v| v["php"] == serde_json::json!(true))
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut out)
        .expect("valid gzip");
    out
}

fn unbrotli(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    brotli::Decompressor::new(bytes, 4096)
        .read_to_end(&mut out)
        .expect("valid brotli");
    out
}

#[test]
fn files_are_served_with_their_type_and_validators() {
    let site = Site::new();
    let server = site.start(&[]);
    let cases: [(&str, &str, Vec<u8>); 6] = [
        ("/style.css", "text/css", css().into_bytes()),
        (
            "/data.json",
            "application/json",
            br#"{"static": true}"#.to_vec(),
        ),
        ("/small.txt", "text/plain", b"small\n".to_vec()),
        ("/image.png", "image/png", png()),
        ("/page.svg", "image/svg+xml", svg().into_bytes()),
        (
            "/.well-known/security.txt",
            "text/plain",
            b"Contact: mailto:security@example.test\n".to_vec(),
        ),
    ];
    for (path, content_type, body) in cases {
        let r = get(&server, path, &[]);
        assert_eq!(r.status, 200, "{path}: {}", r.text());
        assert_eq!(r.header("content-type"), Some(content_type), "{path}");
        assert_eq!(r.body, body, "{path}");
        assert_eq!(
            r.header("content-length"),
            Some(body.len().to_string().as_str())
        );
        assert_eq!(r.header("accept-ranges"), Some("bytes"), "{path}");
        assert!(r.header("content-encoding").is_none(), "{path}");
        let etag = r.header("etag").expect("etag");
        assert!(
            etag.starts_with('"') && etag.contains('-'),
            "{path}: {etag}"
        );
        assert!(r.header("last-modified").is_some(), "{path}");
    }
    assert!(server.log().contains(" worker ready"));
}

#[test]
fn conditional_requests_get_304() {
    let site = Site::new();
    let server = site.start(&[]);
    let r = get(&server, "/style.css", &[]);
    let etag = r.header("etag").unwrap().to_owned();
    let modified = r.header("last-modified").unwrap().to_owned();

    let r = get(&server, "/style.css", &[("If-None-Match", &etag)]);
    assert_eq!(r.status, 304);
    assert!(r.body.is_empty());
    assert_eq!(r.header("etag"), Some(etag.as_str()));
    let r = get(
        &server,
        "/style.css",
        &[("If-None-Match", &format!("\"nope\", W/{etag}"))],
    );
    assert_eq!(r.status, 304, "weak comparison");
    let r = get(&server, "/style.css", &[("If-None-Match", "\"other\"")]);
    assert_eq!(r.status, 200);
    assert_eq!(r.body, css().into_bytes());

    let r = get(&server, "/style.css", &[("If-Modified-Since", &modified)]);
    assert_eq!(r.status, 304);
    let r = get(
        &server,
        "/style.css",
        &[("If-Modified-Since", "Thu, 01 Jan 1998 00:00:00 GMT")],
    );
    assert_eq!(r.status, 200);
    // If-None-Match wins over If-Modified-Since.
    let r = get(
        &server,
        "/style.css",
        &[
            ("If-None-Match", "\"other\""),
            ("If-Modified-Since", &modified),
        ],
    );
    assert_eq!(r.status, 200);

    let r = get(&server, "/style.css", &[("If-Match", "\"other\"")]);
    assert_eq!(r.status, 412);
    let r = get(&server, "/style.css", &[("If-Match", &etag)]);
    assert_eq!(r.status, 200);
}

#[test]
fn ranges_get_206_or_416() {
    let site = Site::new();
    let server = site.start(&[]);
    let whole = big();
    let len = whole.len();

    let r = get(&server, "/big.bin", &[("Range", "bytes=100-199")]);
    assert_eq!(r.status, 206);
    assert_eq!(
        r.header("content-range"),
        Some(format!("bytes 100-199/{len}").as_str())
    );
    assert_eq!(r.body, &whole[100..200]);

    let r = get(&server, "/big.bin", &[("Range", "bytes=-10")]);
    assert_eq!(r.status, 206);
    assert_eq!(r.body, &whole[len - 10..]);

    let r = get(
        &server,
        "/big.bin",
        &[("Range", &format!("bytes={}-", len - 5))],
    );
    assert_eq!(r.status, 206);
    assert_eq!(r.body, &whole[len - 5..]);

    let r = get(&server, "/big.bin", &[("Range", &format!("bytes={len}-"))]);
    assert_eq!(r.status, 416);
    assert_eq!(
        r.header("content-range"),
        Some(format!("bytes */{len}").as_str())
    );

    // Several ranges: 206 with multipart/byteranges, as nginx answers.
    let r = get(&server, "/big.bin", &[("Range", "bytes=0-1,5-6")]);
    assert_eq!(r.status, 206);
    let kind = r.header("content-type").expect("type").to_owned();
    let boundary = kind
        .strip_prefix("multipart/byteranges; boundary=")
        .unwrap_or_else(|| panic!("{kind}"));
    let part = |first: usize, last: usize| {
        let mut part = format!(
            "\r\n--{boundary}\r\nContent-Type: application/octet-stream\r\n\
             Content-Range: bytes {first}-{last}/{len}\r\n\r\n"
        )
        .into_bytes();
        part.extend_from_slice(&whole[first..=last]);
        part
    };
    let mut expected = [part(0, 1), part(5, 6)].concat();
    expected.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    assert_eq!(r.body, expected);

    // If-Range: the range only for the representation the client has.
    let etag = get(&server, "/small.txt", &[])
        .header("etag")
        .unwrap()
        .to_owned();
    let r = get(
        &server,
        "/small.txt",
        &[("Range", "bytes=0-1"), ("If-Range", &etag)],
    );
    assert_eq!(r.status, 206);
    assert_eq!(r.body, b"sm");
    let r = get(
        &server,
        "/small.txt",
        &[("Range", "bytes=0-1"), ("If-Range", "\"stale\"")],
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"small\n");
}

#[test]
fn big_files_stream_whole_and_head_sends_no_body() {
    let site = Site::new();
    let server = site.start(&[]);
    let r = get(&server, "/big.bin", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/octet-stream"));
    assert!(r.body == big(), "3 MiB body differs");

    let r = Req::new("HEAD", "/big.bin").send(server.addr);
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("content-length"),
        Some(big().len().to_string().as_str())
    );
    assert!(r.header("etag").is_some());
    // Nothing follows the head: the connection closes without a byte.
    let mut conn = support::Connection::open(server.addr);
    conn.send(b"HEAD /style.css HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    let head = conn.read_head();
    assert_eq!(head.status, 200);
    assert!(conn.is_closed(), "HEAD response had a body");
}

#[test]
fn precompressed_siblings_are_chosen_by_accept_encoding() {
    let site = Site::new();
    let server = site.start(&[]);
    let r = get(
        &server,
        "/app.js",
        &[("Accept-Encoding", "gzip, deflate, br")],
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-encoding"), Some("br"));
    assert_eq!(r.header("content-type"), Some("text/javascript"));
    assert_eq!(r.header("vary"), Some("Accept-Encoding"));
    assert_eq!(r.body, b"pretend brotli");

    let r = get(&server, "/app.js", &[("Accept-Encoding", "gzip")]);
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    assert_eq!(r.body, b"pretend gzip");

    let r = get(&server, "/app.js", &[]);
    assert!(r.header("content-encoding").is_none());
    assert_eq!(r.header("vary"), Some("Accept-Encoding"));
    assert_eq!(r.body, js().into_bytes());
}

#[test]
fn compressible_files_are_compressed_on_the_fly() {
    let site = Site::new();
    let server = site.start(&[]);
    let r = get(&server, "/style.css", &[("Accept-Encoding", "gzip")]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    assert_eq!(r.header("vary"), Some("Accept-Encoding"));
    assert!(r.header("etag").unwrap().starts_with("W/\""));
    assert_eq!(gunzip(&r.body), css().into_bytes());

    let r = get(&server, "/page.svg", &[("Accept-Encoding", "br, gzip")]);
    assert_eq!(r.header("content-encoding"), Some("br"));
    assert_eq!(unbrotli(&r.body), svg().into_bytes());

    // Small files and incompressible types go as they are.
    let r = get(&server, "/small.txt", &[("Accept-Encoding", "gzip")]);
    assert!(r.header("content-encoding").is_none());
    let r = get(&server, "/image.png", &[("Accept-Encoding", "gzip")]);
    assert!(r.header("content-encoding").is_none());
    assert_eq!(r.body, png());
    // A range is served from the file as it is.
    let r = get(
        &server,
        "/style.css",
        &[("Accept-Encoding", "gzip"), ("Range", "bytes=0-3")],
    );
    assert_eq!(r.status, 206);
    assert_eq!(r.body, b"body");

    // Whole PHP responses too.
    let r = get(&server, "/big-text", &[("Accept-Encoding", "gzip")]);
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    assert_eq!(
        gunzip(&r.body),
        "hearth php text\n".repeat(500).into_bytes()
    );
    let r = get(&server, "/big-text", &[]);
    assert!(r.header("content-encoding").is_none());
}

#[test]
fn no_compression_turns_on_the_fly_compression_off() {
    let site = Site::new();
    let server = site.start(&["--no-compression"]);
    let r = get(&server, "/style.css", &[("Accept-Encoding", "gzip")]);
    assert!(r.header("content-encoding").is_none());
    assert_eq!(r.body, css().into_bytes());
    let r = get(&server, "/big-text", &[("Accept-Encoding", "gzip")]);
    assert!(r.header("content-encoding").is_none());
    let r = get(&server, "/app.js", &[("Accept-Encoding", "gzip")]);
    assert_eq!(r.body, b"pretend gzip", "precompressed files still are");
}

#[test]
fn everything_else_goes_to_php() {
    let site = Site::new();
    let server = site.start(&[]);
    let root = site.root();
    for (method, path) in [
        ("GET", "/"),
        ("GET", "/missing.css"),
        ("GET", "/dir"),
        ("GET", "/dir/"),
        ("GET", "/style.css/"),
        ("GET", "/blog/2024/hello?x=1"),
        ("POST", "/style.css"),
        ("DELETE", "/style.css"),
    ] {
        let r = Req::new(method, path).send(server.addr);
        assert_eq!(r.status, 200, "{method} {path}: {}", r.text());
        assert!(is_php(&r), "{method} {path}: {}", r.text());
        let v = r.json();
        assert_eq!(v["method"], method);
        assert_eq!(v["uri"], path);
        assert_eq!(v["DOCUMENT_ROOT"], root.to_str().unwrap());
        assert_eq!(v["SCRIPT_NAME"], "/index.php");
        assert_eq!(
            v["SCRIPT_FILENAME"],
            root.join("index.php").to_str().unwrap()
        );
    }
}

#[test]
fn root_from_the_config_file_is_relative_to_it() {
    let site = Site::new();
    let config = site.dir.path().join("hearth.toml");
    std::fs::write(
        &config,
        "[serve]\nscript = \"public/index.php\"\nroot = \"public\"\nworkers = 1\ncompression = false\n",
    )
    .unwrap();
    let server = Server::spawn_args(&[
        "serve".into(),
        "--config".into(),
        config.to_string_lossy().into_owned(),
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--php".into(),
        support::php_binary(),
    ]);
    server.wait_until_ready();
    let r = get(&server, "/style.css", &[("Accept-Encoding", "gzip")]);
    assert_eq!(r.status, 200);
    assert!(
        r.header("content-encoding").is_none(),
        "compression = false"
    );
    assert_eq!(r.body, css().into_bytes());
    let r = get(&server, "/missing", &[]);
    assert_eq!(r.json()["DOCUMENT_ROOT"], site.root().to_str().unwrap());
}

#[test]
fn a_missing_root_is_refused_at_startup() {
    let site = Site::new();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hearth"))
        .args(["serve", "--root"])
        .arg(site.dir.path().join("nope"))
        .arg(site.root().join("index.php"))
        .args(support::as_root())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("document root"));
}

/// What happens to a request that must not get a file: 403 or 400 from
/// Hearth, or the front controller. `None`: whatever the HTTP layer says
/// (some of these are not valid request targets at all).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    Status(u16),
    Php,
    Any,
}

/// Requests that try to reach what must never be served, and what
/// worker mode's static files answer.
const TRAVERSALS: &[(&str, Expect)] = &[
    ("/../secret.txt", Expect::Status(403)),
    ("/../../../../etc/passwd", Expect::Status(403)),
    ("/dir/../../secret.txt", Expect::Status(403)),
    ("/%2e%2e/secret.txt", Expect::Status(403)),
    ("/%2E%2E/secret.txt", Expect::Status(403)),
    ("/..%2fsecret.txt", Expect::Status(403)),
    ("/%2e%2e%2fsecret.txt", Expect::Status(403)),
    ("/dir%2f..%2f..%2fsecret.txt", Expect::Status(403)),
    ("/%252e%252e/secret.txt", Expect::Php),
    ("/%252e%252e%252fsecret.txt", Expect::Php),
    ("/..%5csecret.txt", Expect::Status(403)),
    ("/dir%5c..%5c..%5csecret.txt", Expect::Php),
    ("/..\\secret.txt", Expect::Any),
    ("/link.txt", Expect::Status(403)),
    ("/up/secret.txt", Expect::Status(403)),
    ("/up/public/.env", Expect::Status(403)),
    ("/source.txt", Expect::Php),
    ("/env.txt", Expect::Status(403)),
    ("/leak.css", Expect::Status(200)),
    ("/index.php", Expect::Php),
    ("/INDEX.PHP", Expect::Php),
    ("/index.ph%70", Expect::Php),
    ("/index.php/", Expect::Php),
    ("/x.PHP", Expect::Php),
    ("/y.phtml", Expect::Php),
    ("/lib.phar", Expect::Php),
    ("/.env", Expect::Status(403)),
    ("/.%65nv", Expect::Status(403)),
    ("/./.env", Expect::Status(403)),
    ("/dir/../.env", Expect::Status(403)),
    ("/.git/config", Expect::Status(403)),
    ("/.git/", Expect::Status(403)),
    ("/.well-known/.secret", Expect::Status(403)),
    ("/.env%00.txt", Expect::Status(400)),
    ("/index.php%00.txt", Expect::Status(400)),
    ("http://localhost/../secret.txt", Expect::Status(403)),
];

#[test]
fn traversal_table_never_returns_a_secret() {
    let site = Site::new();
    let server = site.start(&[]);
    let table = TRAVERSALS;
    let mut failures = Vec::new();
    for &(path, expect) in table {
        for accept in ["", "Accept-Encoding: gzip, br\r\n"] {
            for method in ["GET", "HEAD"] {
                let raw = format!(
                    "{method} {path} HTTP/1.1\r\nHost: localhost\r\n{accept}Connection: close\r\n\r\n"
                );
                let mut conn = support::Connection::open(server.addr);
                conn.send(raw.as_bytes());
                let r = conn.read_response(method == "HEAD");
                let body = if r.body.is_empty() {
                    Vec::new()
                } else if r.header("content-encoding") == Some("gzip") {
                    gunzip(&r.body)
                } else if r.header("content-encoding") == Some("br") {
                    unbrotli(&r.body)
                } else {
                    r.body.clone()
                };
                if String::from_utf8_lossy(&body).contains(MARKER)
                    || String::from_utf8_lossy(&r.body).contains(MARKER)
                {
                    failures.push(format!("{method} {path}: SECRET RETURNED"));
                }
                let ok = match expect {
                    Expect::Status(s) => r.status == s,
                    Expect::Php if method == "GET" => r.status == 200 && is_php(&r),
                    Expect::Php => {
                        r.status == 200 && r.header("content-type") == Some("application/json")
                    }
                    Expect::Any => true,
                };
                if !ok {
                    failures.push(format!(
                        "{method} {path} ({accept:?}): expected {expect:?}, got {} {:?}",
                        r.status,
                        r.text()
                    ));
                }
            }
        }
    }
    // The secret files are really there, so a pass means refused, not absent.
    assert!(std::fs::read_to_string(site.dir.path().join("secret.txt"))
        .unwrap()
        .contains(MARKER));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_worker_script_outside_the_root_keeps_its_own_filename() {
    let site = Site::new();
    let worker = site.dir.path().join("worker.php");
    std::fs::copy(site.root().join("index.php"), &worker).unwrap();
    let root = site.root();
    let server = Server::start(
        &worker,
        &["--root", root.to_str().unwrap(), "--workers", "1"],
    );
    let v = get(&server, "/missing", &[]).json();
    assert_eq!(v["DOCUMENT_ROOT"], root.to_str().unwrap());
    assert_eq!(v["SCRIPT_NAME"], "/worker.php");
    assert_eq!(
        v["SCRIPT_FILENAME"],
        worker.canonicalize().unwrap().to_str().unwrap()
    );
    assert_eq!(get(&server, "/small.txt", &[]).body, b"small\n");
}

/// The same table against a mixed site (the front controller in the
/// workers, other scripts in php-fpm, requests routed as classic mode
/// routes them): its answers differ (nginx's 400 for `..` past the root,
/// PHP files run), but no secret is ever returned.
#[test]
fn a_mixed_site_never_returns_a_secret_either() {
    let site = Site::new();
    let server = site.start(&["--classic", "on"]);
    let mut leaks = Vec::new();
    for &(path, _) in TRAVERSALS {
        for accept in ["", "Accept-Encoding: gzip, br\r\n"] {
            for method in ["GET", "HEAD"] {
                let raw = format!(
                    "{method} {path} HTTP/1.1\r\nHost: localhost\r\n{accept}Connection: close\r\n\r\n"
                );
                let mut conn = support::Connection::open(server.addr);
                conn.send(raw.as_bytes());
                let r = conn.read_response(method == "HEAD");
                let body = match r.header("content-encoding") {
                    _ if r.body.is_empty() => Vec::new(),
                    Some("gzip") => gunzip(&r.body),
                    Some("br") => unbrotli(&r.body),
                    _ => r.body.clone(),
                };
                if String::from_utf8_lossy(&body).contains(MARKER)
                    || String::from_utf8_lossy(&r.body).contains(MARKER)
                {
                    leaks.push(format!("{method} {path} ({accept:?}): {}", r.status));
                }
            }
        }
    }
    assert!(leaks.is_empty(), "secrets returned:\n{}", leaks.join("\n"));
    assert!(server.log().contains("mixed site:"), "{}", server.log());
}
