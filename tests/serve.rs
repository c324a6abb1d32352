//! `hearth serve` over real HTTP with real PHP workers: what a legacy app
//! relies on, and what happens when workers fail.

#[path = "support/mod.rs"]
mod support;

use std::time::Duration;

use support::{eventually, fixture, Connection, CookieJar, Req, Server};

fn app() -> Server {
    Server::start(&fixture("app.php"), &[])
}

#[test]
fn superglobals_match_what_php_fpm_gives() {
    let server = app();
    let r = Req::new("GET", "/env?a=1&b[]=2&b[]=3&c%20d=e+f")
        .header("Cookie", "c1=v%201; c2=x+y; arr[k]=v")
        .header("X-Custom-Header", "custom")
        .header("X_Underscore", "dropped")
        .header("Proxy", "http://evil.test")
        .header("User-Agent", "hearth-test")
        .send(server.addr);
    assert_eq!(r.status, 200, "{}", r.text());
    let env = r.json();
    let s = &env["server"];
    assert_eq!(s["REQUEST_METHOD"], "GET");
    assert_eq!(s["REQUEST_URI"], "/env?a=1&b[]=2&b[]=3&c%20d=e+f");
    assert_eq!(s["QUERY_STRING"], "a=1&b[]=2&b[]=3&c%20d=e+f");
    assert_eq!(s["SERVER_PROTOCOL"], "HTTP/1.1");
    assert_eq!(s["REMOTE_ADDR"], "127.0.0.1");
    assert!(s["REMOTE_PORT"]
        .as_str()
        .is_some_and(|p| p.parse::<u16>().is_ok()));
    assert_eq!(s["SERVER_ADDR"], "127.0.0.1");
    assert_eq!(s["SERVER_PORT"], server.addr.port().to_string());
    assert_eq!(s["SERVER_NAME"], "localhost");
    assert_eq!(s["GATEWAY_INTERFACE"], "CGI/1.1");
    assert_eq!(s["SCRIPT_NAME"], "/app.php");
    assert_eq!(s["PHP_SELF"], "/app.php");
    assert_eq!(
        s["SCRIPT_FILENAME"],
        fixture("app.php").to_string_lossy().as_ref()
    );
    assert_eq!(
        s["DOCUMENT_ROOT"],
        fixture("").to_string_lossy().trim_end_matches('/')
    );
    assert_eq!(s["CONTENT_TYPE"], "");
    assert_eq!(s["CONTENT_LENGTH"], "");
    assert_eq!(s["HTTP_HOST"], "localhost");
    assert_eq!(s["HTTP_X_CUSTOM_HEADER"], "custom");
    assert_eq!(s["HTTP_USER_AGENT"], "hearth-test");
    assert!(
        s.get("HTTP_X_UNDERSCORE").is_none(),
        "headers with underscores are dropped, as nginx does"
    );
    assert!(s.get("HTTP_PROXY").is_none(), "httpoxy");
    assert!(s["REQUEST_TIME"].is_i64());
    assert!(s["REQUEST_TIME_FLOAT"].is_f64());
    assert_eq!(env["get"]["a"], "1");
    assert_eq!(env["get"]["b"], serde_json::json!(["2", "3"]));
    assert_eq!(env["get"]["c_d"], "e f");
    assert_eq!(env["cookie"]["c1"], "v 1");
    assert_eq!(
        env["cookie"]["c2"], "x+y",
        "cookie values are raw-URL-decoded: + stays +"
    );
    assert_eq!(env["cookie"]["arr"]["k"], "v");
    assert_eq!(env["request"]["a"], "1");
    assert!(
        env["request"].get("c1").is_none(),
        "request_order GP leaves cookies out"
    );
    assert_eq!(env["headers_sent"], false);
}

#[test]
fn superglobals_do_not_leak_into_the_next_request() {
    let server = Server::start(&fixture("app.php"), &["--workers", "1"]);
    let first = Req::new("POST", "/env?only=first")
        .header("Cookie", "secret=abc")
        .form("posted=1")
        .send(server.addr)
        .json();
    assert_eq!(first["post"]["posted"], "1");
    let second = server.get("/env").json();
    assert_eq!(second["pid"], first["pid"], "same worker");
    assert_eq!(second["get"], serde_json::json!([]));
    assert_eq!(second["post"], serde_json::json!([]));
    assert_eq!(second["cookie"], serde_json::json!([]));
    assert_eq!(second["files"], serde_json::json!([]));
    assert!(second["server"].get("HTTP_COOKIE").is_none());
    assert_eq!(second["input"], "");
}

#[test]
fn urlencoded_forms_fill_post_and_php_input() {
    let server = app();
    let body = "name=Ada+Lovelace&tags[]=a&tags[]=b&nested[x][y]=z&empty=";
    let env = Req::new("POST", "/env?q=1")
        .form(body)
        .send(server.addr)
        .json();
    assert_eq!(env["post"]["name"], "Ada Lovelace");
    assert_eq!(env["post"]["tags"], serde_json::json!(["a", "b"]));
    assert_eq!(env["post"]["nested"]["x"]["y"], "z");
    assert_eq!(env["post"]["empty"], "");
    assert_eq!(env["request"]["q"], "1");
    assert_eq!(env["request"]["name"], "Ada Lovelace");
    let input = b64(&env["input"]);
    assert_eq!(input, body.as_bytes(), "php://input holds the raw body");
    assert_eq!(
        env["input_again"], env["input"],
        "php://input can be read twice"
    );
    assert_eq!(
        env["server"]["CONTENT_TYPE"],
        "application/x-www-form-urlencoded"
    );
    assert_eq!(env["server"]["CONTENT_LENGTH"], body.len().to_string());
}

#[test]
fn raw_bodies_are_read_through_php_input_and_not_parsed() {
    let server = app();
    let json = r#"{"a":[1,2,3],"b":"é"}"#;
    let env = Req::new("PUT", "/env")
        .header("Content-Type", "application/json")
        .body(json)
        .send(server.addr)
        .json();
    assert_eq!(b64(&env["input"]), json.as_bytes());
    assert_eq!(env["post"], serde_json::json!([]));
    assert_eq!(env["server"]["REQUEST_METHOD"], "PUT");

    // A urlencoded PUT is not parsed into $_POST either, as in PHP.
    let env = Req::new("PUT", "/env").form("a=1").send(server.addr).json();
    assert_eq!(env["post"], serde_json::json!([]));
    assert_eq!(b64(&env["input"]), b"a=1");
}

#[test]
fn chunked_request_bodies_arrive_whole() {
    let server = app();
    let mut conn = Connection::open(server.addr);
    conn.send(b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
    let r = conn.read_response(false).json();
    assert_eq!(r["length"], 11);
    assert_eq!(r["md5"], format!("{:x}", md5_of(b"hello world")));
    assert_eq!(r["content_length"], "11");
}

#[test]
fn multipart_forms_fill_post_and_files_and_uploads_can_be_moved() {
    let server = app();
    let content = b"file contents \x00\xff binary".to_vec();
    let env = Req::new("POST", "/env")
        .multipart(&[
            ("title", None, None, b"Hello"),
            ("doc", Some("report.txt"), Some("text/plain"), &content),
            (
                "many[]",
                Some("a.bin"),
                Some("application/octet-stream"),
                b"AAAA",
            ),
            (
                "many[]",
                Some("b.bin"),
                Some("application/octet-stream"),
                b"BBBBBB",
            ),
            ("nofile", Some(""), Some("application/octet-stream"), b""),
        ])
        .send(server.addr)
        .json();
    assert_eq!(env["post"]["title"], "Hello");
    let doc = &env["files"]["doc"];
    assert_eq!(doc["name"], "report.txt");
    assert_eq!(doc["full_path"], "report.txt");
    assert_eq!(doc["type"], "text/plain");
    assert_eq!(doc["error"], 0);
    assert_eq!(doc["size"], content.len());
    assert!(
        doc["tmp_name"].as_str().is_some_and(|t| t.contains("/php")),
        "{doc}"
    );
    let many = &env["files"]["many"];
    assert_eq!(many["name"], serde_json::json!(["a.bin", "b.bin"]));
    assert_eq!(many["size"], serde_json::json!([4, 6]));
    assert_eq!(many["error"], serde_json::json!([0, 0]));
    assert_eq!(env["files"]["nofile"]["error"], 4, "UPLOAD_ERR_NO_FILE");
    assert_eq!(
        env["input"], "",
        "php://input is empty for multipart forms, as in PHP"
    );

    let moved = Req::new("POST", "/upload")
        .multipart(&[("doc", Some("r.txt"), Some("text/plain"), &content)])
        .send(server.addr)
        .json();
    let want = format!("{:x}", md5_of(&content));
    assert_eq!(moved["doc"]["is_uploaded"], true);
    assert_eq!(moved["doc"]["md5"], want.as_str());
    assert_eq!(
        moved["doc"]["moved"], true,
        "move_uploaded_file() accepts the upload: {moved}"
    );
    assert_eq!(moved["doc"]["moved_md5"], want.as_str());
    assert_eq!(moved["doc"]["tmp_exists_after_move"], false);
    assert_eq!(
        moved["not_an_upload"], false,
        "move_uploaded_file() refuses files that were not uploaded"
    );
}

#[test]
fn uploaded_files_are_removed_after_the_request() {
    let server = app();
    let r = Req::new("POST", "/tmpname")
        .multipart(&[("f", Some("x.txt"), Some("text/plain"), b"temporary")])
        .send(server.addr)
        .json();
    assert_eq!(r["exists"], true, "the file exists while the request runs");
    let tmp = r["tmp"].as_str().expect("tmp name").to_owned();
    eventually(Duration::from_secs(5), "the upload to be removed", || {
        (!std::path::Path::new(&tmp).exists()).then_some(())
    });
}

#[test]
fn uploads_over_upload_max_filesize_are_refused_like_php_does() {
    let server = Server::start(&fixture("app.php"), &["-d", "upload_max_filesize=1K"]);
    let big = vec![b'x'; 4096];
    let env = Req::new("POST", "/env")
        .multipart(&[
            ("f", Some("big.bin"), Some("application/octet-stream"), &big),
            ("g", Some("small.bin"), None, b"ok"),
        ])
        .send(server.addr)
        .json();
    assert_eq!(
        env["files"]["f"]["error"], 1,
        "UPLOAD_ERR_INI_SIZE: {}",
        env["files"]
    );
    assert_eq!(env["files"]["f"]["tmp_name"], "");
    assert_eq!(env["files"]["f"]["size"], 0);
    assert_eq!(env["files"]["g"]["error"], 0);
}

#[test]
fn headers_status_and_cookies() {
    let server = app();
    let r = server.get("/headers");
    assert_eq!(r.status, 201);
    assert_eq!(r.header("x-one"), Some("1"));
    assert_eq!(r.headers_named("x-two"), vec!["2", "2b"]);
    assert_eq!(r.header("x-removed"), None);
    let cookies = r.headers_named("set-cookie");
    assert_eq!(cookies.len(), 2, "{cookies:?}");
    assert_eq!(cookies[0], "plain=v%20a%3Bl");
    assert!(cookies[1].starts_with("opts=x; expires="), "{}", cookies[1]);
    assert!(
        cookies[1].contains("path=/p")
            && cookies[1].contains("HttpOnly")
            && cookies[1].contains("SameSite=Lax")
    );
    let body = r.json();
    assert_eq!(body["code"], 201);
    assert!(body["list"]
        .as_array()
        .expect("list")
        .iter()
        .any(|h| h == "X-One: 1"));

    let r = server.get("/status-header");
    assert_eq!(
        r.status, 418,
        "a Status: header sets the status, as behind php-fpm"
    );
    assert!(r.header("status").is_none());

    let r = server.get("/redirect");
    assert_eq!(r.status, 302, "header('Location: ...') implies 302");
    assert_eq!(r.header("location"), Some("/elsewhere"));

    let r = server.get("/no-content");
    assert_eq!(r.status, 204);
    assert!(r.body.is_empty());

    let r = server.get("/nothing-here");
    assert_eq!(r.status, 404);
    assert_eq!(
        r.header("content-type"),
        Some("text/html; charset=UTF-8"),
        "PHP's default content type"
    );
}

/// With the extension PHP knows a HEAD request for what it is, as under
/// php-fpm: it sends the headers and discards the output, so the length of
/// a body it never made is not known (nginx + php-fpm send none either).
/// Without it, the body is made and counted, then dropped.
#[test]
fn head_requests_get_headers_without_a_body() {
    let server = app();
    let r = Req::new("HEAD", "/big?n=1000").send(server.addr);
    assert_eq!(r.status, 200);
    let length = if support::without_extension() {
        Some("1000")
    } else {
        None
    };
    assert_eq!(r.header("content-length"), length);
    assert!(r.body.is_empty());
    assert_eq!(r.header("content-type"), Some("text/html; charset=UTF-8"));
}

#[test]
fn sessions_persist_per_client_and_are_never_shared() {
    let server = Server::start(&fixture("app.php"), &["--workers", "1"]);
    let mut alice = CookieJar::default();
    let mut bob = CookieJar::default();
    let session = |jar: &mut CookieJar, path: &str| {
        let mut req = Req::new("GET", path);
        if !jar.header().is_empty() {
            req = req.header("Cookie", &jar.header());
        }
        let r = req.send(server.addr);
        jar.store(&r);
        (r.json(), r)
    };
    let (a1, r) = session(&mut alice, "/session?set=alice-secret");
    assert_eq!(a1["count"], 1);
    assert!(r
        .header("set-cookie")
        .is_some_and(|c| c.starts_with("PHPSESSID=")));
    let (a2, r) = session(&mut alice, "/session");
    assert_eq!(a2["count"], 2);
    assert_eq!(a2["secret"], "alice-secret");
    assert!(
        r.header("set-cookie").is_none(),
        "an existing session cookie is not sent again"
    );

    let (b1, _) = session(&mut bob, "/session");
    assert_eq!(
        b1["count"], 1,
        "bob starts his own session on the same worker"
    );
    assert_eq!(b1["secret"], serde_json::Value::Null);
    assert_ne!(b1["id"], a1["id"]);

    let anon = server.get("/session-peek").json();
    assert_eq!(
        anon["status"], 1,
        "PHP_SESSION_NONE for a request that did not start one"
    );
    assert_eq!(anon["session"], serde_json::json!([]));

    let (a3, _) = session(&mut alice, "/session");
    assert_eq!(a3["count"], 3);
    assert_eq!(a3["id"], a1["id"]);
}

/// A worker takes the session id from the cookie of the session name in
/// force when the request begins: the name the app set at boot, or in an
/// earlier request. A request that changes the name before it starts a
/// session cannot have the cookie of the new name read; the log says so,
/// and the next requests use the new name.
#[test]
fn a_session_name_changed_between_requests_is_logged() {
    let server = Server::start(&fixture("app.php"), &["--workers", "1"]);
    assert_eq!(server.get("/session").json()["count"], 1);
    let mut jar = CookieJar::default();
    let mut session = |path: &str| {
        let mut req = Req::new("GET", path);
        if !jar.header().is_empty() {
            req = req.header("Cookie", &jar.header());
        }
        let r = req.send(server.addr);
        jar.store(&r);
        r.json()
    };
    assert_eq!(session("/session?name=OTHER")["count"], 1);
    server.wait_for_log(
        "the app changed the session name from PHPSESSID to OTHER during the request",
        Duration::from_secs(10),
    );
    assert_eq!(session("/session?name=OTHER")["count"], 2);
    assert_eq!(session("/session?name=OTHER")["count"], 3);
}

#[test]
fn exit_sends_what_was_produced_and_the_worker_is_replaced() {
    let server = Server::start(&fixture("app.php"), &["--workers", "1"]);
    let before = server.get("/pid").json()["pid"].clone();
    let r = server.get("/exit");
    assert_eq!(r.status, 202);
    assert_eq!(r.header("x-before-exit"), Some("yes"));
    assert_eq!(r.text(), "before exit;exit message");
    let after = server.serving_pid();
    assert_ne!(after, before, "exit ends the worker; a new one took over");
}

#[test]
fn uncaught_exceptions_give_500_and_a_log_line_and_the_worker_goes_on() {
    let server = Server::start(&fixture("app.php"), &["--workers", "1"]);
    let pid = server.get("/pid").json()["pid"].clone();
    let r = server.get("/throw");
    assert_eq!(r.status, 500);
    assert_eq!(
        r.text(),
        "partial output;",
        "display_errors is off: the output so far, no error text"
    );
    assert_eq!(r.header("x-set-before"), Some("yes"));
    server.wait_for_log("the handler failed on purpose", Duration::from_secs(5));
    let log = server.log();
    let line = log
        .lines()
        .find(|l| l.contains("the handler failed on purpose"))
        .expect("log line");
    assert!(line.contains("RuntimeException"), "{line}");
    assert!(line.contains("app.php:"), "file and line: {line}");
    assert!(log.contains("#0 "), "a stack trace is logged:\n{log}");
    let next = server.get("/pid").json();
    assert_eq!(next["pid"], pid, "the worker survives an exception");
}

#[test]
fn fatal_errors_give_500_and_the_worker_is_replaced() {
    let server = Server::start(&fixture("app.php"), &["--workers", "1"]);
    let pid = server.get("/pid").json()["pid"].clone();
    let r = server.get("/user-fatal");
    assert_eq!(r.status, 500);
    assert_eq!(
        r.text(),
        "partial;",
        "the output before the fatal error is sent, as under php-fpm"
    );
    server.wait_for_log("a fatal error on purpose", Duration::from_secs(5));
    let next = server.serving_pid();
    assert_ne!(next, pid);

    // Out of memory, PHP drops the buffered output itself (php-fpm sends
    // an empty 500 too).
    let r = server.get("/fatal");
    assert_eq!(r.status, 500);
    assert_eq!(r.text(), "");
    server.wait_for_log("Allowed memory size", Duration::from_secs(5));
    let last = server.serving_pid();
    assert_ne!(last, next);
}

#[test]
fn flushed_output_is_streamed_before_the_handler_finishes() {
    let server = app();
    let dir = support::tempdir();
    let go = dir.path().join("go");
    let (mut conn, head) = start_stream(&server, &go);
    assert_eq!(head.status, 200);
    assert_eq!(head.header("x-streamed"), Some("yes"));
    assert_eq!(head.header("transfer-encoding"), Some("chunked"));
    // The handler is now waiting for `go`: the first chunk can only have
    // arrived because it was streamed.
    let first = conn.read_chunk().expect("first chunk");
    assert_eq!(first, b"first chunk\n");
    std::fs::write(&go, b"").expect("go");
    let mut rest = Vec::new();
    while let Some(chunk) = conn.read_chunk() {
        rest.extend(chunk);
    }
    assert_eq!(rest, b"second chunk\n");
}

#[test]
fn a_worker_killed_mid_request_fails_only_that_request() {
    let server = Server::start(&fixture("app.php"), &["--workers", "1"]);
    let dir = support::tempdir();
    let pidfile = dir.path().join("pid");
    let addr = server.addr;
    let path = format!("/sleep?pidfile={}", pidfile.display());
    let victim = std::thread::spawn(move || Req::new("GET", &path).send(addr));
    let pid = eventually(
        Duration::from_secs(10),
        "the worker to record its pid",
        || {
            std::fs::read_to_string(&pidfile)
                .ok()
                .filter(|p| !p.is_empty())
        },
    );
    let status = std::process::Command::new("kill")
        .args(["-KILL", pid.trim()])
        .status()
        .expect("kill");
    assert!(status.success());
    let r = victim.join().expect("request thread");
    assert_eq!(r.status, 502);
    let next = server.get("/pid");
    assert_eq!(
        next.status,
        200,
        "the next request succeeds: {}",
        next.text()
    );
    assert_ne!(next.json()["pid"].to_string(), pid.trim());
}

#[test]
fn bodies_over_the_limit_get_413_before_any_worker_sees_them() {
    let server = Server::start(
        &fixture("app.php"),
        &["--max-body-size", "1K", "--workers", "1"],
    );
    let served = server.get("/pid").json()["served"]
        .as_u64()
        .expect("served");
    let r = Req::new("POST", "/env")
        .form(&"a".repeat(2000))
        .send(server.addr);
    assert_eq!(r.status, 413);
    let mut conn = Connection::open(server.addr);
    conn.send(b"POST /env HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n400\r\n");
    conn.send(&[b'a'; 1024]);
    conn.send(b"\r\n400\r\n");
    conn.send(&[b'a'; 1024]);
    conn.send(b"\r\n0\r\n\r\n");
    assert_eq!(
        conn.read_response(false).status,
        413,
        "a chunked body is counted as it arrives"
    );
    let after = server.get("/pid").json()["served"]
        .as_u64()
        .expect("served");
    assert_eq!(
        after,
        served + 1,
        "only the /pid request reached the worker"
    );
}

#[test]
fn large_bodies_both_ways_arrive_intact() {
    let server = app();
    let body: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    let r = Req::new("POST", "/echo")
        .header("Content-Type", "application/octet-stream")
        .body(body.clone())
        .send(server.addr);
    assert_eq!(r.json()["md5"], format!("{:x}", md5_of(&body)));
    let r = server.get("/big?n=5000000");
    assert_eq!(r.body.len(), 5_000_000);
    let chunk = b"0123456789abcdef".repeat(4096);
    assert!(r.body.chunks(chunk.len()).all(|c| chunk.starts_with(c)));
}

#[test]
fn state_a_request_changes_is_reset_before_the_next() {
    let server = Server::start(&fixture("app.php"), &["--workers", "1"]);
    let first = server.get("/ini").json();
    let second = server.get("/ini").json();
    assert_eq!(
        first["precision"], second["precision"],
        "ini_set() is undone"
    );
    assert_eq!(
        first["tz"], second["tz"],
        "date_default_timezone_set() is undone"
    );
    assert_eq!(
        first["locale"], second["locale"],
        "Locale::setDefault() (intl.default_locale) is undone"
    );
    if !support::without_extension() {
        // With the extension every setting is put back after every
        // request, not only the watched ones (highlight.comment is not).
        assert_eq!(
            first["highlight"], second["highlight"],
            "ini_set() of a setting outside the watched list is undone"
        );
    }

    let r = server.get("/leave-buffer");
    assert_eq!(
        r.text(),
        "inside an unclosed buffer",
        "buffers left open are flushed into the response"
    );
    let level = server.get("/ob-level").json()["level"].clone();
    let again = server.get("/ob-level").json()["level"].clone();
    assert_eq!(level, again);

    let h = server.get("/headers");
    assert_eq!(h.status, 201);
    let plain = server.get("/pid");
    assert_eq!(plain.status, 200, "the status code is reset");
    assert!(plain.header("x-one").is_none(), "headers are reset");
    assert!(plain.header("set-cookie").is_none(), "cookies are reset");
}

#[test]
fn fastcgi_finish_request_sends_the_response_early() {
    let server = app();
    let r = server.get("/finish-early");
    assert_eq!(r.text(), "sent early");
}

#[test]
fn keep_alive_serves_many_requests_on_one_connection() {
    let server = app();
    let mut conn = Connection::open(server.addr);
    for i in 0..50 {
        let r = conn.get(&format!("/env?i={i}"), "");
        assert_eq!(r.status, 200);
        assert_eq!(r.json()["get"]["i"], i.to_string());
    }
}

#[test]
fn sigterm_lets_in_flight_requests_finish_then_exits_0() {
    let mut server = app();
    let dir = support::tempdir();
    let go = dir.path().join("go");
    let (mut conn, head) = start_stream(&server, &go);
    assert_eq!(head.status, 200);
    assert_eq!(conn.read_chunk().expect("first chunk"), b"first chunk\n");
    server.signal("TERM");
    server.wait_for_log("shutting down gracefully", Duration::from_secs(5));
    std::fs::write(&go, b"").expect("go");
    let mut rest = Vec::new();
    while let Some(chunk) = conn.read_chunk() {
        rest.extend(chunk);
    }
    assert_eq!(rest, b"second chunk\n", "the in-flight request completed");
    assert_eq!(server.wait_exit(Duration::from_secs(20)), Some(0));
}

/// A worker that served requests exits without a word from PHP: its
/// response headers, long sent, are not touched at exit (with the
/// extension, header_remove() then warned "Cannot modify header
/// information - headers already sent" on every stop and replacement).
#[test]
fn a_worker_stops_without_php_warnings() {
    let mut server = Server::start(&fixture("app.php"), &["--workers", "1"]);
    for _ in 0..3 {
        assert_eq!(server.get("/env").status, 200);
    }
    server.signal("TERM");
    assert_eq!(server.wait_exit(Duration::from_secs(20)), Some(0));
    server.wait_for_log("stopped", Duration::from_secs(10));
    let log = server.log();
    assert!(!log.contains("PHP Warning"), "{log}");
}

/// Starts GET /stream, whose handler sends a first chunk and then waits
/// for the file `go` before sending the rest; returns the connection and
/// the response head.
fn start_stream(server: &Server, go: &std::path::Path) -> (Connection, support::Response) {
    let mut conn = Connection::open(server.addr);
    conn.send(
        format!(
            "GET /stream?go={} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            go.display()
        )
        .as_bytes(),
    );
    let head = conn.read_head();
    (conn, head)
}

fn b64(v: &serde_json::Value) -> Vec<u8> {
    let s = v.as_str().expect("base64 string");
    let table = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let mut acc = 0u32;
    let mut bits = 0;
    for c in s.bytes().filter(|&c| c != b'=') {
        acc = (acc << 6) | table.iter().position(|&t| t == c).expect("base64 digit") as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

fn md5_of(data: &[u8]) -> md5::Digest {
    md5::compute(data)
}

// Regressions: each of these was a bug found by reading and probing the
// server; the test shows it stays fixed.

#[test]
fn max_execution_time_applies_to_each_request() {
    let server = Server::start(
        &fixture("app.php"),
        &["--workers", "1", "-d", "max_execution_time=1"],
    );
    let pid = server.get("/pid").json()["pid"].clone();
    let r = server.get("/spin");
    assert_eq!(r.status, 500);
    server.wait_for_log(
        "Maximum execution time of 1 second exceeded",
        Duration::from_secs(5),
    );
    let next = server.serving_pid();
    assert_ne!(next, pid);
}

#[test]
fn an_idle_worker_outlives_default_socket_timeout() {
    let server = Server::start(
        &fixture("app.php"),
        &["--workers", "1", "-d", "default_socket_timeout=1"],
    );
    let pid = server.get("/pid").json()["pid"].clone();
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(
        server.get("/pid").json()["pid"],
        pid,
        "the idle worker kept waiting"
    );
    assert!(
        !server.log().contains("starting a new one"),
        "{}",
        server.log()
    );
}

#[test]
fn one_echo_larger_than_a_frame_arrives_whole() {
    let server = app();
    let r = server.get("/big-echo?n=20000000");
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), 20_000_000);
    assert!(r.body.iter().all(|&b| b == b'z'));
}

#[test]
fn a_form_field_larger_than_a_frame_arrives_whole() {
    let server = Server::start(
        &fixture("app.php"),
        &["--max-body-size", "40M", "-d", "post_max_size=40M"],
    );
    let big = vec![b'f'; 17 << 20];
    let req = Req::new("POST", "/field-length")
        .multipart(&[("big", None, None, &big), ("small", None, None, b"x")]);
    let declared = req.bytes().len();
    let r = req.send(server.addr);
    assert_eq!(r.status, 200, "{}", r.text());
    let json = r.json();
    assert_eq!(json["lengths"]["big"], 17 << 20);
    assert_eq!(json["lengths"]["small"], 1);
    let header_len = declared
        - (declared
            - json["content_length"]
                .as_str()
                .expect("length")
                .parse::<usize>()
                .expect("number"));
    assert!(
        header_len > 17 << 20,
        "CONTENT_LENGTH is the whole body: {}",
        json["content_length"]
    );
}

#[test]
fn content_length_of_a_multipart_request_is_the_whole_body() {
    let server = app();
    let req = Req::new("POST", "/field-length")
        .multipart(&[("a", None, None, b"1"), ("b", None, None, b"22")]);
    let raw = req.bytes();
    let body_start = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("end of head")
        + 4;
    let r = req.send(server.addr).json();
    assert_eq!(r["content_length"], (raw.len() - body_start).to_string());
}

#[test]
fn an_error_after_fastcgi_finish_request_is_logged_and_harms_no_one() {
    let server = Server::start(&fixture("app.php"), &["--workers", "1"]);
    let r = server.get("/finish-then-throw");
    assert_eq!(r.text(), "sent");
    server.wait_for_log("failed after the response was sent", Duration::from_secs(5));
    for _ in 0..3 {
        assert_eq!(server.get("/pid").status, 200);
    }
}

#[test]
fn a_configured_disable_functions_keeps_uploads_working() {
    let server = Server::start(&fixture("app.php"), &["-d", "disable_functions=exec"]);
    let moved = Req::new("POST", "/upload")
        .multipart(&[("doc", Some("r.txt"), Some("text/plain"), b"data")])
        .send(server.addr)
        .json();
    assert_eq!(moved["doc"]["moved"], true, "{moved}");
}

#[test]
fn cgi_variables_in_hearths_environment_do_not_break_startup() {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_hearth"))
        .args([
            "serve",
            fixture("app.php").to_str().expect("path"),
            "--listen",
            "127.0.0.1:0",
            "--workers",
            "1",
        ])
        .args(support::as_root())
        .env("REQUEST_METHOD", "GET")
        .env("SCRIPT_FILENAME", "/etc/passwd")
        .env("NO_COLOR", "1")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stderr = std::io::BufReader::new(child.stderr.take().expect("stderr"));
    let mut seen = String::new();
    let ready = loop {
        let mut line = String::new();
        if std::io::BufRead::read_line(&mut stderr, &mut line).unwrap_or(0) == 0 {
            break false;
        }
        seen.push_str(&line);
        if line.contains(" worker ready") || line.contains(" workers ready") {
            break true;
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    assert!(ready, "{seen}");
}

#[test]
fn expose_php_sends_x_powered_by_as_php_fpm_would() {
    let server = Server::start(&fixture("app.php"), &["-d", "expose_php=1"]);
    let r = server.get("/pid");
    assert!(
        r.header("x-powered-by")
            .is_some_and(|v| v.starts_with("PHP/8")),
        "{:?}",
        r.headers
    );
}

#[test]
fn psr7_apps_get_requests_and_send_responses() {
    let server = Server::start(&fixture("psr7.php"), &[]);
    let r = Req::new("POST", "/echo?q=1")
        .header("Cookie", "c=v")
        .header("X-Test", "yes")
        .form("a=1&b[]=2")
        .send(server.addr);
    assert_eq!(r.status, 200, "{}", r.text());
    let j = r.json();
    assert_eq!(j["method"], "POST");
    assert_eq!(j["uri"], format!("http://localhost/echo?q=1"));
    assert_eq!(j["query"]["q"], "1");
    assert_eq!(j["parsed"]["b"][0], "2");
    assert_eq!(j["cookies"]["c"], "v");
    assert_eq!(j["body"], "a=1&b[]=2");
    assert_eq!(j["header"], "yes");

    let r = Req::new("POST", "/files")
        .multipart(&[("f", Some("f.txt"), Some("text/plain"), b"file body")])
        .send(server.addr);
    assert_eq!(
        r.json()["files"]["f"],
        serde_json::json!(["f.txt", 9, "file body"])
    );

    let r = server.get("/html");
    assert_eq!(
        r.header("content-type"),
        Some("text/html;charset=UTF-8"),
        "as PHP's header() would store it"
    );
    let r = server.get("/created");
    assert_eq!(r.status, 201);
    assert_eq!(r.header("location"), Some("/things/1"));
    assert_eq!(r.headers_named("set-cookie"), vec!["a=1", "b=2"]);
}

#[test]
fn exit_or_a_fatal_error_after_fastcgi_finish_request_harms_no_one() {
    let server = Server::start(&fixture("app.php"), &["--workers", "1"]);
    for path in ["/finish-then-exit", "/finish-then-fatal"] {
        let r = server.get(path);
        assert_eq!(r.text(), "sent", "{path}");
        // The worker is still busy with the request; the next request waits
        // for it (or for its replacement) instead of being sent to it.
        for _ in 0..3 {
            let r = server.get("/pid");
            assert_eq!(r.status, 200, "after {path}: {}", r.text());
        }
    }
    server.wait_for_log("fatal after the response was sent", Duration::from_secs(5));
    let log = server.log();
    assert!(
        !log.contains("worker killed"),
        "exiting workers are let go, not killed:\n{log}"
    );
}

/// A buffer the app made impossible to remove: with the extension, PHP's
/// output layer ends it with the request, as at the end of any PHP
/// request, and the worker serves on with none left; without it, the
/// library cannot remove it, and the worker is replaced.
#[test]
fn a_buffer_the_app_cannot_remove_ends_with_its_request() {
    let server = Server::start(&fixture("app.php"), &["--workers", "1"]);
    let pid = server.get("/pid").json()["pid"].clone();
    let level = server.get("/ob-level").json()["level"].clone();
    let r = server.get("/sticky-buffer");
    assert_eq!(r.text(), "in a sticky buffer");
    let next = server.serving_pid();
    if !support::without_extension() {
        assert_eq!(next, pid);
        assert_eq!(server.get("/ob-level").json()["level"], level);
        return;
    }
    assert_ne!(next, pid);
    assert!(
        !server.log().contains("sending SIGTERM"),
        "it left by itself:\n{}",
        server.log()
    );
}

/// Issue 8: a session closed before its request ended (here by
/// session_write_close()) in the first request of a worker to use sessions
/// left its id set, and the next client without a cookie was given it.
#[test]
fn a_session_closed_early_is_not_handed_to_the_next_client() {
    let server = Server::start(&fixture("app.php"), &["--workers", "1"]);
    let alice = server.get("/session?set=alice-secret&close=1");
    assert_eq!(alice.json()["count"], 1);
    let bob = server.get("/session");
    assert_eq!(
        bob.json()["secret"],
        serde_json::Value::Null,
        "{}",
        bob.text()
    );
    assert_eq!(bob.json()["count"], 1);
    assert_ne!(bob.json()["id"], alice.json()["id"]);
    assert_ne!(bob.header("set-cookie"), alice.header("set-cookie"));
}

#[test]
fn a_session_changed_after_fastcgi_finish_request_is_written() {
    let server = Server::start(&fixture("app.php"), &["--workers", "1"]);
    let mut jar = CookieJar::default();
    let r = server.get("/finish-then-session");
    assert_eq!(r.text(), "sent");
    jar.store(&r);
    assert!(
        jar.get("PHPSESSID").is_some(),
        "the session cookie went out with the early response"
    );
    let r = Req::new("GET", "/session")
        .header("Cookie", &jar.header())
        .send(server.addr)
        .json();
    assert_eq!(r["secret"], "written after the response", "{r}");
}

#[test]
fn set_time_limit_does_not_outlive_its_request() {
    let server = Server::start(
        &fixture("app.php"),
        &["--workers", "1", "-d", "max_execution_time=0"],
    );
    assert_eq!(server.get("/set-limit?s=1").json()["limit"], "1");
    let r = server.get("/cpu?ms=1300");
    assert_eq!(
        r.status,
        200,
        "the next request runs under max_execution_time=0 again: {}",
        r.text()
    );
    assert_eq!(r.json()["limit"], "0");
}

#[test]
fn busy_workers_get_the_stop_message_when_their_request_ends() {
    let mut server = Server::start(
        &fixture("app.php"),
        &["--workers", "1", "--stop-timeout", "30s"],
    );
    let dir = support::tempdir();
    let mark = dir.path().join("started");
    let addr = server.addr;
    let path = format!("/slow?ms=500&mark={}", mark.display());
    let request = std::thread::spawn(move || Req::new("GET", &path).send(addr));
    eventually(Duration::from_secs(10), "the request to start", || {
        mark.exists().then_some(())
    });
    server.signal("TERM");
    assert_eq!(request.join().expect("request").status, 200);
    assert_eq!(server.wait_exit(Duration::from_secs(20)), Some(0));
    let log = server.log();
    assert!(
        !log.contains("sending SIGTERM"),
        "the worker stopped on the stop message:\n{log}"
    );
}

#[test]
fn a_workers_channel_is_a_socket_on_its_standard_input() {
    let server = Server::start(&fixture("app.php"), &["--workers", "1"]);
    let pid = server.get("/pid").json()["pid"].as_u64().expect("pid");
    let stdin = std::fs::read_link(format!("/proc/{pid}/fd/0")).expect("fd 0");
    assert!(
        stdin.to_string_lossy().starts_with("socket:"),
        "{}",
        stdin.display()
    );
    // Nothing on the file system: no FIFO, no path in the environment.
    let environ = std::fs::read(format!("/proc/{pid}/environ")).expect("environ");
    assert!(!environ
        .split(|&b| b == 0)
        .any(|kv| kv.starts_with(b"HEARTH_RESPONSES=")));
}

#[test]
fn hearth_variables_in_hearths_environment_do_not_reach_workers() {
    let root = support::root();
    let basedir = format!("{}:/tmp:/var/lib/php/sessions", root.display());
    let mut server = Server::spawn_args(&[
        "serve".into(),
        fixture("app.php").to_string_lossy().into_owned(),
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--workers".into(),
        "1".into(),
        "-d".into(),
        format!("open_basedir={basedir}"),
    ]);
    let _ = &mut server;
    server.wait_until_ready();
    assert_eq!(server.get("/pid").status, 200);
}
