//! One FastCGI request/response exchange with the pool, over its unix
//! socket, as nginx's `fastcgi_pass` does it: a new connection per request,
//! the params and the body sent while the response is read (so a script
//! that answers before reading its body never deadlocks), the CGI head
//! parsed as nginx parses it, the body streamed as php-fpm sends it.
//!
//! Memory is bounded: the head by [`Limits::max_head`], the body by one
//! FastCGI record at a time (64 KiB), stderr by a line count and length.

mod head;
mod record;

use std::collections::VecDeque;
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;
use tokio::task::JoinHandle;
use tokio::time::timeout;

use crate::Error;

/// How long each wait of an exchange may take, and how much of the
/// response may be held in memory.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Connecting to the pool's socket (nginx: `fastcgi_connect_timeout`).
    /// The socket is local, so this only fires when the pool's listen
    /// backlog is full or the master has stopped accepting.
    pub connect_timeout: Duration,
    /// From the start of the exchange until the whole head has arrived,
    /// sending the body included (nginx: `fastcgi_read_timeout` for the
    /// first byte). Callers pass a body that is already received, as nginx
    /// does with `fastcgi_request_buffering on`.
    pub head_timeout: Duration,
    /// Between two records once the head is in (nginx:
    /// `fastcgi_read_timeout`).
    pub read_timeout: Duration,
    /// The largest head accepted (nginx: `fastcgi_buffer_size`, where a
    /// larger head is "upstream sent too big header", a 502).
    pub max_head: usize,
    /// The pool's `request_terminate_timeout`: a connection php-fpm closes
    /// without ending the request after this long was closed because the
    /// master killed the child for running too long, and is reported as a
    /// timeout (504) rather than as a broken exchange (502).
    pub terminate_after: Option<Duration>,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(5),
            head_timeout: Duration::from_secs(60),
            read_timeout: Duration::from_secs(60),
            max_head: 64 * 1024,
            terminate_after: None,
        }
    }
}

/// The most stderr lines kept between two [`Response::take_stderr`] calls,
/// and the longest line; more is counted and dropped.
const MAX_STDERR_LINES: usize = 256;
const MAX_STDERR_LINE: usize = 4096;
/// How much of the request body is read before it is sent on.
const BODY_CHUNK: usize = 32 * 1024;

/// A response whose head has arrived; its body is read with
/// [`Response::chunk`].
#[derive(Debug)]
pub struct Response {
    /// The status code: from `Status`, 302 for a `Location` without it,
    /// else 200.
    pub status: u16,
    /// The reason phrase after the code in `Status` (empty when PHP sent
    /// only the code), "Moved Temporarily" or "OK".
    pub reason: String,
    /// The other header lines, in PHP's order, repeats kept.
    pub headers: Vec<(String, Vec<u8>)>,
    conn: Conn,
    /// Body bytes that came in the same records as the head.
    pending: Option<Bytes>,
}

impl Response {
    /// The next piece of the body as php-fpm sent it (a `flush()` in PHP
    /// arrives as its own piece), or `None` once php-fpm has ended the
    /// request. A response cut short is an error, never a clean end.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, Error> {
        if let Some(data) = self.pending.take() {
            return Ok(Some(data));
        }
        loop {
            if self.conn.ended {
                return Ok(None);
            }
            let wait = self.conn.read_timeout;
            let rec = self.conn.record(wait, "between two body records").await?;
            if rec.kind == record::STDOUT && !rec.content.is_empty() {
                return Ok(Some(rec.content));
            }
        }
    }

    /// The lines PHP wrote to FastCGI's stderr so far (php-fpm's "PHP
    /// message: ..." lines, what nginx logs as "FastCGI sent in stderr"),
    /// for the caller's log.
    pub fn take_stderr(&mut self) -> Vec<String> {
        self.conn.stderr.take()
    }

    /// Whether php-fpm has ended the request (the body is all read).
    pub fn is_complete(&self) -> bool {
        self.conn.ended && self.pending.is_none()
    }
}

/// Runs one request: connects to `socket`, sends `params` (name/value
/// pairs in order, raw bytes) and `body`, and returns once the head has
/// arrived. The body is read and sent in pieces, never whole.
pub async fn request<N, V, B>(
    socket: &Path,
    params: &[(N, V)],
    body: B,
    limits: &Limits,
) -> Result<Response, Error>
where
    N: AsRef<[u8]>,
    V: AsRef<[u8]>,
    B: AsyncRead + Send + Unpin + 'static,
{
    let started = Instant::now();
    let stream = match timeout(limits.connect_timeout, UnixStream::connect(socket)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(err)) => {
            return Err(Error::unavailable(format!(
                "connecting to {}: {err}",
                socket.display()
            )))
        }
        Err(_) => {
            return Err(Error::unavailable(format!(
                "connecting to {} took over {:?}",
                socket.display(),
                limits.connect_timeout
            )))
        }
    };
    let (read, write) = stream.into_split();
    let mut start = BytesMut::new();
    record::begin_request(&mut start);
    record::params(&mut start, params);
    let writer = tokio::spawn(send(write, start, body));
    let mut conn = Conn {
        read,
        buf: BytesMut::new(),
        writer: Some(writer),
        started,
        read_timeout: limits.read_timeout,
        terminate_after: limits.terminate_after,
        stderr: Stderr::default(),
        ended: false,
    };

    let mut head = BytesMut::new();
    let deadline = started + limits.head_timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let rec = conn.record(left, "waiting for the response head").await?;
        if rec.kind != record::STDOUT {
            if conn.ended {
                return Err(Error::upstream("the request ended before a complete head"));
            }
            continue;
        }
        let searched_from = head.len().saturating_sub(3);
        head.extend_from_slice(&rec.content);
        if let Some(end) = head::end_of_head(&head[searched_from..]).map(|e| e + searched_from) {
            let body = head.split_off(end).freeze();
            let parsed = head::parse(&head[..end]).map_err(Error::upstream)?;
            if end > limits.max_head {
                return Err(head_too_large(limits.max_head));
            }
            return Ok(Response {
                status: parsed.status,
                reason: parsed.reason,
                headers: parsed.headers,
                conn,
                pending: (!body.is_empty()).then_some(body),
            });
        }
        if head.len() > limits.max_head {
            return Err(head_too_large(limits.max_head));
        }
    }
}

fn head_too_large(max: usize) -> Error {
    Error::upstream(format!("the response head is larger than {max} bytes"))
}

/// Writes the request's records: BEGIN_REQUEST and PARAMS, then the body
/// as STDIN records read `BODY_CHUNK` at a time. A failed write means
/// php-fpm closed the connection (a script that answered without reading
/// its body); the reader finds out what happened, so only a failing body
/// source is an error here.
async fn send<B>(mut write: OwnedWriteHalf, start: BytesMut, mut body: B) -> Result<(), Error>
where
    B: AsyncRead + Send + Unpin,
{
    if write.write_all(&start).await.is_err() {
        return Ok(());
    }
    let mut chunk = vec![0u8; BODY_CHUNK];
    let mut out = BytesMut::with_capacity(BODY_CHUNK + 16);
    loop {
        let n = body.read(&mut chunk).await.map_err(Error::body_source)?;
        out.clear();
        if n == 0 {
            record::end_stdin(&mut out);
        } else {
            record::stream(&mut out, record::STDIN, &chunk[..n]);
        }
        if write.write_all(&out).await.is_err() || n == 0 {
            return Ok(());
        }
    }
}

#[derive(Debug)]
struct Conn {
    read: OwnedReadHalf,
    buf: BytesMut,
    writer: Option<JoinHandle<Result<(), Error>>>,
    started: Instant,
    read_timeout: Duration,
    terminate_after: Option<Duration>,
    stderr: Stderr,
    ended: bool,
}

impl Conn {
    /// The next record for our request; stderr records are taken in here.
    /// Sets `ended` on FCGI_END_REQUEST (returned too).
    async fn record(&mut self, wait: Duration, doing: &str) -> Result<record::Record, Error> {
        let deadline = Instant::now() + wait;
        loop {
            if let Some(rec) = record::decode(&mut self.buf).map_err(Error::upstream)? {
                if rec.request_id != record::REQUEST_ID {
                    return Err(Error::upstream(format!(
                        "record for request {}",
                        rec.request_id
                    )));
                }
                match rec.kind {
                    record::STDERR => self.stderr.push(&rec.content),
                    record::END_REQUEST => {
                        let (_app, protocol) =
                            record::end_request(&rec.content).map_err(Error::upstream)?;
                        self.ended = true;
                        self.stop_writer();
                        self.stderr.flush();
                        match protocol {
                            0 => {}
                            2 => return Err(Error::unavailable("php-fpm is overloaded")),
                            other => {
                                return Err(Error::upstream(format!("protocol status {other}")))
                            }
                        }
                    }
                    _ => {}
                }
                return Ok(rec);
            }
            if self.ended {
                return Err(Error::upstream("data after the end of the request"));
            }
            // At most one partial record is buffered here, so the buffer
            // stays under two records.
            self.buf.reserve(record::MAX_RECORD.min(64 * 1024));
            let left = deadline.saturating_duration_since(Instant::now());
            let read = match timeout(left, self.read_some()).await {
                Ok(read) => read?,
                Err(_) => {
                    return Err(Error::timed_out(format!(
                        "nothing from php-fpm {doing} for {wait:?}"
                    )))
                }
            };
            if read == 0 {
                return Err(self.closed_early("php-fpm closed the connection"));
            }
        }
    }

    /// Reads from the socket, and meanwhile notices the body source failing.
    async fn read_some(&mut self) -> Result<usize, Error> {
        loop {
            let read = match self.writer.as_mut() {
                None => self.read.read_buf(&mut self.buf).await,
                Some(writer) => tokio::select! {
                    joined = writer => {
                        self.writer = None;
                        match joined {
                            Ok(Ok(())) => continue,
                            Ok(Err(err)) => return Err(err),
                            Err(join) => {
                                return Err(Error::io("sending the request", std::io::Error::other(join)))
                            }
                        }
                    }
                    read = self.read.read_buf(&mut self.buf) => read,
                },
            };
            return read.map_err(|err| self.closed_early(&format!("reading from php-fpm: {err}")));
        }
    }

    /// The connection ended (EOF or reset) before FCGI_END_REQUEST: past
    /// `terminate_after` the master killed the child for running too long.
    fn closed_early(&self, what: &str) -> Error {
        let elapsed = self.started.elapsed();
        match self.terminate_after {
            Some(limit) if elapsed >= limit => Error::timed_out(format!(
                "{what} after {elapsed:?}, past request_terminate_timeout ({limit:?})"
            )),
            _ => Error::upstream(format!("{what} before ending the request ({elapsed:?})")),
        }
    }

    fn stop_writer(&mut self) {
        if let Some(writer) = self.writer.take() {
            writer.abort();
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.stop_writer();
    }
}

/// Stderr lines, bounded in number and length.
#[derive(Debug, Default)]
struct Stderr {
    lines: VecDeque<String>,
    partial: Vec<u8>,
    dropped: usize,
}

impl Stderr {
    fn push(&mut self, data: &[u8]) {
        for (i, piece) in data.split(|&b| b == b'\n').enumerate() {
            if i > 0 {
                self.flush();
            }
            let room = MAX_STDERR_LINE.saturating_sub(self.partial.len());
            self.partial
                .extend_from_slice(&piece[..piece.len().min(room)]);
        }
    }

    fn flush(&mut self) {
        if self.partial.is_empty() {
            return;
        }
        let line = String::from_utf8_lossy(&self.partial).trim_end().to_owned();
        self.partial.clear();
        if self.lines.len() >= MAX_STDERR_LINES {
            self.dropped += 1;
        } else {
            self.lines.push_back(line);
        }
    }

    fn take(&mut self) -> Vec<String> {
        let mut out: Vec<String> = self.lines.drain(..).collect();
        if self.dropped > 0 {
            out.push(format!("({} more stderr lines dropped)", self.dropped));
            self.dropped = 0;
        }
        out
    }
}
