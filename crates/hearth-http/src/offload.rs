//! The file offload: a worker's response with `X-Sendfile: /abs/path` or
//! `X-Accel-Redirect: /uri/path` is answered with that file by the front,
//! as nginx answers `X-Accel-Redirect` (see docs/file-offload.md).
//!
//! The worker is free before the file is opened: the response head (and
//! its empty body) has been read whole, and its lease released, by the
//! time [`respond`] runs. The file is then sent as a document-root file
//! is (`static_files`): ETag, Last-Modified, ranges, conditional requests,
//! HEAD, at the client's pace, under the send timeout; sent by the kernel
//! (sendfile) on plain HTTP/1.x connections, else read in 64 KiB chunks
//! (see `file_body`).
//!
//! Only files under a `--sendfile-root` are served. The path is checked
//! as written (absolute, no `.` or `..` segment, under a root), then
//! opened with `O_PATH` (which neither reads, blocks on a FIFO nor opens
//! a device) and checked again by what was opened: its real path, from
//! `/proc/self/fd`, must be under a root, and it must be a regular file.
//! Only then is that same file reopened for reading, so a symlink swapped
//! in between the check and the read cannot lead elsewhere.
//!
//! Refusals (the `X-Sendfile` or `X-Accel-Redirect` header never reaches
//! the client, nor does the app's body):
//!
//! - no root configured: 500, and a log line that says to set
//!   `--sendfile-root`;
//! - a path that is not absolute, or has a NUL or a `.` or `..` segment
//!   (percent-decoded once, for `X-Accel-Redirect`); a URI no root maps;
//!   a missing file, a directory, a FIFO, a device: 404, as nginx answers
//!   an internal redirect it cannot serve;
//! - a path, or the real path of a symlink, outside every root; a file
//!   Hearth may not read: 403.

use std::os::fd::AsRawFd as _;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Response, StatusCode, Uri};

use crate::config::SendfileRoot;
use crate::response::{self, ResponseBody};
use crate::static_files::{self, Answer};

const X_SENDFILE: &str = "x-sendfile";
const X_ACCEL_REDIRECT: &str = "x-accel-redirect";

/// Tells the app that the front takes `X-Sendfile` (Symfony's and
/// Laravel's `BinaryFileResponse` read this request header once
/// `trustXSendfileTypeHeader()` is called): set with a root configured,
/// in place of what the client sent; the client's `X-Accel-Mapping` is
/// dropped, since the app would map paths by it.
pub(crate) fn announce(headers: &mut HeaderMap, roots: &[SendfileRoot]) {
    if roots.is_empty() {
        return;
    }
    headers.insert(
        HeaderName::from_static("x-sendfile-type"),
        HeaderValue::from_static("X-Sendfile"),
    );
    headers.remove(HeaderName::from_static("x-accel-mapping"));
}

/// Whether the worker's response asks for a file.
pub(crate) fn wanted(response: &Response<ResponseBody>) -> bool {
    let headers = response.headers();
    headers.contains_key(X_SENDFILE) || headers.contains_key(X_ACCEL_REDIRECT)
}

/// What a refused response is answered with, and why, for the log.
#[derive(Debug, PartialEq, Eq)]
struct Refusal {
    status: StatusCode,
    why: String,
}

fn refuse(status: StatusCode, why: impl Into<String>) -> Refusal {
    Refusal {
        status,
        why: why.into(),
    }
}

/// The request an offloaded response answers.
pub(crate) struct Request<'a> {
    pub method: &'a Method,
    pub uri: &'a Uri,
    pub headers: &'a HeaderMap,
    /// The request's extensions: its connection, onto which the kernel
    /// may send the file.
    pub extensions: &'a http::Extensions,
    /// The worker that answered, for the log.
    pub pid: u32,
}

/// Answers a response for which [`wanted`] holds with the file it names,
/// the app's other headers kept, or with a refusal.
pub(crate) async fn respond(
    response: Response<ResponseBody>,
    request: Request<'_>,
    roots: &[SendfileRoot],
    compression: bool,
) -> Response<ResponseBody> {
    // The app's body (usually empty) is dropped here: a streamed one is
    // read to its end and discarded for the worker to serve again.
    let (app, _body) = response.into_parts();
    let mut app_headers = app.headers;
    let sendfile = app_headers.remove(X_SENDFILE);
    let accel = app_headers.remove(X_ACCEL_REDIRECT);
    // The other X-Accel-* headers are instructions to nginx, never for
    // the client either.
    let accel_names: Vec<HeaderName> = app_headers
        .keys()
        .filter(|name| name.as_str().starts_with("x-accel-"))
        .cloned()
        .collect();
    for name in accel_names {
        app_headers.remove(name);
    }
    let (header_name, asked) = match (&sendfile, &accel) {
        (Some(path), _) => ("X-Sendfile", path),
        (None, Some(uri)) => ("X-Accel-Redirect", uri),
        (None, None) => unreachable!("respond() is called when wanted() holds"),
    };
    let shown = String::from_utf8_lossy(asked.as_bytes()).into_owned();
    let log = |refusal: &Refusal| {
        tracing::warn!(
            pid = request.pid,
            method = %request.method,
            uri = %request.uri,
            "{header_name} {shown:?} refused ({}): {}",
            refusal.status,
            refusal.why
        );
    };
    if roots.is_empty() {
        tracing::error!(
            pid = request.pid,
            method = %request.method,
            uri = %request.uri,
            "{header_name} {shown:?} refused (500): the app asked for a file, but no \
             --sendfile-root is set; set --sendfile-root DIR (or PREFIX=DIR for \
             X-Accel-Redirect) to the directories it may be served from"
        );
        return response::error_page(StatusCode::INTERNAL_SERVER_ERROR);
    }
    let checked = {
        let (asked, roots) = (asked.as_bytes().to_vec(), roots.to_vec());
        let is_path = sendfile.is_some();
        tokio::task::spawn_blocking(move || {
            let roots = resolve(&roots);
            let path = match is_path {
                true => locate_path(&asked, &roots)?,
                false => locate_uri(&asked, &roots)?,
            };
            let file = open_checked(&path, &roots)?;
            Ok::<_, Refusal>((path, file))
        })
        .await
    };
    let (path, file) = match checked {
        Ok(Ok(opened)) => opened,
        Ok(Err(refusal)) => {
            log(&refusal);
            return response::error_page(refusal.status);
        }
        Err(e) => {
            log(&refuse(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()));
            return response::error_page(StatusCode::INTERNAL_SERVER_ERROR);
        }
    };
    // As nginx's internal redirect: the file is answered as to a GET,
    // whatever the method (HEAD stays HEAD).
    let method = match *request.method {
        Method::HEAD => Method::HEAD,
        _ => Method::GET,
    };
    let answer = Answer {
        requested: &path,
        compression,
        method: &method,
        headers: request.headers,
        socket: static_files::zero_copy(request.extensions),
    };
    let mut served = match answer.opened(file).await {
        Ok(served) => served,
        Err(e) => {
            log(&refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("cannot read {}: {e}", path.display()),
            ));
            return response::error_page(StatusCode::INTERNAL_SERVER_ERROR);
        }
    };
    keep_app_headers(&mut served, app_headers);
    served
}

/// Headers that describe the file sent, which the file answer sets: the
/// app's are dropped.
fn describes_the_body(name: &HeaderName) -> bool {
    matches!(
        *name,
        header::CONTENT_LENGTH
            | header::CONTENT_RANGE
            | header::CONTENT_ENCODING
            | header::ACCEPT_RANGES
            | header::ETAG
            | header::LAST_MODIFIED
            | header::TRANSFER_ENCODING
    )
}

/// Whether a Content-Type is the one PHP sends when the app set none
/// (php.ini's `default_mimetype` and `default_charset` as Debian ships
/// them): the file's extension then names the type.
fn is_php_default_type(value: &HeaderValue) -> bool {
    let value = value.as_bytes();
    value.eq_ignore_ascii_case(b"text/html; charset=UTF-8")
        || value.eq_ignore_ascii_case(b"text/html")
}

/// The app's headers (Content-Type, Content-Disposition, Cache-Control,
/// cookies and the rest) on the file's response; its Content-Type in
/// place of the one of the file's extension, unless it is PHP's default
/// one, and except where the response has no body to describe (304, or
/// a 412 or 416 error page).
fn keep_app_headers(served: &mut Response<ResponseBody>, app: HeaderMap) {
    let with_type = matches!(
        served.status(),
        StatusCode::OK | StatusCode::PARTIAL_CONTENT
    );
    let headers = served.headers_mut();
    let mut name = None;
    for (next, value) in app {
        if let Some(next) = next {
            name = Some(next);
        }
        let Some(name) = &name else { continue };
        if describes_the_body(name) {
            continue;
        }
        if *name == header::CONTENT_TYPE {
            if with_type && !is_php_default_type(&value) {
                headers.insert(header::CONTENT_TYPE, value);
            }
            continue;
        }
        headers.append(name.clone(), value);
    }
}

/// A root as a file is checked against: its real path resolved now.
#[derive(Debug)]
struct Root {
    prefix: Option<String>,
    dir: PathBuf,
    real: PathBuf,
}

/// The roots with their symlinks resolved (a root that is gone keeps its
/// path, under which nothing is found).
fn resolve(roots: &[SendfileRoot]) -> Vec<Root> {
    roots
        .iter()
        .map(|root| Root {
            prefix: root.prefix.clone(),
            real: std::fs::canonicalize(&root.dir).unwrap_or_else(|_| root.dir.clone()),
            dir: root.dir.clone(),
        })
        .collect()
}

/// Whether a path, split on `/`, has a `.` or `..` segment.
fn has_dot_segment(path: &[u8]) -> bool {
    path.split(|&b| b == b'/').any(|s| s == b"." || s == b"..")
}

/// An `X-Sendfile` path: absolute, without a NUL or a dot segment, under
/// a root as written.
fn locate_path(path: &[u8], roots: &[Root]) -> Result<PathBuf, Refusal> {
    if path.first() != Some(&b'/') {
        return Err(refuse(
            StatusCode::NOT_FOUND,
            "not an absolute path (X-Sendfile takes one; the app's getRealPath() gives it)",
        ));
    }
    if path.contains(&0) {
        return Err(refuse(StatusCode::NOT_FOUND, "a NUL byte in the path"));
    }
    if has_dot_segment(path) {
        return Err(refuse(
            StatusCode::NOT_FOUND,
            "a . or .. segment in the path",
        ));
    }
    let path = Path::new(std::ffi::OsStr::from_bytes(path));
    if !roots
        .iter()
        .any(|root| path.starts_with(&root.dir) || path.starts_with(&root.real))
    {
        return Err(refuse(
            StatusCode::FORBIDDEN,
            format!("outside every --sendfile-root ({})", list(roots)),
        ));
    }
    Ok(path.to_path_buf())
}

/// An `X-Accel-Redirect` URI, taken as nginx takes it: its query string
/// dropped, percent-decoded once, refused with a NUL or a dot segment,
/// and mapped onto the directory of the longest root prefix it starts
/// with.
fn locate_uri(uri: &[u8], roots: &[Root]) -> Result<PathBuf, Refusal> {
    let path = uri.split(|&b| b == b'?').next().unwrap_or_default();
    let decoded: Vec<u8> = percent_encoding::percent_decode(path).collect();
    if decoded.first() != Some(&b'/') {
        return Err(refuse(
            StatusCode::NOT_FOUND,
            "not a URI path (X-Accel-Redirect takes one that starts with /)",
        ));
    }
    if decoded.contains(&0) {
        return Err(refuse(StatusCode::NOT_FOUND, "a NUL byte in the URI"));
    }
    if has_dot_segment(&decoded) || decoded.contains(&b'\\') {
        return Err(refuse(
            StatusCode::NOT_FOUND,
            "a . or .. segment (or a backslash) in the URI, percent-decoded",
        ));
    }
    let root = roots
        .iter()
        .filter_map(|root| {
            let prefix = root.prefix.as_deref()?;
            decoded
                .starts_with(prefix.as_bytes())
                .then_some((prefix.len(), root))
        })
        .max_by_key(|(len, _)| *len);
    let Some((len, root)) = root else {
        let prefixes: Vec<&str> = roots.iter().filter_map(|r| r.prefix.as_deref()).collect();
        return Err(refuse(
            StatusCode::NOT_FOUND,
            if prefixes.is_empty() {
                "no --sendfile-root maps a URI prefix (--sendfile-root PREFIX=DIR)".to_owned()
            } else {
                format!("under no --sendfile-root prefix ({})", prefixes.join(", "))
            },
        ));
    };
    let rest = std::ffi::OsStr::from_bytes(&decoded[len..]);
    let rest = Path::new(rest);
    // `rest` is relative: decoded starts with the prefix, which ends with /.
    let rest = rest.strip_prefix("/").unwrap_or(rest);
    Ok(root.dir.join(rest))
}

fn list(roots: &[Root]) -> String {
    roots
        .iter()
        .map(|r| r.dir.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Opens `path` for reading if what it leads to is a regular file under a
/// root. Checked by the opened file itself, so that no symlink swapped in
/// meanwhile can lead elsewhere.
fn open_checked(path: &Path, roots: &[Root]) -> Result<std::fs::File, Refusal> {
    use rustix::fs::{FileType, Mode, OFlags};
    use rustix::io::Errno;
    let opened = rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty());
    let fd = opened.map_err(|e| match e {
        Errno::NOENT | Errno::NOTDIR => refuse(StatusCode::NOT_FOUND, "no such file"),
        Errno::ACCESS => refuse(StatusCode::FORBIDDEN, "permission denied"),
        Errno::LOOP => refuse(StatusCode::NOT_FOUND, "too many levels of symlinks"),
        e => refuse(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot open it: {e}"),
        ),
    })?;
    let link = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
    let real = std::fs::read_link(&link).map_err(|e| {
        refuse(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!(
                "cannot tell where it leads ({}: {e}): the file offload needs /proc",
                link.display()
            ),
        )
    })?;
    if !roots.iter().any(|root| real.starts_with(&root.real)) {
        return Err(refuse(
            StatusCode::FORBIDDEN,
            format!(
                "it resolves to {}, outside every --sendfile-root ({})",
                real.display(),
                list(roots)
            ),
        ));
    }
    let stat = rustix::fs::fstat(&fd).map_err(|e| {
        refuse(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot stat it: {e}"),
        )
    })?;
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => {}
        FileType::Directory => return Err(refuse(StatusCode::NOT_FOUND, "a directory")),
        other => {
            return Err(refuse(
                StatusCode::NOT_FOUND,
                format!("not a regular file ({other:?})"),
            ))
        }
    }
    // The same file, reopened for reading through its fd.
    let file = rustix::fs::open(
        &link,
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    )
    .map_err(|e| match e {
        Errno::ACCESS => refuse(StatusCode::FORBIDDEN, "permission denied"),
        e => refuse(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot open it: {e}"),
        ),
    })?;
    Ok(std::fs::File::from(file))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roots() -> Vec<Root> {
        vec![
            Root {
                prefix: None,
                dir: "/srv/files".into(),
                real: "/srv/files".into(),
            },
            Root {
                prefix: Some("/protected/".into()),
                dir: "/srv/private".into(),
                real: "/data/private".into(),
            },
            Root {
                prefix: Some("/protected/big/".into()),
                dir: "/srv/big".into(),
                real: "/srv/big".into(),
            },
        ]
    }

    fn status(r: Result<PathBuf, Refusal>) -> Result<PathBuf, u16> {
        r.map_err(|r| r.status.as_u16())
    }

    #[test]
    fn sendfile_paths() {
        let p = |s: &str| status(locate_path(s.as_bytes(), &roots()));
        assert_eq!(p("/srv/files/a.pdf"), Ok("/srv/files/a.pdf".into()));
        assert_eq!(p("/data/private/a"), Ok("/data/private/a".into()));
        assert_eq!(p("/srv/private/a"), Ok("/srv/private/a".into()));
        assert_eq!(p("/srv/files/../secret"), Err(404));
        assert_eq!(p("/srv/files/./a"), Err(404));
        assert_eq!(p("srv/files/a"), Err(404));
        assert_eq!(p("/srv/files/a\0b"), Err(404));
        assert_eq!(p("/srv/filesystem/a"), Err(403));
        assert_eq!(p("/etc/passwd"), Err(403));
        // Not a URI: not decoded.
        assert_eq!(p("/srv/files/%2e%2e/a"), Ok("/srv/files/%2e%2e/a".into()));
    }

    #[test]
    fn accel_uris() {
        let u = |s: &str| status(locate_uri(s.as_bytes(), &roots()));
        assert_eq!(u("/protected/a.pdf"), Ok("/srv/private/a.pdf".into()));
        assert_eq!(
            u("/protected/a%20b.pdf?x=1"),
            Ok("/srv/private/a b.pdf".into())
        );
        assert_eq!(u("/protected/big/x"), Ok("/srv/big/x".into()));
        assert_eq!(u("/protected//x"), Ok("/srv/private/x".into()));
        assert_eq!(u("/protected"), Err(404));
        assert_eq!(u("/other/a"), Err(404));
        assert_eq!(u("/protected/../etc/passwd"), Err(404));
        assert_eq!(u("/protected/%2e%2e/etc/passwd"), Err(404));
        assert_eq!(u("/protected/%2E%2E%2Fetc/passwd"), Err(404));
        assert_eq!(u("/protected/..%5cx"), Err(404));
        assert_eq!(u("/protected/a%00b"), Err(404));
        assert_eq!(u("protected/a"), Err(404));
        // Decoded once only: %252e is the name "%2e".
        assert_eq!(
            u("/protected/%252e%252e/a"),
            Ok("/srv/private/%2e%2e/a".into())
        );
    }
}
