//! The file offload: a worker's `X-Sendfile` or `X-Accel-Redirect`
//! response answered by Hearth with the file, over real HTTP with real
//! php-cgi workers. The refusal table is the point: no response may carry
//! the bytes of a file outside the `--sendfile-root`s, nor the header.

#[path = "support/mod.rs"]
mod support;

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use support::{Connection, Req, Response, Server};

/// In every file that must never be served.
const MARKER: &str = "HEARTH-OFFLOAD-SECRET-7c4a8d09";

/// A site: `files/` (the root, also mapped from `/protected/`), a secret
/// next to it, and a worker that answers with whatever header the query
/// string names.
struct Site {
    dir: tempfile::TempDir,
    /// The bytes of files/data.bin.
    data: Vec<u8>,
}

impl Site {
    fn new() -> Site {
        let dir = support::tempdir();
        let base = dir.path();
        let files = base.join("files");
        std::fs::create_dir_all(files.join("sub")).expect("set up the site");
        // Bytes that differ at every offset a range might pick.
        let data: Vec<u8> = (0..300_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect();
        std::fs::write(files.join("data.bin"), &data).expect("set up the site");
        std::fs::write(files.join("report.pdf"), b"%PDF-1.4 not really").expect("set up");
        std::fs::write(files.join("notes.txt"), "offloaded notes\n".repeat(1000)).expect("set up");
        std::fs::write(files.join("sub/inner.txt"), b"inner").expect("set up the site");
        std::fs::write(base.join("secret.txt"), MARKER).expect("set up the site");
        std::fs::create_dir(base.join("outside")).expect("set up the site");
        std::fs::write(base.join("outside/secret.txt"), MARKER).expect("set up the site");
        symlink(files.join("data.bin"), files.join("inside-link.bin")).expect("set up");
        symlink(base.join("secret.txt"), files.join("out-link.txt")).expect("set up");
        symlink(base.join("outside"), files.join("out-dir")).expect("set up");
        symlink("/dev/zero", files.join("zero-link")).expect("set up");
        let fifo = files.join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo");
        assert!(made.success(), "mkfifo");
        let worker = format!(
            r#"<?php
// {MARKER}: PHP source.
declare(strict_types=1);
require '{lib}';
Hearth\Worker::serve(static function (): void {{
    $path = parse_url($_SERVER['REQUEST_URI'], PHP_URL_PATH);
    if ($path === '/pid') {{
        echo getmypid();
        return;
    }}
    if ($path === '/type') {{
        header('Content-Type: application/json');
        echo json_encode([
            'type' => $_SERVER['HTTP_X_SENDFILE_TYPE'] ?? null,
            'mapping' => $_SERVER['HTTP_X_ACCEL_MAPPING'] ?? null,
        ]);
        return;
    }}
    if (isset($_GET['type'])) {{
        header('Content-Type: ' . $_GET['type']);
    }}
    header('Content-Disposition: attachment; filename="download.bin"');
    header('Cache-Control: private, max-age=60');
    header('X-App: kept');
    setcookie('offload', 'yes');
    if (isset($_GET['sendfile'])) {{
        header('X-Sendfile: ' . $_GET['sendfile']);
    }}
    if (isset($_GET['accel'])) {{
        header('X-Accel-Redirect: ' . $_GET['accel']);
        header('X-Accel-Buffering: no');
    }}
    if (isset($_GET['both'])) {{
        header('X-Accel-Redirect: /protected/report.pdf');
    }}
    // Never sent: the file is the body.
    echo 'APP-BODY-' . '{MARKER}';
    if (isset($_GET['flush'])) {{
        // A streamed response: its head goes out with the first flush.
        flush();
        echo str_repeat('APP-BODY', 100000);
    }}
}});
"#,
            lib = support::root().join("php/autoload.php").display()
        );
        std::fs::write(base.join("worker.php"), worker).expect("set up the site");
        Site { dir, data }
    }

    fn base(&self) -> &Path {
        self.dir.path()
    }

    fn files(&self) -> PathBuf {
        self.base().join("files")
    }

    fn worker(&self) -> PathBuf {
        self.base().join("worker.php")
    }

    /// `--sendfile-root files` and `--sendfile-root /protected/=files`.
    fn roots(&self) -> Vec<String> {
        let files = self.files().display().to_string();
        vec![
            "--sendfile-root".into(),
            files.clone(),
            "--sendfile-root".into(),
            format!("/protected/={files}"),
        ]
    }

    fn start(&self, extra: &[&str]) -> Server {
        let mut args: Vec<String> = self.roots();
        args.extend(extra.iter().map(|s| s.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Server::start(&self.worker(), &args)
    }
}

/// Every byte percent-encoded, so that the worker's `$_GET` holds `value`
/// exactly (a `%` in it included).
fn query(value: &str) -> String {
    value.bytes().map(|b| format!("%{b:02X}")).collect()
}

fn sendfile(path: &Path) -> String {
    format!("/download?sendfile={}", query(&path.display().to_string()))
}

fn accel(uri: &str) -> String {
    format!("/download?accel={}", query(uri))
}

fn get(server: &Server, target: &str, headers: &[(&str, &str)]) -> Response {
    let mut req = Req::new("GET", target);
    for (name, value) in headers {
        req = req.header(name, value);
    }
    req.send(server.addr)
}

/// The offload headers never reach the client.
fn assert_no_offload_headers(r: &Response) {
    for name in ["x-sendfile", "x-accel-redirect", "x-accel-buffering"] {
        assert_eq!(r.header(name), None, "{name} reached the client: {r:?}");
    }
}

/// A refused response: its status, no secret, no offload header, no app
/// body, and a log line naming the path and why.
fn assert_refused(server: &Server, r: &Response, status: u16, logged: &str, why: &str) {
    assert_eq!(r.status, status, "{}", r.text());
    assert!(!r.text().contains(MARKER), "the secret was served: {r:?}");
    assert!(!r.text().contains("APP-BODY"), "the app's body was sent");
    assert_no_offload_headers(r);
    support::eventually(Duration::from_secs(10), "the refusal's log line", || {
        server
            .log()
            .lines()
            .any(|l| l.contains("refused") && l.contains(logged) && l.contains(why))
            .then_some(())
    });
}

#[test]
fn an_offloaded_file_is_served_whole_with_the_app_headers() {
    let site = Site::new();
    let server = site.start(&[]);
    let r = get(&server, &sendfile(&site.files().join("data.bin")), &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.body == site.data, "the body is the file");
    assert_eq!(r.header("content-length"), Some("300000"));
    assert_eq!(r.header("accept-ranges"), Some("bytes"));
    assert!(r.header("etag").is_some_and(|e| e.starts_with('"')));
    assert!(r.header("last-modified").is_some());
    assert_eq!(r.header("content-type"), Some("application/octet-stream"));
    assert_eq!(
        r.header("content-disposition"),
        Some("attachment; filename=\"download.bin\"")
    );
    assert_eq!(r.header("cache-control"), Some("private, max-age=60"));
    assert_eq!(r.header("x-app"), Some("kept"));
    assert!(r
        .headers_named("set-cookie")
        .iter()
        .any(|c| c.starts_with("offload=yes")));
    assert_no_offload_headers(&r);

    // The type of the file's extension, unless the app set one.
    let pdf = get(&server, &sendfile(&site.files().join("report.pdf")), &[]);
    assert_eq!(pdf.header("content-type"), Some("application/pdf"));
    let typed = format!(
        "{}&type={}",
        sendfile(&site.files().join("data.bin")),
        query("video/mp4")
    );
    assert_eq!(
        get(&server, &typed, &[]).header("content-type"),
        Some("video/mp4")
    );

    // Compressed on the fly for a client that accepts it, as static files.
    let notes = sendfile(&site.files().join("notes.txt"));
    let gz = get(&server, &notes, &[("Accept-Encoding", "gzip")]);
    assert_eq!(gz.status, 200);
    assert_eq!(gz.header("content-encoding"), Some("gzip"));
    assert_eq!(gz.header("vary"), Some("Accept-Encoding"));
    assert!(gz.body.len() < 16_000);
    let mut text = String::new();
    flate2::read::GzDecoder::new(&gz.body[..])
        .read_to_string(&mut text)
        .expect("gzip");
    assert_eq!(text, "offloaded notes\n".repeat(1000));

    // X-Accel-Redirect through the /protected/ prefix, and a symlink
    // that stays under the root.
    let a = get(&server, &accel("/protected/data.bin"), &[]);
    assert_eq!(a.status, 200, "{}", a.text());
    assert!(a.body == site.data);
    assert_no_offload_headers(&a);
    let a = get(&server, &accel("/protected/sub/inner%2etxt?v=1"), &[]);
    assert_eq!((a.status, a.text().as_str()), (200, "inner"));
    let l = get(
        &server,
        &sendfile(&site.files().join("inside-link.bin")),
        &[],
    );
    assert!(l.status == 200 && l.body == site.data);

    // A response the app flushed: its body is dropped, the file sent.
    let flushed = format!("{}&flush=1", sendfile(&site.files().join("data.bin")));
    let f = get(&server, &flushed, &[]);
    assert!(f.status == 200 && f.body == site.data, "{}", f.status);
    assert_no_offload_headers(&f);
    // Both headers: X-Sendfile is used.
    let both = format!("{}&both=1", sendfile(&site.files().join("data.bin")));
    let b = get(&server, &both, &[]);
    assert!(b.status == 200 && b.body == site.data, "{}", b.status);
    assert_no_offload_headers(&b);

    // As nginx's internal redirect: a POST gets the file as a GET would.
    let p = Req::new("POST", &sendfile(&site.files().join("data.bin")))
        .form("a=1")
        .send(server.addr);
    assert!(p.status == 200 && p.body == site.data, "{}", p.status);
}

#[test]
fn ranges_and_conditional_requests_are_answered_as_for_static_files() {
    let site = Site::new();
    let server = site.start(&[]);
    let target = sendfile(&site.files().join("data.bin"));
    let r = get(&server, &target, &[("Range", "bytes=1000-1999")]);
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-range"), Some("bytes 1000-1999/300000"));
    assert!(r.body == site.data[1000..2000]);

    let suffix = get(&server, &target, &[("Range", "bytes=-500")]);
    assert_eq!(suffix.status, 206);
    assert!(suffix.body == site.data[299_500..]);
    let open = get(&server, &target, &[("Range", "bytes=299990-")]);
    assert!(open.status == 206 && open.body == site.data[299_990..]);

    // Several ranges: multipart/byteranges, as nginx sends them.
    let multi = get(&server, &target, &[("Range", "bytes=0-9,-5,100-109")]);
    assert_eq!(multi.status, 206);
    let kind = multi.header("content-type").expect("type").to_owned();
    let boundary = kind
        .strip_prefix("multipart/byteranges; boundary=")
        .unwrap_or_else(|| panic!("{kind}"));
    let mut expected = Vec::new();
    for (first, last) in [(0, 9), (299_995, 299_999), (100, 109)] {
        expected.extend_from_slice(
            format!(
                "\r\n--{boundary}\r\nContent-Type: application/octet-stream\r\n\
                 Content-Range: bytes {first}-{last}/300000\r\n\r\n"
            )
            .as_bytes(),
        );
        expected.extend_from_slice(&site.data[first..=last]);
    }
    expected.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    assert!(
        multi.body == expected,
        "{}",
        String::from_utf8_lossy(&multi.body)
    );
    assert_eq!(
        multi.header("content-length"),
        Some(expected.len().to_string().as_str())
    );
    // Overlapping ranges that add up to more than the file: the whole file.
    let over = get(&server, &target, &[("Range", "bytes=0-299999,0-10")]);
    assert!(over.status == 200 && over.body == site.data);

    let past = get(&server, &target, &[("Range", "bytes=300000-")]);
    assert_eq!(past.status, 416);
    assert_eq!(past.header("content-range"), Some("bytes */300000"));
    assert!(!past.text().contains("APP-BODY"));
    assert_no_offload_headers(&past);

    let whole = get(&server, &target, &[]);
    let etag = whole.header("etag").expect("etag").to_owned();
    let modified = whole.header("last-modified").expect("date").to_owned();

    let not_modified = get(&server, &target, &[("If-None-Match", &etag)]);
    assert_eq!(not_modified.status, 304);
    assert!(not_modified.body.is_empty());
    assert_eq!(not_modified.header("etag"), Some(etag.as_str()));
    assert_no_offload_headers(&not_modified);
    let since = get(&server, &target, &[("If-Modified-Since", &modified)]);
    assert_eq!(since.status, 304);
    let changed = get(&server, &target, &[("If-None-Match", "\"other\"")]);
    assert!(changed.status == 200 && changed.body == site.data);

    // If-Range: the range for the representation the client has, the
    // whole file for another.
    let range = [("Range", "bytes=0-99"), ("If-Range", etag.as_str())];
    let held = get(&server, &target, &range);
    assert!(held.status == 206 && held.body == site.data[..100]);
    let range = [("Range", "bytes=0-99"), ("If-Range", "\"stale\"")];
    let stale = get(&server, &target, &range);
    assert!(stale.status == 200 && stale.body == site.data);
    let range = [("Range", "bytes=0-99"), ("If-Range", modified.as_str())];
    assert_eq!(get(&server, &target, &range).status, 206);
}

#[test]
fn head_has_the_headers_and_no_body() {
    let site = Site::new();
    let server = site.start(&[]);
    let mut conn = Connection::open(server.addr);
    let target = sendfile(&site.files().join("data.bin"));
    conn.send(format!("HEAD {target} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes());
    let head = conn.read_response(true);
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), Some("300000"));
    assert!(head.header("etag").is_some() && head.header("last-modified").is_some());
    assert_eq!(head.header("accept-ranges"), Some("bytes"));
    assert_no_offload_headers(&head);
    // No body followed: the next response on the connection is whole.
    let next = conn.get("/pid", "");
    assert_eq!(next.status, 200);
    assert!(next.text().parse::<u32>().is_ok(), "{}", next.text());
}

#[test]
fn the_app_is_told_that_offload_is_available() {
    let site = Site::new();
    let server = site.start(&[]);
    let r = get(
        &server,
        "/type",
        &[
            ("X-Sendfile-Type", "X-Accel-Redirect"),
            ("X-Accel-Mapping", "/=/protected/"),
        ],
    );
    let told = r.json();
    assert_eq!(told["type"], "X-Sendfile", "{told}");
    assert_eq!(told["mapping"], serde_json::Value::Null, "{told}");
}

#[test]
fn without_a_root_the_header_is_dropped_and_the_request_gets_500() {
    let site = Site::new();
    let server = Server::start(&site.worker(), &[]);
    let r = get(&server, &sendfile(&site.files().join("data.bin")), &[]);
    assert_refused(&server, &r, 500, "data.bin", "set --sendfile-root");
    assert!(r.body != site.data);
    let a = get(&server, &accel("/protected/data.bin"), &[]);
    assert_refused(
        &server,
        &a,
        500,
        "/protected/data.bin",
        "no --sendfile-root",
    );
    // Hearth tells PHP nothing: the client's own header passes as before.
    let told = get(&server, "/type", &[("X-Sendfile-Type", "X-Sendfile")]).json();
    assert_eq!(
        told["type"], "X-Sendfile",
        "the client's own header passes as before"
    );
}

#[test]
fn a_root_that_is_not_a_directory_stops_hearth_at_start() {
    let site = Site::new();
    let missing = site.base().join("missing");
    let out = std::process::Command::new(support::hearth_bin())
        .args(["serve", &site.worker().display().to_string()])
        .arg("--sendfile-root")
        .arg(&missing)
        .output()
        .expect("run hearth");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--sendfile-root") && err.contains("missing"),
        "{err}"
    );
    let out = std::process::Command::new(support::hearth_bin())
        .args(["serve", &site.worker().display().to_string()])
        .arg("--sendfile-root")
        .arg(format!("/a/../b/={}", site.files().display()))
        .output()
        .expect("run hearth");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("prefix \"/a/../b/\""), "{err}");
}

/// One server for the refusal table: each vector in a test of its own.
fn refusing() -> (Site, Server) {
    let site = Site::new();
    let server = site.start(&[]);
    (site, server)
}

#[test]
fn refused_dot_dot_segments() {
    let (site, server) = refusing();
    let path = format!("{}/../secret.txt", site.files().display());
    let r = get(&server, &sendfile(Path::new(&path)), &[]);
    assert_refused(&server, &r, 404, "/../secret.txt", ". or .. segment");
    let r = get(&server, &accel("/protected/../secret.txt"), &[]);
    assert_refused(
        &server,
        &r,
        404,
        "/protected/../secret.txt",
        ". or .. segment",
    );
}

#[test]
fn refused_percent_encoded_dot_dot() {
    let (_site, server) = refusing();
    for uri in [
        "/protected/%2e%2e/secret.txt",
        "/protected/%2E%2E%2Fsecret.txt",
        "/protected/sub/..%2F..%2Fsecret.txt",
        "/protected/..%5csecret.txt",
    ] {
        let r = get(&server, &accel(uri), &[]);
        assert_refused(&server, &r, 404, uri, "segment");
    }
}

#[test]
fn refused_a_symlink_out_of_the_root() {
    let (site, server) = refusing();
    let r = get(&server, &sendfile(&site.files().join("out-link.txt")), &[]);
    assert_refused(
        &server,
        &r,
        403,
        "out-link.txt",
        "outside every --sendfile-root",
    );
    let r = get(&server, &accel("/protected/out-link.txt"), &[]);
    assert_refused(&server, &r, 403, "/protected/out-link.txt", "resolves to");
}

#[test]
fn refused_a_symlink_to_a_directory_outside() {
    let (site, server) = refusing();
    let target = site.files().join("out-dir/secret.txt");
    let r = get(&server, &sendfile(&target), &[]);
    assert_refused(&server, &r, 403, "out-dir/secret.txt", "resolves to");
    let r = get(&server, &accel("/protected/out-dir/secret.txt"), &[]);
    assert_refused(
        &server,
        &r,
        403,
        "/protected/out-dir/secret.txt",
        "resolves to",
    );
}

#[test]
fn refused_a_nul_byte() {
    let (_site, server) = refusing();
    let r = get(&server, &accel("/protected/secret.txt%00.bin"), &[]);
    assert_refused(&server, &r, 404, "secret.txt%00.bin", "NUL");
}

#[test]
fn refused_a_relative_path() {
    let (site, server) = refusing();
    for path in ["secret.txt", "files/data.bin", "../secret.txt"] {
        let r = get(&server, &sendfile(Path::new(path)), &[]);
        assert_refused(&server, &r, 404, path, "not an absolute path");
        assert!(r.body != site.data);
    }
    let r = get(&server, &accel("protected/data.bin"), &[]);
    assert_refused(&server, &r, 404, "protected/data.bin", "not a URI path");
}

#[test]
fn refused_an_absolute_path_outside_the_roots() {
    let (site, server) = refusing();
    let secret = site.base().join("secret.txt");
    let r = get(&server, &sendfile(&secret), &[]);
    assert_refused(
        &server,
        &r,
        403,
        "secret.txt",
        "outside every --sendfile-root",
    );
    // A sibling whose name starts with the root's.
    let sibling = PathBuf::from(format!("{}-other/x", site.files().display()));
    let r = get(&server, &sendfile(&sibling), &[]);
    assert_refused(
        &server,
        &r,
        403,
        "-other/x",
        "outside every --sendfile-root",
    );
    let r = get(&server, &sendfile(Path::new("/etc/passwd")), &[]);
    assert_refused(
        &server,
        &r,
        403,
        "/etc/passwd",
        "outside every --sendfile-root",
    );
    assert!(!r.text().contains("root:"));
    // A URI no root maps.
    let r = get(&server, &accel("/etc/passwd"), &[]);
    assert_refused(
        &server,
        &r,
        404,
        "/etc/passwd",
        "under no --sendfile-root prefix",
    );
}

#[test]
fn refused_a_directory() {
    let (site, server) = refusing();
    let r = get(&server, &sendfile(&site.files().join("sub")), &[]);
    assert_refused(&server, &r, 404, "sub", "a directory");
    let r = get(&server, &sendfile(&site.files()), &[]);
    assert_refused(&server, &r, 404, "files", "a directory");
    let r = get(&server, &accel("/protected/"), &[]);
    assert_refused(&server, &r, 404, "/protected/", "a directory");
}

#[test]
fn refused_a_fifo_or_a_device() {
    let (site, server) = refusing();
    // Opening the FIFO for reading would block until a writer came.
    let r = get(&server, &sendfile(&site.files().join("fifo")), &[]);
    assert_refused(&server, &r, 404, "fifo", "not a regular file");
    let r = get(&server, &sendfile(&site.files().join("zero-link")), &[]);
    assert_refused(&server, &r, 403, "zero-link", "resolves to /dev/zero");
    // A device node under the root itself (mknod needs root).
    let device = site.files().join("null-device");
    let made = std::process::Command::new("mknod")
        .arg(&device)
        .args(["c", "1", "3"])
        .status()
        .is_ok_and(|s| s.success());
    if made {
        let r = get(&server, &sendfile(&device), &[]);
        assert_refused(&server, &r, 404, "null-device", "not a regular file");
    } else {
        eprintln!("mknod is not allowed here: the device under the root is not tried");
    }
    let r = get(&server, &sendfile(&site.files().join("missing.bin")), &[]);
    assert_refused(&server, &r, 404, "missing.bin", "no such file");
}

/// VmRSS and VmHWM of a process, in KiB.
fn memory(pid: u32) -> (u64, u64) {
    (support::vm_kib(pid, "VmRSS"), support::vm_kib(pid, "VmHWM"))
}

const GIB: u64 = 1 << 30;

/// A 1 GiB sparse file under the root.
fn big_file(site: &Site) -> PathBuf {
    let path = site.files().join("big.bin");
    let file = std::fs::File::create(&path).expect("big file");
    file.set_len(GIB).expect("big file");
    path
}

/// Sends a GET and reads the response head off a raw socket, leaving the
/// body to be read.
fn start_download(server: &Server, target: &str) -> (TcpStream, Vec<u8>) {
    let mut stream = TcpStream::connect(server.addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .expect("timeout");
    stream
        .write_all(format!("GET {target} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
        .expect("send");
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(stream.read(&mut byte).expect("read head"), 1, "closed");
        head.push(byte[0]);
    }
    (stream, head)
}

/// utime + stime of a process so far, in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    // After the command's ")": the state is field 3, utime 14, stime 15.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .expect("stat")
        .1
        .split_whitespace()
        .collect();
    let ticks: u64 =
        fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
    ticks as f64 / rustix::param::clock_ticks_per_second() as f64
}

/// How files go out: sent by the kernel (the default), or read.
const MODES: [(&str, &[&str]); 2] = [("sendfile", &[]), ("read", &["--no-sendfile"])];

fn start_with(site: &Site, mode: &[&str], extra: &[&str]) -> Server {
    let args: Vec<&str> = mode.iter().chain(extra).copied().collect();
    site.start(&args)
}

/// A 1 GiB file sent by the kernel and read: the front's memory stays
/// flat either way, and sent by the kernel it costs the front far less
/// CPU (that is how sendfile shows it is used: strace is not at hand).
#[test]
fn a_1_gib_file_is_served_while_the_front_memory_stays_flat() {
    let site = Site::new();
    let big = big_file(&site);
    let mut cpu = Vec::new();
    for (how, mode) in MODES {
        let server = start_with(&site, mode, &["--workers", "1"]);
        // Warm up: one whole offloaded response first.
        let warm = get(&server, &sendfile(&site.files().join("data.bin")), &[]);
        assert!(warm.body == site.data);
        // The file in the page cache, as for the other way: what is
        // measured is sending it, not reading the disk.
        std::io::copy(
            &mut std::fs::File::open(&big).expect("big"),
            &mut std::io::sink(),
        )
        .expect("read the big file");
        let (rss_before, hwm_before) = memory(server.pid());
        let cpu_before = cpu_seconds(server.pid());

        let (mut stream, head) = start_download(&server, &sendfile(&big));
        let head = String::from_utf8_lossy(&head).to_lowercase();
        assert!(head.starts_with("http/1.1 200"), "{head}");
        assert!(head.contains(&format!("content-length: {GIB}")), "{head}");
        let mut buf = vec![0u8; 1 << 20];
        let (mut read, mut nonzero) = (0u64, false);
        let mut rss_during = 0;
        while read < GIB {
            let n = stream.read(&mut buf).expect("read body");
            assert!(n > 0, "{how}: cut after {read} bytes");
            nonzero |= buf[..n].iter().any(|&b| b != 0);
            read += n as u64;
            if read % (128 << 20) < n as u64 {
                rss_during = rss_during.max(memory(server.pid()).0);
            }
        }
        assert_eq!(read, GIB);
        assert!(!nonzero, "a sparse file reads as zeros");
        let used = cpu_seconds(server.pid()) - cpu_before;
        let (rss_after, hwm_after) = memory(server.pid());
        eprintln!(
            "{how}: hearth CPU for 1 GiB {used:.2} s; memory, KiB: before VmRSS {rss_before} \
             VmHWM {hwm_before}; during VmRSS (max of samples) {rss_during}; after VmRSS \
             {rss_after} VmHWM {hwm_after}"
        );
        // Flat: within a few tens of MiB, where holding the file would take 1 GiB.
        let slack = 32 << 10;
        assert!(
            hwm_after <= hwm_before.max(rss_before) + slack,
            "{how}: peak grew from {hwm_before} KiB to {hwm_after} KiB"
        );
        assert!(
            rss_after <= rss_before + slack,
            "{how}: {rss_before} -> {rss_after} KiB"
        );
        cpu.push(used);
    }
    let (kernel, read) = (cpu[0], cpu[1]);
    assert!(
        kernel * 2.0 < read,
        "sent by the kernel, 1 GiB cost the front {kernel:.2} s of CPU; read, {read:.2} s"
    );
}

/// Both ways of sending a file: the one worker serves others while a
/// client reads slowly, and a client that stops reading is cut after the
/// send timeout, with the front's memory flat meanwhile.
#[test]
fn the_worker_is_free_while_a_slow_client_reads_and_a_stalled_one_is_cut() {
    let site = Site::new();
    let big = big_file(&site);
    for (how, mode) in MODES {
        let server = start_with(&site, mode, &["--workers", "1", "--send-timeout", "3"]);
        let pid = server.get("/pid").text();
        assert!(pid.parse::<u32>().is_ok(), "{pid}");

        let (mut slow, _) = start_download(&server, &sendfile(&big));
        // Read slowly for a while; the one worker answers others meanwhile.
        let mut read = 0u64;
        let mut buf = vec![0u8; 64 << 10];
        for _ in 0..5 {
            let n = slow.read(&mut buf).expect("slow read");
            assert!(n > 0);
            read += n as u64;
            let other = server.get("/pid");
            assert_eq!(other.status, 200);
            assert_eq!(other.text(), pid, "answered by the same single worker");
            std::thread::sleep(Duration::from_millis(300));
        }
        let other = get(&server, &sendfile(&site.files().join("data.bin")), &[]);
        assert!(other.status == 200 && other.body == site.data);

        // Then it stops reading: cut by the send timeout, holding no worker.
        let (rss_before, _) = memory(server.pid());
        let stalled = Instant::now();
        std::thread::sleep(Duration::from_secs(5));
        let (rss_stalled, _) = memory(server.pid());
        let ended = loop {
            match slow.read(&mut buf) {
                Ok(0) => break true,
                Ok(n) => read += n as u64,
                Err(_) => break true,
            }
            assert!(read < GIB, "{how}: the stalled download was never cut");
        };
        assert!(ended && read < GIB, "{how}: read {read} bytes");
        server.wait_for_log("(send timeout)", Duration::from_secs(30));
        eprintln!(
            "{how}: stalled download cut after {read} bytes, {:?} after it stopped reading; \
             VmRSS {rss_before} KiB before the stall, {rss_stalled} KiB in it",
            stalled.elapsed()
        );
        assert!(
            rss_stalled <= rss_before + (16 << 10),
            "{how}: {rss_before} -> {rss_stalled} KiB while stalled"
        );
        assert_eq!(server.get("/pid").text(), pid);
    }
}

/// Symfony's BinaryFileResponse (Laravel's `response()->download()` and
/// `response()->file()` return one) sends `X-Sendfile` once
/// `trustXSendfileTypeHeader()` is called: Hearth serves the file with
/// the response's Content-Disposition.
#[test]
fn symfony_binary_file_response_is_offloaded() {
    let site = Site::new();
    let worker = site.base().join("symfony.php");
    let script = format!(
        r#"<?php
declare(strict_types=1);
require '{lib}';
require '/usr/share/php/Symfony/Component/HttpFoundation/autoload.php';
use Symfony\Component\HttpFoundation\BinaryFileResponse;
use Symfony\Component\HttpFoundation\Request;
use Symfony\Component\HttpFoundation\ResponseHeaderBag;
BinaryFileResponse::trustXSendfileTypeHeader();
Hearth\Worker::serve(static function (): void {{
    $request = Request::createFromGlobals();
    $response = new BinaryFileResponse('{data}');
    $response->setContentDisposition(ResponseHeaderBag::DISPOSITION_ATTACHMENT, 'report.bin');
    $response->prepare($request);
    $response->send();
}});
"#,
        lib = support::root().join("php/autoload.php").display(),
        data = site.files().join("data.bin").display(),
    );
    std::fs::write(&worker, script).expect("worker");
    let roots = site.roots();
    let args: Vec<&str> = roots.iter().map(String::as_str).collect();
    let server = Server::start(&worker, &args);
    let r = get(&server, "/download", &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.body == site.data, "the file, sent by Hearth");
    // Hearth's ETag: Symfony sets none by default.
    assert!(r.header("etag").is_some(), "{:?}", r.headers);
    assert_eq!(
        r.header("content-disposition"),
        Some("attachment; filename=report.bin")
    );
    assert_no_offload_headers(&r);
    let range = get(&server, "/download", &[("Range", "bytes=10-19")]);
    assert!(range.status == 206 && range.body == site.data[10..20]);
    // Without the trusted header, Symfony sends the file itself, through
    // the worker: the same bytes.
    let plain = Server::start(&worker, &[]);
    let r = get(&plain, "/download", &[]);
    assert!(r.status == 200 && r.body == site.data);
    assert_eq!(r.header("etag"), None, "sent by the worker");
}

/// Over HTTP/2 (h2c) the offloaded file arrives as over HTTP/1.1: whole,
/// and a range of it.
#[test]
fn an_offloaded_file_is_served_over_http2() {
    let site = Site::new();
    let server = site.start(&["--h2c"]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let target = sendfile(&site.files().join("data.bin"));
    let (whole, part) = runtime.block_on(async {
        let tcp = tokio::net::TcpStream::connect(server.addr)
            .await
            .expect("connect");
        let (send, connection) = h2::client::handshake(tcp).await.expect("handshake");
        tokio::spawn(async move {
            let _ = connection.await;
        });
        let get = |range: Option<&'static str>| {
            let mut send = send.clone();
            let uri = format!("http://localhost{target}");
            async move {
                let mut request = http::Request::get(uri);
                if let Some(range) = range {
                    request = request.header("range", range);
                }
                let request = request.body(()).expect("request");
                send = send.ready().await.expect("ready");
                let (response, _) = send.send_request(request, true).expect("send");
                let response = tokio::time::timeout(Duration::from_secs(60), response)
                    .await
                    .expect("a response in time")
                    .expect("response");
                let (head, mut body) = response.into_parts();
                let mut bytes = Vec::new();
                while let Some(chunk) = body.data().await {
                    let chunk = chunk.expect("data");
                    let _ = body.flow_control().release_capacity(chunk.len());
                    bytes.extend_from_slice(&chunk);
                }
                (head, bytes)
            }
        };
        (get(None).await, get(Some("bytes=-100")).await)
    });
    assert_eq!(whole.0.status, 200);
    assert!(whole.1 == site.data);
    assert!(!whole.0.headers.contains_key("x-sendfile"));
    assert_eq!(part.0.status, 206);
    assert!(part.1 == site.data[site.data.len() - 100..]);
}

/// A root reached through a symlink a deploy switches (`current ->
/// releases/2`): the files of the new release are sent, by the path
/// through the symlink and by their real path (what Symfony sends), and
/// the old release's no longer are.
#[test]
fn a_root_through_a_switched_symlink_follows_the_switch() {
    let site = Site::new();
    let base = site.base();
    for release in ["1", "2"] {
        let dir = base.join(format!("releases/{release}/files"));
        std::fs::create_dir_all(&dir).expect("release");
        std::fs::write(dir.join("which.txt"), format!("release {release}")).expect("release");
    }
    symlink(base.join("releases/1"), base.join("current")).expect("current");
    let root = base.join("current/files");
    let root_flag = root.display().to_string();
    let server = Server::start(&site.worker(), &["--sendfile-root", &root_flag]);
    let r = get(&server, &sendfile(&root.join("which.txt")), &[]);
    assert_eq!((r.status, r.text().as_str()), (200, "release 1"));

    std::fs::remove_file(base.join("current")).expect("switch");
    symlink(base.join("releases/2"), base.join("current")).expect("switch");
    let r = get(&server, &sendfile(&root.join("which.txt")), &[]);
    assert_eq!((r.status, r.text().as_str()), (200, "release 2"));
    let real = base.join("releases/2/files/which.txt");
    let r = get(&server, &sendfile(&real), &[]);
    assert_eq!((r.status, r.text().as_str()), (200, "release 2"));
    let old = base.join("releases/1/files/which.txt");
    let r = get(&server, &sendfile(&old), &[]);
    assert_refused(
        &server,
        &r,
        403,
        "releases/1/files/which.txt",
        "outside every",
    );
}
