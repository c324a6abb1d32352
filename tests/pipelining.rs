//! Queueing a request behind a busy worker (pipelining): a worker never
//! runs two requests at once, responses never cross, and a queued request
//! whose worker fails before reaching it runs elsewhere instead of failing.

#[path = "support/mod.rs"]
mod support;

use std::sync::{Arc, Barrier};
use std::time::Duration;

use support::{eventually, fixture, Req, Server};

/// Many clients, one worker: every response belongs to its own request.
#[test]
fn responses_never_cross_under_concurrency() {
    let server = Server::start(&fixture("app.php"), &["--workers", "2"]);
    let addr = server.addr;
    let threads: Vec<_> = (0..16)
        .map(|t| {
            std::thread::spawn(move || {
                let mut conn = support::Connection::open(addr);
                for i in 0..100 {
                    let tag = format!("{t}-{i}");
                    let r = conn.get(&format!("/env?tag={tag}"), "");
                    assert_eq!(r.status, 200);
                    assert_eq!(
                        r.json()["get"]["tag"],
                        tag.as_str(),
                        "a response went to the wrong request"
                    );
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("client thread");
    }
    assert!(
        !server.log().contains("frame outside the current request"),
        "{}",
        server.log()
    );
}

/// Starts `count` requests at once on a one-worker server and returns their
/// responses; with one worker, all but one wait, and one of those is queued
/// on the worker.
fn burst(
    server: &Server,
    path_of: impl Fn(usize) -> String,
    count: usize,
) -> Vec<support::Response> {
    let barrier = Arc::new(Barrier::new(count));
    let addr = server.addr;
    let handles: Vec<_> = (0..count)
        .map(|i| {
            let path = path_of(i);
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                Req::new("GET", &path).send(addr)
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("request thread"))
        .collect()
}

#[test]
fn requests_queued_behind_a_worker_that_exits_run_elsewhere() {
    let server = Server::start(&fixture("app.php"), &["--workers", "1"]);
    let dir = support::tempdir();
    let mark = dir.path().join("started");
    // The first request holds the worker until the others are in line,
    // then the worker exits (exit() ends it); everyone behind it must
    // still be served, by the replacement.
    let addr = server.addr;
    let first = {
        let path = format!("/slow?ms=300&mark={}", mark.display());
        std::thread::spawn(move || Req::new("GET", &path).send(addr))
    };
    eventually(
        Duration::from_secs(10),
        "the first request to start",
        || mark.exists().then_some(()),
    );
    let exiting = std::thread::spawn(move || Req::new("GET", "/exit").send(addr));
    // /exit (the second request) waits in line before the others come: on
    // a busy machine a fixed pause was not always enough.
    let log = server.log();
    let socket = log
        .split("control socket at ")
        .nth(1)
        .and_then(|rest| rest.lines().next())
        .expect("the control socket in the log")
        .to_owned();
    eventually(Duration::from_secs(10), "/exit to wait in line", || {
        (support::status_json(std::path::Path::new(&socket))["pool"]["queue"] == 1).then_some(())
    });
    let rest = burst(&server, |i| format!("/env?n={i}"), 6);
    assert_eq!(first.join().expect("first").status, 200);
    assert_eq!(exiting.join().expect("exit").status, 202);
    for r in rest {
        assert_eq!(
            r.status,
            200,
            "a request queued behind an exiting worker must not fail: {}",
            r.text()
        );
    }
    let log = server.log();
    assert!(
        log.contains("request queued behind"),
        "a request was queued behind /exit:\n{log}"
    );
    assert!(
        log.contains("dispatching it again"),
        "and sent elsewhere when the worker exited:\n{log}"
    );
}

#[test]
fn requests_queued_behind_a_worker_killed_mid_request_run_elsewhere() {
    let server = Server::start(&fixture("app.php"), &["--workers", "1"]);
    let dir = support::tempdir();
    let mark = dir.path().join("started");
    let pidfile = dir.path().join("pid");
    let addr = server.addr;
    // A holds the worker while B (which will sleep, and be killed) and the
    // rest line up. When A ends, B starts and the next in line is queued
    // on the worker behind B.
    let a = {
        let path = format!("/slow?ms=300&mark={}", mark.display());
        std::thread::spawn(move || Req::new("GET", &path).send(addr))
    };
    eventually(Duration::from_secs(10), "A to start", || {
        mark.exists().then_some(())
    });
    let b = {
        let path = format!("/sleep?pidfile={}", pidfile.display());
        std::thread::spawn(move || Req::new("GET", &path).send(addr))
    };
    std::thread::sleep(Duration::from_millis(50));
    let rest: Vec<_> = (0..4)
        .map(|i| std::thread::spawn(move || Req::new("GET", &format!("/env?n={i}")).send(addr)))
        .collect();
    let pid = eventually(Duration::from_secs(10), "B to start", || {
        std::fs::read_to_string(&pidfile)
            .ok()
            .filter(|p| !p.is_empty())
    });
    server.wait_for_log("request queued behind", Duration::from_secs(5));
    assert!(std::process::Command::new("kill")
        .args(["-KILL", pid.trim()])
        .status()
        .expect("kill")
        .success());
    assert_eq!(a.join().expect("A").status, 200);
    assert_eq!(
        b.join().expect("B").status,
        502,
        "the request the worker was running fails"
    );
    for h in rest {
        let r = h.join().expect("waiting request");
        assert_eq!(
            r.status,
            200,
            "requests waiting or queued behind it do not: {}",
            r.text()
        );
        assert_ne!(r.json()["pid"].to_string(), pid.trim());
    }
    server.wait_for_log("dispatching it again", Duration::from_secs(5));
}

#[test]
fn a_queued_request_whose_client_leaves_does_not_cost_the_worker() {
    let server = Server::start(&fixture("app.php"), &["--workers", "1"]);
    let dir = support::tempdir();
    let mark_a = dir.path().join("a");
    let mark_b = dir.path().join("b");
    let addr = server.addr;
    let a = {
        let path = format!("/slow?ms=200&mark={}", mark_a.display());
        std::thread::spawn(move || Req::new("GET", &path).send(addr))
    };
    eventually(Duration::from_secs(10), "A to start", || {
        mark_a.exists().then_some(())
    });
    let b = {
        let path = format!("/slow?ms=300&mark={}", mark_b.display());
        std::thread::spawn(move || Req::new("GET", &path).send(addr))
    };
    std::thread::sleep(Duration::from_millis(50));
    // C lines up behind B; when A ends and B starts, C is queued on the
    // worker. Then C's client leaves.
    let mut c = support::Connection::open(addr);
    c.send(b"GET /slow?ms=1 HTTP/1.1\r\nHost: x\r\n\r\n");
    eventually(Duration::from_secs(10), "B to start", || {
        mark_b.exists().then_some(())
    });
    server.wait_for_log("request queued behind", Duration::from_secs(5));
    drop(c);
    assert_eq!(a.join().expect("A").status, 200);
    assert_eq!(b.join().expect("B").status, 200);
    server.wait_for_log(
        "draining the response to a queued request",
        Duration::from_secs(5),
    );
    let first = server.get("/pid").json();
    let again = server.get("/pid").json();
    assert_eq!(again["pid"], first["pid"], "the same worker keeps serving");
    assert!(
        again["served"].as_u64().expect("served") >= 5,
        "C ran to completion: {again}"
    );
}

#[test]
fn pipelining_can_be_turned_off() {
    let server = Server::start(&fixture("app.php"), &["--workers", "1", "--no-pipelining"]);
    let responses = burst(&server, |i| format!("/env?n={i}"), 8);
    assert!(responses.iter().all(|r| r.status == 200));
}
