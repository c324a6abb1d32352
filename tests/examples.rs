//! The example apps in examples/ are what users copy, so each one is
//! served by Hearth (its worker.php) and by nginx + php-fpm (its
//! public/index.php), sent the same requests, and compared: status, the
//! headers an app sets, cookies and body. The only difference allowed is
//! the one each example shows on purpose: a count of the requests its
//! process has served, which grows under Hearth and is always 1 under
//! php-fpm. The Symfony example, which has one front controller for both,
//! is tests/symfony.rs.

#[path = "support/reference.rs"]
mod reference;
#[path = "support/mod.rs"]
mod support;

use std::net::SocketAddr;
use std::path::PathBuf;

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

fn hearth(worker: PathBuf) -> Server {
    let mut args: Vec<String> = vec!["--workers".into(), "1".into()];
    args.extend(support::as_root());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Server::start(&worker, &args)
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
        ("missing page", Req::new("GET", "/nowhere")),
    ];
    let mut runs = Vec::new();
    for server in ["hearth", "fpm"] {
        for dir in [std::env::temp_dir(), PathBuf::from("/tmp")] {
            let _ = std::fs::remove_file(dir.join(format!("hearth-example-guestbook-{euid}.json")));
        }
        runs.push(match server {
            "hearth" => browse(hearth(example("legacy/worker.php")).addr, &requests),
            _ => browse(
                Reference::start(&example("legacy/public"), "index.php").addr,
                &requests,
            ),
        });
    }
    compare(&requests, &runs[0], &runs[1], None);

    let hearth = &runs[0];
    assert_eq!(hearth[1].status, 422);
    assert_eq!(hearth[2].status, 303);
    assert!(
        hearth[3].text().contains("<b>Ann</b>: Hello there"),
        "{}",
        hearth[3].text()
    );
    assert!(
        hearth[3].text().contains("visit number 4"),
        "{}",
        hearth[3].text()
    );
    assert!(hearth[5].text().contains("data-theme=\"dark\""));
    assert_eq!(hearth[6].status, 404);
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
        ("missing page", Req::new("GET", "/nowhere")),
        ("wrong method", Req::new("DELETE", "/")),
    ];
    let server = hearth(example("slim/worker.php"));
    let warm = browse(server.addr, &requests);
    let fpm = Reference::start(&example("slim/public"), "index.php");
    let cold = browse(fpm.addr, &requests);
    compare(&requests, &warm, &cold, Some("served_by_this_process"));

    assert_eq!(warm[3].status, 201, "{}", warm[3].text());
    assert_eq!(cold[1].json()["served_by_this_process"], 1);
    assert_eq!(cold[2].json()["served_by_this_process"], 1);
    // One worker served them all: its app stayed booted between requests.
    assert_eq!(
        count(&warm[2], "served_by_this_process"),
        count(&warm[1], "served_by_this_process") + 1
    );
}
