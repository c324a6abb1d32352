//! 103 Early Hints (docs/early-hints.md): what an app sends with
//! `Hearth\early_hints()` or FrankenPHP's `headers_send(103)` reaches an
//! HTTP/1.1 or HTTP/2 client (h2c, and TLS with ALPN `h2` as browsers
//! speak it) as a 103 before the response, with its `Link` lines only; an
//! HTTP/1.0 client gets none. The clients are curl (with nghttp2, as
//! Debian's is) and raw sockets. The worker is
//! tests/fixtures/early-hints.php.

#[path = "support/mod.rs"]
mod support;

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};

use support::{fixture, Connection, Response, Server};

fn start() -> Server {
    Server::start(&fixture("early-hints.php"), &["--workers", "1"])
}

/// The interim responses and the final one, as they came on `conn`.
fn read_all(conn: &mut Connection) -> (Vec<Response>, Response) {
    let mut interim = Vec::new();
    loop {
        let response = conn.read_response(false);
        if response.status >= 200 {
            return (interim, response);
        }
        interim.push(response);
    }
}

fn links(response: &Response) -> Vec<&str> {
    response.headers_named("link")
}

#[test]
fn curl_sees_the_103_and_then_the_response() {
    let server = start();
    let out = Command::new("curl")
        .args(["-sv", "--http1.1", &server.url("/hints")])
        .output()
        .expect("run curl");
    assert!(out.status.success(), "curl failed: {out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "page:sent");
    let verbose = String::from_utf8_lossy(&out.stderr);
    let hints = verbose
        .find("< HTTP/1.1 103 Early Hints")
        .unwrap_or_else(|| {
            panic!("no 103 in curl's output:\n{verbose}");
        });
    let final_head = verbose.find("< HTTP/1.1 200 OK").expect("a 200");
    assert!(
        hints < final_head,
        "the 103 came after the response:\n{verbose}"
    );
    let interim = &verbose[hints..final_head];
    assert!(
        interim.contains("< Link: </style.css>; rel=preload; as=style")
            && interim.contains("< Link: </app.js>; rel=preload; as=script"),
        "the 103 lacks its Link lines:\n{verbose}"
    );
    assert!(
        !interim.to_ascii_lowercase().contains("set-cookie"),
        "the response's cookie went out in the 103:\n{verbose}"
    );
}

#[test]
fn the_103_goes_out_while_the_app_still_works() {
    let server = start();
    let dir = tempfile::tempdir().expect("tempdir");
    let flag = dir.path().join("go");
    let mut conn = Connection::open(server.addr);
    conn.send(
        format!(
            "GET /hints?wait={} HTTP/1.1\r\nHost: localhost\r\n\r\n",
            flag.display()
        )
        .as_bytes(),
    );
    // The app waits for the flag file, which is only made once the 103
    // has been read: the 103 cannot have come with the response.
    let interim = conn.read_head();
    assert_eq!(interim.status, 103);
    assert_eq!(interim.reason, "Early Hints");
    assert_eq!(
        links(&interim),
        [
            "</style.css>; rel=preload; as=style",
            "</app.js>; rel=preload; as=script"
        ]
    );
    assert_eq!(
        interim.headers.len(),
        2,
        "only Link lines: {:?}",
        interim.headers
    );
    std::fs::write(&flag, b"").expect("flag");
    let (more, response) = read_all(&mut conn);
    assert!(more.is_empty(), "a second 103: {:?}", more[0].headers);
    assert_eq!(response.status, 200);
    assert_eq!(response.text(), "page:sent");
    assert_eq!(links(&response), ["</style.css>; rel=preload; as=style"]);
    assert!(response.header("set-cookie").is_some());
    // The connection serves on.
    let (interim, response) = {
        conn.send(b"GET /hints HTTP/1.1\r\nHost: localhost\r\n\r\n");
        read_all(&mut conn)
    };
    assert_eq!(interim.len(), 1);
    assert_eq!(response.text(), "page:sent");
}

#[test]
fn frankenphp_headers_send_103_sends_the_link_headers_set_so_far() {
    let server = start();
    let dir = tempfile::tempdir().expect("tempdir");
    let flag = dir.path().join("go");
    let mut conn = Connection::open(server.addr);
    conn.send(
        format!(
            "GET /frankenphp?wait={} HTTP/1.1\r\nHost: localhost\r\n\r\n",
            flag.display()
        )
        .as_bytes(),
    );
    let interim = conn.read_head();
    assert_eq!(interim.status, 103);
    assert_eq!(links(&interim), ["</style.css>; rel=preload; as=style"]);
    assert!(interim.header("x-not-a-hint").is_none());
    std::fs::write(&flag, b"").expect("flag");
    let (_, response) = read_all(&mut conn);
    assert_eq!(response.status, 200);
    assert_eq!(response.text(), "page:1");
    // As with FrankenPHP, the headers stay set for the response.
    assert_eq!(links(&response), ["</style.css>; rel=preload; as=style"]);
    assert_eq!(response.header("x-not-a-hint"), Some("1"));
}

#[test]
fn http_1_0_clients_get_no_103() {
    let server = start();
    let mut conn = Connection::open(server.addr);
    conn.send(b"GET /hints HTTP/1.0\r\nHost: localhost\r\n\r\n");
    let response = conn.read_response(false);
    assert_eq!(response.status, 200);
    assert_eq!(response.text(), "page:sent");
}

/// What curl -v printed of the heads it received, from the line that
/// starts `want` on: its `< ` lines, lower-cased.
fn heads_from(verbose: &str, want: &str) -> Vec<String> {
    let start = verbose
        .find(want)
        .unwrap_or_else(|| panic!("no {want:?} in curl's output:\n{verbose}"));
    verbose[start..]
        .lines()
        .filter_map(|l| l.strip_prefix("< "))
        .map(|l| l.trim_end().to_ascii_lowercase())
        .collect()
}

/// Runs curl -sv over HTTP/2 with `args`, and checks what it saw: a 103
/// with both Link lines and nothing else, then the 200.
fn assert_h2_hints(args: &[&str]) {
    let out = Command::new("curl")
        .args(["-sv"])
        .args(args)
        .output()
        .expect("run curl");
    assert!(out.status.success(), "curl failed: {out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "page:sent");
    let verbose = String::from_utf8_lossy(&out.stderr);
    let heads = heads_from(&verbose, "< HTTP/2 103");
    let end = heads
        .iter()
        .position(|l| l.starts_with("http/2 200"))
        .unwrap_or_else(|| panic!("no 200 after the 103:\n{verbose}"));
    let interim: Vec<&str> = heads[1..end]
        .iter()
        .map(String::as_str)
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(
        interim,
        [
            "link: </style.css>; rel=preload; as=style",
            "link: </app.js>; rel=preload; as=script"
        ],
        "the 103 has its Link lines and nothing else:\n{verbose}"
    );
    assert!(
        heads[end..]
            .iter()
            .any(|l| l.starts_with("set-cookie: early=no")),
        "the response keeps its cookie:\n{verbose}"
    );
    assert!(
        !verbose[verbose.find("< HTTP/2 200").unwrap_or(0)..].contains(" 103"),
        "a 103 after the response:\n{verbose}"
    );
}

#[test]
fn http_2_clients_see_the_103_and_then_the_response() {
    let server = Server::start(&fixture("early-hints.php"), &["--workers", "1", "--h2c"]);
    assert_h2_hints(&["--http2-prior-knowledge", &server.url("/hints")]);
    // Over TLS, where browsers speak HTTP/2.
    let made =
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("certificate");
    let dir = support::tempdir();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert, made.cert.pem()).expect("write cert");
    std::fs::write(&key, made.signing_key.serialize_pem()).expect("write key");
    let (cert, key) = (cert.display().to_string(), key.display().to_string());
    let server = Server::start(
        &fixture("early-hints.php"),
        &["--workers", "1", "--tls-cert", &cert, "--tls-key", &key],
    );
    let url = format!("https://localhost:{}/hints", server.addr.port());
    let resolve = format!("localhost:{}:127.0.0.1", server.addr.port());
    assert_h2_hints(&["--http2", "--cacert", &cert, "--resolve", &resolve, &url]);
}

#[test]
fn over_http_2_the_103_goes_out_while_the_app_still_works() {
    let server = Server::start(&fixture("early-hints.php"), &["--workers", "1", "--h2c"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let flag = dir.path().join("go");
    let url = server.url(&format!("/hints?wait={}", flag.display()));
    let mut curl = Command::new("curl")
        .args(["-sv", "--http2-prior-knowledge", &url])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run curl");
    // The app waits for the flag file, which is only made once curl has
    // shown the 103: it cannot have come with the response.
    let mut stderr = BufReader::new(curl.stderr.take().expect("stderr"));
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        let n = stderr.read_line(&mut line).expect("read curl's output");
        assert!(n > 0, "curl ended before a 103:\n{seen}");
        seen.push_str(&line);
        assert!(
            !line.starts_with("< HTTP/2 200"),
            "the 200 came first:\n{seen}"
        );
        if line.starts_with("< HTTP/2 103") {
            break;
        }
    }
    std::fs::write(&flag, b"").expect("flag");
    let mut rest = String::new();
    stderr
        .read_to_string(&mut rest)
        .expect("read curl's output");
    let out = curl.wait_with_output().expect("curl");
    assert!(out.status.success(), "curl failed:\n{seen}{rest}");
    assert!(rest.contains("< HTTP/2 200"), "{seen}{rest}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "page:sent");
    // Hints of FrankenPHP's form too, on the same server.
    let out = Command::new("curl")
        .args(["-sv", "--http2-prior-knowledge", &server.url("/frankenphp")])
        .output()
        .expect("run curl");
    let verbose = String::from_utf8_lossy(&out.stderr);
    let heads = heads_from(&verbose, "< HTTP/2 103");
    assert_eq!(
        heads[1], "link: </style.css>; rel=preload; as=style",
        "{verbose}"
    );
    assert!(
        !heads[1..]
            .iter()
            .take_while(|l| !l.starts_with("http/2 200"))
            .any(|l| l.starts_with("x-not-a-hint")),
        "{verbose}"
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "page:1");
}

#[test]
fn each_hint_is_a_103_of_its_own_and_late_ones_are_refused() {
    let server = start();
    let mut conn = Connection::open(server.addr);
    conn.send(b"GET /twice HTTP/1.1\r\nHost: localhost\r\n\r\n");
    let (interim, response) = read_all(&mut conn);
    assert_eq!(interim.len(), 2);
    assert_eq!(links(&interim[0]), ["</one.css>; rel=preload; as=style"]);
    assert_eq!(links(&interim[1]), ["</two.css>; rel=preload; as=style"]);
    assert_eq!(response.text(), "page");

    // After output was flushed the head is gone: too late for hints.
    conn.send(b"GET /late HTTP/1.1\r\nHost: localhost\r\n\r\n");
    let (interim, response) = read_all(&mut conn);
    assert!(interim.is_empty());
    assert_eq!(response.text(), "first:not sent");

    // A value with CR or LF is refused, as header() refuses it.
    conn.send(b"GET /invalid HTTP/1.1\r\nHost: localhost\r\n\r\n");
    let (interim, response) = read_all(&mut conn);
    assert!(interim.is_empty());
    assert_eq!(response.text(), "page:not sent");
    assert!(response.header("set-cookie").is_none());
}

#[test]
fn pipelined_requests_get_their_hints_in_their_turn() {
    let server = start();
    let mut conn = Connection::open(server.addr);
    let one = "GET /twice HTTP/1.1\r\nHost: localhost\r\n\r\n";
    let two = "GET /hints HTTP/1.1\r\nHost: localhost\r\n\r\n";
    conn.send(format!("{one}{two}{one}").as_bytes());
    // Whatever hints a request gets (none, when the response before it
    // was still being sent), they come after the response before it and
    // before its own.
    for expected in ["page", "page:sent", "page"] {
        let (interim, response) = read_all(&mut conn);
        assert!(interim.iter().all(|r| r.status == 103));
        assert_eq!(response.status, 200);
        assert_eq!(response.text(), expected);
    }
    conn.send(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
    let (_, response) = read_all(&mut conn);
    assert_eq!(response.text(), "page");
}
