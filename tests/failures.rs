//! Failure paths: each one ends with a clear answer and nothing lost.

#[path = "support/mod.rs"]
mod support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use support::{eventually, fixture, Connection, Req, Server};

#[test]
fn a_client_that_goes_away_mid_request_does_not_cost_a_worker() {
    let server = Server::start(&fixture("app.php"), &["--workers", "1"]);
    let pid = server.get("/pid").json()["pid"].clone();
    let dir = support::tempdir();
    let mark = dir.path().join("started");
    {
        let mut conn = Connection::open(server.addr);
        conn.send(
            format!(
                "GET /slow?ms=300&mark={} HTTP/1.1\r\nHost: x\r\n\r\n",
                mark.display()
            )
            .as_bytes(),
        );
        eventually(
            Duration::from_secs(10),
            "the worker to start the request",
            || mark.exists().then_some(()),
        );
        // Dropped here: the worker is busy with a request nobody waits for.
    }
    let r = server.get("/slow?ms=1").json();
    assert_eq!(
        r["pid"], pid,
        "the worker finished the abandoned request and went back to the pool"
    );
    assert!(
        r["served"].as_u64().expect("served") >= 3,
        "the abandoned request ran to completion: {r}"
    );
}

#[test]
fn a_worker_killed_while_idle_is_not_noticed_by_clients() {
    let server = Server::start(&fixture("app.php"), &["--workers", "1"]);
    let pid = server.get("/pid").json()["pid"].as_u64().expect("pid");
    assert!(Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .expect("kill")
        .success());
    // Once the process is gone (it may not be reaped yet), no request may
    // be handed to it. (While the kernel is still tearing it down, a request
    // can reach it and gets a 502, like any request a dying worker has.)
    let gone = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| s.contains(") Z "))
    };
    eventually(
        Duration::from_secs(5),
        "the worker process to be gone",
        || gone().then_some(()),
    );
    let r = server.get("/pid");
    assert_eq!(
        r.status,
        200,
        "the request waits for the replacement instead of failing: {}",
        r.text()
    );
    assert_ne!(r.json()["pid"].as_u64(), Some(pid));
}

#[test]
fn a_worker_that_corrupts_its_channel_fails_that_request_and_is_replaced() {
    let server = Server::start(&fixture("app.php"), &["--workers", "1"]);
    let pid = server.get("/pid").json()["pid"].clone();
    let r = server.get("/corrupt");
    assert_eq!(r.status, 502);
    server.wait_for_log("protocol", Duration::from_secs(5));
    let next = server.serving_pid();
    assert_ne!(next, pid);
}

/// `hearth serve SCRIPT --workers 1 EXTRA...` to its end (it must end by
/// itself): its exit code and what it logged.
fn serve_to_the_end(script: &Path, extra: &[&str]) -> (Option<i32>, String) {
    let dir = support::tempdir();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hearth"));
    cmd.arg("serve")
        .arg(script)
        // Its own: the default one is named after the port, which a server
        // started next may get as soon as this one closes it.
        .arg("--control-socket")
        .arg(dir.path().join("control.sock"))
        .args(["--listen", "127.0.0.1:0", "--workers", "1", "--php"])
        .arg(support::php_binary())
        .args(extra)
        .args(support::as_root())
        .env("NO_COLOR", "1")
        .env_remove("RUST_LOG")
        .env_remove("HEARTH_LOG");
    let out = support::output_within(&mut cmd, Duration::from_secs(60));
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The log up to the line `hearth serve` exits with.
fn before_the_end(log: &str) -> &str {
    log.split("\nhearth: ").next().unwrap_or(log)
}

#[test]
fn a_script_that_never_calls_serve_stops_hearth_at_start_saying_what_to_do() {
    let dir = support::tempdir();
    let script = dir.path().join("index.php");
    std::fs::write(&script, "<?php\necho 'hello from a plain script';\n").expect("write");
    let (code, log) = serve_to_the_end(&script, &["-d", "expose_php=1"]);
    assert_eq!(code, Some(1), "{log}");
    let reason = log.split("\nhearth: ").nth(1).unwrap_or_default();
    assert!(
        reason.contains("index.php exited without calling Hearth\\Worker::serve()")
            && reason.contains("It printed \"hello from a plain script\"")
            && reason.contains("docs/getting-started.md"),
        "hearth's last words say what is wrong and what to do:\n{log}"
    );
    let attempts = log.matches("worker failed to boot (attempt").count();
    assert_eq!(attempts, 3, "a few attempts, then it stops:\n{log}");
    assert!(
        log.contains("0 of 1 worker ready; 1 failing to boot"),
        "{log}"
    );
    assert!(
        !log.contains(" serving "),
        "never announced as serving:\n{log}"
    );
    for header in ["Content-type", "X-Powered-By"] {
        assert!(
            !log.contains(header),
            "php-cgi's {header} is left out:\n{log}"
        );
    }
}

#[test]
fn a_syntax_error_at_boot_is_logged_once_per_attempt() {
    let dir = support::tempdir();
    let script = dir.path().join("worker.php");
    std::fs::write(&script, "<?php\nfunction (\n").expect("write");
    let (code, log) = serve_to_the_end(&script, &["-d", "expose_php=1"]);
    assert_eq!(code, Some(1), "{log}");
    let attempts = before_the_end(&log);
    assert_eq!(
        attempts.matches("worker failed to boot").count(),
        3,
        "{log}"
    );
    assert_eq!(
        attempts.matches("PHP Parse error").count(),
        3,
        "the parse error once per attempt, inside its record:\n{log}"
    );
    let reason = log.split("\nhearth: ").nth(1).unwrap_or_default();
    assert!(
        reason.contains("PHP Parse error"),
        "the reason hearth stops:\n{log}"
    );
    for noise in ["Content-type", "X-Powered-By", "Status: 500"] {
        assert!(
            !log.contains(noise),
            "php-cgi's header {noise:?} is left out:\n{log}"
        );
    }
}

#[test]
fn a_boot_that_hangs_is_timed_out_and_reported() {
    let (code, log) = serve_to_the_end(&fixture("hang-at-boot.php"), &["--boot-timeout", "300ms"]);
    assert_eq!(code, Some(1), "{log}");
    assert_eq!(
        before_the_end(&log)
            .matches("no ready handshake within 300ms")
            .count(),
        3,
        "{log}"
    );
}

#[test]
fn a_script_broken_after_start_gets_503_and_retries_until_fixed() {
    let dir = support::tempdir();
    let script = dir.path().join("worker.php");
    let autoload = support::root().join("php/autoload.php");
    let good = |text: &str| {
        format!(
            "<?php\nrequire '{}';\nHearth\\Worker::serve(function () {{ echo '{text} ', getmypid(); }});\n",
            autoload.display()
        )
    };
    std::fs::write(&script, good("v1")).expect("write");
    let server = Server::start(&script, &["--workers", "1"]);
    assert!(
        server.log().contains("1 of 1 worker ready"),
        "{}",
        server.log()
    );
    let pid = server
        .get("/")
        .text()
        .split(' ')
        .nth(1)
        .expect("pid")
        .to_owned();

    // Broken in place, and the worker gone: its replacements fail to boot.
    std::fs::write(
        &script,
        "<?php\nthrow new LogicException('config missing: DATABASE_URL');\n",
    )
    .expect("write");
    assert!(Command::new("kill")
        .args(["-KILL", &pid])
        .status()
        .expect("kill")
        .success());
    server.wait_for_log(
        "0 of 1 worker ready; 1 failing to boot",
        Duration::from_secs(10),
    );
    assert!(
        server.log().contains("config missing: DATABASE_URL"),
        "the boot error is logged:\n{}",
        server.log()
    );
    let r = server.get("/");
    assert_eq!(r.status, 503);
    assert_eq!(r.header("retry-after"), Some("1"));
    // Past the attempts a start gets, it keeps trying: it had started.
    server.wait_for_log("worker failed to boot (attempt 4", Duration::from_secs(20));

    std::fs::write(&script, good("fixed")).expect("fix");
    server.wait_for_ready_lines(2);
    assert!(server.get("/").text().starts_with("fixed "));
}

#[test]
fn requests_that_wait_too_long_for_a_worker_get_503() {
    let server = Server::start(
        &fixture("app.php"),
        &["--workers", "1", "--queue-timeout", "200ms"],
    );
    let dir = support::tempdir();
    let mark = dir.path().join("started");
    let addr = server.addr;
    let path = format!("/slow?ms=2000&mark={}", mark.display());
    let slow = std::thread::spawn(move || Req::new("GET", &path).send(addr));
    eventually(
        Duration::from_secs(10),
        "the slow request to hold the only worker",
        || mark.exists().then_some(()),
    );
    let r = server.get("/pid");
    assert_eq!(r.status, 503);
    assert_eq!(r.header("retry-after"), Some("1"));
    assert_eq!(
        slow.join().expect("slow request").status,
        200,
        "the busy worker's request is unaffected"
    );
}

#[test]
fn output_while_booting_goes_to_the_log_not_to_clients() {
    let server = Server::start(&fixture("noisy-boot.php"), &["--workers", "1"]);
    let r = server.get("/");
    assert_eq!(r.text(), "clean");
    let log = server.log();
    assert!(log.contains("stray output while booting"), "{log}");
    assert!(log.contains("a message on stderr"), "{log}");
    assert!(
        log.lines()
            .any(|l| l.contains("a message on stderr") && l.contains("pid=")),
        "lines are tagged with the worker pid:\n{log}"
    );
}

#[test]
fn malformed_http_gets_400() {
    let server = Server::start(&fixture("app.php"), &["--workers", "1"]);
    let r = support::request(server.addr, b"GARBAGE\r\n\r\n");
    assert_eq!(r.status, 400);
    let r = support::request(
        server.addr,
        b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
    );
    assert_eq!(r.status, 400, "conflicting Content-Length headers");
    assert_eq!(server.get("/pid").status, 200);
}

fn hearth(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_hearth"))
        .args(args)
        .args(if args.first() == Some(&"serve") {
            support::as_root()
        } else {
            Vec::new()
        })
        .env("NO_COLOR", "1")
        .output()
        .expect("run hearth")
}

#[test]
fn a_missing_script_is_a_clear_startup_error() {
    let out = hearth(&[
        "serve",
        "/nonexistent/worker.php",
        "--listen",
        "127.0.0.1:0",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/worker.php"), "{err}");
}

#[test]
fn a_missing_php_binary_is_a_clear_startup_error() {
    let script = fixture("app.php");
    let out = hearth(&[
        "serve",
        script.to_str().expect("path"),
        "--listen",
        "127.0.0.1:0",
        "--php",
        "/nonexistent/php-cgi",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/php-cgi"), "{err}");
}

#[test]
fn a_bad_config_value_names_the_file_and_the_field() {
    let dir = support::tempdir();
    let config = dir.path().join("hearth.toml");
    std::fs::write(
        &config,
        "[serve]\nlisten = \"127.0.0.1:0\"\nworkers = \"lots\"\n",
    )
    .expect("write");
    let out = hearth(&["serve", "--config", config.to_str().expect("path")]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("hearth.toml: [serve] workers: ") && err.contains("line 3"),
        "{err}"
    );

    std::fs::write(&config, "[serve]\nmax_body_size = \"8 parsecs\"\n").expect("write");
    let err = String::from_utf8_lossy(
        &hearth(&["serve", "--config", config.to_str().expect("path")]).stderr,
    )
    .into_owned();
    assert!(
        err.contains("hearth.toml: [serve] max_body_size: "),
        "{err}"
    );
}

/// Issue 8: a value out of range, or values that contradict each other,
/// stop Hearth from starting (status 1), and the error names the flag the
/// value came from, or the file, the section and the key.
#[test]
fn a_refused_value_names_the_flag_or_the_key_it_came_from() {
    let out = hearth(&["serve", "--workers", "0", "--listen", "127.0.0.1:0"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("hearth: --workers: must be at least 1"),
        "{err}"
    );

    let dir = support::tempdir();
    let config = dir.path().join("hearth.toml");
    std::fs::write(&config, "[serve]\nworkers = 2\nmin_workers = 3\n").expect("write");
    let config = config.to_str().expect("path");
    let out = hearth(&["serve", "--config", config]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "hearth: {config}: [serve] min_workers: must be between 1 and workers (2), not 3"
        )),
        "{err}"
    );
    // The file's value, overridden by a flag, is the flag's error.
    let out = hearth(&["serve", "--config", config, "--min-workers", "4"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("hearth: --min-workers: must be between 1 and workers (2), not 4"),
        "{err}"
    );

    // Unknown keys are refused in every section, by either command.
    std::fs::write(dir.path().join("hearth.toml"), "[run]\njbos = 2\n").expect("write");
    let out = hearth(&["serve", "--config", config]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{config}: [run] jbos: unknown key")),
        "{err}"
    );
}

#[test]
fn a_config_file_sets_the_same_options_as_flags() {
    let dir = support::tempdir();
    let config = dir.path().join("hearth.toml");
    std::fs::write(
        &config,
        format!(
            "[serve]\nscript = \"{}\"\nworkers = 1\nserver_name = \"app.example\"\n[serve.ini]\nprecision = \"5\"\n[serve.env]\nAPP_ENV = \"staging\"\n",
            fixture("app.php").display()
        ),
    )
    .expect("write");
    let server = Server::spawn_args(&[
        "serve".into(),
        "--config".into(),
        config.to_string_lossy().into_owned(),
        "--listen".into(),
        "127.0.0.1:0".into(),
    ]);
    server.wait_until_ready();
    let env = server.get("/env").json();
    assert_eq!(env["server"]["SERVER_NAME"], "app.example");
    assert_eq!(env["server"]["APP_ENV"], "staging");
}

#[test]
fn shutdown_escalates_from_stop_message_to_sigkill_for_a_stuck_request() {
    let mut server = Server::start(
        &fixture("app.php"),
        &[
            "--workers",
            "1",
            "--grace-period",
            "300ms",
            "--stop-timeout",
            "300ms",
        ],
    );
    let dir = support::tempdir();
    let pidfile = dir.path().join("pid");
    let addr = server.addr;
    let path = format!("/sleep?pidfile={}", pidfile.display());
    let stuck = std::thread::spawn(move || {
        let mut conn = Connection::open(addr);
        conn.send(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes());
        conn.is_closed()
    });
    let pid = eventually(
        Duration::from_secs(10),
        "the stuck request to start",
        || {
            std::fs::read_to_string(&pidfile)
                .ok()
                .filter(|p| !p.is_empty())
        },
    );
    server.signal("TERM");
    assert_eq!(server.wait_exit(Duration::from_secs(20)), Some(0));
    let log = server.log();
    assert!(
        log.contains("grace period of"),
        "the grace period ran out:\n{log}"
    );
    assert!(
        log.contains("sending SIGTERM"),
        "the worker got SIGTERM after the stop timeout:\n{log}"
    );
    let alive = Command::new("kill")
        .args(["-0", pid.trim()])
        .status()
        .expect("kill -0")
        .success();
    assert!(!alive, "the stuck worker {pid} is gone");
    assert!(
        stuck.join().expect("client"),
        "after the grace period the stuck request's connection is closed"
    );
    assert!(log.contains("closing their connections"), "{log}");
}

#[test]
fn with_open_basedir_workers_serve_as_without() {
    let root = support::root();
    let basedir = format!("{}:/tmp:/var/lib/php/sessions", root.display());
    let server = Server::start(
        &fixture("app.php"),
        &["--workers", "1", "-d", &format!("open_basedir={basedir}")],
    );
    let env = server.get("/env?x=1").json();
    assert_eq!(env["get"]["x"], "1");
    let r = Req::new("POST", "/echo")
        .header("Content-Type", "text/plain")
        .body(vec![b'x'; 300_000])
        .send(server.addr);
    assert_eq!(r.json()["length"], 300_000);
    assert_eq!(
        server.get("/corrupt").status,
        502,
        "protocol errors are caught with open_basedir too"
    );
}
