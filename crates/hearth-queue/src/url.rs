//! Queue URLs: which engine, where, and which queue.
//!
//! - `redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]/NAME`: the queue `NAME`
//!   in Redis database `DB` (0 when left out) on `HOST:PORT` (6379 when
//!   left out). With one path segment it is the name (`redis://h/5` is the
//!   queue `5` in database 0). The user and password are percent-decoded.
//! - `file:PATH` (or `file:///ABSOLUTE/PATH`): the embedded queue in the
//!   SQLite file `PATH`, created when missing. One file holds one queue.
//!
//! A name is 1 to 128 of `A-Z a-z 0-9 . _ -`, and not `.` or `..` (a URL
//! path drops them); the same rule holds for result channels. TLS (`rediss://`) and unix sockets are not supported.

use std::fmt;
use std::path::PathBuf;

use percent_encoding::percent_decode_str;

use crate::error::{Error, Result};

/// The longest queue or channel name.
pub const MAX_NAME_LEN: usize = 128;

/// A parsed queue URL.
#[derive(Clone, PartialEq, Eq)]
pub enum QueueUrl {
    /// A queue in Redis.
    Redis(RedisUrl),
    /// A queue in a SQLite file on this host.
    File(PathBuf),
}

/// Where a Redis queue lives.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisUrl {
    /// Host name or address (an IPv6 address without brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// Database number.
    pub db: i64,
    /// ACL user, if any.
    pub username: Option<String>,
    /// Password, if any (never shown by `Display` or `Debug`).
    pub password: Option<String>,
    /// The queue's name.
    pub name: String,
}

impl QueueUrl {
    /// Parses a queue URL; the error says what is wrong with it.
    pub fn parse(input: &str) -> Result<Self> {
        if let Some(rest) = input.strip_prefix("file:") {
            return parse_file(rest).map(QueueUrl::File);
        }
        if input.starts_with("redis://") {
            return parse_redis(input).map(QueueUrl::Redis);
        }
        if input.starts_with("rediss://") || input.starts_with("redis+unix:") {
            return Err(Error::url(format!(
                "{}: TLS and unix sockets are not supported; use redis://HOST:PORT/NAME",
                redact(input)
            )));
        }
        Err(Error::url(format!(
            "{}: expected redis://HOST[:PORT][/DB]/NAME or file:PATH",
            redact(input)
        )))
    }

    /// The queue's name: the Redis name, or the file's path.
    pub fn name(&self) -> String {
        match self {
            QueueUrl::Redis(r) => r.name.clone(),
            QueueUrl::File(p) => p.display().to_string(),
        }
    }
}

/// Whether `name` is a valid queue or channel name.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

pub(crate) fn check_name(what: &str, name: &str) -> Result<()> {
    if valid_name(name) {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{what} {name:?}: expected 1 to {MAX_NAME_LEN} of A-Z a-z 0-9 . _ -"
        )))
    }
}

fn parse_file(rest: &str) -> Result<PathBuf> {
    let path = match rest.strip_prefix("//") {
        Some(abs) if abs.starts_with('/') => abs,
        Some(_) => {
            return Err(Error::url(format!(
                "file:{rest}: a host is not allowed; use file:PATH or file:///ABSOLUTE/PATH"
            )))
        }
        None => rest,
    };
    if path.is_empty() {
        return Err(Error::url(
            "file: needs a path, as in file:/var/lib/hearth/jobs.db",
        ));
    }
    if path.contains('\0') {
        return Err(Error::url("file: the path has a NUL byte"));
    }
    Ok(PathBuf::from(path))
}

fn parse_redis(input: &str) -> Result<RedisUrl> {
    let shown = redact(input);
    let url = url::Url::parse(input).map_err(|e| Error::url(format!("{shown}: {e}")))?;
    if url.query().is_some() || url.fragment().is_some() {
        return Err(Error::url(format!(
            "{shown}: no query or fragment is allowed"
        )));
    }
    let host = match url.host() {
        Some(url::Host::Domain(d)) if !d.is_empty() => d.to_string(),
        Some(url::Host::Ipv4(a)) => a.to_string(),
        Some(url::Host::Ipv6(a)) => a.to_string(),
        _ => return Err(Error::url(format!("{shown}: a host is needed"))),
    };
    let port = url.port().unwrap_or(6379);
    let decode = |s: &str, what: &str| {
        percent_decode_str(s)
            .decode_utf8()
            .map(|c| c.into_owned())
            .map_err(|_| Error::url(format!("{shown}: the {what} is not UTF-8")))
    };
    let username = match url.username() {
        "" => None,
        u => Some(decode(u, "user")?),
    };
    let password = match url.password() {
        None => None,
        Some(p) => Some(decode(p, "password")?),
    };
    let segments: Vec<&str> = url.path().trim_start_matches('/').split('/').collect();
    let (db, name) = match segments.as_slice() {
        [name] if !name.is_empty() => (0, *name),
        [db, name] if !name.is_empty() => {
            let db =
                db.parse::<i64>().ok().filter(|d| *d >= 0).ok_or_else(|| {
                    Error::url(format!("{shown}: database {db:?} is not a number"))
                })?;
            (db, *name)
        }
        _ => {
            return Err(Error::url(format!(
                "{shown}: the path is the queue's name: redis://HOST:PORT[/DB]/NAME"
            )))
        }
    };
    if !valid_name(name) {
        return Err(Error::url(format!(
            "{shown}: queue name {name:?}: expected 1 to {MAX_NAME_LEN} of A-Z a-z 0-9 . _ -"
        )));
    }
    Ok(RedisUrl {
        host,
        port,
        db,
        username,
        password,
        name: name.to_string(),
    })
}

/// The URL with any password replaced, for messages (by hand: a URL too
/// broken to parse must not be shown with its password either).
fn redact(input: &str) -> String {
    let Some(start) = input.find("://").map(|i| i + 3) else {
        return input.to_string();
    };
    let end = input[start..]
        .find(['/', '?', '#'])
        .map_or(input.len(), |i| start + i);
    let Some(at) = input[start..end].rfind('@').map(|i| start + i) else {
        return input.to_string();
    };
    match input[start..at].find(':') {
        Some(colon) => format!("{}:***{}", &input[..start + colon], &input[at..]),
        None => input.to_string(),
    }
}

impl fmt::Display for QueueUrl {
    /// The URL without its password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueueUrl::File(p) => write!(f, "file:{}", p.display()),
            QueueUrl::Redis(r) => write!(f, "{r}"),
        }
    }
}

impl fmt::Display for RedisUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("redis://")?;
        if self.username.is_some() || self.password.is_some() {
            if let Some(u) = &self.username {
                f.write_str(u)?;
            }
            if self.password.is_some() {
                f.write_str(":***")?;
            }
            f.write_str("@")?;
        }
        if self.host.contains(':') {
            write!(f, "[{}]", self.host)?;
        } else {
            f.write_str(&self.host)?;
        }
        write!(f, ":{}/{}/{}", self.port, self.db, self.name)
    }
}

impl fmt::Debug for QueueUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "QueueUrl({self})")
    }
}

impl fmt::Debug for RedisUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RedisUrl({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn redis(s: &str) -> RedisUrl {
        match QueueUrl::parse(s) {
            Ok(QueueUrl::Redis(r)) => r,
            other => panic!("{s}: {other:?}"),
        }
    }

    #[test]
    fn redis_urls() {
        let r = redis("redis://127.0.0.1:6380/2/mail");
        assert_eq!(
            (r.host.as_str(), r.port, r.db, r.name.as_str()),
            ("127.0.0.1", 6380, 2, "mail")
        );
        let r = redis("redis://cache/jobs");
        assert_eq!((r.port, r.db, r.name.as_str()), (6379, 0, "jobs"));
        let r = redis("redis://cache/5");
        assert_eq!((r.db, r.name.as_str()), (0, "5"));
        let r = redis("redis://:s%40cret@[::1]:7000/jobs");
        assert_eq!(r.host, "::1");
        assert_eq!(r.password.as_deref(), Some("s@cret"));
        assert_eq!(r.username, None);
        let r = redis("redis://app:pw@h/jobs");
        assert_eq!(r.username.as_deref(), Some("app"));
        assert_eq!(r.to_string(), "redis://app:***@h:6379/0/jobs");
        assert!(!format!("{:?}", QueueUrl::Redis(r)).contains("pw"));
    }

    #[test]
    fn file_urls() {
        let f = |s: &str| QueueUrl::parse(s).map_err(|e| e.to_string());
        assert_eq!(f("file:/var/q.db"), Ok(QueueUrl::File("/var/q.db".into())));
        assert_eq!(f("file:q.db"), Ok(QueueUrl::File("q.db".into())));
        assert_eq!(
            f("file:///var/q.db"),
            Ok(QueueUrl::File("/var/q.db".into()))
        );
        assert!(QueueUrl::parse("file://host/q.db").is_err_and(|e| e.is_url()));
        assert!(QueueUrl::parse("file:").is_err_and(|e| e.is_url()));
    }

    #[test]
    fn refused_urls_say_so_without_the_password() {
        for bad in [
            "redis://h",
            "redis://h/",
            "redis://h/x/y/z",
            "redis://h/-1/q",
            "redis://h/db/q",
            "redis://h/q?x=1",
            "redis://h/bad%20name",
            "redis://h/a{b}",
            "redis://h/0/..",
            "rediss://h/q",
            "amqp://h/q",
            "redis://:topsecret@/q",
            "redis://u:topsecret@h:99999/q",
        ] {
            let e = QueueUrl::parse(bad).expect_err(bad);
            assert!(e.is_url(), "{bad}");
            assert!(!e.to_string().contains("topsecret"), "{e}");
        }
    }

    proptest! {
        #[test]
        fn parse_never_panics(s in "\\PC{0,80}") {
            let _ = QueueUrl::parse(&s);
        }

        #[test]
        fn redis_round_trips(host in "[a-z][a-z0-9]{0,20}", port in 1u16.., db in 0i64..1000,
                             name in "[A-Za-z0-9._-]{1,128}".prop_filter("dot segments", |n| n != "." && n != ".."), pw in proptest::option::of("[ -~]{1,20}")) {
            let mut url = String::from("redis://");
            if let Some(p) = &pw {
                url.push(':');
                url.push_str(&percent_encoding::utf8_percent_encode(p, percent_encoding::NON_ALPHANUMERIC).to_string());
                url.push('@');
            }
            url.push_str(&format!("{host}:{port}/{db}/{name}"));
            let r = match QueueUrl::parse(&url) {
                Ok(QueueUrl::Redis(r)) => r,
                other => return Err(TestCaseError::fail(format!("{url}: {other:?}"))),
            };
            prop_assert_eq!(&r.host, &host);
            prop_assert_eq!(r.port, port);
            prop_assert_eq!(r.db, db);
            prop_assert_eq!(&r.name, &name);
            prop_assert_eq!(&r.password, &pw);
            // Display (without the password) parses back to the same place.
            let again = match QueueUrl::parse(&r.to_string()) {
                Ok(QueueUrl::Redis(a)) => a,
                other => return Err(TestCaseError::fail(format!("{r}: {other:?}"))),
            };
            prop_assert_eq!((again.host, again.port, again.db, again.name), (host, port, db, name));
        }
    }
}
