//! Turning a worker's response frames into an HTTP response.
//!
//! The worker's frames are read as fast as the worker writes them, never
//! at the client's pace: a response that is not small, or that the app
//! streams, goes through a spool (memory, then a temporary file, see
//! [`sendbuf`](crate::sendbuf)), and the worker goes back to the pool as
//! soon as it has finished. A client that reads slowly, or not at all,
//! costs disk space for `--send-timeout` at most, never a worker.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use futures_util::Stream;
use hearth_pool::{Error as PoolError, Lease};
use hearth_proto::message::ResponseHead;
use hearth_proto::{flags, Frame, Kind};
use http::header::{HeaderName, HeaderValue};
use http::{HeaderMap, Method, Response, StatusCode};
use http_body_util::Full;
use hyper::body::{Body, Frame as BodyFrame, SizeHint};
use tokio::io::AsyncRead;
use tokio::time::Instant;
use tokio_util::io::ReaderStream;

use crate::file_body::FileBody;
use crate::guard;
use crate::sendbuf::{self, Held, Limits, PushError};

/// The body of a response: whole when the worker produced it at once and
/// it is small, spooled when it is large or the app flushed output along
/// the way.
#[derive(Debug)]
pub enum ResponseBody {
    Full(Full<Bytes>),
    /// A whole body held in memory against the responses' memory budget,
    /// given back when the body is dropped. It is handed to hyper chunk by
    /// chunk, so that the rest stays here, counted, while the client is
    /// slow to take it.
    Charged(Held),
    /// Read from the worker into memory and a temporary file as fast as
    /// the worker writes it; handed to the client as it takes it.
    Spooled(sendbuf::Reader),
    /// Read chunk by chunk from a file or through a compressor, so large
    /// files never sit in memory whole.
    Reader(ReaderBody),
    /// A file, or one range of it, sent by the kernel (sendfile) where the
    /// connection allows it, else read chunk by chunk.
    File(FileBody),
}

/// A body read from an [`AsyncRead`](tokio::io::AsyncRead) (a static file,
/// possibly through an encoder).
pub struct ReaderBody {
    stream: ReaderStream<Pin<Box<dyn AsyncRead + Send>>>,
    /// The length, when known in advance (an uncompressed file).
    len: Option<u64>,
}

impl ReaderBody {
    /// Reads in chunks of at most 64 KiB; `len` is the length if known.
    pub(crate) fn new(reader: impl AsyncRead + Send + 'static, len: Option<u64>) -> ReaderBody {
        let reader: Pin<Box<dyn AsyncRead + Send>> = Box::pin(reader);
        ReaderBody {
            stream: ReaderStream::with_capacity(reader, 64 << 10),
            len,
        }
    }
}

impl Body for ReaderBody {
    type Data = Bytes;
    type Error = StreamError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<BodyFrame<Bytes>, StreamError>>> {
        Pin::new(&mut self.get_mut().stream)
            .poll_next(cx)
            .map(|chunk| {
                chunk.map(|r| {
                    r.map(BodyFrame::data)
                        .map_err(|e| StreamError(e.to_string()))
                })
            })
    }

    fn is_end_stream(&self) -> bool {
        self.len == Some(0)
    }

    fn size_hint(&self) -> SizeHint {
        match self.len {
            Some(n) => SizeHint::with_exact(n),
            None => SizeHint::default(),
        }
    }
}

impl std::fmt::Debug for ReaderBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReaderBody")
    }
}

impl ResponseBody {
    pub fn full(bytes: impl Into<Bytes>) -> ResponseBody {
        ResponseBody::Full(Full::new(bytes.into()))
    }

    pub fn empty() -> ResponseBody {
        ResponseBody::Full(Full::new(Bytes::new()))
    }
}

/// The worker failed after the response had started; the connection is
/// closed so the client sees a truncated response, not a complete one.
#[derive(Debug)]
pub struct StreamError(String);

impl std::fmt::Display for StreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StreamError {}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = StreamError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<BodyFrame<Bytes>, StreamError>>> {
        match self.get_mut() {
            ResponseBody::Full(full) => Pin::new(full)
                .poll_frame(cx)
                .map_err(|never| match never {}),
            ResponseBody::Charged(held) => {
                Poll::Ready(held.next_chunk().map(|c| Ok(BodyFrame::data(c))))
            }
            ResponseBody::Spooled(spool) => spool
                .poll_chunk(cx)
                .map(|chunk| chunk.map(|r| r.map(BodyFrame::data).map_err(StreamError))),
            ResponseBody::Reader(reader) => Pin::new(reader).poll_frame(cx),
            ResponseBody::File(file) => Pin::new(file)
                .poll_frame(cx)
                .map_err(|e| StreamError(e.to_string())),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ResponseBody::Full(full) => full.is_end_stream(),
            ResponseBody::Charged(held) => held.remaining() == 0,
            ResponseBody::Reader(reader) => reader.is_end_stream(),
            ResponseBody::File(file) => file.is_end_stream(),
            ResponseBody::Spooled(spool) => spool.len() == Some(0),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ResponseBody::Full(full) => full.size_hint(),
            ResponseBody::Charged(held) => SizeHint::with_exact(held.remaining() as u64),
            ResponseBody::Reader(reader) => reader.size_hint(),
            ResponseBody::File(file) => file.size_hint(),
            ResponseBody::Spooled(spool) => match spool.len() {
                Some(n) => SizeHint::with_exact(n),
                None => SizeHint::default(),
            },
        }
    }
}

/// The largest response head (status and header lines) taken from a
/// worker, in bytes; a larger one is answered with 502, as nginx answers
/// "upstream sent too big header" past its `fastcgi_buffer_size` (4k or
/// 8k). This is sixteen times that, and keeps the number of headers well
/// under what one response can hold (32,768 in `http`'s `HeaderMap`,
/// which panics past it).
pub(crate) const MAX_RESPONSE_HEAD: usize = 64 << 10;

/// Something to keep alive until the response has been produced in full
/// (the request's uploaded files).
pub(crate) type Keep = Box<dyn Send + 'static>;

/// Where a response's interim heads (103 Early Hints) go.
#[derive(Debug)]
pub(crate) enum Interim<'a> {
    /// Nowhere: an HTTP/1.0 client does not expect one.
    Dropped,
    /// Written on the HTTP/1.1 connection's socket, between responses.
    Http1(&'a guard::Shared),
    /// Sent on the request's HTTP/2 stream.
    Http2(hyper::ext::InformationalSender),
}

/// How a worker's response is read: its time limit, and where it waits
/// for its client.
#[derive(Debug)]
pub(crate) struct Reading<'a> {
    /// When the request's time is up (`--request-timeout`): waiting on a
    /// client whose response fills memory and disk counts against it too.
    pub deadline: Option<Instant>,
    /// Where interim responses (103 Early Hints) go.
    pub interim: Interim<'a>,
    pub limits: &'a Limits,
    /// Most bytes handed to hyper at once.
    pub chunk: usize,
}

/// Reads the worker's response and builds the HTTP response.
///
/// Before the head arrives, a worker failure is an error for the caller to
/// answer (502); after it, the body stream is cut. `keep` is dropped once
/// the worker is done with the request.
pub(crate) async fn read(
    mut lease: Lease,
    method: &Method,
    keep: Keep,
    mut how: Reading<'_>,
) -> Result<Response<ResponseBody>, PoolError> {
    let mut head_frame = lease.next().await?;
    let mut interim = 0;
    while head_frame.kind == Kind::Head && head_frame.has_flag(flags::INTERIM) {
        interim += 1;
        early_hints(&head_frame, interim, &mut how.interim, lease.pid()).await?;
        head_frame = lease.next().await?;
    }
    if head_frame.kind != Kind::Head {
        lease.poison();
        return Err(PoolError::from(hearth_proto::Error::unexpected(
            "response frame before the head",
        )));
    }
    if head_frame.payload.len() > MAX_RESPONSE_HEAD {
        // The worker is sound: dropping the lease drains the rest of the
        // response, and it serves on.
        return Err(PoolError::from(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "the worker sent too big a response head ({} bytes of status and header \
                 lines, at most {MAX_RESPONSE_HEAD}; nginx: \"upstream sent too big header\")",
                head_frame.payload.len()
            ),
        )));
    }
    let head = ResponseHead::decode(&head_frame.payload).inspect_err(|_| lease.poison())?;
    let pid = lease.pid();
    let mut response = Response::new(ResponseBody::empty());
    let status = apply_head(head, method, &mut response, pid);
    *response.status_mut() = status;

    if head_frame.has_flag(flags::STREAM) {
        let (writer, reader) = sendbuf::spool(how.limits.clone(), None, how.chunk);
        tokio::spawn(pump(lease, writer, keep, how.deadline));
        *response.body_mut() = ResponseBody::Spooled(reader);
        return Ok(response);
    }
    // The whole body and the end follow the head without waiting on the app.
    let mut first: Option<Bytes> = None;
    let mut rest: Option<BytesMut> = None;
    loop {
        let frame = match lease.next_buffered()? {
            Some(frame) => frame,
            None => lease.next().await?,
        };
        match frame.kind {
            Kind::Body => match (&mut first, &mut rest) {
                (None, _) => first = Some(frame.payload),
                (Some(f), None) => {
                    let mut joined = BytesMut::with_capacity(f.len() + frame.payload.len());
                    joined.extend_from_slice(f);
                    joined.extend_from_slice(&frame.payload);
                    rest = Some(joined);
                }
                (Some(_), Some(joined)) => joined.extend_from_slice(&frame.payload),
            },
            Kind::End => break,
            _ => {
                lease.poison();
                return Err(PoolError::from(hearth_proto::Error::unexpected(
                    "frame after the head",
                )));
            }
        }
    }
    drop(lease);
    drop(keep);
    let body = match rest {
        Some(joined) => joined.freeze(),
        None => first.unwrap_or_default(),
    };
    // hyper leaves the body out of HEAD responses but announces its length,
    // unless the app announced one itself.
    if !permits_body(status)
        || (method == Method::HEAD
            && response
                .headers()
                .contains_key(http::header::CONTENT_LENGTH))
    {
        return Ok(response);
    }
    *response.body_mut() = match how.limits.hold(body.len()) {
        Some(None) => ResponseBody::full(body),
        Some(Some(charge)) => ResponseBody::Charged(Held::new(body, Some(charge), how.chunk)),
        None => {
            // Too large to hold while the client takes it: spooled, by a
            // task of its own since the client reads at the same time.
            let (mut writer, reader) =
                sendbuf::spool(how.limits.clone(), Some(body.len() as u64), how.chunk);
            tokio::spawn(async move {
                if writer.push(body, None).await.is_ok() {
                    writer.finish(Ok(()));
                }
            });
            ResponseBody::Spooled(reader)
        }
    };
    Ok(response)
}

/// Most interim responses one response may have; later ones are dropped.
/// Browsers act on the first 103 only.
const MAX_INTERIM: usize = 8;

/// Sends the worker's interim head, a 103 with its `Link` lines, to the
/// client ahead of the response, when the connection can take one (see
/// [`Interim`]). Any other interim status, the other lines, and heads
/// past [`MAX_INTERIM`] are dropped: what an early hint may carry is what
/// a browser acts on, and nothing the app meant for its response alone (a
/// cookie) goes out early.
async fn early_hints(
    frame: &Frame,
    index: usize,
    to: &mut Interim<'_>,
    pid: u32,
) -> Result<(), PoolError> {
    let head = ResponseHead::decode(&frame.payload)?;
    if matches!(to, Interim::Dropped) {
        tracing::debug!(pid, "early hints dropped: the client speaks HTTP/1.0");
        return Ok(());
    }
    if head.status != 103 || index > MAX_INTERIM || frame.payload.len() > MAX_RESPONSE_HEAD {
        tracing::debug!(pid, status = head.status, "interim response dropped");
        return Ok(());
    }
    let links: Vec<HeaderValue> = head
        .headers
        .iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case(b"link"))
        .filter_map(|(_, value)| HeaderValue::from_bytes(value).ok())
        .collect();
    if links.is_empty() {
        return Ok(());
    }
    match to {
        Interim::Dropped => Ok(()),
        Interim::Http1(shared) => {
            let mut out = BytesMut::with_capacity(frame.payload.len() + 64);
            out.extend_from_slice(b"HTTP/1.1 103 Early Hints\r\n");
            for link in &links {
                out.extend_from_slice(b"Link: ");
                out.extend_from_slice(link.as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            out.extend_from_slice(b"\r\n");
            match shared.send_interim(&out).await {
                Ok(true) => {}
                Ok(false) => tracing::debug!(
                    pid,
                    "early hints dropped: an earlier response is still being sent"
                ),
                // The client is gone or stalled: the response fails to go
                // out in its turn, and the worker's is read (and dropped)
                // as for any client that went away.
                Err(e) => tracing::debug!(pid, "early hints not sent: {e}"),
            }
            Ok(())
        }
        Interim::Http2(sender) => {
            let mut hints = Response::new(());
            *hints.status_mut() = StatusCode::EARLY_HINTS;
            for link in links {
                hints.headers_mut().append(http::header::LINK, link);
            }
            // It fails only when the stream is gone (the client reset it):
            // the response then fails too, and the worker's is dropped.
            if sender.send(hints).is_err() {
                tracing::debug!(pid, "early hints not sent: the stream is closed");
            }
            Ok(())
        }
    }
}

/// Reads the body frames of a streamed response into its spool, until its
/// end, at the worker's pace. When the client is gone, the rest of the
/// response is read and dropped; when the client takes nothing while the
/// spool is full until the request's deadline, the worker is stopped.
/// Either way the worker's time stays bounded by the deadline.
async fn pump(
    mut lease: Lease,
    mut writer: sendbuf::Writer,
    keep: Keep,
    deadline: Option<Instant>,
) {
    let mut client_gone = false;
    loop {
        match lease.next().await {
            Ok(Frame {
                kind: Kind::Body,
                payload,
                ..
            }) => {
                if client_gone {
                    continue;
                }
                match writer.push(payload, deadline).await {
                    Ok(()) => {}
                    // Read the rest of the response, within the deadline,
                    // so that the worker can serve again.
                    Err(PushError::Gone) => client_gone = true,
                    Err(PushError::TimedOut) => {
                        tracing::warn!(
                            pid = lease.pid(),
                            "response cut: its client took nothing while the response filled \
                             memory and disk until the request timeout; stopping the worker"
                        );
                        lease.terminate();
                        writer.finish(Err("the client took too long".into()));
                        break;
                    }
                }
            }
            Ok(Frame {
                kind: Kind::End, ..
            }) => {
                writer.finish(Ok(()));
                break;
            }
            Ok(_) => {
                lease.poison();
                writer.finish(Err("unexpected frame in a streamed body".into()));
                break;
            }
            Err(e) => {
                tracing::warn!(pid = lease.pid(), "response cut short: {e}");
                writer.finish(Err(e.to_string()));
                break;
            }
        }
    }
    drop(lease);
    drop(keep);
}

fn permits_body(status: StatusCode) -> bool {
    !(status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED)
}

/// Copies the worker's header lines into the response and returns its status.
///
/// A `Status:` header sets the status, as it does behind php-fpm. Framing
/// and hop-by-hop headers are Hearth's business and dropped (a HEAD
/// response keeps the app's Content-Length). Lines that are not valid
/// headers (a CR, LF or NUL, a bad name) are dropped and logged.
pub(crate) fn apply_head(
    head: ResponseHead,
    method: &Method,
    response: &mut Response<ResponseBody>,
    pid: u32,
) -> StatusCode {
    let mut status = StatusCode::from_u16(head.status).unwrap_or_else(|_| {
        tracing::warn!(
            pid,
            "invalid status {} from the app; answering 500",
            head.status
        );
        StatusCode::INTERNAL_SERVER_ERROR
    });
    for line in &head.invalid {
        tracing::warn!(
            pid,
            "dropped a response header line without a name: {:?}",
            String::from_utf8_lossy(line)
        );
    }
    let headers: &mut HeaderMap = response.headers_mut();
    let mut content_type = ContentType::default();
    for (name, value) in head.headers {
        if name.eq_ignore_ascii_case(b"status") {
            match value
                .get(..3)
                .and_then(|d| std::str::from_utf8(d).ok())
                .and_then(|d| d.parse::<u16>().ok())
                .and_then(|c| StatusCode::from_u16(c).ok())
            {
                Some(code) => status = code,
                None => tracing::warn!(
                    pid,
                    "ignored an invalid Status header: {:?}",
                    String::from_utf8_lossy(&value)
                ),
            }
            continue;
        }
        let name = match HeaderName::from_bytes(&name) {
            Ok(name) => name,
            Err(_) => {
                tracing::warn!(
                    pid,
                    "dropped a response header with an invalid name: {:?}",
                    String::from_utf8_lossy(&name)
                );
                continue;
            }
        };
        if is_hop_by_hop(&name) || (name == http::header::CONTENT_LENGTH && method != Method::HEAD)
        {
            continue;
        }
        if name == http::header::CONTENT_TYPE {
            content_type.add(value);
            continue;
        }
        match HeaderValue::from_maybe_shared(value) {
            Ok(value) => {
                headers.append(name, value);
            }
            Err(_) => tracing::warn!(
                pid,
                "dropped response header {name}: its value holds a forbidden byte"
            ),
        }
    }
    // nginx sends no Content-Type with a 304.
    if status != StatusCode::NOT_MODIFIED {
        if let Some(value) = content_type.value() {
            match HeaderValue::from_maybe_shared(value) {
                Ok(value) => {
                    headers.insert(http::header::CONTENT_TYPE, value);
                }
                Err(_) => tracing::warn!(
                    pid,
                    "dropped response header content-type: its value holds a forbidden byte"
                ),
            }
        }
    }
    status
}

/// The Content-Type of a response as nginx makes it of the ones PHP sent
/// (`ngx_http_upstream_copy_content_type()` and the header filter): each
/// one replaces the one before; a `charset=` parameter is remembered
/// across them, and added to a last one without one ("; charset=...");
/// an empty one means none.
#[derive(Default)]
struct ContentType {
    last: Option<Bytes>,
    /// The last one has a charset parameter of its own.
    own_charset: bool,
    charset: Option<Bytes>,
}

impl ContentType {
    fn add(&mut self, value: Bytes) {
        self.own_charset = false;
        if let Some(charset) = charset_of(&value) {
            self.charset = Some(charset);
            self.own_charset = true;
        }
        self.last = Some(value);
    }

    fn value(self) -> Option<Bytes> {
        let last = self.last.filter(|v| !v.trim_ascii().is_empty())?;
        match self.charset {
            Some(charset) if !self.own_charset => {
                let mut value = Vec::with_capacity(last.len() + 10 + charset.len());
                value.extend_from_slice(&last);
                value.extend_from_slice(b"; charset=");
                value.extend_from_slice(&charset);
                Some(Bytes::from(value))
            }
            _ => Some(last),
        }
    }
}

/// The charset parameter of a Content-Type, found as nginx finds it: after
/// a ";" and spaces, "charset=" in any case, without the quotes around it.
fn charset_of(value: &[u8]) -> Option<Bytes> {
    let mut at = 0;
    while let Some(semicolon) = value[at..].iter().position(|&b| b == b';') {
        let mut p = at + semicolon + 1;
        while value.get(p) == Some(&b' ') {
            p += 1;
        }
        let rest = &value[p..];
        if rest.len() >= 8 && rest[..8].eq_ignore_ascii_case(b"charset=") {
            let mut charset = &rest[8..];
            charset = charset.strip_prefix(b"\"").unwrap_or(charset);
            charset = charset.strip_suffix(b"\"").unwrap_or(charset);
            return Some(Bytes::copy_from_slice(charset));
        }
        at = p;
    }
    None
}

fn is_hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "transfer-encoding"
            | "connection"
            | "keep-alive"
            | "upgrade"
            | "proxy-connection"
            | "te"
            | "trailer"
    )
}

/// A response after which the connection is closed.
pub(crate) fn closing(mut response: Response<ResponseBody>) -> Response<ResponseBody> {
    response
        .headers_mut()
        .insert(http::header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// A small HTML error page in the style web servers use.
pub(crate) fn error_page(status: StatusCode) -> Response<ResponseBody> {
    let text = format!(
        "<html>\r\n<head><title>{0}</title></head>\r\n<body>\r\n<center><h1>{0}</h1></center>\r\n<hr><center>hearth</center>\r\n</body>\r\n</html>\r\n",
        status
    );
    let mut response = Response::new(ResponseBody::full(text));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/html"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_are_merged_as_nginx_merges_them() {
        let merged = |values: &[&str]| {
            let mut ct = ContentType::default();
            for v in values {
                ct.add(Bytes::copy_from_slice(v.as_bytes()));
            }
            ct.value().map(|v| String::from_utf8(v.to_vec()).unwrap())
        };
        assert_eq!(
            merged(&["text/plain;charset=UTF-8"]).as_deref(),
            Some("text/plain;charset=UTF-8")
        );
        assert_eq!(
            merged(&["text/plain;charset=UTF-8", "application/json"]).as_deref(),
            Some("application/json; charset=UTF-8")
        );
        assert_eq!(
            merged(&["text/plain; Charset=\"latin1\"", "text/csv; charset=UTF-8"]).as_deref(),
            Some("text/csv; charset=UTF-8")
        );
        assert_eq!(merged(&["text/html", ""]), None);
        assert_eq!(merged(&["  "]), None);
        assert_eq!(merged(&[]), None);
        assert_eq!(
            charset_of(b"a/b; q=1; charset=\"x\"").as_deref(),
            Some(&b"x"[..])
        );
    }

    /// PHP's header() refuses CR, LF and NUL, but a worker is not trusted
    /// to have used it: such a header must never reach the client, where
    /// it could split the response.
    #[test]
    fn headers_with_cr_lf_or_nul_are_dropped() {
        let b = |s: &str| Bytes::copy_from_slice(s.as_bytes());
        let head = ResponseHead {
            status: 200,
            headers: vec![
                (b("X-Cr"), b("a\rb")),
                (b("X-Lf"), b("a\r\nSet-Cookie: evil=1")),
                (b("X-Nul"), b("a\0b")),
                (b("X\rName"), b("v")),
                (b("X-Fine"), b("ok")),
            ],
            invalid: vec![],
        };
        let mut response = Response::new(ResponseBody::empty());
        let status = apply_head(head, &Method::GET, &mut response, 1);
        assert_eq!(status, StatusCode::OK);
        let names: Vec<&str> = response.headers().keys().map(|n| n.as_str()).collect();
        assert_eq!(names, ["x-fine"]);
    }
}
