//! The reference for PHP behaviour is nginx + php-fpm with Debian's
//! defaults. This test serves one legacy app (tests/fixtures/legacy) with
//! both, sends both the same requests, and compares status, headers and
//! body. The few differences that are by design are listed here, and in
//! docs/compatibility.md.

#[path = "support/reference.rs"]
mod reference;
#[path = "support/mod.rs"]
mod support;

use std::collections::BTreeMap;

use reference::Reference;
use support::{fixture, request, CookieJar, Req, Response, Server};

/// Headers that describe the transport, not the app: nginx sends chunked
/// bodies with `Connection: keep-alive` and its `Server`; Hearth sends a
/// Content-Length when the whole body is at hand.
const TRANSPORT_HEADERS: &[&str] = &[
    "date",
    "server",
    "connection",
    "transfer-encoding",
    "content-length",
    "keep-alive",
];

/// Status, headers and body as an HTTP client sees them: header names are
/// case-insensitive and the order of different names carries no meaning
/// (nginx emits Content-Type in a place of its own), so headers are grouped
/// by name, keeping the order of repeated ones (Set-Cookie).
fn comparable(
    r: &Response,
    normalize: &dyn Fn(&str) -> String,
) -> (u16, Vec<(String, String)>, String) {
    let mut headers: Vec<(String, String)> = r
        .headers
        .iter()
        .filter(|(n, _)| !TRANSPORT_HEADERS.contains(&n.to_ascii_lowercase().as_str()))
        .map(|(n, v)| (n.to_ascii_lowercase(), normalize(v)))
        .collect();
    headers.sort_by(|a, b| a.0.cmp(&b.0));
    (r.status, headers, normalize(&r.text()))
}

fn same(name: &str, fpm: &Response, hearth: &Response) {
    same_normalized(name, fpm, hearth, &|s: &str| s.to_owned());
}

fn same_normalized(
    name: &str,
    fpm: &Response,
    hearth: &Response,
    normalize: &dyn Fn(&str) -> String,
) {
    if let Some(difference) = difference(name, (fpm, normalize), (hearth, normalize)) {
        panic!("{difference}");
    }
}

/// How Hearth's response differs from php-fpm's, if it does, each side
/// normalized with its own function (session ids are named relative to the
/// cookie each side was sent).
fn difference(
    name: &str,
    (fpm, fpm_normalize): (&Response, &dyn Fn(&str) -> String),
    (hearth, hearth_normalize): (&Response, &dyn Fn(&str) -> String),
) -> Option<String> {
    let (fs, fh, fb) = comparable(fpm, fpm_normalize);
    let (hs, hh, hb) = comparable(hearth, hearth_normalize);
    if hs != fs {
        Some(format!(
            "{name}: status {hs}, php-fpm {fs} (php-fpm body: {fb:?}, hearth body: {hb:?})"
        ))
    } else if hh != fh {
        Some(format!(
            "{name}: headers\n  hearth:  {hh:?}\n  php-fpm: {fh:?}"
        ))
    } else if hb != fb {
        Some(format!(
            "{name}: body\n  hearth:  {hb:?}\n  php-fpm: {fb:?}"
        ))
    } else {
        None
    }
}

struct Both {
    fpm: Reference,
    hearth: Server,
}

impl Both {
    fn start() -> Both {
        Both::start_with(&[])
    }

    /// Hearth started with `extra` flags (`--workers 1` puts every request
    /// on one worker, where what a request leaves behind would show).
    fn start_with(extra: &[&str]) -> Both {
        Both::start_script("index.php", extra)
    }

    /// With `script`, a front controller in the legacy app's directory.
    fn start_script(script: &str, extra: &[&str]) -> Both {
        let docroot = fixture("legacy");
        let fpm = Reference::start(&docroot, script);
        let hearth = Server::start(&docroot.join(script), extra);
        Both { fpm, hearth }
    }

    /// Both taking request bodies up to `size` (nginx's
    /// client_max_body_size, Hearth's --max-body-size); PHP's settings are
    /// Debian's on both sides (post_max_size = 8M).
    fn start_taking_bodies_of(size: &str) -> Both {
        let docroot = fixture("legacy");
        let fpm = Reference::start_with(&docroot, "index.php", &[("CLIENT_MAX_BODY_SIZE", size)]);
        let hearth = Server::start(&docroot.join("index.php"), &["--max-body-size", size]);
        Both { fpm, hearth }
    }

    fn send(&self, req: &Req) -> (Response, Response) {
        (req.send(self.fpm.addr), req.send(self.hearth.addr))
    }

    /// GET `path` on both: php-fpm answers `status` (so a match is not two
    /// equal failures), and Hearth answers the same.
    fn expect(&self, path: &str, status: u16) {
        let (f, h) = self.send(&Req::new("GET", path));
        assert_eq!(
            f.status, status,
            "php-fpm answered {path} with {}",
            f.status
        );
        same(path, &f, &h);
    }

    fn raw(&self, bytes: &[u8]) -> (Response, Response) {
        (
            request(self.fpm.addr, bytes),
            request(self.hearth.addr, bytes),
        )
    }
}

#[test]
fn server_variables_match_php_fpm() {
    let both = Both::start();
    let req = Req::new("GET", "/server?x=1&y=%20z")
        .header("User-Agent", "differential/1.0")
        .header("Accept", "text/html")
        .header("Accept-Language", "en")
        .header("Cookie", "a=1; b=2")
        .header("X-Forwarded-For", "10.0.0.1")
        .header("Authorization", "Basic dXNlcjpwYXNz");
    let (fpm, hearth) = both.send(&req);
    assert_eq!(fpm.status, 200, "{}", fpm.text());
    assert_eq!(hearth.status, 200, "{}", hearth.text());
    let fpm: BTreeMap<String, serde_json::Value> =
        serde_json::from_slice(&fpm.body).expect("fpm json");
    let hearth: BTreeMap<String, serde_json::Value> =
        serde_json::from_slice(&hearth.body).expect("hearth json");

    // By design: the server's name and version; ports and times; and the
    // process environment, which php-fpm clears (clear_env = yes) and
    // Hearth passes to workers as `php -S` and most app servers do.
    let varies = [
        "SERVER_SOFTWARE",
        "SERVER_PORT",
        "REMOTE_PORT",
        "REQUEST_TIME",
        "REQUEST_TIME_FLOAT",
        "HTTP_HOST",
    ];
    // The environment of the hearth process: the test's own, plus what the
    // test harness sets for it.
    let mut env: Vec<String> = std::env::vars().map(|(k, _)| k).collect();
    env.extend(["HEARTH_LOG".to_owned(), "NO_COLOR".to_owned()]);
    let fpm_only_by_design = ["FCGI_ROLE", "USER", "HOME"];
    let mut problems = Vec::new();
    for key in fpm.keys() {
        if !hearth.contains_key(key) && !fpm_only_by_design.contains(&key.as_str()) {
            problems.push(format!(
                "$_SERVER[{key}] is missing under Hearth (php-fpm: {})",
                fpm[key]
            ));
        }
    }
    for key in hearth.keys() {
        if !fpm.contains_key(key) && !env.contains(key) {
            problems.push(format!(
                "$_SERVER[{key}] exists under Hearth but not under php-fpm: {}",
                hearth[key]
            ));
        }
    }
    for (key, value) in &fpm {
        if varies.contains(&key.as_str()) || env.contains(key) {
            continue;
        }
        if let Some(mine) = hearth.get(key) {
            if mine != value {
                problems.push(format!("$_SERVER[{key}]: php-fpm {value}, hearth {mine}"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "$_SERVER differs:\n{}",
        problems.join("\n")
    );
    for key in [
        "REQUEST_TIME",
        "REQUEST_TIME_FLOAT",
        "SERVER_PORT",
        "REMOTE_PORT",
    ] {
        assert_eq!(
            std::mem::discriminant(&hearth[key]),
            std::mem::discriminant(&fpm[key]),
            "$_SERVER[{key}] has the same type ({} vs {})",
            hearth[key],
            fpm[key]
        );
    }
}

#[test]
fn query_strings_cookies_and_headers_match() {
    let both = Both::start();
    let (f, h) = both.send(
        &Req::new(
            "GET",
            "/?a=1&b[]=2&b[]=3&c.d=4&e[x][y]=5&%C3%A9=%E2%82%AC&plus=a+b",
        )
        .header(
            "Cookie",
            "s=1; t=x+y; u=%20v; arr[k]=w; s=second; sp.a ce=7",
        ),
    );
    assert_eq!(f.status, 200);
    same("GET / with a query and cookies", &f, &h);
    let cases = [
        ("/redirect", 302),
        ("/gone", 410),
        ("/teapot", 418),
        ("/missing", 404),
        ("/headers", 200),
        ("/no-content", 204),
        ("/empty", 200),
        ("/big", 200),
        ("/nope/deeper?q=1", 404),
    ];
    for (path, status) in cases {
        both.expect(path, status);
    }
    let (f, h) = both.send(&Req::new("HEAD", "/index"));
    assert_eq!(f.status, 200);
    same("HEAD", &f, &h);
    let (f, h) = both.send(
        &Req::new("GET", "/server").header("Authorization", "Digest username=\"u\", realm=\"r\""),
    );
    let (fj, hj) = (f.json(), h.json());
    for key in ["PHP_AUTH_DIGEST", "REMOTE_USER"] {
        assert_eq!(hj[key], fj[key], "$_SERVER[{key}] with Digest credentials");
    }
    let (f, h) = both.send(&Req::new("GET", "/server"));
    assert_eq!(
        h.json()["REMOTE_USER"],
        f.json()["REMOTE_USER"],
        "REMOTE_USER without credentials"
    );
}

/// Issue 21, item 12 (CVE-2022-31629): PHP never mangles a cookie name
/// into `__Host-` or `__Secure-`, so a sibling subdomain's `..Host-x`
/// neither passes for nor shadows the real `__Host-x`. The cookies of
/// php-src's ext/standard/tests/bug81727.phpt and ghsa-wpj3-hf5j-x4v4.phpt,
/// and names with quotes, backslashes, dots, spaces and brackets
/// (tests/basic/028.phpt's), land in `$_COOKIE` as php-fpm puts them.
#[test]
fn cookie_names_are_never_mangled_into_host_or_secure_prefixes() {
    let both = Both::start();
    let mut ghsa = Vec::new();
    for prefix in ["Host", "Secure"] {
        for suffix in ["", "[]"] {
            for start in ["..", "._", ".[", "_.", "__", "_[", "[.", "[_", "[["] {
                ghsa.push(format!("{start}{prefix}-test{suffix}={start}{suffix}"));
            }
        }
    }
    let headers = [
        "..Host-test=ignore; __Host-test=correct; . Secure-test=ignore; . Elephpant=Awesome;"
            .to_owned(),
        ghsa.join("; "),
        "__Host-a=1; ..Host-a=2; __Secure-b=3; .[Secure-b=4; _.Host-u=5; __Host-u=6".to_owned(),
        r#"n\4=a; n\\5=b; n\'6=c; n\"7=d; 'n8'=e; "n9"=f; a.b c[d.e f]=1; q[ a]=3; r[ ]=4; s[]x=5; t]=6"#
            .to_owned(),
    ];
    for header in &headers {
        let (f, h) = both.send(&Req::new("GET", "/cookies").header("Cookie", header));
        assert_eq!(f.status, 200, "php-fpm: {}", f.text());
        same(&format!("$_COOKIE from {header:?}"), &f, &h);
    }
    let (f, _) = both.send(&Req::new("GET", "/cookies").header("Cookie", &headers[0]));
    assert!(
        f.text()
            .contains("[\"__Host-test\"]=>\n  string(7) \"correct\""),
        "php-fpm keeps the real __Host- cookie: {}",
        f.text()
    );
}

#[test]
fn forms_and_raw_bodies_match() {
    let both = Both::start();
    let cases = [
        Req::new("POST", "/form?q=get")
            .form("name=Ada+L&tags[]=a&tags[]=b&x[y][z]=1&%C3%A9=%E2%82%AC&q=post"),
        Req::new("POST", "/form")
            .header(
                "Content-Type",
                "application/x-www-form-urlencoded; charset=UTF-8",
            )
            .body("a=1"),
        Req::new("PUT", "/form").form("a=1"),
        Req::new("POST", "/form")
            .header("Content-Type", "text/plain")
            .body("a=1&b=2"),
        Req::new("PUT", "/json")
            .header("Content-Type", "application/json")
            .body(r#"{"k":[1,2]}"#),
        Req::new("DELETE", "/json")
            .header("Content-Type", "application/json")
            .body("{}"),
        Req::new("PATCH", "/json").body("patch body"),
    ];
    for (i, req) in cases.iter().enumerate() {
        let (f, h) = both.send(req);
        assert_eq!(f.status, 200, "php-fpm, body case {i}: {}", f.text());
        same(&format!("body case {i}"), &f, &h);
    }
    let chunked = b"POST /form HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n4\r\na=1&\r\n3\r\nb=2\r\n0\r\n\r\n";
    let (f, h) = both.raw(chunked);
    assert!(f.text().contains("'b' => '2'"), "{}", f.text());
    same("chunked form", &f, &h);
}

#[test]
fn uploads_match() {
    let both = Both::start();
    let req = Req::new("POST", "/upload").multipart(&[
        ("title", None, None, b"T\xc3\xa9st"),
        (
            "doc",
            Some("dir/report.txt"),
            Some("text/plain"),
            b"contents\x00\xff",
        ),
        (
            "many[]",
            Some("a.bin"),
            Some("application/octet-stream"),
            b"AAAA",
        ),
        ("many[]", Some("b.bin"), None, b"BB"),
        ("deep[x][]", Some("c.txt"), Some("text/plain"), b"C"),
        ("empty", Some(""), Some("application/octet-stream"), b""),
        ("list[]", None, None, b"1"),
        ("list[]", None, None, b"2"),
    ]);
    let (f, h) = both.send(&req);
    assert_eq!(f.status, 200, "{}", f.text());
    assert!(
        f.text()
            .contains("'tmp_name' => '83f0bcef574dc700c6dc46244ae92531'"),
        "uploads were read: {}",
        f.text()
    );
    same("multipart upload", &f, &h);
}

#[test]
fn sessions_match() {
    let both = Both::start();
    let sid = regex_free_session_id;
    let mut fjar = CookieJar::default();
    let mut hjar = CookieJar::default();
    let (f, h) = both.send(&Req::new("GET", "/session"));
    fjar.store(&f);
    hjar.store(&h);
    same_normalized("first session request", &f, &h, &sid);
    let f = Req::new("GET", "/session")
        .header("Cookie", &fjar.header())
        .send(both.fpm.addr);
    let h = Req::new("GET", "/session")
        .header("Cookie", &hjar.header())
        .send(both.hearth.addr);
    same_normalized("second session request", &f, &h, &sid);
    assert_eq!(f.text(), "n=2");
    assert!(f.header("set-cookie").is_none());
}

/// Every way a script can start, change and end a session, each with and
/// without a session cookie, on one Hearth worker: the Set-Cookie headers
/// (how many, with which attributes, and which ids: one a client sent, one
/// handed out before, or a new one), the cache headers and the body match
/// php-fpm; and so do the next requests, of the same client (what was
/// stored under which id) and of a new one (nothing of the last client's
/// session). Issue 8, bug 4: after session_destroy() Hearth sent the
/// client's own session cookie back; php-fpm sends none. And a session
/// closed before the end of the first request that used sessions in a
/// worker (session_write_close(), read_and_close) was handed to the next
/// client without a cookie.
#[test]
fn every_session_path_matches() {
    let both = Both::start_with(&["--workers", "1"]);
    let paths = [
        "/session/start",
        "/session/regenerate",
        "/session/regenerate-delete",
        "/session/destroy",
        "/session/logout",
        "/session/destroy-restart",
        "/session/write-close",
        "/session/read-and-close",
        "/session/setcookie",
    ];
    let mut differences = Vec::new();
    let (f_ids, h_ids) = (SessionIds::default(), SessionIds::default());
    // One client on each side: sends its cookies, keeps what it is sent.
    let mut visit = |name: &str, path: &str, jars: &mut (CookieJar, CookieJar)| {
        let send = |jar: &CookieJar, addr| {
            let mut req = Req::new("GET", path);
            if !jar.header().is_empty() {
                req = req.header("Cookie", &jar.header());
            }
            req.send(addr)
        };
        let (f, h) = (
            send(&jars.0, both.fpm.addr),
            send(&jars.1, both.hearth.addr),
        );
        differences.extend(difference(
            &format!("{name}: GET {path}"),
            (&f, &|s: &str| f_ids.name(s)),
            (&h, &|s: &str| h_ids.name(s)),
        ));
        jars.0.store(&f);
        jars.1.store(&h);
    };
    for path in paths {
        // A new worker: the path is the first session this worker sees.
        assert_eq!(both.hearth.get("/exit").status, 200);
        let mut first = (CookieJar::default(), CookieJar::default());
        let mut second = (CookieJar::default(), CookieJar::default());
        visit("no session cookie", path, &mut first);
        visit("a new client right after", "/session/start", &mut second);
        visit("the first client again", "/session/start", &mut first);
        visit("with a session cookie", path, &mut second);
        visit("the same client next", "/session/start", &mut second);
        let mut third = (CookieJar::default(), CookieJar::default());
        visit("a new client right after", "/session/start", &mut third);
    }
    assert!(
        differences.is_empty(),
        "{} responses differ from php-fpm's:\n{}",
        differences.len(),
        differences.join("\n")
    );
}

/// Session settings an app sets once, when its first request builds the
/// service that uses them, hold for every later request of the worker, as
/// they hold for every request under php-fpm, where each request builds
/// the service again. Symfony 5.4's session storage sets
/// session.cache_limiter this way: from the second request of a worker,
/// Hearth restored PHP's default and sent PHP's cache headers (Expires:
/// Thu, 19 Nov 1981...) besides Symfony's. The requests go past the 64
/// after which the library compares every setting with its boot value.
#[test]
fn session_settings_an_app_sets_once_hold_for_later_requests() {
    let both = Both::start_with(&["--workers", "1"]);
    let (f_ids, h_ids) = (SessionIds::default(), SessionIds::default());
    let (mut f_jar, mut h_jar) = (CookieJar::default(), CookieJar::default());
    let mut differences = Vec::new();
    for i in 0..70 {
        if i % 10 == 0 {
            // A new client now and then: a new session, a new cookie.
            (f_jar, h_jar) = (CookieJar::default(), CookieJar::default());
        }
        let send = |jar: &CookieJar, addr| {
            let mut req = Req::new("GET", "/session/configured-once");
            if !jar.header().is_empty() {
                req = req.header("Cookie", &jar.header());
            }
            req.send(addr)
        };
        let (f, h) = (send(&f_jar, both.fpm.addr), send(&h_jar, both.hearth.addr));
        assert!(f.header("expires").is_none(), "php-fpm: {:?}", f.headers);
        differences.extend(difference(
            &format!("request {}", i + 1),
            (&f, &|s: &str| f_ids.name(s)),
            (&h, &|s: &str| h_ids.name(s)),
        ));
        f_jar.store(&f);
        h_jar.store(&h);
    }
    assert!(
        differences.is_empty(),
        "{} responses differ from php-fpm's:\n{}",
        differences.len(),
        differences.join("\n")
    );
    assert!(
        !both.hearth.log().contains("session."),
        "no session setting was restored: {}",
        both.hearth.log()
    );
}

/// An app's own session name, set during the request with session_name()
/// or ini_set('session.name') (as Symfony's `name` option does), or at
/// boot before Worker::serve(): sessions last from request to request, as
/// under php-fpm, on a worker that has served sessions before, also for
/// a client that has a cookie of PHP's default name too. Hearth used to
/// take the session id from the cookie named at boot, whatever name the
/// app set in the request: such sessions never lasted past one request.
#[test]
fn session_names_the_app_sets_match() {
    for (script, path) in [
        ("index.php", "/session/named"),
        ("index.php", "/session/ini-named"),
        ("named-at-boot.php", "/session/start"),
    ] {
        let both = Both::start_script(script, &["--workers", "1"]);
        let (f_ids, h_ids) = (SessionIds::default(), SessionIds::default());
        let mut differences = Vec::new();
        let mut visit = |name: &str, jars: &mut (CookieJar, CookieJar), extra_cookie: &str| {
            let send = |jar: &CookieJar, addr| {
                let cookies = [jar.header(), extra_cookie.to_owned()]
                    .into_iter()
                    .filter(|c| !c.is_empty())
                    .collect::<Vec<_>>()
                    .join("; ");
                let mut req = Req::new("GET", path);
                if !cookies.is_empty() {
                    req = req.header("Cookie", &cookies);
                }
                req.send(addr)
            };
            let (f, h) = (
                send(&jars.0, both.fpm.addr),
                send(&jars.1, both.hearth.addr),
            );
            assert_eq!(f.status, 200, "php-fpm: {}", f.text());
            differences.extend(difference(
                &format!("{script} {path}, {name}"),
                (&f, &|s: &str| f_ids.name(s)),
                (&h, &|s: &str| h_ids.name(s)),
            ));
            jars.0.store(&f);
            jars.1.store(&h);
            f.text()
        };
        let mut first = (CookieJar::default(), CookieJar::default());
        let mut second = (CookieJar::default(), CookieJar::default());
        let stray = "PHPSESSID=0123456789abcdefghijklmnop";
        visit("a new client", &mut first, "");
        let again = visit("the same client", &mut first, "");
        assert!(again.contains(r#"session={"n":2}"#), "php-fpm: {again}");
        visit("a client with a PHPSESSID cookie too", &mut second, stray);
        visit("the first client again", &mut first, "");
        visit("the second client again", &mut second, stray);
        assert!(
            differences.is_empty(),
            "{} responses differ from php-fpm's:\n{}",
            differences.len(),
            differences.join("\n")
        );
    }
}

/// Issue 21, item 11: Content-Type as PHP sends it when the app empties,
/// removes or doubles it, header_register_callback(), and a 304.
#[test]
fn response_header_edge_cases_match() {
    let both = Both::start();
    for path in [
        "/content-type/empty",
        "/content-type/removed",
        "/content-type/removed-default",
        "/content-type/twice",
        "/header-callback",
    ] {
        both.expect(path, 200);
    }
    both.expect("/not-modified", 304);
}

/// Issue 21, items 5 and 6: PHP's output layer as under php-fpm: output
/// after the app ends every buffer, the default buffer of
/// `output_buffering`, and headers that have gone once output passed it.
#[test]
fn output_buffering_and_sent_headers_match() {
    let both = Both::start_with(&["--workers", "1"]);
    for _ in 0..2 {
        for path in [
            "/output/cleared",
            "/output/get-clean",
            "/output/status",
            "/output/header-within-buffer",
            "/output/header-after-buffer",
            "/output/flushed",
            "/big",
        ] {
            both.expect(path, 200);
        }
    }
    // ob_gzhandler compresses for a client that accepts gzip, as PHP's
    // own handler does under php-fpm, and leaves the others alone.
    for accept in ["gzip", "deflate", ""] {
        let mut req = Req::new("GET", "/output/gzhandler");
        if !accept.is_empty() {
            req = req.header("Accept-Encoding", accept);
        }
        let (f, h) = both.send(&req);
        same(&format!("ob_gzhandler, Accept-Encoding {accept:?}"), &f, &h);
        if accept == "gzip" {
            assert_eq!(h.header("content-encoding"), Some("gzip"));
        }
    }
    // The answers say what they should, not merely the same thing.
    let h = both.hearth.get("/output/header-after-buffer");
    assert!(
        h.text().contains("sent=true at index.php")
            && h.text()
                .contains("Cannot modify header information - headers already sent"),
        "{}",
        h.text()
    );
    assert_eq!(h.header("location"), None);
    let h = both.hearth.get("/output/cleared");
    assert!(
        h.text().contains("session name of its own") && h.text().ends_with("level 0"),
        "{}",
        h.text()
    );
    assert_eq!(
        both.hearth.get("/output/get-clean").text(),
        "got [captured] at level 0"
    );
}

/// Issue 21, item 14: `zlib.output_compression` from php.ini compresses a
/// response when the client accepts gzip, with PHP's own headers, and
/// leaves it alone when it does not.
#[test]
fn zlib_output_compression_matches() {
    let ini = support::reachable_tempdir();
    let file = ini.path().join("zz-hearth-test.ini");
    std::fs::write(&file, "zlib.output_compression = On\n").expect("ini");
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let scan = format!(":{}", ini.path().display());
    let docroot = fixture("legacy");
    let fpm = Reference::start_with(&docroot, "index.php", &[("PHP_INI_SCAN_DIR", &scan)]);
    let mut cmd = std::process::Command::new(support::hearth_bin());
    cmd.arg("serve")
        .arg(docroot.join("index.php"))
        .args(["--listen", "127.0.0.1:0", "--workers", "1", "--php"])
        .arg(support::php_binary())
        .args(support::as_root())
        .env("PHP_INI_SCAN_DIR", &scan);
    let hearth = Server::spawn_command(cmd);
    hearth.wait_until_ready();
    let both = Both { fpm, hearth };
    for _ in 0..2 {
        for accept in ["gzip", "deflate", "identity", ""] {
            let mut req = Req::new("GET", "/big");
            if !accept.is_empty() {
                req = req.header("Accept-Encoding", accept);
            }
            let (f, h) = both.send(&req);
            assert_eq!(f.status, 200);
            same(&format!("/big with Accept-Encoding {accept:?}"), &f, &h);
            if accept == "gzip" {
                assert_eq!(h.header("content-encoding"), Some("gzip"));
            }
        }
        // PHP compresses what nginx's gzip (and Hearth's) would not: any
        // type, and output flushed as it goes.
        for path in ["/output/status", "/output/binary", "/output/flushed"] {
            let (f, h) = both.send(&Req::new("GET", path).header("Accept-Encoding", "gzip"));
            assert_eq!(f.header("content-encoding"), Some("gzip"), "{path}");
            same(&format!("{path} compressed"), &f, &h);
        }
    }
}

#[test]
fn exit_and_errors_match() {
    let both = Both::start();
    for (path, status) in [
        ("/exit", 200),
        ("/exit-shutdown", 200),
        ("/exception", 500),
        ("/user-error", 500),
        ("/exception-404", 404),
        // Three times: on one worker, each request's functions run once.
        ("/shutdown", 200),
        ("/shutdown", 200),
        ("/shutdown", 200),
        ("/user-error-shown", 200),
    ] {
        both.expect(path, status);
    }
    // Displayed, an uncaught exception's text is PHP's up to its stack
    // trace, whose last frames are the worker runtime's under Hearth
    // (docs/compatibility.md, "Backtraces").
    let (f, h) = both.send(&Req::new("GET", "/exception-shown"));
    assert_eq!(
        (f.status, h.status),
        (200, 200),
        "php-fpm: {}
hearth: {}",
        f.text(),
        h.text()
    );
    let upto_trace = |r: &Response| {
        r.text()
            .split("Stack trace")
            .next()
            .unwrap_or_default()
            .to_owned()
    };
    assert!(
        f.text().contains("Uncaught RuntimeException: shown"),
        "{}",
        f.text()
    );
    assert_eq!(upto_trace(&h), upto_trace(&f));
}

/// Replaces PHP session ids (26 or more [a-z0-9,-] characters after
/// PHPSESSID=) with a placeholder.
fn regex_free_session_id(s: &str) -> String {
    replace_values(s, "PHPSESSID=", session_id_len, |_| "<sid>".to_owned())
}

/// Replaces each value that follows `marker` in `s` (its length given by
/// `len`) with what `replace` makes of it.
fn replace_values(
    s: &str,
    marker: &str,
    len: impl Fn(&str) -> usize,
    mut replace: impl FnMut(&str) -> String,
) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find(marker) {
        out.push_str(&rest[..at + marker.len()]);
        rest = &rest[at + marker.len()..];
        let end = len(rest);
        out.push_str(&replace(&rest[..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// Issue 8 (3, 6): request targets with bytes nginx takes as they are
/// (`"{}|<>^` and backtick, `\`, bytes >= 0x80, a `#`) reach PHP as they
/// do behind nginx; control characters and an HTTP/1.1 request without
/// `Host` get 400 from both.
#[test]
fn request_targets_and_host_match_nginx() {
    let both = Both::start();
    let targets: &[&[u8]] = &[
        br#"/target?filter={"a":1}"#,
        b"/target?a|b<c>d^e`f\\g",
        b"/target?\xc3\xa9=\xe2\x82\xac&latin1=\xe9\xff",
        b"/target?a=%zz&b=%&c=?&d[]=1&e[x]=2",
        b"/target?a#frag?b",
        b"/target#frag?b",
        b"/p\"{x}|<>^`\\\xe9\xc3\xa9/q?x",
        b"/%7B%22a%22%7D/{\"a\"}?q",
        b"http://localhost/target?{\"abs\"}",
    ];
    for target in targets {
        let raw = [
            b"GET ",
            *target,
            b" HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        ]
        .concat();
        let (f, h) = both.raw(&raw);
        let name = String::from_utf8_lossy(target);
        assert_ne!(f.status, 400, "nginx refused {name}");
        same(&name, &f, &h);
    }
    let refused: &[&[u8]] = &[
        b"GET /target?a\x01b HTTP/1.1\r\nHost: localhost\r\n\r\n",
        b"GET /target?a\x7fb HTTP/1.1\r\nHost: localhost\r\n\r\n",
        b"GET * HTTP/1.1\r\nHost: localhost\r\n\r\n",
        b"GET target HTTP/1.1\r\nHost: localhost\r\n\r\n",
        b"GET /target HTTP/1.1\r\nUser-Agent: t\r\n\r\n",
    ];
    for raw in refused {
        let (f, h) = both.raw(raw);
        let name = String::from_utf8_lossy(raw);
        assert_eq!(f.status, 400, "nginx: {name}");
        assert_eq!(h.status, 400, "hearth: {name}");
    }
    let (f, h) = both.raw(b"GET /target?http10 HTTP/1.0\r\n\r\n");
    assert_eq!(f.status, 200, "{}", f.text());
    same("HTTP/1.0 without Host", &f, &h);
}

/// Issue 8 (8): post_max_size stops PHP from parsing a form, not the app
/// from reading the raw body: over it, php-fpm warns, leaves $_POST and
/// $_FILES empty, and php://input still holds every byte, whatever the
/// content type.
#[test]
fn bodies_over_post_max_size_match_php_fpm() {
    let both = Both::start_taking_bodies_of("16M");
    let big: Vec<u8> = (0..9_000_000u32).map(|i| (i % 251) as u8).collect();
    let form = format!("a=1&b={}", "x".repeat(9_000_000));
    let cases = [
        Req::new("POST", "/input")
            .header("Content-Type", "application/octet-stream")
            .body(big.clone()),
        Req::new("POST", "/input").body(big.clone()),
        Req::new("PUT", "/input")
            .header("Content-Type", "application/octet-stream")
            .body(big.clone()),
        Req::new("POST", "/input").form(&form),
        Req::new("POST", "/input").multipart(&[
            ("a", None, None, b"1"),
            ("f", Some("f.bin"), Some("application/octet-stream"), &big),
        ]),
        // Within the limit, for contrast.
        Req::new("POST", "/input").form("a=1&b=2"),
        Req::new("POST", "/input").multipart(&[("a", None, None, b"1")]),
    ];
    for (i, req) in cases.iter().enumerate() {
        let (f, h) = both.send(req);
        assert_eq!(f.status, 200, "php-fpm, case {i}: {}", f.text());
        same(&format!("body over post_max_size, case {i}"), &f, &h);
    }
    // The answers say what they should, not merely the same thing.
    let (f, _) = both.send(&cases[0]);
    assert!(
        f.text().contains("9000000") && f.text().contains("exceeds the limit"),
        "{}",
        f.text()
    );
    let (f, _) = both.send(&cases[4]);
    assert!(
        f.text().contains("warning: 'POST Content-Length of"),
        "{}",
        f.text()
    );
}

/// A multipart body of `n` parts of one kind, numbered from `from`.
fn many_parts(kind: &str, from: usize, n: usize) -> Vec<u8> {
    let mut body = Vec::new();
    for i in from..from + n {
        let part = match kind {
            "field" => {
                format!("--XX\r\nContent-Disposition: form-data; name=\"f{i}\"\r\n\r\nv\r\n")
            }
            "empty file" => format!(
                "--XX\r\nContent-Disposition: form-data; name=\"e{i}\"; filename=\"\"\r\n\
                 Content-Type: application/octet-stream\r\n\r\n\r\n"
            ),
            "file" => format!(
                "--XX\r\nContent-Disposition: form-data; name=\"u{i}\"; filename=\"u{i}.txt\"\r\n\
                 Content-Type: text/plain\r\n\r\nx\r\n"
            ),
            // PHP skips a part without a Content-Disposition, uncounted.
            "anonymous" => "--XX\r\nContent-Type: text/plain\r\n\r\nv\r\n".to_owned(),
            other => panic!("no part kind {other}"),
        };
        body.extend_from_slice(part.as_bytes());
    }
    body
}

/// Issue 16 (9): forms with more parts than PHP parses
/// (`max_multipart_body_parts`, by default max_input_vars +
/// max_file_uploads = 1,020), more files than `max_file_uploads`, and
/// empty file inputs (which upload nothing, and count as no upload): the
/// same `$_POST`, `$_FILES` and warning as under php-fpm.
#[test]
fn multipart_part_limits_match_php_fpm() {
    let both = Both::start();
    let cases: [&[(&str, usize)]; 8] = [
        &[("empty file", 2000)],
        &[("field", 1100)],
        &[("file", 1030)],
        &[("file", 25)],
        &[("empty file", 25)],
        &[("field", 1000), ("file", 30)],
        &[("field", 1019), ("file", 1), ("field", 5)],
        &[("anonymous", 1500), ("field", 3)],
    ];
    for (i, case) in cases.iter().enumerate() {
        let mut body = Vec::new();
        let mut from = 0;
        for (kind, n) in case.iter() {
            body.extend(many_parts(kind, from, *n));
            from += n;
        }
        body.extend_from_slice(b"--XX--\r\n");
        let req = Req::new("POST", "/parts")
            .header("Content-Type", "multipart/form-data; boundary=XX")
            .body(body);
        let (f, h) = both.send(&req);
        assert_eq!(f.status, 200, "php-fpm, case {i}: {}", f.text());
        same(&format!("parts case {i} {case:?}"), &f, &h);
    }
    // The answers say what they should, not merely the same thing.
    let (f, _) = both.send(
        &Req::new("POST", "/parts")
            .header("Content-Type", "multipart/form-data; boundary=XX")
            .body([many_parts("empty file", 0, 2000), b"--XX--\r\n".to_vec()].concat()),
    );
    assert!(
        f.text()
            .contains("0 => 1020,\n  1 => 'e0',\n  2 => 'e1019'")
            && f.text().contains("4 => 1020")
            && f.text()
                .contains("Multipart body parts limit exceeded 1020"),
        "{}",
        f.text()
    );
}

/// The length of the session id at the start of `s`.
fn session_id_len(s: &str) -> usize {
    s.find(|c: char| !(c.is_ascii_alphanumeric() || c == ',' || c == '-'))
        .unwrap_or(s.len())
}

/// The session cookie names of the legacy app: PHP's default and its own.
const SESSION_COOKIES: &[&str] = &["PHPSESSID", "APPSESS", "INISESS", "BOOTSESS"];

/// Names session ids (what follows `PHPSESSID=` and the app's other
/// session cookie names) by the order in which
/// one side first sent them, `<sid:1>`, `<sid:2>`..., rather than by their
/// random value, so that both sides compare equal when they hand out and
/// take back the same ids in the same places. Cookie dates (`expires=`),
/// which follow the clock, become `<date>`.
#[derive(Default)]
struct SessionIds(std::cell::RefCell<Vec<String>>);

impl SessionIds {
    fn name(&self, s: &str) -> String {
        let mut s = s.to_owned();
        for cookie in SESSION_COOKIES {
            s = replace_values(&s, &format!("{cookie}="), session_id_len, |id| {
                if id.is_empty() || id == "deleted" {
                    return id.to_owned();
                }
                let mut seen = self.0.borrow_mut();
                let n = match seen.iter().position(|s| s == id) {
                    Some(i) => i + 1,
                    None => {
                        seen.push(id.to_owned());
                        seen.len()
                    }
                };
                format!("<sid:{n}>")
            });
        }
        replace_values(
            &s,
            "expires=",
            |date| date.find(';').unwrap_or(date.len()),
            |_| "<date>".to_owned(),
        )
    }
}
