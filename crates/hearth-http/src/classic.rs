//! Classic mode's requests: each one routed as nginx + Debian's
//! `snippets/fastcgi-php.conf` would route it ([`hearth_classic::Router`]),
//! then answered from disk, with a redirect or an error page, or by a
//! php-fpm child over FastCGI ([`hearth_fpm::fastcgi`]) with the params
//! nginx's `fastcgi.conf` sends.
//!
//! The body goes to php-fpm once received, as nginx sends it with
//! `fastcgi_request_buffering on`; the response is read at php-fpm's pace
//! into the same spool as a worker's (memory, then a temporary file), so
//! a slow client never holds a php-fpm child.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use hearth_classic::{normalize_uri, PhpTarget, Route, Router};
use hearth_fpm::fastcgi;
use hearth_proto::message::ResponseHead;
use http::request::Parts;
use http::{HeaderValue, Response, StatusCode};
use hyper::body::Incoming;
use tokio::io::AsyncRead;
use tokio::time::Instant;

use crate::body::Held;
use crate::cgi::{self, Connection, ScriptVars};
use crate::config::ServeConfig;
use crate::request::Encoder;
use crate::response::{self, Keep, ResponseBody};
use crate::sendbuf::{self, PushError};
use crate::target::{self, RawTarget};
use crate::{compress, static_files};

/// A classic site: its document root, how requests are routed in it, and
/// the php-fpm pool that runs its scripts.
#[derive(Debug)]
pub struct ClassicSite {
    /// The root as given (a `current` symlink stays one): resolved again
    /// by [`ClassicSite::reroute`].
    root: PathBuf,
    options: hearth_classic::Options,
    router: RwLock<Arc<Router>>,
    /// The pool's unix socket (the same across its reloads); none while
    /// php-fpm is down (its master died and another is starting), when
    /// PHP requests get 503 at once.
    socket: RwLock<Option<PathBuf>>,
    limits: fastcgi::Limits,
    /// How many requests the pool runs at once (its children).
    children: usize,
    /// How long a request may wait for its connection's turn.
    queue_timeout: Duration,
}

impl ClassicSite {
    /// A site for `root`, routed with `options`, whose scripts run in the
    /// php-fpm pool listening on `socket` with `children` children,
    /// each exchange within `limits`; a request waits `queue_timeout` at
    /// most for its connection's turn. A root that is missing or not a
    /// directory is an error naming it.
    pub fn new(
        root: &Path,
        options: hearth_classic::Options,
        socket: PathBuf,
        limits: fastcgi::Limits,
        (children, queue_timeout): (usize, Duration),
    ) -> Result<ClassicSite, hearth_classic::Error> {
        let router = Router::new(root, options.clone())?;
        Ok(ClassicSite {
            root: root.to_path_buf(),
            options,
            router: RwLock::new(Arc::new(router)),
            socket: RwLock::new(Some(socket)),
            limits,
            children: children.max(1),
            queue_timeout,
        })
    }

    /// Resolves the root again (a deploy that switched a symlink is
    /// followed from the next request on) and returns its real path. On
    /// error the old router stays.
    pub fn reroute(&self) -> Result<PathBuf, hearth_classic::Error> {
        let router = Router::new(&self.root, self.options.clone())?;
        let real = router.root().to_path_buf();
        *self.router.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(router);
        Ok(real)
    }

    /// Points PHP requests at a new pool's socket (after php-fpm was
    /// started again), or, with none, answers them 503 at once.
    pub fn set_socket(&self, socket: Option<PathBuf>) {
        *self.socket.write().unwrap_or_else(|e| e.into_inner()) = socket;
    }

    fn socket(&self) -> Option<PathBuf> {
        self.socket
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The document root's real path, as requests are routed now.
    pub fn real_root(&self) -> PathBuf {
        self.router().root().to_path_buf()
    }

    /// How many requests the pool runs at once.
    pub fn children(&self) -> usize {
        self.children
    }

    /// How long a request may wait for its connection's turn.
    pub fn queue_timeout(&self) -> Duration {
        self.queue_timeout
    }

    fn router(&self) -> Arc<Router> {
        self.router
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// What a classic request needs from the server around it.
pub(crate) struct Context<'a> {
    pub config: &'a ServeConfig,
    pub requests: &'a Encoder,
    pub responses: &'a sendbuf::Limits,
    pub conn: &'a Connection,
}

/// Answers one request of a classic site. `turn` (the connection's place
/// in PHP) is held until php-fpm has ended the request.
pub(crate) async fn respond(
    site: &ClassicSite,
    parts: Parts,
    incoming: Incoming,
    turn: Keep,
    cx: Context<'_>,
) -> Response<ResponseBody> {
    let (uri, query) = match request_uri(&parts) {
        Ok(target) => target,
        Err(status) => return response::error_page(status),
    };
    let routed = site.route(uri, &query);
    answer(site, routed, parts, incoming, turn, cx).await
}

/// A request routed in a classic site (by [`ClassicSite::route`]).
#[derive(Debug)]
pub(crate) struct Routed {
    /// The router that routed it (the root's real path as it was then).
    router: Arc<Router>,
    pub route: Route,
    /// nginx's `$uri`: the path decoded and normalized.
    pub uri: Vec<u8>,
}

impl ClassicSite {
    /// Routes a request as nginx would (`uri` and `query` from
    /// [`request_uri`]).
    pub(crate) fn route(&self, uri: Vec<u8>, query: &[u8]) -> Routed {
        let router = self.router();
        let route = router.route(&uri, query);
        Routed { router, route, uri }
    }
}

/// The request's path, decoded and normalized as nginx's `$uri`, and its
/// query string (`$args`); a path nginx refuses is a 400 (logged here).
pub(crate) fn request_uri(parts: &Parts) -> Result<(Vec<u8>, Vec<u8>), StatusCode> {
    let (path, query) = match parts.extensions.get::<RawTarget>() {
        Some(RawTarget(raw)) => {
            let end = raw
                .iter()
                .position(|&b| b == b'?' || b == b'#')
                .unwrap_or(raw.len());
            (raw[..end].to_vec(), target::query(raw).to_vec())
        }
        None => (
            parts.uri.path().as_bytes().to_vec(),
            parts.uri.query().unwrap_or("").as_bytes().to_vec(),
        ),
    };
    match normalize_uri(&path) {
        Ok(uri) => Ok((uri, query)),
        Err(why) => {
            tracing::warn!(uri = %parts.uri, "refused a request (400 Bad Request): {why}");
            Err(StatusCode::BAD_REQUEST)
        }
    }
}

/// Answers a routed request: from disk, with a redirect or an error page,
/// or by a php-fpm child.
pub(crate) async fn answer(
    site: &ClassicSite,
    routed: Routed,
    parts: Parts,
    incoming: Incoming,
    turn: Keep,
    cx: Context<'_>,
) -> Response<ResponseBody> {
    let Routed { router, route, uri } = routed;
    match route {
        Route::Static(real) => {
            let requested = Path::new(OsStr::from_bytes(&uri));
            static_files::respond_file(
                router.root(),
                requested,
                &real,
                static_files::Disk {
                    compression: cx.config.compression,
                    inline: cx.config.sendfile,
                },
                &parts,
            )
            .await
        }
        Route::Redirect(location) => {
            let mut response = response::error_page(StatusCode::MOVED_PERMANENTLY);
            let location = absolute(&location, &parts, cx.conn, &cx.config.server_name);
            match HeaderValue::from_bytes(&location) {
                Ok(value) => {
                    response.headers_mut().insert(http::header::LOCATION, value);
                    response
                }
                Err(_) => response::error_page(StatusCode::BAD_REQUEST),
            }
        }
        Route::NotFound => response::error_page(StatusCode::NOT_FOUND),
        Route::Forbidden => {
            tracing::debug!(uri = %parts.uri, "refused (403): outside what the site serves");
            response::error_page(StatusCode::FORBIDDEN)
        }
        Route::BadRequest => response::error_page(StatusCode::BAD_REQUEST),
        Route::Php(target) => php(site, target, parts, incoming, turn, cx).await,
    }
}

/// The absolute URL nginx makes of a redirect's path (`absolute_redirect
/// on`, `server_name_in_redirect off`, `port_in_redirect on`): the
/// request's host without its port (else the server name), then the port
/// the client connected to unless it is the scheme's default.
fn absolute(path: &[u8], parts: &Parts, conn: &Connection, server_name: &str) -> Vec<u8> {
    let host = parts
        .headers
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| parts.uri.host())
        .map(|h| match h.rfind(':') {
            Some(at) if !h[at..].contains(']') => &h[..at],
            _ => h,
        })
        .filter(|h| !h.is_empty())
        .unwrap_or(server_name)
        .to_ascii_lowercase();
    let (scheme, port) = conn.scheme_and_port();
    let default = port.is_empty() || matches!((scheme, port), ("http", "80") | ("https", "443"));
    let mut url = format!("{scheme}://{host}").into_bytes();
    if !default {
        url.push(b':');
        url.extend_from_slice(port.as_bytes());
    }
    url.extend_from_slice(path);
    url
}

/// Runs `target` in the pool and answers with its response.
async fn php(
    site: &ClassicSite,
    target: PhpTarget,
    parts: Parts,
    incoming: Incoming,
    turn: Keep,
    cx: Context<'_>,
) -> Response<ResponseBody> {
    let held = match cx.requests.read_raw(&parts, incoming).await {
        Ok(held) => held,
        Err(answer) => return answer,
    };
    let body_len = (!matches!(held, Held::Empty)).then(|| held.len());
    let params = cgi::fastcgi_params(
        &parts,
        cx.conn,
        cx.requests.info(),
        ScriptVars {
            path_info: &target.path_info,
            script_filename: &target.script_filename,
            script_name: &target.script_name,
            document_uri: &target.document_uri,
            document_root: &target.document_root,
        },
        &target.query_string,
        body_len,
    );
    let script = String::from_utf8_lossy(&target.script_filename).into_owned();
    let body: Box<dyn AsyncRead + Send + Unpin> = match &held {
        Held::Empty => Box::new(tokio::io::empty()),
        Held::Memory { bytes, .. } => Box::new(std::io::Cursor::new(bytes.clone())),
        Held::File { path, .. } => match tokio::fs::File::open(path).await {
            Ok(file) => Box::new(file),
            Err(e) => {
                tracing::error!(script, "cannot read back the request body: {e}");
                return response::error_page(StatusCode::INTERNAL_SERVER_ERROR);
            }
        },
    };
    let deadline = cx
        .config
        .request_timeout
        .map(|limit| Instant::now() + limit);
    let Some(socket) = site.socket() else {
        tracing::debug!(script, "503: php-fpm is starting again");
        return unavailable(cx.config);
    };
    let mut answer = match fastcgi::request(&socket, &params, body, &site.limits).await {
        Ok(answer) => answer,
        Err(e) => return failure(&e, &script, &parts, cx.config),
    };
    log_stderr(&mut answer, &script);

    let declared = declared_length(&answer.headers);
    let head = ResponseHead {
        status: answer.status,
        headers: std::mem::take(&mut answer.headers)
            .into_iter()
            .map(|(name, value)| (Bytes::from(name), Bytes::from(value)))
            .collect(),
        invalid: Vec::new(),
    };
    let mut response = Response::new(ResponseBody::empty());
    let status = response::apply_head(head, &parts.method, &mut response, 0);
    *response.status_mut() = status;
    let no_body = parts.method == http::Method::HEAD
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED;
    let declared = declared.filter(|_| !no_body);

    // A whole response in the records that brought its head is answered
    // as a worker's whole response is (and may be compressed); anything
    // longer is spooled as php-fpm sends it.
    let first = match answer.chunk().await {
        Ok(first) => first,
        Err(e) => return failure(&e, &script, &parts, cx.config),
    };
    // (One short of the script's Content-Length is spooled: it ends as a
    // response cut short.)
    let first_len = first.as_ref().map_or(0, |b| b.len() as u64);
    if answer.is_complete() && declared.is_none_or(|n| n <= first_len) {
        log_stderr(&mut answer, &script);
        drop((answer, held, turn));
        let mut first = first.unwrap_or_default();
        // Cut to the script's length, as nginx cuts it.
        if let Some(n) = declared.filter(|&n| n < first_len) {
            warn_longer(&script, n);
            first.truncate(n as usize);
        }
        *response.body_mut() = ResponseBody::full(first);
        if cx.config.compression {
            return compress::php_response(response, &parts.method, &parts.headers).await;
        }
        return response;
    }
    let chunk = match parts.version {
        http::Version::HTTP_2 => sendbuf::CHUNK_HTTP2,
        _ => sendbuf::CHUNK_HTTP1,
    };
    let (writer, reader) = sendbuf::spool(cx.responses.clone(), declared, chunk);
    let keep: Keep = Box::new((held, turn));
    tokio::spawn(pump(
        answer,
        first,
        writer,
        keep,
        (deadline, declared),
        script,
    ));
    *response.body_mut() = ResponseBody::Spooled(reader);
    if cx.config.compression {
        return compress::fastcgi_response(response, &parts.method, &parts.headers).await;
    }
    response
}

/// The length the script gave its body (one `Content-Length` holding a
/// number), which nginx passes on to the client; None for none, several,
/// or one that is not a number (then the body is sent chunked).
fn declared_length(headers: &[(String, Vec<u8>)]) -> Option<u64> {
    let mut lengths = headers
        .iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case("content-length"));
    let (_, value) = lengths.next()?;
    if lengths.next().is_some() {
        return None;
    }
    std::str::from_utf8(value).ok()?.trim().parse().ok()
}

fn warn_shorter(script: &str, sent: u64, length: u64) {
    tracing::warn!(
        script,
        "the script sent {sent} of the {length} bytes its Content-Length announced"
    );
}

fn warn_longer(script: &str, length: u64) {
    tracing::warn!(
        script,
        "the script sent more than its Content-Length ({length} bytes): the rest is dropped, \
         as nginx drops it"
    );
}

/// Reads the rest of php-fpm's response into its spool, at php-fpm's
/// pace. A client that went away ends the exchange (php-fpm sees its
/// connection closed, as behind nginx). With the script's own length
/// (`declared`), the body is cut to it, and a body that falls short of
/// it ends in an error: the client's connection is closed, as nginx
/// closes it.
async fn pump(
    mut answer: fastcgi::Response,
    first: Option<Bytes>,
    writer: sendbuf::Writer,
    keep: Keep,
    (deadline, declared): (Option<Instant>, Option<u64>),
    script: String,
) {
    // None once the client has the whole body the script announced: the
    // rest of php-fpm's answer is read and dropped, so that its child is
    // free before this connection's next request.
    let mut writer = Some(writer);
    let mut next = first;
    let mut sent: u64 = 0;
    let mut warned = false;
    loop {
        match (next.take(), writer.as_mut()) {
            (Some(mut data), Some(w)) => {
                let room = declared.map(|n| n - sent);
                let full = room.is_some_and(|room| data.len() as u64 >= room);
                if let Some(room) = room.filter(|&room| data.len() as u64 > room) {
                    warn_longer(&script, declared.unwrap_or_default());
                    warned = true;
                    data.truncate(room as usize);
                }
                sent += data.len() as u64;
                match w.push(data, deadline).await {
                    Ok(()) => {}
                    Err(PushError::Gone) => break,
                    Err(PushError::TimedOut) => {
                        tracing::warn!(
                            script,
                            "response cut: its client took nothing while the response filled \
                             memory and disk until the request timeout"
                        );
                        if let Some(w) = writer.take() {
                            w.finish(Err("the client took too long".into()));
                        }
                        break;
                    }
                }
                if full {
                    if let Some(w) = writer.take() {
                        w.finish(Ok(()));
                    }
                }
            }
            (Some(data), None) if !data.is_empty() && !warned => {
                warn_longer(&script, declared.unwrap_or_default());
                warned = true;
            }
            _ => {}
        }
        match answer.chunk().await {
            Ok(Some(data)) => next = Some(data),
            Ok(None) => {
                if let Some(w) = writer.take() {
                    match declared {
                        Some(n) if sent < n => {
                            warn_shorter(&script, sent, n);
                            // The client's connection is closed, as nginx
                            // closes it: the response is cut short.
                            w.finish(Err("the body is shorter than its Content-Length".into()));
                        }
                        _ => w.finish(Ok(())),
                    }
                }
                break;
            }
            Err(e) => {
                tracing::warn!(script, "response cut short: {e}");
                if let Some(w) = writer.take() {
                    w.finish(Err(e.to_string()));
                }
                break;
            }
        }
        log_stderr(&mut answer, &script);
    }
    log_stderr(&mut answer, &script);
    drop(keep);
}

/// PHP's messages to FastCGI's stderr (what nginx logs as "FastCGI sent
/// in stderr"), in Hearth's log.
fn log_stderr(answer: &mut fastcgi::Response, script: &str) {
    for line in answer.take_stderr() {
        tracing::warn!(script, "PHP: {line}");
    }
}

/// A failed exchange as nginx answers it: 503 when the pool cannot be
/// reached, 504 when the script ran out of time, else 502.
fn failure(
    e: &hearth_fpm::Error,
    script: &str,
    parts: &Parts,
    config: &ServeConfig,
) -> Response<ResponseBody> {
    tracing::error!(script, method = %parts.method, uri = %parts.uri, "php-fpm: {e}");
    if e.is_timed_out() {
        return response::error_page(StatusCode::GATEWAY_TIMEOUT);
    }
    if e.is_unavailable() {
        return unavailable(config);
    }
    response::error_page(StatusCode::BAD_GATEWAY)
}

/// 503 with Retry-After: nothing reached PHP, the client may try again.
fn unavailable(config: &ServeConfig) -> Response<ResponseBody> {
    let mut response = response::error_page(StatusCode::SERVICE_UNAVAILABLE);
    response.headers_mut().insert(
        http::header::RETRY_AFTER,
        HeaderValue::from(config.retry_after),
    );
    response
}
