//! The example apps in examples/ are what users copy, so each one is
//! served by Hearth (`hearth serve --config` its hearth.toml, which runs
//! its worker.php) and by nginx + php-fpm (its nginx.conf, which runs its
//! public/index.php), sent the same requests, and compared: status, the
//! headers an app sets, cookies and body. The requests cover pages, a
//! static file, a form, a session, redirects and error pages (404, 500).
//! The only difference allowed is the one each example shows on purpose:
//! a count of the requests its process has served, which grows under
//! Hearth and is always 1 under php-fpm. The Symfony and Laravel
//! examples are tests/symfony.rs and tests/laravel.rs.

#[path = "support/reference.rs"]
mod reference;
#[path = "support/mod.rs"]
mod support;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use reference::Reference;
use support::{CookieJar, Req, Response, Server};

/// Headers an app sets; the rest describe the transport.
const APP_HEADERS: &[&str] = &[
    "content-type",
    "location",
    "set-cookie",
    "cache-control",
    "expires",
    "pragma",
];

/// What a client of the example sees, made comparable: session ids and
/// the dates of the moment are replaced by placeholders.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    request: String,
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

fn seen(request: &str, response: &Response, count_key: Option<&str>) -> Seen {
    let mut headers: Vec<(String, String)> = response
        .headers
        .iter()
        .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
        .filter(|(n, _)| APP_HEADERS.contains(&n.as_str()))
        .map(|(n, v)| {
            let v = match n.as_str() {
                "set-cookie" => anonymize_cookie(&v),
                "expires" if !v.contains("1981") => "<now>".to_owned(),
                _ => v,
            };
            (n, v)
        })
        .collect();
    headers.sort_by(|a, b| a.0.cmp(&b.0));
    let mut body = response.text();
    if let Some(key) = count_key {
        body = replace_count(&body, key);
    }
    Seen {
        request: request.to_owned(),
        status: response.status,
        headers,
        body,
    }
}

/// `PHPSESSID=abc; expires=...; Max-Age=...` with the value and the date
/// of the moment replaced.
fn anonymize_cookie(v: &str) -> String {
    v.split(';')
        .enumerate()
        .map(|(i, part)| {
            let part = part.trim();
            if i == 0 && part.starts_with("PHPSESSID=") {
                "PHPSESSID=<id>".to_owned()
            } else if part.to_ascii_lowercase().starts_with("expires=") {
                "expires=<date>".to_owned()
            } else {
                part.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// `"key":N` becomes `"key":<n>`.
fn replace_count(body: &str, key: &str) -> String {
    let needle = format!("\"{key}\":");
    let Some(at) = body.find(&needle) else {
        return body.to_owned();
    };
    let start = at + needle.len();
    let end = start
        + body[start..]
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(body.len() - start);
    format!("{}<n>{}", &body[..start], &body[end..])
}

/// The count `key` in a JSON body.
fn count(response: &Response, key: &str) -> u64 {
    response.json()[key].as_u64().unwrap_or_else(|| {
        panic!("no {key} in {}", response.text());
    })
}

fn example(name: &str) -> PathBuf {
    support::root().join("examples").join(name)
}

/// Sends `requests` in order with one cookie jar, as a browser would.
fn browse(addr: SocketAddr, requests: &[(&str, Req)]) -> Vec<Response> {
    let mut jar = CookieJar::default();
    requests
        .iter()
        .map(|(_, req)| {
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

fn compare(
    requests: &[(&str, Req)],
    hearth: &[Response],
    fpm: &[Response],
    count_key: Option<&str>,
) {
    for (((what, _), h), f) in requests.iter().zip(hearth).zip(fpm) {
        assert_eq!(
            seen(what, h, count_key),
            seen(what, f, count_key),
            "Hearth (left) and nginx + php-fpm (right) differ"
        );
    }
}

/// `hearth serve --config examples/NAME/hearth.toml` on a free port, with
/// one worker (every request meets the state the previous ones left).
fn hearth(name: &str) -> Server {
    let mut args: Vec<String> = [
        "serve",
        "--config",
        example(name).join("hearth.toml").to_str().expect("path"),
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "1",
        "--php",
        &support::php_binary(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if let Ok(choice) = std::env::var("HEARTH_TEST_PHP_EXTENSION") {
        args.extend(["--php-extension".to_owned(), choice]);
    }
    let server = Server::spawn_args(&args);
    server.wait_until_ready();
    server
}

/// nginx + php-fpm with the server block of examples/NAME/nginx.conf
/// itself (its listen, root and fastcgi_pass pointed at this run's port,
/// the example's public/ and the reference's php-fpm).
fn fpm(name: &str) -> Reference {
    let conf = example(name).join("nginx.conf");
    Reference::start_with(
        &example(name).join("public"),
        "index.php",
        &[("NGINX_SERVER", conf.to_str().expect("path"))],
    )
}

#[test]
fn the_legacy_example_behaves_as_under_php_fpm() {
    let euid = rustix::process::geteuid().as_raw();
    let requests = [
        ("first visit", Req::new("GET", "/")),
        ("empty form", Req::new("POST", "/").form("name=&message=")),
        (
            "signed",
            Req::new("POST", "/").form("name=Ann&message=Hello+there"),
        ),
        ("after signing", Req::new("GET", "/")),
        ("theme", Req::new("GET", "/theme?name=dark")),
        ("dark page", Req::new("GET", "/")),
        ("stylesheet", Req::new("GET", "/style.css")),
        ("missing page", Req::new("GET", "/nowhere")),
        ("the php-fpm entry by name", Req::new("GET", "/index.php")),
        ("failing page", Req::new("GET", "/boom")),
        ("after the failure", Req::new("GET", "/")),
    ];
    let forget_the_guestbook = || {
        for dir in [std::env::temp_dir(), PathBuf::from("/tmp")] {
            let _ = std::fs::remove_file(dir.join(format!("hearth-example-guestbook-{euid}.json")));
        }
    };
    forget_the_guestbook();
    let server = hearth("legacy");
    let warm = browse(server.addr, &requests);
    forget_the_guestbook();
    let reference = fpm("legacy");
    let cold = browse(reference.addr, &requests);
    compare(&requests, &warm, &cold, None);

    // What the app did, once (both said the same).
    let seen = |what: &str| -> &Response {
        let at = requests.iter().position(|(w, _)| *w == what);
        &warm[at.unwrap_or_else(|| panic!("no {what}"))]
    };
    assert_eq!(seen("empty form").status, 422);
    let signed = seen("signed");
    assert_eq!((signed.status, signed.header("location")), (303, Some("/")));
    let page = seen("after signing").text();
    assert!(page.contains("<b>Ann</b>: Hello there"), "{page}");
    assert!(page.contains("visit number 4"), "the session: {page}");
    assert_eq!(seen("theme").status, 303);
    assert!(seen("dark page").text().contains("data-theme=\"dark\""));
    let css = seen("stylesheet");
    assert_eq!(css.status, 200);
    assert!(css.text().starts_with("/* A static file"), "{}", css.text());
    assert_eq!(seen("missing page").status, 404);
    assert_eq!(seen("the php-fpm entry by name").status, 404);
    let failed = seen("failing page");
    assert_eq!(failed.status, 500);
    assert!(
        failed.text().contains("Something went wrong"),
        "{}",
        failed.text()
    );
    assert!(!failed.text().contains("on purpose"), "{}", failed.text());
    // Every page but the stylesheet counted a visit, the failing one too.
    let after = seen("after the failure").text();
    assert!(after.contains("visit number 10"), "{after}");
    // The exception handler logged it, as to php-fpm's log.
    server.wait_for_log(
        "guestbook: uncaught RuntimeException: /boom failed on purpose",
        Duration::from_secs(5),
    );
}

#[test]
fn the_slim_example_behaves_as_under_php_fpm() {
    let requests = [
        ("home", Req::new("GET", "/")),
        ("hello", Req::new("GET", "/hello/ann?x=1")),
        ("hello again", Req::new("GET", "/hello/bob")),
        ("form", Req::new("POST", "/echo").form("a=1&b[]=2")),
        (
            "json",
            Req::new("POST", "/echo")
                .header("Content-Type", "application/json")
                .body(r#"{"a":1}"#),
        ),
        ("first visit", Req::new("GET", "/visits")),
        ("empty name", Req::new("POST", "/name").form("name=")),
        ("name", Req::new("POST", "/name").form("name=Ann")),
        ("after the redirect", Req::new("GET", "/visits")),
        ("missing page", Req::new("GET", "/nowhere")),
        ("wrong method", Req::new("DELETE", "/")),
        ("failing page", Req::new("GET", "/boom")),
        ("after the failure", Req::new("GET", "/visits")),
    ];
    let server = hearth("slim");
    let warm = browse(server.addr, &requests);
    let reference = fpm("slim");
    let cold = browse(reference.addr, &requests);
    compare(&requests, &warm, &cold, Some("served_by_this_process"));

    let seen = |what: &str| -> &Response {
        let at = requests.iter().position(|(w, _)| *w == what);
        &warm[at.unwrap_or_else(|| panic!("no {what}"))]
    };
    assert_eq!(seen("form").status, 201, "{}", seen("form").text());
    assert_eq!(
        seen("first visit").text(),
        "Hello stranger, visit number 1 in this session\n"
    );
    assert!(seen("first visit")
        .headers_named("set-cookie")
        .iter()
        .any(|c| c.starts_with("PHPSESSID=")));
    assert_eq!(seen("empty name").status, 422);
    let named = seen("name");
    assert_eq!(
        (named.status, named.header("location")),
        (303, Some("/visits"))
    );
    assert_eq!(
        seen("after the redirect").text(),
        "Hello Ann, visit number 2 in this session\n"
    );
    assert_eq!(seen("missing page").status, 404);
    assert_eq!(seen("wrong method").status, 405);
    let failed = seen("failing page");
    assert_eq!(failed.status, 500);
    assert!(
        failed.text().contains("Slim Application Error"),
        "{}",
        failed.text()
    );
    assert!(!failed.text().contains("on purpose"), "{}", failed.text());
    assert_eq!(
        seen("after the failure").text(),
        "Hello Ann, visit number 3 in this session\n"
    );
    // Slim's error handler logged it, as to php-fpm's log.
    server.wait_for_log("/boom failed on purpose", Duration::from_secs(5));

    assert_eq!(cold[1].json()["served_by_this_process"], 1);
    assert_eq!(cold[2].json()["served_by_this_process"], 1);
    // One worker served them all: its app stayed booted between requests.
    assert_eq!(
        count(&warm[2], "served_by_this_process"),
        count(&warm[1], "served_by_this_process") + 1
    );
}
