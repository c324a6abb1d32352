//! Observability against real php-cgi workers: the control socket with
//! `hearth status`, `reload` and `stop`; `/metrics`, `/healthz` and
//! `/readyz` on the admin listener (and never on the public port); the
//! access log in both formats.

#[path = "support/mod.rs"]
mod support;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::os::unix::fs::{FileTypeExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use support::{eventually, fixture, Server};

/// Runs `hearth ARGS...` to completion.
fn hearth(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hearth"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("run hearth")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn status_table(socket: &Path) -> String {
    let out = hearth(&["status", "--control-socket", &socket.to_string_lossy()]);
    assert!(
        out.status.success(),
        "hearth status failed: {}",
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// The rows of the worker table: (pid, state, request column).
fn worker_rows(table: &str) -> Vec<(u64, String, String)> {
    table
        .lines()
        .skip_while(|l| !l.starts_with("SLOT"))
        .skip(1)
        // An empty line ends the table (the routes' table may follow).
        .take_while(|l| !l.is_empty())
        .map(|l| {
            let cells: Vec<&str> = l.split_whitespace().collect();
            // SLOT PID STATE REQUESTS MEMORY(2 words) AGE REQUEST...
            (
                cells[1].parse().expect("pid"),
                cells[2].to_owned(),
                cells[7..].join(" "),
            )
        })
        .collect()
}

/// A request on its own thread.
fn in_background(addr: SocketAddr, path: &str) -> std::thread::JoinHandle<support::Response> {
    let raw = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    std::thread::spawn(move || support::request(addr, raw.as_bytes()))
}

fn admin_get(addr: SocketAddr, path: &str) -> support::Response {
    support::request(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
    )
}

fn socket_in(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("control.sock")
}

#[test]
fn status_shows_each_worker_and_the_request_a_busy_one_runs() {
    let dir = support::tempdir();
    let socket = socket_in(&dir);
    let server = Server::start(
        &fixture("app.php"),
        &[
            "--workers",
            "2",
            "--control-socket",
            &socket.to_string_lossy(),
        ],
    );
    let meta = std::fs::metadata(&socket).expect("control socket");
    assert!(meta.file_type().is_socket());
    assert_eq!(
        meta.permissions().mode() & 0o777,
        0o600,
        "control socket mode"
    );

    // Two requests at once reach both workers: their pids.
    let pids: HashSet<u64> = eventually(Duration::from_secs(10), "both workers", || {
        let both = [
            in_background(server.addr, "/slow?ms=300"),
            in_background(server.addr, "/slow?ms=300"),
        ];
        let pids: HashSet<u64> = both
            .into_iter()
            .map(|t| {
                t.join().expect("request").json()["pid"]
                    .as_u64()
                    .expect("pid")
            })
            .collect();
        (pids.len() == 2).then_some(pids)
    });
    let table = status_table(&socket);
    assert!(table.contains("workers: 2 live"), "{table}");
    let rows = worker_rows(&table);
    let listed: HashSet<u64> = rows.iter().map(|r| r.0).collect();
    assert_eq!(listed, pids, "{table}");
    assert!(rows.iter().all(|r| r.1 == "idle" && r.2 == "-"), "{table}");

    let slow = in_background(server.addr, "/slow?ms=3000&tag=status");
    let busy = eventually(
        Duration::from_secs(5),
        "a busy worker in the status",
        || {
            let table = status_table(&socket);
            worker_rows(&table)
                .into_iter()
                .find(|r| r.1 == "busy")
                .map(|r| (r, table))
        },
    );
    let ((pid, _, request), table) = busy;
    assert!(
        request.starts_with("GET /slow?ms=3000&tag=status ("),
        "the busy row shows the request: {table}"
    );
    assert!(table.contains("1 busy, 1 idle"), "{table}");
    let answered = slow.join().expect("slow request");
    assert_eq!(answered.json()["pid"].as_u64(), Some(pid), "{table}");
    // Once the request ends, its worker is idle again.
    let table = status_table(&socket);
    assert!(
        worker_rows(&table)
            .iter()
            .all(|r| r.1 == "idle" && r.2 == "-"),
        "{table}"
    );
}

#[test]
fn status_finds_the_default_socket_from_the_listen_address() {
    let mut server = Server::start(&fixture("app.php"), &["--workers", "1"]);
    let addr = server.addr.to_string();
    let out = hearth(&["status", "--listen", &addr, "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON status");
    assert_eq!(status["listen"], addr.as_str());
    assert_eq!(status["pid"].as_u64(), Some(u64::from(server.pid())));
    assert_eq!(status["pool"]["live"], 1);
    let pid = server.serving_pid();
    assert_eq!(status["workers"][0]["pid"], pid);
    let path = server
        .log()
        .split("control socket at ")
        .nth(1)
        .and_then(|rest| rest.lines().next())
        .map(PathBuf::from)
        .expect("socket path in the log");
    assert!(path.exists());
    server.signal("TERM");
    assert_eq!(server.wait_exit(Duration::from_secs(20)), Some(0));
    assert!(!path.exists(), "the control socket is removed on exit");
}

#[test]
fn a_stale_socket_is_replaced_and_a_live_one_refused() {
    let dir = support::tempdir();
    let socket = socket_in(&dir);
    // A socket nobody listens on any more, as a killed hearth leaves.
    drop(std::os::unix::net::UnixListener::bind(&socket).expect("bind"));
    assert!(socket.exists());
    let first = Server::start(
        &fixture("app.php"),
        &[
            "--workers",
            "1",
            "--control-socket",
            &socket.to_string_lossy(),
        ],
    );
    assert!(status_table(&socket).contains("workers: 1 live"));

    let mut args: Vec<String> = [
        "serve",
        &fixture("app.php").to_string_lossy(),
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "1",
        "--php",
        &support::php_binary(),
        "--control-socket",
        &socket.to_string_lossy(),
    ]
    .map(String::from)
    .to_vec();
    args.extend(support::as_root());
    let second = Command::new(env!("CARGO_BIN_EXE_hearth"))
        .args(&args)
        .env("NO_COLOR", "1")
        .output()
        .expect("second hearth");
    assert_eq!(second.status.code(), Some(1));
    let err = text(&second.stderr);
    assert!(
        err.contains("another hearth serve is running there"),
        "{err}"
    );
    // The first one still answers on its socket.
    assert!(status_table(&socket).contains("workers: 1 live"));
    drop(first);
}

/// A worker script answering with its version.
fn versioned_app(version: &str) -> String {
    format!(
        "<?php\nrequire {:?};\nHearth\\Worker::serve(function () {{ echo {version:?}; }});\n",
        support::root()
            .join("php/autoload.php")
            .display()
            .to_string(),
    )
}

#[test]
fn reload_replaces_the_workers_and_reports_a_broken_reload() {
    let dir = support::tempdir();
    let script = dir.path().join("worker.php");
    std::fs::write(&script, versioned_app("v1")).expect("write");
    let socket = socket_in(&dir);
    let sock = socket.to_string_lossy().into_owned();
    let server = Server::start(&script, &["--workers", "2", "--control-socket", &sock]);
    assert_eq!(server.get("/").text(), "v1");

    std::fs::write(&script, versioned_app("v2")).expect("write");
    let out = hearth(&["reload", "--control-socket", &sock]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("reloaded"),
        "{}",
        text(&out.stdout)
    );
    for _ in 0..4 {
        assert_eq!(
            server.get("/").text(),
            "v2",
            "every worker runs the new code"
        );
    }
    let status = hearth(&["status", "--control-socket", &sock, "--json"]);
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).expect("JSON");
    assert_eq!(status["pool"]["restarts_by_reason"]["reload"], 2);

    std::fs::write(
        &script,
        "<?php\nthrow new RuntimeException('the new code cannot boot');\n",
    )
    .expect("write");
    let out = hearth(&["reload", "--control-socket", &sock]);
    assert_eq!(out.status.code(), Some(1), "a failed reload exits 1");
    let err = text(&out.stderr);
    assert!(err.contains("reload failed"), "{err}");
    assert!(err.contains("the new code cannot boot"), "{err}");
    assert_eq!(server.get("/").text(), "v2", "the old workers keep serving");
}

#[test]
fn stop_shuts_down_gracefully_while_a_request_completes() {
    let dir = support::tempdir();
    let socket = socket_in(&dir);
    let sock = socket.to_string_lossy().into_owned();
    let mut server = Server::start(
        &fixture("app.php"),
        &[
            "--workers",
            "2",
            "--control-socket",
            &sock,
            "--admin",
            "127.0.0.1:0",
        ],
    );
    let admin = support::admin_addr(&server);
    assert_eq!(admin_get(admin, "/readyz").status, 200);
    let slow = in_background(server.addr, "/slow?ms=1500");
    eventually(Duration::from_secs(5), "the slow request to start", || {
        status_table(&socket).contains(" busy ").then_some(())
    });
    let stop = {
        let sock = sock.clone();
        std::thread::spawn(move || hearth(&["stop", "--control-socket", &sock]))
    };
    // While the request finishes, the server is no longer ready.
    eventually(Duration::from_secs(5), "/readyz to turn 503", || {
        (admin_get(admin, "/readyz").status == 503).then_some(())
    });
    let answered = slow.join().expect("slow request");
    assert_eq!(answered.status, 200, "the request in flight completes");
    let out = stop.join().expect("hearth stop");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("stopped"));
    // `hearth stop` returns once the server has exited.
    assert_eq!(server.wait_exit(Duration::from_secs(1)), Some(0));
    assert!(server
        .log()
        .contains("hearth stop received: shutting down gracefully"));
    assert!(!socket.exists(), "the control socket is removed on exit");
}

/// The value of a metric line `name{labels} value` in a scrape.
fn metric(scrape: &str, series: &str) -> Option<f64> {
    scrape.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

#[test]
fn metrics_count_requests_by_status_with_latencies() {
    let server = Server::start(
        &fixture("app.php"),
        &["--workers", "2", "--admin", "127.0.0.1:0"],
    );
    let admin = support::admin_addr(&server);
    assert_eq!(admin_get(admin, "/healthz").status, 200);
    let ready = admin_get(admin, "/readyz");
    assert_eq!(ready.status, 200, "{}", ready.text());
    for _ in 0..3 {
        assert_eq!(server.get("/pid").status, 200);
    }
    assert_eq!(server.get("/no-such-page").status, 404);
    let scrape = eventually(Duration::from_secs(5), "the requests counted", || {
        let r = admin_get(admin, "/metrics");
        assert_eq!(r.status, 200);
        let text = r.text();
        (metric(
            &text,
            "hearth_http_requests_total{method=\"GET\",code=\"200\"}",
        ) == Some(3.0)
            && metric(
                &text,
                "hearth_http_requests_total{method=\"GET\",code=\"404\"}",
            ) == Some(1.0))
        .then_some(text)
    });
    assert_eq!(
        metric(
            &scrape,
            "hearth_http_request_duration_seconds_count{class=\"2xx\"}"
        ),
        Some(3.0),
        "{scrape}"
    );
    assert_eq!(
        metric(
            &scrape,
            "hearth_http_request_duration_seconds_bucket{le=\"+Inf\",class=\"4xx\"}"
        ),
        Some(1.0),
        "{scrape}"
    );
    assert!(metric(
        &scrape,
        "hearth_http_request_duration_seconds_sum{class=\"2xx\"}"
    )
    .is_some_and(|s| s > 0.0));
    assert_eq!(
        metric(&scrape, "hearth_pool_workers_live"),
        Some(2.0),
        "{scrape}"
    );
    assert_eq!(
        metric(&scrape, "hearth_pool_queue_depth"),
        Some(0.0),
        "{scrape}"
    );
    assert_eq!(
        metric(&scrape, "hearth_pool_worker_starts_total"),
        Some(2.0),
        "{scrape}"
    );
    assert_eq!(
        metric(&scrape, "hearth_http_requests_in_flight"),
        Some(0.0),
        "{scrape}"
    );
    assert!(scrape.ends_with("# EOF\n"));
}

#[test]
fn metrics_count_restarts_by_reason_after_a_max_requests_recycle() {
    let server = Server::start(
        &fixture("app.php"),
        &[
            "--workers",
            "1",
            "--max-requests",
            "2",
            "--admin",
            "127.0.0.1:0",
        ],
    );
    let admin = support::admin_addr(&server);
    // A worker serves on while its replacement boots, so it may take a few
    // more than two requests per recycle.
    let scrape = eventually(Duration::from_secs(10), "two recycles counted", || {
        assert_eq!(server.get("/pid").status, 200);
        let text = admin_get(admin, "/metrics").text();
        (metric(
            &text,
            "hearth_pool_worker_restarts_total{reason=\"max_requests\"}",
        ) == Some(2.0))
        .then_some(text)
    });
    for other in ["crashed", "reload", "exited", "request_timeout"] {
        assert_eq!(
            metric(
                &scrape,
                &format!("hearth_pool_worker_restarts_total{{reason=\"{other}\"}}")
            ),
            Some(0.0),
            "{scrape}"
        );
    }
    assert_eq!(
        metric(&scrape, "hearth_pool_worker_starts_total"),
        Some(3.0),
        "{scrape}"
    );
}

#[test]
fn admin_endpoints_are_not_on_the_public_port() {
    let server = Server::start(
        &fixture("app.php"),
        &["--workers", "1", "--admin", "127.0.0.1:0"],
    );
    let admin = support::admin_addr(&server);
    assert_ne!(admin.port(), server.addr.port());
    for path in ["/metrics", "/healthz", "/readyz"] {
        let r = server.get(path);
        // The app's own 404, like any path it has no route for.
        assert_eq!(r.status, 404, "{path}");
        assert_eq!(r.text(), format!("no route for {path}"));
    }
    assert_eq!(
        admin_get(admin, "/pid").status,
        404,
        "the admin port does not run PHP"
    );
}

#[test]
fn access_log_writes_common_and_json_lines() {
    let dir = support::tempdir();
    for format in ["common", "json"] {
        let log = dir.path().join(format!("access-{format}.log"));
        let server = Server::start(
            &fixture("app.php"),
            &[
                "--workers",
                "1",
                "--access-log",
                format,
                "--access-log-file",
                &log.to_string_lossy(),
            ],
        );
        let r = server.get("/pid?x=1");
        assert_eq!(r.status, 200);
        let pid = r.json()["pid"].as_u64().expect("pid");
        assert_eq!(server.get("/missing").status, 404);
        let lines = eventually(Duration::from_secs(5), "two log lines", || {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let lines: Vec<String> = text.lines().map(str::to_owned).collect();
            (lines.len() == 2).then_some(lines)
        });
        if format == "common" {
            // 127.0.0.1 - - [21/Nov/2026:21:41:13 +0000] "GET /pid?x=1 HTTP/1.1" 200 53 0.005571 4242
            let (prefix, rest) = lines[0].split_once(" \"").expect("request in quotes");
            assert!(prefix.starts_with("127.0.0.1 - - ["), "{}", lines[0]);
            assert!(prefix.ends_with(" +0000]"), "{}", lines[0]);
            let (request, rest) = rest.split_once("\" ").expect("end of request");
            assert_eq!(request, "GET /pid?x=1 HTTP/1.1");
            let fields: Vec<&str> = rest.split(' ').collect();
            assert_eq!(fields[0], "200");
            assert_eq!(fields[1], r.body.len().to_string());
            let seconds: f64 = fields[2].parse().expect("duration");
            assert!(seconds > 0.0 && seconds < 5.0, "{}", lines[0]);
            assert_eq!(fields[3], pid.to_string());
            assert!(
                lines[1].contains("\"GET /missing HTTP/1.1\" 404 "),
                "{}",
                lines[1]
            );
        } else {
            let entry: serde_json::Value = serde_json::from_str(&lines[0]).expect("JSON line");
            assert_eq!(entry["remote_addr"], "127.0.0.1");
            assert!(entry["remote_port"].as_u64().is_some_and(|p| p > 0));
            assert_eq!(entry["method"], "GET");
            assert_eq!(entry["uri"], "/pid?x=1");
            assert_eq!(entry["protocol"], "HTTP/1.1");
            assert_eq!(entry["status"], 200);
            assert_eq!(entry["bytes"].as_u64(), Some(r.body.len() as u64));
            assert!(entry["duration"]
                .as_f64()
                .is_some_and(|d| d > 0.0 && d < 5.0));
            assert_eq!(entry["pid"].as_u64(), Some(pid));
            let time = entry["time"].as_str().expect("time");
            assert!(time.len() == 24 && time.ends_with('Z'), "{time}");
            let second: serde_json::Value = serde_json::from_str(&lines[1]).expect("JSON line");
            assert_eq!(second["status"], 404);
            assert_eq!(second["uri"], "/missing");
        }
    }
}
