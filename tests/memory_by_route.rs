//! Memory growth by route against real php-cgi workers
//! (tests/fixtures/growth): the leaking route first in `hearth status`,
//! `/api/status` and `/metrics`, the clean ones near zero; names from
//! `Hearth\route_name()` over folded paths; the bound on the table; and
//! the routes a worker served last in the log line of its replacement
//! for `max_memory`.

#[path = "support/mod.rs"]
mod support;

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use support::{eventually, fixture, Connection, Server};

const LEAK: &str = "GET /leak/{id}";
const CLEAN: [&str; 3] = ["GET /users/{id}", "GET /about", "GET /search"];

fn app() -> std::path::PathBuf {
    fixture("growth/worker.php")
}

fn admin_get(addr: SocketAddr, path: &str) -> support::Response {
    support::request(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
    )
}

/// Sends `n` requests from `clients` keep-alive connections at once,
/// `path(i)` for the i-th, and checks each is answered.
fn send_all(addr: SocketAddr, n: usize, clients: usize, path: fn(usize) -> String) {
    let threads: Vec<_> = (0..clients)
        .map(|c| {
            std::thread::spawn(move || {
                let mut conn = Connection::open(addr);
                for i in (c..n).step_by(clients) {
                    let r = conn.get(&path(i), "");
                    assert_eq!(r.status, 200, "{}", r.text());
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("client");
    }
}

/// One route of a status report's `routes.top`.
fn route<'a>(status: &'a Value, name: &str) -> &'a Value {
    status["routes"]["top"]
        .as_array()
        .and_then(|top| top.iter().find(|r| r["route"] == name))
        .unwrap_or_else(|| panic!("no {name} in {}", status["routes"]))
}

fn mixed(i: usize) -> String {
    match i % 4 {
        0 => format!("/leak/{i}"),
        1 => format!("/users/{i}?tab=posts"),
        2 => "/about".to_owned(),
        _ => format!("/search?q={i}"),
    }
}

/// Checks the routes of a status report after 1,000 mixed requests: the
/// leaking route first, its 8 KiB a request seen, the clean ones near 0.
fn check_routes(status: &Value) {
    let top = status["routes"]["top"].as_array().expect("routes.top");
    assert_eq!(top[0]["route"], LEAK, "{}", status["routes"]);
    let leak = route(status, LEAK);
    // Each worker's last request is not measured: a few short of 250.
    let measured = leak["requests"].as_u64().expect("requests");
    assert!((240..=250).contains(&measured), "{leak}");
    let mean = leak["mean"].as_i64().expect("mean");
    assert!(
        (8 * 1024..=16 * 1024).contains(&mean),
        "8 KiB a request and the array's own growth: {leak}"
    );
    assert!(leak["grew_share"].as_f64().expect("share") > 0.95, "{leak}");
    for name in CLEAN {
        let clean = route(status, name);
        assert!(
            clean["requests"].as_u64().expect("requests") >= 240,
            "{clean}"
        );
        let mean = clean["mean"].as_i64().expect("mean");
        // Near zero: the first request of each worker on a route loads
        // what it needs once, which a mean over 250 makes small.
        assert!(mean.abs() < 512, "{name} keeps nothing: {clean}");
    }
    assert_eq!(status["routes"]["counted"], 4, "{}", status["routes"]);
    assert_eq!(status["routes"]["limit"], 256);
}

/// The value of `name{route="ROUTE"}` in the metrics text.
fn metric(text: &str, name: &str, route: &str) -> Option<i64> {
    let prefix = format!("{name}{{route=\"{route}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
}

#[test]
fn the_leaking_route_is_first_in_status_and_metrics_and_clean_ones_near_zero() {
    let dir = support::tempdir();
    let socket = dir.path().join("control.sock");
    let server = Server::start(
        &app(),
        &[
            "--workers",
            "2",
            "--control-socket",
            &socket.to_string_lossy(),
            "--admin",
            "127.0.0.1:0",
        ],
    );
    let admin = support::admin_addr(&server);
    send_all(server.addr, 1000, 4, mixed);

    let status = support::status_json(&socket);
    check_routes(&status);
    let api = admin_get(admin, "/api/status");
    assert_eq!(api.status, 200);
    check_routes(&api.json()["status"]);

    let table = support::ctl(&["status", "--control-socket", &socket.to_string_lossy()]);
    let table = String::from_utf8_lossy(&table.stdout).into_owned();
    let lines: Vec<&str> = table.lines().collect();
    let header = lines
        .iter()
        .position(|l| l.starts_with("ROUTE"))
        .unwrap_or_else(|| panic!("no route table in:\n{table}"));
    assert!(lines[header + 1].starts_with(LEAK), "{table}");

    let text = admin_get(admin, "/metrics").text();
    let growth = |route: &str| metric(&text, "hearth_route_memory_growth_bytes", route);
    let leak = growth(LEAK).unwrap_or_else(|| panic!("no {LEAK} in:\n{text}"));
    assert!(leak > 240 * 8 * 1024, "{text}");
    for name in CLEAN {
        let clean = growth(name).unwrap_or_else(|| panic!("no {name} in:\n{text}"));
        assert!(clean.abs() < 250 * 512, "{name}: {clean}\n{text}");
    }
    assert!(
        metric(&text, "hearth_route_requests_total", LEAK).is_some_and(|n| n >= 240),
        "{text}"
    );
    assert!(
        metric(&text, "hearth_route_requests_grew_total", LEAK).is_some_and(|n| n >= 230),
        "{text}"
    );
}

#[test]
fn a_name_from_the_app_overrides_the_folded_path() {
    let dir = support::tempdir();
    let socket = dir.path().join("control.sock");
    let server = Server::start(
        &app(),
        &[
            "--workers",
            "1",
            "--control-socket",
            &socket.to_string_lossy(),
        ],
    );
    send_all(server.addr, 60, 1, |i| match i % 3 {
        0 => format!("/named/{i}"),
        1 => "/named-leak".to_owned(),
        _ => "/about".to_owned(),
    });
    let status = support::status_json(&socket);
    let names: Vec<&str> = status["routes"]["top"]
        .as_array()
        .expect("top")
        .iter()
        .filter_map(|r| r["route"].as_str())
        .collect();
    assert_eq!(names[0], "leak.named", "{}", status["routes"]);
    assert!(names.contains(&"users.named"), "{names:?}");
    assert!(names.contains(&"GET /about"), "{names:?}");
    assert!(
        !names.iter().any(|n| n.contains("/named")),
        "named requests are not counted under their paths: {names:?}"
    );
    assert_eq!(route(&status, "leak.named")["requests"], 20);
}

#[test]
fn endless_distinct_paths_fill_the_table_once_and_the_rest_is_other() {
    let dir = support::tempdir();
    let socket = dir.path().join("control.sock");
    let server = Server::start(
        &app(),
        &[
            "--workers",
            "2",
            "--control-socket",
            &socket.to_string_lossy(),
        ],
    );
    // Words, not ids: each path is a route of its own.
    send_all(server.addr, 1200, 4, |i| format!("/page/p{i}x/view"));
    let status = support::status_json(&socket);
    assert_eq!(status["routes"]["counted"], 256, "{}", status["routes"]);
    let top = status["routes"]["top"].as_array().expect("top");
    assert!(top.len() <= 20, "a status report lists the top 20");
    // Routes past the first 256 all went to other, which the report
    // shows whether or not its growth puts it among the top.
    let other = &status["routes"]["other"];
    assert_eq!(other["route"], "other", "{}", status["routes"]);
    assert!(
        other["requests"].as_u64().expect("requests") >= 900,
        "{other}"
    );
}

#[test]
fn a_worker_replaced_for_max_memory_logs_the_routes_it_served_last() {
    let server = Server::start(&app(), &["--workers", "1", "--max-memory", "96M"]);
    // /hog keeps 2 MiB a request: the worker passes 96 MiB after a few
    // dozen. A clean route between, so both are in the list.
    let mut conn = Connection::open(server.addr);
    eventually(
        Duration::from_secs(120),
        "a replacement for max_memory",
        || {
            for path in ["/hog", "/about"] {
                let r = conn.get(path, "");
                assert_eq!(r.status, 200, "{}", r.text());
                if r.header("connection") == Some("close") {
                    conn = Connection::open(server.addr);
                }
            }
            server.log().contains("(max_memory)").then_some(())
        },
    );
    server.wait_for_log("the routes it served last", Duration::from_secs(10));
    let log = server.log();
    let line = log
        .lines()
        .find(|l| l.contains("(max_memory)"))
        .expect("the replacement's line");
    let list = line
        .split("with what each grew it by: ")
        .nth(1)
        .unwrap_or_else(|| panic!("no list of routes: {line}"));
    let entries: Vec<&str> = list.split(", ").collect();
    assert_eq!(entries.len(), 10, "the last 10 requests measured: {line}");
    assert!(
        entries
            .iter()
            .any(|e| e.starts_with("GET /hog +2.0 MiB") || e.starts_with("GET /hog +2.1 MiB")),
        "{line}"
    );
    assert!(
        entries.iter().any(|e| e.starts_with("GET /about ")),
        "{line}"
    );
}
