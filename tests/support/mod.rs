//! Shared helpers for the integration tests: a real `hearth serve` process
//! and a small HTTP/1.1 client that shows responses exactly as sent.
//!
//! The client is written here rather than taken from a crate because the
//! tests need what clients hide: raw header order and case, malformed and
//! pipelined requests, and bodies read chunk by chunk.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repository root")
}

/// A fixture script under tests/fixtures.
pub fn fixture(name: &str) -> PathBuf {
    root().join("tests/fixtures").join(name)
}

/// The hearth binary under test.
pub fn hearth_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_hearth"))
}

/// The PHP binary workers use (HEARTH_TEST_PHP overrides).
/// Whether the suites run on the PHP library's own request startup and
/// output (HEARTH_TEST_PHP_EXTENSION=off) rather than the Hearth
/// extension's.
#[allow(dead_code)]
pub fn without_extension() -> bool {
    std::env::var("HEARTH_TEST_PHP_EXTENSION").is_ok_and(|v| v == "off")
}

pub fn php_binary() -> String {
    std::env::var("HEARTH_TEST_PHP").unwrap_or_else(|_| "php-cgi".into())
}

/// A running `hearth serve`, stopped when dropped.
pub struct Server {
    child: Child,
    pub addr: SocketAddr,
    log: Arc<Mutex<String>>,
}

impl Server {
    /// Starts `hearth serve SCRIPT` with two workers and `extra` flags, and
    /// waits until every worker is ready.
    pub fn start(script: &Path, extra: &[&str]) -> Server {
        let server = Server::spawn(script, extra);
        server.wait_until_ready();
        server
    }

    /// Waits for the "N of N workers ready" (or "1 of 1 worker ready") line.
    pub fn wait_until_ready(&self) {
        self.wait_for_ready_lines(1);
    }

    /// Waits until the log has said `n` times that every worker is ready
    /// (again, after failures).
    pub fn wait_for_ready_lines(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if self.log().lines().filter(|l| all_ready(l)).count() >= n {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("workers never became ready; log:\n{}", self.log());
    }

    /// Starts `hearth serve` without waiting for workers (for boot failures).
    pub fn spawn(script: &Path, extra: &[&str]) -> Server {
        let mut args: Vec<String> = vec![
            "serve".into(),
            script.to_string_lossy().into_owned(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--php".into(),
            php_binary(),
        ];
        if !extra.iter().any(|a| *a == "--workers" || *a == "-w") {
            args.push("--workers".into());
            args.push("2".into());
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        // HEARTH_TEST_PHP_EXTENSION=off runs the suites on the PHP
        // library's request startup (make test-fallback).
        if let Ok(choice) = std::env::var("HEARTH_TEST_PHP_EXTENSION") {
            if !extra.contains(&"--php-extension") {
                args.push("--php-extension".into());
                args.push(choice);
            }
        }
        Server::spawn_args(&args)
    }

    pub fn spawn_args(args: &[String]) -> Server {
        let mut args = args.to_vec();
        if args.first().is_some_and(|a| a == "serve") && !args.iter().any(|a| a == "--user") {
            args.extend(as_root());
        }
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_hearth"));
        cmd.args(&args);
        Server::spawn_command(cmd)
    }

    /// Starts `cmd`, which runs `hearth serve` (perhaps through a shell
    /// or another program, with its own environment), without waiting for
    /// workers. Nothing is added to its arguments.
    pub fn spawn_command(mut cmd: Command) -> Server {
        let mut child = cmd
            // Set in Hearth's own environment: it must not reach workers.
            .env("HEARTH_RESPONSES", "/nonexistent/hearth-test")
            .env("HEARTH_LOG", "debug,hyper=info")
            .env_remove("RUST_LOG")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start hearth");
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let stderr = child.stderr.take().expect("stderr");
        let sink = log.clone();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let line = strip_ansi(&line);
                // The line is in the log before the address is announced,
                // so a test reading the log next sees the start-up line.
                {
                    let mut log = sink.lock().unwrap_or_else(|e| e.into_inner());
                    log.push_str(&line);
                    log.push('\n');
                }
                if let Some(addr) = line
                    .split("on http://")
                    .nth(1)
                    .or_else(|| line.split("on https://").nth(1))
                    .and_then(|r| r.split_whitespace().next())
                {
                    if let (Some(tx), Ok(addr)) = (tx.take(), addr.parse::<SocketAddr>()) {
                        let _ = tx.send(addr);
                    }
                }
            }
        });
        let stdout = child.stdout.take().expect("stdout");
        std::thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = BufReader::new(stdout).read_to_end(&mut sink);
        });
        let addr = match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(addr) => addr,
            Err(_) => {
                let _ = child.kill();
                panic!(
                    "hearth did not start listening; log:\n{}",
                    log.lock().unwrap_or_else(|e| e.into_inner())
                );
            }
        };
        Server { child, addr, log }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Everything hearth logged so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Waits until the log contains `needle`.
    pub fn wait_for_log(&self, needle: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.log().contains(needle) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("log never contained {needle:?}; log:\n{}", self.log());
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends a signal to hearth.
    pub fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("kill");
        assert!(status.success());
    }

    /// Waits for hearth to exit and returns its exit code.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "hearth did not exit within {timeout:?}; log:\n{}",
            self.log()
        );
    }

    /// The pid of the worker that answers /pid (of tests/fixtures/app.php),
    /// once one answers: after a worker exits, its replacement's.
    pub fn serving_pid(&self) -> serde_json::Value {
        eventually(Duration::from_secs(10), "a worker to answer /pid", || {
            let r = self.get("/pid");
            (r.status == 200).then(|| r.json()["pid"].clone())
        })
    }

    pub fn get(&self, path: &str) -> Response {
        request(
            self.addr,
            &format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                .into_bytes(),
        )
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        stop_child(&mut self.child);
    }
}

/// Stops a hearth the test left running: SIGTERM, then SIGKILL after 10 s.
/// The admin listener's address (`--admin`), from the server's log.
pub fn admin_addr(server: &Server) -> SocketAddr {
    server.wait_for_log("admin endpoints at", Duration::from_secs(10));
    server
        .log()
        .split("admin endpoints at http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .and_then(|a| a.parse().ok())
        .expect("admin address in the log")
}

pub fn stop_child(child: &mut Child) {
    if let Ok(None) = child.try_wait() {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Whether a log line says that every worker is ready: `2 of 2 workers
/// ready`.
pub fn all_ready(line: &str) -> bool {
    let Some(before) = line
        .split(" workers ready")
        .next()
        .filter(|_| line.contains(" workers ready"))
        .or_else(|| {
            line.split(" worker ready")
                .next()
                .filter(|_| line.contains(" worker ready"))
        })
    else {
        return false;
    };
    let words: Vec<&str> = before.split_whitespace().collect();
    matches!(words.as_slice(), [.., ready, "of", wanted] if ready == wanted)
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A response as it arrived.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub reason: String,
    /// Header names and values in arrival order, names as sent.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// The first header with this name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Every header with this name, in order.
    pub fn headers_named(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body parsed as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }
}

/// Sends raw bytes on a new connection and reads one response.
pub fn request(addr: SocketAddr, raw: &[u8]) -> Response {
    let mut conn = Connection::open(addr);
    conn.send(raw);
    conn.read_response(false)
}

/// A keep-alive connection.
pub struct Connection {
    reader: BufReader<TcpStream>,
}

impl Connection {
    pub fn open(addr: SocketAddr) -> Connection {
        let stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .expect("timeout");
        Connection {
            reader: BufReader::new(stream),
        }
    }

    pub fn send(&mut self, raw: &[u8]) {
        self.reader.get_mut().write_all(raw).expect("send");
    }

    /// GET on this connection, keeping it open.
    pub fn get(&mut self, path: &str, extra_headers: &str) -> Response {
        self.send(
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{extra_headers}\r\n").as_bytes(),
        );
        self.read_response(false)
    }

    /// Reads the status line and headers.
    pub fn read_head(&mut self) -> Response {
        let mut head = Vec::new();
        loop {
            let mut line = Vec::new();
            let n = self.reader.read_until(b'\n', &mut line).expect("read head");
            assert!(
                n > 0,
                "connection closed before a response; got {:?}",
                String::from_utf8_lossy(&head)
            );
            head.extend_from_slice(&line);
            if line == b"\r\n" || line == b"\n" {
                break;
            }
        }
        let mut headers = [httparse::EMPTY_HEADER; 128];
        let mut parsed = httparse::Response::new(&mut headers);
        parsed.parse(&head).expect("parse response head");
        Response {
            status: parsed.code.expect("status"),
            reason: parsed.reason.unwrap_or("").to_owned(),
            headers: parsed
                .headers
                .iter()
                .map(|h| {
                    (
                        h.name.to_owned(),
                        String::from_utf8_lossy(h.value).into_owned(),
                    )
                })
                .collect(),
            body: Vec::new(),
        }
    }

    /// Reads a whole response; `head_request` when it answers a HEAD.
    pub fn read_response(&mut self, head_request: bool) -> Response {
        let mut response = self.read_head();
        if head_request || response.status == 204 || response.status == 304 || response.status < 200
        {
            return response;
        }
        if response
            .header("transfer-encoding")
            .is_some_and(|te| te.eq_ignore_ascii_case("chunked"))
        {
            while let Some(chunk) = self.read_chunk() {
                response.body.extend_from_slice(&chunk);
            }
        } else if let Some(len) = response.header("content-length") {
            let len: usize = len.trim().parse().expect("content-length");
            let mut body = vec![0; len];
            self.reader.read_exact(&mut body).expect("read body");
            response.body = body;
        } else {
            self.reader
                .read_to_end(&mut response.body)
                .expect("read body to close");
        }
        response
    }

    /// The next chunk of a chunked body, None after the last.
    pub fn read_chunk(&mut self) -> Option<Vec<u8>> {
        let mut size_line = String::new();
        self.reader.read_line(&mut size_line).expect("chunk size");
        let size = usize::from_str_radix(size_line.trim().split(';').next().unwrap_or(""), 16)
            .unwrap_or_else(|_| panic!("bad chunk size line {size_line:?}"));
        if size == 0 {
            let mut trailer = String::new();
            loop {
                trailer.clear();
                self.reader.read_line(&mut trailer).expect("trailer");
                if trailer == "\r\n" || trailer.is_empty() {
                    break;
                }
            }
            return None;
        }
        let mut chunk = vec![0; size];
        self.reader.read_exact(&mut chunk).expect("chunk");
        let mut crlf = [0u8; 2];
        self.reader.read_exact(&mut crlf).expect("chunk end");
        Some(chunk)
    }

    /// Whether the server closed the connection (reads end of file).
    pub fn is_closed(&mut self) -> bool {
        let mut byte = [0u8; 1];
        matches!(self.reader.read(&mut byte), Ok(0) | Err(_))
    }
}

/// One part of a multipart body: field name, file name (None for a plain
/// field), content type, bytes.
pub type Part<'a> = (&'a str, Option<&'a str>, Option<&'a str>, &'a [u8]);

/// A request built field by field.
#[derive(Debug, Clone)]
pub struct Req {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Req {
    pub fn new(method: &str, path: &str) -> Req {
        Req {
            method: method.into(),
            path: path.into(),
            headers: vec![("Host".into(), "localhost".into())],
            body: Vec::new(),
        }
    }

    pub fn header(mut self, name: &str, value: &str) -> Req {
        self.headers.push((name.into(), value.into()));
        self
    }

    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Req {
        self.body = body.into();
        self
    }

    /// An application/x-www-form-urlencoded body.
    pub fn form(self, body: &str) -> Req {
        self.header("Content-Type", "application/x-www-form-urlencoded")
            .body(body)
    }

    /// A multipart/form-data body: (name, filename, content type, bytes).
    pub fn multipart(self, parts: &[Part<'_>]) -> Req {
        let boundary = "----hearth-test-boundary-7MA4YWxkTrZu0gW";
        let mut body = Vec::new();
        for (name, filename, ctype, data) in parts {
            body.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
            match filename {
                Some(f) => body.extend_from_slice(
                    format!(
                        "Content-Disposition: form-data; name=\"{name}\"; filename=\"{f}\"\r\n"
                    )
                    .as_bytes(),
                ),
                None => body.extend_from_slice(
                    format!("Content-Disposition: form-data; name=\"{name}\"\r\n").as_bytes(),
                ),
            }
            if let Some(ct) = ctype {
                body.extend_from_slice(format!("Content-Type: {ct}\r\n").as_bytes());
            }
            body.extend_from_slice(b"\r\n");
            body.extend_from_slice(data);
            body.extend_from_slice(b"\r\n");
        }
        body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
        self.header(
            "Content-Type",
            &format!("multipart/form-data; boundary={boundary}"),
        )
        .body(body)
    }

    pub fn bytes(&self) -> Vec<u8> {
        let mut out = format!("{} {} HTTP/1.1\r\n", self.method, self.path).into_bytes();
        for (n, v) in &self.headers {
            out.extend_from_slice(format!("{n}: {v}\r\n").as_bytes());
        }
        let chunked = self
            .headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("transfer-encoding"));
        if !chunked && (!self.body.is_empty() || self.method == "POST" || self.method == "PUT") {
            out.extend_from_slice(format!("Content-Length: {}\r\n", self.body.len()).as_bytes());
        }
        out.extend_from_slice(b"Connection: close\r\n\r\n");
        out.extend_from_slice(&self.body);
        out
    }

    pub fn send(&self, addr: SocketAddr) -> Response {
        let mut conn = Connection::open(addr);
        conn.send(&self.bytes());
        conn.read_response(self.method == "HEAD")
    }
}

/// Cookies from Set-Cookie headers, as a browser would keep them: a
/// cookie set with `Max-Age=0` (how PHP deletes one) is forgotten.
#[derive(Debug, Default, Clone)]
pub struct CookieJar(BTreeMap<String, String>);

impl CookieJar {
    pub fn store(&mut self, response: &Response) {
        for set in response.headers_named("set-cookie") {
            let mut parts = set.split(';');
            let pair = parts.next().unwrap_or("");
            let expired = parts.any(|a| a.trim().eq_ignore_ascii_case("max-age=0"));
            if let Some((name, value)) = pair.split_once('=') {
                if expired {
                    self.0.remove(name.trim());
                } else {
                    self.0
                        .insert(name.trim().to_owned(), value.trim().to_owned());
                }
            }
        }
    }

    pub fn header(&self) -> String {
        self.0
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }
}

/// Polls `f` until it returns Some, or panics after `timeout`.
pub fn eventually<T>(timeout: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Runs `hearth ARGS...` (a client command such as `reload` or `status`)
/// to completion.
pub fn ctl(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_hearth"))
        .args(args)
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .output()
        .expect("run hearth")
}

/// The status report of the server with this control socket, as
/// `hearth status --json` prints it.
pub fn status_json(socket: &Path) -> serde_json::Value {
    let out = ctl(&[
        "status",
        "--control-socket",
        &socket.to_string_lossy(),
        "--json",
    ]);
    assert!(
        out.status.success(),
        "hearth status failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("status JSON")
}

/// `--user root` when the tests run as root (as in CI): `hearth serve`
/// refuses to run PHP as root unless told to.
pub fn as_root() -> Vec<String> {
    if rustix::process::geteuid().is_root() {
        vec!["--user".into(), "root".into()]
    } else {
        Vec::new()
    }
}

/// A private temporary directory, removed on drop.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

/// A temporary directory that every user can enter and read (mode 0755),
/// for files that workers running as another user need.
pub fn reachable_tempdir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempdir();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    dir
}

/// Copies a file or a directory tree into an existing directory, readable
/// by every user (files 0644, directories 0755) whatever the modes and
/// umask of this checkout.
pub fn copy_tree(from: &Path, to: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    if from.is_dir() {
        std::fs::create_dir_all(to).expect("mkdir");
        std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        for entry in std::fs::read_dir(from).expect("read dir") {
            let entry = entry.expect("entry");
            copy_tree(&entry.path(), &to.join(entry.file_name()));
        }
    } else {
        std::fs::copy(from, to).expect("copy");
        std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    }
}

/// Runs a command to its end, with its output; panics (after killing it)
/// if it has not ended within `timeout`.
pub fn output_within(cmd: &mut Command, timeout: Duration) -> std::process::Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut out = Vec::new();
            let _ = pipe.read_to_end(&mut out);
            out
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("stdout")));
    let stderr = drain(Box::new(child.stderr.take().expect("stderr")));
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            let err = stderr.join().unwrap_or_default();
            panic!(
                "{cmd:?} did not end within {timeout:?}; stderr:\n{}",
                String::from_utf8_lossy(&err)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    std::process::Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    }
}

/// A field of /proc/PID/status, in KiB (VmRSS, VmHWM).
pub fn vm_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|l| l.trim_start_matches(':').split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in {status}"))
}
