//! `hearth serve --debug` with real Xdebug: Debian's xdebug.so, loaded
//! into these tests' workers alone (`-d zend_extension=`), and a small
//! DBGp listener standing in for the IDE.
//!
//! Xdebug is not installed: `apt-get download` fetches Debian's package
//! once into the target directory and `dpkg-deb -x` unpacks it there, so
//! PHP everywhere else on the machine (other tests, benchmarks) stays
//! without it. A machine where it cannot be fetched fails these tests,
//! saying why.

mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use support::{fixture, request, Server};

/// Debian's xdebug.so for the PHP the tests run, unpacked (once) under
/// the target directory.
fn xdebug_so() -> &'static Path {
    static SO: OnceLock<PathBuf> = OnceLock::new();
    SO.get_or_init(|| fetch_xdebug().unwrap_or_else(|e| panic!("cannot get Xdebug: {e}")))
}

fn fetch_xdebug() -> Result<PathBuf, String> {
    let version = Command::new("php")
        .args(["-r", "echo PHP_MAJOR_VERSION, '.', PHP_MINOR_VERSION;"])
        .output()
        .map_err(|e| format!("php -r (package php-cli): {e}"))?;
    let version = String::from_utf8_lossy(&version.stdout).trim().to_owned();
    let package = format!("php{version}-xdebug");
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("xdebug-{version}"));
    let so = cache.join("xdebug.so");
    if so.is_file() {
        return Ok(so);
    }
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).map_err(|e| e.to_string())?;
    let download = || {
        Command::new("apt-get")
            .args(["download", &package])
            .current_dir(work.path())
            .output()
    };
    let mut got = download().map_err(|e| format!("apt-get download {package}: {e}"))?;
    if !got.status.success() && rustix::process::geteuid().is_root() {
        // Empty or stale lists on a fresh machine: refresh them once.
        let _ = Command::new("apt-get").arg("update").output();
        got = download().map_err(|e| format!("apt-get download {package}: {e}"))?;
    }
    if !got.status.success() {
        return Err(format!(
            "apt-get download {package} failed ({}): {}{}",
            got.status,
            String::from_utf8_lossy(&got.stderr).trim(),
            if rustix::process::geteuid().is_root() {
                ""
            } else {
                " (as root the tests run apt-get update first)"
            }
        ));
    }
    let deb = std::fs::read_dir(work.path())
        .map_err(|e| e.to_string())?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "deb"))
        .ok_or("apt-get download left no .deb")?;
    let tree = work.path().join("tree");
    let unpacked = Command::new("dpkg-deb")
        .arg("-x")
        .arg(&deb)
        .arg(&tree)
        .status()
        .map_err(|e| format!("dpkg-deb -x: {e}"))?;
    if !unpacked.success() {
        return Err(format!("dpkg-deb -x {} failed", deb.display()));
    }
    let found = walk(&tree)
        .into_iter()
        .find(|p| p.file_name().is_some_and(|n| n == "xdebug.so"))
        .ok_or_else(|| format!("{} has no xdebug.so", deb.display()))?;
    std::fs::create_dir_all(&cache).map_err(|e| e.to_string())?;
    // Renamed into place: a test binary run beside this one never sees
    // half a file.
    let partial = cache.join(format!("xdebug.so.{}", std::process::id()));
    std::fs::copy(&found, &partial).map_err(|e| e.to_string())?;
    std::fs::rename(&partial, &so).map_err(|e| e.to_string())?;
    Ok(so)
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// The IDE's end: a listener on a free port, which Xdebug connects to.
struct Ide {
    listener: TcpListener,
}

impl Ide {
    fn listen() -> Ide {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the DBGp listener");
        listener.set_nonblocking(true).expect("nonblocking");
        Ide { listener }
    }

    fn port(&self) -> u16 {
        self.listener.local_addr().expect("address").port()
    }

    /// The next debugging session, within `timeout`.
    fn accept(&self, timeout: Duration) -> Option<Session> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    stream.set_nonblocking(false).expect("blocking");
                    stream
                        .set_read_timeout(Some(Duration::from_secs(60)))
                        .expect("timeout");
                    return Some(Session { stream });
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => panic!("accept: {e}"),
            }
        }
        None
    }
}

struct Session {
    stream: TcpStream,
}

impl Session {
    /// One DBGp packet from Xdebug: `LENGTH\0XML\0`.
    fn packet(&mut self) -> String {
        let mut len = Vec::new();
        let mut byte = [0u8; 1];
        loop {
            self.stream.read_exact(&mut byte).expect("packet length");
            if byte[0] == 0 {
                break;
            }
            len.push(byte[0]);
        }
        let len: usize = String::from_utf8_lossy(&len).parse().expect("a length");
        let mut xml = vec![0u8; len + 1];
        self.stream.read_exact(&mut xml).expect("packet");
        assert_eq!(xml.pop(), Some(0), "a packet ends with NUL");
        String::from_utf8_lossy(&xml).into_owned()
    }

    /// Sends an IDE command (`step_into -i 1`).
    fn command(&mut self, command: &str) -> String {
        self.stream
            .write_all(format!("{command}\0").as_bytes())
            .expect("send a DBGp command");
        self.packet()
    }
}

/// Xdebug's settings for the workers: step debugging, connecting to `ide`.
fn xdebug_args(ide: &Ide) -> Vec<String> {
    [
        format!("zend_extension={}", xdebug_so().display()),
        "xdebug.mode=debug".to_owned(),
        "xdebug.client_host=127.0.0.1".to_owned(),
        format!("xdebug.client_port={}", ide.port()),
        "xdebug.connect_timeout_ms=2000".to_owned(),
    ]
    .into_iter()
    .flat_map(|setting| ["--ini".to_owned(), setting])
    .collect()
}

fn start(extra: &[String], debug: bool) -> Server {
    let mut args: Vec<&str> = extra.iter().map(String::as_str).collect();
    if debug {
        args.push("--debug");
    }
    let server = Server::spawn(&fixture("debug.php"), &args);
    if debug {
        server.wait_for_log("debug mode: ready", Duration::from_secs(60));
    } else {
        server.wait_until_ready();
    }
    server
}

/// A GET with `extra_headers`, answered on another thread (a debugged
/// request answers only once the IDE lets it go).
fn get_later(
    server: &Server,
    path: &str,
    extra_headers: &str,
) -> std::thread::JoinHandle<support::Response> {
    let addr = server.addr;
    let raw =
        format!("GET {path} HTTP/1.1\r\nHost: test\r\n{extra_headers}Connection: close\r\n\r\n");
    std::thread::spawn(move || request(addr, raw.as_bytes()))
}

fn field(body: &str, name: &str) -> String {
    body.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} in {body:?}"))
        .to_owned()
}

/// The step_into reply's line in the worker script.
fn stopped_at(reply: &str) -> (String, u32) {
    let attr = |name: &str| {
        reply
            .split(&format!("{name}=\""))
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap_or_else(|| panic!("no {name} in {reply}"))
            .to_owned()
    };
    (attr("filename"), attr("lineno").parse().expect("a line"))
}

#[test]
fn a_request_with_the_session_cookie_is_debugged_from_the_worker_scripts_first_line() {
    let ide = Ide::listen();
    let server = start(&xdebug_args(&ide), true);
    let script = std::fs::canonicalize(fixture("debug.php")).expect("script");

    // The trial worker booted at start with Xdebug off: no session.
    assert!(
        ide.accept(Duration::from_millis(500)).is_none(),
        "nothing connects before a request"
    );

    let answer = get_later(&server, "/", "Cookie: XDEBUG_SESSION=1\r\n");
    let mut session = ide
        .accept(Duration::from_secs(60))
        .unwrap_or_else(|| panic!("Xdebug never connected; log:\n{}", server.log()));
    let init = session.packet();
    assert!(init.contains("<init "), "{init}");
    assert!(
        init.contains(&format!("fileuri=\"file://{}\"", script.display())),
        "the session is the worker script's: {init}"
    );
    assert!(init.contains("idekey=\"1\""), "{init}");
    let step = session.command("step_into -i 1");
    assert!(step.contains("command=\"step_into\""), "{step}");
    assert!(step.contains("status=\"break\""), "{step}");
    let (file, line) = stopped_at(&step);
    assert_eq!(file, format!("file://{}", script.display()));
    // The boot code, before Worker::serve(): what a worker started
    // earlier would have run without the debugger.
    assert!(
        line <= 7,
        "stopped in the boot code, at line {line}: {step}"
    );
    // On to the end: the request runs under the debugger.
    session.stream.write_all(b"run -i 2\0").expect("send run");
    let response = answer.join().expect("the debugged request");
    assert_eq!(response.status, 200, "{}", response.text());
    let body = response.text();
    assert_eq!(field(&body, "debugger"), "on", "{body}");
    assert!(body.ends_with("done\n"), "{body}");
    // The worker ends after its one request, which ends the session.
    let end = session.packet();
    assert!(end.contains("command=\"run\""), "{end}");
    assert!(end.contains("status=\"stopping\""), "{end}");
    let _ = session.stream.write_all(b"stop -i 3\0");
    drop(session);

    // Without a trigger: no session, and a worker of its own again.
    let plain = request(
        server.addr,
        b"GET / HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(plain.status, 200, "{}", plain.text());
    assert_eq!(field(&plain.text(), "debugger"), "off");
    assert_ne!(field(&plain.text(), "pid"), field(&body, "pid"));
    assert!(ide.accept(Duration::from_millis(500)).is_none());
}

/// Each request of debug mode runs in a worker booted for it (its boot
/// code ran in the same process); without `--debug`, one worker serves
/// them all.
#[test]
fn debug_mode_boots_a_worker_per_request_and_worker_mode_does_not() {
    let get = |server: &Server| {
        let r = request(
            server.addr,
            b"GET / HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n",
        );
        assert_eq!(r.status, 200, "{}", r.text());
        let body = r.text();
        assert_eq!(field(&body, "pid"), field(&body, "booted-by"));
        field(&body, "pid")
    };
    let ide = Ide::listen();
    let mut args = xdebug_args(&ide);
    args.extend(["--workers".to_owned(), "1".to_owned()]);
    let warm = start(&args, false);
    let pids: std::collections::BTreeSet<String> = (0..5).map(|_| get(&warm)).collect();
    assert_eq!(
        pids.len(),
        1,
        "one warm worker serves every request: {pids:?}"
    );
    drop(warm);

    let dir = tempfile::tempdir().expect("dir");
    let control = dir.path().join("control.sock");
    args.extend(["--control-socket".to_owned(), control.display().to_string()]);
    let debug = start(&args, true);
    let pids: std::collections::BTreeSet<String> = (0..5).map(|_| get(&debug)).collect();
    assert_eq!(pids.len(), 5, "a worker per request: {pids:?}");
    assert!(
        debug.log().contains("not for production"),
        "{}",
        debug.log()
    );
    let status = Command::new(support::hearth_bin())
        .args(["status", "--control-socket"])
        .arg(&control)
        .output()
        .expect("hearth status");
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(status.status.success(), "{status:?}");
    assert!(
        text.contains(
            "debug mode: each request runs in a worker started for it (not for production)"
        ),
        "{text}"
    );
}

/// A request the debugger holds (a developer on a breakpoint) outlives
/// `--request-timeout`, and its worker's boot outlives `--boot-timeout`;
/// a request without a trigger does not.
#[test]
fn the_time_limits_spare_a_request_held_by_the_debugger() {
    let ide = Ide::listen();
    let mut args = xdebug_args(&ide);
    args.extend(["--request-timeout", "1", "--boot-timeout", "1"].map(String::from));
    let server = start(&args, true);
    let script = std::fs::canonicalize(fixture("debug.php")).expect("script");

    let answer = get_later(&server, "/?XDEBUG_SESSION_START=1", "");
    let mut session = ide
        .accept(Duration::from_secs(60))
        .unwrap_or_else(|| panic!("Xdebug never connected; log:\n{}", server.log()));
    assert!(session.packet().contains("<init "));
    // Paused in the boot code for twice the boot timeout.
    let step = session.command("step_into -i 1");
    assert!(step.contains("status=\"break\""), "{step}");
    std::thread::sleep(Duration::from_secs(2));
    // Then in the request's code (line 16, `echo 'pid='`), for twice the
    // request timeout.
    let set = session.command(&format!(
        "breakpoint_set -i 2 -t line -f file://{} -n 16",
        script.display()
    ));
    assert!(set.contains("command=\"breakpoint_set\""), "{set}");
    let run = session.command("run -i 3");
    assert!(run.contains("status=\"break\""), "{run}");
    assert_eq!(stopped_at(&run).1, 16, "{run}");
    std::thread::sleep(Duration::from_secs(2));
    let detach = session.command("detach -i 4");
    assert!(detach.contains("command=\"detach\""), "{detach}");
    drop(session);
    let response = answer.join().expect("the held request");
    assert_eq!(response.status, 200, "{}", response.text());
    assert!(response.text().ends_with("done\n"), "{}", response.text());
    // As Xdebug answers XDEBUG_SESSION_START under php-fpm.
    let cookies: Vec<&str> = response
        .headers_named("Set-Cookie")
        .into_iter()
        .filter(|c| c.starts_with("XDEBUG_SESSION="))
        .collect();
    assert_eq!(cookies, ["XDEBUG_SESSION=1; path=/; SameSite=Lax"]);

    // No trigger: the limit applies, in debug mode too.
    let slow = request(
        server.addr,
        b"GET /?sleep=3000 HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(slow.status, 504, "{}", slow.text());
}

/// The profiler writes one cachegrind file per triggered request, a
/// trigger in a form body counts as one in the query, and neither the
/// trial worker booted at start nor a request without a trigger writes
/// one.
#[test]
fn the_profiler_writes_one_file_per_triggered_request() {
    let out = tempfile::tempdir().expect("output dir");
    if rustix::process::geteuid().is_root() {
        // The workers run as root here; as anyone else, as the caller.
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(out.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let args: Vec<String> = [
        format!("zend_extension={}", xdebug_so().display()),
        "xdebug.mode=profile".to_owned(),
        "xdebug.start_with_request=trigger".to_owned(),
        format!("xdebug.output_dir={}", out.path().display()),
        "xdebug.profiler_output_name=cachegrind.out.%p".to_owned(),
    ]
    .into_iter()
    .flat_map(|setting| ["--ini".to_owned(), setting])
    .collect();
    let server = start(&args, true);
    let files = || -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(out.path())
            .expect("output dir")
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    assert_eq!(
        files(),
        Vec::<String>::new(),
        "the trial worker profiles nothing"
    );

    let get = request(
        server.addr,
        b"GET /?XDEBUG_PROFILE=1 HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(get.status, 200, "{}", get.text());
    let form = "XDEBUG_TRIGGER=1";
    let post = request(
        server.addr,
        format!(
            "POST / HTTP/1.1\r\nHost: test\r\nContent-Type: application/x-www-form-urlencoded\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{form}",
            form.len()
        )
        .as_bytes(),
    );
    assert_eq!(post.status, 200, "{}", post.text());
    let plain = request(
        server.addr,
        b"GET / HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(plain.status, 200, "{}", plain.text());

    let expected: Vec<String> = [&get, &post]
        .iter()
        .map(|r| format!("cachegrind.out.{}", field(&r.text(), "pid")))
        .collect();
    let mut expected_sorted = expected.clone();
    expected_sorted.sort();
    // Each file is complete once its worker has exited after its request.
    support::eventually(Duration::from_secs(60), "two profiles", || {
        (files() == expected_sorted).then_some(())
    });
    let profile = std::fs::read_to_string(out.path().join(&expected[0])).expect("profile");
    assert!(profile.starts_with("version: 1"), "{profile:.200}");
    let script = std::fs::canonicalize(fixture("debug.php")).expect("script");
    assert!(
        profile.contains(&format!("cmd: {}", script.display())),
        "{profile:.400}"
    );
    // Once the plain request's worker has exited too: still two files.
    let pid = field(&plain.text(), "pid");
    support::eventually(Duration::from_secs(60), "the plain worker's exit", || {
        (!Path::new(&format!("/proc/{pid}")).exists()).then_some(())
    });
    assert_eq!(files(), expected_sorted);
}

/// Debug mode runs at most `--workers` requests at once, each in its own
/// worker; the others wait in line, within `--max-queue`.
#[test]
fn debug_mode_runs_as_many_requests_at_once_as_workers() {
    let dir = tempfile::tempdir().expect("dir");
    let control = dir.path().join("control.sock");
    let args: Vec<String> = ["--workers", "1", "--max-queue", "2", "--control-socket"]
        .map(String::from)
        .into_iter()
        .chain([control.display().to_string()])
        .collect();
    let server = start(&args, true);
    let slow = "/?sleep=1500";
    let first = get_later(&server, slow, "");
    support::eventually(
        Duration::from_secs(60),
        "the first request's worker",
        || (support::status_json(&control)["pool"]["live"] == 1).then_some(()),
    );
    let waiting: Vec<_> = (0..2).map(|_| get_later(&server, slow, "")).collect();
    // The first holds the one slot and two wait: the next is refused.
    support::eventually(Duration::from_secs(60), "two waiting", || {
        (support::status_json(&control)["pool"]["queue"] == 2).then_some(())
    });
    let refused = request(
        server.addr,
        b"GET / HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(refused.status, 503, "{}", refused.text());
    server.wait_for_log("the queue is full", Duration::from_secs(30));
    let mut answers = vec![first.join().expect("first")];
    answers.extend(waiting.into_iter().map(|w| w.join().expect("waiting")));
    for a in &answers {
        assert_eq!(a.status, 200, "{}", a.text());
    }
    let mut spans: Vec<(f64, f64, String)> = answers
        .iter()
        .map(|a| {
            let body = a.text();
            let at = |name| field(&body, name).parse::<f64>().expect("a time");
            (at("began"), at("ended"), field(&body, "pid"))
        })
        .collect();
    spans.sort_by(|a, b| a.0.total_cmp(&b.0));
    for pair in spans.windows(2) {
        assert!(pair[0].1 <= pair[1].0, "one at a time: {spans:?}");
        assert_ne!(pair[0].2, pair[1].2, "a worker each: {spans:?}");
    }
    assert_eq!(support::status_json(&control)["pool"]["debug"], true);
}

/// A reload in debug mode returns at once, even with a request running:
/// there is no warm worker to replace, and that request finishes in the
/// worker it has.
#[test]
fn a_reload_in_debug_mode_leaves_the_running_request_alone() {
    let dir = tempfile::tempdir().expect("dir");
    let control = dir.path().join("control.sock");
    let args: Vec<String> = ["--workers", "1", "--control-socket"]
        .map(String::from)
        .into_iter()
        .chain([control.display().to_string()])
        .collect();
    let server = start(&args, true);
    let running = get_later(&server, "/?sleep=1500", "");
    support::eventually(Duration::from_secs(60), "the request's worker", || {
        (support::status_json(&control)["pool"]["busy"] == 1).then_some(())
    });
    let out = support::ctl(&["reload", "--control-socket", control.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let running = running.join().expect("the running request");
    assert_eq!(running.status, 200, "{}", running.text());
    let next = request(
        server.addr,
        b"GET / HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(next.status, 200, "{}", next.text());
}

/// A worker script that cannot boot stops `hearth serve --debug` at
/// start with the reason, as it stops `hearth serve`.
#[test]
fn a_script_that_cannot_boot_stops_debug_mode_at_start() {
    let dir = tempfile::tempdir().expect("dir");
    let script = dir.path().join("broken.php");
    std::fs::write(&script, "<?php\necho 'no database';\nexit(3);\n").expect("script");
    let mut server = Server::spawn(&script, &["--debug"]);
    let status = server.wait_exit(Duration::from_secs(120));
    assert!(
        matches!(status, Some(code) if code != 0),
        "{status:?}; log:\n{}",
        server.log()
    );
    let log = server.log();
    assert!(
        log.contains("stopping: the worker script cannot boot"),
        "{log}"
    );
    assert!(
        log.contains("exited while booting (exit status 3)"),
        "{log}"
    );
    assert!(log.contains("no database"), "{log}");
}

/// Once debug mode has started, a request whose worker fails to boot (the
/// code was just broken) gets a 502 and the reason goes to the log; an
/// edited worker script is read again by the next request, no reload.
#[test]
fn a_request_whose_worker_cannot_boot_gets_a_502() {
    let dir = tempfile::tempdir().expect("dir");
    let script = dir.path().join("worker.php");
    let write = |body: &str| {
        let code = format!(
            "<?php\nrequire '{}';\n{body}\n",
            support::root().join("php/autoload.php").display()
        );
        // Written beside and renamed, as an editor saves.
        let next = dir.path().join("worker.php.new");
        std::fs::write(&next, code).expect("script");
        std::fs::rename(&next, &script).expect("script");
    };
    write("Hearth\\Worker::serve(function () { echo 'fine'; });");
    let server = Server::spawn(&script, &["--debug"]);
    server.wait_for_log("debug mode: ready", Duration::from_secs(60));
    let get = || {
        request(
            server.addr,
            b"GET / HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n",
        )
    };
    assert_eq!(get().text(), "fine");
    write("echo 'half-edited'; exit(3);");
    let broken = get();
    assert_eq!(broken.status, 502, "{}", broken.text());
    server.wait_for_log(
        "debug mode: the request's worker failed to boot",
        Duration::from_secs(30),
    );
    server.wait_for_log("half-edited", Duration::from_secs(30));
    write("Hearth\\Worker::serve(function () { echo 'fixed'; });");
    assert_eq!(get().text(), "fixed");
}

/// What Xdebug itself does with a request under php-cgi (the SAPI aside,
/// the code php-fpm runs): the `Set-Cookie` headers it sends and whether
/// it started a debugging session. `query` and `cookie` as a web server
/// would pass them.
fn xdebug_reference(query: &str, cookie: &str) -> (Vec<String>, bool) {
    let ide = Ide::listen();
    let mut php = Command::new(support::php_binary())
        .args([
            "-d",
            &format!("zend_extension={}", xdebug_so().display()),
            "-d",
            "xdebug.mode=debug",
            "-d",
            "xdebug.client_host=127.0.0.1",
            "-d",
            &format!("xdebug.client_port={}", ide.port()),
            "-d",
            "xdebug.connect_timeout_ms=2000",
        ])
        .env_clear()
        .env("REDIRECT_STATUS", "200")
        .env("GATEWAY_INTERFACE", "CGI/1.1")
        .env("REQUEST_METHOD", "GET")
        .env(
            "SCRIPT_FILENAME",
            support::root().join("tests/fixtures/xdebug_reference.php"),
        )
        .env("QUERY_STRING", query)
        .env("HTTP_COOKIE", cookie)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("php-cgi");
    let debugged = match ide.accept(Duration::from_secs(5)) {
        Some(mut session) => {
            assert!(session.packet().contains("<init "));
            let _ = session.stream.write_all(b"run -i 1\0");
            true
        }
        None => false,
    };
    let mut out = String::new();
    php.stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out)
        .expect("php-cgi's output");
    assert!(php.wait().expect("php-cgi").success(), "{out}");
    let cookies = out
        .split("\r\n\r\n")
        .next()
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim_end().strip_prefix("Set-Cookie: "))
        .map(str::to_owned)
        .collect();
    (cookies, debugged)
}

/// The `Set-Cookie`s for `XDEBUG_SESSION` of a response.
fn session_cookies(response: &support::Response) -> Vec<String> {
    response
        .headers_named("Set-Cookie")
        .into_iter()
        .filter(|c| c.starts_with("XDEBUG_SESSION="))
        .map(str::to_owned)
        .collect()
}

/// The request `answer` is debugged: Xdebug's session, let run to the end.
fn run_session(ide: &Ide, server: &Server) -> String {
    let mut session = ide
        .accept(Duration::from_secs(60))
        .unwrap_or_else(|| panic!("Xdebug never connected; log:\n{}", server.log()));
    let init = session.packet();
    assert!(init.contains("<init "), "{init}");
    session.stream.write_all(b"run -i 1\0").expect("send run");
    init
}

/// `XDEBUG_SESSION_STOP`, in the query or the form, is answered as
/// Xdebug answers it under php-cgi: the `XDEBUG_SESSION` cookie deleted,
/// with the same header; the request itself is debugged or not by its
/// other triggers (a session cookie sent with it still starts a session,
/// in Xdebug as here).
#[test]
fn session_stop_deletes_the_session_cookie_as_xdebug_does() {
    let ide = Ide::listen();
    let server = start(&xdebug_args(&ide), true);

    // With the session cookie still sent.
    let (want, debugged) = xdebug_reference("XDEBUG_SESSION_STOP=1", "XDEBUG_SESSION=1");
    assert!(debugged, "Xdebug debugs the request that stops the session");
    assert_eq!(
        want,
        ["XDEBUG_SESSION=deleted; expires=Thu, 01 Jan 1970 00:00:01 GMT; Max-Age=0; path=/; SameSite=Lax"]
    );
    let answer = get_later(
        &server,
        "/?XDEBUG_SESSION_STOP=1",
        "Cookie: XDEBUG_SESSION=1\r\n",
    );
    run_session(&ide, &server);
    let response = answer.join().expect("the request");
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(field(&response.text(), "debugger"), "on");
    assert_eq!(session_cookies(&response), want);

    // Without it: no session, the cookie deleted all the same.
    let (want_alone, debugged) = xdebug_reference("XDEBUG_SESSION_STOP", "");
    assert!(!debugged);
    assert_eq!(want_alone, want);
    let response = get_later(&server, "/?XDEBUG_SESSION_STOP", "")
        .join()
        .expect("the request");
    assert_eq!(field(&response.text(), "debugger"), "off");
    assert_eq!(session_cookies(&response), want);
    assert!(ide.accept(Duration::from_millis(500)).is_none());

    // Started and stopped at once: both, the deletion last, as Xdebug.
    let (want_both, _) = xdebug_reference("XDEBUG_SESSION_START=a&XDEBUG_SESSION_STOP=1", "");
    let answer = get_later(
        &server,
        "/?XDEBUG_SESSION_START=a&XDEBUG_SESSION_STOP=1",
        "",
    );
    run_session(&ide, &server);
    let response = answer.join().expect("the request");
    assert_eq!(session_cookies(&response), want_both);
    assert_eq!(want_both.len(), 2, "{want_both:?}");

    // In a form body.
    let form = "x=1&XDEBUG_SESSION_STOP=1";
    let response = request(
        server.addr,
        format!(
            "POST / HTTP/1.1\r\nHost: test\r\nContent-Type: application/x-www-form-urlencoded\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{form}",
            form.len()
        )
        .as_bytes(),
    );
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(session_cookies(&response), want);
    // A cookie of that name is not Xdebug's stop.
    let response = get_later(&server, "/", "Cookie: XDEBUG_SESSION_STOP=1\r\n")
        .join()
        .expect("the request");
    assert_eq!(session_cookies(&response), Vec::<String>::new());
}

/// A multipart POST of `parts` (name, file name, bytes) to `server`.
fn post_multipart(
    server: &Server,
    parts: &[(&str, Option<&str>, Vec<u8>)],
) -> std::thread::JoinHandle<support::Response> {
    let mut body = Vec::new();
    for (name, file, value) in parts {
        body.extend_from_slice(
            format!("--bNdRy\r\nContent-Disposition: form-data; name=\"{name}\"").as_bytes(),
        );
        if let Some(file) = file {
            body.extend_from_slice(
                format!("; filename=\"{file}\"\r\nContent-Type: application/octet-stream")
                    .as_bytes(),
            );
        }
        body.extend_from_slice(b"\r\n\r\n");
        body.extend_from_slice(value);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(b"--bNdRy--\r\n");
    let mut raw = format!(
        "POST / HTTP/1.1\r\nHost: test\r\nContent-Type: multipart/form-data; boundary=bNdRy\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    raw.extend_from_slice(&body);
    let addr = server.addr;
    std::thread::spawn(move || request(addr, &raw))
}

/// A trigger in a multipart form (a form with a file input, as a browser
/// sends it) starts the session, with the workers' own form parsing (the
/// Hearth extension) and with Hearth's: in a body held in memory, and in
/// one spooled to a file when it comes before a large upload.
/// Past the first 64 KiB, the workers' own parsing leaves it unseen.
#[test]
fn a_trigger_in_a_multipart_form_starts_the_session() {
    for extension in ["auto", "off"] {
        let ide = Ide::listen();
        let mut args = xdebug_args(&ide);
        args.extend(["--php-extension".to_owned(), extension.to_owned()]);
        let server = start(&args, true);
        let parsed_by_hearth = !server.log().contains("Hearth extension /");
        eprintln!("--php-extension {extension}: Hearth parses forms: {parsed_by_hearth}");

        // Small: held in memory.
        let answer = post_multipart(
            &server,
            &[
                ("title", None, b"a report".to_vec()),
                ("XDEBUG_SESSION_START", None, b"vscode".to_vec()),
                ("report", Some("report.txt"), b"lines".to_vec()),
            ],
        );
        let init = run_session(&ide, &server);
        assert!(init.contains("idekey=\"vscode\""), "{init}");
        let response = answer.join().expect("the request");
        assert_eq!(response.status, 200, "{}", response.text());
        assert_eq!(field(&response.text(), "debugger"), "on");
        assert_eq!(
            field(&response.text(), "files"),
            "1",
            "the upload reached PHP"
        );
        assert_eq!(
            session_cookies(&response),
            ["XDEBUG_SESSION=vscode; path=/; SameSite=Lax"]
        );

        // A large upload after the trigger: the body goes to a file.
        let big = vec![b'z'; 300 << 10];
        let answer = post_multipart(
            &server,
            &[
                ("XDEBUG_TRIGGER", None, b"1".to_vec()),
                ("XDEBUG_SESSION_STOP", None, b"1".to_vec()),
                ("video", Some("big.bin"), big.clone()),
            ],
        );
        run_session(&ide, &server);
        let response = answer.join().expect("the request");
        assert_eq!(response.status, 200, "{}", response.text());
        assert_eq!(field(&response.text(), "debugger"), "on");
        assert_eq!(field(&response.text(), "files"), "1");
        assert_eq!(session_cookies(&response).len(), 1, "the stop seen too");

        // The trigger after it: seen where Hearth parses the whole form,
        // past the part looked at where the workers parse it.
        let answer = post_multipart(
            &server,
            &[
                ("video", Some("big.bin"), big),
                ("XDEBUG_TRIGGER", None, b"1".to_vec()),
            ],
        );
        if parsed_by_hearth {
            run_session(&ide, &server);
        }
        let response = answer.join().expect("the request");
        assert_eq!(response.status, 200, "{}", response.text());
        assert_eq!(
            field(&response.text(), "debugger"),
            if parsed_by_hearth { "on" } else { "off" }
        );
        if !parsed_by_hearth {
            // Xdebug in the worker finds the trigger in $_POST itself, but
            // only once the request's code has run: a session that begins
            // after the response, and ends at once.
            if let Some(mut late) = ide.accept(Duration::from_secs(2)) {
                assert!(late.packet().contains("<init "));
                let run = late.command("run -i 1");
                assert!(run.contains("status=\"stopping\""), "{run}");
                eprintln!("a session after the response, stopping at once");
            }
        }
        assert!(ide.accept(Duration::from_millis(500)).is_none());
    }
}
