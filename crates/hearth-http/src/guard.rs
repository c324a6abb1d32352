//! The connection's socket as hyper sees it: requests framed strictly (see
//! [`framing`](crate::framing)), and the read timeouts that keep a slow or
//! idle client from pinning a connection.
//!
//! [`GuardedIo`] sits between the TCP stream and hyper. A request head is
//! held back until it is complete and valid; body bytes pass as they come.
//! When a head is refused (or does not arrive in time), hyper is handed a
//! stand-in head instead, and the service answers it with the refusal
//! ([`Shared::begin`]) and `Connection: close`; nothing after it is ever
//! read into hyper. When a body is refused or stalls, reading fails, and
//! the request handler answers with the status from [`Shared::body_refusal`].
//! A head whose request target holds bytes hyper would refuse but nginx
//! takes is handed over with its target re-encoded (see
//! [`target`](crate::target)), and the target as sent goes to the service
//! beside it ([`Begun::target`]).
//!
//! Doing this below hyper rather than on the parsed request is what makes
//! it hold: by the time hyper hands over a `Request`, it has already
//! dropped the evidence (a `Content-Length` next to `Transfer-Encoding`,
//! the line endings) and chosen a framing.
//!
//! # Files sent by the kernel
//!
//! On a plain connection, a file's response body can be sent with
//! sendfile(2) ([`ZeroCopy`]), under hyper, which owns the socket and has
//! no sendfile of its own. hyper still frames the response (its head, its
//! `Content-Length`, keep-alive, the next pipelined response): the body
//! sends each piece of the file itself, then hands hyper as many bytes of
//! a placeholder (zeros, never read), which this socket reports written
//! without writing them. Two things make the bytes on the wire exactly
//! hyper's response with the file in place of the placeholder:
//!
//! - Before its first sendfile, the body waits until hyper has flushed
//!   its write buffer (the head, and anything of an earlier response)
//!   since the body was first polled: hyper flushes the socket only once
//!   its buffer is empty. From then on, everything hyper writes until the
//!   body's end is placeholder bytes, so the file's bytes go out in their
//!   place in the stream.
//! - The socket swallows exactly the bytes owed ([`Shared::owed`]), then
//!   writes again: a write that holds the last placeholder bytes and the
//!   next response's head is reported short, and hyper writes the head
//!   again, for real. With a `Content-Length`, hyper writes a body's bytes
//!   as they are, so the count is exact.
//!
//! Why placeholders rather than writing such responses past hyper
//! altogether: hyper stays the one that frames every response, so its
//! `Content-Length` check (a body that ends short closes the connection),
//! keep-alive, pipelining, `Connection: close`, and what the access log
//! counts all hold as for any body, and a file body that cannot use
//! sendfile (or stops being able to, mid-file) hands hyper real bytes in
//! the same stream. The placeholders cost hyper a frame per piece sent
//! (up to 1 MiB) and no copy: it queues them (the socket takes vectored
//! writes) and the socket drops them unread.

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::os::fd::BorrowedFd;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use futures_util::task::AtomicWaker;
use http::StatusCode;
use hyper::body::{Body, Frame, SizeHint};
use prometheus_client::metrics::counter::Counter;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

use crate::framing::{Framer, Limits, Phase, Refusal, Step};
use crate::listener::Peer;
use crate::target::{self, RawTarget};
use crate::zero_copy::{SendFile, MAX_CHUNK};

/// What hyper parses in place of a refused head.
const STAND_IN: &[u8] = b"GET / HTTP/1.1\r\n\r\n";
/// After a refusal, how long the socket is drained before it is closed, so
/// that the client reads the refusal instead of a reset.
const LINGER: Duration = Duration::from_secs(2);
const LINGER_BYTES: usize = 1 << 20;

/// Read timeouts of a connection.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timeouts {
    /// From the first byte of a head (or the accept) to its end.
    pub header: Duration,
    /// Longest pause while a body arrives.
    pub body: Duration,
    /// Between the end of a response and the first byte of the next request.
    pub keep_alive: Duration,
}

/// State shared by a connection's socket wrapper and its service.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    /// Heads handed to hyper (stand-ins included).
    heads: AtomicU64,
    /// Requests the service has been called for.
    calls: AtomicU64,
    /// Responses finished (their bodies dropped by hyper).
    done: AtomicU64,
    /// The stand-in head's index and the refusal it stands for.
    refused: Mutex<Option<(u64, StatusCode)>>,
    /// Why the current body could not be read.
    body: Mutex<Option<StatusCode>>,
    /// Targets as sent, of heads handed over re-encoded, by head index and
    /// in order. Only heads in hyper's read buffer are here, so its size
    /// bounds them.
    targets: Mutex<VecDeque<(u64, RawTarget)>>,
    /// The socket, for interim responses (103 Early Hints) written between
    /// hyper's: set on HTTP/1.1 connections only.
    interim: OnceLock<InterimSocket>,
    /// Whether hyper has written something it has not flushed since. An
    /// interim response may go out only when this is false: hyper's buffer
    /// is then empty, and nothing of an earlier response can follow it.
    unflushed: AtomicBool,
    /// The socket, for file bodies sent with sendfile(2) ([`ZeroCopy`]):
    /// set on plain HTTP/1.x connections, unless sendfile is off.
    zero_copy: OnceLock<ZeroCopySocket>,
    /// Bytes of a response body that the kernel has sent and hyper has
    /// still to write, as placeholder bytes: the socket swallows them.
    owed: AtomicU64,
    /// Times hyper's write buffer was flushed whole, and the file body
    /// waiting for the next time.
    flushes: AtomicU64,
    flushed: AtomicWaker,
}

/// The socket of an HTTP/1.1 connection as an interim response writes it.
///
/// hyper has no way to send a 1xx response other than `100 Continue` from
/// a server (its API takes one response per request), so Hearth writes a
/// 103 on the socket itself while hyper waits for the request's response:
/// hyper writes nothing on the connection then, and the 103 goes out whole
/// before the final head, as RFC 9110 has it.
trait Interim: Send + Sync {
    fn poll_write(&self, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>>;
    fn poll_flush(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;
}

struct InterimSocket(Arc<dyn Interim>);

impl std::fmt::Debug for InterimSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InterimSocket")
    }
}

impl<T: AsyncWrite + Unpin + Send> Interim for Mutex<T> {
    fn poll_write(&self, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut *lock(self)).poll_write(cx, data)
    }

    fn poll_flush(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *lock(self)).poll_flush(cx)
    }
}

/// The socket of a plain HTTP/1.x connection as sendfile(2) writes it,
/// between hyper's writes, as [`Interim`] is.
trait KernelSend: Send + Sync {
    fn poll_send_file(
        &self,
        cx: &mut Context<'_>,
        file: BorrowedFd<'_>,
        offset: &mut u64,
        count: usize,
    ) -> Poll<io::Result<usize>>;
}

impl<T: SendFile + Send> KernelSend for Mutex<T> {
    fn poll_send_file(
        &self,
        cx: &mut Context<'_>,
        file: BorrowedFd<'_>,
        offset: &mut u64,
        count: usize,
    ) -> Poll<io::Result<usize>> {
        lock(self).poll_send_file(cx, file, offset, count)
    }
}

struct ZeroCopySocket {
    socket: Arc<dyn KernelSend>,
    /// Counts the bytes sent so (`hearth_http_sendfile_bytes`).
    sent: Option<Counter>,
}

impl std::fmt::Debug for ZeroCopySocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ZeroCopySocket")
    }
}

/// What a placeholder is cut from: never read (the socket swallows it),
/// so its pages are never touched either.
static ZEROS: [u8; MAX_CHUNK] = [0; MAX_CHUNK];

/// One file body's way onto its connection's socket with sendfile(2)
/// (see the module's docs, "Files sent by the kernel").
#[derive(Debug)]
pub(crate) struct ZeroCopy {
    shared: Arc<Shared>,
    /// hyper's flushes when the body was first polled.
    since: Option<u64>,
    /// Everything hyper wrote before the body is on the socket.
    clear: bool,
}

impl ZeroCopy {
    /// Sends up to `count` bytes of `file` from `offset` (advanced by
    /// what was sent) onto the socket, once hyper has written out all it
    /// held before the body; waits on the socket as a write does, under
    /// the send timeout. The answer is the placeholder for what was sent,
    /// which the body must hand hyper as its next data frame, as it is;
    /// empty: `offset` is at or past the end of the file.
    pub fn poll_send(
        &mut self,
        cx: &mut Context<'_>,
        file: BorrowedFd<'_>,
        offset: &mut u64,
        count: usize,
    ) -> Poll<io::Result<Bytes>> {
        let Some(to) = self.shared.zero_copy.get() else {
            return Poll::Ready(Err(io::ErrorKind::Unsupported.into()));
        };
        if !self.clear {
            self.shared.flushed.register(cx.waker());
            let flushes = self.shared.flushes.load(Ordering::Acquire);
            match self.since {
                // hyper holds the head: it flushes it right after this poll.
                None => {
                    self.since = Some(flushes);
                    return Poll::Pending;
                }
                Some(since) if since == flushes => return Poll::Pending,
                Some(_) => self.clear = true,
            }
        }
        let count = count.min(ZEROS.len());
        let n = std::task::ready!(to.socket.poll_send_file(cx, file, offset, count))?;
        self.shared.owed.fetch_add(n as u64, Ordering::AcqRel);
        if let Some(sent) = &to.sent {
            sent.inc_by(n as u64);
        }
        Poll::Ready(Ok(Bytes::from_static(&ZEROS[..n])))
    }
}

/// What the service learns about a request when it begins.
#[derive(Debug)]
pub(crate) struct Begun {
    /// Marks the request in flight until its response body is dropped.
    pub in_flight: InFlight,
    /// The refusal this request stands in for.
    pub refused: Option<StatusCode>,
    /// The request target as the client sent it, when hyper was given a
    /// re-encoded one.
    pub target: Option<RawTarget>,
}

/// Marks a request in flight until its response body is dropped.
#[derive(Debug)]
pub(crate) struct InFlight(Arc<Shared>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.done.fetch_add(1, Ordering::AcqRel);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    /// Called by the service for each request, in order.
    pub fn begin(self: &Arc<Self>) -> Begun {
        let index = self.calls.fetch_add(1, Ordering::AcqRel);
        let refused = match *lock(&self.refused) {
            Some((at, status)) if at == index => Some(status),
            _ => None,
        };
        let target = {
            let mut targets = lock(&self.targets);
            while targets.front().is_some_and(|(at, _)| *at < index) {
                targets.pop_front();
            }
            match targets.front() {
                Some((at, _)) if *at == index => targets.pop_front().map(|(_, t)| t),
                _ => None,
            }
        };
        Begun {
            in_flight: InFlight(self.clone()),
            refused,
            target,
        }
    }

    /// Why reading the request body failed, if the guard refused it (400)
    /// or it stalled (408); None when the client just went away.
    pub fn body_refusal(&self) -> Option<StatusCode> {
        *lock(&self.body)
    }

    /// Requests begun and finished so far: unchanged over a while, and
    /// equal, means the connection sat idle.
    pub fn activity(&self) -> (u64, u64) {
        (
            self.calls.load(Ordering::Acquire),
            self.done.load(Ordering::Acquire),
        )
    }

    /// A way to send a file body with sendfile(2), on a connection that
    /// allows it (plain HTTP/1.x, sendfile on).
    pub fn zero_copy(self: &Arc<Self>) -> Option<ZeroCopy> {
        self.zero_copy.get()?;
        Some(ZeroCopy {
            shared: self.clone(),
            since: None,
            clear: false,
        })
    }

    /// Takes up to `len` bytes hyper writes as placeholder bytes owed:
    /// how many, if any are owed.
    fn swallow(&self, len: usize) -> Option<usize> {
        let owed = self.owed.load(Ordering::Acquire);
        if owed == 0 || len == 0 {
            return None;
        }
        let n = owed.min(len as u64);
        self.owed.fetch_sub(n, Ordering::AcqRel);
        Some(n as usize)
    }

    fn idle(&self) -> bool {
        self.done.load(Ordering::Acquire) >= self.heads.load(Ordering::Acquire)
    }

    /// Writes `head`, an interim response, on the connection before the
    /// response of the request in flight. False when it cannot go now: an
    /// HTTP/2 connection (hyper has no interim responses there), or hyper
    /// still holds bytes of an earlier response (pipelined requests).
    /// An error means the connection is broken (the send timeout applies,
    /// as the socket is the one hyper writes through).
    pub async fn send_interim(&self, head: &[u8]) -> io::Result<bool> {
        let Some(InterimSocket(socket)) = self.interim.get() else {
            return Ok(false);
        };
        if self.unflushed.load(Ordering::Acquire) {
            return Ok(false);
        }
        let mut at = 0;
        while at < head.len() {
            let n = std::future::poll_fn(|cx| socket.poll_write(cx, &head[at..])).await?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            at += n;
        }
        std::future::poll_fn(|cx| socket.poll_flush(cx)).await?;
        Ok(true)
    }
}

/// A response body that marks the end of its request when dropped.
#[derive(Debug)]
pub(crate) struct Tracked<B> {
    body: B,
    _in_flight: InFlight,
}

impl<B> Tracked<B> {
    pub fn new(body: B, in_flight: InFlight) -> Tracked<B> {
        Tracked {
            body,
            _in_flight: in_flight,
        }
    }
}

impl<B: Body + Unpin> Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wait {
    /// No request under way: close quietly when it runs out.
    Idle,
    /// A head has started: 408.
    Head,
    /// A body pauses: 408.
    Body,
}

/// The socket of one connection, guarded.
#[derive(Debug)]
pub(crate) struct GuardedIo<T> {
    /// Shared with [`Shared::send_interim`]; only one of the two writes at
    /// a time, so the lock is never contended.
    inner: Arc<Mutex<T>>,
    framer: Framer,
    shared: Arc<Shared>,
    timeouts: Timeouts,
    remote: Peer,
    /// Bytes read from the socket and not yet handed to hyper.
    buf: BytesMut,
    /// How many bytes at the front of `buf` may go to hyper.
    released: usize,
    /// Most bytes held back at once.
    cap: usize,
    /// A head to hand over in place of the one read: a stand-in for a
    /// refused head, or a head with its target re-encoded.
    stand_in: Option<Bytes>,
    /// An error to report on the next read (a refused or stalled body).
    error: Option<io::ErrorKind>,
    /// Reads from now on see nothing (after a refusal) or end (idle timeout).
    closed: Option<Closed>,
    /// When the current wait started (idle, head or body progress).
    since: Instant,
    wait: Option<Wait>,
    sleep: Pin<Box<Sleep>>,
    /// The deadline `sleep` is set to. Moving a timer costs a trip through
    /// tokio's timer wheel, and the idle wait starts after every response:
    /// the timer is left early and, when it fires early, moved then.
    armed: Option<Instant>,
    /// While closing after a refusal: the socket's write side is shut and
    /// it is being drained until this deadline.
    linger: Option<(Instant, usize)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Closed {
    /// Reads stay pending; hyper closes after its response.
    Refused,
    /// Reads end: the connection was idle too long.
    Eof,
}

impl<T: AsyncWrite + Unpin + Send + 'static> GuardedIo<T> {
    /// The socket of an HTTP/1.1 connection, on which interim responses
    /// may be written (see [`Shared::send_interim`]).
    pub fn http1(
        inner: T,
        limits: Limits,
        timeouts: Timeouts,
        shared: Arc<Shared>,
        remote: Peer,
    ) -> GuardedIo<T> {
        let io = GuardedIo::new(inner, limits, timeouts, shared, remote);
        let socket: Arc<dyn Interim> = io.inner.clone();
        let _ = io.shared.interim.set(InterimSocket(socket));
        io
    }
}

impl<T: AsyncWrite + SendFile + Unpin + Send + 'static> GuardedIo<T> {
    /// Lets file bodies on this connection be sent with sendfile(2) (see
    /// [`ZeroCopy`]); `sent` counts the bytes sent so.
    pub fn with_zero_copy(self, sent: Option<Counter>) -> GuardedIo<T> {
        let socket: Arc<dyn KernelSend> = self.inner.clone();
        let _ = self.shared.zero_copy.set(ZeroCopySocket { socket, sent });
        self
    }
}

impl<T> GuardedIo<T> {
    pub fn new(
        inner: T,
        limits: Limits,
        timeouts: Timeouts,
        shared: Arc<Shared>,
        remote: Peer,
    ) -> GuardedIo<T> {
        let now = Instant::now();
        GuardedIo {
            inner: Arc::new(Mutex::new(inner)),
            framer: Framer::new(limits),
            shared,
            timeouts,
            remote,
            buf: BytesMut::new(),
            released: 0,
            cap: (limits.request_line + limits.header_size + 1024).max(64 << 10),
            stand_in: None,
            error: None,
            closed: None,
            since: now,
            wait: None,
            sleep: Box::pin(tokio::time::sleep_until(now)),
            armed: Some(now),
            linger: None,
        }
    }

    fn refuse(&mut self, refusal: Refusal) {
        if refusal.status == StatusCode::REQUEST_TIMEOUT {
            // Slow or vanished clients are common and say nothing about
            // the request.
            tracing::info!(remote = %self.remote, "refused a request ({}): {}", refusal.status, refusal.why);
        } else {
            tracing::warn!(remote = %self.remote, "refused a request ({}): {}", refusal.status, refusal.why);
        }
        if refusal.in_head {
            let index = self.shared.heads.fetch_add(1, Ordering::AcqRel);
            *lock(&self.shared.refused) = Some((index, refusal.status));
            self.stand_in = Some(Bytes::from_static(STAND_IN));
        } else {
            *lock(&self.shared.body) = Some(refusal.status);
            self.error = Some(io::ErrorKind::InvalidData);
        }
        self.closed = Some(Closed::Refused);
        self.buf.clear();
        self.released = 0;
    }

    /// What the connection is waiting for when hyper wants bytes and none
    /// have come.
    fn waiting_for(&self) -> Option<(Wait, Duration)> {
        match self.framer.phase() {
            Phase::Closed => None,
            Phase::Body => Some((Wait::Body, self.timeouts.body)),
            Phase::Head if !self.buf.is_empty() => Some((Wait::Head, self.timeouts.header)),
            Phase::Head if self.shared.idle() => {
                // A new connection has the header timeout for its first
                // request; later ones wait as long as keep-alive allows.
                let fresh = self.shared.heads.load(Ordering::Acquire) == 0;
                let limit = if fresh {
                    self.timeouts.header
                } else {
                    self.timeouts.keep_alive
                };
                Some((Wait::Idle, limit))
            }
            // A request is being answered.
            Phase::Head => None,
        }
    }
}

impl<T: AsyncRead + Unpin> GuardedIo<T> {
    /// Called when no bytes are available: starts, keeps or fires the
    /// timer for what the connection waits for.
    fn poll_timer(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Some((wait, limit)) = self.waiting_for() else {
            self.wait = None;
            return Poll::Pending;
        };
        if self.wait != Some(wait) {
            // A head's clock started with its first byte, a body's with
            // the last progress; an idle one starts now.
            if wait == Wait::Idle {
                self.since = Instant::now();
            }
            self.wait = Some(wait);
        }
        let deadline = self.since + limit;
        loop {
            if self.armed.is_none_or(|at| at > deadline) {
                self.sleep.as_mut().reset(deadline);
                self.armed = Some(deadline);
            }
            if self.sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            // Fired: at the deadline, or at an earlier one it was left at.
            self.armed = None;
            if Instant::now() >= deadline {
                break;
            }
        }
        match wait {
            Wait::Idle => {
                tracing::debug!(remote = %self.remote, "closing an idle connection");
                self.closed = Some(Closed::Eof);
            }
            Wait::Head => self.refuse(Refusal {
                status: StatusCode::REQUEST_TIMEOUT,
                why: "request head not received in time",
                in_head: true,
            }),
            Wait::Body => {
                self.refuse(Refusal {
                    status: StatusCode::REQUEST_TIMEOUT,
                    why: "request body stalled",
                    in_head: false,
                });
                self.error = Some(io::ErrorKind::TimedOut);
            }
        }
        Poll::Ready(())
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for GuardedIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if let Some(stand_in) = &mut this.stand_in {
                let n = stand_in.len().min(out.remaining());
                out.put_slice(&stand_in[..n]);
                stand_in.advance(n);
                if stand_in.is_empty() {
                    this.stand_in = None;
                }
                return Poll::Ready(Ok(()));
            }
            if this.released > 0 {
                let n = this.released.min(out.remaining());
                out.put_slice(&this.buf[..n]);
                this.buf.advance(n);
                this.released -= n;
                return Poll::Ready(Ok(()));
            }
            if let Some(kind) = this.error.take() {
                return Poll::Ready(Err(io::Error::new(kind, "request body refused")));
            }
            match this.closed {
                Some(Closed::Eof) => return Poll::Ready(Ok(())),
                Some(Closed::Refused) => return Poll::Pending,
                None => {}
            }
            match this.framer.step(&this.buf) {
                Ok(Step::Release { len, head }) => {
                    if let Some(span) = head {
                        match target::for_hyper(&this.buf[span.start..span.end]) {
                            Ok(None) => {}
                            Ok(Some((handed, raw))) => {
                                let index = this.shared.heads.load(Ordering::Acquire);
                                lock(&this.shared.targets).push_back((index, raw));
                                let mut head = BytesMut::with_capacity(len + handed.len());
                                head.extend_from_slice(&this.buf[..span.start]);
                                head.extend_from_slice(&handed);
                                head.extend_from_slice(&this.buf[span.end..len]);
                                this.buf.advance(len);
                                this.stand_in = Some(head.freeze());
                            }
                            Err((status, why)) => {
                                this.refuse(Refusal {
                                    status,
                                    why,
                                    in_head: true,
                                });
                                continue;
                            }
                        }
                        this.shared.heads.fetch_add(1, Ordering::AcqRel);
                    }
                    this.released = if this.stand_in.is_some() { 0 } else { len };
                    // A body's clock starts with its head, and the next
                    // head's (already begun, pipelined) with the release.
                    this.since = Instant::now();
                    this.wait = None;
                    continue;
                }
                Ok(Step::Incomplete) => {}
                Err(refusal) => {
                    this.refuse(refusal);
                    continue;
                }
            }
            if this.buf.len() >= this.cap {
                // Cannot happen with the limits in force; stop reading
                // rather than grow without bound.
                return Poll::Pending;
            }
            let was_empty = this.buf.is_empty();
            // Straight into the buffer's spare room: no zeroed scratch, no copy.
            this.buf.reserve(8192);
            let read =
                tokio_util::io::poll_read_buf(Pin::new(&mut *lock(&this.inner)), cx, &mut this.buf);
            match read {
                Poll::Ready(Ok(n)) => {
                    if n == 0 {
                        // End of input: what is held back (a partial head)
                        // never reaches hyper, which sees the end.
                        this.buf.clear();
                        this.closed = Some(Closed::Eof);
                        continue;
                    }
                    if this.framer.phase() == Phase::Body || was_empty {
                        // Body progress, or the first byte of a head:
                        // the clock starts again.
                        this.since = Instant::now();
                        this.wait = None;
                    }
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => {
                    if this.poll_timer(cx).is_pending() {
                        return Poll::Pending;
                    }
                }
            }
        }
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncWrite for GuardedIo<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.shared.unflushed.store(true, Ordering::Release);
        if let Some(n) = self.shared.swallow(data.len()) {
            return Poll::Ready(Ok(n));
        }
        Pin::new(&mut *lock(&self.inner)).poll_write(cx, data)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.shared.unflushed.store(true, Ordering::Release);
        let len = bufs.iter().map(|b| b.len()).sum();
        if let Some(n) = self.shared.swallow(len) {
            // Short when the next response's head follows: hyper writes
            // the rest again.
            return Poll::Ready(Ok(n));
        }
        Pin::new(&mut *lock(&self.inner)).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        lock(&self.inner).is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // hyper flushes after writing out its buffer: once this is done,
        // it holds nothing of a response.
        let flushed = Pin::new(&mut *lock(&self.inner)).poll_flush(cx);
        if let Poll::Ready(Ok(())) = flushed {
            self.shared.unflushed.store(false, Ordering::Release);
            self.shared.flushes.fetch_add(1, Ordering::AcqRel);
            self.shared.flushed.wake();
        }
        flushed
    }

    /// After a refusal, shuts the write side and drains what the client
    /// still sends for a moment: closing with unread bytes would reset the
    /// connection, and the client could lose the refusal.
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.closed != Some(Closed::Refused) {
            return Pin::new(&mut *lock(&this.inner)).poll_shutdown(cx);
        }
        if this.linger.is_none() {
            std::task::ready!(Pin::new(&mut *lock(&this.inner)).poll_shutdown(cx))?;
            let deadline = Instant::now() + LINGER;
            this.sleep.as_mut().reset(deadline);
            this.armed = Some(deadline);
            this.linger = Some((deadline, 0));
        }
        let mut scratch = [0u8; 4096];
        loop {
            let Some((_, drained)) = &mut this.linger else {
                return Poll::Ready(Ok(()));
            };
            if *drained > LINGER_BYTES {
                return Poll::Ready(Ok(()));
            }
            let mut read = ReadBuf::new(&mut scratch);
            let drained_read = Pin::new(&mut *lock(&this.inner)).poll_read(cx, &mut read);
            match drained_read {
                Poll::Ready(Ok(())) if !read.filled().is_empty() => {
                    *drained += read.filled().len();
                }
                Poll::Ready(_) => return Poll::Ready(Ok(())),
                Poll::Pending => {
                    return match this.sleep.as_mut().poll(cx) {
                        Poll::Ready(()) => Poll::Ready(Ok(())),
                        Poll::Pending => Poll::Pending,
                    };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    /// Bytes owed for a file the kernel sent are reported written and
    /// never reach the socket; a write that holds more than is owed is
    /// reported short, so that the rest (the next response's head) is
    /// written again, for real.
    #[tokio::test]
    async fn owed_bytes_are_swallowed_and_nothing_after_them() {
        let (near, mut far) = tokio::io::duplex(1 << 16);
        let shared = Arc::new(Shared::default());
        let limits = Limits {
            request_line: 8 << 10,
            header_size: 32 << 10,
            headers: 100,
        };
        let timeouts = Timeouts {
            header: Duration::from_secs(5),
            body: Duration::from_secs(5),
            keep_alive: Duration::from_secs(5),
        };
        let mut io = GuardedIo::new(near, limits, timeouts, shared.clone(), Peer::Unix);

        shared.owed.store(10, Ordering::Release);
        let head = b"HTTP/1.1 200 OK\r\n";
        let bufs = [
            io::IoSlice::new(&ZEROS[..4]),
            io::IoSlice::new(&ZEROS[..4]),
            io::IoSlice::new(&ZEROS[..2]),
            io::IoSlice::new(head),
        ];
        let n = std::future::poll_fn(|cx| Pin::new(&mut io).poll_write_vectored(cx, &bufs))
            .await
            .unwrap();
        assert_eq!(n, 10, "short: the owed bytes only");
        io.write_all(head).await.unwrap();

        shared.owed.store(3, Ordering::Release);
        let n = io.write(b"\0\0\0next").await.unwrap();
        assert_eq!(n, 3);
        io.write_all(b"next").await.unwrap();
        // Nothing owed: bytes pass as they are.
        io.write_all(b"\0end").await.unwrap();
        io.flush().await.unwrap();
        assert_eq!(shared.flushes.load(Ordering::Acquire), 1);
        drop(io);
        let mut got = Vec::new();
        far.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"HTTP/1.1 200 OK\r\nnext\0end");
    }
}
