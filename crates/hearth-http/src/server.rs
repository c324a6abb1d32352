//! The accept loop, HTTP/1.1 connections (HTTP/2 ones are served by
//! [`h2`](crate::h2)), and the request handler: a static file, or the
//! request handed to a worker and its response read back.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::BytesMut;
use hearth_pool::{Paths, Pool};
use http::{HeaderValue, Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::sync::Semaphore;

use crate::cgi::{self, Connection};
use crate::classic::{self, ClassicSite};
use crate::config::ServeConfig;
use crate::dashboard::Served;
use crate::framing::Limits;
use crate::guard::{self, GuardedIo, Timeouts, Tracked};
use crate::h2::Http2;
use crate::listener::{Listener, Peer, Socket};
use crate::mixed::{Decision, MixedSite};
use crate::observe::{Observed, Record};
use crate::protocol::{self, Negotiation, Protocol};
use crate::response::{self, Interim, ResponseBody};
use crate::routes::{Pools, Target};
use crate::sendbuf::{self, Budget};
use crate::stall::{Watched, WriteTimeout};
use crate::throttle::{self, Throttle};
use crate::tls::TlsConfig;
use crate::{compress, offload, request, static_files, xdebug};

/// What answers the requests that are not static files.
#[derive(Debug)]
enum Backend {
    /// Warm workers running the worker script.
    Workers(Pool),
    /// Several pools of warm workers, each request to the one its route
    /// picks.
    Routed(Arc<Pools>),
    /// Classic mode: a php-fpm pool running the site's scripts.
    Classic(Arc<ClassicSite>),
    /// A mixed site: the front controller in the workers, the other
    /// scripts in a php-fpm pool.
    Mixed(Pool, Arc<MixedSite>),
}

/// What runs one request: [`Backend`]'s, or its route's [`Target`].
#[derive(Clone, Copy)]
enum Runs<'a> {
    Workers(&'a Pool),
    Classic(&'a Arc<ClassicSite>),
    Mixed(&'a Pool, &'a MixedSite),
}

#[derive(Debug)]
struct App {
    backend: Backend,
    config: ServeConfig,
    /// Turns requests into what the workers receive.
    requests: request::Encoder,
    /// What responses may hold while their clients take them.
    responses: sendbuf::Limits,
    /// Requests of one connection that may wait for or hold a worker.
    connection_workers: usize,
}

/// Serves HTTP (see [`ServeConfig::tls`] and [`ServeConfig::h2c`]) on `listener` until `shutdown` completes, then stops
/// accepting, lets in-flight requests finish within the grace period, and
/// returns. The pool is left running; the caller stops it.
pub async fn serve(
    listener: impl Into<Listener>,
    pool: Pool,
    config: ServeConfig,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let workers = pool.config().workers;
    serve_app(
        listener.into(),
        Backend::Workers(pool),
        workers,
        config,
        shutdown,
    )
    .await
}

/// Serves several worker pools (see [`Pools`]) as [`serve`] serves one:
/// each request goes to the pool its route picks. The pools are left
/// running; the caller stops them.
pub async fn serve_pools(
    listener: impl Into<Listener>,
    pools: Arc<Pools>,
    config: ServeConfig,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let workers = pools.most_workers();
    serve_app(
        listener.into(),
        Backend::Routed(pools),
        workers,
        config,
        shutdown,
    )
    .await
}

/// Serves a classic site (see [`ClassicSite`]) as [`serve`] serves a
/// worker pool: the same protocols, limits, timeouts and shutdown. The
/// php-fpm pool is left running; the caller stops it.
pub async fn serve_classic(
    listener: impl Into<Listener>,
    site: Arc<ClassicSite>,
    config: ServeConfig,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let children = site.children();
    serve_app(
        listener.into(),
        Backend::Classic(site),
        children,
        config,
        shutdown,
    )
    .await
}

/// Serves a mixed site (see [`MixedSite`]): the front controller's
/// requests go to `pool`, the other scripts' to the site's php-fpm pool.
/// Both pools are left running; the caller stops them.
pub async fn serve_mixed(
    listener: impl Into<Listener>,
    pool: Pool,
    site: Arc<MixedSite>,
    config: ServeConfig,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let workers = pool.config().workers.max(site.site().children());
    serve_app(
        listener.into(),
        Backend::Mixed(pool, site),
        workers,
        config,
        shutdown,
    )
    .await
}

async fn serve_app(
    listener: Listener,
    backend: Backend,
    workers: usize,
    config: ServeConfig,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let app = Arc::new(App {
        requests: request::Encoder::new(&config),
        responses: sendbuf::Limits {
            buffer: config.response_buffer_size,
            memory: Budget::new(config.response_memory),
            disk: Budget::new(config.max_response_spool),
            dir: None,
        },
        connection_workers: config.connection_workers.unwrap_or(workers).max(1),
        backend,
        config,
    });
    let config = &app.config;
    let limits = Limits {
        request_line: config.max_request_line,
        header_size: config.max_header_size,
        headers: config.max_headers,
    };
    let timeouts = Timeouts {
        header: config.header_timeout,
        body: config.body_timeout,
        keep_alive: config.keep_alive_timeout,
    };
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .keep_alive(!config.keep_alive_timeout.is_zero())
        // The guard below enforces the head limits and timeouts; hyper's
        // own are a backstop that must not be the tighter ones.
        .header_read_timeout(
            config.keep_alive_timeout.max(config.header_timeout) + config.header_timeout,
        )
        .max_buf_size((limits.request_line + limits.header_size + 1024).max(400 << 10));
    if config.max_headers > 100 {
        // Up to 100 hyper keeps headers on the stack.
        builder.max_headers(config.max_headers);
    }
    let http1 = Arc::new(builder);
    let http2 = Arc::new(Http2::new(config));
    let negotiation = Arc::new(Negotiation {
        tls: config.tls.as_ref().map(TlsConfig::acceptor),
        h2c: config.h2c,
        timeout: config.header_timeout,
    });
    // HTTP/2 connections are closed by hand (when idle, or on shutdown):
    // each holds a receiver until it ends.
    let (stopping, _) = tokio::sync::watch::channel(());
    let slots = Arc::new(tokio::sync::Semaphore::new(config.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    // Connection tasks, so that those still open when the grace period
    // ends can be closed.
    let mut connections = tokio::task::JoinSet::new();
    // `SERVER_ADDR` over a unix socket: `unix:` and its path.
    let unix_path = match listener.local_addr() {
        Ok(crate::listener::ListenAddr::Unix(path)) => path,
        _ => std::path::PathBuf::new(),
    };
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            (slot, accepted) = accept(&listener, &slots) => {
                let (stream, remote) = match accepted {
                    Ok(pair) => pair,
                    Err(e) => {
                        // Out of file descriptors and the like: back off
                        // instead of spinning on the error.
                        tracing::error!("accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let https = config.tls.is_some();
                let conn = match (&stream, remote) {
                    (Socket::Tcp(tcp), Peer::Tcp(remote)) => {
                        let Ok(local) = tcp.local_addr() else { continue };
                        let mut conn = Connection::new(remote, local, https);
                        conn.trusted = cgi::is_trusted(&config.trusted_proxies, remote.ip());
                        conn
                    }
                    _ => {
                        let mut conn = Connection::unix(&unix_path, https);
                        conn.trusted = config.trust_unix_peers;
                        conn
                    }
                };
                let conn = Arc::new(conn);
                let turns = Arc::new(tokio::sync::Semaphore::new(app.connection_workers));
                let app = app.clone();
                let shared = Arc::new(guard::Shared::default());
                let guard_shared = shared.clone();
                let service = service_fn(move |mut req: Request<Incoming>| {
                    let (app, conn, shared, turns) = (app.clone(), conn.clone(), shared.clone(), turns.clone());
                    async move {
                        let begun = shared.begin();
                        let in_flight = begun.in_flight;
                        if let Some(status) = begun.refused {
                            let response = response::closing(response::error_page(status)).map(Observed::unobserved);
                            return Ok::<_, Infallible>(response.map(|b| Tracked::new(Watched::new(b, String::new()), in_flight)));
                        }
                        if let Some(target) = begun.target {
                            req.extensions_mut().insert(target);
                        }
                        req.extensions_mut().insert(shared);
                        let what = match conn.remote() {
                            (ip, "") => format!("{} {} from {ip}", req.method(), req.uri().path()),
                            (ip, port) => format!("{} {} from {ip}:{port}", req.method(), req.uri().path()),
                        };
                        let response = handle(req, app, conn, turns).await?;
                        Ok(response.map(|b| Tracked::new(Watched::new(b, what), in_flight)))
                    }
                });
                let watcher = graceful.watcher();
                let stop = stopping.subscribe();
                let (http1, http2) = (http1.clone(), http2.clone());
                let negotiation = negotiation.clone();
                let (send_timeout, metrics) = (config.send_timeout, config.observer.metrics.clone());
                // Files sent by the kernel, and what counts their bytes.
                let zero_copy = config.sendfile.then(|| metrics.as_ref().map(|m| m.sendfile_bytes()));
                connections.spawn(async move {
                    let negotiated = protocol::negotiate(stream, &negotiation, remote).await.map(
                        |(stream, protocol)| {
                            let plain = stream.is_plain();
                            (WriteTimeout::new(stream, send_timeout, remote, metrics), protocol, plain)
                        },
                    );
                    let ended = match negotiated {
                        None => Ok(()),
                        Some((stream, Protocol::Http1, plain)) => {
                            let io = GuardedIo::http1(stream, limits, timeouts, guard_shared, remote);
                            let io = match zero_copy {
                                Some(sent) if plain => io.with_zero_copy(sent),
                                _ => io,
                            };
                            watcher.watch(http1.serve_connection(TokioIo::new(io), service)).await
                        }
                        Some((stream, Protocol::Http2, _)) => {
                            drop(watcher);
                            http2.serve(stream, service, guard_shared, stop).await
                        }
                    };
                    match ended {
                        // hyper refused a request the guard let through:
                        // its 400 (or 414, 431) has no reason to give.
                        Err(e) if e.is_parse() || e.is_parse_too_large() => {
                            tracing::warn!(%remote, "refused a request: {e}");
                        }
                        Err(e) => connection_error(remote, &e),
                        Ok(()) => {}
                    }
                    drop(slot);
                });
            }
            _ = &mut shutdown => break,
        }
    }
    drop(listener);
    tracing::info!("stopped accepting connections; waiting for in-flight requests");
    let _ = stopping.send(());
    let all_closed = async {
        tokio::join!(graceful.shutdown(), stopping.closed());
    };
    tokio::select! {
        _ = all_closed => tracing::info!("all connections closed"),
        _ = tokio::time::sleep(app.config.grace_period) => {
            tracing::warn!(
                "grace period of {:?} over with requests still in flight; closing their connections",
                app.config.grace_period
            );
            connections.abort_all();
        }
    }
    Ok(())
}

/// How often a client's HTTP/2 abuse is logged at most.
const ABUSE_LOG_EVERY: Duration = Duration::from_secs(10);

/// HTTP/2 connections closed for abuse (rapid reset, frame floods): one
/// line per connection would let any client fill the log.
static HTTP2_ABUSE: Throttle = Throttle::new(ABUSE_LOG_EVERY);

/// Requests refused after waiting for their connection's turn: one client
/// with 128 streams would otherwise write 128 lines.
static TURNS_OUT: Throttle = Throttle::new(ABUSE_LOG_EVERY);

/// Logs why a connection ended in an error: most are ordinary (a client
/// that went away) and logged at debug; an HTTP/2 connection closed for
/// abuse is a warning, at most one every [`ABUSE_LOG_EVERY`], which says
/// how many were left out.
fn connection_error(remote: Peer, e: &hyper::Error) {
    let reason = {
        let mut source = std::error::Error::source(e);
        let mut reason = None;
        while let Some(error) = source {
            if let Some(h2) = error.downcast_ref::<::h2::Error>() {
                reason = h2.is_library().then(|| h2.reason()).flatten();
                break;
            }
            source = error.source();
        }
        reason
    };
    if reason == Some(::h2::Reason::ENHANCE_YOUR_CALM) {
        if let Some(left_out) = HTTP2_ABUSE.allow() {
            tracing::warn!(
                %remote,
                "closed an HTTP/2 connection whose client reset or sent too many streams or frames \
                 (rapid reset?): GOAWAY ENHANCE_YOUR_CALM{}",
                throttle::left_out(left_out, ABUSE_LOG_EVERY)
            );
        }
        return;
    }
    tracing::debug!(%remote, "connection ended: {e}");
}

/// Takes a connection slot, then a connection. With every slot taken,
/// nothing is accepted: new connections wait in the listen backlog.
async fn accept(
    listener: &Listener,
    slots: &Arc<tokio::sync::Semaphore>,
) -> (
    Option<tokio::sync::OwnedSemaphorePermit>,
    std::io::Result<(Socket, Peer)>,
) {
    let slot = match slots.clone().try_acquire_owned() {
        Ok(slot) => Some(slot),
        Err(_) => {
            tracing::warn!("max_connections reached: new connections wait until one closes");
            slots.clone().acquire_owned().await.ok()
        }
    };
    (slot, listener.accept().await)
}

/// Answers a request, recording it for metrics and the access log when
/// they are on.
async fn handle(
    req: Request<Incoming>,
    app: Arc<App>,
    conn: Arc<Connection>,
    turns: Arc<Semaphore>,
) -> Result<Response<Observed<ResponseBody>>, Infallible> {
    if !app.config.observer.is_on() {
        let response = respond(req, app, conn, turns).await?;
        return Ok(response.map(Observed::unobserved));
    }
    // Recorded when the response has been sent, or when this future is
    // dropped first (the client went away).
    let record = Record::begin(&app.config.observer, &conn, &req);
    let response = respond(req, app, conn, turns).await?;
    Ok(record.attach(response))
}

/// `turns` holds the connection's places in PHP: a request waits for one
/// (within the queue timeout) before it joins the pool's line, and keeps
/// it until its worker is done with it. With fewer places than workers
/// per connection, one client's backlog waits on its own connection, and
/// the pool's line, first come first served, interleaves connections.
async fn respond(
    req: Request<Incoming>,
    app: Arc<App>,
    conn: Arc<Connection>,
    turns: Arc<Semaphore>,
) -> Result<Response<ResponseBody>, Infallible> {
    let received = SystemTime::now();
    let (parts, incoming) = req.into_parts();
    let config = &app.config;
    let cx = classic::Context {
        config,
        requests: &app.requests,
        responses: &app.responses,
        conn: &conn,
    };
    // What runs this request, and its time limit once a worker has it.
    let (runs, request_timeout) = match &app.backend {
        Backend::Workers(pool) => (Runs::Workers(pool), config.request_timeout),
        Backend::Routed(pools) => match pools.pick(&parts) {
            Ok(route) => (
                match &route.target {
                    Target::Workers(pool) => Runs::Workers(pool),
                    Target::Classic(site, _) => Runs::Classic(site),
                    Target::Mixed(pool, mixed) => Runs::Mixed(pool, mixed),
                },
                route.request_timeout,
            ),
            Err(status) => return Ok(response::error_page(status)),
        },
        Backend::Classic(site) => (Runs::Classic(site), config.request_timeout),
        Backend::Mixed(pool, mixed) => (Runs::Mixed(pool, mixed), config.request_timeout),
    };
    let (pool, static_first) = match runs {
        Runs::Workers(pool) => (pool, true),
        Runs::Classic(site) => {
            let turn = match wait_turn(&turns, site.queue_timeout(), &conn, &app).await {
                Some(turn) => turn,
                None => return Ok(unavailable(config)),
            };
            return Ok(classic::respond(site, parts, incoming, Box::new(turn), cx).await);
        }
        Runs::Mixed(pool, mixed) => match mixed.decide(&parts) {
            Decision::Worker { static_first } => (pool, static_first),
            Decision::Answer(response) => return Ok(response),
            Decision::Classic(routed) => {
                let site = mixed.site();
                let turn = match wait_turn(&turns, site.queue_timeout(), &conn, &app).await {
                    Some(turn) => turn,
                    None => return Ok(unavailable(config)),
                };
                let turn = Box::new(turn);
                return Ok(classic::answer(site, routed, parts, incoming, turn, cx).await);
            }
        },
    };

    if static_first && pool.config().document_root.is_some() {
        let paths = pool.paths();
        if let Some(root) = &paths.document_root {
            let disk = static_files::Disk {
                compression: config.compression,
                inline: config.sendfile,
            };
            if let Some(response) = static_files::respond(root, disk, &parts).await {
                return Ok(response);
            }
        }
    }

    let mut parts = parts;
    offload::announce(&mut parts.headers, &config.sendfile_roots);
    let mut request = match app.requests.read(parts, incoming, received, pool).await {
        Ok(request) => request,
        Err(answer) => return Ok(answer),
    };
    let queue_timeout = pool.config().queue_timeout;
    let Some(turn) = wait_turn(&turns, queue_timeout, &conn, &app).await else {
        return Ok(unavailable(config));
    };
    let encode = |buf: &mut BytesMut, id: u32, paths: &Arc<Paths>| {
        app.requests.encode(&request, &conn, paths, buf, id);
    };
    let asked = Instant::now();
    // Debug mode: the request's worker starts with its Xdebug triggers,
    // and a request a debugger may hold has no time limit.
    let mut session_cookies = Vec::new();
    let (dispatched, held) = if pool.config().debug {
        let parts = &request.parts;
        let cookies: Vec<&[u8]> = parts
            .headers
            .get_all(http::header::COOKIE)
            .iter()
            .map(HeaderValue::as_bytes)
            .collect();
        let triggers = xdebug::Triggers::find(
            parts.uri.query(),
            request.form_body(),
            request.post_fields(),
            cookies.iter().copied(),
        );
        let held = triggers.debugging() || xdebug::always_debugging(pool.config());
        let fresh = hearth_pool::Fresh {
            env: triggers.env(),
            held,
        };
        session_cookies = triggers.session_cookies();
        (
            pool.dispatch_fresh(&fresh, request.len(), encode).await,
            held,
        )
    } else {
        (pool.dispatch(request.len(), encode).await, false)
    };
    let mut lease = match dispatched {
        Ok(lease) => lease,
        Err(e) => return Ok(failure(&e, config)),
    };
    let deadline = request_timeout
        .filter(|_| !held)
        .map(|limit| tokio::time::Instant::now() + limit);
    if let Some(deadline) = deadline {
        lease.set_deadline(deadline);
    }
    let pid = lease.pid();
    // Files the worker reads, and the connection's place in PHP, stay
    // until the request has ended in the worker.
    let keep: response::Keep = Box::new((request.take_files(), turn));
    let interim_h2 = request
        .parts
        .extensions
        .remove::<hyper::ext::InformationalSender>();
    let parts = &request.parts;
    lease.set_current(
        parts.method.as_str(),
        parts.uri.path_and_query().map_or("/", |pq| pq.as_str()),
    );
    let reading = response::Reading {
        deadline,
        // Early hints: an HTTP/1.0 client does not expect an interim
        // response.
        interim: match parts.version {
            http::Version::HTTP_2 => interim_h2.map_or(Interim::Dropped, Interim::Http2),
            http::Version::HTTP_11 => parts
                .extensions
                .get::<Arc<guard::Shared>>()
                .map_or(Interim::Dropped, |s| Interim::Http1(s)),
            _ => Interim::Dropped,
        },
        limits: &app.responses,
        chunk: match parts.version {
            http::Version::HTTP_2 => sendbuf::CHUNK_HTTP2,
            _ => sendbuf::CHUNK_HTTP1,
        },
    };
    let mut response = match response::read(lease, &parts.method, keep, reading).await {
        // The worker is free by now: the head is in, and the body is
        // dropped.
        Ok(response) if offload::wanted(&response) => {
            let asked = offload::Request {
                method: &parts.method,
                uri: &parts.uri,
                headers: &parts.headers,
                extensions: &parts.extensions,
                pid,
            };
            offload::respond(response, asked, &config.sendfile_roots, config.compression).await
        }
        Ok(response) if config.compression => {
            compress::php_response(response, &parts.method, &parts.headers).await
        }
        Ok(response) => response,
        Err(e) => {
            tracing::error!(pid, method = %parts.method, uri = %parts.uri, "{e}");
            failure(&e, config)
        }
    };
    for cookie in session_cookies {
        if let Ok(cookie) = HeaderValue::try_from(cookie) {
            response
                .headers_mut()
                .append(http::header::SET_COOKIE, cookie);
        }
    }
    if config.observer.is_on() {
        response.extensions_mut().insert(Served {
            pid,
            waited: asked.elapsed(),
        });
    }
    Ok(response)
}

/// Waits up to `queue_timeout` for one of the connection's places in PHP.
async fn wait_turn(
    turns: &Arc<Semaphore>,
    queue_timeout: Duration,
    conn: &Connection,
    app: &App,
) -> Option<tokio::sync::OwnedSemaphorePermit> {
    match tokio::time::timeout(queue_timeout, turns.clone().acquire_owned()).await {
        Ok(Ok(turn)) => Some(turn),
        _ => {
            if let Some(left_out) = TURNS_OUT.allow() {
                tracing::warn!(
                    remote = %conn.remote().0,
                    "503: a request waited {:?} for its connection's turn ({} of its requests \
                     in PHP){}",
                    queue_timeout,
                    app.connection_workers,
                    throttle::left_out(left_out, ABUSE_LOG_EVERY)
                );
            }
            None
        }
    }
}

fn failure(e: &hearth_pool::Error, config: &ServeConfig) -> Response<ResponseBody> {
    if e.is_timed_out() {
        return response::error_page(StatusCode::GATEWAY_TIMEOUT);
    }
    if e.is_unavailable() {
        tracing::warn!("503: {e}");
        return unavailable(config);
    }
    response::error_page(StatusCode::BAD_GATEWAY)
}

fn unavailable(config: &ServeConfig) -> Response<ResponseBody> {
    let mut response = response::error_page(StatusCode::SERVICE_UNAVAILABLE);
    response.headers_mut().insert(
        http::header::RETRY_AFTER,
        HeaderValue::from(config.retry_after),
    );
    response
}
