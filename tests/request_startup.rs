//! Issue 21: a request becomes `$_GET`, `$_POST`, `$_COOKIE`, `$_FILES`,
//! `$_SERVER`, `filter_input()`, `getenv()` and `getallheaders()` as under
//! nginx + php-fpm, because the Hearth extension runs PHP's own request
//! startup in the worker. The app of tests/fixtures/startup throws on every
//! warning, as Laravel's and Symfony's error handlers do: the warnings of
//! request parsing must not reach it.
//!
//! These tests need the extension (`make ext`, which `make test` runs);
//! without it they say so and fail.

#[path = "support/reference.rs"]
mod reference;
#[path = "support/mod.rs"]
mod support;

use reference::Reference;
use support::{fixture, Part, Req, Response, Server};

struct Both {
    fpm: Reference,
    hearth: Server,
}

impl Both {
    fn start(extra: &[&str]) -> Both {
        let docroot = fixture("startup");
        let fpm = Reference::start(&docroot, "index.php");
        let hearth = Server::start(&docroot.join("index.php"), extra);
        let log = hearth.log();
        // HEARTH_TEST_PHP_EXTENSION=off measures the PHP library's own
        // request startup against the same tests (they are expected to
        // fail there; docs/compatibility.md says where).
        if std::env::var_os("HEARTH_TEST_PHP_EXTENSION").is_none() {
            assert!(
                log.contains(", Hearth extension"),
                "hearth serve runs without the Hearth extension (build it with `make ext`): {log}"
            );
        }
        Both { fpm, hearth }
    }

    fn send(&self, req: &Req) -> (Response, Response) {
        (req.send(self.fpm.addr), req.send(self.hearth.addr))
    }

    /// Sends `req` to both and asserts the same status and body; php-fpm
    /// must answer `status`.
    fn same(&self, what: &str, req: &Req, status: u16) -> Response {
        let (f, h) = self.send(req);
        assert_eq!(
            f.status,
            status,
            "{what}: php-fpm answered {}: {}",
            f.status,
            f.text()
        );
        assert_eq!(
            (h.status, h.text()),
            (f.status, f.text()),
            "{what}: hearth (left) and php-fpm (right) differ"
        );
        h
    }
}

fn urlencoded(n: usize) -> String {
    (0..n)
        .map(|i| format!("v{i}={i}"))
        .collect::<Vec<_>>()
        .join("&")
}

fn nested(depth: usize) -> String {
    format!("a{}=1", "[x]".repeat(depth))
}

/// Item 1: over max_input_vars and max_input_nesting_level, in a query, a
/// urlencoded body, a multipart body and cookies: PHP's warning goes to
/// the log and error_get_last(), never to the app's handler, and PHP's
/// counting decides what is kept (1001 variables of a urlencoded POST with
/// the default limit of 1000).
#[test]
fn input_limits_warn_as_at_request_startup() {
    let both = Both::start(&[]);
    let many = urlencoded(1500);
    let cases: Vec<(&str, Req)> = vec![
        (
            "urlencoded over max_input_vars",
            Req::new("POST", "/vars").form(&many),
        ),
        (
            "urlencoded at 1001",
            Req::new("POST", "/vars").form(&urlencoded(1001)),
        ),
        (
            "query over max_input_vars",
            Req::new("GET", &format!("/vars?{}", "a[]=&".repeat(1100))),
        ),
        (
            "nested over max_input_nesting_level",
            Req::new("POST", "/vars").form(&nested(100)),
        ),
        (
            "nested query",
            Req::new("GET", &format!("/vars?{}", nested(70))),
        ),
        (
            "cookies over max_input_vars",
            Req::new("GET", "/vars?a=1").header("Cookie", &"c[]=1;".repeat(1005)),
        ),
        (
            "repeated cookies count",
            Req::new("GET", &format!("/vars?{}", "a[]=&".repeat(998)))
                .header("Cookie", "x=1; x=2; x=3"),
        ),
        ("multipart over max_input_vars", {
            let names: Vec<String> = (0..1100).map(|i| format!("f{i}")).collect();
            let parts: Vec<Part<'_>> = names
                .iter()
                .map(|n| (n.as_str(), None, None, &b"v"[..]))
                .collect();
            Req::new("POST", "/vars").multipart(&parts)
        }),
    ];
    for (what, req) in &cases {
        both.same(what, req, 200);
    }
}

/// Item 1, under load: 10,000-variable and 1,000-deep requests against one
/// worker whose error handler throws on every warning: no 502, no worker
/// restarted.
#[test]
fn a_flood_of_oversized_inputs_kills_no_worker() {
    let dir = support::tempdir();
    let socket = dir.path().join("control.sock");
    let server = Server::start(
        &fixture("startup").join("index.php"),
        &[
            "--workers",
            "1",
            "--control-socket",
            &socket.to_string_lossy(),
        ],
    );
    let wide = urlencoded(10_000);
    let deep = nested(1_000);
    for i in 0..60 {
        let req = match i % 3 {
            0 => Req::new("POST", "/vars").form(&wide),
            1 => Req::new("POST", "/vars").form(&deep),
            _ => Req::new("GET", &format!("/vars?{}", nested(1_000))),
        };
        let r = req.send(server.addr);
        assert_eq!(r.status, 200, "request {i}: {}", r.text());
    }
    let status = support::status_json(&socket);
    assert_eq!(status["pool"]["restarts"], 0, "{status}");
}

/// Item 2: filter_input(), filter_has_var() and filter_input_array() see
/// the request.
#[test]
fn filter_input_sees_the_request() {
    let both = Both::start(&[]);
    let req = Req::new("POST", "/filter?a=1&n=42&x[]=y")
        .header("Cookie", "c=cookie")
        .form("p=posted&n=7");
    let h = both.same("filter", &req, 200);
    assert!(h.text().contains("\"post\":\"posted\""), "{}", h.text());
    both.same("filter, nothing", &Req::new("GET", "/filter"), 200);
}

/// Items 3 and 4: getallheaders() and apache_request_headers(), and
/// getenv() of the request's variables.
#[test]
fn request_headers_and_getenv_match() {
    let both = Both::start(&[]);
    let req = Req::new("POST", "/headers?q=1")
        .header("X-Token", "secret")
        .header("Accept-Language", "fr")
        .form("a=1");
    both.same("getallheaders", &req, 200);
    let req = Req::new("PUT", "/env?x=1&y")
        .header("X-Token", "t")
        .header("Content-Type", "text/plain")
        .body("body");
    let h = both.same("getenv", &req, 200);
    assert!(
        h.text().contains("\"REQUEST_METHOD\":\"PUT\""),
        "{}",
        h.text()
    );
}

/// Item 9: copy('php://input', $file) and the other stream operations an
/// app uses to save a raw body, small and spooled to disk.
#[test]
fn php_input_copies_like_a_file() {
    let both = Both::start(&[]);
    for size in [10, 200_000] {
        let body: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
        let req = Req::new("PUT", "/save")
            .header("Content-Type", "application/octet-stream")
            .body(body);
        both.same(&format!("saving a {size}-byte PUT"), &req, 200);
    }
}

/// Items 12 and 13: cookie names mangled as PHP does, and multipart
/// bodies with LF line ends, garbled part headers, names in any case and
/// backslashes in file names, parsed by PHP itself.
#[test]
fn multipart_and_cookies_parse_as_php_does() {
    let both = Both::start(&[]);
    let cookie = Req::new("GET", "/vars").header(
        "Cookie",
        "..Host-test=evil; __Host-test=good; a.b=1; c[d.e]=2; ' q=3",
    );
    both.same("mangled cookies", &cookie, 200);
    let lf = "--XX\nContent-Disposition: form-data; name=\"f\"; filename=\"a\\\\b.txt\"\n\
              Content-Type: text/plain; charset=latin1\n\nhello\n--XX\n\
              Content-Disposition: form-data; NAME=\"t\"\n\nvalue\n--XX\n\
              garbled header\nContent-Disposition: form-data; name=\"g\"\n\ng\n--XX\n\
              Content-Disposition: form-data\n\nno name\n--XX--\n";
    let req = Req::new("POST", "/vars")
        .header("Content-Type", "multipart/form-data; boundary=XX")
        .body(lf);
    let h = both.same("multipart with LF line ends", &req, 200);
    assert!(h.text().contains("uploaded 5"), "{}", h.text());
    let no_boundary = Req::new("POST", "/vars")
        .header("Content-Type", "multipart/form-data")
        .body("--XX\r\n\r\n");
    both.same("multipart without a boundary", &no_boundary, 200);
}

/// A request that arrives while the first worker still boots is read with
/// the workers' settings all the same: its multipart body goes to PHP's
/// parser (which takes LF line ends), not to Hearth's.
#[test]
fn a_request_before_the_first_worker_is_ready_is_read_for_it() {
    let server = Server::spawn(
        &fixture("startup").join("index.php"),
        &["--workers", "1", "--env", "STARTUP_BOOT_DELAY=1"],
    );
    let lf =
        "--XX\nContent-Disposition: form-data; name=\"f\"; filename=\"a.txt\"\n\nhello\n--XX--\n";
    let r = Req::new("POST", "/vars")
        .header("Content-Type", "multipart/form-data; boundary=XX")
        .body(lf)
        .send(server.addr);
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.text().contains("uploaded 5"), "{}", r.text());
}

/// The extension holds across many requests in one worker: nothing of one
/// request (variables, uploads, filter copies) reaches the next.
#[test]
fn nothing_leaks_from_one_request_to_the_next() {
    let both = Both::start(&["--workers", "1"]);
    let upload = Req::new("POST", "/vars?first=1")
        .header("Cookie", "a=1")
        .multipart(&[
            ("doc", Some("a.txt"), Some("text/plain"), b"abc"),
            ("f", None, None, b"1"),
        ]);
    both.same("upload", &upload, 200);
    for _ in 0..3 {
        both.same("a bare request after it", &Req::new("GET", "/vars"), 200);
        both.same("filters after it", &Req::new("GET", "/filter"), 200);
    }
}

/// An extension named with --php-extension must load: a file that does
/// not stops hearth serve with PHP's own reason.
/// Item 6: output the app flushes (`ob_flush()` and `flush()`) reaches the
/// client while the script goes on, as under php-fpm. The script waits
/// until the client has read the first line and says so (a gate file), so
/// a response held until the end shows as "gave up waiting".
#[test]
fn flushed_output_reaches_the_client_while_the_script_runs() {
    let both = Both::start(&["--workers", "1"]);
    let gate = std::env::temp_dir().join(format!("hearth-gate-{}", std::process::id()));
    let _ = std::fs::remove_file(&gate);
    let mut conn = support::Connection::open(both.hearth.addr);
    conn.send(
        format!(
            "GET /stream?gate={} HTTP/1.1\r\nHost: localhost\r\n\r\n",
            gate.display()
        )
        .as_bytes(),
    );
    let head = conn.read_head();
    assert_eq!(head.status, 200);
    let first = conn.read_chunk().expect("a first chunk");
    assert_eq!(String::from_utf8_lossy(&first), "first\n");
    std::fs::write(&gate, b"").expect("gate");
    let mut rest = Vec::new();
    while let Some(chunk) = conn.read_chunk() {
        rest.extend(chunk);
    }
    let _ = std::fs::remove_file(&gate);
    assert_eq!(String::from_utf8_lossy(&rest), "second\n");
}

#[test]
fn an_extension_that_does_not_load_is_refused_with_php_s_reason() {
    let dir = support::tempdir();
    let bad = dir.path().join("hearth-php8.2.so");
    std::fs::write(&bad, "not a shared object").unwrap();
    let mut args: Vec<String> = vec![
        "serve".into(),
        fixture("startup").join("index.php").display().to_string(),
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--php-extension".into(),
        bad.display().to_string(),
    ];
    args.extend(support::as_root());
    let out = std::process::Command::new(support::hearth_bin())
        .args(&args)
        .env("NO_COLOR", "1")
        .output()
        .expect("run hearth");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "the Hearth extension {} does not load",
            bad.display()
        )) && stderr.contains("Unable to load dynamic library"),
        "{stderr}"
    );
}

/// A file found beside the binary that does not load into this PHP (built
/// for another one): hearth warns, names it, and serves with the PHP
/// library's request startup.
#[test]
fn a_found_extension_that_does_not_load_falls_back_with_a_warning() {
    let dir = support::reachable_tempdir();
    let bin = dir.path().join("hearth");
    std::fs::copy(support::hearth_bin(), &bin).unwrap();
    let version = std::process::Command::new("php")
        .args(["-r", "echo PHP_MAJOR_VERSION, '.', PHP_MINOR_VERSION;"])
        .output()
        .expect("php -r");
    let version = String::from_utf8_lossy(&version.stdout).into_owned();
    let bad = dir.path().join(format!("hearth-php{version}.so"));
    std::fs::write(&bad, "built for another PHP").unwrap();
    let mut cmd = std::process::Command::new(&bin);
    cmd.arg("serve")
        .arg(fixture("startup").join("index.php"))
        .args(["--listen", "127.0.0.1:0", "--workers", "1"])
        .args(support::as_root());
    let server = Server::spawn_command(cmd);
    server.wait_until_ready();
    let log = server.log();
    assert!(
        log.contains(&format!(
            "the Hearth extension {} does not load",
            bad.display()
        )) && log.contains("no Hearth extension: the PHP library's request startup"),
        "{log}"
    );
    let r = Req::new("GET", "/vars?a=1").send(server.addr);
    assert_eq!(r.status, 200, "{}", r.text());
}
