//! Typed views of the payloads Hearth reads from workers.

use bytes::{BufMut, Bytes, BytesMut};

use crate::fields::{self, Fields};
use crate::Error;

/// The handshake a worker sends once its app has booted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ready {
    pub pid: u32,
    /// `PHP_VERSION` of the worker.
    pub php_version: String,
    /// `PHP_SAPI` of the worker: `cgi-fcgi` for `php-cgi`, `cli` for `php`.
    pub sapi: String,
    /// The protocol version the PHP library speaks.
    pub protocol: u32,
    /// Everything else the worker reported (PHP settings that decide how
    /// request bodies are handled, the library version).
    pub fields: Fields,
}

impl Ready {
    pub fn decode(payload: &Bytes) -> Result<Ready, Error> {
        let fields = Fields::decode(payload)?;
        let pid = fields
            .get_str("pid")
            .and_then(|p| p.parse().ok())
            .ok_or(Error::malformed("ready: missing or invalid pid"))?;
        let protocol = fields
            .get_str("protocol")
            .and_then(|p| p.parse().ok())
            .ok_or(Error::malformed("ready: missing or invalid protocol"))?;
        Ok(Ready {
            pid,
            php_version: fields.get_str("php_version").unwrap_or_default(),
            sapi: fields.get_str("sapi").unwrap_or_default(),
            protocol,
            fields,
        })
    }

    /// A PHP setting reported at handshake, as text.
    pub fn setting(&self, name: &str) -> Option<String> {
        self.fields.get_str(name)
    }
}

/// The status and header lines of a response (a `Head` frame).
///
/// The payload is a big-endian `u16` status followed by the header lines as
/// PHP's `headers_list()` gives them (`Name: value`), joined by `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHead {
    pub status: u16,
    /// Header lines split at their first colon, value trimmed, in order.
    pub headers: Vec<(Bytes, Bytes)>,
    /// Lines with no colon, kept so the caller can log them.
    pub invalid: Vec<Bytes>,
}

impl ResponseHead {
    pub fn decode(payload: &Bytes) -> Result<ResponseHead, Error> {
        if payload.len() < 2 {
            return Err(Error::malformed("head: shorter than its status"));
        }
        let status = u16::from_be_bytes([payload[0], payload[1]]);
        let mut headers = Vec::new();
        let mut invalid = Vec::new();
        let lines = payload.slice(2..);
        let mut start = 0;
        while start < lines.len() {
            let end = memchr(b'\n', &lines[start..]).map_or(lines.len(), |i| start + i);
            let line = &lines[start..end];
            if !line.is_empty() {
                match memchr(b':', line) {
                    Some(colon) if colon > 0 => {
                        let name = trim(&lines, start, start + colon);
                        let value = trim(&lines, start + colon + 1, end);
                        headers.push((name, value));
                    }
                    _ => invalid.push(lines.slice(start..end)),
                }
            }
            start = end + 1;
        }
        Ok(ResponseHead {
            status,
            headers,
            invalid,
        })
    }

    /// Encodes a head the way the PHP library does; used by tests and tools.
    pub fn encode(status: u16, lines: &[&str], dst: &mut BytesMut) {
        dst.put_u16(status);
        for (i, line) in lines.iter().enumerate() {
            if i > 0 {
                dst.put_u8(b'\n');
            }
            dst.put_slice(line.as_bytes());
        }
    }
}

/// A failure a worker reports for the log: an uncaught exception, a fatal
/// error, a failed boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorReport {
    pub fields: Fields,
}

impl ErrorReport {
    pub fn decode(payload: &Bytes) -> Result<ErrorReport, Error> {
        Ok(ErrorReport {
            fields: Fields::decode(payload)?,
        })
    }

    /// Text of a field, empty when absent.
    pub fn field(&self, name: &str) -> String {
        self.fields.get_str(name).unwrap_or_default()
    }

    /// Encodes a report; used by tests and tools.
    pub fn encode(entries: &[(&str, &str)], dst: &mut BytesMut) {
        for (k, v) in entries {
            fields::put(dst, k, v.as_bytes());
        }
    }
}

/// What a worker reports on itself in the final `End` of a request (one
/// with [`crate::flags::REPORT`]).
///
/// `memory` is measured when the previous request (or, for the first
/// request, the boot) had been cleaned up, so the growth of one request is
/// the difference between the reports of the next `End` and its own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndReport {
    /// `memory_get_usage()` of the worker after the previous request's
    /// cleanup, in bytes.
    pub memory: Option<u64>,
    /// The route name the app gave this request (`Hearth\route_name()`),
    /// if it gave one.
    pub route: Option<Bytes>,
}

impl EndReport {
    /// Decodes the payload of an `End` with the `REPORT` flag. Unknown
    /// fields are skipped; a `memory` that is not a decimal number counts
    /// as absent. Reads the entries in place, without building a
    /// [`Fields`], since this runs once per request.
    pub fn decode(payload: &Bytes) -> Result<EndReport, Error> {
        let mut report = EndReport::default();
        let (mut memory_seen, mut route_seen) = (false, false);
        let data = &payload[..];
        let mut at = 0usize;
        while at < data.len() {
            let klen = data
                .get(at..at + 2)
                .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
                .ok_or(Error::malformed("end report: truncated field key length"))?;
            at += 2;
            let key = data
                .get(at..at + klen)
                .ok_or(Error::malformed("end report: truncated field key"))?;
            at += klen;
            let vlen = data
                .get(at..at + 4)
                .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
                .ok_or(Error::malformed("end report: truncated field value length"))?;
            at += 4;
            if data.len() - at < vlen {
                return Err(Error::malformed("end report: truncated field value"));
            }
            let value = &data[at..at + vlen];
            match key {
                b"memory" if !memory_seen => {
                    memory_seen = true;
                    report.memory = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
                }
                b"route" if !route_seen => {
                    route_seen = true;
                    report.route = Some(payload.slice(at..at + vlen));
                }
                _ => {}
            }
            at += vlen;
        }
        Ok(report)
    }

    /// Encodes a report; used by tests and tools.
    pub fn encode(&self, dst: &mut BytesMut) {
        if let Some(memory) = self.memory {
            fields::put(dst, "memory", memory.to_string().as_bytes());
        }
        if let Some(route) = &self.route {
            fields::put(dst, "route", route);
        }
    }
}

fn memchr(needle: u8, haystack: &[u8]) -> Option<usize> {
    haystack.iter().position(|&b| b == needle)
}

/// The sub-slice `from..to` of `bytes` without surrounding spaces or tabs.
fn trim(bytes: &Bytes, mut from: usize, mut to: usize) -> Bytes {
    while from < to && matches!(bytes[from], b' ' | b'\t') {
        from += 1;
    }
    while to > from && matches!(bytes[to - 1], b' ' | b'\t' | b'\r') {
        to -= 1;
    }
    bytes.slice(from..to)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn end_reports_read_memory_and_route_and_skip_the_rest() {
        let mut buf = BytesMut::new();
        fields::put(&mut buf, "future", b"x");
        fields::put(&mut buf, "memory", b"2097152");
        fields::put(&mut buf, "route", b"users.show");
        fields::put(&mut buf, "memory", b"1");
        let report = EndReport::decode(&buf.freeze()).expect("decodes");
        assert_eq!(report.memory, Some(2_097_152), "the first entry counts");
        assert_eq!(report.route.as_deref(), Some(&b"users.show"[..]));

        let empty = EndReport::decode(&Bytes::new()).expect("an empty report");
        assert_eq!(empty, EndReport::default());

        let mut bad = BytesMut::new();
        fields::put(&mut bad, "memory", b"lots");
        assert_eq!(
            EndReport::decode(&bad.freeze()).expect("decodes").memory,
            None
        );

        let mut round = BytesMut::new();
        let report = EndReport {
            memory: Some(42),
            route: Some(Bytes::from_static(b"r")),
        };
        report.encode(&mut round);
        let round = round.freeze();
        assert_eq!(EndReport::decode(&round).expect("decodes"), report);
        // Between the entries ("memory" and its value "42") is a valid,
        // shorter report; a cut anywhere else is refused.
        let between = 2 + "memory".len() + 4 + "42".len();
        for cut in 1..round.len() {
            if cut == between {
                continue;
            }
            assert!(
                EndReport::decode(&round.slice(..cut)).is_err(),
                "cut at {cut} is refused"
            );
        }
    }

    #[test]
    fn head_lines_are_split_at_the_first_colon() {
        let mut buf = BytesMut::new();
        ResponseHead::encode(
            404,
            &[
                "Content-Type: text/plain",
                "Set-Cookie: a=b; path=/",
                "X-Url:http://x/y",
                "nocolon",
                ": novalue-name",
            ],
            &mut buf,
        );
        let head = ResponseHead::decode(&buf.freeze()).unwrap();
        assert_eq!(head.status, 404);
        let pairs: Vec<(&[u8], &[u8])> = head
            .headers
            .iter()
            .map(|(n, v)| (n.as_ref(), v.as_ref()))
            .collect();
        assert_eq!(
            pairs,
            vec![
                (&b"Content-Type"[..], &b"text/plain"[..]),
                (b"Set-Cookie", b"a=b; path=/"),
                (b"X-Url", b"http://x/y"),
            ]
        );
        assert_eq!(head.invalid.len(), 2);
    }

    #[test]
    fn head_without_headers() {
        let head = ResponseHead::decode(&Bytes::from_static(&[0, 200])).unwrap();
        assert_eq!(head.status, 200);
        assert!(head.headers.is_empty());
        assert!(ResponseHead::decode(&Bytes::from_static(&[1]))
            .unwrap_err()
            .is_malformed());
    }

    #[test]
    fn ready_requires_pid_and_protocol() {
        let mut buf = BytesMut::new();
        fields::put(&mut buf, "pid", b"1234");
        fields::put(&mut buf, "protocol", b"1");
        fields::put(&mut buf, "php_version", b"8.2.36");
        fields::put(&mut buf, "post_max_size", b"8M");
        let ready = Ready::decode(&buf.clone().freeze()).unwrap();
        assert_eq!(ready.pid, 1234);
        assert_eq!(ready.protocol, 1);
        assert_eq!(ready.php_version, "8.2.36");
        assert_eq!(ready.setting("post_max_size").as_deref(), Some("8M"));

        let mut no_pid = BytesMut::new();
        fields::put(&mut no_pid, "protocol", b"1");
        assert!(Ready::decode(&no_pid.freeze()).unwrap_err().is_malformed());
    }
}
