//! The pool sizing itself, against real php-cgi workers: boots staggered
//! during a burst, the memory budget (`--max-pool-memory`), its decisions
//! in `hearth status` and `/metrics`, and crash loops on requests.

mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use support::{fixture, Server};

const WAIT: Duration = Duration::from_secs(60);

fn admin_get(addr: SocketAddr, path: &str) -> support::Response {
    support::request(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
    )
}

/// `n` requests for `path` at once, each on its own connection.
fn burst(addr: SocketAddr, path: &str, n: usize) -> Vec<support::Response> {
    let raw = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let threads: Vec<_> = (0..n)
        .map(|_| {
            let raw = raw.clone();
            std::thread::spawn(move || support::request(addr, raw.as_bytes()))
        })
        .collect();
    threads
        .into_iter()
        .map(|t| t.join().expect("request"))
        .collect()
}

/// The value of the metric line that starts with `series ` (name and
/// labels), if `/metrics` has it.
fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn a_burst_boots_at_most_max_booting_workers_at_once() {
    let dir = support::tempdir();
    let socket = dir.path().join("control.sock");
    let server = Server::start(
        &fixture("app.php"),
        &[
            "--workers",
            "8",
            "--min-workers",
            "1",
            "--scale-down-after",
            "500ms",
            "--no-pipelining",
            "--admin",
            "127.0.0.1:0",
            "--control-socket",
            &socket.to_string_lossy(),
        ],
    );
    let admin = support::admin_addr(&server);
    let status = support::status_json(&socket);
    let bound = status["pool"]["max_booting"].as_u64().expect("max_booting");
    assert!(bound >= 1, "{status}");
    assert_eq!(status["pool"]["name"], "default");
    assert_eq!(status["pool"]["started_by_reason"]["min"], 1, "{status}");

    let responses = burst(server.addr, "/slow?ms=400", 24);
    assert!(
        responses.iter().all(|r| r.status == 200),
        "every request of the burst is served"
    );

    // The log tells each boot's start and end, in the order they happened
    // (a boot ends before its turn is given to the next).
    let log = server.log();
    let (mut in_flight, mut most, mut demand) = (0i64, 0i64, 0);
    for line in log.lines() {
        if line.contains("starting a worker") || line.contains("starting a replacement") {
            in_flight += 1;
            most = most.max(in_flight);
            demand +=
                usize::from(line.contains("reason=\"demand\"") || line.contains("reason=demand"));
        } else if line.contains("worker booted in") || line.contains("worker failed to boot") {
            in_flight -= 1;
        }
    }
    assert!(demand >= 2, "the burst started extra workers:\n{log}");
    assert!(
        most <= bound as i64,
        "{most} workers booted at once, more than {bound}:\n{log}"
    );
    let status = support::status_json(&socket);
    assert!(
        status["pool"]["started_by_reason"]["demand"].as_u64() >= Some(2),
        "{status}"
    );

    // Idle, the extra workers go, and say why.
    let status = support::eventually(WAIT, "the extra workers to scale down", || {
        let s = support::status_json(&socket);
        (s["pool"]["live"] == 1 && s["pool"]["retired_by_reason"]["scale_down"].as_u64() >= Some(2))
            .then_some(s)
    });
    assert_eq!(status["pool"]["state"], "serving", "{status}");
    let text = admin_get(admin, "/metrics").text();
    assert_eq!(
        metric(
            &text,
            "hearth_pool_workers_started_total{pool=\"default\",reason=\"min\"}"
        ),
        Some(1.0),
        "{text}"
    );
    assert!(
        metric(
            &text,
            "hearth_pool_workers_started_total{pool=\"default\",reason=\"demand\"}"
        ) >= Some(2.0),
        "{text}"
    );
    assert!(
        metric(
            &text,
            "hearth_pool_workers_retired_total{pool=\"default\",reason=\"scale_down\"}"
        ) >= Some(2.0),
        "{text}"
    );
    assert_eq!(
        metric(&text, "hearth_pool_workers_booting_max{pool=\"default\"}"),
        Some(bound as f64),
        "{text}"
    );
    assert!(
        server.log().contains("decision=\"retired\"") || server.log().contains("decision=retired")
    );
    // The table says it too.
    let table = support::ctl(&["status", "--control-socket", &socket.to_string_lossy()]);
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(table.contains("started by reason: "), "{table}");
    assert!(table.contains("scale_down "), "{table}");
}

#[test]
fn the_memory_budget_refuses_an_extra_worker_and_requests_wait() {
    let dir = support::tempdir();
    let socket = dir.path().join("control.sock");
    // One worker alone is over 1 MiB: the budget lets no extra one start,
    // while the one min_workers asks for runs anyway.
    let server = Server::start(
        &fixture("app.php"),
        &[
            "--workers",
            "4",
            "--min-workers",
            "1",
            "--max-pool-memory",
            "1M",
            "--no-pipelining",
            "--admin",
            "127.0.0.1:0",
            "--control-socket",
            &socket.to_string_lossy(),
        ],
    );
    let admin = support::admin_addr(&server);
    let responses = burst(server.addr, "/slow?ms=200", 4);
    assert!(
        responses.iter().all(|r| r.status == 200),
        "requests wait for the busy worker instead"
    );
    let pids: std::collections::HashSet<_> =
        responses.iter().map(|r| r.json()["pid"].clone()).collect();
    assert_eq!(pids.len(), 1, "one worker served them all: {pids:?}");
    let status = support::status_json(&socket);
    let pool = &status["pool"];
    assert!(pool["refused"]["memory"].as_u64() >= Some(1), "{status}");
    assert_eq!(pool["started_by_reason"]["demand"], 0, "{status}");
    assert_eq!(pool["max_pool_memory"], 1 << 20, "{status}");
    assert!(pool["memory"].as_u64() > Some(1 << 20), "{status}");
    // The dashboard's /api/status carries the same report.
    let api = admin_get(admin, "/api/status").json();
    assert!(
        api["status"]["pool"]["refused"]["memory"].as_u64() >= Some(1),
        "{api}"
    );
    let text = admin_get(admin, "/metrics").text();
    assert!(
        metric(
            &text,
            "hearth_pool_workers_refused_total{pool=\"default\",reason=\"memory\"}"
        ) >= Some(1.0),
        "{text}"
    );
    assert_eq!(
        metric(&text, "hearth_pool_memory_limit_bytes{pool=\"default\"}"),
        Some(1048576.0),
        "{text}"
    );
    assert!(
        server.log().contains("not starting an extra worker"),
        "{}",
        server.log()
    );
}

#[test]
fn a_bad_max_pool_memory_names_the_option() {
    let out = support::ctl(&["serve", "--max-pool-memory", "lots", "/nonexistent.php"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("max-pool-memory"), "{err}");
    let out = support::ctl(&["serve", "--max-booting", "0", "/nonexistent.php"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("max_booting") || err.contains("max-booting"),
        "{err}"
    );
}

fn write_script(path: &Path, request: &str) {
    let autoload = support::root().join("php/autoload.php");
    std::fs::write(
        path,
        format!(
            "<?php\ndeclare(strict_types=1);\nrequire {autoload:?};\n\
             Hearth\\Worker::serve(static function (): void {{\n{request}\n}});\n"
        ),
    )
    .expect("write the script");
}

#[test]
fn workers_dying_on_requests_give_503_until_a_fixed_deploy_is_reloaded() {
    let dir = support::tempdir();
    let socket = dir.path().join("control.sock");
    let script = dir.path().join("worker.php");
    // A broken deploy: it boots, then every request ends the worker.
    write_script(&script, "echo 'broken'; exit(1);");
    let server = Server::start(
        &script,
        &[
            "--workers",
            "2",
            "--admin",
            "127.0.0.1:0",
            "--control-socket",
            &socket.to_string_lossy(),
        ],
    );
    let admin = support::admin_addr(&server);
    let refused = support::eventually(WAIT, "a 503 for a crash loop", || {
        let r = server.get("/");
        (r.status == 503).then_some(r)
    });
    assert_eq!(
        refused.header("retry-after"),
        Some("1"),
        "{:?}",
        refused.headers
    );
    // A load balancer is told to send requests elsewhere.
    let ready = admin_get(admin, "/readyz");
    assert_eq!(ready.status, 503, "{}", ready.text());
    assert!(
        ready
            .text()
            .starts_with("not ready: workers are dying on requests (")
            && ready.text().contains("exit status 1"),
        "{}",
        ready.text()
    );
    let status = support::status_json(&socket);
    let pool = &status["pool"];
    assert_eq!(pool["state"], "failing", "{status}");
    let failing = &pool["failing_state"];
    assert_eq!(failing["cause"], "requests", "{status}");
    assert!(
        failing["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("died on a request") && e.contains("exit status 1")),
        "{status}"
    );
    assert!(failing["next_attempt"].as_f64().is_some(), "{status}");
    assert!(failing["attempts"].as_u64() >= Some(3), "{status}");
    assert!(pool["request_crashes"].as_u64() >= Some(3), "{status}");
    let text = admin_get(admin, "/metrics").text();
    assert_eq!(
        metric(
            &text,
            "hearth_pool_failing{pool=\"default\",cause=\"requests\"}"
        ),
        Some(1.0),
        "{text}"
    );
    assert!(
        metric(&text, "hearth_pool_request_crashes_total{pool=\"default\"}") >= Some(3.0),
        "{text}"
    );
    assert!(metric(&text, "hearth_pool_next_attempt_seconds{pool=\"default\"}").is_some());
    assert_eq!(
        metric(&text, "hearth_pool_ready{pool=\"default\"}"),
        Some(0.0),
        "{text}"
    );
    let table = support::ctl(&["status", "--control-socket", &socket.to_string_lossy()]);
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(table.contains("FAILING (requests)"), "{table}");
    assert!(
        server.log().contains("workers are dying on requests"),
        "{}",
        server.log()
    );

    // The fix is deployed and reloaded: the pool serves again by itself.
    write_script(&script, "echo 'fixed';");
    let out = support::ctl(&["reload", "--control-socket", &socket.to_string_lossy()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Ready at once, before any request: the load balancer sends the one
    // that tries the new code.
    let ready = admin_get(admin, "/readyz");
    assert_eq!(ready.status, 200, "{}", ready.text());
    let served = support::eventually(WAIT, "a request served after the reload", || {
        let r = server.get("/");
        (r.status == 200).then_some(r)
    });
    assert_eq!(served.text(), "fixed");
    let status = support::status_json(&socket);
    assert_eq!(status["pool"]["state"], "serving", "{status}");
    assert!(status["pool"]["failing_state"].is_null(), "{status}");
    let text = admin_get(admin, "/metrics").text();
    assert_eq!(
        metric(
            &text,
            "hearth_pool_failing{pool=\"default\",cause=\"requests\"}"
        ),
        Some(0.0),
        "{text}"
    );
    for _ in 0..5 {
        assert_eq!(server.get("/").status, 200);
    }
    assert_eq!(
        metric(
            &admin_get(admin, "/metrics").text(),
            "hearth_pool_ready{pool=\"default\"}"
        ),
        Some(1.0)
    );
}

#[test]
fn a_crash_loop_no_request_tries_turns_ready_again_to_let_one_try() {
    let dir = support::tempdir();
    let script = dir.path().join("worker.php");
    write_script(&script, "echo 'broken'; exit(1);");
    let server = Server::start(&script, &["--workers", "1", "--admin", "127.0.0.1:0"]);
    let admin = support::admin_addr(&server);
    support::eventually(WAIT, "a 503 for a crash loop", || {
        (server.get("/").status == 503).then_some(())
    });
    // No request comes meanwhile (a load balancer took the server out):
    // not ready while workers died on requests lately...
    let quiet = std::time::Instant::now();
    assert_eq!(admin_get(admin, "/readyz").status, 503);
    std::thread::sleep(Duration::from_secs(10));
    let ready = admin_get(admin, "/readyz");
    assert_eq!(ready.status, 503, "{}", ready.text());
    // ...then ready again, so that a load balancer sends the request that
    // tries (the cause may have gone: a database back up).
    let ready = support::eventually(WAIT, "/readyz ready again", || {
        let r = admin_get(admin, "/readyz");
        (r.status == 200).then_some(r)
    });
    let waited = quiet.elapsed();
    assert!(ready.text().starts_with("ready: "), "{}", ready.text());
    assert!(
        waited >= Duration::from_secs(20),
        "ready again after {waited:?} only"
    );
    eprintln!("ready again {waited:?} after the last request");
    // The request that tries kills its worker too (its response may be
    // complete first): not ready again once the worker's end is seen.
    server.get("/");
    let ready = support::eventually(WAIT, "/readyz not ready again", || {
        let r = admin_get(admin, "/readyz");
        (r.status == 503).then_some(r)
    });
    assert!(
        ready
            .text()
            .starts_with("not ready: workers are dying on requests"),
        "{}",
        ready.text()
    );
}

#[test]
fn workers_dying_on_most_requests_but_never_3_in_a_row_are_a_crash_loop() {
    let dir = support::tempdir();
    let socket = dir.path().join("control.sock");
    let script = dir.path().join("worker.php");
    // One route of three works; the other two end the worker.
    write_script(
        &script,
        "if (str_starts_with($_SERVER['REQUEST_URI'], '/broken')) { exit(1); } echo 'ok';",
    );
    let server = Server::start(
        &script,
        &[
            "--workers",
            "1",
            "--control-socket",
            &socket.to_string_lossy(),
        ],
    );
    // In order: two that kill their worker, then one served, so never
    // three deaths in a row. The client waits for each response, and each
    // worker dies after its response has gone, so the requests after a
    // death wait for its replacement, which the crash loop's backoff
    // delays: the loop shows in the log, the status and 503s.
    let mut seen_failing = false;
    let mut refused = 0;
    for _ in 0..10 {
        for path in ["/broken/a", "/broken/b", "/fine"] {
            match server.get(path).status {
                503 => refused += 1,
                status => assert_eq!(status, 200, "{}", server.log()),
            }
            let status = support::status_json(&socket);
            if status["pool"]["failing_state"]["cause"] == "requests" {
                seen_failing = true;
            }
        }
        if seen_failing {
            break;
        }
    }
    let log = server.log();
    assert!(
        log.contains("workers are dying on requests (") && log.contains(" of the last "),
        "workers dying on 2 requests of 3 were never a crash loop:\n{log}"
    );
    assert!(
        !log.contains(" in a row, the last"),
        "it was called 3 in a row:\n{log}"
    );
    assert!(seen_failing, "the status never said failing:\n{log}");
    eprintln!("{refused} requests refused with 503");
    // A fixed deploy, reloaded: served again.
    write_script(&script, "echo 'ok';");
    let reload = support::ctl(&["reload", "--control-socket", &socket.to_string_lossy()]);
    assert!(reload.status.success(), "{reload:?}");
    support::eventually(WAIT, "served again after the fix", || {
        (server.get("/broken/a").status == 200).then_some(())
    });
    for path in ["/broken/a", "/broken/b", "/fine"] {
        assert_eq!(server.get(path).status, 200);
    }
}

#[test]
fn workers_that_exit_with_status_0_after_each_request_are_not_a_crash_loop() {
    let dir = support::tempdir();
    let socket = dir.path().join("control.sock");
    let script = dir.path().join("worker.php");
    // Legacy code that ends every request with a plain `exit`.
    write_script(&script, "echo 'done'; exit;");
    let server = Server::start(
        &script,
        &[
            "--workers",
            "2",
            "--control-socket",
            &socket.to_string_lossy(),
        ],
    );
    for _ in 0..8 {
        let r = server.get("/");
        assert_eq!(r.status, 200, "{}", server.log());
        assert_eq!(r.text(), "done");
    }
    let status = support::status_json(&socket);
    assert_eq!(status["pool"]["state"], "serving", "{status}");
    assert_eq!(status["pool"]["request_crashes"], 0, "{status}");
}

#[test]
fn a_script_broken_after_start_shows_as_failing_to_boot() {
    let dir = support::tempdir();
    let socket = dir.path().join("control.sock");
    let script = dir.path().join("worker.php");
    write_script(&script, "echo getmypid();");
    let server = Server::start(
        &script,
        &[
            "--workers",
            "1",
            "--admin",
            "127.0.0.1:0",
            "--control-socket",
            &socket.to_string_lossy(),
        ],
    );
    let admin = support::admin_addr(&server);
    let pid = server.get("/").text();
    // Broken in place, and the worker gone: its replacements fail to boot.
    std::fs::write(&script, "<?php\necho 'no database';\nexit(3);\n").expect("write");
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let status = support::eventually(WAIT, "the pool failing to boot", || {
        let s = support::status_json(&socket);
        s["pool"]["failing_state"].is_object().then_some(s)
    });
    let failing = &status["pool"]["failing_state"];
    assert_eq!(status["pool"]["state"], "failing", "{status}");
    assert_eq!(failing["cause"], "boot", "{status}");
    assert!(
        failing["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("no database")),
        "{status}"
    );
    assert!(failing["attempts"].as_u64() >= Some(1), "{status}");
    assert!(failing["next_attempt"].as_f64().is_some(), "{status}");
    let text = admin_get(admin, "/metrics").text();
    assert_eq!(
        metric(
            &text,
            "hearth_pool_failing{pool=\"default\",cause=\"boot\"}"
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        status["pool"]["request_crashes"], 0,
        "killed while idle, not on a request: {status}"
    );
    let refused = server.get("/");
    assert_eq!(refused.status, 503);
    assert_eq!(refused.header("retry-after"), Some("1"));
    let ready = admin_get(admin, "/readyz");
    assert_eq!(ready.status, 503);
    assert!(
        ready
            .text()
            .starts_with("not ready: workers are failing to boot: ")
            && ready.text().contains("no database"),
        "{}",
        ready.text()
    );
}

#[test]
fn a_fatal_error_on_every_request_is_a_crash_loop_that_names_the_error() {
    let dir = support::tempdir();
    let socket = dir.path().join("control.sock");
    let script = dir.path().join("worker.php");
    write_script(
        &script,
        "trigger_error('the schema of a broken deploy', E_USER_ERROR);",
    );
    let server = Server::start(
        &script,
        &[
            "--workers",
            "2",
            "--control-socket",
            &socket.to_string_lossy(),
        ],
    );
    let refused = support::eventually(WAIT, "a 503 for a crash loop", || {
        let r = server.get("/");
        (r.status == 503).then_some(r)
    });
    assert!(refused.header("retry-after").is_some());
    let status = support::status_json(&socket);
    let failing = &status["pool"]["failing_state"];
    assert_eq!(failing["cause"], "requests", "{status}");
    let error = failing["last_error"].as_str().unwrap_or_default();
    assert!(
        error.contains("died on a request") && error.contains("the schema of a broken deploy"),
        "{status}"
    );
}
