//! A request as a worker receives it: its body received (a raw body kept
//! in memory or spooled to a file the worker reads, a multipart form
//! parsed and its uploads spooled to disk), its `$_SERVER` built, and the
//! whole of it encoded in frames for the pool, with the `SCRIPT_*` and
//! `DOCUMENT_ROOT` of the release the worker that takes it runs.

use std::io::Read as _;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use bytes::BytesMut;
use hearth_pool::{Paths, Pool};
use hearth_proto::{begin_frame, encode_frame, end_frame, Kind};
use http::request::Parts;
use http::{Response, StatusCode};
use hyper::body::{Body as _, Incoming};

use crate::body::{self, BodyError, Held};
use crate::cgi::{self, Connection, Script, ServerInfo};
use crate::config::ServeConfig;
use crate::form::{self, UploadSettings};
use crate::guard;
use crate::response::{self, Keep, ResponseBody};
use crate::xdebug;

/// Turns the requests of a server into what its workers receive.
#[derive(Debug)]
pub(crate) struct Encoder {
    info: ServerInfo,
    max_body_size: u64,
    body_buffer_size: usize,
    body_chunk: usize,
    /// Longest pause while an HTTP/2 body arrives (HTTP/1.1 ones are timed
    /// by the connection guard).
    body_timeout: Duration,
    /// What request bodies may hold in memory, all together.
    body_budget: Arc<body::Budget>,
    /// Multipart forms being parsed ([`form::PARSES_AT_ONCE`]).
    form_parses: tokio::sync::Semaphore,
    /// Said once: workers cannot read spooled bodies.
    warned_no_body_files: AtomicBool,
    /// The script as each release describes it to PHP.
    scripts: Scripts,
}

/// The script as described to PHP, for the paths workers run from: worked
/// out once per set of paths (once per reload), not per request. The two
/// most recent are kept, for the old and the new workers of a reload.
#[derive(Debug, Default)]
struct Scripts(Mutex<Vec<(Arc<Paths>, Arc<Script>)>>);

impl Scripts {
    fn of(&self, paths: &Arc<Paths>) -> Arc<Script> {
        let mut known = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, script)) = known.iter().find(|(p, _)| Arc::ptr_eq(p, paths)) {
            return script.clone();
        }
        let script = Arc::new(Script::describe(
            &paths.script,
            paths.document_root.as_deref(),
        ));
        known.insert(0, (paths.clone(), script.clone()));
        known.truncate(2);
        script
    }
}

/// A request whose body has been received, ready for a worker.
#[derive(Debug)]
pub(crate) struct WorkerRequest {
    /// The request line and headers.
    pub parts: Parts,
    body: body::Body,
    /// When the request arrived (`REQUEST_TIME`).
    received: SystemTime,
}

impl Encoder {
    pub fn new(config: &ServeConfig) -> Encoder {
        Encoder {
            info: ServerInfo {
                server_name: config.server_name.clone(),
                server_software: config.server_software.clone(),
                trusted_proxies: config.trusted_proxies.clone(),
            },
            max_body_size: config.max_body_size,
            body_buffer_size: config.body_buffer_size,
            body_chunk: config.body_chunk.max(1),
            body_timeout: config.body_timeout,
            body_budget: body::Budget::new(config.body_memory),
            form_parses: tokio::sync::Semaphore::new(form::PARSES_AT_ONCE),
            warned_no_body_files: AtomicBool::new(false),
            scripts: Scripts::default(),
        }
    }

    /// Receives the request's body, as the workers of `pool` can take it.
    ///
    /// Err is the answer to give instead: 413 for a body over the limit;
    /// 400 for a malformed one, 408 for one that stalled, 500 for one that
    /// cannot be spooled. On HTTP/1.1 each closes the connection (the rest
    /// of the body is not read, so the connection cannot carry another
    /// request); on HTTP/2 the answer ends the stream, and hyper resets
    /// what is left of its body (`RST_STREAM` with `NO_ERROR`).
    pub async fn read(
        &self,
        parts: Parts,
        incoming: Incoming,
        received: SystemTime,
        pool: &Pool,
    ) -> Result<WorkerRequest, Response<ResponseBody>> {
        if declared_length(&parts).is_some_and(|n| n > self.max_body_size) {
            return Err(response::error_page(StatusCode::PAYLOAD_TOO_LARGE));
        }
        let body = if incoming.is_end_stream() {
            body::Body::default()
        } else {
            // hyper has no timeout on an HTTP/2 stream's body; the guard
            // times HTTP/1.1 sockets.
            let http2 = parts.version == http::Version::HTTP_2;
            let incoming = body::Paced::new(incoming, http2.then_some(self.body_timeout));
            self.read_body(&parts, incoming, pool).await?
        };
        Ok(WorkerRequest {
            parts,
            body,
            received,
        })
    }

    async fn read_body(
        &self,
        parts: &Parts,
        incoming: body::Paced<Incoming>,
        pool: &Pool,
    ) -> Result<body::Body, Response<ResponseBody>> {
        // How a body is read depends on the workers' PHP settings: a
        // request that arrives before any worker has said them waits for
        // the first, as it would wait for a worker anyway.
        let ready = match pool.settings() {
            Some(ready) => Some(ready),
            None => pool.settings_within(pool.config().queue_timeout).await,
        };
        let mut settings = UploadSettings::from_ready(ready.as_deref());
        settings.owner = pool.config().user.as_ref().map(|u| (u.uid, u.gid));
        let debug = pool.config().debug;
        if debug {
            settings.keep_fields = &xdebug::POST_NAMES;
        }
        // Files no worker opens: Hearth's own, in its own directory.
        let own_dir = body::Spool::own_dir();
        let own = body::Spool {
            buffer_size: self.body_buffer_size,
            budget: &self.body_budget,
            dir: &own_dir,
            owner: None,
        };
        let boundary =
            form::multipart_boundary(&parts.method, parts.headers.get(http::header::CONTENT_TYPE));
        // A form PHP parses into $_POST, Hearth or the workers.
        let parsed = settings.parse_post && !exceeds_post_max(parts, &settings);
        let read = match &boundary {
            Some(boundary) if parsed && !settings.native => {
                let parses = &self.form_parses;
                form::multipart(
                    incoming,
                    boundary.clone(),
                    self.max_body_size,
                    &settings,
                    &own,
                    parses,
                )
                .await
            }
            _ if settings.body_files => {
                let spool = body::Spool {
                    dir: &settings.tmp_dir,
                    owner: settings.owner,
                    ..own
                };
                body::raw(incoming, self.max_body_size, &spool)
                    .await
                    .map(|held| body::Body {
                        len: held.len(),
                        held,
                        worker_reads_file: true,
                        ..body::Body::default()
                    })
            }
            _ => {
                if !self.warned_no_body_files.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        "the workers cannot read request bodies spooled to {} (a PHP library \
                         older than this hearth, or open_basedir): Hearth spools them to {} \
                         and sends them in frames when a worker takes the request",
                        settings.tmp_dir.display(),
                        own_dir.display()
                    );
                }
                body::raw(incoming, self.max_body_size, &own)
                    .await
                    .map(|held| body::Body {
                        len: held.len(),
                        held,
                        ..body::Body::default()
                    })
            }
        };
        let mut body = read.map_err(|e| refusal(parts, e))?;
        // Debug mode: a form the workers parse themselves may hold Xdebug
        // triggers too.
        if let Some(boundary) = boundary.filter(|_| debug && parsed && body.form.is_none()) {
            body.kept_fields = xdebug::multipart_fields(&body.held, &boundary).await;
        }
        Ok(body)
    }

    /// Receives a request's body as it came, without parsing a form (for
    /// php-fpm, which parses it itself): in memory up to the body buffer
    /// (and the memory budget), else in a file of Hearth's own. Err is
    /// the answer to give instead, as for [`Encoder::read`].
    pub async fn read_raw(
        &self,
        parts: &Parts,
        incoming: Incoming,
    ) -> Result<body::Held, Response<ResponseBody>> {
        if declared_length(parts).is_some_and(|n| n > self.max_body_size) {
            return Err(response::error_page(StatusCode::PAYLOAD_TOO_LARGE));
        }
        if incoming.is_end_stream() {
            return Ok(body::Held::Empty);
        }
        let http2 = parts.version == http::Version::HTTP_2;
        let incoming = body::Paced::new(incoming, http2.then_some(self.body_timeout));
        let own_dir = body::Spool::own_dir();
        let own = body::Spool {
            buffer_size: self.body_buffer_size,
            budget: &self.body_budget,
            dir: &own_dir,
            owner: None,
        };
        body::raw(incoming, self.max_body_size, &own)
            .await
            .map_err(|e| refusal(parts, e))
    }

    /// The server's values for `$_SERVER` (name, software, proxies).
    pub fn info(&self) -> &ServerInfo {
        &self.info
    }

    /// Writes `request` in frames for the worker request `id`, taken by a
    /// worker running from `paths`: its `$_SERVER`, then its body (in
    /// memory, as a file to read, or as a parsed form), then the end.
    pub fn encode(
        &self,
        request: &WorkerRequest,
        conn: &Connection,
        paths: &Arc<Paths>,
        buf: &mut BytesMut,
        id: u32,
    ) {
        let script = self.scripts.of(paths);
        let body = &request.body;
        let has_body = body.len > 0 || body.form.is_some() || !matches!(body.held, Held::Empty);
        let body_len = has_body.then_some(body.len);
        let at = begin_frame(buf, Kind::Request, 0, id);
        cgi::write_server_vars(
            buf,
            &request.parts,
            conn,
            &self.info,
            &script,
            body_len,
            request.received,
        );
        end_frame(buf, at);
        let (kind, flags) = match &body.form {
            Some(form) => {
                // The list around the entries held.
                let head = format!("a:{}:{{", form.entries);
                encode_frame(buf, Kind::Form, form.flags, id, head.as_bytes());
                (Kind::Form, form.flags)
            }
            None => (Kind::Body, 0),
        };
        match &body.held {
            Held::Empty => {}
            Held::Memory { bytes, .. } => {
                for piece in bytes.chunks(self.body_chunk) {
                    encode_frame(buf, kind, flags, id, piece);
                }
            }
            Held::File { path, .. } if body.worker_reads_file => {
                encode_frame(buf, Kind::BodyFile, 0, id, path.as_os_str().as_bytes());
            }
            Held::File { path, len } => {
                self.read_back(buf, (kind, flags, id), path, *len);
            }
        }
        if let Some(form) = &body.form {
            encode_frame(buf, Kind::Form, form.flags, id, b"}");
        }
        encode_frame(buf, Kind::End, 0, id, &[]);
    }

    /// Sends a file Hearth spooled, in frames of `kind`, to a worker that
    /// cannot open it. The read blocks this thread, as little as tokio's
    /// own file reads would: the file was just written and sits in the
    /// page cache. The pool asks for the frames only once a worker has the
    /// request, and reading the file any earlier would hold the body in
    /// memory while the request waits for a worker, which is what spooling
    /// it avoids.
    fn read_back(
        &self,
        buf: &mut BytesMut,
        (kind, flags, id): (Kind, u16, u32),
        path: &Path,
        len: usize,
    ) {
        let mut file = match std::fs::File::open(path) {
            Ok(file) => file,
            Err(e) => {
                tracing::error!(
                    "cannot read back {}: {e}; the worker gets no body",
                    path.display()
                );
                return;
            }
        };
        // The frames' room at once, not by doubling as they come.
        buf.reserve(len + len.div_ceil(self.body_chunk) * hearth_proto::HEADER_LEN);
        let mut left = len;
        while left > 0 {
            let n = left.min(self.body_chunk);
            let at = begin_frame(buf, kind, flags, id);
            let start = buf.len();
            buf.resize(start + n, 0);
            if let Err(e) = file.read_exact(&mut buf[start..]) {
                buf.truncate(at);
                tracing::error!(
                    "cannot read back {}: {e}; the worker gets {} of {len} bytes",
                    path.display(),
                    len - left
                );
                return;
            }
            end_frame(buf, at);
            left -= n;
        }
    }
}

impl WorkerRequest {
    /// The body of an `application/x-www-form-urlencoded` request, when it
    /// is held in memory (small forms are), as PHP parses it for `$_POST`.
    pub fn form_body(&self) -> Option<&[u8]> {
        let form = self
            .parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .is_some_and(|v| {
                v.trim()
                    .eq_ignore_ascii_case("application/x-www-form-urlencoded")
            });
        match &self.body.held {
            Held::Memory { bytes, .. } if form && self.body.form.is_none() => Some(bytes),
            _ => None,
        }
    }

    /// The `$_POST` fields of a multipart form that Xdebug reads (debug
    /// mode only; see [`xdebug::multipart_fields`]).
    pub fn post_fields(&self) -> &[(String, Option<String>)] {
        &self.body.kept_fields
    }

    /// About the size of the encoded request. It only decides whether the
    /// request is small enough to be queued behind another: `$_SERVER` is
    /// about 1.5 KB, and a body the worker opens itself is already on disk.
    pub fn len(&self) -> usize {
        let body = &self.body;
        2048 + match &body.held {
            Held::File { path, .. } if body.worker_reads_file => path.as_os_str().len(),
            held => held.len(),
        }
    }

    /// What has to stay until the request has ended in the worker: the
    /// files it reads.
    pub fn take_files(&mut self) -> Keep {
        let uploads = std::mem::take(&mut self.body.uploads);
        let held = if self.body.worker_reads_file {
            std::mem::take(&mut self.body.held)
        } else {
            Held::Empty
        };
        Box::new((uploads, held))
    }
}

/// The answer to a request whose body could not be received.
fn refusal(parts: &Parts, error: BodyError) -> Response<ResponseBody> {
    let refuse = |status| {
        let page = response::error_page(status);
        if parts.version == http::Version::HTTP_2 {
            // The stream ends with the answer; the connection goes on.
            page
        } else {
            response::closing(page)
        }
    };
    match error {
        BodyError::TooLarge => response::error_page(StatusCode::PAYLOAD_TOO_LARGE),
        BodyError::Malformed(why) => {
            tracing::warn!(uri = %parts.uri, "refused a request (400 Bad Request): bad request body: {why}");
            refuse(StatusCode::BAD_REQUEST)
        }
        BodyError::Stalled => {
            // As the guard says it for HTTP/1.1: slow or vanished clients
            // are common and say nothing about the request.
            tracing::info!(uri = %parts.uri, "refused a request (408 Request Timeout): request body stalled");
            refuse(StatusCode::REQUEST_TIMEOUT)
        }
        BodyError::Io(why) => {
            // Refused by the connection guard (400), stalled (408), or the
            // client went away (nobody reads the answer).
            let status = parts
                .extensions
                .get::<Arc<guard::Shared>>()
                .and_then(|g| g.body_refusal())
                .unwrap_or(StatusCode::BAD_REQUEST);
            tracing::debug!("request body not received: {why}");
            refuse(status)
        }
        BodyError::Spool(why) => {
            tracing::error!(uri = %parts.uri, "cannot spool a request body: {why}");
            refuse(StatusCode::INTERNAL_SERVER_ERROR)
        }
    }
}

fn declared_length(parts: &Parts) -> Option<u64> {
    parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
}

/// PHP refuses to parse a form larger than post_max_size; so does Hearth,
/// and the worker reports it as PHP would.
fn exceeds_post_max(parts: &Parts, settings: &UploadSettings) -> bool {
    settings.post_max_size > 0 && declared_length(parts).is_some_and(|n| n > settings.post_max_size)
}
