//! TLS and HTTP/2: `hearth serve --tls-cert --tls-key` (and `--h2c`)
//! against real clients: curl (built with HTTP/2, as Debian's is) for what
//! a browser does, and a raw rustls client for what only a hostile client
//! sends. The certificate is made afresh for each test.

#[path = "support/mod.rs"]
mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::{fixture, Server};

/// A self-signed certificate for `localhost` and 127.0.0.1, and its key.
struct Certs {
    dir: tempfile::TempDir,
    cert_pem: String,
}

impl Certs {
    fn new() -> Certs {
        let made = rcgen::generate_simple_self_signed(vec![
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
        ])
        .expect("certificate");
        let dir = support::tempdir();
        let cert_pem = made.cert.pem();
        std::fs::write(dir.path().join("cert.pem"), &cert_pem).expect("write cert");
        std::fs::write(dir.path().join("key.pem"), made.signing_key.serialize_pem())
            .expect("write key");
        Certs { dir, cert_pem }
    }

    fn cert(&self) -> PathBuf {
        self.dir.path().join("cert.pem")
    }

    fn key(&self) -> PathBuf {
        self.dir.path().join("key.pem")
    }

    fn flags(&self) -> Vec<String> {
        vec![
            "--tls-cert".into(),
            self.cert().display().to_string(),
            "--tls-key".into(),
            self.key().display().to_string(),
        ]
    }
}

fn start(certs: &Certs, extra: &[&str]) -> Server {
    let mut args: Vec<String> = certs.flags();
    args.extend(["--workers", "1"].map(String::from));
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = Server::start(&fixture("app.php"), &args);
    assert!(
        server
            .log()
            .contains(&format!("on https://{}", server.addr)),
        "the log announces https: {}",
        server.log()
    );
    server
}

/// What curl got.
#[derive(Debug)]
struct Got {
    /// "2" or "1.1".
    version: String,
    status: u16,
    /// Lower-cased names, in order.
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Got {
    fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    fn headers_named(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

/// Runs curl against `url` (an https://localhost URL resolved to the
/// server, trusting the test certificate) with `args`.
fn curl(server: &Server, certs: Option<&Certs>, path: &str, args: &[&str]) -> Got {
    let dir = support::tempdir();
    let (head, body) = (dir.path().join("head"), dir.path().join("body"));
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "--max-time", "30", "-D"])
        .arg(&head)
        .arg("-o")
        .arg(&body)
        .args(["-w", "%{http_version}"]);
    let url = match certs {
        Some(certs) => {
            cmd.arg("--cacert")
                .arg(certs.cert())
                .arg("--resolve")
                .arg(format!("localhost:{}:127.0.0.1", server.addr.port()));
            format!("https://localhost:{}{path}", server.addr.port())
        }
        None => format!("http://{}{path}", server.addr),
    };
    let out = cmd
        .args(args)
        .arg(url)
        .stdin(Stdio::null())
        .output()
        .expect("curl must be installed (with HTTP/2 support) for the TLS tests");
    assert!(
        out.status.success(),
        "curl failed: {}\nlog:\n{}",
        String::from_utf8_lossy(&out.stderr),
        server.log()
    );
    let head = std::fs::read_to_string(head).expect("head");
    // The last response's head (after any 100 Continue).
    let last = head
        .trim_end()
        .rsplit("\r\n\r\n")
        .next()
        .unwrap_or_default()
        .to_owned();
    let mut lines = last.lines();
    let status_line = lines.next().expect("status line");
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("status line {status_line:?}"));
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Got {
        version: String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        status,
        headers,
        body: std::fs::read(body).expect("body"),
    }
}

/// A TLS connection from rustls, trusting the test certificate and
/// offering `alpn`.
fn tls_connect(
    addr: SocketAddr,
    certs: &Certs,
    alpn: &[&[u8]],
) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(certs.cert_pem.as_bytes()) {
        roots
            .add(cert.expect("PEM"))
            .expect("trust the test certificate");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
    let conn = rustls::ClientConnection::new(Arc::new(config), name).expect("client");
    let tcp = TcpStream::connect(addr).expect("connect");
    tcp.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut stream = rustls::StreamOwned::new(conn, tcp);
    // Finish the handshake.
    stream.flush().expect("TLS handshake");
    while stream.conn.is_handshaking() {
        stream
            .conn
            .complete_io(&mut stream.sock)
            .expect("TLS handshake");
    }
    stream
}

use rustls::pki_types::pem::PemObject as _;

/// Reads until the server closes (with or without close_notify) or 10 s
/// pass without a byte.
fn read_to_close(stream: &mut impl Read) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
}

#[test]
fn https_requests_reach_php_with_https_on_over_http2_and_http1() {
    let certs = Certs::new();
    let server = start(&certs, &[]);
    let port = server.addr.port().to_string();

    let h2 = curl(&server, Some(&certs), "/env?x=1", &["--http2"]);
    assert_eq!(h2.version, "2", "ALPN chose HTTP/2");
    assert_eq!(h2.status, 200);
    let s = &h2.json()["server"];
    assert_eq!(s["HTTPS"], "on");
    assert_eq!(s["REQUEST_SCHEME"], "https");
    assert_eq!(s["SERVER_PROTOCOL"], "HTTP/2.0", "as nginx says it");
    assert_eq!(s["SERVER_PORT"], port.as_str());
    assert_eq!(s["QUERY_STRING"], "x=1");
    assert_eq!(
        s["HTTP_HOST"],
        format!("localhost:{port}"),
        "HTTP/2's :authority is the Host, as nginx passes it"
    );

    let h1 = curl(&server, Some(&certs), "/env", &["--http1.1"]);
    assert_eq!(h1.version, "1.1");
    assert_eq!(h1.status, 200);
    let s = &h1.json()["server"];
    assert_eq!(s["HTTPS"], "on");
    assert_eq!(s["REQUEST_SCHEME"], "https");
    assert_eq!(s["SERVER_PROTOCOL"], "HTTP/1.1");
}

#[test]
fn http2_carries_status_headers_cookies_and_bodies() {
    let certs = Certs::new();
    let server = start(&certs, &[]);

    let r = curl(&server, Some(&certs), "/headers", &["--http2"]);
    assert_eq!((r.version.as_str(), r.status), ("2", 201));
    assert_eq!(r.headers_named("x-one"), ["1"]);
    assert_eq!(r.headers_named("x-two"), ["2", "2b"]);
    assert!(r.headers_named("x-removed").is_empty());
    let cookies = r.headers_named("set-cookie");
    assert_eq!(cookies.len(), 2, "{cookies:?}");
    assert_eq!(cookies[0], "plain=v%20a%3Bl", "{cookies:?}");
    assert!(cookies[1].starts_with("opts=x;"), "{cookies:?}");

    let r = curl(
        &server,
        Some(&certs),
        "/env",
        &["--http2", "-d", "a=1&b=two", "-b", "k=v; k2=v2"],
    );
    assert_eq!((r.version.as_str(), r.status), ("2", 200));
    let j = r.json();
    assert_eq!(j["server"]["REQUEST_METHOD"], "POST");
    assert_eq!(j["post"]["a"], "1");
    assert_eq!(j["post"]["b"], "two");
    assert_eq!(j["cookie"]["k"], "v");
    assert_eq!(j["cookie"]["k2"], "v2");

    // A body larger than HTTP/2's initial flow-control window, without a
    // Content-Length: PHP still sees its length.
    let dir = support::tempdir();
    let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let file = dir.path().join("data.bin");
    std::fs::write(&file, &data).expect("data");
    let at = format!("@{}", file.display());
    let r = curl(
        &server,
        Some(&certs),
        "/echo",
        &["--http2", "--data-binary", &at, "-H", "Content-Length:"],
    );
    assert_eq!((r.version.as_str(), r.status), ("2", 200));
    let j = r.json();
    assert_eq!(j["length"], data.len());
    assert_eq!(j["md5"], format!("{:x}", md5::compute(&data)));
    assert_eq!(j["content_length"], data.len().to_string());

    let upload = format!("f=@{}", file.display());
    let r = curl(
        &server,
        Some(&certs),
        "/upload",
        &["--http2", "-F", &upload],
    );
    assert_eq!((r.version.as_str(), r.status), ("2", 200));
    assert_eq!(r.json()["f"]["md5"], format!("{:x}", md5::compute(&data)));
}

#[test]
fn http1_over_tls_still_goes_through_the_framing_guard() {
    let certs = Certs::new();
    let server = start(&certs, &[]);

    // A plain request on the same raw client works: the refusal below is
    // about the request, not the client.
    let mut tls = tls_connect(server.addr, &certs, &[b"http/1.1"]);
    assert_eq!(tls.conn.alpn_protocol(), Some(&b"http/1.1"[..]));
    tls.write_all(b"GET /pid HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .expect("send");
    let answer = String::from_utf8_lossy(&read_to_close(&mut tls)).into_owned();
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");

    let smuggled = "GET /env?smuggled=1 HTTP/1.1\r\nHost: x\r\n\r\n";
    let request = format!(
        "POST /env HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n{smuggled}",
        5 + smuggled.len()
    );
    let mut tls = tls_connect(server.addr, &certs, &[b"http/1.1"]);
    tls.write_all(request.as_bytes()).expect("send");
    let answer = String::from_utf8_lossy(&read_to_close(&mut tls)).into_owned();
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    assert_eq!(
        answer.matches("HTTP/1.1 ").count(),
        1,
        "nothing behind the refused request is answered: {answer}"
    );

    // Without ALPN a client gets HTTP/1.1, guarded too.
    let mut tls = tls_connect(server.addr, &certs, &[]);
    assert_eq!(tls.conn.alpn_protocol(), None);
    tls.write_all(b"GET /pid HTTP/1.1\nHost: x\n\n")
        .expect("send");
    let answer = String::from_utf8_lossy(&read_to_close(&mut tls)).into_owned();
    assert!(answer.starts_with("HTTP/1.1 400 "), "bare LF: {answer}");
}

#[test]
fn plain_http_on_the_tls_port_gets_400_and_the_server_keeps_serving() {
    let certs = Certs::new();
    let server = start(&certs, &[]);

    let r = server.get("/env");
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(
        r.text()
            .contains("plain HTTP request was sent to HTTPS port"),
        "{}",
        r.text()
    );

    // A broken handshake, and a connection that closes at once.
    let mut junk = TcpStream::connect(server.addr).expect("connect");
    junk.write_all(b"\x16\x03\x01\x00\x05hello garbage")
        .expect("send");
    junk.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let _ = read_to_close(&mut junk);
    drop(TcpStream::connect(server.addr).expect("connect"));

    let r = curl(&server, Some(&certs), "/pid", &["--http2"]);
    assert_eq!((r.version.as_str(), r.status), ("2", 200));
    assert!(!server.log().contains("panicked"), "{}", server.log());
}

/// An HTTP/2 frame header: length, type, flags, stream.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut out = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// The types of the frames in `bytes` (whole frames only).
fn frame_types(mut bytes: &[u8]) -> Vec<u8> {
    let mut types = Vec::new();
    while bytes.len() >= 9 {
        let len =
            (usize::from(bytes[0]) << 16) | (usize::from(bytes[1]) << 8) | usize::from(bytes[2]);
        types.push(bytes[3]);
        bytes = &bytes[(9 + len).min(bytes.len())..];
    }
    types
}

const GOAWAY: u8 = 0x7;

#[test]
fn idle_http2_connections_get_goaway_after_the_keep_alive_timeout() {
    let certs = Certs::new();
    let server = start(&certs, &["--keep-alive-timeout", "1s"]);
    let mut tls = tls_connect(server.addr, &certs, &[b"h2"]);
    assert_eq!(tls.conn.alpn_protocol(), Some(&b"h2"[..]));
    let started = Instant::now();
    tls.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .expect("preface");
    tls.write_all(&frame(0x4, 0, 0, &[])).expect("settings");
    // Read until the GOAWAY.
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !frame_types(&got).contains(&GOAWAY) {
        match tls.read(&mut buf) {
            Ok(n) if n > 0 => got.extend_from_slice(&buf[..n]),
            other => panic!(
                "no GOAWAY after {:?} ({other:?}); frames {:?}",
                started.elapsed(),
                frame_types(&got)
            ),
        }
    }
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(900) && elapsed < Duration::from_secs(4),
        "GOAWAY after {elapsed:?}, not after about 1s"
    );
    // This client answers no PING, so hyper's graceful close cannot
    // finish: the connection is dropped after another idle timeout.
    let _ = read_to_close(&mut tls);
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "the connection stayed open for {:?}",
        started.elapsed()
    );
}

#[test]
fn sigterm_lets_in_flight_http2_requests_finish() {
    let certs = Certs::new();
    let mut server = start(&certs, &[]);
    let dir = support::tempdir();
    let mark = dir.path().join("started");
    let url = format!(
        "https://localhost:{}/slow?ms=1500&mark={}",
        server.addr.port(),
        mark.display()
    );
    let client = Command::new("curl")
        .args([
            "-sS",
            "--http2",
            "--max-time",
            "30",
            "-w",
            "\n%{http_version} %{http_code}",
        ])
        .arg("--cacert")
        .arg(certs.cert())
        .arg("--resolve")
        .arg(format!("localhost:{}:127.0.0.1", server.addr.port()))
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("curl");
    support::eventually(Duration::from_secs(10), "the request to reach PHP", || {
        mark.exists().then_some(())
    });
    server.signal("TERM");
    let out = client.wait_with_output().expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && text.ends_with("\n2 200"),
        "the in-flight request completed: {text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(server.wait_exit(Duration::from_secs(20)), Some(0));
}

#[test]
fn h2c_serves_http2_with_prior_knowledge_next_to_http1() {
    let server = Server::start(&fixture("app.php"), &["--workers", "1", "--h2c"]);
    let r = curl(&server, None, "/env", &["--http2-prior-knowledge"]);
    assert_eq!((r.version.as_str(), r.status), ("2", 200));
    let s = &r.json()["server"];
    assert_eq!(s["SERVER_PROTOCOL"], "HTTP/2.0");
    assert_eq!(s["REQUEST_SCHEME"], "http");
    assert!(s.get("HTTPS").is_none(), "{s}");

    let r = curl(&server, None, "/env", &["--http1.1", "-d", "a=1"]);
    assert_eq!((r.version.as_str(), r.status), ("1.1", 200));
    assert_eq!(r.json()["post"]["a"], "1");
    // Plain HTTP/1.1 requests starting with P (like the preface) too.
    let r = support::Req::new("PUT", "/env").body("x").send(server.addr);
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["server"]["REQUEST_METHOD"], "PUT");

    // Without --h2c, the preface is a malformed HTTP/1.1 request.
    let plain = Server::start(&fixture("app.php"), &["--workers", "1"]);
    let r = support::request(plain.addr, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    assert_eq!(r.status, 505, "{}", r.text());
}

/// Runs `hearth serve` expecting it to refuse to start; returns stderr.
fn refused(args: &[String]) -> String {
    let mut all: Vec<String> = vec![
        "serve".into(),
        fixture("app.php").display().to_string(),
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--php".into(),
        support::php_binary(),
    ];
    all.extend(args.iter().cloned());
    all.extend(support::as_root());
    let out = Command::new(env!("CARGO_BIN_EXE_hearth"))
        .args(&all)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .expect("run hearth");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{args:?} must not start: {stderr}"
    );
    assert!(
        !stderr.contains(" starting "),
        "{args:?} must fail before starting: {stderr}"
    );
    stderr
}

fn path_arg(p: &Path) -> String {
    p.display().to_string()
}

#[test]
fn a_missing_or_invalid_certificate_or_key_is_a_startup_error_naming_it() {
    let certs = Certs::new();
    let other = Certs::new();
    let dir = support::tempdir();
    let garbage = dir.path().join("garbage.pem");
    std::fs::write(&garbage, "not a certificate\n").expect("write");
    let missing = dir.path().join("missing.pem");
    let (cert, key) = (path_arg(&certs.cert()), path_arg(&certs.key()));
    let s = |v: &str| v.to_owned();

    let e = refused(&[s("--tls-cert"), cert.clone()]);
    assert!(e.contains("--tls-key"), "{e}");
    let e = refused(&[s("--tls-key"), key.clone()]);
    assert!(e.contains("--tls-cert"), "{e}");

    let e = refused(&[
        s("--tls-cert"),
        path_arg(&missing),
        s("--tls-key"),
        key.clone(),
    ]);
    assert!(
        e.contains(&path_arg(&missing)) && e.contains("cannot read"),
        "{e}"
    );
    let e = refused(&[
        s("--tls-cert"),
        path_arg(&garbage),
        s("--tls-key"),
        key.clone(),
    ]);
    assert!(
        e.contains(&format!("certificate {}", path_arg(&garbage))),
        "{e}"
    );
    let e = refused(&[
        s("--tls-cert"),
        cert.clone(),
        s("--tls-key"),
        path_arg(&garbage),
    ]);
    assert!(e.contains(&format!("key {}", path_arg(&garbage))), "{e}");
    let e = refused(&[
        s("--tls-cert"),
        path_arg(&other.cert()),
        s("--tls-key"),
        key.clone(),
    ]);
    assert!(e.contains(&key), "a key of another certificate: {e}");

    let e = refused(&[
        s("--tls-cert"),
        cert.clone(),
        s("--tls-key"),
        key.clone(),
        s("--h2c"),
    ]);
    assert!(e.contains("--h2c"), "{e}");

    // The same from the config file, relative to it.
    let config = dir.path().join("hearth.toml");
    std::fs::write(
        &config,
        "[serve]\ntls_cert = \"missing.pem\"\ntls_key = \"garbage.pem\"\n",
    )
    .expect("config");
    let e = refused(&[s("--config"), path_arg(&config)]);
    assert!(e.contains(&path_arg(&missing)), "{e}");
    std::fs::write(&config, format!("[serve]\ntls_cert = {cert:?}\n")).expect("config");
    let e = refused(&[s("--config"), path_arg(&config)]);
    assert!(e.contains("tls_key"), "{e}");
}

#[test]
fn classic_mode_serves_https_over_http2_and_http1() {
    let certs = Certs::new();
    let site = support::tempdir();
    std::fs::write(
        site.path().join("index.php"),
        r#"<?php
header('Content-Type: application/json');
$keys = ['HTTPS', 'REQUEST_SCHEME', 'SERVER_PROTOCOL', 'SERVER_PORT', 'HTTP_HOST', 'SCRIPT_NAME'];
echo json_encode(['server' => array_intersect_key($_SERVER, array_flip($keys)),
                  'post' => $_POST]);
"#,
    )
    .expect("test setup");
    std::fs::set_permissions(
        site.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("test setup");
    let mut args: Vec<String> = [
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "1",
        "--root",
    ]
    .map(String::from)
    .into();
    args.push(site.path().display().to_string());
    args.extend(certs.flags());
    let server = Server::spawn_args(&args);
    let port = server.addr.port().to_string();

    let h2 = curl(
        &server,
        Some(&certs),
        "/some/page",
        &["--http2", "-d", "a=1"],
    );
    assert_eq!(h2.version, "2", "ALPN chose HTTP/2");
    assert_eq!(h2.status, 200);
    let got = h2.json();
    let s = &got["server"];
    assert_eq!(s["HTTPS"], "on");
    assert_eq!(s["REQUEST_SCHEME"], "https");
    assert_eq!(s["SERVER_PROTOCOL"], "HTTP/2.0", "as nginx says it");
    assert_eq!(s["SERVER_PORT"], port.as_str());
    assert_eq!(s["HTTP_HOST"], format!("localhost:{port}"));
    assert_eq!(s["SCRIPT_NAME"], "/index.php", "the front controller ran");
    assert_eq!(
        got["post"]["a"], "1",
        "the body reached php-fpm over HTTP/2"
    );

    let h1 = curl(&server, Some(&certs), "/", &["--http1.1"]);
    assert_eq!(h1.version, "1.1");
    assert_eq!(h1.json()["server"]["HTTPS"], "on");
}
