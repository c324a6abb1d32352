//! Per-request observation: metrics and the access log, recorded when a
//! response has been sent (or the client went away first).
//!
//! [`Observed`] wraps any response body, counts the bytes it sends and
//! records the request once: when the body ends, fails, or is dropped.
//! Off by default; when neither metrics nor an access log is configured,
//! a request pays one branch for it.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Instant, SystemTime};

use bytes::Buf;
use http::{Method, Request, Response, Uri, Version};
use hyper::body::{Body, Frame, SizeHint};

use crate::access_log::{AccessLog, Entry};
use crate::cgi::Connection;
use crate::dashboard::Served;
use crate::metrics::Metrics;

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
    served: Option<Served>,
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
            served: None,
            bytes: 0,
        }
    }

    /// Takes the response's status and worker; the record is made once
    /// its body has been sent.
    pub fn attach<B>(mut self, response: Response<B>) -> Response<Observed<B>> {
        self.status = Some(response.status().as_u16());
        let (mut parts, body) = response.into_parts();
        self.served = parts.extensions.remove::<Served>();
        Response::from_parts(
            parts,
            Observed {
                body,
                record: Some(Box::new(self)),
            },
        )
    }
}

impl Drop for Record {
    fn drop(&mut self) {
        let status = self.status.unwrap_or(CLIENT_CLOSED);
        let duration = self.start.elapsed();
        if let Some(metrics) = &self.observer.metrics {
            metrics.end(&self.method, self.uri.path(), status, duration, self.served);
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
                pid: self.served.map(|s| s.pid),
            });
        }
    }
}

/// A response body that counts what it sends and records its request
/// once: when the body ends, fails, or is dropped (with the connection,
/// when the client went away).
#[derive(Debug)]
pub struct Observed<B> {
    body: B,
    /// None once recorded, and for a request not observed.
    record: Option<Box<Record>>,
}

impl<B> Observed<B> {
    /// A body passed through unobserved (observation off, or a request
    /// the connection guard refused before it reached the handler).
    pub(crate) fn unobserved(body: B) -> Observed<B> {
        Observed { body, record: None }
    }
}

impl<B> Body for Observed<B>
where
    B: Body + Unpin,
    B::Data: Buf,
{
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.body).poll_frame(cx);
        if let Some(record) = &mut this.record {
            match &polled {
                Poll::Ready(Some(Ok(frame))) => {
                    if let Some(data) = frame.data_ref() {
                        record.bytes += data.remaining() as u64;
                    }
                }
                // The end, or a failure that cuts the response: recorded
                // now (the record writes itself when dropped).
                Poll::Ready(None | Some(Err(_))) => this.record = None,
                Poll::Pending => {}
            }
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bytes::Bytes;
    use http_body_util::{BodyExt as _, StreamBody};

    use super::*;
    use crate::access_log::AccessLogFormat;

    /// Waits for the access log to hold `lines` lines and returns them.
    fn lines(path: &std::path::Path, lines: usize) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let found: Vec<String> = text.lines().map(str::to_owned).collect();
            if found.len() >= lines || Instant::now() > deadline {
                return found;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn observer(path: &std::path::Path) -> (Observer, Arc<Connection>) {
        let log = AccessLog::start(AccessLogFormat::Common, Some(path)).expect("access log");
        let observer = Observer {
            metrics: None,
            access_log: Some(log),
        };
        let addr = "127.0.0.1:8080".parse().expect("address");
        (observer, Arc::new(Connection::new(addr, addr, false)))
    }

    /// The request is recorded when its body ends, with every byte sent,
    /// and not a second time when the body is dropped later.
    #[tokio::test]
    async fn a_body_is_recorded_once_when_it_ends() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("access.log");
        let (observer, conn) = observer(&path);
        let request = Request::get("/streamed").body(()).expect("request");
        let chunks = [
            Ok::<_, std::io::Error>(Frame::data(Bytes::from("hello, "))),
            Ok(Frame::data(Bytes::from("world"))),
        ];
        let body = StreamBody::new(futures_util::stream::iter(chunks));
        let response = Record::begin(&observer, &conn, &request).attach(Response::new(body));
        let mut body = response.into_body();
        while let Some(frame) = body.frame().await {
            frame.expect("frame");
        }
        let found = lines(&path, 1);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains("\"GET /streamed HTTP/1.1\" 200 12 "),
            "{}",
            found[0]
        );
        drop(body);
        std::thread::sleep(Duration::from_millis(50));
        let text = std::fs::read_to_string(&path).expect("access log");
        assert_eq!(text.lines().count(), 1, "{text}");
    }

    /// A request whose response never came (the client went away) is
    /// recorded with nginx's 499.
    #[tokio::test]
    async fn a_request_dropped_before_its_response_is_a_499() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("access.log");
        let (observer, conn) = observer(&path);
        let request = Request::post("/gone").body(()).expect("request");
        drop(Record::begin(&observer, &conn, &request));
        let found = lines(&path, 1);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains("\"POST /gone HTTP/1.1\" 499 - "),
            "{}",
            found[0]
        );
    }
}
