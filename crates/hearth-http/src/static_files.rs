//! Files from a document root, served as nginx serves them in front of a
//! PHP front controller (`try_files $uri /index.php$is_args$args`): a GET
//! or HEAD for a regular file under the root gets the file; everything
//! else (other methods, directories, missing files, PHP scripts) goes to
//! the PHP worker.
//!
//! What is never served, whatever is on disk (see docs/configuration.md,
//! "Static files"):
//!
//! - PHP source (`.php`, `.phtml`, `.phar` and the like, any case, also
//!   through a symlink): the request goes to PHP, as the front controller
//!   would get it.
//! - Dotfiles and dot-directories (`.env`, `.git/`, `.htaccess`), except
//!   under `.well-known/`: 403, as Laravel's and Symfony's recommended
//!   nginx configs answer.
//! - Anything whose real path (symlinks resolved) is outside the root: 403.
//! - A path with a NUL byte: 400. A path with a backslash is not a file
//!   name Hearth looks up; it goes to PHP.
//!
//! The path is percent-decoded exactly once, then split on `/`; `.` and
//! `..` segments are dot segments and refused with the rest.

use std::ffi::OsStr;
use std::io::SeekFrom;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::header::{self, HeaderMap, HeaderValue};
use http::request::Parts;
use http::{Extensions, Method, Response, StatusCode};
use tokio::io::{AsyncReadExt as _, AsyncSeekExt as _, BufReader};

use crate::compress::{self, Coding};
use crate::file_body::FileBody;
use crate::guard::{self, ZeroCopy};
use crate::response::{self, ReaderBody, ResponseBody};

/// What a request path asks for, before the file system is consulted.
#[derive(Debug, PartialEq, Eq)]
enum Lookup {
    /// A relative path under the root to look for.
    File(PathBuf),
    /// Not a static file: the worker gets the request.
    Php,
    /// A dot segment: refused with 403.
    Forbidden,
    /// A NUL byte: refused with 400.
    BadRequest,
}

/// Whether a path segment is a dotfile or dot-directory Hearth refuses
/// (`.` and `..` included). `.well-known` is allowed (ACME challenges,
/// security.txt); dotfiles inside it are not.
fn is_hidden(segment: &[u8]) -> bool {
    segment.first() == Some(&b'.') && segment != b".well-known"
}

/// Reads the request path: percent-decoded once (so `%252e` stays `%2e`,
/// a literal name), checked segment by segment.
fn lookup(raw_path: &str) -> Lookup {
    let decoded: Vec<u8> = percent_encoding::percent_decode_str(raw_path).collect();
    if decoded.contains(&0) {
        return Lookup::BadRequest;
    }
    let segments: Vec<&[u8]> = decoded
        .split(|&b| b == b'/')
        .filter(|s| !s.is_empty())
        .collect();
    if segments.iter().any(|s| is_hidden(s)) {
        return Lookup::Forbidden;
    }
    if decoded.contains(&b'\\') || decoded.first() != Some(&b'/') || decoded.ends_with(b"/") {
        return Lookup::Php;
    }
    let path: PathBuf = segments.iter().map(|s| OsStr::from_bytes(s)).collect();
    match segments.last() {
        None => Lookup::Php,
        Some(name) if hearth_classic::is_php_name(name) => Lookup::Php,
        Some(_) => Lookup::File(path),
    }
}

/// Checks a resolved path the way [`lookup`] checks the requested one:
/// a symlink must not lead to PHP source, a dotfile, or out of the root.
fn check_real(root: &Path, real: &Path) -> Lookup {
    let Ok(relative) = real.strip_prefix(root) else {
        return Lookup::Forbidden;
    };
    let names: Vec<&[u8]> = relative
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name.as_bytes()),
            _ => None,
        })
        .collect();
    if names.iter().any(|name| is_hidden(name)) {
        return Lookup::Forbidden;
    }
    match names.last() {
        None => Lookup::Php,
        Some(name) if hearth_classic::is_php_name(name) => Lookup::Php,
        Some(_) => Lookup::File(relative.to_path_buf()),
    }
}

/// Resolves `relative` under `root`, symlinks included, and checks where
/// it leads. `Err` is the refusal to answer with. Blocking (see
/// [`Disk`]).
fn resolve(root: &Path, relative: &Path) -> Result<Option<PathBuf>, StatusCode> {
    let real = match std::fs::canonicalize(root.join(relative)) {
        Ok(real) => real,
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            return Err(StatusCode::FORBIDDEN)
        }
        // Missing, or a file used as a directory: not a static file.
        Err(_) => return Ok(None),
    };
    match check_real(root, &real) {
        Lookup::File(_) => Ok(Some(real)),
        Lookup::Php => Ok(None),
        Lookup::Forbidden => {
            tracing::debug!(
                "refused {}: it resolves to {}",
                relative.display(),
                real.display()
            );
            Err(StatusCode::FORBIDDEN)
        }
        Lookup::BadRequest => Err(StatusCode::BAD_REQUEST),
    }
}

/// Answers a GET or HEAD from `root` (an absolute path with symlinks
/// resolved), or returns `None` for the worker to answer.
pub(crate) async fn respond(
    root: &Path,
    disk: Disk,
    parts: &Parts,
) -> Option<Response<ResponseBody>> {
    let compression = disk.compression;
    if parts.method != Method::GET && parts.method != Method::HEAD {
        return None;
    }
    let relative = match lookup(parts.uri.path()) {
        Lookup::File(path) => path,
        Lookup::Php => return None,
        Lookup::Forbidden => {
            tracing::debug!(uri = %parts.uri, "refused: dotfile or dot segment");
            return Some(response::error_page(StatusCode::FORBIDDEN));
        }
        Lookup::BadRequest => {
            tracing::warn!(uri = %parts.uri, "refused a request (400 Bad Request): NUL in the path");
            return Some(response::error_page(StatusCode::BAD_REQUEST));
        }
    };
    let accepted = compress::accepted(&parts.headers);
    // The path resolved, the file and its sibling opened and their
    // metadata read, in one trip to the blocking threads.
    let found = {
        let (root, relative, accepted) = (root.to_path_buf(), relative.clone(), accepted.clone());
        disk.run(move || match resolve(&root, &relative) {
            Ok(Some(real)) => {
                let opened = find(&root, &real, &accepted);
                Ok(opened.map_err(|e| (e, real)))
            }
            Ok(None) => Err(None),
            Err(status) => Err(Some(status)),
        })
        .await
    };
    let file = match found {
        Ok(Ok(Some(file))) => file,
        // A directory, a FIFO, a device: not something to stream.
        Ok(Ok(None)) | Err(None) => return None,
        Err(Some(status)) => return Some(response::error_page(status)),
        Ok(Err((e, _))) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            return Some(response::error_page(StatusCode::FORBIDDEN))
        }
        Ok(Err((e, real))) => {
            tracing::debug!("cannot serve {}: {e}", real.display());
            return None;
        }
    };
    let answer = Answer {
        requested: &relative,
        compression,
        method: &parts.method,
        headers: &parts.headers,
        socket: zero_copy(&parts.extensions),
    };
    match answer.send(file, &accepted).await {
        Ok(response) => Some(response),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            Some(response::error_page(StatusCode::FORBIDDEN))
        }
        Err(e) => {
            tracing::debug!("cannot serve {}: {e}", relative.display());
            None
        }
    }
}

/// How a request's files are looked up: where the lookups run, and
/// whether bodies may be compressed on the fly.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Disk {
    pub compression: bool,
    /// Lookups (the path resolved, the file opened, its metadata read) run
    /// in the thread that serves the connection, as nginx runs them and
    /// as classic mode's router does: a lookup in the page cache takes a
    /// few microseconds, less than the two thread wake-ups of a trip to
    /// tokio's blocking threads (which halved the rate of small files).
    /// Off (`--no-sendfile`, for network and FUSE filesystems, where one
    /// may block), they run there, all of one request's in one trip.
    pub inline: bool,
}

impl Disk {
    /// Runs `work`, which touches the file system, as [`Disk::inline`]
    /// says.
    async fn run<T: Send + 'static>(self, work: impl FnOnce() -> T + Send + 'static) -> T {
        if self.inline {
            return work();
        }
        match tokio::task::spawn_blocking(work).await {
            Ok(done) => done,
            // The work panicked: carry the panic on.
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
}

/// Answers a request for a file classic mode's router has found and
/// checked (`real`, under `root`; `requested` is the path asked for,
/// which names its type): as [`respond`] would, with the same headers,
/// ranges, conditional requests and compression. Methods other than GET
/// and HEAD get 405, as from nginx's static module.
pub(crate) async fn respond_file(
    root: &Path,
    requested: &Path,
    real: &Path,
    disk: Disk,
    parts: &Parts,
) -> Response<ResponseBody> {
    if parts.method != Method::GET && parts.method != Method::HEAD {
        return response::error_page(StatusCode::METHOD_NOT_ALLOWED);
    }
    match serve_file(root, requested, real, disk, parts).await {
        Ok(Some(response)) => response,
        Ok(None) => response::error_page(StatusCode::NOT_FOUND),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            response::error_page(StatusCode::FORBIDDEN)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            response::error_page(StatusCode::NOT_FOUND)
        }
        Err(e) => {
            tracing::error!("cannot serve {}: {e}", real.display());
            response::error_page(StatusCode::INTERNAL_SERVER_ERROR)
        }
    }
}

/// One file on disk: the original or a precompressed sibling.
struct Opened {
    file: std::fs::File,
    len: u64,
    /// A regular file, not a directory, a FIFO or a device.
    regular: bool,
    modified: SystemTime,
    coding: Option<Coding>,
}

/// Blocking, as the rest of the lookups (see [`Disk`]).
fn open(path: &Path, coding: Option<Coding>) -> std::io::Result<Option<Opened>> {
    let file = std::fs::File::open(path)?;
    let opened = Opened::of(file, coding)?;
    Ok((opened.regular).then_some(opened))
}

impl Opened {
    fn of(file: std::fs::File, coding: Option<Coding>) -> std::io::Result<Opened> {
        let meta = file.metadata()?;
        Ok(Opened {
            file,
            len: meta.len(),
            regular: meta.is_file(),
            // Whole seconds: that is all Last-Modified can say, and the
            // ETag has to agree with it.
            modified: meta.modified().map_or(UNIX_EPOCH, |t| {
                UNIX_EPOCH
                    + Duration::from_secs(t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()))
            }),
            coding,
        })
    }
}

/// The precompressed sibling (`name.br`, `name.gz`) of the first coding the
/// client accepts that has one under the root. Blocking (see [`Disk`]).
fn sibling(root: &Path, real: &Path, accepted: &[Coding]) -> Option<Opened> {
    for &coding in accepted {
        let mut name = real.as_os_str().to_owned();
        name.push(coding.suffix());
        let Ok(path) = std::fs::canonicalize(PathBuf::from(name)) else {
            continue;
        };
        if !matches!(check_real(root, &path), Lookup::File(_)) {
            continue;
        }
        if let Ok(Some(opened)) = open(&path, Some(coding)) {
            return Some(opened);
        }
    }
    None
}

/// The file at `real` (none if it is not a regular file), or its
/// precompressed sibling when the client takes one. Blocking (see
/// [`Disk`]).
fn find(root: &Path, real: &Path, accepted: &[Coding]) -> std::io::Result<Option<Opened>> {
    let Some(original) = open(real, None)? else {
        return Ok(None);
    };
    Ok(Some(sibling(root, real, accepted).unwrap_or(original)))
}

async fn serve_file(
    root: &Path,
    requested: &Path,
    real: &Path,
    disk: Disk,
    parts: &Parts,
) -> std::io::Result<Option<Response<ResponseBody>>> {
    let compression = disk.compression;
    let accepted = compress::accepted(&parts.headers);
    let found = {
        let (root, real, accepted) = (root.to_path_buf(), real.to_path_buf(), accepted.clone());
        disk.run(move || find(&root, &real, &accepted)).await
    };
    let Some(file) = found? else {
        // A directory, a FIFO, a device: not something to stream.
        return Ok(None);
    };
    let answer = Answer {
        requested,
        compression,
        method: &parts.method,
        headers: &parts.headers,
        socket: zero_copy(&parts.extensions),
    };
    answer.send(file, &accepted).await.map(Some)
}

/// The request's connection, if a file can be sent onto it with
/// sendfile(2) (see [`FileBody`]).
pub(crate) fn zero_copy(request: &Extensions) -> Option<ZeroCopy> {
    request.get::<Arc<guard::Shared>>()?.zero_copy()
}

/// How an opened file is answered: for which request, under which name.
pub(crate) struct Answer<'a> {
    /// The name asked for, which names the type (not the target of a
    /// symlink, as nginx does).
    pub requested: &'a Path,
    /// On-the-fly compression allowed.
    pub compression: bool,
    pub method: &'a Method,
    /// The request's headers: its ranges, conditions and codings.
    pub headers: &'a HeaderMap,
    /// The connection, when the kernel may send the file onto it.
    pub socket: Option<ZeroCopy>,
}

impl Answer<'_> {
    /// Answers with an opened regular file (the file offload's, opened
    /// and checked by the caller): headers, conditional requests, ranges
    /// and on-the-fly compression as for a file of the document root.
    pub(crate) async fn opened(
        self,
        file: std::fs::File,
    ) -> std::io::Result<Response<ResponseBody>> {
        // The offload opened the file on tokio's blocking threads: its
        // metadata is read there too.
        let disk = Disk {
            compression: self.compression,
            inline: false,
        };
        let file = disk.run(move || Opened::of(file, None)).await?;
        let accepted = compress::accepted(self.headers);
        self.send(file, &accepted).await
    }

    async fn send(
        self,
        file: Opened,
        accepted: &[Coding],
    ) -> std::io::Result<Response<ResponseBody>> {
        let Answer {
            requested,
            compression,
            method,
            headers: request,
            socket,
        } = self;
        let content_type = mime_guess::from_path(requested).first_or_octet_stream();
        let compressible = compress::is_compressible(content_type.essence_str());
        let wants_range = *method == Method::GET && request.contains_key(header::RANGE);
        let varies = compressible || file.coding.is_some();
        // On the fly only for the whole file: a range of a compressed
        // stream is not what a client resuming a download asks for.
        let on_the_fly = match file.coding {
            None if compression
                && compressible
                && file.len >= compress::MIN_SIZE
                && !wants_range =>
            {
                accepted.first().copied()
            }
            _ => None,
        };

        let mtime = file
            .modified
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        // nginx's format: hex mtime and size.
        let strong = format!("\"{mtime:x}-{:x}\"", file.len);
        let etag = match on_the_fly {
            Some(_) => format!("W/{strong}"),
            None => strong.clone(),
        };

        let mut headers = HeaderMap::new();
        headers.insert(header::ETAG, value(&etag));
        headers.insert(
            header::LAST_MODIFIED,
            value(&httpdate::fmt_http_date(file.modified)),
        );
        if varies {
            headers.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
        }

        if let Some(status) = precondition(request, &etag, file.modified) {
            let mut response = if status == StatusCode::NOT_MODIFIED {
                Response::new(ResponseBody::empty())
            } else {
                response::error_page(status)
            };
            *response.status_mut() = status;
            response.headers_mut().extend(headers);
            return Ok(response);
        }

        headers.insert(header::CONTENT_TYPE, value(content_type.as_ref()));
        if let Some(coding) = file.coding.or(on_the_fly) {
            headers.insert(header::CONTENT_ENCODING, value(coding.name()));
        }
        if on_the_fly.is_none() {
            headers.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
        }

        let mut status = StatusCode::OK;
        let mut start = 0;
        let mut len = file.len;
        if wants_range && on_the_fly.is_none() && if_range_holds(request, &strong, file.modified) {
            match parse_range(request, file.len) {
                Range::Whole => {}
                Range::Part(first, last) => {
                    status = StatusCode::PARTIAL_CONTENT;
                    start = first;
                    len = last - first + 1;
                    headers.insert(
                        header::CONTENT_RANGE,
                        value(&format!("bytes {first}-{last}/{}", file.len)),
                    );
                }
                Range::Parts(parts) => {
                    let boundary = boundary();
                    let (body, total) = byteranges(
                        tokio::fs::File::from_std(file.file),
                        &parts,
                        file.len,
                        content_type.as_ref(),
                        &boundary,
                    );
                    headers.insert(
                        header::CONTENT_TYPE,
                        value(&format!("multipart/byteranges; boundary={boundary}")),
                    );
                    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(total));
                    let body = if *method == Method::HEAD {
                        ResponseBody::empty()
                    } else {
                        ResponseBody::Reader(ReaderBody::new(body, Some(total)))
                    };
                    let mut response = Response::new(body);
                    *response.status_mut() = StatusCode::PARTIAL_CONTENT;
                    *response.headers_mut() = headers;
                    return Ok(response);
                }
                Range::Unsatisfiable => {
                    let mut response = response::error_page(StatusCode::RANGE_NOT_SATISFIABLE);
                    response.headers_mut().insert(
                        header::CONTENT_RANGE,
                        value(&format!("bytes */{}", file.len)),
                    );
                    return Ok(response);
                }
            }
        }

        let body = if *method == Method::HEAD {
            ResponseBody::empty()
        } else if let Some(coding) = on_the_fly {
            ResponseBody::Reader(coding.encode(BufReader::with_capacity(
                64 << 10,
                tokio::fs::File::from_std(file.file),
            )))
        } else {
            ResponseBody::File(FileBody::new(file.file, start, len, socket)?)
        };
        if on_the_fly.is_none() {
            headers.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
        }
        let mut response = Response::new(body);
        *response.status_mut() = status;
        *response.headers_mut() = headers;
        Ok(response)
    }
}

fn value(text: &str) -> HeaderValue {
    HeaderValue::from_str(text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// RFC 9110 section 13.2.2: If-Match, then If-Unmodified-Since (412),
/// then If-None-Match, then If-Modified-Since (304).
fn precondition(headers: &HeaderMap, etag: &str, modified: SystemTime) -> Option<StatusCode> {
    let text = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    if let Some(wanted) = text(header::IF_MATCH) {
        if !tags_match(wanted, etag, true) {
            return Some(StatusCode::PRECONDITION_FAILED);
        }
    } else if let Some(since) = text(header::IF_UNMODIFIED_SINCE) {
        if httpdate::parse_http_date(since).is_ok_and(|since| modified > since) {
            return Some(StatusCode::PRECONDITION_FAILED);
        }
    }
    if let Some(wanted) = text(header::IF_NONE_MATCH) {
        if tags_match(wanted, etag, false) {
            return Some(StatusCode::NOT_MODIFIED);
        }
    } else if let Some(since) = text(header::IF_MODIFIED_SINCE) {
        if httpdate::parse_http_date(since).is_ok_and(|since| modified <= since) {
            return Some(StatusCode::NOT_MODIFIED);
        }
    }
    None
}

/// Whether a list of entity tags (or `*`) matches `etag`: strong
/// comparison (both strong and equal) or weak (equal once `W/` is dropped).
fn tags_match(list: &str, etag: &str, strong: bool) -> bool {
    if list.trim() == "*" {
        return true;
    }
    let opaque = |t: &str| t.trim().trim_start_matches("W/").to_owned();
    list.split(',').any(|candidate| {
        let candidate = candidate.trim();
        if strong {
            !candidate.starts_with("W/") && !etag.starts_with("W/") && candidate == etag
        } else {
            opaque(candidate) == opaque(etag)
        }
    })
}

/// If-Range: the range applies only to the representation the client has,
/// named by its strong ETag or its exact Last-Modified date.
fn if_range_holds(headers: &HeaderMap, strong_etag: &str, modified: SystemTime) -> bool {
    let Some(condition) = headers.get(header::IF_RANGE).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    let condition = condition.trim();
    if condition.starts_with('"') {
        return condition == strong_etag;
    }
    if condition.starts_with("W/") {
        return false;
    }
    httpdate::parse_http_date(condition).is_ok_and(|date| date == modified)
}

#[derive(Debug, PartialEq, Eq)]
enum Range {
    /// No usable Range: send the whole file.
    Whole,
    /// First and last byte, inclusive.
    Part(u64, u64),
    /// Several parts, sent as `multipart/byteranges`, in the order asked.
    Parts(Vec<(u64, u64)>),
    Unsatisfiable,
}

/// Most ranges a request may ask for; with more, the whole file is sent
/// (as nginx does past its `max_ranges`).
const MAX_RANGES: usize = 100;

/// One range of a `Range` header.
enum One {
    Part(u64, u64),
    /// Starts past the end: left out (the whole header is unsatisfiable
    /// when every range is).
    Unsatisfiable,
    Malformed,
}

/// RFC 9110 section 14.1.2, as nginx reads it: ranges past the end are
/// left out; a malformed one, too many, or more bytes in all than the
/// file has (overlapping ranges), and the whole file is sent.
fn parse_range(headers: &HeaderMap, len: u64) -> Range {
    let Some(spec) = headers
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().strip_prefix("bytes="))
    else {
        return Range::Whole;
    };
    if len == 0 {
        return Range::Whole;
    }
    let mut parts = Vec::new();
    let mut total = 0u64;
    for one in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match parse_one(one, len) {
            One::Part(first, last) => {
                parts.push((first, last));
                total += last - first + 1;
                if parts.len() > MAX_RANGES {
                    return Range::Whole;
                }
            }
            One::Unsatisfiable => {}
            One::Malformed => return Range::Whole,
        }
    }
    match parts[..] {
        [] => Range::Unsatisfiable,
        [(first, last)] => Range::Part(first, last),
        _ if total > len => Range::Whole,
        _ => Range::Parts(parts),
    }
}

fn parse_one(spec: &str, len: u64) -> One {
    let Some((first, last)) = spec.split_once('-') else {
        return One::Malformed;
    };
    let (first, last) = (first.trim(), last.trim());
    let number = |s: &str| {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse::<u64>().ok())
            .flatten()
    };
    if first.is_empty() {
        // The last `last` bytes.
        return match number(last) {
            None => One::Malformed,
            Some(0) => One::Unsatisfiable,
            Some(n) => One::Part(len.saturating_sub(n), len - 1),
        };
    }
    let Some(first) = number(first) else {
        return One::Malformed;
    };
    let last = if last.is_empty() {
        len - 1
    } else {
        match number(last) {
            Some(l) if l >= first => l.min(len - 1),
            _ => return One::Malformed,
        }
    };
    if first >= len {
        return One::Unsatisfiable;
    }
    One::Part(first, last)
}

/// A boundary for a `multipart/byteranges` body: nginx's form (digits),
/// different for each response.
fn boundary() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{:010}{:010}", seed, n % 10_000_000_000)
}

/// The parts of a `multipart/byteranges` body: each part's head, then
/// its bytes read from the file 64 KiB at a time, then the closing
/// boundary. Returns the body and its length.
fn byteranges(
    file: tokio::fs::File,
    parts: &[(u64, u64)],
    len: u64,
    content_type: &str,
    boundary: &str,
) -> (impl tokio::io::AsyncRead + Send + 'static, u64) {
    use bytes::Bytes;
    use std::collections::VecDeque;

    let parts: VecDeque<(Bytes, u64, u64)> = parts
        .iter()
        .map(|&(first, last)| {
            let head = format!(
                "\r\n--{boundary}\r\nContent-Type: {content_type}\r\n\
                 Content-Range: bytes {first}-{last}/{len}\r\n\r\n"
            );
            (Bytes::from(head), first, last - first + 1)
        })
        .collect();
    let tail = Bytes::from(format!("\r\n--{boundary}--\r\n"));
    let total = parts
        .iter()
        .map(|(head, _, n)| head.len() as u64 + n)
        .sum::<u64>()
        + tail.len() as u64;

    struct State {
        file: tokio::fs::File,
        parts: VecDeque<(Bytes, u64, u64)>,
        tail: Option<Bytes>,
        /// Bytes of the current part still to read.
        left: u64,
    }
    let state = State {
        file,
        parts,
        tail: Some(tail),
        left: 0,
    };
    let chunks = futures_util::stream::try_unfold(state, |mut s| async move {
        if s.left == 0 {
            if let Some((head, start, n)) = s.parts.pop_front() {
                s.file.seek(SeekFrom::Start(start)).await?;
                s.left = n;
                return Ok(Some((head, s)));
            }
            return Ok(s.tail.take().map(|tail| (tail, s)));
        }
        let mut buf = vec![0; s.left.min(64 << 10) as usize];
        let n = s.file.read(&mut buf).await?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the file shrank while it was sent",
            ));
        }
        buf.truncate(n);
        s.left -= n as u64;
        Ok::<_, std::io::Error>(Some((Bytes::from(buf), s)))
    });
    (tokio_util::io::StreamReader::new(chunks), total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(p: &str) -> Lookup {
        Lookup::File(PathBuf::from(p))
    }

    #[test]
    fn request_paths() {
        assert_eq!(lookup("/style.css"), file("style.css"));
        assert_eq!(lookup("/a//b%20c.txt"), file("a/b c.txt"));
        assert_eq!(lookup("/"), Lookup::Php);
        assert_eq!(lookup("/dir/"), Lookup::Php);
        assert_eq!(lookup("/index.php"), Lookup::Php);
        assert_eq!(lookup("/x.PHP"), Lookup::Php);
        assert_eq!(lookup("/x.pHtMl"), Lookup::Php);
        assert_eq!(lookup("/lib.phar"), Lookup::Php);
        assert_eq!(lookup("/x.ph%70"), Lookup::Php);
        assert_eq!(lookup("/../secret"), Lookup::Forbidden);
        assert_eq!(lookup("/a/../../secret"), Lookup::Forbidden);
        assert_eq!(lookup("/%2e%2e/secret"), Lookup::Forbidden);
        assert_eq!(lookup("/..%2fsecret"), Lookup::Forbidden);
        assert_eq!(lookup("/./a"), Lookup::Forbidden);
        assert_eq!(lookup("/.env"), Lookup::Forbidden);
        assert_eq!(lookup("/.git/config"), Lookup::Forbidden);
        assert_eq!(lookup("/a/.hidden/b"), Lookup::Forbidden);
        assert_eq!(lookup("/.well-known/"), Lookup::Php);
        assert_eq!(lookup("/.well-known"), file(".well-known"));
        assert_eq!(lookup("/.git/"), Lookup::Forbidden);
        assert_eq!(
            lookup("/.well-known/security.txt"),
            file(".well-known/security.txt")
        );
        assert_eq!(lookup("/.well-known/.env"), Lookup::Forbidden);
        // Decoded once: `%2e` is then a literal name, looked up as such.
        assert_eq!(lookup("/%252e%252e/secret"), file("%2e%2e/secret"));
        assert_eq!(lookup("/a%00.txt"), Lookup::BadRequest);
        assert_eq!(lookup("/..%5csecret"), Lookup::Forbidden);
        assert_eq!(lookup("/a%5c..%5csecret"), Lookup::Php);
        assert_eq!(lookup("/a\\b"), Lookup::Php);
    }

    #[test]
    fn real_paths() {
        let root = Path::new("/srv/public");
        assert_eq!(
            check_real(root, Path::new("/srv/public/a.txt")),
            file("a.txt")
        );
        assert_eq!(
            check_real(root, Path::new("/srv/secret")),
            Lookup::Forbidden
        );
        assert_eq!(
            check_real(root, Path::new("/srv/publicity/a")),
            Lookup::Forbidden
        );
        assert_eq!(
            check_real(root, Path::new("/srv/public/.env")),
            Lookup::Forbidden
        );
        assert_eq!(
            check_real(root, Path::new("/srv/public/x.Php")),
            Lookup::Php
        );
        assert_eq!(check_real(root, Path::new("/srv/public")), Lookup::Php);
    }

    fn range(spec: &str, len: u64) -> Range {
        let mut headers = HeaderMap::new();
        headers.insert(header::RANGE, HeaderValue::from_str(spec).unwrap());
        parse_range(&headers, len)
    }

    #[test]
    fn ranges() {
        assert_eq!(range("bytes=0-9", 100), Range::Part(0, 9));
        assert_eq!(range("bytes=90-", 100), Range::Part(90, 99));
        assert_eq!(range("bytes=90-200", 100), Range::Part(90, 99));
        assert_eq!(range("bytes=-10", 100), Range::Part(90, 99));
        assert_eq!(range("bytes=-200", 100), Range::Part(0, 99));
        assert_eq!(range("bytes=100-", 100), Range::Unsatisfiable);
        assert_eq!(range("bytes=-0", 100), Range::Unsatisfiable);
        assert_eq!(
            range("bytes=0-1,5-6", 100),
            Range::Parts(vec![(0, 1), (5, 6)])
        );
        assert_eq!(
            range("bytes=0-1, -2", 100),
            Range::Parts(vec![(0, 1), (98, 99)])
        );
        // Past the end: left out; all of them: 416.
        assert_eq!(range("bytes=0-1,200-300", 100), Range::Part(0, 1));
        assert_eq!(range("bytes=200-,300-", 100), Range::Unsatisfiable);
        // More bytes than the file, a malformed one, too many: the whole file.
        assert_eq!(range("bytes=0-99,0-99", 100), Range::Whole);
        assert_eq!(range("bytes=0-1,x", 100), Range::Whole);
        let many = (0..=MAX_RANGES)
            .map(|i| format!("{i}-{i}"))
            .collect::<Vec<_>>();
        assert_eq!(
            range(&format!("bytes={}", many.join(",")), 1000),
            Range::Whole
        );
        assert_eq!(range("bytes=5-1", 100), Range::Whole);
        assert_eq!(range("items=0-1", 100), Range::Whole);
        assert_eq!(range("bytes=x-1", 100), Range::Whole);
        assert_eq!(range("bytes=+1-2", 100), Range::Whole);
    }

    #[test]
    fn entity_tags() {
        assert!(tags_match("\"a\"", "\"a\"", true));
        assert!(tags_match("\"b\", \"a\"", "\"a\"", false));
        assert!(tags_match("W/\"a\"", "\"a\"", false));
        assert!(!tags_match("W/\"a\"", "\"a\"", true));
        assert!(tags_match("*", "\"a\"", true));
        assert!(!tags_match("\"b\"", "\"a\"", false));
    }
}
