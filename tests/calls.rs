//! `hearth work --listen unix:PATH` and `Hearth\Jobs::call()`: synchronous
//! calls into warm job workers, from a php-fpm request behind nginx (the
//! Gree Fast Processor seed), with the listener up, down (the call runs in
//! the php-fpm process) and timing out; and the listener itself against
//! raw callers speaking the frame protocol: limits, refusals, status,
//! metrics, a graceful stop.
#![allow(clippy::unwrap_used)]

mod queue_support;
#[path = "support/reference.rs"]
mod reference;
#[path = "support/mod.rs"]
mod support;

use std::io::{Read as _, Write as _};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;

use bytes::BytesMut;
use hearth_proto::fields::{self, Fields};
use hearth_proto::{begin_frame, end_frame, Frame, FrameDecoder, Kind};
use queue_support::{eventually, Work, HEARTH};
use reference::Reference;
use serde_json::{json, Value};

/// The fixture's functions, and where the failing one throws.
fn jobs_file() -> PathBuf {
    support::fixture("calls/jobs.php")
}

fn line_of(marker: &str) -> u64 {
    let text = std::fs::read_to_string(jobs_file()).unwrap();
    text.lines().position(|l| l.contains(marker)).unwrap() as u64 + 1
}

/// `hearth work --listen unix:DIR/jobs.sock --php-bootstrap jobs.php`.
fn listener(dir: &Path, extra: &[&str]) -> Work {
    let socket = format!("unix:{}", dir.join("jobs.sock").display());
    let bootstrap = dir.join("jobs.php");
    let control = dir.join("ctl.sock");
    let mut args = vec![
        "--listen",
        socket.as_str(),
        "--php-bootstrap",
        bootstrap.to_str().unwrap(),
        "--control-socket",
        control.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    Work::spawn(dir, &args)
}

fn percent(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// One `Jobs::call()` made by a php-fpm request: what it returned or
/// threw, and the php-fpm process's pid.
fn fpm_call(fpm: &Reference, query: &[(&str, &str)]) -> Value {
    let query: Vec<String> = query
        .iter()
        .map(|(k, v)| format!("{k}={}", percent(v)))
        .collect();
    let raw = format!(
        "GET /index.php?{} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        query.join("&")
    );
    let response = support::request(fpm.addr, raw.as_bytes());
    assert_eq!(response.status, 200, "{}", response.text());
    response.json()
}

/// The php-fpm side: a front controller that makes the call its query
/// asks for.
const FRONT: &str = r#"<?php
declare(strict_types=1);
require '{autoload}';
require __DIR__ . '/jobs.php';
header('Content-Type: application/json');
try {
    $value = Hearth\Jobs::call(
        $_GET['fn'],
        json_decode($_GET['args'] ?? '[]', true),
        timeout: (float) ($_GET['timeout'] ?? 10),
        fallback: ($_GET['fallback'] ?? '1') === '1',
        socket: $_GET['socket'],
    );
    echo json_encode(['value' => $value, 'pid' => getmypid()], JSON_PRESERVE_ZERO_FRACTION);
} catch (Hearth\JobError $e) {
    echo json_encode(['error' => [
        'class' => $e->class, 'message' => $e->getMessage(), 'code' => $e->getCode(),
        'file' => $e->getFile(), 'line' => $e->getLine(), 'trace' => $e->trace,
        'timedOut' => $e->timedOut, 'signal' => $e->signal, 'here' => $e->getPrevious() !== null,
    ], 'pid' => getmypid()]);
}
"#;

/// The seed's promise, from php-fpm behind nginx: with the listener up the
/// value comes from a warm worker (another process), exceptions come back
/// as JobError with the remote class, message, place and trace, a call
/// past its timeout gets a clear error; with the listener stopped the same
/// call runs in the php-fpm process, or fails clearly when told not to
/// fall back.
#[test]
fn calls_from_php_fpm_behind_nginx_with_the_listener_up_down_and_timing_out() {
    let dir = support::reachable_tempdir();
    support::copy_tree(&jobs_file(), &dir.path().join("jobs.php"));
    let autoload = support::root().join("php/autoload.php");
    std::fs::write(
        dir.path().join("index.php"),
        FRONT.replace("{autoload}", autoload.to_str().unwrap()),
    )
    .unwrap();
    let fpm = Reference::start(dir.path(), "index.php");
    let mut work = listener(dir.path(), &["-j", "2"]);
    let socket = format!("unix:{}", dir.path().join("jobs.sock").display());
    let call = |fun: &str, args: &str, more: &[(&str, &str)]| {
        let mut query = vec![("fn", fun), ("args", args), ("socket", socket.as_str())];
        query.extend_from_slice(more);
        fpm_call(&fpm, &query)
    };

    // Up: the value, from a worker of hearth work.
    let sum = call("CallsFixture\\add", "[2, 3]", &[]);
    assert_eq!(sum["value"], 5, "{sum}");
    let named = call(
        "CallsFixture\\greet",
        r#"{"name": "Ada", "greeting": "hi"}"#,
        &[],
    );
    assert_eq!(named["value"], "hi, Ada");
    let shape = call("CallsFixture\\shape", "[]", &[]);
    assert_eq!(
        shape["value"],
        json!({"list": [1, 2.0, "three"], "object": {"k": "v"}, "null": null})
    );
    let remote = call("CallsFixture\\pid", "[]", &[]);
    let status = support::status_json(&dir.path().join("ctl.sock"));
    let workers: Vec<u64> = status["workers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w["pid"].as_u64())
        .collect();
    assert!(
        workers.contains(&remote["value"].as_u64().unwrap()),
        "the call ran in a job worker of hearth work ({workers:?}): {remote}"
    );
    assert_ne!(remote["value"], remote["pid"]);

    // What it threw, as a JobError.
    let failed = call("CallsFixture\\fail", r#"["disk full"]"#, &[]);
    let e = &failed["error"];
    assert_eq!(e["class"], "DomainException", "{failed}");
    assert_eq!(e["message"], "it failed: disk full");
    assert_eq!(e["code"], 7);
    assert!(e["file"].as_str().unwrap().ends_with("/jobs.php"), "{e}");
    assert_eq!(
        e["line"].as_u64(),
        Some(line_of("the line JobError reports"))
    );
    assert!(
        e["trace"].as_str().unwrap().contains("CallsFixture\\fail("),
        "{e}"
    );
    assert_eq!(e["here"], false);
    let typed = call("CallsFixture\\add", r#"["two", 3]"#, &[]);
    assert_eq!(typed["error"]["class"], "TypeError", "{typed}");
    let crashed = call("CallsFixture\\crash", "[]", &[]);
    assert_eq!(crashed["error"]["signal"], "SIGKILL", "{crashed}");

    // Past its timeout: a clear error, the worker replaced, the next call
    // served.
    let slow = call("CallsFixture\\sleepFor", "[20]", &[("timeout", "0.5")]);
    let e = &slow["error"];
    assert_eq!(e["timedOut"], true, "{slow}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("ran past its time limit of 0.500s"),
        "{e}"
    );
    assert_eq!(call("CallsFixture\\add", "[1, 1]", &[])["value"], 2);

    // Down: the call runs in the php-fpm process.
    work.signal(rustix::process::Signal::TERM);
    assert_eq!(work.wait_exit(), Some(0), "{}", work.log());
    assert!(
        !dir.path().join("jobs.sock").exists(),
        "the socket file is removed at the stop"
    );
    let here = call("CallsFixture\\pid", "[]", &[]);
    assert_eq!(here["value"], here["pid"], "{here}");
    assert_eq!(call("CallsFixture\\add", "[2, 3]", &[])["value"], 5);
    let failed_here = call("CallsFixture\\fail", r#"["here"]"#, &[]);
    let e = &failed_here["error"];
    assert_eq!(e["class"], "DomainException", "{failed_here}");
    assert_eq!(
        e["line"].as_u64(),
        Some(line_of("the line JobError reports"))
    );
    assert_eq!(e["here"], true);
    let refused = call("CallsFixture\\add", "[2, 3]", &[("fallback", "0")]);
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no hearth work listens on unix:"),
        "{refused}"
    );
}

/// A `hearth serve` worker that calls through `Jobs::call()` keeps its
/// connection from request to request, and `--check-state` knows that is
/// on purpose: it reports nothing.
#[test]
fn a_hearth_worker_keeps_its_connection_and_the_state_check_says_nothing() {
    let dir = support::reachable_tempdir();
    support::copy_tree(&jobs_file(), &dir.path().join("jobs.php"));
    let _work = listener(dir.path(), &["-j", "1"]);
    let autoload = support::root().join("php/autoload.php");
    let script = dir.path().join("worker.php");
    std::fs::write(
        &script,
        format!(
            r#"<?php
require '{}';
require __DIR__ . '/jobs.php';
Hearth\Jobs::useSocket('unix:' . __DIR__ . '/jobs.sock');
Hearth\Worker::serve(function () {{
    echo json_encode(['remote' => Hearth\Jobs::call('CallsFixture\pid'), 'me' => getmypid()]);
}});
"#,
            autoload.display()
        ),
    )
    .unwrap();
    let mut server = support::Server::start(&script, &["--workers", "1", "--check-state"]);
    let mut remote = Vec::new();
    for _ in 0..4 {
        let answer = server.get("/").json();
        assert_ne!(answer["remote"], answer["me"], "{answer}");
        remote.push(answer["remote"].clone());
    }
    assert!(remote.windows(2).all(|w| w[0] == w[1]), "{remote:?}");
    // A worker's findings are in the log once Hearth has stopped.
    server.signal("TERM");
    assert_eq!(server.wait_exit(queue_support::PATIENCE), Some(0));
    server.wait_for_log("stopped", queue_support::PATIENCE);
    let log = server.log();
    assert!(log.contains("state check on"), "{log}");
    assert!(!log.contains("state check: GET"), "{log}");
}

/// A caller speaking the frame protocol directly.
struct Caller {
    stream: UnixStream,
    buf: BytesMut,
}

impl Caller {
    fn connect(socket: &Path) -> Caller {
        let stream = UnixStream::connect(socket).unwrap();
        stream
            .set_read_timeout(Some(queue_support::PATIENCE))
            .unwrap();
        Caller {
            stream,
            buf: BytesMut::new(),
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    fn call(&mut self, id: u32, entries: &[(&str, &str)]) {
        let mut out = BytesMut::new();
        let at = begin_frame(&mut out, Kind::Call, 0, id);
        for (k, v) in entries {
            fields::put(&mut out, k, v.as_bytes());
        }
        end_frame(&mut out, at);
        self.send(&out);
    }

    /// The next frame, or None at the end of the stream.
    fn read(&mut self) -> Option<Frame> {
        let decoder = FrameDecoder::default();
        loop {
            if let Some(frame) = decoder.decode(&mut self.buf).unwrap() {
                return Some(frame);
            }
            let mut chunk = [0u8; 65536];
            let n = self.stream.read(&mut chunk).unwrap();
            if n == 0 {
                return None;
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// The JSON of the next Result frame.
    fn answer(&mut self, id: u32) -> Value {
        let frame = self.read().expect("an answer");
        assert_eq!(frame.kind, Kind::Result, "{frame:?}");
        assert_eq!(frame.request_id, id);
        let fields = Fields::decode(&frame.payload).unwrap();
        serde_json::from_slice(fields.get("json").unwrap()).unwrap()
    }

    /// The message of the next frame, an Error frame, then the end.
    fn refusal(&mut self) -> String {
        let frame = self.read().expect("an Error frame");
        assert_eq!(frame.kind, Kind::Error, "{frame:?}");
        let message = Fields::decode(&frame.payload)
            .unwrap()
            .get_str("message")
            .unwrap();
        assert!(self.read().is_none(), "closed after the refusal");
        message
    }
}

/// The listener against raw callers: answers on one connection in turn,
/// refusals for what is not a call (each closes the connection), a caller
/// past --max-callers told it is busy; its counts in `hearth status` and
/// `/metrics`; the same process taking jobs from a queue; and SIGTERM
/// letting the running call finish while new callers find no listener.
#[test]
fn the_listener_refuses_what_is_not_a_call_counts_and_stops_gracefully() {
    let dir = support::reachable_tempdir();
    support::copy_tree(&jobs_file(), &dir.path().join("jobs.php"));
    let queue = format!("file:{}", dir.path().join("jobs.db").display());
    let admin = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let admin_addr = admin.local_addr().unwrap();
    drop(admin);
    let admin_arg = admin_addr.to_string();
    let mut work = listener(
        dir.path(),
        &[
            "-j",
            "2",
            "--max-callers",
            "3",
            "--queue",
            &queue,
            "--admin",
            &admin_arg,
        ],
    );
    let socket = dir.path().join("jobs.sock");
    let mode = std::fs::metadata(&socket).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
        0o660
    );

    let mut a = Caller::connect(&socket);
    for id in 1..=3 {
        a.call(
            id,
            &[
                ("function", "CallsFixture\\add"),
                ("args", &format!("[{id}, 10]")),
            ],
        );
        assert_eq!(a.answer(id), json!({"status": 0, "result": id + 10}));
    }
    let mut b = Caller::connect(&socket);
    b.call(
        9,
        &[("function", "CallsFixture\\fail"), ("args", r#"["x"]"#)],
    );
    let failed = b.answer(9);
    assert_eq!(failed["status"], 1);
    assert_eq!(failed["error"]["class"], "DomainException");

    // A third caller fits, a fourth is told the listener is busy.
    let _c = Caller::connect(&socket);
    let mut d = Caller::connect(&socket);
    let busy = d.refusal();
    assert!(busy.contains("busy: 3 callers are connected"), "{busy}");

    // What is not a call: refused with the reason, then closed.
    drop(b);
    drop(d);
    let control = dir.path().join("ctl.sock");
    eventually_status(&control, |s| s["calls"]["connections"] == 2);
    for (bytes, expected) in [
        (
            b"GET / HTTP/1.1\r\n\r\n".to_vec(),
            "not a call Hearth can take",
        ),
        (
            {
                let mut out = BytesMut::new();
                hearth_proto::encode_header(&mut out, Kind::Call, 0, 1, 64 << 20);
                out.to_vec()
            },
            "not a call Hearth can take",
        ),
    ] {
        let mut e = Caller::connect(&socket);
        e.send(&bytes);
        let why = e.refusal();
        assert!(why.contains(expected), "{why}");
        drop(e);
        // Its place is free once the listener has seen it go.
        eventually_status(&control, |s| s["calls"]["connections"] == 2);
    }
    for (entries, expected) in [
        (vec![("args", "[]")], "needs a function name"),
        (
            vec![("function", "CallsFixture\\add"), ("args", "[1,")],
            "args are not JSON",
        ),
        (
            vec![("function", "CallsFixture\\add"), ("args", "5")],
            "must be a JSON array or object",
        ),
        (
            vec![("function", "CallsFixture\\add"), ("timeout_ms", "soon")],
            "timeout_ms must be a whole number",
        ),
    ] {
        let mut e = Caller::connect(&socket);
        e.call(4, &entries);
        let why = e.refusal();
        assert!(why.contains(expected), "{entries:?}: {why}");
        drop(e);
        eventually_status(&control, |s| s["calls"]["connections"] == 2);
    }

    // The same process takes jobs from its queue.
    let pushed = Command::new(HEARTH)
        .args(["queue", "push", &queue, "--payload"])
        .arg(r#"{"call": "CallsFixture\\add", "args": [20, 22]}"#)
        .output()
        .unwrap();
    assert!(pushed.status.success(), "{pushed:?}");

    let status = eventually_status(&control, |s| s["work"]["done"] == 1);
    let calls = &status["calls"];
    assert_eq!(calls["ok"], 3, "{status}");
    assert_eq!(calls["failed"], 1);
    assert_eq!(calls["turned_away"], 1);
    assert_eq!(calls["malformed"], 6);
    assert_eq!(calls["socket"], socket.to_str().unwrap());
    let text = Command::new(HEARTH)
        .args(["status", "--control-socket"])
        .arg(&control)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(text.contains("calls on unix:"), "{text}");
    assert!(text.contains("ok 3, failed 1"), "{text}");
    let metrics = support::request(
        admin_addr,
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .text();
    assert!(
        metrics.contains("hearth_calls_total{outcome=\"ok\"} 3"),
        "{metrics}"
    );
    assert!(metrics.contains("hearth_call_duration_seconds_count{outcome=\"ok\"} 3"));
    assert!(metrics.contains("hearth_call_connections_turned_away_total 1"));

    // SIGTERM while a call runs: it finishes and is answered; no new caller
    // is taken; the process exits 0.
    a.call(
        20,
        &[("function", "CallsFixture\\sleepFor"), ("args", "[1.5]")],
    );
    eventually("the call to run", || {
        support::status_json(&control)["calls"]["running"] == 1
    });
    work.signal(rustix::process::Signal::TERM);
    work.wait_for_log("calls: taking no more connections");
    assert!(UnixStream::connect(&socket).is_err(), "no new caller");
    assert_eq!(a.answer(20), json!({"status": 0, "result": "slept"}));
    assert_eq!(work.wait_exit(), Some(0), "{}", work.log());
}

/// Hostile callers hold only what the bounds allow: 100 callers that send
/// half of a 1 MiB call and stall, and one that never reads a large
/// answer. A well-behaved caller is served meanwhile; the listener's
/// memory grows by about what the stalled callers sent, not by what their
/// frames declare; every one of them is dropped by the read or write
/// timeout (10 s).
#[test]
fn hostile_callers_hold_only_what_the_bounds_allow() {
    let dir = support::reachable_tempdir();
    support::copy_tree(&jobs_file(), &dir.path().join("jobs.php"));
    let work = listener(dir.path(), &["-j", "2", "--max-callers", "150"]);
    let socket = dir.path().join("jobs.sock");
    let control = dir.path().join("ctl.sock");
    let before = support::vm_kib(work.pid(), "VmRSS");

    let mut stalled = Vec::new();
    for _ in 0..100 {
        let mut caller = Caller::connect(&socket);
        let mut out = BytesMut::new();
        hearth_proto::encode_header(&mut out, Kind::Call, 0, 1, 1 << 20);
        out.extend_from_slice(&vec![b'x'; 512 << 10]);
        caller.send(&out);
        stalled.push(caller);
    }
    let mut reader = Caller::connect(&socket);
    let mut deaf = Caller::connect(&socket);
    deaf.call(
        2,
        &[("function", "CallsFixture\\big"), ("args", "[8000000]")],
    );
    eventually_status(&control, |s| s["calls"]["connections"] == 102);
    reader.call(1, &[("function", "CallsFixture\\add"), ("args", "[1, 2]")]);
    assert_eq!(reader.answer(1), json!({"status": 0, "result": 3}));
    let during = support::vm_kib(work.pid(), "VmRSS");
    let sent_kib = 100 * 512;
    eprintln!(
        "hearth work's RSS: {before} KiB idle, {during} KiB with 100 callers holding {sent_kib} KiB \
         of unfinished calls and one not reading an 8 MB answer"
    );
    assert!(
        during < before + sent_kib + 40 * 1024,
        "RSS grew from {before} to {during} KiB for {sent_kib} KiB sent"
    );
    drop(reader);

    // The read timeout drops the stalled, the write timeout the deaf one.
    eventually_status(&control, |s| s["calls"]["connections"] == 0);
    let mut got = 0;
    let mut chunk = vec![0u8; 1 << 16];
    while let Ok(n) = deaf.stream.read(&mut chunk) {
        if n == 0 {
            break;
        }
        got += n;
    }
    assert!(got < 8_000_000, "the answer was cut off: {got} bytes read");
    drop(stalled);
}

fn eventually_status(control: &Path, check: impl Fn(&Value) -> bool) -> Value {
    let mut last = Value::Null;
    eventually("the status to show the counts", || {
        last = support::status_json(control);
        check(&last)
    });
    last
}

/// Options that cannot work are refused before anything starts, by name.
#[test]
fn unusable_listen_options_are_refused_by_name() {
    for (args, expected) in [
        (vec![], "--queue: is needed"),
        (
            vec!["--listen", "127.0.0.1:9000", "--php-bootstrap", "x.php"],
            "--listen: takes unix:PATH only",
        ),
        (
            vec!["--listen", "unix:/tmp/hearth-calls-test.sock"],
            "--listen: needs --php-bootstrap",
        ),
        (
            vec!["--queue", "file:/tmp/x.db", "--listen-mode", "0600"],
            "--listen-mode: needs --listen",
        ),
        (
            vec!["--queue", "file:/tmp/x.db", "--max-callers", "5"],
            "--max-callers: needs --listen",
        ),
        (
            vec![
                "--listen",
                "unix:/tmp/hearth-calls-test.sock",
                "--php-bootstrap",
                "x.php",
                "--listen-mode",
                "rw",
            ],
            "--listen-mode",
        ),
    ] {
        let out = Command::new(HEARTH)
            .arg("work")
            .args(&args)
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        assert_ne!(out.status.code(), Some(0), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}
