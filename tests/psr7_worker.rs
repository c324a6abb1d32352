//! `Hearth\Psr7Worker` through the real binary: a PSR-15 request handler
//! (a middleware pipeline) given to `serve()` as it is, and what a PSR-7
//! handler's `header()`, `setcookie()` and session add to its response.
//! Each is compared with nginx + php-fpm running the same script, where
//! `serve()` handles the one request and emits with `header()`.

#[path = "support/reference.rs"]
mod reference;
#[path = "support/mod.rs"]
mod support;

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use reference::Reference;
use support::{fixture, CookieJar, Req, Response, Server};

/// The headers the app sets; the rest describe the transport.
const APP_HEADERS: &[&str] = &[
    "content-type",
    "set-cookie",
    "x-stamp",
    "x-from-header",
    "cache-control",
    "expires",
    "pragma",
];

/// Status, the app's headers (session ids masked) and the body, with the
/// count of requests the handler object served masked too.
fn comparable(r: &Response) -> (u16, Vec<(String, String)>, String) {
    let mut headers: Vec<(String, String)> = r
        .headers
        .iter()
        .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
        .filter(|(n, _)| APP_HEADERS.contains(&n.as_str()))
        .map(|(n, v)| {
            let v = match v.strip_prefix("PHPSESSID=") {
                Some(rest) => format!(
                    "PHPSESSID=<id>{}",
                    &rest[rest.find(';').unwrap_or(rest.len())..]
                ),
                None => v,
            };
            (n, v)
        })
        .collect();
    headers.sort_by(|a, b| a.0.cmp(&b.0));
    let mut body = r.text();
    if let Some(at) = body.find("\"served\":") {
        let start = at + "\"served\":".len();
        let end = start + body[start..].find('}').unwrap_or(0);
        body.replace_range(start..end, "<n>");
    }
    (r.status, headers, body)
}

/// Sends `requests` in order with one cookie jar, as a browser would.
fn browse(addr: SocketAddr, requests: &[Req]) -> Vec<Response> {
    let mut jar = CookieJar::default();
    requests
        .iter()
        .map(|req| {
            let mut req = req.clone();
            if !jar.header().is_empty() {
                req = req.header("Cookie", &jar.header());
            }
            let response = req.send(addr);
            jar.store(&response);
            response
        })
        .collect()
}

/// `hearth serve tests/fixtures/SCRIPT` with one worker.
fn hearth(script: &str, extension: &str) -> Server {
    Server::start(
        &fixture(script),
        &["--workers", "1", "--php-extension", extension],
    )
}

/// nginx + php-fpm with tests/fixtures/SCRIPT as the front controller.
fn fpm(script: &str) -> Reference {
    Reference::start(&support::root().join("tests/fixtures"), script)
}

#[test]
fn a_psr15_handler_is_served_as_under_php_fpm() {
    let requests = [
        Req::new("GET", "/"),
        Req::new("POST", "/").form("name=Ann&tags[]=a"),
        Req::new("GET", "/again?x=1"),
    ];
    let server = hearth("psr15.php", "auto");
    let warm = browse(server.addr, &requests);
    let reference = fpm("psr15.php");
    let cold = browse(reference.addr, &requests);
    for (h, f) in warm.iter().zip(&cold) {
        assert_eq!(
            comparable(h),
            comparable(f),
            "Hearth (left) and nginx + php-fpm (right) differ"
        );
    }
    let first = warm[0].json();
    assert_eq!(first["stamp"], "stamped", "the middleware ran: {first}");
    assert_eq!(warm[0].header("x-stamp"), Some("yes"));
    assert_eq!(warm[1].json()["parsed"]["name"], "Ann");
    // One handler object served them all, in one warm worker; php-fpm
    // builds it anew for each request.
    let served: Vec<_> = warm.iter().map(|r| r.json()["served"].clone()).collect();
    assert_eq!(served, [1, 2, 3]);
    assert!(cold.iter().all(|r| r.json()["served"] == 1));
}

/// With and without the extension, what `header()`, `setcookie()` and
/// `session_start()` set inside a PSR-7 handler goes out with the
/// response object's own headers, as the emitter sends them under php-fpm
/// (`header($line, false)`): a PSR-7 app's PHP session works.
#[test]
fn a_psr7_handlers_header_calls_and_session_go_with_its_response() {
    let requests = [Req::new("GET", "/session"), Req::new("GET", "/session")];
    let reference = fpm("psr7.php");
    let cold = browse(reference.addr, &requests);
    for extension in ["auto", "off"] {
        let server = hearth("psr7.php", extension);
        let warm = browse(server.addr, &requests);
        for (h, f) in warm.iter().zip(&cold) {
            assert_eq!(
                comparable(h),
                comparable(f),
                "--php-extension {extension}: Hearth (left) and nginx + php-fpm (right) differ"
            );
        }
        let cookies = warm[0].headers_named("set-cookie");
        assert!(
            cookies.iter().any(|c| c.starts_with("PHPSESSID="))
                && cookies.contains(&"from_setcookie=yes")
                && cookies.contains(&"from_response=yes"),
            "--php-extension {extension}: {cookies:?}"
        );
        assert_eq!(warm[0].header("x-from-header"), Some("yes"));
        assert_eq!(warm[1].text(), "visits=2\n", "--php-extension {extension}");
    }
}

/// An object that is neither callable nor a PSR-15 handler stops the
/// worker at boot with a message naming what `serve()` takes.
#[test]
fn a_handler_that_is_neither_callable_nor_psr15_is_refused_at_boot() {
    let dir = support::tempdir();
    let script = dir.path().join("worker.php");
    std::fs::write(
        &script,
        format!(
            "<?php\nrequire '{}';\nrequire '/usr/share/php/Nyholm/Psr7/autoload.php';\n\
             Hearth\\Psr7Worker::serve(new Nyholm\\Psr7\\Factory\\Psr17Factory(), new ArrayObject());\n",
            support::root().join("php/autoload.php").display()
        ),
    )
    .expect("write");
    let mut cmd = Command::new(support::hearth_bin());
    cmd.arg("serve")
        .arg(&script)
        .arg("--control-socket")
        .arg(dir.path().join("control.sock"))
        .args(["--listen", "127.0.0.1:0", "--workers", "1", "--php"])
        .arg(support::php_binary())
        .args(support::as_root())
        .env("NO_COLOR", "1")
        .env_remove("RUST_LOG")
        .env_remove("HEARTH_LOG");
    let out = support::output_within(&mut cmd, Duration::from_secs(60));
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{log}");
    assert!(
        log.contains(
            "Hearth\\Psr7Worker::serve(): the handler must be a callable or a \
             Psr\\Http\\Server\\RequestHandlerInterface, ArrayObject given"
        ),
        "{log}"
    );
}
