//! Where each request on a connection begins and ends, decided strictly
//! before hyper sees a byte of it.
//!
//! hyper accepts a few things that make the framing of a request ambiguous
//! (`Content-Length` together with `Transfer-Encoding`, lines ending in a
//! bare LF, `Transfer-Encoding: gzip, chunked`), and its size limits are
//! coarse. A front end that disagrees with a back end about where a
//! request ends is how requests get smuggled, so Hearth follows the
//! framing of every message itself: the [`Framer`] holds a request head
//! back until it is complete and valid, lets body bytes through as they
//! come while following `Content-Length` or chunked framing, and refuses
//! anything ambiguous. After a refusal nothing more from the connection is
//! released, so a request pipelined behind a bad one never reaches a
//! worker.
//!
//! No I/O here: the caller feeds bytes and acts on the [`Step`]s.

use http::StatusCode;

use crate::target;

/// Limits on a request head.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Longest request line, without its CRLF: 414 beyond it.
    pub request_line: usize,
    /// Largest header section (every header line, CRLFs included): 431.
    pub header_size: usize,
    /// Most header lines: 431.
    pub headers: usize,
}

/// Longest chunk-size line (size and extensions) in a chunked body.
const MAX_CHUNK_LINE: usize = 4096;

/// What the caller may do with the bytes it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// The first `len` bytes may go to hyper; the caller drops them before
    /// the next call. `head` when they end with a complete request head:
    /// where its request target lies in them.
    Release { len: usize, head: Option<Span> },
    /// Nothing can be released until more bytes arrive.
    Incomplete,
}

/// A range of the released bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub start: usize,
    pub end: usize,
}

/// A request refused; the connection goes no further.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub status: StatusCode,
    pub why: &'static str,
    /// In a head (no request has started: the refusal is the response) or
    /// in a body (the request has started and answers it).
    pub in_head: bool,
}

/// Where the connection is between and within messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Waiting for, or inside, a request head.
    Head,
    /// Inside a request body.
    Body,
    /// After a refusal.
    Closed,
}

#[derive(Debug)]
enum State {
    Head(Head),
    /// Bytes of a Content-Length body still to come.
    Fixed(u64),
    ChunkSize,
    /// Bytes of chunk data still to come.
    ChunkData(u64),
    /// The CRLF after chunk data.
    ChunkEnd,
    /// Trailer lines after the last chunk; bytes seen so far.
    Trailer(usize),
    Closed,
}

/// A head being checked. Offsets are from the start of the caller's bytes,
/// which all belong to this head (nothing of it is released early).
#[derive(Debug, Default)]
struct Head {
    /// Bytes of complete lines already checked.
    checked: usize,
    /// Bytes of the current line already searched for its LF.
    searched: usize,
    request_line: bool,
    /// Where the request target is.
    target: Option<Span>,
    http10: bool,
    header_bytes: usize,
    headers: usize,
    content_length: Option<u64>,
    transfer_encoding: bool,
    host: bool,
}

/// Follows the framing of the requests on one connection.
#[derive(Debug)]
pub(crate) struct Framer {
    limits: Limits,
    state: State,
}

fn refuse<T>(status: StatusCode, why: &'static str, in_head: bool) -> Result<T, Refusal> {
    Err(Refusal {
        status,
        why,
        in_head,
    })
}

fn bad_head<T>(why: &'static str) -> Result<T, Refusal> {
    refuse(StatusCode::BAD_REQUEST, why, true)
}

fn bad_body<T>(why: &'static str) -> Result<T, Refusal> {
    refuse(StatusCode::BAD_REQUEST, why, false)
}

/// RFC 9110 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn is_ows(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = s {
        if !is_ows(*first) {
            break;
        }
        s = rest;
    }
    while let [rest @ .., last] = s {
        if !is_ows(*last) {
            break;
        }
        s = rest;
    }
    s
}

/// Finds the LF ending the line that starts at `buf[0]`, searching from
/// `from`; returns the line without its CRLF. A bare LF or CR is an error.
fn line_end(buf: &[u8], from: usize) -> Option<usize> {
    buf[from..]
        .iter()
        .position(|&b| b == b'\n')
        .map(|i| from + i)
}

fn crlf_line(buf: &[u8], lf: usize) -> Option<&[u8]> {
    if lf == 0 || buf[lf - 1] != b'\r' {
        return None;
    }
    let line = &buf[..lf - 1];
    (!line.contains(&b'\r')).then_some(line)
}

/// A header or trailer line: no folding, a token name right before the
/// colon, no control characters (HTAB aside) in the value. Returns the
/// name and the trimmed value.
fn field(line: &[u8], in_head: bool) -> Result<(&[u8], &[u8]), Refusal> {
    if line.first().copied().is_some_and(is_ows) {
        return refuse(
            StatusCode::BAD_REQUEST,
            "folded header line (obs-fold)",
            in_head,
        );
    }
    let Some(colon) = line.iter().position(|&b| b == b':') else {
        return refuse(
            StatusCode::BAD_REQUEST,
            "header line without a colon",
            in_head,
        );
    };
    let name = &line[..colon];
    if name.is_empty() || !name.iter().all(|&b| is_tchar(b)) {
        return refuse(StatusCode::BAD_REQUEST, "invalid header name", in_head);
    }
    let value = trim_ows(&line[colon + 1..]);
    if value.iter().any(|&b| (b < 0x20 && b != b'\t') || b == 0x7f) {
        return refuse(
            StatusCode::BAD_REQUEST,
            "control character in a header value",
            in_head,
        );
    }
    Ok((name, value))
}

impl Framer {
    pub fn new(limits: Limits) -> Framer {
        Framer {
            limits,
            state: State::Head(Head::default()),
        }
    }

    pub fn phase(&self) -> Phase {
        match self.state {
            State::Head(_) => Phase::Head,
            State::Closed => Phase::Closed,
            _ => Phase::Body,
        }
    }

    /// Looks at the bytes not yet released (`buf`, starting where the last
    /// release ended) and says what may go to hyper. After a refusal every
    /// later call is `Incomplete`.
    pub fn step(&mut self, buf: &[u8]) -> Result<Step, Refusal> {
        let step = self.advance(buf);
        if step.is_err() {
            self.state = State::Closed;
        }
        step
    }

    fn advance(&mut self, buf: &[u8]) -> Result<Step, Refusal> {
        if buf.is_empty() {
            return Ok(Step::Incomplete);
        }
        let release = |len| Ok(Step::Release { len, head: None });
        match &mut self.state {
            State::Closed => Ok(Step::Incomplete),
            State::Head(_) => self.head(buf),
            State::Fixed(left) => {
                let len = (*left).min(buf.len() as u64);
                *left -= len;
                if *left == 0 {
                    self.state = State::Head(Head::default());
                }
                release(len as usize)
            }
            State::ChunkData(left) => {
                let len = (*left).min(buf.len() as u64);
                *left -= len;
                if *left == 0 {
                    self.state = State::ChunkEnd;
                }
                release(len as usize)
            }
            State::ChunkEnd => match buf {
                [b'\r', b'\n', ..] => {
                    self.state = State::ChunkSize;
                    release(2)
                }
                [b'\r'] => Ok(Step::Incomplete),
                _ => bad_body("chunk data longer than its size"),
            },
            State::ChunkSize => {
                let Some(lf) = line_end(buf, 0) else {
                    if buf.len() > MAX_CHUNK_LINE {
                        return bad_body("chunk size line too long");
                    }
                    return Ok(Step::Incomplete);
                };
                if lf > MAX_CHUNK_LINE {
                    return bad_body("chunk size line too long");
                }
                let Some(line) = crlf_line(buf, lf) else {
                    return bad_body("chunk size line not ending in CRLF");
                };
                let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
                if digits == 0 {
                    return bad_body("invalid chunk size");
                }
                let mut size: u64 = 0;
                for &b in &line[..digits] {
                    let d = (b as char).to_digit(16).unwrap_or(0) as u64;
                    size = match size.checked_mul(16).and_then(|s| s.checked_add(d)) {
                        Some(s) => s,
                        None => return bad_body("chunk size overflows"),
                    };
                }
                let rest = &line[digits..];
                let ext = &rest[rest.iter().take_while(|&&b| is_ows(b)).count()..];
                if !(ext.is_empty()
                    || (ext[0] == b';'
                        && !ext.iter().any(|&b| (b < 0x20 && b != b'\t') || b == 0x7f)))
                {
                    return bad_body("invalid chunk size");
                }
                self.state = if size == 0 {
                    State::Trailer(0)
                } else {
                    State::ChunkData(size)
                };
                release(lf + 1)
            }
            State::Trailer(seen) => {
                let Some(lf) = line_end(buf, 0) else {
                    if *seen + buf.len() > self.limits.header_size {
                        return bad_body("trailer section too large");
                    }
                    return Ok(Step::Incomplete);
                };
                *seen += lf + 1;
                if *seen > self.limits.header_size {
                    return bad_body("trailer section too large");
                }
                let Some(line) = crlf_line(buf, lf) else {
                    return bad_body("trailer line not ending in CRLF");
                };
                if line.is_empty() {
                    self.state = State::Head(Head::default());
                } else {
                    field(line, false)?;
                }
                release(lf + 1)
            }
        }
    }

    fn head(&mut self, buf: &[u8]) -> Result<Step, Refusal> {
        let limits = self.limits;
        let State::Head(h) = &mut self.state else {
            return Ok(Step::Incomplete);
        };
        loop {
            let rest = &buf[h.checked..];
            let Some(lf) = line_end(rest, h.searched) else {
                h.searched = rest.len();
                if !h.request_line && rest.len() > limits.request_line + 1 {
                    return refuse(StatusCode::URI_TOO_LONG, "request line too long", true);
                }
                // A lone CR is the start of the empty line that ends the
                // head, which does not count against the limit once
                // complete: nor does it while its LF is still to come, so
                // that the answer does not depend on where reads split.
                let pending = if rest == b"\r" { 0 } else { rest.len() };
                if h.request_line && h.header_bytes + pending > limits.header_size {
                    return refuse(
                        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                        "header section too large",
                        true,
                    );
                }
                return Ok(Step::Incomplete);
            };
            h.searched = 0;
            let Some(line) = crlf_line(rest, lf) else {
                return bad_head("line not ending in CRLF (bare LF or CR)");
            };
            if !h.request_line {
                if line.is_empty() {
                    // RFC 9112 2.2: an empty line before the request line
                    // is ignored, within the request line's budget.
                    if h.checked + lf + 1 > limits.request_line {
                        return bad_head("empty lines before the request line");
                    }
                    h.checked += lf + 1;
                    continue;
                }
                if line.len() > limits.request_line {
                    return refuse(StatusCode::URI_TOO_LONG, "request line too long", true);
                }
                let (http10, target) = request_line(line)?;
                h.http10 = http10;
                h.target = Some(Span {
                    start: h.checked + target.start,
                    end: h.checked + target.end,
                });
                h.request_line = true;
            } else if line.is_empty() {
                if h.transfer_encoding && h.content_length.is_some() {
                    return bad_head("both Content-Length and Transfer-Encoding");
                }
                if h.transfer_encoding && h.http10 {
                    return bad_head("Transfer-Encoding in an HTTP/1.0 request");
                }
                if !h.host && !h.http10 {
                    // RFC 9112 3.2; nginx answers 400 too.
                    return bad_head("HTTP/1.1 request without Host");
                }
                let len = h.checked + lf + 1;
                let target = h.target;
                self.state = if h.transfer_encoding {
                    State::ChunkSize
                } else {
                    match h.content_length {
                        Some(n) if n > 0 => State::Fixed(n),
                        _ => State::Head(Head::default()),
                    }
                };
                return Ok(Step::Release { len, head: target });
            } else {
                h.header_bytes += lf + 1;
                h.headers += 1;
                if h.header_bytes > limits.header_size {
                    return refuse(
                        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                        "header section too large",
                        true,
                    );
                }
                if h.headers > limits.headers {
                    return refuse(
                        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                        "too many header lines",
                        true,
                    );
                }
                let (name, value) = field(line, true)?;
                if name.eq_ignore_ascii_case(b"content-length") {
                    if h.content_length.is_some() {
                        return bad_head("more than one Content-Length");
                    }
                    h.content_length = Some(content_length(value)?);
                } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
                    if h.transfer_encoding {
                        return bad_head("more than one Transfer-Encoding");
                    }
                    if !value.eq_ignore_ascii_case(b"chunked") {
                        return refuse(
                            StatusCode::NOT_IMPLEMENTED,
                            "Transfer-Encoding other than chunked",
                            true,
                        );
                    }
                    h.transfer_encoding = true;
                } else if name.eq_ignore_ascii_case(b"host") {
                    if h.host {
                        return bad_head("more than one Host");
                    }
                    h.host = true;
                }
            }
            h.checked += lf + 1;
        }
    }
}

/// `method SP request-target SP HTTP-version`; returns whether it is
/// HTTP/1.0, and where the target is in the line.
fn request_line(line: &[u8]) -> Result<(bool, Span), Refusal> {
    let mut parts = line.split(|&b| b == b' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return bad_head("malformed request line");
    };
    if method.is_empty() || !method.iter().all(|&b| is_tchar(b)) {
        return bad_head("invalid method");
    }
    // Any byte but controls, spaces and DEL, as nginx.
    if target.iter().any(|&b| b <= b' ' || b == 0x7f) {
        return bad_head("invalid request target");
    }
    let http10 = match version {
        b"HTTP/1.1" => false,
        b"HTTP/1.0" => true,
        [b'H', b'T', b'T', b'P', b'/', major, b'.', minor]
            if major.is_ascii_digit() && minor.is_ascii_digit() && *major != b'1' =>
        {
            return refuse(
                StatusCode::HTTP_VERSION_NOT_SUPPORTED,
                "unsupported HTTP version",
                true,
            );
        }
        _ => return bad_head("invalid HTTP version"),
    };
    // A path or an absolute URL (after the version, so that an HTTP/2
    // preface, `PRI * HTTP/2.0`, is told it has the wrong version).
    if !target::has_valid_form(target) {
        return bad_head("invalid request target");
    }
    let at = method.len() + 1;
    Ok((
        http10,
        Span {
            start: at,
            end: at + target.len(),
        },
    ))
}

/// `1*DIGIT`, nothing else: no sign, no list, no overflow.
fn content_length(value: &[u8]) -> Result<u64, Refusal> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return bad_head("invalid Content-Length");
    }
    let mut n: u64 = 0;
    for &d in value {
        n = match n
            .checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(d - b'0')))
        {
            Some(n) => n,
            None => return bad_head("invalid Content-Length"),
        };
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        request_line: 64,
        header_size: 128,
        headers: 4,
    };

    /// Released pieces; a head comes with its request target.
    type Pieces = Vec<(Vec<u8>, Option<Vec<u8>>)>;

    /// Feeds `input` in pieces cut at `cuts`, releasing as the caller
    /// would; returns the released pieces and the refusal.
    fn run(input: &[u8], cuts: &[usize]) -> (Pieces, Option<Refusal>) {
        let mut framer = Framer::new(LIMITS);
        let mut held: Vec<u8> = Vec::new();
        let mut out: Pieces = Vec::new();
        let mut at = 0;
        let mut bounds: Vec<usize> = cuts.to_vec();
        bounds.push(input.len());
        for end in bounds {
            held.extend_from_slice(&input[at..end]);
            at = end;
            loop {
                match framer.step(&held) {
                    Ok(Step::Release { len, head }) => {
                        assert!(len > 0, "empty release");
                        let piece: Vec<u8> = held.drain(..len).collect();
                        let target = head.map(|t| piece[t.start..t.end].to_vec());
                        // Merge body pieces so that cut points do not show.
                        match out.last_mut() {
                            Some((last, None)) if target.is_none() => {
                                last.extend_from_slice(&piece)
                            }
                            _ => out.push((piece, target)),
                        }
                    }
                    Ok(Step::Incomplete) => break,
                    Err(refusal) => return (out, Some(refusal)),
                }
            }
        }
        (out, None)
    }

    /// The same outcome whole and cut at every byte offset.
    fn check(input: &[u8]) -> (Pieces, Option<Refusal>) {
        let whole = run(input, &[]);
        for cut in 1..input.len() {
            assert_eq!(run(input, &[cut]), whole, "cut at {cut}");
        }
        let every: Vec<usize> = (1..input.len()).collect();
        assert_eq!(run(input, &every), whole, "byte by byte");
        whole
    }

    fn status(input: &[u8]) -> Option<u16> {
        check(input).1.map(|r| r.status.as_u16())
    }

    /// Found by the framing fuzz target: a header section of exactly the
    /// limit was accepted when its end came in one read and refused (431)
    /// when the CR of the empty line came before its LF.
    #[test]
    fn a_header_section_at_the_limit_is_accepted_however_it_is_cut() {
        let mut head = b"GET / HTTP/1.1\r\nHost: x\r\n".to_vec();
        let filler = LIMITS.header_size - b"Host: x\r\n".len() - b"X: \r\n".len();
        head.extend_from_slice(b"X: ");
        head.extend(std::iter::repeat_n(b'a', filler));
        head.extend_from_slice(b"\r\n\r\n");
        assert_eq!(status(&head), None, "exactly the limit");
        let mut over = head.clone();
        over.insert(over.len() - 4, b'a');
        assert_eq!(status(&over), Some(431), "one byte over");
    }

    #[test]
    fn pipelined_requests_are_split_where_they_end() {
        let input = b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc\
GET /b HTTP/1.1\r\nHost: x\r\n\r\n\
POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nxyz\r\n0\r\nX-T: 1\r\n\r\n\
GET /d HTTP/1.0\r\n\r\n";
        let (out, refusal) = check(input);
        assert_eq!(refusal, None);
        let targets: Vec<&[u8]> = out.iter().filter_map(|(_, t)| t.as_deref()).collect();
        assert_eq!(targets, [&b"/a"[..], b"/b", b"/c", b"/d"], "{out:?}");
        assert_eq!(out.concat_bytes(), input.to_vec());
    }

    trait Concat {
        fn concat_bytes(&self) -> Vec<u8>;
    }
    impl Concat for Pieces {
        fn concat_bytes(&self) -> Vec<u8> {
            self.iter().flat_map(|(p, _)| p.clone()).collect()
        }
    }

    #[test]
    fn ambiguous_or_malformed_heads_are_refused() {
        let cases: &[(&[u8], u16)] = &[
            (
                b"POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
                400,
            ),
            (
                b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
                400,
            ),
            (b"POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n", 400),
            (b"POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\n", 400),
            (b"POST / HTTP/1.1\r\nContent-Length: 1, 2\r\n\r\n", 400),
            (b"POST / HTTP/1.1\r\nContent-Length: \r\n\r\n", 400),
            (b"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n", 400),
            (b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501),
            (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
            (b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nX-A: a\r\n folded\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nX-A: a\0b\r\n\r\n", 400),
            (b"GET / HTTP/1.1\nHost: x\n\n", 400),
            (b"GET / HTTP/1.1\r\nHost: x\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nX-A: a\rb\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nNoColon\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
            (b"GET /  HTTP/1.1\r\n\r\n", 400),
            (b"GET /\r\n\r\n", 400),
            (b"G(T / HTTP/1.1\r\n\r\n", 400),
            (b"GET / HTTP/2.0\r\n\r\n", 505),
            (b"GET / HTTP/1.2x\r\n\r\n", 400),
            (b"GET /a\x01 HTTP/1.1\r\nHost: x\r\n\r\n", 400),
            (b"GET /a\x7f HTTP/1.1\r\nHost: x\r\n\r\n", 400),
            (b"GET * HTTP/1.1\r\nHost: x\r\n\r\n", 400),
            (b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", 400),
            (b"GET x HTTP/1.1\r\nHost: x\r\n\r\n", 400),
            (b"GET x:80 HTTP/1.1\r\nHost: x\r\n\r\n", 400),
            (b"GET /aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa HTTP/1.1\r\n\r\n", 414),
            (b"GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\nE: 5\r\n\r\n", 431),
            (b"GET / HTTP/1.1\r\nA: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n", 431),
        ];
        for (input, expected) in cases {
            let (out, refusal) = check(input);
            assert_eq!(
                refusal.map(|r| r.status.as_u16()),
                Some(*expected),
                "{:?}",
                String::from_utf8_lossy(input)
            );
            // Refused for what the case is about, not for a missing Host.
            assert_ne!(
                refusal.map(|r| r.why),
                Some("HTTP/1.1 request without Host"),
                "{:?}",
                String::from_utf8_lossy(input)
            );
            assert!(out.is_empty(), "nothing of a refused head is released");
        }
    }

    #[test]
    fn limits_refuse_before_the_line_ends() {
        // A request line that never ends is refused once it is too long,
        // not held until its LF.
        let mut framer = Framer::new(LIMITS);
        let line = [b'a'; 70];
        assert_eq!(framer.step(&line).map_err(|r| r.status.as_u16()), Err(414));
        let mut framer = Framer::new(LIMITS);
        let mut head = b"GET / HTTP/1.1\r\nX: ".to_vec();
        head.extend_from_slice(&[b'v'; 200]);
        assert_eq!(framer.step(&head).map_err(|r| r.status.as_u16()), Err(431));
    }

    #[test]
    fn bad_chunked_bodies_are_refused_after_the_head() {
        let head = b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        let bodies: &[&[u8]] = &[
            b"ffffffffffffffffff\r\n",
            b"zz\r\n",
            b"\r\n",
            b"3\nabc\r\n0\r\n\r\n",
            b"3\r\nabcd\r\n0\r\n\r\n",
            b"3 x\r\nabc\r\n0\r\n\r\n",
            b"3\r\nabc\r\n0\r\nX-T: a\0\r\n\r\n",
            b"3\r\nabc\r\n0\r\n folded\r\n\r\n",
        ];
        for body in bodies {
            let input = [&head[..], body].concat();
            let (out, refusal) = check(&input);
            let refusal = refusal.unwrap_or_else(|| panic!("{:?} accepted", body));
            assert_eq!(refusal.status, StatusCode::BAD_REQUEST);
            assert!(!refusal.in_head);
            assert_eq!(out[0], (head.clone(), Some(b"/".to_vec())));
        }
        // A size that just fits is fine as far as framing goes.
        let input = [&head[..], b"fffffffffffffff\r\n"].concat();
        assert_eq!(status(&input), None);
    }

    #[test]
    fn nothing_after_a_refusal_is_released() {
        let mut framer = Framer::new(LIMITS);
        let bad = b"GET / HTTP/1.1\nGET /next HTTP/1.1\r\n\r\n";
        assert!(framer.step(bad).is_err());
        assert_eq!(framer.step(b"GET / HTTP/1.1\r\n\r\n"), Ok(Step::Incomplete));
        assert_eq!(framer.phase(), Phase::Closed);
    }

    #[test]
    fn leading_empty_lines_are_allowed() {
        let (out, refusal) = check(b"\r\nGET /a HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(refusal, None);
        assert_eq!(out[0].1.as_deref(), Some(&b"/a"[..]));
    }

    /// Issue 8 (6): HTTP/1.1 needs a Host; HTTP/1.0 does not.
    #[test]
    fn an_http11_head_without_host_is_refused() {
        let (_, refusal) = check(b"GET / HTTP/1.1\r\nX-A: 1\r\n\r\n");
        assert_eq!(
            refusal.map(|r| (r.status.as_u16(), r.why)),
            Some((400, "HTTP/1.1 request without Host"))
        );
        assert_eq!(status(b"GET / HTTP/1.0\r\n\r\n"), None);
        assert_eq!(status(b"GET / HTTP/1.1\r\nhOsT: \r\n\r\n"), None);
    }

    /// Issue 8 (3): the bytes nginx takes in a target pass the framer, and
    /// the head says where the target is.
    #[test]
    fn targets_with_any_visible_byte_pass() {
        let target = b"/p\"{}|<>^`\\\x80\xff?q=\"{}|<>^`\\\xe9#f".to_vec();
        let input = [&b"GET "[..], &target, b" HTTP/1.1\r\nHost: x\r\n\r\n"].concat();
        let (out, refusal) = check(&input);
        assert_eq!(refusal, None);
        assert_eq!(out[0].1, Some(target));
    }
}
