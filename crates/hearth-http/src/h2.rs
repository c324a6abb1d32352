//! HTTP/2 connections: hyper's HTTP/2 server, with the head limits in
//! HPACK's terms and the two closes hyper leaves to its user, both a
//! GOAWAY that lets requests in flight finish: after the keep-alive
//! timeout without a request (hyper has no idle timeout for HTTP/2), and
//! when the server shuts down.
//!
//! What a stream buffers for sending is bounded: hyper is handed at most
//! [`CHUNK_HTTP2`] of a response at a time, h2 buffers at most [`SEND_BUFFER`]
//! of it beyond what the client's window lets through, and a stream
//! whose client never opens its window is reset after the send timeout
//! ([`StreamExecutor`]).
//!
//! Each request carries a handle to send interim responses (103 Early
//! Hints) on its stream, which hyper offers as patched in `vendor/hyper`.

use std::error::Error as StdError;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::{Body, Incoming};
use hyper::rt::bounds::Http2ServerConnExec;
use hyper::server::conn::http2;
use hyper::service::HttpService;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::config::ServeConfig;
use crate::guard::Shared;
use crate::sendbuf::CHUNK_HTTP2;
use crate::stall::StreamExecutor;

/// Bytes of a response one stream's h2 send buffer holds at most (hyper's
/// default is 400 KiB): two of the pieces hyper is handed.
const SEND_BUFFER: usize = 2 * CHUNK_HTTP2;

/// How the server's HTTP/2 connections are served.
#[derive(Debug)]
pub(crate) struct Http2 {
    builder: http2::Builder<StreamExecutor>,
    /// How long a connection may go without a request in flight.
    idle: Duration,
}

impl Http2 {
    pub fn new(config: &ServeConfig) -> Http2 {
        let mut builder = http2::Builder::new(StreamExecutor {
            timeout: config.send_timeout,
            metrics: config.observer.metrics.clone(),
        });
        builder
            .timer(TokioTimer::new())
            .max_concurrent_streams(config.max_concurrent_streams)
            .max_send_buf_size(SEND_BUFFER)
            // 103 Early Hints (hyper as patched in vendor/hyper).
            .informational_responses(true)
            // The head limits in HPACK's terms: 32 bytes per field on top
            // of its name and value.
            .max_header_list_size(
                u32::try_from(config.max_header_size + 32 * config.max_headers).unwrap_or(u32::MAX),
            );
        // Without keep-alive, a connection still closes once it has had
        // no request for as long as a client has to send one.
        let idle = match config.keep_alive_timeout {
            d if d.is_zero() => config.header_timeout,
            d => d,
        };
        Http2 { builder, idle }
    }

    /// Serves one connection until it ends. It is closed gracefully once
    /// idle for too long or when `stop` changes (shutdown), and dropped
    /// if still idle after that: the client did not close.
    pub async fn serve<I, S>(
        &self,
        io: I,
        service: S,
        shared: Arc<Shared>,
        mut stop: watch::Receiver<()>,
    ) -> Result<(), hyper::Error>
    where
        I: AsyncRead + AsyncWrite + Unpin + 'static,
        S: HttpService<Incoming>,
        S::Error: Into<Box<dyn StdError + Send + Sync>>,
        S::ResBody: 'static,
        <S::ResBody as Body>::Error: Into<Box<dyn StdError + Send + Sync>>,
        StreamExecutor: Http2ServerConnExec<S::Future, S::ResBody>,
    {
        let connection = self.builder.serve_connection(TokioIo::new(io), service);
        let idle = until_idle(shared.clone(), self.idle);
        tokio::pin!(connection, idle);
        let mut closing = false;
        loop {
            tokio::select! {
                ended = connection.as_mut() => return ended,
                _ = stop.changed(), if !closing => {}
                _ = &mut idle => {
                    if closing {
                        // Still idle after the GOAWAY: the client does
                        // not close.
                        return Ok(());
                    }
                    idle.set(until_idle(shared.clone(), self.idle));
                }
            }
            if !closing {
                // GOAWAY: requests in flight finish.
                closing = true;
                connection.as_mut().graceful_shutdown();
            }
        }
    }
}

/// Completes once an HTTP/2 connection has had no request in flight for
/// `limit` (give or take a quarter of it): the caller then closes it
/// gracefully (GOAWAY), as nginx's `keepalive_timeout` does.
async fn until_idle(shared: Arc<Shared>, limit: Duration) {
    let tick = (limit / 4).max(Duration::from_millis(10));
    let mut seen = shared.activity();
    let mut since = Instant::now();
    loop {
        tokio::time::sleep(tick).await;
        let now = shared.activity();
        let (calls, done) = now;
        if now != seen || calls > done {
            seen = now;
            since = Instant::now();
        } else if since.elapsed() >= limit {
            return;
        }
    }
}
