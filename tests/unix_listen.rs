//! `hearth serve --listen unix:PATH`: HTTP on a unix socket for a proxy
//! on the same host, in worker mode and classic mode, with `$_SERVER` as
//! nginx gives it for `listen unix:` (checked against nginx 1.22:
//! `REMOTE_ADDR=unix:`, `SERVER_ADDR=unix:PATH`, no ports); the socket
//! file's life (mode, stale file replaced, non-socket refused, removed on
//! stop).

mod support;

use std::io::{BufRead as _, BufReader};
use std::os::unix::fs::{FileTypeExt as _, PermissionsExt as _};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::{as_root, eventually, fixture, php_binary};

/// A `hearth serve` started with arguments of the test's own, its log
/// collected; stopped (SIGTERM) when dropped.
struct Hearth {
    child: Child,
    log: Arc<Mutex<String>>,
}

impl Hearth {
    fn spawn(args: &[&str]) -> Hearth {
        let mut cmd = Command::new(support::hearth_bin());
        cmd.args(args).args(as_root());
        Hearth::spawn_command(cmd)
    }

    fn spawn_command(mut cmd: Command) -> Hearth {
        let mut child = cmd
            .env("HEARTH_LOG", "debug,hyper=info")
            .env_remove("RUST_LOG")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start hearth");
        let log = Arc::new(Mutex::new(String::new()));
        let sink = log.clone();
        let stderr = child.stderr.take().expect("stderr");
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let mut log = sink.lock().unwrap_or_else(|e| e.into_inner());
                log.push_str(&line);
                log.push('\n');
            }
        });
        Hearth { child, log }
    }

    fn log(&self) -> String {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn wait_until_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if self.log().lines().any(support::all_ready) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("workers never became ready; log:\n{}", self.log());
    }

    fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("kill");
        assert!(status.success());
    }

    /// Waits for hearth to exit; its exit code.
    fn wait_exit(&mut self) -> Option<i32> {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                // The log thread has the last lines once stderr is closed.
                std::thread::sleep(Duration::from_millis(50));
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("hearth did not exit; log:\n{}", self.log());
    }

    fn stop(&mut self) {
        self.signal("TERM");
        assert_eq!(self.wait_exit(), Some(0), "log:\n{}", self.log());
    }
}

impl Drop for Hearth {
    fn drop(&mut self) {
        support::stop_child(&mut self.child);
    }
}

/// A response: status, headers (names lowercased), body.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Sends `raw` (a request with `Connection: close`) on `stream` and reads
/// the response to the end of the connection.
fn exchange<S: std::io::Read + std::io::Write>(mut stream: S, raw: &[u8]) -> Answer {
    stream.write_all(raw).expect("send");
    let mut all = Vec::new();
    stream.read_to_end(&mut all).expect("read response");
    let end = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no response head in {:?}", String::from_utf8_lossy(&all)));
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut head = httparse::Response::new(&mut headers);
    head.parse(&all[..end + 4]).expect("response head");
    let headers: Vec<(String, String)> = head
        .headers
        .iter()
        .map(|h| {
            (
                h.name.to_ascii_lowercase(),
                String::from_utf8_lossy(h.value).into_owned(),
            )
        })
        .collect();
    let status = head.code.expect("status");
    let mut body = all[end + 4..].to_vec();
    if headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"))
    {
        body = dechunk(&body);
    }
    Answer {
        status,
        headers,
        body,
    }
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line_end = data
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("chunk size");
        let size = usize::from_str_radix(
            std::str::from_utf8(&data[..line_end]).expect("size").trim(),
            16,
        )
        .expect("chunk size");
        data = &data[line_end + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}

fn unix_get(socket: &Path, path: &str, extra: &str) -> Answer {
    let stream = UnixStream::connect(socket).expect("connect to the unix socket");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    exchange(
        stream,
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{extra}Connection: close\r\n\r\n")
            .as_bytes(),
    )
}

/// `$_SERVER` of a request for `/env` over the socket.
fn server_vars(socket: &Path, extra: &str) -> serde_json::Value {
    let answer = unix_get(socket, "/env", extra);
    assert_eq!(
        answer.status,
        200,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    let json = answer.json();
    // Worker mode's fixture wraps it; classic mode's env.php does not.
    match json.get("server") {
        Some(server) => server.clone(),
        None => json,
    }
}

/// What nginx gives PHP for a request over its `listen unix:PATH`.
fn assert_unix_vars(vars: &serde_json::Value, socket: &Path) {
    assert_eq!(vars["REMOTE_ADDR"], "unix:", "{vars}");
    assert_eq!(vars["REMOTE_PORT"], "", "{vars}");
    assert_eq!(
        vars["SERVER_ADDR"],
        format!("unix:{}", socket.display()),
        "{vars}"
    );
    assert_eq!(vars["SERVER_PORT"], "", "{vars}");
    assert_eq!(vars["REQUEST_SCHEME"], "http", "{vars}");
    assert!(vars.get("HTTPS").is_none(), "{vars}");
}

const FORWARDED: &str = "X-Forwarded-For: 203.0.113.9\r\nX-Forwarded-Proto: https\r\n";

fn worker_args<'a>(socket: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["serve", "--listen", socket, "--workers", "2"];
    args.extend_from_slice(extra);
    args
}

fn php_args() -> Vec<String> {
    let mut args = vec!["--php".to_owned(), php_binary()];
    if let Ok(choice) = std::env::var("HEARTH_TEST_PHP_EXTENSION") {
        args.extend(["--php-extension".to_owned(), choice]);
    }
    args
}

fn start_workers(socket: &Path, extra: &[&str]) -> Hearth {
    let listen = format!("unix:{}", socket.display());
    let script = fixture("app.php");
    let script = script.to_string_lossy();
    let php = php_args();
    let mut args = worker_args(&listen, extra);
    args.insert(1, &script);
    args.extend(php.iter().map(String::as_str));
    let server = Hearth::spawn(&args);
    server.wait_until_ready();
    server
}

/// Worker mode over a unix socket: the socket is 0666 (nginx as www-data
/// can connect), `$_SERVER` is nginx's for `listen unix:`, forwarding
/// headers of an untrusted peer count for nothing, `hearth status` finds
/// the server by its address, the access log names the peer `unix:`, and
/// the socket file is gone after a stop.
#[test]
fn worker_mode_serves_over_a_unix_socket() {
    let dir = support::tempdir();
    let socket = dir.path().join("hearth.sock");
    let access_log = dir.path().join("access.log");
    let access_log_file = access_log.to_string_lossy().into_owned();
    let mut server = start_workers(
        &socket,
        &[
            "--access-log",
            "json",
            "--access-log-file",
            &access_log_file,
        ],
    );
    let meta = std::fs::symlink_metadata(&socket).expect("the socket file");
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o666);

    let vars = server_vars(&socket, FORWARDED);
    assert_unix_vars(&vars, &socket);
    assert_eq!(vars["HTTP_X_FORWARDED_FOR"], "203.0.113.9", "{vars}");
    let line = eventually(Duration::from_secs(10), "the access log line", || {
        let text = std::fs::read_to_string(&access_log).unwrap_or_default();
        text.lines().next().map(str::to_owned)
    });
    let line: serde_json::Value = serde_json::from_str(&line).expect("a JSON line");
    assert_eq!(line["remote_addr"], "unix:", "{line}");
    assert_eq!(line["remote_port"], serde_json::Value::Null, "{line}");

    let listen = format!("unix:{}", socket.display());
    let out = support::ctl(&["status", "--listen", &listen, "--json"]);
    assert!(
        out.status.success(),
        "hearth status: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).expect("status JSON");
    assert_eq!(status["listen"], listen.as_str());

    server.stop();
    assert!(
        !socket.exists(),
        "the socket file is left after a stop; log:\n{}",
        server.log()
    );
}

/// `--trusted-proxy unix:` (nginx's `set_real_ip_from unix:`): the proxy
/// on the socket says who the client is and that it used https.
#[test]
fn a_trusted_unix_peer_forwards_the_client() {
    let dir = support::tempdir();
    let socket = dir.path().join("h.sock");
    let _server = start_workers(&socket, &["--trusted-proxy", "unix:"]);
    let vars = server_vars(&socket, FORWARDED);
    assert_eq!(vars["REMOTE_ADDR"], "203.0.113.9", "{vars}");
    assert_eq!(vars["HTTPS"], "on", "{vars}");
    assert_eq!(vars["REQUEST_SCHEME"], "https", "{vars}");
    assert_eq!(vars["SERVER_ADDR"], format!("unix:{}", socket.display()));
    // Without forwarding headers: the socket's own values.
    assert_unix_vars(&server_vars(&socket, ""), &socket);
}

/// HTTP/2 with prior knowledge (`--h2c`) over the unix socket.
#[test]
fn h2c_over_a_unix_socket() {
    let dir = support::tempdir();
    let socket = dir.path().join("h2.sock");
    let _server = start_workers(&socket, &["--h2c"]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let body = runtime.block_on(async {
        let stream = tokio::net::UnixStream::connect(&socket)
            .await
            .expect("connect");
        let (client, connection) = h2::client::handshake(stream).await.expect("h2 handshake");
        tokio::spawn(async move {
            let _ = connection.await;
        });
        let request = http::Request::get("http://localhost/env")
            .body(())
            .expect("request");
        let mut client = client.ready().await.expect("ready");
        let (response, _) = client.send_request(request, true).expect("send");
        let response = tokio::time::timeout(Duration::from_secs(30), response)
            .await
            .expect("in time")
            .expect("response");
        assert_eq!(response.status(), 200);
        let mut body = response.into_body();
        let mut all = Vec::new();
        while let Some(chunk) = body.data().await {
            let chunk = chunk.expect("data");
            let _ = body.flow_control().release_capacity(chunk.len());
            all.extend_from_slice(&chunk);
        }
        all
    });
    let json: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!(json["server"]["SERVER_PROTOCOL"], "HTTP/2.0");
    assert_unix_vars(&json["server"], &socket);
}

/// A site for classic mode: a script that prints `$_SERVER`, and a
/// directory (for the redirect nginx makes to its slash).
fn classic_site() -> tempfile::TempDir {
    let root = support::reachable_tempdir();
    let env = root.path().join("env.php");
    std::fs::write(
        &env,
        "<?php header('Content-Type: application/json'); echo json_encode($_SERVER);\n",
    )
    .expect("write");
    std::fs::set_permissions(&env, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let sub = root.path().join("sub");
    std::fs::create_dir(&sub).expect("mkdir");
    std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    root
}

/// Classic mode over a unix socket: php-fpm gets nginx's values, the
/// redirect to a directory's slash has no port, trust works as in worker
/// mode, and the socket file is removed on stop.
#[test]
fn classic_mode_serves_over_a_unix_socket() {
    let site = classic_site();
    let dir = support::tempdir();
    let socket = dir.path().join("classic.sock");
    let listen = format!("unix:{}", socket.display());
    let root = site.path().to_string_lossy().into_owned();
    let mut server = Hearth::spawn(&[
        "serve",
        "--root",
        &root,
        "--listen",
        &listen,
        "--workers",
        "2",
        "--trusted-proxy",
        "unix:",
    ]);
    let answer = eventually(Duration::from_secs(30), "classic mode to answer", || {
        if !socket.exists() {
            return None;
        }
        let answer = unix_get(&socket, "/env.php", "");
        (answer.status == 200).then_some(answer)
    });
    let vars = answer.json();
    assert_unix_vars(&vars, &socket);
    assert_eq!(vars["SCRIPT_NAME"], "/env.php", "{vars}");

    let vars = unix_get(&socket, "/env.php", FORWARDED).json();
    assert_eq!(vars["REMOTE_ADDR"], "203.0.113.9", "{vars}");
    assert_eq!(vars["HTTPS"], "on", "{vars}");

    let moved = unix_get(&socket, "/sub", "");
    assert_eq!(moved.status, 301);
    assert_eq!(moved.header("location"), Some("http://localhost/sub/"));

    server.stop();
    assert!(!socket.exists(), "log:\n{}", server.log());
}

/// A socket file left behind by a server that is gone (a crash) is
/// replaced, and the new server answers on it.
#[test]
fn a_stale_socket_file_is_replaced() {
    let dir = support::tempdir();
    let socket = dir.path().join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&socket).expect("bind"));
    assert!(socket.exists(), "a closed listener leaves its file");
    let server = start_workers(&socket, &[]);
    assert!(server.log().contains("replacing the stale socket"));
    assert_eq!(unix_get(&socket, "/pid", "").status, 200);
}

/// A path that is not a socket is never removed: hearth refuses to start
/// and says why.
#[test]
fn a_path_that_is_not_a_socket_is_refused() {
    let dir = support::tempdir();
    let file = dir.path().join("precious.txt");
    std::fs::write(&file, "keep me\n").expect("write");
    let listen = format!("unix:{}", file.display());
    let script = fixture("app.php");
    let mut server = Hearth::spawn(&["serve", &script.to_string_lossy(), "--listen", &listen]);
    assert_ne!(server.wait_exit(), Some(0));
    let log = server.log();
    assert!(
        log.contains(&format!(
            "cannot listen on {listen}: the path exists and is not a socket"
        )),
        "{log}"
    );
    assert_eq!(std::fs::read_to_string(&file).expect("read"), "keep me\n");
}

/// A socket another server answers on is left alone: hearth refuses to
/// start.
#[test]
fn a_socket_in_use_is_refused() {
    let dir = support::tempdir();
    let socket = dir.path().join("busy.sock");
    let _other = std::os::unix::net::UnixListener::bind(&socket).expect("bind");
    let listen = format!("unix:{}", socket.display());
    let script = fixture("app.php");
    let mut server = Hearth::spawn(&["serve", &script.to_string_lossy(), "--listen", &listen]);
    assert_ne!(server.wait_exit(), Some(0));
    assert!(
        server.log().contains("a server is listening there"),
        "{}",
        server.log()
    );
    assert!(socket.exists());
}

// ---------------------------------------------------------------------
// systemd socket activation and readiness notification.

/// A `hearth serve` command that inherits `listener` as systemd passes
/// it: at fd 3, with `LISTEN_FDS=1` and `LISTEN_PID` the pid of hearth.
/// The descriptor is put in place in `pre_exec`; `LISTEN_PID` is set by a
/// shell that then execs hearth (`$$` is the pid hearth gets), since
/// setting a variable between fork and exec is not async-signal-safe.
#[allow(unsafe_code)]
fn activated(listener: &impl std::os::fd::AsRawFd, args: &[&str]) -> Command {
    use std::os::unix::process::CommandExt as _;
    let fd = listener.as_raw_fd();
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg("LISTEN_PID=$$ exec \"$0\" \"$@\"")
        .arg(support::hearth_bin())
        .args(args)
        .args(as_root())
        .env("LISTEN_FDS", "1");
    // SAFETY: between fork and exec only dup2 and fcntl run, both
    // async-signal-safe system calls; nothing is allocated.
    unsafe {
        cmd.pre_exec(move || {
            if fd == 3 {
                // dup2 onto itself keeps close-on-exec: clear it.
                let flags = libc::fcntl(3, libc::F_GETFD);
                if flags < 0 || libc::fcntl(3, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            } else if libc::dup2(fd, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd
}

fn worker_serve_args(script: &str) -> Vec<String> {
    let mut args = vec![
        "serve".to_owned(),
        script.to_owned(),
        "--workers".to_owned(),
        "2".to_owned(),
    ];
    args.extend(php_args());
    args
}

fn tcp_get(addr: std::net::SocketAddr, path: &str) -> Answer {
    let stream = std::net::TcpStream::connect(addr).expect("connect: never refused");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    exchange(
        stream,
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes(),
    )
}

/// Socket activation on TCP: hearth serves on the socket it inherits
/// (not on `--listen`), and a restart refuses nothing: a connection made
/// and a request sent while no hearth runs wait on the socket, which the
/// test (as systemd) holds, and the next hearth answers them.
#[test]
fn an_inherited_tcp_socket_is_served_across_restarts() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("address");
    let script = fixture("app.php");
    let args = worker_serve_args(&script.to_string_lossy());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut first = Hearth::spawn_command(activated(&listener, &args));
    first.wait_until_ready();
    assert!(
        first
            .log()
            .contains(&format!("listening on {addr}, the socket systemd passed")),
        "{}",
        first.log()
    );
    let before = tcp_get(addr, "/pid");
    assert_eq!(before.status, 200);
    let first_pid = before.json()["pid"].clone();
    let listen = addr.to_string();
    let out = support::ctl(&["status", "--listen", &listen, "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    first.stop();

    // Nobody serves now: the connection is made (never refused) and the
    // request waits in the socket's backlog.
    let mut waiting = std::net::TcpStream::connect(addr).expect("connect: never refused");
    waiting
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    std::io::Write::write_all(
        &mut waiting,
        b"GET /pid HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    )
    .expect("send");
    let mut second = Hearth::spawn_command(activated(&listener, &args));
    let answer = exchange(waiting, b"");
    assert_eq!(
        answer.status,
        200,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    assert_ne!(answer.json()["pid"], first_pid, "served by the next hearth");
    second.stop();
}

/// Socket activation on a unix socket: served with the socket's path as
/// `SERVER_ADDR`, and the file, systemd's, is left in place on stop.
#[test]
fn an_inherited_unix_socket_is_served_and_left_in_place() {
    let dir = support::tempdir();
    let socket = dir.path().join("activated.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).expect("bind");
    let script = fixture("app.php");
    let args = worker_serve_args(&script.to_string_lossy());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut server = Hearth::spawn_command(activated(&listener, &args));
    server.wait_until_ready();
    let vars = server_vars(&socket, "");
    assert_unix_vars(&vars, &socket);
    server.stop();
    assert!(socket.exists(), "the inherited socket's file was removed");
    // Still systemd's (the test's) socket: the next hearth serves on it.
    let server = Hearth::spawn_command(activated(&listener, &args));
    server.wait_until_ready();
    assert_eq!(unix_get(&socket, "/pid", "").status, 200);
}

/// Type=notify: hearth says READY=1 on NOTIFY_SOCKET once its workers are
/// ready, RELOADING=1 then READY=1 around a reload, STOPPING=1 when it
/// stops; and the variable never reaches PHP.
#[test]
fn systemd_hears_ready_reloading_and_stopping() {
    let dir = support::tempdir();
    let notify = dir.path().join("notify.sock");
    let receiver = std::os::unix::net::UnixDatagram::bind(&notify).expect("bind");
    receiver
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let next = || {
        let mut buf = [0u8; 4096];
        let n = receiver.recv(&mut buf).expect("a notification in time");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    let socket = dir.path().join("h.sock");
    let listen = format!("unix:{}", socket.display());
    let script = fixture("app.php");
    let mut args = worker_serve_args(&script.to_string_lossy());
    args.extend(["--listen".to_owned(), listen.clone()]);
    let mut cmd = Command::new(support::hearth_bin());
    cmd.args(&args)
        .args(as_root())
        .env("NOTIFY_SOCKET", &notify);
    let mut server = Hearth::spawn_command(cmd);

    let ready = next();
    assert!(ready.starts_with("READY=1\n"), "{ready:?}");
    // Told only once every worker is ready: the pool says so now.
    let out = support::ctl(&["status", "--listen", &listen, "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).expect("status JSON");
    assert_eq!(
        status["pool"]["live"], 2,
        "READY=1 before the workers: {status}"
    );
    let vars = server_vars(&socket, "");
    assert!(
        vars.get("PATH").is_some(),
        "the environment is in $_SERVER: {vars}"
    );
    assert!(vars.get("NOTIFY_SOCKET").is_none(), "{vars}");

    let out = support::ctl(&["reload", "--listen", &listen]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reloading = next();
    assert!(
        reloading.starts_with("RELOADING=1\nMONOTONIC_USEC="),
        "{reloading:?}"
    );
    assert_eq!(next(), "READY=1\n");

    server.signal("TERM");
    assert_eq!(next(), "STOPPING=1\n");
    assert_eq!(server.wait_exit(), Some(0));
}

/// A mixed site over a unix socket: the front controller in the workers
/// and another script in php-fpm both get nginx's values for it.
#[test]
fn a_mixed_site_serves_over_a_unix_socket() {
    let site = support::reachable_tempdir();
    let autoload = support::root().join("php/autoload.php");
    let write = |name: &str, text: &str| {
        let path = site.path().join(name);
        std::fs::write(&path, text).expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    };
    write(
        "index.php",
        &format!(
            "<?php require {autoload:?};\n\
             Hearth\\Worker::serve(static function (): void {{\n\
             header('Content-Type: application/json');\n\
             echo json_encode(['runtime' => PHP_SAPI, 'server' => $_SERVER]);\n}});\n"
        ),
    );
    write(
        "env.php",
        "<?php header('Content-Type: application/json');\n\
         echo json_encode(['runtime' => PHP_SAPI, 'server' => $_SERVER]);\n",
    );
    let dir = support::tempdir();
    let socket = dir.path().join("mixed.sock");
    let root = site.path().to_string_lossy().into_owned();
    let script = site.path().join("index.php");
    let listen = format!("unix:{}", socket.display());
    let mut args = vec![
        "serve".to_owned(),
        script.to_string_lossy().into_owned(),
        "--root".to_owned(),
        root,
        "--workers".to_owned(),
        "1".to_owned(),
        "--listen".to_owned(),
        listen,
    ];
    args.extend(php_args());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = Hearth::spawn(&args);
    server.wait_until_ready();
    let worker = unix_get(&socket, "/some/route", "");
    assert_eq!(
        worker.status,
        200,
        "{}",
        String::from_utf8_lossy(&worker.body)
    );
    let worker = worker.json();
    assert_ne!(worker["runtime"], "fpm-fcgi");
    assert_unix_vars(&worker["server"], &socket);
    let classic = unix_get(&socket, "/env.php", "");
    assert_eq!(
        classic.status,
        200,
        "{}",
        String::from_utf8_lossy(&classic.body)
    );
    let classic = classic.json();
    assert_eq!(classic["runtime"], "fpm-fcgi");
    assert_unix_vars(&classic["server"], &socket);
}

/// The setup the docs give: nginx (its workers as www-data) in front on
/// TCP, `proxy_pass http://unix:...`, `--trusted-proxy unix:`. nginx
/// reaches the 0666 socket, and PHP sees the client nginx saw and the
/// https it was told of.
#[test]
fn nginx_in_front_proxies_to_the_unix_socket() {
    let nginx = ["/usr/sbin/nginx", "/usr/bin/nginx"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("nginx is installed (apt-get install nginx)");
    // Reachable by nginx's workers (www-data): the directory is 0755.
    let dir = support::reachable_tempdir();
    let socket = dir.path().join("hearth.sock");
    let _hearth = start_workers(&socket, &["--trusted-proxy", "unix:"]);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let d = dir.path().display();
    let conf = dir.path().join("nginx.conf");
    std::fs::write(
        &conf,
        format!(
            "daemon off;\nuser www-data;\nworker_processes 1;\npid {d}/nginx.pid;\n\
             error_log {d}/error.log;\nevents {{}}\nhttp {{\n  access_log off;\n\
             client_body_temp_path {d}/body; proxy_temp_path {d}/proxy;\n\
             fastcgi_temp_path {d}/fastcgi; uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;\n\
             server {{\n    listen 127.0.0.1:{port};\n    location / {{\n\
             proxy_pass http://unix:{sock}:;\n\
             proxy_set_header Host $host;\n\
             proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;\n\
             proxy_set_header X-Forwarded-Proto https;\n    }}\n  }}\n}}\n",
            sock = socket.display()
        ),
    )
    .expect("nginx.conf");
    let mut nginx = Command::new(nginx)
        .args(["-c", &conf.to_string_lossy(), "-p", &d.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start nginx");
    let front = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let answer = eventually(Duration::from_secs(10), "nginx to answer", || {
        let stream = std::net::TcpStream::connect(front).ok()?;
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        Some(exchange(
            stream,
            b"GET /env HTTP/1.1\r\nHost: localhost\r\nX-Forwarded-For: 203.0.113.9\r\n\
              Connection: close\r\n\r\n",
        ))
    });
    let _ = Command::new("kill")
        .arg("-QUIT")
        .arg(nginx.id().to_string())
        .status();
    let _ = nginx.wait();
    assert_eq!(
        answer.status,
        200,
        "{}; nginx's error log:\n{}",
        String::from_utf8_lossy(&answer.body),
        std::fs::read_to_string(dir.path().join("error.log")).unwrap_or_default()
    );
    let vars = &answer.json()["server"];
    // nginx's $proxy_add_x_forwarded_for: the client's header, then the
    // peer nginx saw; the right-most hop that is not a trusted proxy is
    // the client (only the unix socket's peer is trusted here).
    assert_eq!(
        vars["HTTP_X_FORWARDED_FOR"], "203.0.113.9, 127.0.0.1",
        "{vars}"
    );
    assert_eq!(vars["REMOTE_ADDR"], "127.0.0.1", "{vars}");
    assert_eq!(vars["HTTPS"], "on", "{vars}");
    assert_eq!(vars["SERVER_ADDR"], format!("unix:{}", socket.display()));
}

/// Classic mode with Type=notify: hearth says READY=1 once php-fpm runs,
/// and only hearth speaks on NOTIFY_SOCKET: php-fpm (Debian's is built
/// with systemd support) never sees the variable, so its own READY=1 and
/// status lines never come first or in between.
#[test]
fn in_classic_mode_only_hearth_tells_systemd() {
    let site = classic_site();
    let dir = support::tempdir();
    let notify = dir.path().join("notify.sock");
    let receiver = std::os::unix::net::UnixDatagram::bind(&notify).expect("bind");
    receiver
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let next = || {
        let mut buf = [0u8; 4096];
        let n = receiver.recv(&mut buf).expect("a notification in time");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    let socket = dir.path().join("c.sock");
    let listen = format!("unix:{}", socket.display());
    let root = site.path().to_string_lossy().into_owned();
    let mut cmd = Command::new(support::hearth_bin());
    cmd.args([
        "serve",
        "--root",
        &root,
        "--listen",
        &listen,
        "--workers",
        "2",
    ])
    .args(as_root())
    .env("NOTIFY_SOCKET", &notify);
    let mut server = Hearth::spawn_command(cmd);
    assert_eq!(next(), "READY=1\nSTATUS=php-fpm started\n");
    let vars = unix_get(&socket, "/env.php", "").json();
    assert!(vars.get("NOTIFY_SOCKET").is_none(), "{vars}");
    let out = support::ctl(&["reload", "--listen", &listen]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(next().starts_with("RELOADING=1\n"));
    assert_eq!(next(), "READY=1\n");
    server.signal("TERM");
    assert_eq!(next(), "STOPPING=1\n");
    assert_eq!(server.wait_exit(), Some(0));
}

/// TLS over the unix socket works as over TCP (HTTPS from the
/// connection, HTTP/2 by ALPN), and plain HTTP on it gets nginx's 400.
#[test]
fn tls_over_a_unix_socket() {
    let made =
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("certificate");
    let dir = support::tempdir();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert, made.cert.pem()).expect("write cert");
    std::fs::write(&key, made.signing_key.serialize_pem()).expect("write key");
    let socket = dir.path().join("tls.sock");
    let (cert_arg, key_arg) = (cert.to_string_lossy(), key.to_string_lossy());
    let _server = start_workers(&socket, &["--tls-cert", &cert_arg, "--tls-key", &key_arg]);
    let out = support::output_within(
        Command::new("curl")
            .args(["-sS", "--http2", "--cacert", &cert_arg, "--unix-socket"])
            .arg(&socket)
            .args(["-w", "\n%{http_version}", "https://localhost/env"]),
        Duration::from_secs(30),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let (body, version) = text.rsplit_once('\n').expect("the version line");
    assert_eq!(version, "2");
    let json: serde_json::Value = serde_json::from_str(body).expect("JSON");
    let vars = &json["server"];
    assert_eq!(vars["HTTPS"], "on", "{vars}");
    assert_eq!(vars["REMOTE_ADDR"], "unix:", "{vars}");
    assert_eq!(vars["SERVER_ADDR"], format!("unix:{}", socket.display()));
    let plain = unix_get(&socket, "/env", "");
    assert_eq!(plain.status, 400);
    assert!(
        String::from_utf8_lossy(&plain.body).contains("plain HTTP request was sent to HTTPS port")
    );
}

/// Static files go out with sendfile(2) onto a unix socket as onto TCP:
/// the bytes on disk, whole and in a range, every one sent by the kernel
/// (`hearth_http_sendfile_bytes_total`).
#[test]
fn files_are_sent_by_the_kernel_over_a_unix_socket() {
    let dir = support::tempdir();
    let public = dir.path().join("public");
    std::fs::create_dir(&public).expect("mkdir");
    let data: Vec<u8> = (0..(2u32 << 20) + 3)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8 | 1)
        .collect();
    std::fs::write(public.join("big.bin"), &data).expect("write");
    let socket = dir.path().join("hearth.sock");
    let root = public.to_string_lossy();
    let server = start_workers(
        &socket,
        &[
            "--root",
            &root,
            "--classic",
            "off",
            "--admin",
            "127.0.0.1:0",
        ],
    );
    let whole = unix_get(&socket, "/big.bin", "");
    assert_eq!(whole.status, 200);
    assert!(whole.body == data, "{} bytes, differ", whole.body.len());
    let range = unix_get(&socket, "/big.bin", "Range: bytes=-5000\r\n");
    assert_eq!(range.status, 206);
    assert!(
        range.body[..] == data[data.len() - 5000..],
        "the range differs"
    );

    let admin: std::net::SocketAddr =
        eventually(Duration::from_secs(10), "the admin address", || {
            let log = server.log();
            let rest = log.split("admin endpoints at http://").nth(1)?;
            rest.split('/').next()?.parse().ok()
        });
    let metrics = support::request(
        admin,
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .text();
    let sent: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("hearth_http_sendfile_bytes_total "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no sendfile counter in\n{metrics}"));
    assert_eq!(sent, data.len() as u64 + 5000);
}
