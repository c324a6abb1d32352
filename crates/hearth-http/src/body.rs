//! Request bodies: read whole before a worker is involved (a slow client
//! never holds a PHP process), bounded by the body limit, and for
//! `multipart/form-data` POSTs parsed here with uploads spooled to
//! temporary files, the way PHP's own upload handling shapes `$_FILES`.

use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};
use hearth_proto::message::Ready;
use hearth_proto::php::PhpArray;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use tempfile::TempPath;
use tokio::io::AsyncWriteExt;

/// PHP's UPLOAD_ERR_* codes.
const UPLOAD_ERR_INI_SIZE: i64 = 1;
const UPLOAD_ERR_FORM_SIZE: i64 = 2;
const UPLOAD_ERR_NO_FILE: i64 = 4;
const UPLOAD_ERR_CANT_WRITE: i64 = 7;

/// Why a body could not be read.
#[derive(Debug)]
pub(crate) enum BodyError {
    /// Longer than the body limit: 413.
    TooLarge,
    /// Broken framing or a multipart body that does not parse: 400.
    Malformed(String),
    /// The client went away or the disk failed; nothing to answer.
    Io(String),
}

/// A request body as the worker will get it.
#[derive(Debug, Default)]
pub(crate) struct Body {
    /// The raw bytes (php://input); empty for parsed multipart forms.
    pub raw: Bytes,
    /// Serialized fields and uploads of a multipart form.
    pub form: Option<Bytes>,
    /// Bytes received (the whole body, as declared by the client): the
    /// CONTENT_LENGTH PHP sees.
    pub len: usize,
    /// Uploaded files, removed when this is dropped (after the response),
    /// unless the app moved them away.
    pub uploads: Vec<TempPath>,
}

/// The PHP settings that decide how uploads are handled, from the workers'
/// handshake.
#[derive(Debug, Clone)]
pub(crate) struct UploadSettings {
    pub file_uploads: bool,
    pub max_file_uploads: usize,
    pub upload_max_filesize: u64,
    pub post_max_size: u64,
    pub parse_post: bool,
    pub tmp_dir: PathBuf,
    /// The workers' user and group, when they run as another user than
    /// Hearth: uploaded files are handed to them.
    pub owner: Option<(u32, u32)>,
}

impl UploadSettings {
    pub fn from_ready(ready: Option<&Ready>) -> UploadSettings {
        let get = |name: &str| ready.and_then(|r| r.setting(name));
        UploadSettings {
            file_uploads: get("file_uploads").is_none_or(|v| v == "1"),
            max_file_uploads: get("max_file_uploads")
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(20),
            upload_max_filesize: get("upload_max_filesize").map_or(2 << 20, |v| ini_bytes(&v)),
            post_max_size: get("post_max_size").map_or(8 << 20, |v| ini_bytes(&v)),
            parse_post: get("enable_post_data_reading").is_none_or(|v| v == "1"),
            tmp_dir: get("upload_tmp_dir").map_or_else(std::env::temp_dir, PathBuf::from),
            owner: None,
        }
    }
}

/// Bytes in a php.ini quantity ("8M", "512K", "1G", "1048576", "0x100000"),
/// read as PHP's ini_parse_quantity() reads it; 0 means no limit.
pub(crate) fn ini_bytes(value: &str) -> u64 {
    let value = value.trim();
    let (body, shift) = match value.chars().last().map(|c| c.to_ascii_lowercase()) {
        Some('k') => (&value[..value.len() - 1], 10),
        Some('m') => (&value[..value.len() - 1], 20),
        Some('g') => (&value[..value.len() - 1], 30),
        _ => (value, 0),
    };
    let body = body.trim();
    let lower = body.to_ascii_lowercase();
    let (digits, radix) = if let Some(hex) = lower.strip_prefix("0x") {
        (hex.to_owned(), 16)
    } else if let Some(oct) = lower.strip_prefix("0o") {
        (oct.to_owned(), 8)
    } else if let Some(bin) = lower.strip_prefix("0b") {
        (bin.to_owned(), 2)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (lower[1..].to_owned(), 8)
    } else {
        (lower, 10)
    };
    let valid: String = digits.chars().take_while(|c| c.is_digit(radix)).collect();
    u64::from_str_radix(&valid, radix).unwrap_or(0) << shift
}

/// The boundary when this is a form PHP would parse into `$_POST`/`$_FILES`.
pub(crate) fn multipart_boundary(
    method: &http::Method,
    content_type: Option<&http::HeaderValue>,
) -> Option<String> {
    if method != http::Method::POST {
        return None;
    }
    let ct = content_type?.to_str().ok()?;
    let mime = ct.split(';').next()?.trim();
    if !mime.eq_ignore_ascii_case("multipart/form-data") {
        return None;
    }
    multer::parse_boundary(ct).ok()
}

/// Reads a whole body into memory, refusing more than `limit` bytes.
pub(crate) async fn collect(body: Incoming, limit: u64) -> Result<Body, BodyError> {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    match Limited::new(body, limit).collect().await {
        Ok(collected) => {
            let raw = collected.to_bytes();
            Ok(Body {
                len: raw.len(),
                raw,
                ..Body::default()
            })
        }
        Err(e) => Err(classify(e)),
    }
}

fn classify(e: Box<dyn std::error::Error + Send + Sync>) -> BodyError {
    if e.downcast_ref::<http_body_util::LengthLimitError>()
        .is_some()
    {
        return BodyError::TooLarge;
    }
    match e.downcast_ref::<hyper::Error>() {
        Some(he) if he.is_parse() => BodyError::Malformed(he.to_string()),
        _ => BodyError::Io(e.to_string()),
    }
}

/// Parses a multipart form as PHP's rfc1867 handler would, spooling files
/// to `tmp_dir` and applying upload_max_filesize, MAX_FILE_SIZE,
/// max_file_uploads and file_uploads.
pub(crate) async fn multipart(
    body: Incoming,
    boundary: String,
    limit: u64,
    settings: &UploadSettings,
) -> Result<Body, BodyError> {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    // CONTENT_LENGTH is the size of the whole body, boundaries and part
    // headers included, as the client declared it: count what arrives.
    let received = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = received.clone();
    let stream = futures_util::StreamExt::inspect(
        Limited::new(body, limit).into_data_stream(),
        move |chunk| {
            if let Ok(bytes) = chunk {
                counter.fetch_add(bytes.len(), std::sync::atomic::Ordering::Relaxed);
            }
        },
    );
    let mut form = multer::Multipart::new(stream, boundary);
    let mut entries = PhpArray::with_capacity(512);
    let mut uploads = Vec::new();
    let mut files_seen = 0usize;
    let mut max_file_size: Option<u64> = None;

    loop {
        let field = match form.next_field().await {
            Ok(Some(field)) => field,
            Ok(None) => break,
            Err(e) => return Err(multipart_error(e)),
        };
        let name = field.name().unwrap_or("").to_owned();
        let file_name = field.file_name().map(str::to_owned);
        let content_type = field
            .content_type()
            .map(|m| m.to_string())
            .unwrap_or_default();
        match file_name {
            None => {
                let value = read_field(field).await?;
                if name == "MAX_FILE_SIZE" {
                    max_file_size = std::str::from_utf8(&value)
                        .ok()
                        .and_then(|v| v.trim().parse().ok());
                }
                let mut entry = PhpArray::with_capacity(name.len() + value.len() + 32);
                entry.push_str(name.as_bytes()).push_str(&value);
                entries.push_array(entry);
            }
            Some(file_name) => {
                if !settings.file_uploads {
                    drain_field(field).await?;
                    continue;
                }
                files_seen += 1;
                if settings.max_file_uploads > 0 && files_seen > settings.max_file_uploads {
                    tracing::warn!(
                        "upload beyond max_file_uploads ({}) ignored",
                        settings.max_file_uploads
                    );
                    drain_field(field).await?;
                    continue;
                }
                let (tmp, error, size) = if file_name.is_empty() {
                    drain_field(field).await?;
                    (None, UPLOAD_ERR_NO_FILE, 0)
                } else {
                    spool(
                        field,
                        &settings.tmp_dir,
                        settings.upload_max_filesize,
                        max_file_size,
                        settings.owner,
                    )
                    .await?
                };
                let tmp_name = tmp
                    .as_ref()
                    .map(|p: &TempPath| p.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let mut entry = PhpArray::with_capacity(256);
                entry
                    .push_str(name.as_bytes())
                    .push_str(file_name.as_bytes())
                    .push_str(
                        if error == 0
                            || error == UPLOAD_ERR_INI_SIZE
                            || error == UPLOAD_ERR_FORM_SIZE
                        {
                            content_type.as_bytes()
                        } else {
                            b""
                        },
                    )
                    .push_str(tmp_name.as_bytes())
                    .push_int(error)
                    .push_int(size as i64);
                entries.push_array(entry);
                uploads.extend(tmp);
            }
        }
    }
    let mut form = BytesMut::new();
    entries.finish(&mut form);
    Ok(Body {
        raw: Bytes::new(),
        form: Some(form.freeze()),
        len: received.load(std::sync::atomic::Ordering::Relaxed),
        uploads,
    })
}

fn multipart_error(e: multer::Error) -> BodyError {
    if let multer::Error::StreamReadFailed(inner) = &e {
        if inner
            .downcast_ref::<http_body_util::LengthLimitError>()
            .is_some()
        {
            return BodyError::TooLarge;
        }
        return BodyError::Io(inner.to_string());
    }
    BodyError::Malformed(e.to_string())
}

async fn read_field(mut field: multer::Field<'_>) -> Result<Vec<u8>, BodyError> {
    let mut value = Vec::new();
    while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
        value.extend_from_slice(&chunk);
    }
    Ok(value)
}

async fn drain_field(mut field: multer::Field<'_>) -> Result<(), BodyError> {
    while field.chunk().await.map_err(multipart_error)?.is_some() {}
    Ok(())
}

/// Writes one uploaded file to a `phpXXXXXX` file in `dir`, mode 0600.
/// Returns the file (none when refused), the UPLOAD_ERR code, and the size
/// PHP reports.
async fn spool(
    mut field: multer::Field<'_>,
    dir: &Path,
    max_size: u64,
    form_max: Option<u64>,
    owner: Option<(u32, u32)>,
) -> Result<(Option<TempPath>, i64, u64), BodyError> {
    let named = match tempfile::Builder::new()
        .prefix("php")
        .rand_bytes(6)
        .tempfile_in(dir)
    {
        Ok(f) => f,
        Err(e) => {
            tracing::error!("cannot create an upload file in {}: {e}", dir.display());
            drain_field(field).await?;
            return Ok((None, UPLOAD_ERR_CANT_WRITE, 0));
        }
    };
    let (std_file, path) = named.into_parts();
    if let Some((uid, gid)) = owner {
        if let Err(e) = std::os::unix::fs::fchown(&std_file, Some(uid), Some(gid)) {
            tracing::error!("cannot hand an upload file to the workers' user: {e}");
            drain_field(field).await?;
            return Ok((None, UPLOAD_ERR_CANT_WRITE, 0));
        }
    }
    let mut file = tokio::fs::File::from_std(std_file);
    let mut size: u64 = 0;
    let mut error = 0;
    while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
        if error != 0 {
            continue;
        }
        size += chunk.len() as u64;
        if max_size > 0 && size > max_size {
            error = UPLOAD_ERR_INI_SIZE;
            continue;
        }
        if form_max.is_some_and(|m| size > m) {
            error = UPLOAD_ERR_FORM_SIZE;
            continue;
        }
        if let Err(e) = file.write_all(&chunk).await {
            tracing::error!("cannot write upload file {}: {e}", path.display());
            error = UPLOAD_ERR_CANT_WRITE;
        }
    }
    if error == 0 {
        if let Err(e) = file.flush().await {
            tracing::error!("cannot write upload file {}: {e}", path.display());
            error = UPLOAD_ERR_CANT_WRITE;
        }
    }
    drop(file);
    if error != 0 {
        drop(path);
        return Ok((None, error, 0));
    }
    Ok((Some(path), 0, size))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ini_quantities() {
        assert_eq!(ini_bytes("8M"), 8 << 20);
        assert_eq!(ini_bytes("2m"), 2 << 20);
        assert_eq!(ini_bytes("512K"), 512 << 10);
        assert_eq!(ini_bytes("1G"), 1 << 30);
        assert_eq!(ini_bytes("1000"), 1000);
        assert_eq!(ini_bytes(""), 0);
        assert_eq!(ini_bytes("0x10"), 16);
        assert_eq!(ini_bytes("0x10K"), 16 << 10);
        assert_eq!(ini_bytes("0o17"), 15);
        assert_eq!(ini_bytes("0b11"), 3);
        assert_eq!(ini_bytes("010"), 8);
    }

    #[test]
    fn only_post_multipart_is_parsed() {
        let ct = http::HeaderValue::from_static("multipart/form-data; boundary=XyZ");
        assert_eq!(
            multipart_boundary(&http::Method::POST, Some(&ct)).as_deref(),
            Some("XyZ")
        );
        assert_eq!(multipart_boundary(&http::Method::PUT, Some(&ct)), None);
        let other = http::HeaderValue::from_static("application/json");
        assert_eq!(multipart_boundary(&http::Method::POST, Some(&other)), None);
        assert_eq!(multipart_boundary(&http::Method::POST, None), None);
    }
}
