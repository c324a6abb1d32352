//! The access log: one line per request, in the common log format or as
//! JSON, written by a thread of its own.
//!
//! A request only formats its line and offers it to a bounded channel; the
//! thread writes lines through a buffer and flushes whenever the channel
//! runs dry. When the channel is full (the disk or the pipe cannot keep
//! up), the line is dropped and counted rather than making the request
//! wait.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Lines waiting for the writer thread, at most.
const BACKLOG: usize = 8192;

/// How each line is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessLogFormat {
    /// The common log format, with the duration in seconds and the
    /// worker's pid added at the end:
    /// `127.0.0.1 - - [06/May/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 512 0.001234 4242`.
    Common,
    /// One JSON object per line.
    Json,
}

/// A handle on the access log; cheap to clone.
#[derive(Debug, Clone)]
pub struct AccessLog {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    format: AccessLogFormat,
    tx: SyncSender<String>,
    dropped: AtomicU64,
}

/// One request, as the access log records it.
#[derive(Debug)]
pub(crate) struct Entry<'a> {
    pub remote_ip: &'a str,
    pub remote_port: &'a str,
    /// When the request arrived.
    pub time: SystemTime,
    pub method: &'a str,
    pub uri: &'a http::Uri,
    pub version: http::Version,
    pub status: u16,
    /// Body bytes sent.
    pub bytes: u64,
    pub duration: Duration,
    /// The worker that answered; none for static files and refusals.
    pub pid: Option<u32>,
}

impl AccessLog {
    /// Starts the writer thread, writing to `path` (appending) or, without
    /// one, to standard output.
    pub fn start(format: AccessLogFormat, path: Option<&Path>) -> std::io::Result<AccessLog> {
        let out: Box<dyn std::io::Write + Send> = match path {
            Some(path) => Box::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)?,
            ),
            None => Box::new(std::io::stdout()),
        };
        let (tx, rx) = mpsc::sync_channel::<String>(BACKLOG);
        std::thread::Builder::new()
            .name("hearth-access-log".into())
            .spawn(move || {
                let mut out = std::io::BufWriter::with_capacity(64 << 10, out);
                while let Ok(line) = rx.recv() {
                    let _ = out.write_all(line.as_bytes());
                    while let Ok(line) = rx.try_recv() {
                        let _ = out.write_all(line.as_bytes());
                    }
                    let _ = out.flush();
                }
            })?;
        Ok(AccessLog {
            inner: Arc::new(Inner {
                format,
                tx,
                dropped: AtomicU64::new(0),
            }),
        })
    }

    /// Lines dropped because the writer fell behind.
    pub fn dropped(&self) -> u64 {
        self.inner.dropped.load(Ordering::Relaxed)
    }

    /// Formats and queues one line; never waits.
    pub(crate) fn write(&self, entry: &Entry<'_>) {
        let line = match self.inner.format {
            AccessLogFormat::Common => common(entry),
            AccessLogFormat::Json => json(entry),
        };
        match self.inner.tx.try_send(line) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                if self.inner.dropped.fetch_add(1, Ordering::Relaxed) == 0 {
                    tracing::warn!(
                        "the access log cannot keep up: dropping lines (counted in hearth_access_log_dropped_total)"
                    );
                }
            }
            Err(TrySendError::Disconnected(_)) => {}
        }
    }
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// A UTC date and time: (year, month 1-12, day, hour, minute, second, ms).
fn civil(time: SystemTime) -> (i64, u32, u32, u32, u32, u32, u32) {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400) as u32);
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (
        year,
        month,
        day,
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        since.subsec_millis(),
    )
}

fn protocol(version: http::Version) -> &'static str {
    match version {
        http::Version::HTTP_09 => "HTTP/0.9",
        http::Version::HTTP_10 => "HTTP/1.0",
        http::Version::HTTP_11 => "HTTP/1.1",
        http::Version::HTTP_2 => "HTTP/2.0",
        http::Version::HTTP_3 => "HTTP/3.0",
        _ => "HTTP/?",
    }
}

/// Apache's escaping for the request line: `"` and `\` escaped, bytes
/// outside printable ASCII as `\xHH`.
fn push_clf_escaped(out: &mut String, text: &str) {
    for b in text.bytes() {
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(char::from(b)),
            _ => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
}

fn common(e: &Entry<'_>) -> String {
    let (year, month, day, hour, minute, second, _) = civil(e.time);
    let mut line = String::with_capacity(128 + e.uri.path().len());
    let _ = write!(
        line,
        "{} - - [{day:02}/{}/{year}:{hour:02}:{minute:02}:{second:02} +0000] \"",
        e.remote_ip,
        MONTHS[month as usize - 1],
    );
    push_clf_escaped(&mut line, e.method);
    line.push(' ');
    push_clf_escaped(&mut line, &uri_text(e.uri));
    let _ = write!(line, " {}\" {} ", protocol(e.version), e.status);
    if e.bytes == 0 {
        line.push('-');
    } else {
        let _ = write!(line, "{}", e.bytes);
    }
    let _ = write!(line, " {:.6} ", e.duration.as_secs_f64());
    match e.pid {
        Some(pid) => {
            let _ = writeln!(line, "{pid}");
        }
        None => line.push_str("-\n"),
    }
    line
}

/// The request target as the client sent it (origin form: path and query).
fn uri_text(uri: &http::Uri) -> std::borrow::Cow<'_, str> {
    match uri.path_and_query() {
        Some(pq) if uri.scheme().is_none() => pq.as_str().into(),
        _ => uri.to_string().into(),
    }
}

fn push_json_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn json(e: &Entry<'_>) -> String {
    let (year, month, day, hour, minute, second, ms) = civil(e.time);
    let mut line = String::with_capacity(256 + e.uri.path().len());
    let _ = write!(
        line,
        "{{\"time\":\"{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{ms:03}Z\",\"remote_addr\":"
    );
    push_json_string(&mut line, e.remote_ip);
    line.push_str(",\"remote_port\":");
    line.push_str(if e.remote_port.is_empty() {
        "null"
    } else {
        e.remote_port
    });
    line.push_str(",\"method\":");
    push_json_string(&mut line, e.method);
    line.push_str(",\"uri\":");
    push_json_string(
        &mut line,
        &String::from_utf8_lossy(uri_text(e.uri).as_bytes()),
    );
    let _ = write!(
        line,
        ",\"protocol\":\"{}\",\"status\":{},\"bytes\":{},\"duration\":{:.6},\"pid\":",
        protocol(e.version),
        e.status,
        e.bytes,
        e.duration.as_secs_f64()
    );
    match e.pid {
        Some(pid) => {
            let _ = write!(line, "{pid}");
        }
        None => line.push_str("null"),
    }
    line.push_str("}\n");
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(uri: &'static str) -> (http::Uri, SystemTime) {
        (
            uri.parse().expect("uri"),
            // 2000-10-10 13:55:36.250 UTC
            UNIX_EPOCH + Duration::from_millis(971_186_136_250),
        )
    }

    #[test]
    fn common_format_has_every_field() {
        let (uri, time) = entry("/a%20b?q=x");
        let line = common(&Entry {
            remote_ip: "127.0.0.1",
            remote_port: "5555",
            time,
            method: "GET",
            uri: &uri,
            version: http::Version::HTTP_11,
            status: 200,
            bytes: 2326,
            duration: Duration::from_micros(1500),
            pid: Some(42),
        });
        assert_eq!(
            line,
            "127.0.0.1 - - [10/Oct/2000:13:55:36 +0000] \"GET /a%20b?q=x HTTP/1.1\" 200 2326 0.001500 42\n"
        );
    }

    #[test]
    fn json_format_has_every_field_and_escapes() {
        let (uri, time) = entry("/x?y=1");
        let line = json(&Entry {
            remote_ip: "::1",
            remote_port: "80",
            time,
            method: "POST",
            uri: &uri,
            version: http::Version::HTTP_10,
            status: 404,
            bytes: 0,
            duration: Duration::from_millis(2),
            pid: None,
        });
        assert_eq!(
            line,
            "{\"time\":\"2000-10-10T13:55:36.250Z\",\"remote_addr\":\"::1\",\"remote_port\":80,\"method\":\"POST\",\"uri\":\"/x?y=1\",\"protocol\":\"HTTP/1.0\",\"status\":404,\"bytes\":0,\"duration\":0.002000,\"pid\":null}\n"
        );
    }

    #[test]
    fn quotes_and_control_bytes_are_escaped() {
        let mut clf = String::new();
        push_clf_escaped(&mut clf, "a\"b\\c\u{1}é");
        assert_eq!(clf, "a\\\"b\\\\c\\x01\\xc3\\xa9");
        let mut json = String::new();
        push_json_string(&mut json, "a\"b\\c\u{1}\né");
        assert_eq!(json, "\"a\\\"b\\\\c\\u0001\\né\"");
    }

    #[test]
    fn civil_dates_match_known_days() {
        assert_eq!(civil(UNIX_EPOCH), (1970, 1, 1, 0, 0, 0, 0));
        // 2024-02-29 23:59:59 UTC
        let leap = UNIX_EPOCH + Duration::from_secs(1_709_251_199);
        assert_eq!(civil(leap), (2024, 2, 29, 23, 59, 59, 0));
    }
}
