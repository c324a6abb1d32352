//! Debug mode: the Xdebug triggers a request carries.
//!
//! Xdebug looks for its triggers in `$_GET`, then `$_POST`, then
//! `$_COOKIE`, then the environment, when a process starts running PHP.
//! In debug mode each request runs in a worker started for it, and the
//! triggers found here go into that worker's environment, where Xdebug
//! finds them from the first line of the worker script on.
//!
//! `$_POST` is a form body held in memory (`application/x-www-form-
//! urlencoded`), or the fields of a multipart form: those the form parser
//! kept ([`POST_NAMES`]) when Hearth parses it, or those within the first
//! [`MULTIPART_SCAN`] bytes of the body when the workers parse it (the
//! Hearth extension), read by [`multipart_fields`] without holding more
//! than that.

use std::ffi::OsString;

use bytes::Bytes;
use hearth_pool::PoolConfig;
use tokio::io::AsyncReadExt;

use crate::body::Held;

/// Triggers that start a step-debugging session: the request may then be
/// held at a breakpoint for as long as the developer looks at it.
/// (`XDEBUG_TRIGGER` also starts the profiler and the tracer.)
const DEBUG_TRIGGERS: [&str; 3] = ["XDEBUG_TRIGGER", "XDEBUG_SESSION", SESSION_START];

/// The trigger that also sets the session cookie.
const SESSION_START: &str = "XDEBUG_SESSION_START";

/// Xdebug 2's names for the profiler's and tracer's triggers, which
/// Xdebug 3 still reads.
const OTHER_TRIGGERS: [&str; 2] = ["XDEBUG_PROFILE", "XDEBUG_TRACE"];

/// The request variable that ends a session: Xdebug answers it (in
/// `$_GET` or `$_POST`, whatever its value) by deleting the
/// `XDEBUG_SESSION` cookie.
const SESSION_STOP: &str = "XDEBUG_SESSION_STOP";

/// The `Set-Cookie` with which Xdebug 3 deletes the session cookie (PHP's
/// `setcookie()` with an empty value, as Xdebug calls it).
const DELETE_SESSION: &str =
    "XDEBUG_SESSION=deleted; expires=Thu, 01 Jan 1970 00:00:01 GMT; Max-Age=0; path=/; SameSite=Lax";

/// Longest trigger value passed on; Xdebug compares it with
/// `xdebug.trigger_value`, and an IDE key is a short word. (The form
/// parser keeps the fields of [`POST_NAMES`] up to that length.)
pub(crate) const MAX_VALUE: usize = crate::form::KEPT_VALUE;

/// The `$_POST` fields Xdebug reads: the form parser keeps them (their
/// values up to [`MAX_VALUE`] bytes) in debug mode.
pub(crate) const POST_NAMES: [&str; 6] = [
    "XDEBUG_TRIGGER",
    "XDEBUG_SESSION",
    SESSION_START,
    "XDEBUG_PROFILE",
    "XDEBUG_TRACE",
    SESSION_STOP,
];

/// How much of a multipart body the workers parse themselves is looked
/// at for triggers: the start of the body, where a browser puts the
/// fields that come before the file inputs, without reading a large
/// upload again.
pub(crate) const MULTIPART_SCAN: usize = 64 << 10;

/// Fields of a `$_POST` Xdebug reads, by name, in the order sent, each
/// with its value (none when too long to pass on, or not text).
pub(crate) type PostFields = Vec<(String, Option<String>)>;

/// The Xdebug triggers of one request.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Triggers {
    /// Each trigger found, with its value from the first place Xdebug
    /// looks (the query, then the form, then the cookies).
    pub found: Vec<(&'static str, String)>,
    /// `XDEBUG_SESSION_STOP` was in the query or the form.
    pub stop: bool,
}

impl Triggers {
    /// Looks for the triggers in the query string, the form (a body
    /// `form` in `application/x-www-form-urlencoded`, or the `fields` of
    /// a multipart one) and the `Cookie` headers, decoded as PHP decodes
    /// them for `$_GET`, `$_POST` and `$_COOKIE` (where a name given twice
    /// is the last one in `$_GET` and `$_POST`, the first in `$_COOKIE`).
    pub fn find<'a>(
        query: Option<&str>,
        form: Option<&[u8]>,
        fields: &[(String, Option<String>)],
        cookies: impl Iterator<Item = &'a [u8]> + Clone,
    ) -> Triggers {
        let mut found = Vec::new();
        let in_fields = |name: &str| {
            fields
                .iter()
                .rev()
                .find(|(n, _)| n == name)
                .and_then(|(_, v)| v.as_deref().and_then(usable))
        };
        for name in DEBUG_TRIGGERS.into_iter().chain(OTHER_TRIGGERS) {
            // XDEBUG_SESSION_START is a request variable, not a cookie:
            // Xdebug answers it with the XDEBUG_SESSION cookie.
            let cookies = cookies.clone().filter(|_| name != SESSION_START);
            let value = query
                .and_then(|q| in_form(q.as_bytes(), name))
                .or_else(|| form.and_then(|f| in_form(f, name)))
                .or_else(|| in_fields(name))
                .or_else(|| cookies.clone().find_map(|c| in_cookie(c, name)));
            if let Some(value) = value {
                found.push((name, value));
            }
        }
        let named = |text: &[u8]| form_urlencoded::parse(text).any(|(n, _)| n == SESSION_STOP);
        let stop = query.is_some_and(|q| named(q.as_bytes()))
            || form.is_some_and(named)
            || fields.iter().any(|(n, _)| n == SESSION_STOP);
        Triggers { found, stop }
    }

    /// Whether one of them starts a step-debugging session.
    pub fn debugging(&self) -> bool {
        self.found
            .iter()
            .any(|(name, _)| DEBUG_TRIGGERS.contains(name))
    }

    /// The `Set-Cookie` values with which Xdebug answers the request, in
    /// its order: for `XDEBUG_SESSION_START=value`, the session cookie, so
    /// that the browser's next requests are debugged too
    /// (`XDEBUG_SESSION=value; path=/; SameSite=Lax`); for
    /// `XDEBUG_SESSION_STOP`, its deletion, so that they are not. The
    /// request itself is debugged or not by its other triggers, as Xdebug
    /// decides before it looks at the stop. (Xdebug sends these when the
    /// worker starts, before the request, where they cannot reach the
    /// response.)
    pub fn session_cookies(&self) -> Vec<String> {
        let start = self
            .found
            .iter()
            .find(|(name, _)| *name == SESSION_START)
            .map(|(_, value)| {
                let value: String = form_urlencoded::byte_serialize(value.as_bytes()).collect();
                format!("XDEBUG_SESSION={value}; path=/; SameSite=Lax")
            });
        let stop = self.stop.then(|| DELETE_SESSION.to_owned());
        start.into_iter().chain(stop).collect()
    }

    /// The worker's extra environment: each trigger as a variable.
    pub fn env(&self) -> Vec<(OsString, OsString)> {
        self.found
            .iter()
            .map(|(name, value)| ((*name).into(), value.into()))
            .collect()
    }
}

/// Whether every worker starts a step-debugging session whatever the
/// request: a trigger in the workers' environment (`--env`, or Hearth's
/// own unless `--clear-env`) or `xdebug.start_with_request=yes` among the
/// `--php-ini` settings.
pub(crate) fn always_debugging(config: &PoolConfig) -> bool {
    let configured = config
        .env
        .iter()
        .any(|(name, _)| DEBUG_TRIGGERS.iter().any(|t| name == t));
    let inherited =
        !config.clear_env && DEBUG_TRIGGERS.iter().any(|t| std::env::var_os(t).is_some());
    let ini = config
        .ini
        .iter()
        .rev()
        .find(|(name, _)| name == "xdebug.start_with_request")
        .is_some_and(|(_, value)| value.trim().eq_ignore_ascii_case("yes"));
    configured || inherited || ini
}

/// The value of `name` in `a=1&b=2` form encoding, if it is there (the
/// last one, as PHP keeps it).
fn in_form(text: &[u8], name: &str) -> Option<String> {
    form_urlencoded::parse(text)
        .filter(|(n, _)| n == name)
        .last()
        .and_then(|(_, v)| usable(&v))
}

/// The [`POST_NAMES`] fields of a multipart body that the workers parse
/// themselves, found in its first [`MULTIPART_SCAN`] bytes: in memory
/// already, or read from the start of the file it was spooled to. A field
/// not whole within them is not seen; a file input is `$_FILES`, not
/// `$_POST`. (multer, as the form parser uses it, over those bytes only.)
pub(crate) async fn multipart_fields(held: &Held, boundary: &str) -> PostFields {
    let head = match held {
        Held::Empty => return Vec::new(),
        Held::Memory { bytes, .. } => bytes.slice(..bytes.len().min(MULTIPART_SCAN)),
        Held::File { path, .. } => {
            let mut head = Vec::with_capacity(MULTIPART_SCAN);
            let read = match tokio::fs::File::open(path).await {
                Ok(file) => file
                    .take(MULTIPART_SCAN as u64)
                    .read_to_end(&mut head)
                    .await
                    .map(|_| ()),
                Err(e) => Err(e),
            };
            if let Err(e) = read {
                tracing::warn!(
                    "debug mode: cannot read {} for Xdebug triggers: {e}",
                    path.display()
                );
                return Vec::new();
            }
            Bytes::from(head)
        }
    };
    let stream = futures_util::stream::iter([Ok::<_, std::io::Error>(head)]);
    let mut form = multer::Multipart::new(stream, boundary);
    let mut found = Vec::new();
    // An error is the end of the bytes looked at, or a body PHP would not
    // parse either.
    while let Ok(Some(mut field)) = form.next_field().await {
        let Some(name) = field
            .name()
            .filter(|n| POST_NAMES.contains(n))
            .map(str::to_owned)
        else {
            continue;
        };
        if field.file_name().is_some() {
            continue;
        }
        let mut value = Vec::new();
        let mut whole = true;
        loop {
            match field.chunk().await {
                Ok(Some(chunk)) if value.len() + chunk.len() <= MAX_VALUE => {
                    value.extend_from_slice(&chunk);
                }
                Ok(Some(_)) => whole = false,
                Ok(None) => break,
                Err(_) => return found,
            }
        }
        let value = whole.then(|| String::from_utf8(value).ok()).flatten();
        found.push((name, value));
    }
    found
}

/// The value of `name` in a `Cookie` header (`a=1; b=2`), URL-decoded as
/// PHP decodes `$_COOKIE`.
fn in_cookie(header: &[u8], name: &str) -> Option<String> {
    header.split(|&b| b == b';').find_map(|pair| {
        let text = std::str::from_utf8(pair).ok()?.trim_start();
        let (n, v) = text.split_once('=').unwrap_or((text, ""));
        if n != name {
            return None;
        }
        let decoded = percent_encoding::percent_decode_str(v).decode_utf8().ok()?;
        usable(&decoded)
    })
}

/// A value that may go into an environment variable: no NUL byte, and
/// not too long to be a key.
fn usable(value: &str) -> Option<String> {
    (!value.contains('\0') && value.len() <= MAX_VALUE).then(|| value.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find(query: Option<&str>, form: Option<&str>, cookies: &[&str]) -> Triggers {
        Triggers::find(
            query,
            form.map(str::as_bytes),
            &[],
            cookies.iter().map(|c| c.as_bytes()),
        )
    }

    fn found(pairs: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
        pairs.iter().map(|(n, v)| (*n, (*v).to_owned())).collect()
    }

    #[test]
    fn triggers_are_found_where_xdebug_looks() {
        let t = find(None, None, &["a=1; XDEBUG_SESSION=PHPSTORM"]);
        assert_eq!(t.found, [("XDEBUG_SESSION", "PHPSTORM".to_owned())]);
        assert!(t.debugging());
        let t = find(Some("x=1&XDEBUG_SESSION_START=vsc%20ode"), None, &[]);
        assert_eq!(t.found, [("XDEBUG_SESSION_START", "vsc ode".to_owned())]);
        let t = find(None, Some("XDEBUG_TRIGGER=1&b=2"), &[]);
        assert_eq!(t.found, [("XDEBUG_TRIGGER", "1".to_owned())]);
        assert_eq!(
            t.env(),
            [(OsString::from("XDEBUG_TRIGGER"), OsString::from("1"))]
        );
    }

    #[test]
    fn session_start_is_answered_with_the_session_cookie() {
        let t = find(Some("XDEBUG_SESSION_START=my%20key"), None, &[]);
        assert_eq!(
            t.session_cookies(),
            ["XDEBUG_SESSION=my+key; path=/; SameSite=Lax"]
        );
        let t = find(None, None, &["XDEBUG_SESSION_START=1; XDEBUG_SESSION=2"]);
        assert_eq!(t.found, [("XDEBUG_SESSION", "2".to_owned())]);
        assert_eq!(t.session_cookies(), Vec::<String>::new());
    }

    #[test]
    fn session_stop_deletes_the_cookie_and_leaves_the_request_to_its_triggers() {
        let t = find(Some("XDEBUG_SESSION_STOP"), None, &["XDEBUG_SESSION=1"]);
        assert!(t.stop);
        assert!(t.debugging(), "the cookie still came with this request");
        assert_eq!(t.session_cookies(), [DELETE_SESSION]);
        let t = find(None, Some("a=1&XDEBUG_SESSION_STOP=1"), &[]);
        assert!(t.stop && !t.debugging());
        // Started and stopped at once: both cookies, the deletion last.
        let t = find(
            Some("XDEBUG_SESSION_START=a&XDEBUG_SESSION_STOP=1"),
            None,
            &[],
        );
        assert_eq!(
            t.session_cookies(),
            ["XDEBUG_SESSION=a; path=/; SameSite=Lax", DELETE_SESSION]
        );
        // A cookie of that name is no stop: Xdebug reads GET and POST.
        let t = find(None, None, &["XDEBUG_SESSION_STOP=1"]);
        assert!(!t.stop);
        let fields = vec![("XDEBUG_SESSION_STOP".to_owned(), None)];
        let t = Triggers::find(None, None, &fields, std::iter::empty());
        assert!(t.stop, "whatever its value");
    }

    #[test]
    fn multipart_fields_come_after_the_query_and_before_the_cookies() {
        let fields = vec![
            ("XDEBUG_SESSION_START".to_owned(), Some("first".to_owned())),
            ("XDEBUG_SESSION_START".to_owned(), Some("vscode".to_owned())),
            ("XDEBUG_TRIGGER".to_owned(), None),
        ];
        let t = Triggers::find(
            None,
            None,
            &fields,
            [&b"XDEBUG_TRIGGER=cookie"[..]].into_iter(),
        );
        assert_eq!(
            t.found,
            found(&[
                ("XDEBUG_TRIGGER", "cookie"),
                ("XDEBUG_SESSION_START", "vscode")
            ])
        );
        let t = Triggers::find(
            Some("XDEBUG_SESSION_START=get"),
            None,
            &fields,
            std::iter::empty(),
        );
        assert_eq!(t.found, found(&[("XDEBUG_SESSION_START", "get")]));
    }

    #[test]
    fn a_name_given_twice_in_the_query_is_the_last() {
        let t = find(Some("XDEBUG_SESSION=a&XDEBUG_SESSION=b"), None, &[]);
        assert_eq!(t.found, found(&[("XDEBUG_SESSION", "b")]));
    }

    fn multipart(parts: &[(&str, Option<&str>, &str)]) -> Vec<u8> {
        let mut body = Vec::new();
        for (name, file, value) in parts {
            body.extend_from_slice(b"--XyZ\r\nContent-Disposition: form-data; name=\"");
            body.extend_from_slice(name.as_bytes());
            body.push(b'"');
            if let Some(file) = file {
                body.extend_from_slice(format!("; filename=\"{file}\"").as_bytes());
            }
            body.extend_from_slice(b"\r\n\r\n");
            body.extend_from_slice(value.as_bytes());
            body.extend_from_slice(b"\r\n");
        }
        body.extend_from_slice(b"--XyZ--\r\n");
        body
    }

    fn in_memory(body: Vec<u8>) -> Held {
        Held::Memory {
            bytes: Bytes::from(body),
            _reserved: None,
        }
    }

    #[tokio::test]
    async fn multipart_triggers_are_read_from_the_start_of_the_body() {
        let body = multipart(&[
            ("title", None, "x"),
            ("XDEBUG_SESSION_START", None, "vscode"),
            ("XDEBUG_TRIGGER", Some("t.txt"), "a file, not a field"),
            ("XDEBUG_SESSION_STOP", None, &"y".repeat(MAX_VALUE + 1)),
            ("upload", Some("big.bin"), &"z".repeat(MULTIPART_SCAN)),
            ("XDEBUG_PROFILE", None, "past the start"),
        ]);
        let fields = multipart_fields(&in_memory(body.clone()), "XyZ").await;
        assert_eq!(
            fields,
            [
                ("XDEBUG_SESSION_START".to_owned(), Some("vscode".to_owned())),
                ("XDEBUG_SESSION_STOP".to_owned(), None),
            ]
        );
        // The same from the file a large body was spooled to.
        let mut file = tempfile::NamedTempFile::new().expect("file");
        std::io::Write::write_all(&mut file, &body).expect("write");
        let held = Held::File {
            path: file.into_temp_path(),
            len: body.len(),
        };
        assert_eq!(multipart_fields(&held, "XyZ").await, fields);
        // Another boundary, or no form at all: nothing.
        assert!(multipart_fields(&in_memory(body), "other").await.is_empty());
        assert!(multipart_fields(&Held::Empty, "XyZ").await.is_empty());
    }

    #[test]
    fn the_query_comes_before_the_form_and_the_cookies() {
        let t = find(
            Some("XDEBUG_SESSION=get"),
            Some("XDEBUG_SESSION=post"),
            &["XDEBUG_SESSION=cookie"],
        );
        assert_eq!(t.found, [("XDEBUG_SESSION", "get".to_owned())]);
        let t = find(
            None,
            Some("XDEBUG_SESSION=post"),
            &["XDEBUG_SESSION=cookie"],
        );
        assert_eq!(t.found, [("XDEBUG_SESSION", "post".to_owned())]);
    }

    #[test]
    fn profiler_triggers_do_not_hold_the_request() {
        let t = find(Some("XDEBUG_PROFILE=1"), None, &[]);
        assert_eq!(t.found, [("XDEBUG_PROFILE", "1".to_owned())]);
        assert!(!t.debugging());
    }

    #[test]
    fn no_trigger_no_variables() {
        let t = find(
            Some("XDEBUG=1&xdebug_session=1"),
            None,
            &["XDEBUG_SESSIONX=1", "PHPSESSID=abc"],
        );
        assert_eq!(t, Triggers::default());
        assert!(!t.debugging());
    }

    #[test]
    fn values_that_cannot_be_variables_are_left_out() {
        let long = "x".repeat(MAX_VALUE + 1);
        let t = find(
            Some(&format!("XDEBUG_SESSION={long}")),
            None,
            &["XDEBUG_TRIGGER=a%00b"],
        );
        assert_eq!(t, Triggers::default());
    }

    #[test]
    fn start_with_request_yes_or_a_trigger_in_the_environment_always_debugs() {
        let mut config = PoolConfig::new("php-cgi", "/app/worker.php", 1);
        config.clear_env = true;
        assert!(!always_debugging(&config));
        config
            .ini
            .push(("xdebug.start_with_request".into(), "yes".into()));
        assert!(always_debugging(&config));
        config
            .ini
            .push(("xdebug.start_with_request".into(), "trigger".into()));
        assert!(!always_debugging(&config));
        config.env.push(("XDEBUG_SESSION".into(), "1".into()));
        assert!(always_debugging(&config));
    }
}
