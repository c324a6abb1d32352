//! Request bodies: read whole before a worker is involved (a slow client
//! never holds a PHP process), bounded by the body limit, and for
//! `multipart/form-data` POSTs parsed here with uploads spooled to
//! temporary files, the way PHP's own upload handling shapes `$_FILES`.
//!
//! Other bodies are the raw php://input. Like nginx's
//! `client_body_buffer_size`, a body stays in memory up to the buffer size
//! and is spooled to a temporary file beyond it, which the worker reads
//! lazily; the bytes of bodies held in memory across all connections are
//! bounded too ([`Budget`]), and past that bound bodies go to files
//! however small.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use hearth_proto::message::Ready;
use hearth_proto::php::PhpArray;
use http_body_util::{BodyExt, Limited};
use hyper::body::{Body as HttpBody, Incoming};
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
    /// The body could not be written to its temporary file: 500.
    Spool(String),
}

/// A request body as the worker will get it.
#[derive(Debug, Default)]
pub(crate) struct Body {
    /// The raw bytes (php://input) when they stayed in memory; empty for
    /// parsed multipart forms and for bodies spooled to `file`.
    pub raw: Bytes,
    /// The raw bytes' share of the memory budget, given back when this is
    /// dropped (with the bytes).
    pub _reserved: Option<Reservation>,
    /// The file the raw body was spooled to, removed when this is dropped
    /// (after the response).
    pub file: Option<TempPath>,
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
    /// The workers can read request bodies spooled to files in `tmp_dir`
    /// (their library knows `BODY_FILE` frames, and open_basedir lets them).
    pub body_files: bool,
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
            body_files: get("body_files").is_some_and(|v| v == "1"),
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
async fn collect<B>(body: B, limit: u64) -> Result<Body, BodyError>
where
    B: HttpBody<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
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

/// Bytes of request bodies held in memory across all connections, at most.
#[derive(Debug)]
pub(crate) struct Budget {
    left: AtomicUsize,
}

impl Budget {
    pub fn new(bytes: usize) -> Arc<Budget> {
        Arc::new(Budget {
            left: AtomicUsize::new(bytes),
        })
    }

    /// Takes `n` bytes of the budget, if that many are left.
    fn take(self: &Arc<Self>, n: usize) -> Option<Reservation> {
        self.left
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
                left.checked_sub(n)
            })
            .ok()
            .map(|_| Reservation {
                budget: self.clone(),
                bytes: n,
            })
    }

    /// Bytes not taken.
    #[cfg(test)]
    fn left(&self) -> usize {
        self.left.load(Ordering::Acquire)
    }
}

/// Bytes of the [`Budget`] held, given back when dropped.
#[derive(Debug)]
pub(crate) struct Reservation {
    budget: Arc<Budget>,
    bytes: usize,
}

impl Reservation {
    /// Takes `n` more bytes of the budget; false (and nothing taken) when
    /// that many are not left.
    fn grow(&mut self, n: usize) -> bool {
        match self.budget.take(n) {
            Some(more) => {
                self.bytes += more.bytes;
                std::mem::forget(more);
                true
            }
            None => false,
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.left.fetch_add(self.bytes, Ordering::AcqRel);
    }
}

/// Where raw bodies go.
#[derive(Debug)]
pub(crate) struct Spool<'a> {
    /// Bodies up to this many bytes stay in memory, budget permitting.
    pub buffer_size: usize,
    pub budget: &'a Arc<Budget>,
    /// Where spooled bodies are written (the workers' upload_tmp_dir).
    pub dir: &'a Path,
    /// The workers' user and group, when they run as another user than
    /// Hearth: spooled bodies are handed to them.
    pub owner: Option<(u32, u32)>,
    /// Whether the workers can read a spooled body; when they cannot
    /// (an old PHP library, open_basedir), bodies stay in memory.
    pub files: bool,
}

/// Writes to a spooled body go out in pieces of this size: small chunks
/// (a chunked body in tiny chunks) are gathered into one write, and no
/// more than this is waiting for the disk per body.
const WRITE_SIZE: usize = 64 << 10;

/// Reads a raw body, refusing more than `limit` bytes: into memory up to
/// the spool's buffer size, then into a temporary file.
pub(crate) async fn raw<B>(body: B, limit: u64, spool: &Spool<'_>) -> Result<Body, BodyError>
where
    B: HttpBody<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    if !spool.files {
        return collect(body, limit).await;
    }
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let mut body = Limited::new(body, limit);
    let mut len = 0usize;
    let mut memory = BytesMut::new();
    let mut reserved: Option<Reservation> = None;
    // A body announced larger than the buffer goes to a file from the start.
    let mut file = match body.size_hint().exact() {
        Some(n) if n > spool.buffer_size as u64 => Some(SpoolFile::create(spool).await?),
        _ => None,
    };
    while let Some(frame) = body.frame().await {
        let Ok(chunk) = frame.map_err(classify)?.into_data() else {
            // Trailers: PHP has no use for them.
            continue;
        };
        len += chunk.len();
        if file.is_none() {
            let fits = memory.len() + chunk.len() <= spool.buffer_size
                && match &mut reserved {
                    Some(r) => r.grow(chunk.len()),
                    None => {
                        reserved = spool.budget.take(chunk.len());
                        reserved.is_some()
                    }
                };
            if fits {
                memory.extend_from_slice(&chunk);
                continue;
            }
            let mut spooled = SpoolFile::create(spool).await?;
            spooled.write(memory.split().freeze()).await?;
            memory = BytesMut::new();
            reserved = None;
            file = Some(spooled);
        }
        if let Some(file) = &mut file {
            file.write(chunk).await?;
        }
    }
    if let Some(file) = file {
        return Ok(Body {
            file: Some(file.finish().await?),
            len,
            ..Body::default()
        });
    }
    Ok(Body {
        raw: memory.freeze(),
        _reserved: reserved,
        len,
        ..Body::default()
    })
}

/// A body being written to a temporary file.
struct SpoolFile {
    path: TempPath,
    file: tokio::fs::File,
    /// Small chunks gathered for one write.
    pending: BytesMut,
}

impl SpoolFile {
    /// A `hearth-body-XXXXXX` file, mode 0600, owned by the workers' user.
    async fn create(spool: &Spool<'_>) -> Result<SpoolFile, BodyError> {
        let dir = spool.dir.to_path_buf();
        let owner = spool.owner;
        let created = tokio::task::spawn_blocking(move || {
            let named = tempfile::Builder::new()
                .prefix("hearth-body-")
                .rand_bytes(6)
                .tempfile_in(&dir)
                .map_err(|e| format!("cannot create a file in {}: {e}", dir.display()))?;
            let (file, path) = named.into_parts();
            if let Some((uid, gid)) = owner {
                std::os::unix::fs::fchown(&file, Some(uid), Some(gid)).map_err(|e| {
                    format!("cannot hand {} to the workers' user: {e}", path.display())
                })?;
            }
            Ok::<_, String>((file, path))
        })
        .await
        .map_err(|e| BodyError::Spool(e.to_string()))?
        .map_err(BodyError::Spool)?;
        let (file, path) = created;
        let mut file = tokio::fs::File::from_std(file);
        // A write hands tokio a copy of the bytes: no more than one piece.
        file.set_max_buf_size(WRITE_SIZE);
        Ok(SpoolFile {
            path,
            file,
            pending: BytesMut::new(),
        })
    }

    async fn write(&mut self, chunk: Bytes) -> Result<(), BodyError> {
        if self.pending.len() + chunk.len() > WRITE_SIZE && !self.pending.is_empty() {
            let pending = self.pending.split();
            self.write_out(&pending).await?;
        }
        if chunk.len() >= WRITE_SIZE {
            return self.write_out(&chunk).await;
        }
        if self.pending.capacity() == 0 {
            self.pending.reserve(WRITE_SIZE);
        }
        self.pending.extend_from_slice(&chunk);
        Ok(())
    }

    async fn write_out(&mut self, bytes: &[u8]) -> Result<(), BodyError> {
        self.file
            .write_all(bytes)
            .await
            .map_err(|e| BodyError::Spool(format!("cannot write {}: {e}", self.path.display())))
    }

    /// Writes what is left; the file is complete for the worker to read.
    async fn finish(mut self) -> Result<TempPath, BodyError> {
        let pending = std::mem::take(&mut self.pending);
        if !pending.is_empty() {
            self.write_out(&pending).await?;
        }
        self.file
            .flush()
            .await
            .map_err(|e| BodyError::Spool(format!("cannot write {}: {e}", self.path.display())))?;
        Ok(self.path)
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
        form: Some(form.freeze()),
        len: received.load(std::sync::atomic::Ordering::Relaxed),
        uploads,
        ..Body::default()
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

    /// A body arriving in `pieces`, of unknown length (as a chunked one).
    fn chunked(
        pieces: &[&[u8]],
    ) -> impl HttpBody<Data = Bytes, Error = std::convert::Infallible> + Unpin {
        let frames: Vec<Result<hyper::body::Frame<Bytes>, std::convert::Infallible>> = pieces
            .iter()
            .map(|p| Ok(hyper::body::Frame::data(Bytes::copy_from_slice(p))))
            .collect();
        http_body_util::StreamBody::new(futures_util::stream::iter(frames))
    }

    fn spool<'a>(dir: &'a Path, budget: &'a Arc<Budget>, buffer_size: usize) -> Spool<'a> {
        Spool {
            buffer_size,
            budget,
            dir,
            owner: None,
            files: true,
        }
    }

    fn spooled(body: &Body) -> Vec<u8> {
        std::fs::read(body.file.as_ref().expect("a spooled body")).expect("read")
    }

    #[tokio::test]
    async fn bodies_up_to_the_buffer_stay_in_memory_and_larger_ones_go_to_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let budget = Budget::new(1 << 20);
        let spool = spool(dir.path(), &budget, 8);
        let body = raw(chunked(&[b"1234", b"5678"]), 100, &spool)
            .await
            .unwrap();
        assert_eq!((&body.raw[..], body.len), (&b"12345678"[..], 8));
        assert!(body.file.is_none());
        assert_eq!(budget.left(), (1 << 20) - 8, "held while the body is");
        drop(body);
        assert_eq!(budget.left(), 1 << 20, "given back with it");

        let body = raw(chunked(&[b"1234", b"5678", b"9"]), 100, &spool)
            .await
            .unwrap();
        assert!(body.raw.is_empty());
        assert_eq!((spooled(&body), body.len), (b"123456789".to_vec(), 9));
        assert_eq!(budget.left(), 1 << 20, "nothing held for a spooled body");
        let path = body.file.as_ref().unwrap().to_path_buf();
        assert!(path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("hearth-body-"));
        drop(body);
        assert!(!path.exists(), "removed with the body");

        // Announced larger than the buffer: straight to a file.
        let body = raw(
            http_body_util::Full::new(Bytes::from_static(b"0123456789")),
            100,
            &spool,
        )
        .await
        .unwrap();
        assert_eq!(spooled(&body), b"0123456789");
    }

    #[tokio::test]
    async fn past_the_memory_budget_even_small_bodies_go_to_files() {
        let dir = tempfile::tempdir().unwrap();
        let budget = Budget::new(10);
        let spool = spool(dir.path(), &budget, 8);
        let first = raw(chunked(&[b"12345678"]), 100, &spool).await.unwrap();
        assert!(first.file.is_none());
        let second = raw(chunked(&[b"abc"]), 100, &spool).await.unwrap();
        assert_eq!(spooled(&second), b"abc", "2 bytes of budget left, 3 needed");
        let third = raw(chunked(&[b"x", b"y"]), 100, &spool).await.unwrap();
        assert_eq!(&third.raw[..], b"xy");
        assert_eq!(budget.left(), 0);
        drop((first, third));
        assert_eq!(budget.left(), 10);
    }

    #[tokio::test]
    async fn tiny_chunks_are_written_together_and_every_byte_arrives() {
        let dir = tempfile::tempdir().unwrap();
        let budget = Budget::new(1 << 20);
        let spool = spool(dir.path(), &budget, 0);
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let mut pieces: Vec<&[u8]> = data.chunks(1).take(1000).collect();
        pieces.extend(data[1000..].chunks(70_000));
        let body = raw(chunked(&pieces), 1 << 20, &spool).await.unwrap();
        assert_eq!(spooled(&body), data);
        assert_eq!(body.len, data.len());
    }

    #[tokio::test]
    async fn more_than_the_limit_is_refused_and_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let budget = Budget::new(1 << 20);
        let spool = spool(dir.path(), &budget, 4);
        let refused = raw(chunked(&[b"12345", b"67890", b"x"]), 10, &spool).await;
        assert!(matches!(refused, Err(BodyError::TooLarge)), "{refused:?}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        assert_eq!(budget.left(), 1 << 20);
    }

    #[tokio::test]
    async fn a_directory_that_cannot_take_files_is_an_error_to_answer() {
        let budget = Budget::new(1 << 20);
        let missing = Path::new("/nonexistent/hearth-test");
        let spool = spool(missing, &budget, 4);
        let failed = raw(chunked(&[b"12345"]), 10, &spool).await;
        assert!(matches!(failed, Err(BodyError::Spool(_))), "{failed:?}");
    }

    #[tokio::test]
    async fn without_files_bodies_stay_in_memory() {
        let budget = Budget::new(0);
        let mut spool = spool(Path::new("/nonexistent/hearth-test"), &budget, 0);
        spool.files = false;
        let body = raw(chunked(&[b"12345"]), 10, &spool).await.unwrap();
        assert_eq!(&body.raw[..], b"12345");
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
