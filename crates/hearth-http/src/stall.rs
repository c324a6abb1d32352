//! The send timeout (`--send-timeout`, nginx's `send_timeout`): a response
//! that makes no progress for that long, because its client takes none of
//! it, is cut.
//!
//! A response can stall in two places:
//!
//! - On the socket: the client reads nothing and writes block.
//!   [`WriteTimeout`] fails a write that has been blocked for the send
//!   timeout, and the connection is closed (an HTTP/1.1 connection, or a
//!   whole HTTP/2 one).
//! - In an HTTP/2 stream: the client reads the connection but never opens
//!   the stream's flow-control window (no `WINDOW_UPDATE`), so the socket
//!   is fine and the stream is stuck. hyper gives no handle on a stream,
//!   so each stream's task is spawned through [`StreamExecutor`], which
//!   watches a [`Clock`] that the response body keeps ([`Watched`]): when
//!   hyper has held a piece of the body for the send timeout without
//!   asking for the next, the stream's task is dropped, which resets the
//!   stream (`RST_STREAM` with `CANCEL`) and frees what it held.
//!
//! A response waiting for PHP is not stalled: that is `--request-timeout`'s
//! business.

use std::future::Future;
use std::io;
use std::os::fd::BorrowedFd;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

use crate::listener::Peer;
use crate::metrics::Metrics;
use crate::throttle::{self, Throttle};
use crate::zero_copy::SendFile;

/// How often each kind of send timeout is logged at most: a client can
/// cause one per stream or connection it opens.
const LOG_EVERY: Duration = Duration::from_secs(10);
static STREAMS_RESET: Throttle = Throttle::new(LOG_EVERY);
static CONNECTIONS_CLOSED: Throttle = Throttle::new(LOG_EVERY);

tokio::task_local! {
    /// The clock of the HTTP/2 stream whose task runs now.
    static CLOCK: Arc<Clock>;
}

/// Whether one HTTP/2 stream's response waits on its client, and since
/// when.
#[derive(Debug, Default)]
pub(crate) struct Clock {
    /// When hyper was handed the piece of the body it still holds; None
    /// while hyper waits on the body (or the body is over).
    handed: Mutex<Option<Instant>>,
    /// The request, for the log.
    what: OnceLock<String>,
}

impl Clock {
    fn set(&self, handed: Option<Instant>) {
        *self.handed.lock().unwrap_or_else(|e| e.into_inner()) = handed;
    }

    fn handed(&self) -> Option<Instant> {
        *self.handed.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Spawns hyper's HTTP/2 stream tasks, each watched by its [`Clock`].
#[derive(Debug, Clone)]
pub(crate) struct StreamExecutor {
    pub timeout: Duration,
    pub metrics: Option<Arc<Metrics>>,
}

impl<F> hyper::rt::Executor<F> for StreamExecutor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, fut: F) {
        tokio::spawn(self.clone().watch(fut));
    }
}

impl StreamExecutor {
    /// Runs a stream's task until it ends, or drops it once its response
    /// has stalled for the send timeout.
    async fn watch<F: Future>(self, fut: F) {
        let clock = Arc::new(Clock::default());
        let fut = CLOCK.scope(clock.clone(), fut);
        tokio::pin!(fut);
        let sleep = tokio::time::sleep(self.timeout);
        tokio::pin!(sleep);
        let mut armed: Option<Instant> = None;
        let stalled = std::future::poll_fn(|cx| {
            if fut.as_mut().poll(cx).is_ready() {
                return Poll::Ready(false);
            }
            match clock.handed() {
                Some(at) => {
                    if armed != Some(at) {
                        sleep.as_mut().reset(at + self.timeout);
                        armed = Some(at);
                    }
                    if sleep.as_mut().poll(cx).is_ready() {
                        return Poll::Ready(true);
                    }
                }
                None => armed = None,
            }
            Poll::Pending
        })
        .await;
        if stalled {
            if let Some(left_out) = STREAMS_RESET.allow() {
                tracing::info!(
                    "reset an HTTP/2 stream: its client took none of the response to {} for {:?} \
                     (send timeout){}",
                    clock.what.get().map_or("a request", String::as_str),
                    self.timeout,
                    throttle::left_out(left_out, LOG_EVERY)
                );
            }
            if let Some(metrics) = &self.metrics {
                metrics.send_timed_out();
            }
        }
    }
}

/// A response body that keeps the clock of its HTTP/2 stream, if it is
/// sent on one (elsewhere it is a plain wrapper).
#[derive(Debug)]
pub(crate) struct Watched<B> {
    body: B,
    /// Looked up at the first poll, in the stream's task.
    clock: Option<Option<Arc<Clock>>>,
    what: Option<String>,
}

impl<B> Watched<B> {
    /// `what` names the request in the log.
    pub fn new(body: B, what: String) -> Watched<B> {
        Watched {
            body,
            clock: None,
            what: Some(what),
        }
    }
}

impl<B: Body + Unpin> Body for Watched<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let this = self.get_mut();
        let clock = this
            .clock
            .get_or_insert_with(|| CLOCK.try_with(Arc::clone).ok())
            .clone();
        let Some(clock) = clock else {
            return Pin::new(&mut this.body).poll_frame(cx);
        };
        if let Some(what) = this.what.take() {
            let _ = clock.what.set(what);
        }
        // hyper asks for more: what it had has gone on its way.
        clock.set(None);
        let polled = Pin::new(&mut this.body).poll_frame(cx);
        if let Poll::Ready(Some(Ok(_))) = &polled {
            clock.set(Some(Instant::now()));
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A connection's socket whose writes fail once blocked for the send
/// timeout: the client has taken nothing for that long.
#[derive(Debug)]
pub(crate) struct WriteTimeout<T> {
    inner: T,
    timeout: Duration,
    sleep: Pin<Box<Sleep>>,
    /// Since when writes have been blocked.
    blocked: Option<Instant>,
    remote: Peer,
    metrics: Option<Arc<Metrics>>,
}

impl<T> WriteTimeout<T> {
    pub fn new(
        inner: T,
        timeout: Duration,
        remote: Peer,
        metrics: Option<Arc<Metrics>>,
    ) -> WriteTimeout<T> {
        WriteTimeout {
            inner,
            timeout,
            sleep: Box::pin(tokio::time::sleep(timeout)),
            blocked: None,
            remote,
            metrics,
        }
    }

    /// Passes a write's outcome on; a write blocked for too long fails.
    fn check<R>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<R>>,
    ) -> Poll<io::Result<R>> {
        if polled.is_ready() {
            self.blocked = None;
            return polled;
        }
        if self.blocked.is_none() {
            let now = Instant::now();
            self.blocked = Some(now);
            self.sleep.as_mut().reset(now + self.timeout);
        }
        if self.sleep.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        if let Some(left_out) = CONNECTIONS_CLOSED.allow() {
            tracing::info!(
                remote = %self.remote,
                "closed a connection: its client took nothing for {:?} (send timeout){}",
                self.timeout,
                throttle::left_out(left_out, LOG_EVERY)
            );
        }
        if let Some(metrics) = &self.metrics {
            metrics.send_timed_out();
        }
        Poll::Ready(Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "send timeout: the client takes nothing",
        )))
    }
}

/// sendfile(2) under the same clock as writes: blocked for the send
/// timeout, it fails.
impl<T: SendFile> SendFile for WriteTimeout<T> {
    fn poll_send_file(
        &mut self,
        cx: &mut Context<'_>,
        file: BorrowedFd<'_>,
        offset: &mut u64,
        count: usize,
    ) -> Poll<io::Result<usize>> {
        let polled = self.inner.poll_send_file(cx, file, offset, count);
        self.check(cx, polled)
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for WriteTimeout<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, out)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for WriteTimeout<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write(cx, data);
        this.check(cx, polled)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.check(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_flush(cx);
        this.check(cx, polled)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_shutdown(cx);
        this.check(cx, polled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use http_body_util::BodyExt as _;
    use tokio::io::AsyncWriteExt as _;

    /// A peer that reads nothing: writes block, then fail after the
    /// timeout, and a peer that reads now and then keeps them going.
    #[tokio::test(start_paused = true)]
    async fn a_write_blocked_for_the_timeout_fails() {
        let (near, mut far) = tokio::io::duplex(1024);
        let remote = Peer::Tcp("127.0.0.1:1".parse().expect("address"));
        let mut io = WriteTimeout::new(near, Duration::from_secs(5), remote, None);
        let started = Instant::now();
        let err = io.write_all(&[0u8; 4096]).await.expect_err("blocked");
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), Duration::from_secs(5));

        let (near, mut far_reader) = tokio::io::duplex(1024);
        let mut io = WriteTimeout::new(near, Duration::from_secs(5), remote, None);
        let reader = tokio::spawn(async move {
            let mut buf = [0u8; 512];
            let mut total = 0;
            while total < 8192 {
                tokio::time::sleep(Duration::from_secs(4)).await;
                total += tokio::io::AsyncReadExt::read(&mut far_reader, &mut buf)
                    .await
                    .expect("read");
            }
        });
        io.write_all(&[0u8; 8192])
            .await
            .expect("progress every 4 s");
        reader.await.expect("reader");
        drop(far.shutdown().await);
    }

    /// Inside a stream's task, the body marks when hyper was handed data
    /// and when it asks again; outside one, it is a plain body.
    #[tokio::test(start_paused = true)]
    async fn the_body_keeps_its_streams_clock() {
        let clock = Arc::new(Clock::default());
        let body = http_body_util::Full::new(Bytes::from_static(b"data"));
        let mut watched = Watched::new(body, "GET /".into());
        CLOCK
            .scope(clock.clone(), async {
                let frame = watched.frame().await.expect("frame").expect("data");
                assert!(frame.is_data());
            })
            .await;
        assert_eq!(clock.handed(), Some(Instant::now()));
        assert_eq!(clock.what.get().map(String::as_str), Some("GET /"));
        CLOCK
            .scope(clock.clone(), async {
                assert!(watched.frame().await.is_none());
            })
            .await;
        assert_eq!(clock.handed(), None);

        let mut plain = Watched::new(http_body_util::Empty::<Bytes>::new(), "GET /".into());
        assert!(plain.frame().await.is_none());
    }

    /// A stream task whose body was handed data that hyper never passes
    /// on is dropped after the timeout; one waiting on its body is not.
    #[tokio::test(start_paused = true)]
    async fn a_stalled_stream_task_is_dropped_after_the_timeout() {
        struct Dropped(Arc<std::sync::atomic::AtomicBool>);
        impl Drop for Dropped {
            fn drop(&mut self) {
                self.0.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
        let exec = StreamExecutor {
            timeout: Duration::from_secs(60),
            metrics: None,
        };
        let stalled = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let waiting = Arc::new(std::sync::atomic::AtomicBool::new(false));
        for (flag, hand) in [(stalled.clone(), true), (waiting.clone(), false)] {
            hyper::rt::Executor::execute(&exec, async move {
                let _guard = Dropped(flag);
                if hand {
                    CLOCK.with(|c| c.set(Some(Instant::now())));
                }
                std::future::pending::<()>().await;
            });
        }
        tokio::time::sleep(Duration::from_secs(59)).await;
        assert!(!stalled.load(std::sync::atomic::Ordering::SeqCst));
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(stalled.load(std::sync::atomic::Ordering::SeqCst));
        assert!(!waiting.load(std::sync::atomic::Ordering::SeqCst));
    }
}
