//! Worker lifecycle limits against real php-cgi workers: workers are
//! replaced between requests (never during one) once they pass
//! max_requests, max_memory, ttl or idle_ttl, and a request past
//! request_timeout gets 504 while its worker is replaced.

#[path = "support/mod.rs"]
mod support;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use support::{eventually, fixture, Server};

#[test]
fn max_requests_replaces_a_worker_after_its_nth_request() {
    let server = Server::start(
        &fixture("app.php"),
        &["--workers", "1", "--max-requests", "5"],
    );
    let mut pids: Vec<u64> = Vec::new();
    for _ in 0..40 {
        let r = server.get("/slow?ms=20");
        assert_eq!(r.status, 200, "no request fails while workers are replaced");
        pids.push(r.json()["pid"].as_u64().expect("pid"));
    }
    // Runs of requests served by the same worker.
    let mut runs: Vec<usize> = Vec::new();
    for (i, pid) in pids.iter().enumerate() {
        if i == 0 || pids[i - 1] != *pid {
            runs.push(0);
        }
        *runs.last_mut().expect("a run") += 1;
    }
    assert!(runs.len() >= 2, "workers were replaced: {runs:?}");
    // With 5, the 10% spread is 0: each worker serves its five requests,
    // plus those that come while its replacement boots (how many depends
    // on how fast the machine boots PHP, so there is no upper bound here).
    for run in &runs[..runs.len() - 1] {
        assert!(*run >= 5, "a worker served {run} requests: {runs:?}");
    }
    let distinct: HashSet<_> = pids.iter().collect();
    assert_eq!(
        distinct.len(),
        runs.len(),
        "a replaced worker never came back"
    );
    server.wait_for_log("(max_requests)", Duration::from_secs(5));
}

#[test]
fn max_memory_recycles_a_leaking_worker_without_failing_a_request() {
    // Each /leak keeps another megabyte; php-cgi's memory_limit of 128M
    // would make the ~120th request a fatal error without recycling.
    let server = Server::start(
        &fixture("app.php"),
        &["--workers", "2", "--max-memory", "48M"],
    );
    let mut most = 0;
    for i in 0..300 {
        let r = server.get("/leak");
        assert_eq!(r.status, 200, "request {i} failed: {}", r.text());
        most = most.max(r.json()["mb"].as_u64().expect("mb"));
    }
    assert!(
        most < 60,
        "a worker kept {most} MiB: it was not replaced in time"
    );
    server.wait_for_log("(max_memory)", Duration::from_secs(5));
}

#[test]
fn ttl_and_idle_ttl_replace_workers_between_requests() {
    for flag in ["--ttl", "--idle-ttl"] {
        let server = Server::start(&fixture("app.php"), &["--workers", "1", flag, "400ms"]);
        let first = server.serving_pid();
        // Left idle, the worker passes both limits and is replaced by the
        // pool's sweep, not by a request.
        server.wait_for_log("replacing the worker", Duration::from_secs(10));
        let next = server.serving_pid();
        assert_ne!(first, next, "{flag}: log:\n{}", server.log());
    }
}

#[test]
fn request_timeout_gives_504_and_a_fresh_worker() {
    let server = Server::start(
        &fixture("app.php"),
        &["--workers", "2", "--request-timeout", "500ms"],
    );
    let started = Instant::now();
    let slow = std::thread::spawn({
        let addr = server.addr;
        move || {
            support::request(
                addr,
                b"GET /slow?ms=20000 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            )
        }
    });
    // The other worker keeps serving meanwhile.
    for _ in 0..5 {
        assert_eq!(server.get("/pid").status, 200);
    }
    let r = slow.join().expect("the slow request");
    assert_eq!(r.status, 504);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the 504 came after {:?}, not at the time limit",
        started.elapsed()
    );
    server.wait_for_log("ran past its time limit", Duration::from_secs(10));
    // Both slots serve again: two requests at once get two workers.
    eventually(Duration::from_secs(10), "two live workers", || {
        let both: Vec<_> = (0..2)
            .map(|_| {
                let addr = server.addr;
                std::thread::spawn(move || {
                    support::request(
                        addr,
                        b"GET /slow?ms=300 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                    )
                })
            })
            .collect();
        let pids: HashSet<_> = both
            .into_iter()
            .map(|t| {
                let r = t.join().expect("request");
                assert_eq!(r.status, 200);
                r.json()["pid"].clone()
            })
            .collect();
        (pids.len() == 2).then_some(())
    });
}

#[test]
fn a_bad_lifecycle_value_names_the_flag() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hearth"))
        .args(["serve", "--max-memory", "lots"])
        .output()
        .expect("hearth runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--max-memory"), "{err}");
}

#[test]
fn the_pool_grows_when_requests_wait_and_shrinks_when_idle() {
    let server = Server::start(
        &fixture("app.php"),
        &[
            "--workers",
            "3",
            "--min-workers",
            "1",
            "--scale-down-after",
            "300ms",
        ],
    );
    assert!(
        server.log().contains("1 of 1 worker ready"),
        "{}",
        server.log()
    );
    let slow = |n: usize| -> HashSet<serde_json::Value> {
        let threads: Vec<_> = (0..n)
            .map(|_| {
                let addr = server.addr;
                std::thread::spawn(move || {
                    support::request(
                        addr,
                        b"GET /slow?ms=600 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                    )
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| {
                let r = t.join().expect("request");
                assert_eq!(r.status, 200, "no request fails while the pool grows");
                r.json()["pid"].clone()
            })
            .collect()
    };
    let pids = slow(3);
    assert!(
        pids.len() >= 2,
        "extra workers started for waiting requests: {pids:?}"
    );
    server.wait_for_log("stopping an extra worker", Duration::from_secs(10));
    // And it grows again when needed.
    let again = slow(3);
    assert!(again.len() >= 2, "{again:?}");
}

#[test]
fn a_full_queue_gives_503_at_once() {
    let control = support::tempdir();
    let socket = control.path().join("control.sock");
    let server = Server::start(
        &fixture("app.php"),
        &[
            "--workers",
            "1",
            "--max-queue",
            "2",
            "--no-pipelining",
            "--control-socket",
            &socket.to_string_lossy(),
        ],
    );
    let marks = support::tempdir();
    let mark = marks.path().join("running");
    let slow = |path: String| {
        let addr = server.addr;
        std::thread::spawn(move || {
            support::request(
                addr,
                format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
            )
        })
    };
    let busy = slow(format!("/slow?ms=3000&mark={}", mark.display()));
    eventually(Duration::from_secs(10), "the worker to be busy", || {
        mark.exists().then_some(())
    });
    let waiting: Vec<_> = (0..2).map(|_| slow("/slow?ms=1".into())).collect();
    eventually(Duration::from_secs(10), "two requests in line", || {
        (support::status_json(&socket)["pool"]["queue"] == 2).then_some(())
    });
    let started = Instant::now();
    let refused = server.get("/pid");
    assert_eq!(
        refused.status, 503,
        "the third waiting request finds the line full"
    );
    assert!(refused.header("retry-after").is_some());
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "refused at once, not after a wait"
    );
    assert_eq!(busy.join().expect("busy").status, 200);
    for w in waiting {
        assert_eq!(
            w.join().expect("waiting").status,
            200,
            "the two in line were served"
        );
    }
    server.wait_for_log("the queue is full", Duration::from_secs(5));
}
