//! The admin listener: `/metrics`, `/healthz` and `/readyz` on an address
//! of their own (opt-in), so that they are never reachable on the public
//! port, where every path belongs to the app.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;

use crate::metrics::{Metrics, PoolReport};

/// What the admin endpoints report on.
#[derive(Debug, Clone)]
pub struct AdminState {
    pub pool: Arc<dyn PoolReport>,
    pub metrics: Arc<Metrics>,
    /// Set once the server begins to shut down: `/readyz` answers 503 from
    /// then on, so that a load balancer stops sending requests.
    pub stopping: Arc<AtomicBool>,
}

/// Serves the admin endpoints on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, state: AdminState) {
    let state = Arc::new(state);
    loop {
        let (stream, remote) = match listener.accept().await {
            Ok(pair) => pair,
            Err(e) => {
                tracing::error!("admin listener: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let state = state.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<Incoming>| {
                let state = state.clone();
                async move { Ok::<_, Infallible>(answer(&state, &req)) }
            });
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(TokioIo::new(stream), service);
            if let Err(e) = connection.await {
                tracing::debug!(%remote, "admin connection ended: {e}");
            }
        });
    }
}

fn text(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn answer(state: &AdminState, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    const PLAIN: &str = "text/plain; charset=utf-8";
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut response = text(
            StatusCode::METHOD_NOT_ALLOWED,
            PLAIN,
            "method not allowed\n".into(),
        );
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    match req.uri().path() {
        "/metrics" => text(
            StatusCode::OK,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            state.metrics.render(),
        ),
        "/healthz" => text(StatusCode::OK, PLAIN, "ok\n".into()),
        "/readyz" => {
            let report = state.pool.report();
            let live = report.live;
            if state.stopping.load(Ordering::Acquire) || report.stopping {
                text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    PLAIN,
                    "not ready: shutting down\n".into(),
                )
            } else if live == 0 {
                text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    PLAIN,
                    "not ready: no live worker\n".into(),
                )
            } else {
                text(
                    StatusCode::OK,
                    PLAIN,
                    format!("ready: {live} live workers\n"),
                )
            }
        }
        _ => text(
            StatusCode::NOT_FOUND,
            PLAIN,
            "not found: try /metrics, /healthz or /readyz\n".into(),
        ),
    }
}
