//! Unmodified real sites from Debian's packages, served by classic mode
//! (`hearth serve --root`) and by nginx + php-fpm with Debian's
//! snippets/fastcgi-php.conf (`bench/reference/nginx-fpm.sh`,
//! `NGINX_SITE=classic`), each from a fresh copy of its own: the same
//! sequence of requests to both, each side with its own cookie jar and
//! the tokens taken from its own pages; status, headers and body of every
//! answer compared, after masking what is random or the time of day.
//!
//! The helpers at the top know nothing of any one site; each site has a
//! module of its own below.

#[path = "support/reference.rs"]
mod reference;
#[path = "support/mod.rs"]
mod support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reference::Reference;
use support::{CookieJar, Req, Response, Server};

/// Headers that describe the transport, not the site (as in
/// tests/classic.rs, which also leaves out Vary for static files; the
/// sites' answers here are PHP's, and their Vary is compared). How a
/// body is framed is each server's: nginx sends a PHP body chunked
/// unless the script gave its length, Hearth also gives the length of a
/// body that php-fpm sent whole. The bodies are compared byte for byte,
/// and a script's own Content-Length is checked where one is sent.
const TRANSPORT_HEADERS: &[&str] = &[
    "date",
    "server",
    "connection",
    "transfer-encoding",
    "content-length",
    "keep-alive",
];

/// How long a site may take to be copied by its setup script.
const SETUP_TIMEOUT: Duration = Duration::from_secs(120);

/// Runs `bench/reference/SCRIPT DIR` (a site's setup script) and returns
/// the document root it prints on its last line.
fn setup_site(script: &str, dir: &Path) -> PathBuf {
    let out = support::output_within(
        std::process::Command::new(support::root().join("bench/reference").join(script)).arg(dir),
        SETUP_TIMEOUT,
    );
    assert!(
        out.status.success(),
        "bench/reference/{script} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    PathBuf::from(stdout.lines().last().expect("the document root").trim())
}

/// A directory for a copy of a site: in memory where the machine has
/// /dev/shm (a site is thousands of files, made and removed in a
/// fraction of a second there, where a slow disk takes seconds), else
/// where the other tests make theirs.
fn site_dir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(dir) = tempfile::Builder::new()
            .prefix("hearth-site-")
            .tempdir_in(shm)
        {
            return dir;
        }
    }
    support::tempdir()
}

/// Two fresh copies of a site made by its setup script, in parallel.
fn two_copies(script: &'static str) -> (tempfile::TempDir, PathBuf, tempfile::TempDir, PathBuf) {
    let (a, b) = (site_dir(), site_dir());
    let (pa, pb) = (a.path().join("site"), b.path().join("site"));
    let other = std::thread::spawn(move || setup_site(script, &pb));
    let root_a = setup_site(script, &pa);
    let root_b = other.join().expect("setup thread");
    (a, root_a, b, root_b)
}

/// One server of the comparison, with the cookies it has set.
struct Side {
    /// 0 for nginx + php-fpm, 1 for Hearth: the order of [`exchange`].
    index: usize,
    addr: SocketAddr,
    jar: CookieJar,
}

impl Side {
    /// Sends `req` with this side's cookies, and keeps the ones it sets.
    fn send(&mut self, req: &Req) -> Response {
        let cookies = self.jar.header();
        let req = if cookies.is_empty() {
            req.clone()
        } else {
            req.clone().header("Cookie", &cookies)
        };
        let response = req.send(self.addr);
        self.jar.store(&response);
        response
    }
}

/// The two servers: nginx + php-fpm, and Hearth in classic mode, each on
/// its own copy of the site with two PHP processes.
struct Pair {
    fpm: Side,
    hearth: Side,
    _reference: Reference,
    hearth_server: Server,
}

impl Pair {
    fn start(fpm_root: &Path, hearth_root: &Path) -> Pair {
        let reference = Reference::start_with(fpm_root, "index.php", &[("NGINX_SITE", "classic")]);
        let hearth_server = Server::spawn_args(&[
            "serve".into(),
            "--root".into(),
            hearth_root.to_string_lossy().into_owned(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--workers".into(),
            "2".into(),
        ]);
        Pair {
            fpm: Side {
                index: 0,
                addr: reference.addr,
                jar: CookieJar::default(),
            },
            hearth: Side {
                index: 1,
                addr: hearth_server.addr,
                jar: CookieJar::default(),
            },
            _reference: reference,
            hearth_server,
        }
    }
}

/// What is masked before two answers are compared. Each mask is exact:
/// a value one side is known to have made (its session id, its tokens),
/// or a time in the window the test ran in; nothing else is touched.
struct Masks {
    /// When the test started, in Unix seconds: the window of masked
    /// times runs from there to the moment of each comparison.
    start: u64,
    /// Per side: (value, what it stands for), replaced in headers and body.
    exact: Vec<(String, String)>,
}

impl Masks {
    fn new() -> Masks {
        Masks {
            start: now(),
            exact: Vec::new(),
        }
    }

    /// `value` (made by one side) reads as `label`.
    fn exact(&mut self, value: &str, label: &str) {
        if !value.is_empty() && !self.exact.iter().any(|(v, _)| v == value) {
            self.exact.push((value.to_owned(), label.to_owned()));
        }
    }

    /// `text` with every known value and every time of the test's window
    /// replaced by its label: Unix times (as in `&1717171717`), HTTP dates
    /// and their md5 (an ETag made of a Last-Modified, as DokuWiki makes
    /// it), and dates as a site formats them (`time_formats`), each for
    /// every second since the start, and also a day later (an Expires
    /// header for a day's caching).
    fn apply(&self, text: &str, time_formats: &[fn(u64) -> String]) -> String {
        let mut text = text.to_owned();
        for (value, label) in &self.exact {
            text = text.replace(value, label);
        }
        let end = now() + 1;
        for offset in [0, 86_400] {
            for t in self.start.saturating_sub(1) + offset..=end + offset {
                let http = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(t));
                text = text.replace(&format!("{:x}", md5::compute(&http)), "MD5-OF-HTTP-DATE");
                text = text.replace(&http, "HTTP-DATE");
                for format in time_formats {
                    text = text.replace(&format(t), "SITE-DATE");
                }
                text = replace_number(&text, t, "UNIX-TIME");
            }
        }
        text
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

/// `text` with `number` replaced by `label` where it stands alone (not
/// part of a longer run of digits).
fn replace_number(text: &str, number: u64, label: &str) -> String {
    let digits = number.to_string();
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(&digits) {
        let before = rest[..at].chars().next_back();
        let after = rest[at + digits.len()..].chars().next();
        out.push_str(&rest[..at]);
        if before.is_some_and(|c| c.is_ascii_digit()) || after.is_some_and(|c| c.is_ascii_digit()) {
            out.push_str(&digits);
        } else {
            out.push_str(label);
        }
        rest = &rest[at + digits.len()..];
    }
    out.push_str(rest);
    out
}

/// `YYYY/MM/DD HH:MM` in UTC (DokuWiki's default `dformat`), from the
/// HTTP date of the same second.
fn slash_date(t: u64) -> String {
    let http = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(t));
    // "Wed, 25 Nov 2026 23:29:46 GMT"
    let parts: Vec<&str> = http.split([' ', ':']).collect();
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|m| *m == parts[2])
    .expect("month")
        + 1;
    format!(
        "{}/{month:02}/{} {}:{}",
        parts[3], parts[1], parts[4], parts[5]
    )
}

/// `YYYY-MM-DDTHH:MM:SS+00:00` (ISO 8601, DokuWiki's `<time datetime>`),
/// from the same second's `slash_date` and HTTP date.
fn iso_date(t: u64) -> String {
    let http = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(t));
    let seconds = http.split([' ', ':']).nth(6).expect("seconds");
    let slash = slash_date(t);
    let (day, time) = slash.split_once(' ').expect("date and time");
    format!("{}T{time}:{seconds}+00:00", day.replace('/', "-"))
}

/// DokuWiki's age of a page, "N seconds ago", which depends on when it
/// was asked: masked as "SOME seconds ago".
fn relative_ages(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(" seconds ago") {
        let head = &rest[..at];
        let digits = head.len() - head.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        out.push_str(&head[..head.len() - digits]);
        out.push_str(if digits > 0 { "SOME" } else { "" });
        out.push_str(" seconds ago");
        rest = &rest[at + " seconds ago".len()..];
    }
    out.push_str(rest);
    out
}

/// An answer as compared: status, headers but the transport's (lower
/// case, sorted by name, in order within a name), body; all masked.
fn comparable(
    r: &Response,
    masks: &Masks,
    formats: &[fn(u64) -> String],
) -> (u16, Vec<String>, String) {
    let mut headers: Vec<(String, String)> = r
        .headers
        .iter()
        .filter(|(n, _)| !TRANSPORT_HEADERS.contains(&n.to_ascii_lowercase().as_str()))
        .map(|(n, v)| (n.to_ascii_lowercase(), masks.apply(v, formats)))
        .collect();
    headers.sort_by(|a, b| a.0.cmp(&b.0));
    let headers = headers
        .into_iter()
        .map(|(n, v)| format!("{n}: {v}"))
        .collect();
    (
        r.status,
        headers,
        masks.apply(&relative_ages(&r.text()), formats),
    )
}

/// The first line where `a` and `b` differ, with its number and, for a
/// long line, the part around the first differing character.
fn first_difference(a: &str, b: &str) -> Option<String> {
    let (la, lb): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    for i in 0..la.len().max(lb.len()) {
        let (x, y) = (la.get(i).copied(), lb.get(i).copied());
        if x == y {
            continue;
        }
        let (x, y) = (x.unwrap_or("(no line)"), y.unwrap_or("(no line)"));
        let at = x
            .char_indices()
            .zip(y.chars())
            .find(|((_, c), d)| c != d)
            .map_or(x.len().min(y.len()), |((i, _), _)| i);
        let around = |s: &str| -> String {
            let mut from = at.saturating_sub(80).min(s.len());
            while !s.is_char_boundary(from) {
                from -= 1;
            }
            let mut to = (at + 120).min(s.len());
            while !s.is_char_boundary(to) {
                to += 1;
            }
            format!(
                "{}{}{}",
                if from > 0 { "…" } else { "" },
                &s[from..to],
                if to < s.len() { "…" } else { "" }
            )
        };
        return Some(format!(
            "line {}, column {}:\n  nginx + php-fpm: {}\n  hearth:          {}",
            i + 1,
            at + 1,
            around(x),
            around(y)
        ));
    }
    None
}

/// Sends each side its request (`req` makes it from the side: its own
/// tokens), nginx + php-fpm first; returns both answers in that order.
fn exchange(pair: &mut Pair, req: impl Fn(&Side) -> Req) -> (Response, Response) {
    let f = pair.fpm.send(&req(&pair.fpm));
    let h = pair.hearth.send(&req(&pair.hearth));
    (f, h)
}

/// Asserts that both answers are alike after `masks`, naming the first
/// difference.
fn compare(
    pair: &Pair,
    what: &str,
    (f, h): (&Response, &Response),
    masks: &Masks,
    formats: &[fn(u64) -> String],
) {
    let (cf, ch) = (comparable(f, masks, formats), comparable(h, masks, formats));
    assert_eq!(
        cf.0,
        ch.0,
        "{what}: status {} from nginx + php-fpm, {} from hearth\nhearth's body:\n{}\nhearth's log:\n{}",
        cf.0,
        ch.0,
        h.text(),
        pair.hearth_server.log()
    );
    if let Some(diff) = first_difference(&cf.1.join("\n"), &ch.1.join("\n")) {
        panic!(
            "{what}: the headers differ, {diff}\nall of nginx + php-fpm's:\n{}\nall of hearth's:\n{}",
            cf.1.join("\n"),
            ch.1.join("\n")
        );
    }
    if let Some(diff) = first_difference(&cf.2, &ch.2) {
        panic!("{what}: the bodies differ, {diff}");
    }
}

/// HTML's escapes in an attribute value, undone (the five DokuWiki makes).
fn unescape(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&#039;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// The form whose opening tag holds `marker`: its action and its hidden
/// fields, in order.
fn form(html: &str, marker: &str) -> (String, Vec<(String, String)>) {
    let start = html
        .find(marker)
        .and_then(|at| html[..at].rfind("<form"))
        .unwrap_or_else(|| panic!("no form with {marker:?} in:\n{html}"));
    let end = start + html[start..].find("</form>").expect("the form's end");
    let form = &html[start..end];
    let attr = |tag: &str, name: &str| -> Option<String> {
        let key = format!("{name}=\"");
        let at = tag.find(&key)? + key.len();
        Some(unescape(&tag[at..at + tag[at..].find('"')?]))
    };
    let action = attr(&form[..form.find('>').expect("tag end")], "action").expect("an action");
    let hidden = form
        .split("<input ")
        .skip(1)
        .filter(|tag| tag.contains("type=\"hidden\""))
        .filter_map(|tag| Some((attr(tag, "name")?, attr(tag, "value")?)))
        .collect();
    (action, hidden)
}

/// An application/x-www-form-urlencoded body of `fields`.
fn urlencoded(fields: &[(String, String)]) -> String {
    use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
    fields
        .iter()
        .map(|(k, v)| {
            format!(
                "{}={}",
                utf8_percent_encode(k, NON_ALPHANUMERIC),
                utf8_percent_encode(v, NON_ALPHANUMERIC)
            )
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// Debian's DokuWiki (package `dokuwiki`, flat files), copied and
/// configured by bench/reference/dokuwiki.sh.
mod dokuwiki {
    use super::*;

    const PASSWORD: &str = "hearth-admin";
    /// How DokuWiki shows times (its default `dformat`, in UTC as PHP's
    /// default time zone).
    const FORMATS: &[fn(u64) -> String] = &[slash_date, iso_date];

    /// What DokuWiki makes per copy or per session, learnt from each
    /// side's answers and masked from then on: its session id and login
    /// cookie (random values), its security token (`sectok`: from the
    /// session and the copy's random cookie salt), and the name of its
    /// login cookie, `DW` + md5 of the base path and the server's port.
    fn learn(masks: &mut Masks, side: &Side, answer: &Response) {
        let cookie = format!("DW{:x}", md5::compute(format!("/{}", side.addr.port())));
        masks.exact(&cookie, "DW<md5 of / and the port>");
        if let Some(session) = side.jar.get("DokuWiki") {
            masks.exact(session, "<session id>");
        }
        for set in answer.headers_named("set-cookie") {
            if let Some(value) = set
                .strip_prefix(&format!("{cookie}="))
                .and_then(|v| v.split(';').next())
            {
                masks.exact(value, "<login cookie>");
            }
        }
        let text = answer.text();
        for piece in text.split("name=\"sectok\" value=\"").skip(1) {
            let tok = &piece[..piece.find('"').unwrap_or(0)];
            if tok.len() == 32 && tok.chars().all(|c| c.is_ascii_hexdigit()) {
                masks.exact(tok, "<sectok>");
            }
        }
    }

    /// Media links carry `tok=`, six hex digits of an HMAC keyed with the
    /// copy's random cookie salt: masked in those links only.
    fn mask_media_tokens(r: &mut Response) {
        let text = r.text();
        if !text.contains("tok=") {
            return;
        }
        let mut out = String::with_capacity(text.len());
        let mut rest = text.as_str();
        while let Some(at) = rest.find("tok=") {
            let value = &rest[at + 4..];
            let len = value.chars().take_while(char::is_ascii_hexdigit).count();
            out.push_str(&rest[..at + 4]);
            out.push_str(if len == 6 {
                "<media tok>"
            } else {
                &value[..len]
            });
            rest = &value[len..];
        }
        out.push_str(rest);
        r.body = out.into_bytes();
    }

    /// One step: each side's request, what its answer teaches, and the
    /// comparison.
    fn step(
        pair: &mut Pair,
        masks: &mut Masks,
        what: &str,
        req: impl Fn(&Side) -> Req,
    ) -> (Response, Response) {
        let (f, h) = exchange(pair, req);
        learn(masks, &pair.fpm, &f);
        learn(masks, &pair.hearth, &h);
        let (mut cf, mut ch) = (f.clone(), h.clone());
        mask_media_tokens(&mut cf);
        mask_media_tokens(&mut ch);
        compare(pair, what, (&cf, &ch), masks, FORMATS);
        (f, h)
    }

    /// The value of `name` among a form's fields.
    fn field<'a>(fields: &'a [(String, String)], name: &str) -> &'a str {
        fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("no field {name} in {fields:?}"))
    }

    /// The saved edit: the edit form's action and hidden fields (its
    /// `sectok` among them), the new text, and the save button.
    fn save(edit_form: &Response) -> Req {
        let (action, mut fields) = form(&edit_form.text(), "id=\"dw__editform\"");
        assert_eq!(field(&fields, "sectok").len(), 32, "a logged-in token");
        fields.retain(|(n, _)| n != "do");
        fields.push((
            "wikitext".into(),
            "====== PlayGround ======\n\nEdited through the test: hearthword.\n".into(),
        ));
        fields.push(("summary".into(), "an edit".into()));
        fields.push(("do[save]".into(), "1".into()));
        Req::new("POST", &action).form(&urlencoded(&fields))
    }

    /// An upload of `file` through the media manager's form (its action
    /// and hidden fields, the `sectok` among them).
    fn upload(manager: &Response, file: &[u8]) -> Req {
        let (action, fields) = form(&manager.text(), "id=\"dw__upload\"");
        assert_eq!(field(&fields, "sectok").len(), 32, "a logged-in token");
        let mut parts: Vec<support::Part<'_>> = fields
            .iter()
            .map(|(n, v)| (n.as_str(), None, None, v.as_bytes()))
            .collect();
        parts.push(("mediaid", None, None, b""));
        parts.push(("upload", Some("logo.png"), Some("image/png"), file));
        Req::new("POST", &action).multipart(&parts)
    }

    #[test]
    fn dokuwiki_answers_as_under_nginx_and_php_fpm() {
        let (_a, root_fpm, _b, root_hearth) = two_copies("dokuwiki.sh");
        let logo = std::fs::read(root_hearth.join("lib/tpl/dokuwiki/images/logo.png"))
            .expect("the template's logo");
        let mut pair = Pair::start(&root_fpm, &root_hearth);
        let mut masks = Masks::new();
        let m = &mut masks;

        // A page, anonymously: the session starts here.
        step(&mut pair, m, "GET a page", |_| {
            Req::new("GET", "/doku.php?id=start")
        });
        assert!(pair.hearth.jar.get("DokuWiki").is_some(), "a session");

        // Log in, with the login form's token (empty: anonymous).
        let (f, _) = step(&mut pair, m, "GET the login form", |_| {
            Req::new("GET", "/doku.php?id=start&do=login")
        });
        let (_, fields) = form(&f.text(), "id=\"dw__login\"");
        assert_eq!(field(&fields, "sectok"), "", "an anonymous token");
        let (f, _) = step(&mut pair, m, "POST the login form", |_| {
            Req::new("POST", "/doku.php?id=start").form(&urlencoded(&[
                ("sectok".into(), String::new()),
                ("id".into(), "start".into()),
                ("do".into(), "login".into()),
                ("u".into(), "admin".into()),
                ("p".into(), PASSWORD.into()),
            ]))
        });
        assert_eq!(f.status, 302, "logged in: {}", f.text());

        // The edit form, then an edit saved with each side's own form.
        let page = "/doku.php?id=playground:playground";
        let (f, h) = step(&mut pair, m, "GET the edit form", |_| {
            Req::new("GET", &format!("{page}&do=edit"))
        });
        let saves = [save(&f), save(&h)];
        let (f, _) = step(&mut pair, m, "POST the edit", |side| {
            saves[side.index].clone()
        });
        assert_eq!(f.status, 302, "saved: {}", f.text());
        let (f, _) = step(&mut pair, m, "GET the saved page", |_| {
            Req::new("GET", page)
        });
        assert!(f.text().contains("hearthword"), "the edit shows");

        // An image uploaded through the media manager's form, then fetched.
        let (f, h) = step(&mut pair, m, "GET the media manager", |_| {
            Req::new("GET", "/doku.php?do=media&ns=playground&tab_files=upload")
        });
        let uploads = [upload(&f, &logo), upload(&h, &logo)];
        let (f, _) = step(&mut pair, m, "POST the upload", |side| {
            uploads[side.index].clone()
        });
        assert!(f.text().contains("playground:logo.png"), "uploaded");
        let (f, h) = step(&mut pair, m, "GET the uploaded image", |_| {
            Req::new("GET", "/lib/exe/fetch.php?media=playground:logo.png")
        });
        assert_eq!(f.body, logo, "the image as uploaded");
        assert_eq!(
            (f.header("content-length"), h.header("content-length")),
            (
                Some(logo.len().to_string().as_str()),
                Some(logo.len().to_string().as_str())
            ),
            "fetch.php gives the image's length: both pass it on"
        );

        // The indexer, which every page calls through an image, then a
        // search that finds the edit.
        step(&mut pair, m, "GET the indexer", |_| {
            Req::new("GET", "/lib/exe/taskrunner.php?id=playground:playground")
        });
        let (f, _) = step(&mut pair, m, "GET a search", |_| {
            Req::new("GET", "/doku.php?do=search&id=start&q=hearthword")
        });
        assert!(
            f.text().contains("id=playground:playground"),
            "the search finds the edit: {}",
            f.text()
        );
    }

    /// The same DokuWiki under `/wiki/`, as a classic pool of a server
    /// whose other requests go to a worker app (docs/configuration.md,
    /// "Classic pools"): it finds its base from `SCRIPT_NAME`, so its
    /// links, styles, login cookie and edits all live under the prefix.
    #[test]
    fn dokuwiki_runs_under_a_prefix_as_a_classic_pool_beside_a_worker_app() {
        let dir = site_dir();
        let root = setup_site("dokuwiki.sh", &dir.path().join("site"));
        // nginx's `root` inside `location /wiki/`: the pool's root holds
        // the site as wiki/ (a link to the copy's root, inside it: a
        // link out of the pool's root is refused).
        let pool_root = dir.path().join("site");
        std::os::unix::fs::symlink("root", pool_root.join("wiki")).expect("symlink");
        let config = dir.path().join("hearth.toml");
        std::fs::write(
            &config,
            format!(
                "[serve]\nscript = \"{}\"\nworkers = 1\n\n[[serve.pool]]\nname = \"wiki\"\n\
                 path = \"/wiki/\"\nroot = \"{}\"\nworkers = 2\n",
                support::fixture("pools/worker.php").display(),
                pool_root.display()
            ),
        )
        .expect("write hearth.toml");
        let server = Server::spawn_args(&[
            "serve".into(),
            "--config".into(),
            config.display().to_string(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--php".into(),
            support::php_binary(),
        ]);
        server.wait_until_ready();
        let mut wiki = Side {
            index: 1,
            addr: server.addr,
            jar: CookieJar::default(),
        };

        let page = wiki.send(&Req::new("GET", "/wiki/doku.php?id=start"));
        assert_eq!(page.status, 200, "{}", page.text());
        let html = page.text();
        assert!(html.contains("Hearth DokuWiki"), "{html}");
        assert!(
            html.contains("href=\"/wiki/doku.php?id=wiki:welcome\"")
                || html.contains("href=\"/wiki/doku.php?id=wiki%3Awelcome\""),
            "links under the prefix: {html}"
        );
        assert!(
            html.contains("/wiki/lib/exe/css.php"),
            "styles under the prefix: {html}"
        );
        let css = wiki.send(&Req::new("GET", "/wiki/lib/exe/css.php?t=dokuwiki"));
        assert_eq!(css.status, 200);
        assert!(css
            .header("content-type")
            .is_some_and(|t| t.starts_with("text/css")));
        let logo = std::fs::read(root.join("lib/tpl/dokuwiki/images/logo.png")).expect("logo");
        let got = wiki.send(&Req::new("GET", "/wiki/lib/tpl/dokuwiki/images/logo.png"));
        assert_eq!(
            (got.status, got.body == logo),
            (200, true),
            "the static logo"
        );

        // Log in and save an edit: the session and the login cookie are
        // the prefix's.
        let (_, fields) = form(
            &wiki
                .send(&Req::new("GET", "/wiki/doku.php?id=start&do=login"))
                .text(),
            "id=\"dw__login\"",
        );
        let login = wiki.send(
            &Req::new("POST", "/wiki/doku.php?id=start").form(&urlencoded(&[
                ("sectok".into(), field(&fields, "sectok").to_owned()),
                ("id".into(), "start".into()),
                ("do".into(), "login".into()),
                ("u".into(), "admin".into()),
                ("p".into(), PASSWORD.into()),
            ])),
        );
        assert_eq!(login.status, 302, "logged in: {}", login.text());
        let cookies = login.headers_named("set-cookie");
        assert!(
            cookies.iter().any(|c| c.contains("path=/wiki/")),
            "the login cookie's path is the prefix: {cookies:?}"
        );
        let page = "/wiki/doku.php?id=playground:playground";
        let edit = wiki.send(&Req::new("GET", &format!("{page}&do=edit")));
        let saved = wiki.send(&save(&edit));
        assert_eq!(saved.status, 302, "saved: {}", saved.text());
        assert!(wiki
            .send(&Req::new("GET", page))
            .text()
            .contains("hearthword"));

        // The rest of the server is the worker app's.
        let app = wiki.send(&Req::new("GET", "/doku.php"));
        assert_eq!(app.status, 200);
        assert!(app.text().starts_with("default "), "{}", app.text());
    }
}
