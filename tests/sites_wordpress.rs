//! WordPress from Debian's package, served by Hearth's classic mode
//! (`hearth serve --root SITE`) and by its reference, nginx + php-fpm with
//! Debian's snippets/fastcgi-php.conf (`bench/reference/nginx-fpm.sh` with
//! `NGINX_SITE=classic`, as many PHP processes): two fresh copies of the
//! site (`bench/reference/wordpress.sh`), each with its own database in
//! one private MariaDB (`bench/reference/mariadb.sh`), are taken through
//! the same visit, and each response is compared: status, headers and
//! body, with only what must differ between two servers masked.
//!
//! The helpers above the test are the ones any site's differential test
//! needs (a private MariaDB, a browser with its own cookies, a comparison
//! that names the first difference).

#[path = "support/reference.rs"]
mod reference;
#[path = "support/mod.rs"]
mod support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use reference::Reference;
use support::{CookieJar, Response, Server};

// ---- Helpers for any site ----

/// Runs one of bench/reference's scripts to its end (within `timeout`),
/// panics with its output if it fails, and returns its standard output.
fn reference_script(name: &str, args: &[&Path], timeout: Duration) -> String {
    let script = support::root().join("bench/reference").join(name);
    let out = support::output_within(Command::new(&script).args(args), timeout);
    assert!(
        out.status.success(),
        "{name} {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A private MariaDB server (`bench/reference/mariadb.sh`): a unix socket
/// in a temporary directory, no TCP port; stopped when dropped.
struct MariaDb {
    state: tempfile::TempDir,
    /// Where the server listens once started (mariadb.sh puts it there),
    /// known before, so that sites can be prepared while it starts.
    socket: PathBuf,
}

impl MariaDb {
    fn new() -> MariaDb {
        // Reachable (0755), so that PHP running as another user reaches
        // the socket inside.
        let state = support::reachable_tempdir();
        let socket = state.path().join("mysqld.sock");
        MariaDb { state, socket }
    }

    fn start(&self) {
        let out = reference_script(
            "mariadb.sh",
            &[Path::new("start"), self.state.path()],
            Duration::from_secs(60),
        );
        let socket = format!("socket={}", self.socket.display());
        assert!(out.lines().any(|l| l == socket), "mariadb.sh start: {out}");
    }

    /// A fresh database `name`, with a user `name` (password `name`).
    fn database(&self, name: &str) {
        reference_script(
            "mariadb.sh",
            &[Path::new("database"), self.state.path(), Path::new(name)],
            Duration::from_secs(30),
        );
    }
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        let _ = Command::new(support::root().join("bench/reference/mariadb.sh"))
            .arg("stop")
            .arg(self.state.path())
            .status();
    }
}

/// `hearth serve --root ROOT` (classic mode) with `workers` PHP processes.
fn classic_hearth(root: &Path, workers: usize) -> Server {
    Server::spawn_args(&[
        "serve".into(),
        "--root".into(),
        root.to_string_lossy().into_owned(),
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--workers".into(),
        workers.to_string(),
    ])
}

/// One client of one server, as a browser: it sends `Host` with the
/// server's address and port (so a site that follows Host answers with
/// its own port), keeps the cookies it is given, and follows no redirect.
struct Browser {
    addr: SocketAddr,
    jar: CookieJar,
}

impl Browser {
    fn new(addr: SocketAddr) -> Browser {
        Browser {
            addr,
            jar: CookieJar::default(),
        }
    }

    fn send(&mut self, method: &str, target: &str, body: &Body) -> Response {
        let mut raw = format!("{method} {target} HTTP/1.1\r\nHost: {}\r\n", self.addr);
        let cookies = self.jar.header();
        if !cookies.is_empty() {
            raw.push_str(&format!("Cookie: {cookies}\r\n"));
        }
        if let Some((content_type, bytes)) = body {
            raw.push_str(&format!(
                "Content-Type: {content_type}\r\nContent-Length: {}\r\n",
                bytes.len()
            ));
        }
        raw.push_str("Connection: close\r\n\r\n");
        let mut raw = raw.into_bytes();
        if let Some((_, bytes)) = body {
            raw.extend_from_slice(bytes);
        }
        let response = support::request(self.addr, &raw);
        self.jar.store(&response);
        response
    }
}

/// A request body with its content type.
type Body = Option<(String, Vec<u8>)>;

/// An application/x-www-form-urlencoded body.
fn form(pairs: &[(&str, &str)]) -> Body {
    Some((
        "application/x-www-form-urlencoded".into(),
        urlencode(pairs).into_bytes(),
    ))
}

/// A multipart/form-data body: `fields`, then one file (field name, file
/// name, content type, bytes).
fn multipart(fields: &[(&str, &str)], file: (&str, &str, &str, &[u8])) -> Body {
    let boundary = "----hearth-sites-boundary-q8XvK2";
    let mut body = Vec::new();
    for (name, value) in fields {
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n")
                .as_bytes(),
        );
    }
    let (name, filename, content_type, bytes) = file;
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"{filename}\"\r\n\
             Content-Type: {content_type}\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    Some((format!("multipart/form-data; boundary={boundary}"), body))
}

/// Headers that describe the transport, not the site, as in
/// tests/classic.rs: framing, the connection, the date, the server's name.
const TRANSPORT_HEADERS: &[&str] = &[
    "date",
    "server",
    "connection",
    "transfer-encoding",
    "content-length",
    "keep-alive",
];

/// A response as compared: status, then `name: value` lines sorted by name
/// (their order among headers of one name kept), a blank line, the body.
fn comparable(r: &Response, mask: &dyn Fn(&str) -> String) -> String {
    let md5_of_last_modified = r
        .header("last-modified")
        .map(|t| format!("\"{:x}\"", md5::compute(t)));
    // A static file's ETag is nginx's `"MTIME-SIZE"` (in hex) on both
    // sides; a file uploaded during the test has the second of its upload
    // as MTIME, the same second as its Last-Modified (masked).
    let mtime_of_last_modified = r
        .header("last-modified")
        .and_then(|t| httpdate::parse_http_date(t).ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| format!("\"{:x}-", d.as_secs()));
    let mut headers: Vec<(String, String)> = r
        .headers
        .iter()
        .filter(|(n, _)| !TRANSPORT_HEADERS.contains(&n.to_ascii_lowercase().as_str()))
        // Hearth names Accept-Encoding on the static files it can compress,
        // nginx only with `gzip_vary on` (as in tests/classic.rs); a Vary
        // from PHP is compared.
        .filter(|(n, v)| !(n.eq_ignore_ascii_case("vary") && v == "Accept-Encoding"))
        .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
        // A documented difference (docs/compatibility.md, content types):
        // nginx's mime.types says application/javascript for `.js`,
        // Hearth text/javascript (RFC 9239).
        .map(|(n, v)| match (n.as_str(), v.as_str()) {
            ("content-type", "application/javascript") => (n, "text/javascript".into()),
            // An ETag an app computes as the MD5 of its Last-Modified (as
            // WordPress's feeds do) follows that time, which is masked.
            ("etag", _) if Some(v.as_str()) == md5_of_last_modified.as_deref() => {
                (n, "\"md5(Last-Modified)\"".into())
            }
            ("etag", _)
                if mtime_of_last_modified
                    .as_deref()
                    .is_some_and(|m| v.starts_with(m)) =>
            {
                let size = v.rsplit('-').next().unwrap_or_default().to_owned();
                (n, format!("\"mtime(Last-Modified)-{size}"))
            }
            _ => (n, v),
        })
        .collect();
    headers.sort_by(|a, b| a.0.cmp(&b.0));
    let mut text = format!("{}\n", r.status);
    for (n, v) in headers {
        text.push_str(&format!("{n}: {v}\n"));
    }
    text.push('\n');
    text.push_str(&r.text());
    mask(&text)
}

/// Where `expected` and `actual` first differ: the line number and the
/// two lines around the first differing byte (long lines of HTML cut to
/// a window), for a message a reader can act on.
fn first_difference(expected: &str, actual: &str) -> Option<String> {
    let mut lines = expected.lines().zip(actual.lines()).enumerate();
    let found = lines.find(|(_, (e, a))| e != a);
    let (n, (e, a)) = match found {
        Some(found) => found,
        None if expected.lines().count() == actual.lines().count() => return None,
        None => {
            let n = expected.lines().count().min(actual.lines().count());
            return Some(format!(
                "line {}: one side ends ({} lines against {})",
                n + 1,
                expected.lines().count(),
                actual.lines().count()
            ));
        }
    };
    let at = e
        .bytes()
        .zip(a.bytes())
        .position(|(x, y)| x != y)
        .unwrap_or(e.len().min(a.len()));
    let window = |s: &str| {
        let mut start = at.saturating_sub(60);
        while !s.is_char_boundary(start.min(s.len())) {
            start -= 1;
        }
        let mut end = (at + 100).min(s.len());
        while !s.is_char_boundary(end) {
            end += 1;
        }
        s.get(start.min(s.len())..end).unwrap_or("").to_owned()
    };
    Some(format!(
        "line {}, byte {at}:\n  nginx:  {}\n  hearth: {}",
        n + 1,
        window(e),
        window(a)
    ))
}

/// Replaces, after each occurrence of `prefix`, the run of characters for
/// which `keep` holds with `with`, when its length is in `len`.
fn mask_after(
    text: &str,
    prefix: &str,
    len: std::ops::RangeInclusive<usize>,
    keep: fn(char) -> bool,
    with: &str,
) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(prefix) {
        let (head, tail) = rest.split_at(at + prefix.len());
        out.push_str(head);
        let end = tail.find(|c: char| !keep(c)).unwrap_or(tail.len());
        if end > 0 && len.contains(&end) {
            out.push_str(with);
            rest = &tail[end..];
        } else {
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

fn is_digit(c: char) -> bool {
    c.is_ascii_digit()
}

fn is_hex(c: char) -> bool {
    c.is_ascii_hexdigit()
}

/// Two browsers, one per server, that make the same requests and expect
/// the same responses.
struct Pair {
    nginx: Browser,
    hearth: Browser,
    mask: Box<dyn Fn(&str) -> String>,
}

impl Pair {
    /// The same request to both; panics at the first difference.
    fn same(&mut self, method: &str, target: &str, body: Body) -> (Response, Response) {
        self.same_each(method, target, [body.clone(), body])
    }

    /// The same request to both, with a body of its own for each (one
    /// that carries what the server gave that browser: a nonce).
    fn same_each(&mut self, method: &str, target: &str, bodies: [Body; 2]) -> (Response, Response) {
        let f = self.nginx.send(method, target, &bodies[0]);
        let h = self.hearth.send(method, target, &bodies[1]);
        let (fc, hc) = (comparable(&f, &*self.mask), comparable(&h, &*self.mask));
        if let Some(difference) = first_difference(&fc, &hc) {
            panic!(
                "{method} {target}: Hearth's response differs from nginx + php-fpm's at {difference}\n\
                 (nginx: {} {} bytes, hearth: {} {} bytes)",
                f.status,
                f.body.len(),
                h.status,
                h.body.len()
            );
        }
        (f, h)
    }
}

// ---- WordPress ----

const ADMIN_PASSWORD: &str = "correct-horse-battery";

/// What differs between two WordPress sites that are otherwise alike, and
/// nothing else:
fn wordpress_mask(ports: [u16; 2]) -> impl Fn(&str) -> String {
    move |text: &str| {
        let mut s = text.to_owned();
        // Each site's address is the one it was asked for (wordpress.sh
        // makes WP_HOME follow Host): its port shows in links, redirects
        // and JSON, and percent-encoded in URLs passed as parameters.
        for port in ports {
            s = s.replace(&format!("127.0.0.1:{port}"), "127.0.0.1:PORT");
            s = s.replace(&format!("127.0.0.1%3A{port}"), "127.0.0.1%3APORT");
        }
        // Cookie names end in md5(site URL), which holds the port; values
        // hold a random session token and an expiry time.
        for prefix in ["wordpress_", "wordpress_logged_in_", "wordpress_sec_"] {
            s = mask_after(&s, prefix, 32..=32, is_hex, "HASH");
            s = mask_after(
                &s,
                &format!("{prefix}HASH="),
                1..=usize::MAX,
                |c| c != ';',
                "VALUE",
            );
        }
        // Nonces (exactly ten hexadecimal digits) hash the login
        // session's random token: a logged-in user's differ between the
        // two sites. They are quoted (form values, JSON, JavaScript:
        // `value="7d1f6275a3"`, `"site_status":"7d1f6275a3"`) or URL
        // parameters (`_wpnonce=7d1f6275a3`).
        for prefix in ["\"", "'", "nonce="] {
            s = mask_after(&s, prefix, 10..=10, is_hex, "NONCE");
        }
        // The strong password the installer and the user screens suggest
        // is random (wp_generate_password()).
        s = mask_after(&s, "data-pw=\"", 1..=usize::MAX, |c| c != '"', "PASSWORD");
        // Cookies' expiry times, to the second, and the time the user's
        // settings were saved (a Unix time).
        s = mask_after(&s, "expires=", 1..=usize::MAX, |c| c != ';', "DATE");
        s = mask_after(&s, "wp-settings-time-1=", 1..=usize::MAX, is_digit, "TIME");
        // The server's name in its own error pages (as in tests/classic.rs).
        s = mask_after(&s, "<hr><center>", 1..=usize::MAX, |c| c != '<', "SERVER");
        // The help tab of the permalink screen links nginx's documentation
        // when SERVER_SOFTWARE names nginx (Hearth's is its own,
        // docs/compatibility.md).
        s = s.replace(
            "<p><a href=\"https://wordpress.org/support/article/nginx/\">Documentation on Nginx configuration</a>.</p>",
            "",
        );
        // Times to the second: the two sites do each step a few
        // milliseconds apart (dates, to the day, are compared).
        s = mask_datetimes(&s);
        // The same for the list of posts' quick-edit data and form: a
        // post's hour, minute and second, and the current ones.
        for part in ["hh", "mn", "ss"] {
            s = mask_after(
                &s,
                &format!("<div class=\"{part}\">"),
                2..=2,
                is_digit,
                "NN",
            );
            for name in [
                part.to_owned(),
                format!("cur_{part}"),
                format!("hidden_{part}"),
            ] {
                s = mask_after(
                    &s,
                    &format!("name=\"{name}\" value=\""),
                    2..=2,
                    is_digit,
                    "NN",
                );
            }
        }
        s
    }
}

/// `2026-11-25T23:15:42`, `2026-11-25 23:15:42`, `23:15:42 GMT` (HTTP
/// dates) and `23:15:42 +0000` (RSS) with their time of day masked (`HH:MM:SS`).
fn mask_datetimes(text: &str) -> String {
    mask_http_times(&mask_iso_datetimes(text))
}

fn mask_http_times(text: &str) -> String {
    let mut s = text.to_owned();
    // HTTP dates, and RSS's (RFC 822, `+0000`).
    for zone in [" GMT", " +0000"] {
        let mut out = String::with_capacity(s.len());
        let mut rest = s.as_str();
        while let Some(at) = rest.find(zone) {
            let (head, tail) = rest.split_at(at);
            let is_time = head.len() >= 8 && {
                let b = &head.as_bytes()[head.len() - 8..];
                b[2] == b':'
                    && b[5] == b':'
                    && [0, 1, 3, 4, 6, 7].iter().all(|&i| b[i].is_ascii_digit())
            };
            if is_time {
                out.push_str(&head[..head.len() - 8]);
                out.push_str("HH:MM:SS");
            } else {
                out.push_str(head);
            }
            out.push_str(zone);
            rest = &tail[zone.len()..];
        }
        out.push_str(rest);
        s = out;
    }
    s
}

fn mask_iso_datetimes(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut i = 0;
    while i + 19 <= bytes.len() {
        let d = &bytes[i..i + 19];
        let digits = |r: std::ops::Range<usize>| d[r].iter().all(u8::is_ascii_digit);
        if digits(0..4)
            && d[4] == b'-'
            && digits(5..7)
            && d[7] == b'-'
            && digits(8..10)
            && (d[10] == b'T' || d[10] == b' ')
            && digits(11..13)
            && d[13] == b':'
            && digits(14..16)
            && d[16] == b':'
            && digits(17..19)
        {
            out.push_str(&text[copied..i + 11]);
            out.push_str("HH:MM:SS");
            i += 19;
            copied = i;
        } else {
            i += 1;
        }
    }
    out.push_str(&text[copied..]);
    out
}

/// The value of the hidden input `name` in a form of `html`.
fn hidden_input(html: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let at = html
        .find(&marker)
        .unwrap_or_else(|| panic!("no input {name} in:\n{html}"))
        + marker.len();
    html[at..].split('"').next().unwrap_or("").to_owned()
}

/// A minimal x-www-form-urlencoded encoder for the forms below.
fn urlencode(pairs: &[(&str, &str)]) -> String {
    let enc = |s: &str| {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    (b as char).to_string()
                }
                b' ' => "+".into(),
                _ => format!("%{b:02X}"),
            })
            .collect::<String>()
    };
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

#[test]
fn wordpress_answers_as_under_nginx_and_php_fpm() {
    // Two fresh copies of the site, each with its database, prepared while
    // the server starts.
    let db = MariaDb::new();
    let names = ["wp_nginx", "wp_hearth"];
    let sites = [support::reachable_tempdir(), support::reachable_tempdir()];
    let root = |i: usize| sites[i].path().join("site");
    std::thread::scope(|s| {
        s.spawn(|| db.start());
        for (i, name) in names.iter().enumerate() {
            let (site, socket) = (root(i), &db.socket);
            s.spawn(move || {
                reference_script(
                    "wordpress.sh",
                    &[Path::new("prepare"), &site, socket, Path::new(name)],
                    Duration::from_secs(60),
                )
            });
        }
    });
    for name in names {
        db.database(name);
    }
    let fpm = Reference::start_with(&root(0), "index.php", &[("NGINX_SITE", "classic")]);
    let hearth = classic_hearth(&root(1), 2);
    let mut both = Pair {
        nginx: Browser::new(fpm.addr),
        hearth: Browser::new(hearth.addr),
        mask: Box::new(wordpress_mask([fpm.addr.port(), hearth.addr.port()])),
    };

    // Not installed yet: every page leads to the installer.
    let (home, _) = both.same("GET", "/", None);
    assert_eq!(home.status, 302, "{:?}", home.headers);
    let (page, _) = both.same("GET", "/wp-admin/install.php", None);
    assert!(
        page.text().contains("name=\"weblog_title\""),
        "{}",
        page.text()
    );
    let install = form(&[
        ("weblog_title", "Hearth"),
        ("user_name", "admin"),
        ("admin_password", ADMIN_PASSWORD),
        ("admin_password2", ADMIN_PASSWORD),
        ("admin_email", "admin@example.com"),
        ("blog_public", "1"),
        ("Submit", "Install WordPress"),
        ("language", ""),
    ]);
    let (done, _) = both.same("POST", "/wp-admin/install.php?step=2", install);
    assert!(done.text().contains("Success!"), "{}", done.text());

    // The installer turned pretty permalinks on, having checked with a
    // request to the site itself (to the server under test) that a post's
    // pretty URL is served: through the front controller fallback.
    let (moved, _) = both.same("GET", "/?p=1", None);
    assert_eq!(moved.status, 301, "{:?}", moved.headers);
    let post_path = path_of(moved.header("location").expect("a Location"));
    assert!(post_path.ends_with("/hello-world/"), "{post_path}");

    // The site, anonymous.
    let (home, _) = both.same("GET", "/", None);
    assert!(home.text().contains("Hello world!"), "{}", home.text());
    let (post, _) = both.same("GET", &post_path, None);
    assert_eq!(post.status, 200);
    both.same("GET", "/sample-page/", None);
    both.same("GET", "/?page_id=2", None);
    both.same("GET", "/?s=hello", None);
    let (missing, _) = both.same("GET", "/no-such-page/", None);
    assert_eq!(missing.status, 404);
    both.same("GET", "/feed/", None);
    let (api, _) = both.same("GET", "/wp-json/", None);
    assert_eq!(api.json()["name"], "Hearth");
    let (posts, _) = both.same("GET", "/wp-json/wp/v2/posts", None);
    assert_eq!(posts.json()[0]["slug"], "hello-world");
    both.same("GET", "/?rest_route=/wp/v2/pages", None);
    both.same(
        "GET",
        "/wp-content/themes/twentytwentythree/style.css",
        None,
    );
    both.same("GET", "/wp-includes/js/jquery/jquery.min.js", None);
    both.same("GET", "/wp-includes/js/underscore.min.js", None);
    both.same("GET", "/xmlrpc.php", None);

    // Logging in: the test cookie, then the form.
    both.same("GET", "/wp-login.php", None);
    let login = form(&[
        ("log", "admin"),
        ("pwd", ADMIN_PASSWORD),
        ("wp-submit", "Log In"),
        ("redirect_to", "/wp-admin/"),
        ("testcookie", "1"),
    ]);
    let (logged_in, _) = both.same("POST", "/wp-login.php", login);
    assert_eq!(logged_in.status, 302, "{}", logged_in.text());
    let (dashboard, _) = both.same("GET", "/wp-admin/", None);
    assert!(
        dashboard.text().contains("Dashboard"),
        "{}",
        dashboard.text()
    );
    both.same("GET", "/wp-admin/edit.php", None);
    both.same("GET", "/wp-admin", None);
    both.same("GET", "/wp-includes/", None);
    both.same("HEAD", "/", None);
    both.same("GET", "/index.php/sample-page/", None);
    both.same(
        "GET",
        "/wp-admin/load-styles.php?c=0&dir=ltr&load%5Bchunk_0%5D=dashicons,admin-bar&ver=6.1.9",
        None,
    );

    // An upload, through the form without JavaScript (a multipart POST),
    // then the file, sent from disk.
    let (f, h) = both.same("GET", "/wp-admin/media-new.php?browser-uploader", None);
    let upload = |page: &Response| {
        multipart(
            &[
                ("post_id", "0"),
                ("_wpnonce", hidden_input(&page.text(), "_wpnonce").as_str()),
                (
                    "_wp_http_referer",
                    "/wp-admin/media-new.php?browser-uploader",
                ),
                ("html-upload", "Upload"),
            ],
            (
                "async-upload",
                "notes.txt",
                "text/plain",
                b"uploaded through the front\n",
            ),
        )
    };
    let (uploaded, _) = both.same_each("POST", "/wp-admin/media-new.php", [upload(&f), upload(&h)]);
    assert_eq!(uploaded.status, 302, "{}", uploaded.text());
    let year_month = post_path
        .split('/')
        .skip(1)
        .take(2)
        .collect::<Vec<_>>()
        .join("/");
    let (file, _) = both.same(
        "GET",
        &format!("/wp-content/uploads/{year_month}/notes.txt"),
        None,
    );
    assert_eq!(file.text(), "uploaded through the front\n");

    // A comment, as the logged-in admin, then the post that shows it.
    let comment = form(&[
        ("comment", "A comment through the front."),
        ("comment_post_ID", "1"),
        ("comment_parent", "0"),
        ("submit", "Post Comment"),
    ]);
    let (posted, _) = both.same("POST", "/wp-comments-post.php", comment);
    assert_eq!(posted.status, 302, "{}", posted.text());
    let (post, _) = both.same("GET", &post_path, None);
    assert!(post.text().contains("A comment through the front."));

    // Another permalink structure, set in wp-admin (a form with a nonce of
    // each browser's own): the old URL and /?p=1 lead to the new one.
    let (f, h) = both.same("GET", "/wp-admin/options-permalink.php", None);
    let structure = "/%postname%/";
    let permalink_form = |page: &Response| {
        form(&[
            ("_wpnonce", hidden_input(&page.text(), "_wpnonce").as_str()),
            ("_wp_http_referer", "/wp-admin/options-permalink.php"),
            ("selection", "custom"),
            ("permalink_structure", structure),
            ("category_base", ""),
            ("tag_base", ""),
            ("submit", "Save Changes"),
        ])
    };
    let (saved, _) = both.same_each(
        "POST",
        "/wp-admin/options-permalink.php",
        [permalink_form(&f), permalink_form(&h)],
    );
    assert_eq!(saved.status, 302, "{}", saved.text());
    // Where it leads, as a browser would follow: this page writes the new
    // rewrite rules.
    both.same(
        "GET",
        &path_of(saved.header("location").expect("a Location")),
        None,
    );
    let (moved, _) = both.same("GET", "/?p=1", None);
    assert_eq!(
        path_of(moved.header("location").expect("a Location")),
        "/hello-world/"
    );
    let (post, _) = both.same("GET", "/hello-world/", None);
    assert_eq!(post.status, 200);
    both.same("GET", &post_path, None);
}

/// The path of an absolute URL on one of the two servers.
fn path_of(location: &str) -> String {
    location
        .split_once("127.0.0.1:")
        .and_then(|(_, rest)| rest.find('/').map(|at| rest[at..].to_owned()))
        .unwrap_or_else(|| panic!("not a URL of the site: {location}"))
}
