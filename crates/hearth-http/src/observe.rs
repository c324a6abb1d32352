//! Per-request observation: metrics and the access log, recorded when a
//! response has been sent (or the client went away first).
//!
//! Off by default; when neither metrics nor an access log is configured,
//! a request pays one branch for it.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Instant, SystemTime};

use bytes::Bytes;
use http::{Method, Request, Response, Uri, Version};
use hyper::body::{Body, Frame, SizeHint};

use crate::access_log::{AccessLog, Entry};
use crate::cgi::Connection;
use crate::metrics::Metrics;
use crate::response::{ResponseBody, StreamError};

/// What the HTTP front records about each request.
#[derive(Debug, Clone, Default)]
pub struct Observer {
    /// Request counts and latencies, for `/metrics`.
    pub metrics: Option<Arc<Metrics>>,
    /// One line per request.
    pub access_log: Option<AccessLog>,
}

impl Observer {
    pub fn is_on(&self) -> bool {
        self.metrics.is_some() || self.access_log.is_some()
    }
}

/// The worker that answered, carried from the handler to its [`Record`]
/// in the response's extensions (only while observing).
#[derive(Debug, Clone, Copy)]
pub(crate) struct WorkerPid(pub u32);

/// The status recorded for a request whose client went away before the
/// response was ready (nginx's 499).
const CLIENT_CLOSED: u16 = 499;

/// One request being observed; recorded when dropped.
#[derive(Debug)]
pub(crate) struct Record {
    observer: Observer,
    conn: Arc<Connection>,
    start: Instant,
    time: SystemTime,
    method: Method,
    uri: Uri,
    version: Version,
    status: Option<u16>,
    pid: Option<u32>,
    bytes: u64,
}

impl Record {
    pub fn begin<B>(observer: &Observer, conn: &Arc<Connection>, req: &Request<B>) -> Record {
        if let Some(metrics) = &observer.metrics {
            metrics.begin();
        }
        Record {
            observer: observer.clone(),
            conn: conn.clone(),
            start: Instant::now(),
            time: SystemTime::now(),
            method: req.method().clone(),
            uri: req.uri().clone(),
            version: req.version(),
            status: None,
            pid: None,
            bytes: 0,
        }
    }

    /// Takes the response's status and worker; the record is made once
    /// its body has been sent.
    pub fn attach(mut self, response: Response<ResponseBody>) -> Response<ResponseBody> {
        self.status = Some(response.status().as_u16());
        let (mut parts, body) = response.into_parts();
        self.pid = parts.extensions.remove::<WorkerPid>().map(|p| p.0);
        Response::from_parts(
            parts,
            ResponseBody::Observed(Box::new(Observed { body, record: self })),
        )
    }
}

impl Drop for Record {
    fn drop(&mut self) {
        let status = self.status.unwrap_or(CLIENT_CLOSED);
        let duration = self.start.elapsed();
        if let Some(metrics) = &self.observer.metrics {
            metrics.end(&self.method, status, duration.as_secs_f64());
        }
        if let Some(log) = &self.observer.access_log {
            let (remote_ip, remote_port) = self.conn.remote();
            log.write(&Entry {
                remote_ip,
                remote_port,
                time: self.time,
                method: self.method.as_str(),
                uri: &self.uri,
                version: self.version,
                status,
                bytes: self.bytes,
                duration,
                pid: self.pid,
            });
        }
    }
}

/// A response body that counts what it sends and records the request
/// when it is done (or dropped with the connection).
#[derive(Debug)]
pub struct Observed {
    body: ResponseBody,
    record: Record,
}

impl Observed {
    pub(crate) fn poll_frame(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, StreamError>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled {
            if let Some(data) = frame.data_ref() {
                self.record.bytes += data.len() as u64;
            }
        }
        polled
    }

    pub(crate) fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    pub(crate) fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
