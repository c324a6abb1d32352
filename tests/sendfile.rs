//! Files sent by the kernel (sendfile(2), docs/file-offload.md, "How
//! files are sent"): document-root files and `X-Sendfile` responses on
//! plain HTTP/1.x connections come out byte for byte as on disk, whole
//! and in ranges, pipelined with PHP responses on one connection; over
//! TLS, HTTP/2 or with `--no-sendfile` they are read instead, with the
//! same bytes; a file that shrinks while it is sent ends its response
//! short. `hearth_http_sendfile_bytes_total` on `/metrics` tells which
//! way each file went. (The 1 GiB file, its CPU cost and the stalled
//! client are in tests/file_offload.rs.)

#[path = "support/mod.rs"]
mod support;

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use support::{Connection, Req, Response, Server};

/// A site: `public/` (the document root, also the `--sendfile-root`)
/// with `big.bin`, and a worker that answers `/php`, `/hints` (with a
/// 103) and `?sendfile=PATH` (with `X-Sendfile`).
struct Site {
    dir: tempfile::TempDir,
    /// The bytes of public/big.bin.
    data: Vec<u8>,
}

/// Bytes that differ at every offset, with no run of zeros.
fn pattern(len: usize) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8 | 1)
        .collect()
}

impl Site {
    fn new() -> Site {
        let dir = support::tempdir();
        let public = dir.path().join("public");
        std::fs::create_dir_all(&public).expect("set up the site");
        // Not a multiple of a page, nor of any chunk size.
        let data = pattern((3 << 20) + 4097);
        std::fs::write(public.join("big.bin"), &data).expect("set up the site");
        // A precompressed sibling, and a text file compressed on the fly.
        std::fs::write(public.join("big.bin.gz"), pattern(300_001)).expect("set up the site");
        std::fs::write(public.join("notes.txt"), "sent compressed\n".repeat(10_000))
            .expect("set up the site");
        let worker = format!(
            r#"<?php
declare(strict_types=1);
require '{lib}';
Hearth\Worker::serve(static function (): void {{
    if (isset($_GET['sendfile'])) {{
        header('X-Sendfile: ' . $_GET['sendfile']);
        return;
    }}
    switch (parse_url($_SERVER['REQUEST_URI'], PHP_URL_PATH)) {{
        case '/hints':
            Hearth\early_hints('</style.css>; rel=preload; as=style');
            echo 'page';
            return;
        default:
            echo 'from php';
    }}
}});
"#,
            lib = support::root().join("php/autoload.php").display()
        );
        std::fs::write(dir.path().join("worker.php"), worker).expect("set up the site");
        Site { dir, data }
    }

    fn public(&self) -> PathBuf {
        self.dir.path().join("public")
    }

    fn args(&self, extra: &[&str]) -> Vec<String> {
        let public = self.public().display().to_string();
        let mut args: Vec<String> = [
            "--root",
            &public,
            "--classic",
            "off",
            "--sendfile-root",
            &public,
            "--workers",
            "1",
            "--admin",
            "127.0.0.1:0",
        ]
        .map(String::from)
        .to_vec();
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    }

    fn start(&self, extra: &[&str]) -> Server {
        let args = self.args(extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Server::start(&self.dir.path().join("worker.php"), &args)
    }

    /// The worker's `X-Sendfile` answer for public/NAME.
    fn offloaded(&self, name: &str) -> String {
        let path = self.public().join(name).display().to_string();
        let query: String = path.bytes().map(|b| format!("%{b:02X}")).collect();
        format!("/download?sendfile={query}")
    }
}

/// The bytes the kernel has sent for the server so far.
fn sent_by_kernel(admin: SocketAddr) -> u64 {
    let text = support::request(
        admin,
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .text();
    text.lines()
        .find_map(|l| l.strip_prefix("hearth_http_sendfile_bytes_total "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no hearth_http_sendfile_bytes_total in\n{text}"))
}

fn get(server: &Server, target: &str, range: Option<&str>) -> Response {
    let mut req = Req::new("GET", target);
    if let Some(range) = range {
        req = req.header("Range", range);
    }
    req.send(server.addr)
}

/// The ranges asked for, and the bytes each one is.
fn cases(data: &[u8]) -> Vec<(Option<String>, u16, Vec<u8>)> {
    let len = data.len();
    vec![
        (None, 200, data.to_vec()),
        (
            Some("bytes=1000-99999".into()),
            206,
            data[1000..100_000].to_vec(),
        ),
        (Some("bytes=-4097".into()), 206, data[len - 4097..].to_vec()),
        (
            Some(format!("bytes={}-", len - 70_000)),
            206,
            data[len - 70_000..].to_vec(),
        ),
    ]
}

/// Static files and `X-Sendfile` ones, whole, in a range, a suffix range
/// and an open range: the bytes on disk, every one of them sent by the
/// kernel; a HEAD sends none, an HTTP/1.0 client gets the file too.
#[test]
fn files_are_sent_by_the_kernel_byte_for_byte() {
    let site = Site::new();
    let server = site.start(&[]);
    let admin = support::admin_addr(&server);
    for target in ["/big.bin".to_owned(), site.offloaded("big.bin")] {
        for (range, status, expected) in cases(&site.data) {
            let before = sent_by_kernel(admin);
            let r = get(&server, &target, range.as_deref());
            assert_eq!(r.status, status, "{target} {range:?}");
            assert!(
                r.body == expected,
                "{target} {range:?}: {} bytes, {} expected, differ",
                r.body.len(),
                expected.len()
            );
            assert_eq!(
                sent_by_kernel(admin) - before,
                expected.len() as u64,
                "{target} {range:?}: every byte by sendfile"
            );
        }
        let before = sent_by_kernel(admin);
        let r = Req::new("HEAD", &target).send(server.addr);
        assert_eq!(r.status, 200);
        assert_eq!(
            r.header("content-length"),
            Some(site.data.len().to_string().as_str())
        );
        assert_eq!(sent_by_kernel(admin), before, "a HEAD sends no file");
    }
    let before = sent_by_kernel(admin);
    let r = support::request(server.addr, b"GET /big.bin HTTP/1.0\r\n\r\n");
    assert_eq!(r.status, 200);
    assert!(r.body == site.data, "HTTP/1.0");
    assert_eq!(sent_by_kernel(admin) - before, site.data.len() as u64);

    // A precompressed sibling goes as it is: by the kernel too.
    let gz = std::fs::read(site.public().join("big.bin.gz")).expect("the sibling");
    let before = sent_by_kernel(admin);
    let r = Req::new("GET", "/big.bin")
        .header("Accept-Encoding", "gzip")
        .send(server.addr);
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    assert!(r.body == gz, "the precompressed sibling");
    assert_eq!(sent_by_kernel(admin) - before, gz.len() as u64);
}

/// What the kernel does not send on a plain connection: a body Hearth
/// compresses on the fly, several ranges (`multipart/byteranges`).
#[test]
fn compressed_and_multipart_bodies_are_read() {
    let site = Site::new();
    let server = site.start(&[]);
    let admin = support::admin_addr(&server);
    let r = Req::new("GET", "/notes.txt")
        .header("Accept-Encoding", "gzip")
        .send(server.addr);
    assert_eq!(
        (r.status, r.header("content-encoding")),
        (200, Some("gzip"))
    );
    let mut text = String::new();
    flate2::read::GzDecoder::new(&r.body[..])
        .read_to_string(&mut text)
        .expect("gzip");
    assert_eq!(text, "sent compressed\n".repeat(10_000));
    let r = get(&server, "/big.bin", Some("bytes=0-1,5-6"));
    assert_eq!(r.status, 206);
    assert!(r
        .header("content-type")
        .is_some_and(|t| t.starts_with("multipart/byteranges")));
    assert_eq!(sent_by_kernel(admin), 0);
}

/// Runs curl for `url` with `args`; the body.
fn curl(url: &str, args: &[&str]) -> Vec<u8> {
    let out = Command::new("curl")
        .args(["-sS", "--fail", "--max-time", "60"])
        .args(args)
        .arg(url)
        .stdin(Stdio::null())
        .output()
        .expect("curl");
    assert!(
        out.status.success(),
        "curl {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// With `--no-sendfile`, over TLS and over HTTP/2 (h2c) the same bytes
/// go out, read by Hearth: the kernel sends none.
#[test]
fn without_sendfile_over_tls_and_http2_files_are_read() {
    let site = Site::new();
    let server = site.start(&["--no-sendfile"]);
    let admin = support::admin_addr(&server);
    for target in ["/big.bin".to_owned(), site.offloaded("big.bin")] {
        for (range, status, expected) in cases(&site.data) {
            let r = get(&server, &target, range.as_deref());
            assert_eq!(r.status, status, "{target} {range:?}");
            assert!(r.body == expected, "{target} {range:?}: differ");
        }
    }
    assert_eq!(sent_by_kernel(admin), 0, "--no-sendfile");
    drop(server);

    let certs = support::tempdir();
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("cert");
    let (cert, key) = (certs.path().join("cert.pem"), certs.path().join("key.pem"));
    std::fs::write(&cert, made.cert.pem()).expect("cert");
    std::fs::write(&key, made.signing_key.serialize_pem()).expect("key");
    let (cert_arg, key_arg) = (cert.display().to_string(), key.display().to_string());
    let server = site.start(&["--tls-cert", &cert_arg, "--tls-key", &key_arg]);
    let admin = support::admin_addr(&server);
    let port = server.addr.port();
    let resolve = format!("localhost:{port}:127.0.0.1");
    for (version, target) in [
        ("--http1.1", "/big.bin".to_owned()),
        ("--http2", "/big.bin".to_owned()),
        ("--http1.1", site.offloaded("big.bin")),
    ] {
        let url = format!("https://localhost:{port}{target}");
        let got = curl(
            &url,
            &["--cacert", &cert_arg, "--resolve", &resolve, version],
        );
        assert!(got == site.data, "TLS {version} {target}: differ");
    }
    assert_eq!(sent_by_kernel(admin), 0, "TLS");
    drop(server);

    let server = site.start(&["--h2c"]);
    let admin = support::admin_addr(&server);
    let got = curl(&server.url("/big.bin"), &["--http2-prior-knowledge"]);
    assert!(got == site.data, "h2c: differ");
    assert_eq!(sent_by_kernel(admin), 0, "h2c");
    // HTTP/1.1 on the same h2c server: sent by the kernel.
    let got = curl(&server.url("/big.bin"), &["--http1.1"]);
    assert!(got == site.data, "HTTP/1.1 beside h2c: differ");
    assert_eq!(sent_by_kernel(admin), site.data.len() as u64);
}

/// Files (static and offloaded, whole and in ranges) and PHP responses
/// (one with a 103 before it) pipelined on one keep-alive connection
/// come back whole and in order, and the connection serves on.
#[test]
fn pipelined_files_and_php_responses_come_back_in_order() {
    let site = Site::new();
    let server = site.start(&[]);
    let admin = support::admin_addr(&server);
    let data = &site.data;
    let len = data.len();
    let offloaded = site.offloaded("big.bin");
    let requests: Vec<(String, String, &[u8])> = vec![
        ("/big.bin".into(), String::new(), data),
        ("/php".into(), String::new(), b"from php"),
        (
            offloaded.clone(),
            "Range: bytes=5-1048580\r\n".into(),
            &data[5..1_048_581],
        ),
        ("/hints".into(), String::new(), b"page"),
        (
            "/big.bin".into(),
            "Range: bytes=-100000\r\n".into(),
            &data[len - 100_000..],
        ),
        (offloaded.clone(), String::new(), data),
        ("/php".into(), String::new(), b"from php"),
    ];
    let raw: String = requests
        .iter()
        .map(|(target, extra, _)| {
            format!("GET {target} HTTP/1.1\r\nHost: localhost\r\n{extra}\r\n")
        })
        .collect();
    let before = sent_by_kernel(admin);
    let mut conn = Connection::open(server.addr);
    conn.send(raw.as_bytes());
    for (i, (target, _, expected)) in requests.iter().enumerate() {
        let mut r = conn.read_response(false);
        while r.status == 103 {
            r = conn.read_response(false);
        }
        assert!(
            r.status == 200 || r.status == 206,
            "{i} {target}: {}",
            r.status
        );
        assert!(
            r.body == *expected,
            "{i} {target}: {} bytes, {} expected, differ",
            r.body.len(),
            expected.len()
        );
    }
    let files: u64 = requests
        .iter()
        .filter(|(target, _, _)| target != "/php" && target != "/hints")
        .map(|(_, _, expected)| expected.len() as u64)
        .sum();
    assert_eq!(sent_by_kernel(admin) - before, files);
    let r = conn.get("/big.bin", "");
    assert!(r.body == site.data, "the connection serves on");
}

/// Sends a GET on a raw socket and reads the head; the body is left.
fn start_download(server: &Server, target: &str) -> (TcpStream, u64) {
    let mut stream = TcpStream::connect(server.addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
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
    let head = String::from_utf8_lossy(&head).to_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    let len = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .and_then(|n| n.trim().parse().ok())
        .expect("content-length");
    (stream, len)
}

/// A file cut short (truncated) while it is sent, sent by the kernel or
/// read: the client gets a prefix of the file, never a byte from
/// elsewhere, then the connection closes, and the server serves on.
#[test]
fn a_file_truncated_while_it_is_sent_ends_its_response_short() {
    let site = Site::new();
    let original = pattern(32 << 20);
    for (mode, extra) in [("sendfile", &[][..]), ("read", &["--no-sendfile"][..])] {
        let server = site.start(extra);
        for target in ["/shrinking.bin".to_owned(), site.offloaded("shrinking.bin")] {
            let path = site.public().join("shrinking.bin");
            std::fs::write(&path, &original).expect("write the file");
            let (mut stream, len) = start_download(&server, &target);
            assert_eq!(len, original.len() as u64);
            let mut got = vec![0u8; 2 << 20];
            stream.read_exact(&mut got).expect("the first bytes");
            // Page-aligned: no page the kernel may still be sending is
            // rewritten (see docs/file-offload.md on files changed in place).
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .and_then(|f| f.set_len(1 << 20))
                .expect("truncate");
            let mut buf = vec![0u8; 1 << 20];
            loop {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
                assert!(
                    got.len() as u64 <= len,
                    "{mode} {target}: more than announced"
                );
            }
            assert!(
                (got.len() as u64) < len,
                "{mode} {target}: the whole length came from a truncated file"
            );
            assert!(
                got[..] == original[..got.len()],
                "{mode} {target}: the {} bytes are not the file's",
                got.len()
            );
            eprintln!("{mode} {target}: cut after {} of {len} bytes", got.len());
            let r = server.get("/php");
            assert_eq!((r.status, r.text().as_str()), (200, "from php"), "{mode}");
        }
    }
}
