//! HTTP hardening: limits, read timeouts, refused framing, and checked
//! responses, over raw sockets against a real `hearth serve`.
//!
//! The worker (tests/fixtures/hits.php) appends every request it runs to a
//! file, so each test can tell that a refused request, or one pipelined
//! behind it, never reached PHP.

#[path = "support/mod.rs"]
mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use support::{fixture, Connection, Server};

struct Hits {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Hits {
    fn new() -> Hits {
        let dir = support::tempdir();
        let path = dir.path().join("hits.log");
        Hits { _dir: dir, path }
    }

    fn flag(&self) -> String {
        format!("hearth_test.hits={}", self.path.display())
    }

    fn read(&self) -> String {
        std::fs::read_to_string(&self.path).unwrap_or_default()
    }
}

fn start(hits: &Hits, extra: &[&str]) -> Server {
    let flag = hits.flag();
    let mut args = vec!["--workers", "1", "-d", &flag];
    args.extend_from_slice(extra);
    Server::start(&fixture("hits.php"), &args)
}

/// A request everybody agrees on, to prove the hits file records requests.
fn sanity(server: &Server, hits: &Hits, path: &str) {
    let r = server.get(path);
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(hits.read().contains(path), "hits: {}", hits.read());
}

fn assert_closed(conn: &mut Connection, what: &str) {
    assert!(conn.is_closed(), "{what}: the connection stayed open");
}

fn repeat(line: &str, n: usize) -> String {
    (0..n)
        .map(|i| line.replace("{i}", &i.to_string()))
        .collect()
}

#[test]
fn ambiguous_and_malformed_requests_are_refused_and_nothing_behind_them_reaches_php() {
    let hits = Hits::new();
    let server = start(&hits, &[]);
    let smuggled = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n";
    let long_path = "a".repeat(9000);
    let cases: Vec<(&str, String, u16)> = vec![
        (
            "cl-then-te",
            format!(
                "POST /cl-then-te HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n{smuggled}",
                5 + smuggled.len()
            ),
            400,
        ),
        (
            "te-then-cl",
            format!(
                "POST /te-then-cl HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n{smuggled}"
            ),
            400,
        ),
        (
            "two-content-lengths",
            format!("POST /two-cl HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: {}\r\n\r\n{smuggled}", smuggled.len()),
            400,
        ),
        (
            "equal-content-lengths",
            "POST /equal-cl HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nab".into(),
            400,
        ),
        (
            "plus-content-length",
            "POST /plus-cl HTTP/1.1\r\nHost: x\r\nContent-Length: +5\r\n\r\nhello".into(),
            400,
        ),
        (
            "list-content-length",
            "POST /list-cl HTTP/1.1\r\nHost: x\r\nContent-Length: 1, 2\r\n\r\nab".into(),
            400,
        ),
        (
            "te-not-chunked",
            format!("POST /te-gzip HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n{smuggled}"),
            501,
        ),
        (
            "te-in-http-1.0",
            "POST /te-10 HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n".into(),
            400,
        ),
        (
            "chunk-size-overflow",
            format!("POST /overflow HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\nab\r\n0\r\n\r\n{smuggled}"),
            400,
        ),
        (
            "chunk-size-not-hex",
            "POST /not-hex HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n0\r\n\r\n".into(),
            400,
        ),
        (
            "obs-fold",
            "GET /obs-fold HTTP/1.1\r\nHost: x\r\nX-A: a\r\n folded\r\n\r\n".into(),
            400,
        ),
        (
            "nul-in-header",
            "GET /nul HTTP/1.1\r\nHost: x\r\nX-A: a\0b\r\n\r\n".into(),
            400,
        ),
        (
            "bare-lf",
            "GET /bare-lf HTTP/1.1\nHost: x\n\n".into(),
            400,
        ),
        (
            "bare-lf-in-one-line",
            "GET /bare-lf-one HTTP/1.1\r\nHost: x\nX-A: a\r\n\r\n".into(),
            400,
        ),
        (
            "space-before-colon",
            "GET /space-colon HTTP/1.1\r\nHost : x\r\n\r\n".into(),
            400,
        ),
        (
            "two-hosts",
            "GET /two-hosts HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n".into(),
            400,
        ),
        (
            "request-line-too-long",
            format!("GET /{long_path} HTTP/1.1\r\nHost: x\r\n\r\n"),
            414,
        ),
        (
            "too-many-headers",
            format!(
                "GET /many-headers HTTP/1.1\r\nHost: x\r\n{}\r\n",
                repeat("X-H{i}: v\r\n", 100)
            ),
            431,
        ),
        (
            "headers-too-large",
            format!(
                "GET /large-headers HTTP/1.1\r\nHost: x\r\n{}\r\n",
                repeat(&format!("X-H{{i}}: {}\r\n", "v".repeat(8000)), 5)
            ),
            431,
        ),
    ];
    for (name, raw, expected) in &cases {
        let mut conn = Connection::open(server.addr);
        let follow_up = format!("GET /follow-up-{name} HTTP/1.1\r\nHost: x\r\n\r\n");
        conn.send(format!("{raw}{follow_up}").as_bytes());
        let r = conn.read_response(false);
        assert_eq!(r.status, *expected, "{name}: {}", r.text());
        assert_eq!(r.header("connection"), Some("close"), "{name}");
        assert_closed(&mut conn, name);
    }
    let log = hits.read();
    assert!(
        log.is_empty(),
        "refused requests or requests behind them reached PHP:\n{log}"
    );
    sanity(&server, &hits, "/sanity");
}

#[test]
fn valid_pipelined_requests_still_reach_php_in_order() {
    let hits = Hits::new();
    let server = start(&hits, &[]);
    let mut conn = Connection::open(server.addr);
    conn.send(
        b"POST /body?1 HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc\
POST /body?2 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2;ext=v\r\nde\r\n1\r\nf\r\n0\r\nX-Trailer: t\r\n\r\n\
\r\nGET /third HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    assert_eq!(conn.read_response(false).text(), "body:abc");
    assert_eq!(conn.read_response(false).text(), "body:def");
    assert_eq!(conn.read_response(false).text(), "hit /third");
    assert_eq!(hits.read(), "POST /body?1\nPOST /body?2\nGET /third\n");
}

#[test]
fn limits_are_configurable() {
    let hits = Hits::new();
    let server = start(
        &hits,
        &[
            "--max-request-line",
            "64",
            "--max-header-size",
            "1K",
            "--max-headers",
            "3",
        ],
    );
    let path = "p".repeat(60);
    let cases = [
        (format!("GET /{path} HTTP/1.1\r\nHost: x\r\n\r\n"), 414),
        (
            format!(
                "GET / HTTP/1.1\r\nHost: x\r\nX-A: {}\r\n\r\n",
                "v".repeat(1100)
            ),
            431,
        ),
        (
            "GET / HTTP/1.1\r\nHost: x\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n".to_string(),
            431,
        ),
        (
            format!(
                "GET /{} HTTP/1.1\r\nHost: x\r\nA: 1\r\nB: 2\r\n\r\n",
                &path[..40]
            ),
            200,
        ),
    ];
    for (raw, expected) in cases {
        let r = support::request(server.addr, raw.as_bytes());
        assert_eq!(r.status, expected, "{raw:?}");
    }
    assert_eq!(hits.read().lines().count(), 1, "{}", hits.read());
}

/// Writes `bytes` one at a time, `gap` apart, ignoring errors once the
/// server has closed the connection.
fn trickle(mut stream: TcpStream, bytes: Vec<u8>, gap: Duration) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        for b in bytes {
            if stream.write_all(&[b]).is_err() {
                return;
            }
            std::thread::sleep(gap);
        }
    })
}

fn read_all(stream: &mut TcpStream, limit: Duration) -> (String, Duration) {
    stream.set_read_timeout(Some(limit)).expect("timeout");
    let started = Instant::now();
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out);
    (
        String::from_utf8_lossy(&out).into_owned(),
        started.elapsed(),
    )
}

#[test]
fn a_slowloris_gets_408_once_the_header_timeout_is_over() {
    let hits = Hits::new();
    let server = start(
        &hits,
        &["--header-timeout", "1s", "--keep-alive-timeout", "1s"],
    );
    let stream = TcpStream::connect(server.addr).expect("connect");
    let mut reader = stream.try_clone().expect("clone");
    // 200 ms a byte: the head would take 8 s.
    let writer = trickle(
        stream,
        b"GET /slow HTTP/1.1\r\nHost: x\r\nX-A: b\r\n\r\n".to_vec(),
        Duration::from_millis(200),
    );
    let (text, took) = read_all(&mut reader, Duration::from_secs(20));
    assert!(text.starts_with("HTTP/1.1 408 "), "{text:?}");
    assert!(
        text.to_ascii_lowercase().contains("connection: close"),
        "{text}"
    );
    assert!(
        took < Duration::from_secs(5),
        "closed after {took:?}, long after the 1 s header timeout"
    );
    writer.join().expect("writer");
    assert!(hits.read().is_empty(), "{}", hits.read());
}

#[test]
fn a_stalled_body_gets_408() {
    let hits = Hits::new();
    let server = start(&hits, &["--body-timeout", "1s"]);
    let mut stream = TcpStream::connect(server.addr).expect("connect");
    stream
        .write_all(b"POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
        .expect("send");
    let (text, took) = read_all(&mut stream, Duration::from_secs(20));
    assert!(text.starts_with("HTTP/1.1 408 "), "{text:?}");
    assert!(
        text.to_ascii_lowercase().contains("connection: close"),
        "{text}"
    );
    assert!(took < Duration::from_secs(5), "answered after {took:?}");
    assert!(hits.read().is_empty(), "{}", hits.read());
}

#[test]
fn the_body_timeout_is_a_pause_not_a_total() {
    let hits = Hits::new();
    let server = start(&hits, &["--body-timeout", "1s"]);
    let stream = TcpStream::connect(server.addr).expect("connect");
    let mut reader = stream.try_clone().expect("clone");
    let mut request =
        b"POST /body HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 8\r\n\r\n"
            .to_vec();
    let head_len = request.len();
    request.extend_from_slice(b"slowbody");
    let mut stream = stream;
    stream.write_all(&request[..head_len]).expect("head");
    // 8 bytes 300 ms apart: 2.4 s in all, never a 1 s pause.
    let writer = trickle(
        stream,
        request[head_len..].to_vec(),
        Duration::from_millis(300),
    );
    let (text, _) = read_all(&mut reader, Duration::from_secs(20));
    writer.join().expect("writer");
    assert!(text.starts_with("HTTP/1.1 200 "), "{text:?}");
    assert!(text.ends_with("body:slowbody"), "{text:?}");
}

#[test]
fn idle_connections_are_closed_quietly() {
    let hits = Hits::new();
    let server = start(
        &hits,
        &["--header-timeout", "1s", "--keep-alive-timeout", "2s"],
    );
    // A connection that never sends anything: closed without a response.
    let mut silent = TcpStream::connect(server.addr).expect("connect");
    let (text, took) = read_all(&mut silent, Duration::from_secs(20));
    assert_eq!(text, "");
    assert!(took < Duration::from_secs(6), "closed after {took:?}");
    // A kept-alive connection: open past the header timeout, closed after
    // the keep-alive timeout.
    let mut conn = Connection::open(server.addr);
    assert_eq!(conn.get("/first", "").status, 200);
    std::thread::sleep(Duration::from_millis(1300));
    assert_eq!(
        conn.get("/second", "").status,
        200,
        "kept alive past the header timeout"
    );
    let started = Instant::now();
    assert_closed(&mut conn, "idle keep-alive connection");
    let took = started.elapsed();
    assert!(
        took > Duration::from_millis(1500) && took < Duration::from_secs(8),
        "closed after {took:?} instead of about 2 s"
    );
}

#[test]
fn beyond_max_connections_new_connections_wait() {
    let hits = Hits::new();
    let server = start(&hits, &["--max-connections", "1"]);
    let mut first = Connection::open(server.addr);
    assert_eq!(first.get("/first", "").status, 200);
    let mut second = TcpStream::connect(server.addr).expect("the backlog takes it");
    second
        .write_all(b"GET /second HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .expect("send");
    second
        .set_read_timeout(Some(Duration::from_millis(1500)))
        .expect("timeout");
    let mut byte = [0u8; 1];
    assert!(
        second.read(&mut byte).is_err(),
        "a second connection was served while the first was open"
    );
    assert!(!hits.read().contains("/second"));
    drop(first);
    let (text, _) = read_all(&mut second, Duration::from_secs(20));
    let text = format!("{}{text}", byte[0] as char);
    assert!(
        text.contains("200 OK") && text.ends_with("hit /second"),
        "{text:?}"
    );
}

#[test]
fn response_headers_with_control_characters_are_dropped_and_logged() {
    let hits = Hits::new();
    let server = start(&hits, &[]);
    let r = server.get("/ctl-header");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-fine"), Some("ok"));
    assert_eq!(r.header("x-ctl"), None, "{:?}", r.headers);
    assert_eq!(r.header("x-del"), None, "{:?}", r.headers);
    server.wait_for_log("dropped response header x-ctl", Duration::from_secs(5));
    server.wait_for_log("dropped response header x-del", Duration::from_secs(5));
}

#[test]
fn one_response_per_request_and_no_body_where_none_is_allowed() {
    let hits = Hits::new();
    let server = start(&hits, &[]);
    let mut conn = Connection::open(server.addr);
    // Each response is read as a client must read it; a body sent where
    // none is allowed would be taken for the start of the next response.
    conn.send(b"HEAD /length HTTP/1.1\r\nHost: x\r\n\r\n");
    let head = conn.read_response(true);
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), Some("5"));
    for (path, status) in [("/not-modified", 304), ("/no-content", 204)] {
        let r = conn.get(path, "");
        assert_eq!(r.status, status);
        assert_eq!(r.header("content-length"), None, "{path}");
        assert_eq!(r.header("transfer-encoding"), None, "{path}");
    }
    conn.send(b"HEAD /streamless HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(conn.read_response(true).status, 200);
    let last = conn.get("/last", "Connection: close\r\n");
    assert_eq!(last.text(), "hit /last");
    // Nothing more on the connection: exactly one response per request.
    assert_closed(&mut conn, "after the last response");
}

/// Issue 8 (3): bytes nginx takes in a request target (`"`, `{`, `}`, `|`,
/// `<`, `>`, `^`, `` ` ``, `\`, bytes >= 0x80) reach PHP byte for byte in
/// REQUEST_URI and QUERY_STRING, instead of a silent 400.
#[test]
fn targets_nginx_accepts_reach_php_byte_for_byte() {
    let hits = Hits::new();
    let server = start(&hits, &[]);
    // (target, QUERY_STRING PHP must see)
    let queries: &[(&[u8], &[u8])] = &[
        (br#"/target?filter={"a":1}"#, br#"filter={"a":1}"#),
        (b"/target?a|b<c>d^e`f\\g", b"a|b<c>d^e`f\\g"),
        (
            b"/target?\xc3\xa9=\xe2\x82\xac&latin1=\xe9\xff",
            b"\xc3\xa9=\xe2\x82\xac&latin1=\xe9\xff",
        ),
        (b"/target?a=%zz&b=%&c=?", b"a=%zz&b=%&c=?"),
        (b"/target?a#frag?b", b"a"),
        (b"/target#frag?b", b""),
    ];
    for (target, query) in queries {
        let raw = [
            b"GET ",
            *target,
            b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        ]
        .concat();
        let r = support::request(server.addr, &raw);
        let shown = String::from_utf8_lossy(target);
        assert_eq!(r.status, 200, "{shown}: {}", r.text());
        assert_eq!(r.body, *target, "{shown}: REQUEST_URI");
        assert_eq!(
            r.header("x-query-hex"),
            Some(hex(query).as_str()),
            "{shown}: QUERY_STRING"
        );
    }
    // In the path too.
    for target in [
        &b"/p\"{x}|<>^`\\\xe9\xc3\xa9/q?x"[..],
        b"/%7B%22a%22%7D/{\"a\"}",
        b"http://x/abs?{\"a\"}",
    ] {
        let raw = [
            b"GET ",
            target,
            b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        ]
        .concat();
        let r = support::request(server.addr, &raw);
        let shown = String::from_utf8_lossy(target);
        assert_eq!(r.status, 200, "{shown}: {}", r.text());
        let uri = target.strip_prefix(b"http://x").unwrap_or(target);
        assert_eq!(r.body, [&b"hit "[..], uri].concat(), "{shown}");
    }
    // Control characters, DEL and NUL are still refused, and so are
    // targets that are neither a path nor an absolute URL.
    for target in [
        &b"/target?a\x01b"[..],
        b"/target?a\x7fb",
        b"/target?a\0b",
        b"/tar\x1bget",
        b"*",
        b"target",
        b"http:/target",
        b"http://a{b}/target",
    ] {
        let raw = [b"GET ", target, b" HTTP/1.1\r\nHost: x\r\n\r\n"].concat();
        let r = support::request(server.addr, &raw);
        assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(target));
    }
    let log = hits.read();
    assert!(!log.contains('\u{1b}') && !log.contains("a\u{1}b"), "{log}");
}

/// Issue 8 (3): every 400 says why in the log, at warn, and the client
/// gets a page saying it made a bad request.
#[test]
fn every_bad_request_is_logged_at_warn_with_its_reason_and_has_a_body() {
    let hits = Hits::new();
    let server = start(&hits, &[]);
    let cases: &[(&[u8], &str)] = &[
        (
            b"GET /a\x01 HTTP/1.1\r\nHost: x\r\n\r\n",
            "invalid request target",
        ),
        (
            b"GET http:/x HTTP/1.1\r\nHost: x\r\n\r\n",
            "invalid request target",
        ),
        (
            b"GET / HTTP/1.1\r\nHost: x\r\nX: a\0b\r\n\r\n",
            "control character in a header value",
        ),
        (
            b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            "invalid chunk size",
        ),
    ];
    for (raw, why) in cases {
        let r = support::request(server.addr, raw);
        assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(raw));
        assert!(r.text().contains("400 Bad Request"), "{:?}", r.text());
        server.wait_for_log(
            &format!("WARN refused a request (400 Bad Request): {why}"),
            Duration::from_secs(5),
        );
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Issue 8 (6): HTTP/1.1 requires Host; nginx answers 400 without one.
/// HTTP/1.0 needs none.
#[test]
fn an_http11_request_without_host_gets_400_and_an_http10_one_is_served() {
    let hits = Hits::new();
    let server = start(&hits, &[]);
    let mut conn = Connection::open(server.addr);
    conn.send(
        b"GET /no-host HTTP/1.1\r\nUser-Agent: t\r\n\r\nGET /behind HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    let r = conn.read_response(false);
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("400 Bad Request"), "{:?}", r.text());
    assert_eq!(r.header("connection"), Some("close"));
    assert_closed(&mut conn, "after a request without Host");
    server.wait_for_log(
        "WARN refused a request (400 Bad Request): HTTP/1.1 request without Host",
        Duration::from_secs(5),
    );
    let r = support::request(server.addr, b"GET /http10 HTTP/1.0\r\n\r\n");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text(), "hit /http10");
    assert_eq!(hits.read(), "GET /http10\n");
}
