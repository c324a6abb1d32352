//! `multipart/form-data` POST bodies parsed as PHP's rfc1867 handler
//! (main/rfc1867.c) would, into the `$_POST` and `$_FILES` entries the
//! worker receives, with uploads written to files in `upload_tmp_dir`.
//!
//! The body is received first, like any other ([`body::raw`]: in memory
//! up to the buffer and the budget, in a file beyond), and parsed once it
//! is whole, from there: a client that trickles a form in holds no more
//! of the front's memory than one that trickles a raw body, whatever the
//! form holds (a text field of megabytes, a part head that never ends).
//! nginx + php-fpm does the same: nginx spools the body, PHP parses it.
//! The parsed entries go through the same buffer and budget.
//!
//! PHP's limits apply as PHP applies them, from the workers' own ini
//! values: `max_multipart_body_parts` (parts past it are not parsed),
//! `max_file_uploads` (files sent, not file inputs left empty),
//! `upload_max_filesize`, `MAX_FILE_SIZE`, `file_uploads`. What PHP would
//! warn about travels to the worker as flags on the `FORM` frames, and
//! the worker raises PHP's warning: one per request.

use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};
use hearth_proto::flags;
use hearth_proto::message::Ready;
use hearth_proto::php::{write_int, write_str, PhpArray};
use hyper::body::Body as HttpBody;
use tempfile::TempPath;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::body::{self, Body, BodyError, Form, Held, Sink, Spool};

/// PHP's UPLOAD_ERR_* codes.
const UPLOAD_ERR_INI_SIZE: i64 = 1;
const UPLOAD_ERR_FORM_SIZE: i64 = 2;
const UPLOAD_ERR_NO_FILE: i64 = 4;
const UPLOAD_ERR_CANT_WRITE: i64 = 7;

/// The PHP settings that decide how forms are parsed and uploads
/// handled, from the workers' handshake.
#[derive(Debug, Clone)]
pub(crate) struct UploadSettings {
    pub file_uploads: bool,
    /// PHP's `max_file_uploads`: files sent (a file input left empty
    /// sends none); 0 or less refuses every file.
    pub max_file_uploads: i64,
    pub upload_max_filesize: u64,
    pub post_max_size: u64,
    pub parse_post: bool,
    /// Parts (with a Content-Disposition) parsed at most: PHP's
    /// `max_multipart_body_parts`, or when it is negative (its default,
    /// -1) `max_input_vars` + `max_file_uploads`.
    pub max_parts: i64,
    pub tmp_dir: PathBuf,
    /// The workers' user and group, when they run as another user than
    /// Hearth: uploaded files are handed to them.
    pub owner: Option<(u32, u32)>,
    /// The workers can read request bodies spooled to files in `tmp_dir`
    /// (their library knows `BODY_FILE` frames, and open_basedir lets them).
    pub body_files: bool,
    /// The workers parse forms themselves, with PHP's own request startup
    /// (the Hearth extension): they get multipart bodies raw.
    pub native: bool,
    /// Fields whose values the parser keeps aside too, up to
    /// [`KEPT_VALUE`] bytes each (debug mode's Xdebug triggers).
    pub keep_fields: &'static [&'static str],
}

/// Longest value of a [`UploadSettings::keep_fields`] field kept; a longer
/// one is kept as present, without its value.
pub(crate) const KEPT_VALUE: usize = 256;

impl UploadSettings {
    /// The settings a worker reported; PHP's defaults for those it did
    /// not (a library older than this Hearth).
    pub fn from_ready(ready: Option<&Ready>) -> UploadSettings {
        let get = |name: &str| ready.and_then(|r| r.setting(name));
        let int = |name: &str, default: i64| {
            get(name)
                .and_then(|v| v.trim().parse::<i64>().ok())
                .unwrap_or(default)
        };
        let max_file_uploads = int("max_file_uploads", 20);
        let max_parts = match int("max_multipart_body_parts", -1) {
            n if n < 0 => int("max_input_vars", 1000).saturating_add(max_file_uploads),
            n => n,
        };
        UploadSettings {
            file_uploads: get("file_uploads").is_none_or(|v| v == "1"),
            max_file_uploads,
            upload_max_filesize: get("upload_max_filesize").map_or(2 << 20, |v| ini_bytes(&v)),
            post_max_size: get("post_max_size").map_or(8 << 20, |v| ini_bytes(&v)),
            parse_post: get("enable_post_data_reading").is_none_or(|v| v == "1"),
            max_parts,
            tmp_dir: get("upload_tmp_dir").map_or_else(std::env::temp_dir, PathBuf::from),
            owner: None,
            body_files: get("body_files").is_some_and(|v| v == "1"),
            native: get("native").is_some_and(|v| v == "1"),
            keep_fields: &[],
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

/// Where the parsing of one form stands, as rfc1867.c keeps it.
#[derive(Debug)]
struct Limits {
    /// Parts PHP would still parse (`body_parts_cnt`).
    parts_left: i64,
    /// Files PHP would still take (`upload_cnt`).
    uploads_left: i64,
    /// Set for good once a file is refused (`skip_upload`): PHP drops
    /// every file after it.
    skip_files: bool,
    /// The `FORM` flags: what PHP would have warned about.
    flags: u16,
}

/// Forms parsed at once, at most. Parsing a received form is quick (it is
/// on disk or in memory already), and what it keeps is held as bodies are
/// (field values, the entries). But the parser's own buffer can grow to
/// the size of the body while a parse runs: it reads ahead a piece each
/// time it is asked for a part (a form of many tiny parts gets ahead of
/// it), and keeps everything while it looks for the end of a part head
/// (a form made of one endless part head). This bounds how many such
/// buffers there are: `PARSES_AT_ONCE` × `--max-body-size` at worst, for
/// the moment a parse lasts.
pub(crate) const PARSES_AT_ONCE: usize = 2;

/// Receives a multipart form and parses it as PHP's rfc1867 handler
/// would: uploads written to `settings.tmp_dir`, the entries (and the
/// body while it is parsed) held as `spool` holds bodies. Parsing stops
/// at `max_multipart_body_parts`; the rest of the body is received but
/// not parsed. The parse waits for one of the `parses` permits
/// ([`PARSES_AT_ONCE`]).
pub(crate) async fn multipart<B>(
    body: B,
    boundary: String,
    limit: u64,
    settings: &UploadSettings,
    spool: &Spool<'_>,
    parses: &tokio::sync::Semaphore,
) -> Result<Body, BodyError>
where
    B: HttpBody<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let received = body::raw(body, limit, spool).await?;
    let _parsing = parses
        .acquire()
        .await
        .map_err(|e| BodyError::Io(e.to_string()))?;
    // CONTENT_LENGTH is the size of the whole body, boundaries and part
    // headers included.
    let len = received.len();
    let stream: futures_util::stream::BoxStream<'static, std::io::Result<Bytes>> = match &received {
        Held::Empty => Box::pin(futures_util::stream::empty()),
        Held::Memory { bytes, .. } => Box::pin(futures_util::stream::iter([Ok(bytes.clone())])),
        Held::File { path, .. } => {
            let file = tokio::fs::File::open(path).await.map_err(|e| {
                BodyError::Spool(format!("cannot read back {}: {e}", path.display()))
            })?;
            Box::pin(tokio_util::io::ReaderStream::with_capacity(file, 64 << 10))
        }
    };
    let mut form = multer::Multipart::new(stream, boundary);
    let mut entries = Sink::new(spool, "hearth-form-");
    let mut count = 0usize;
    let mut scratch = BytesMut::new();
    let mut uploads = Vec::new();
    let mut max_file_size: Option<u64> = None;
    let mut kept = Vec::new();
    let mut limits = Limits {
        parts_left: settings.max_parts,
        uploads_left: settings.max_file_uploads,
        skip_files: false,
        flags: 0,
    };

    loop {
        let field = match form.next_field().await {
            Ok(Some(field)) => field,
            Ok(None) => break,
            Err(e) => return Err(multipart_error(e)),
        };
        if !field
            .headers()
            .contains_key(http::header::CONTENT_DISPOSITION)
        {
            // PHP skips such a part, without counting it.
            drain_field(field).await?;
            continue;
        }
        limits.parts_left -= 1;
        if limits.parts_left < 0 {
            limits.flags |= flags::PARTS_LIMIT;
            tracing::debug!(
                "multipart form cut at max_multipart_body_parts ({})",
                settings.max_parts
            );
            break;
        }
        let name = field.name().unwrap_or("").to_owned();
        let file_name = field.file_name().map(str::to_owned);
        let content_type = field
            .content_type()
            .map(|m| m.to_string())
            .unwrap_or_default();
        let Some(file_name) = file_name else {
            // A field's value may be as long as the body: it goes through
            // a sink of its own, then into the entries with its length.
            let mut value = Sink::new(spool, "hearth-field-");
            let mut field = field;
            while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
                value.push(&chunk).await?;
            }
            let value = value.finish().await?;
            if settings.keep_fields.contains(&name.as_str()) {
                let short = match &value {
                    Held::Memory { bytes, .. } if bytes.len() <= KEPT_VALUE => {
                        std::str::from_utf8(bytes).ok().map(str::to_owned)
                    }
                    _ => None,
                };
                kept.push((name.clone(), short));
            }
            if name == "MAX_FILE_SIZE" {
                max_file_size = match &value {
                    Held::Memory { bytes, .. } => std::str::from_utf8(bytes)
                        .ok()
                        .and_then(|v| v.trim().parse().ok()),
                    _ => None,
                };
            }
            // `i:N;a:2:{i:0;s:..:"name";i:1;s:..:"` value `";}`
            write_int(&mut scratch, count as i64);
            scratch.extend_from_slice(b"a:2:{");
            write_int(&mut scratch, 0);
            write_str(&mut scratch, name.as_bytes());
            write_int(&mut scratch, 1);
            scratch.extend_from_slice(format!("s:{}:\"", value.len()).as_bytes());
            count += 1;
            entries.push(&scratch.split()).await?;
            append(&mut entries, &value).await?;
            entries.push(b"\";}").await?;
            continue;
        };
        if !settings.file_uploads {
            limits.skip_files = true;
        } else if limits.uploads_left <= 0 {
            limits.skip_files = true;
            if limits.uploads_left == 0 {
                limits.uploads_left -= 1;
                limits.flags |= flags::UPLOADS_LIMIT;
            }
        }
        // "Never repair potential malicious user input."
        if !limits.skip_files && !clean_brackets(&name) {
            limits.skip_files = true;
        }
        if limits.skip_files {
            drain_field(field).await?;
            continue;
        }
        let (tmp, error, size) = if file_name.is_empty() {
            // An empty file input: nothing uploaded, nothing counted.
            drain_field(field).await?;
            (None, UPLOAD_ERR_NO_FILE, 0)
        } else {
            limits.uploads_left -= 1;
            upload(
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
                if error == 0 || error == UPLOAD_ERR_INI_SIZE || error == UPLOAD_ERR_FORM_SIZE {
                    content_type.as_bytes()
                } else {
                    b""
                },
            )
            .push_str(tmp_name.as_bytes())
            .push_int(error)
            .push_int(size as i64);
        write_int(&mut scratch, count as i64);
        entry.finish(&mut scratch);
        count += 1;
        entries.push(&scratch.split()).await?;
        uploads.extend(tmp);
    }
    drop(form);
    drop(received);
    Ok(Body {
        held: entries.finish().await?,
        form: Some(Form {
            entries: count,
            flags: limits.flags,
        }),
        worker_reads_file: false,
        len,
        uploads,
        kept_fields: kept,
    })
}

/// Whether PHP takes a file input by this name: brackets closed, nothing
/// after a `]` but another `[` (rfc1867.c refuses to repair the rest).
fn clean_brackets(name: &str) -> bool {
    let bytes = name.as_bytes();
    let mut depth = 0i64;
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'[' => depth += 1,
            b']' => {
                depth -= 1;
                if bytes.get(i + 1).is_some_and(|&next| next != b'[') {
                    return false;
                }
            }
            _ => {}
        }
        if depth < 0 {
            return false;
        }
    }
    depth == 0
}

fn multipart_error(e: multer::Error) -> BodyError {
    if let multer::Error::StreamReadFailed(inner) = &e {
        return BodyError::Spool(format!("cannot read back a received form: {inner}"));
    }
    BodyError::Malformed(e.to_string())
}

/// Adds what `held` holds to `sink`, a piece at a time.
async fn append(sink: &mut Sink<'_>, held: &Held) -> Result<(), BodyError> {
    match held {
        Held::Empty => Ok(()),
        Held::Memory { bytes, .. } => sink.push(bytes).await,
        Held::File { path, .. } => {
            let failed = |e: std::io::Error| {
                BodyError::Spool(format!("cannot read {}: {e}", path.display()))
            };
            let mut file = tokio::fs::File::open(path).await.map_err(failed)?;
            let mut piece = vec![0; 64 << 10];
            loop {
                let n = file.read(&mut piece).await.map_err(failed)?;
                if n == 0 {
                    return Ok(());
                }
                sink.push(&piece[..n]).await?;
            }
        }
    }
}

async fn drain_field(mut field: multer::Field<'_>) -> Result<(), BodyError> {
    while field.chunk().await.map_err(multipart_error)?.is_some() {}
    Ok(())
}

/// Writes one uploaded file to a `phpXXXXXX` file in `dir`, mode 0600.
/// Returns the file (none when refused), the UPLOAD_ERR code, and the size
/// PHP reports.
async fn upload(
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

    #[test]
    fn the_parts_limit_is_phps() {
        let ready = |pairs: &[(&str, &str)]| {
            let mut payload = BytesMut::new();
            hearth_proto::fields::put(&mut payload, "pid", b"1");
            hearth_proto::fields::put(&mut payload, "protocol", b"1");
            for (name, value) in pairs {
                hearth_proto::fields::put(&mut payload, name, value.as_bytes());
            }
            Ready::decode(&payload.freeze()).unwrap()
        };
        let limit =
            |pairs: &[(&str, &str)]| UploadSettings::from_ready(Some(&ready(pairs))).max_parts;
        assert_eq!(limit(&[]), 1020, "PHP's defaults: 1000 + 20");
        assert_eq!(limit(&[("max_multipart_body_parts", "-1")]), 1020);
        assert_eq!(
            limit(&[("max_input_vars", "10"), ("max_file_uploads", "3")]),
            13
        );
        assert_eq!(limit(&[("max_multipart_body_parts", "5")]), 5);
        assert_eq!(limit(&[("max_multipart_body_parts", "0")]), 0);
        assert_eq!(UploadSettings::from_ready(None).max_parts, 1020);
    }

    #[test]
    fn brackets_php_would_not_repair() {
        for good in ["a", "a[]", "a[b][c]", "a[][]", ""] {
            assert!(clean_brackets(good), "{good}");
        }
        for bad in ["a[", "a]", "a[b]c", "a]b[", "a[[b]"] {
            assert!(!clean_brackets(bad), "{bad}");
        }
    }

    fn settings(dir: &Path, max_parts: i64, max_file_uploads: i64) -> UploadSettings {
        UploadSettings {
            file_uploads: true,
            max_file_uploads,
            upload_max_filesize: 2 << 20,
            post_max_size: 8 << 20,
            parse_post: true,
            max_parts,
            tmp_dir: dir.to_path_buf(),
            owner: None,
            body_files: true,
            native: false,
            keep_fields: &[],
        }
    }

    /// Parses `body` and returns the entries (the list PHP unserializes),
    /// the flags and the uploads.
    async fn parse(body: &str, settings: &UploadSettings, buffer_size: usize) -> (String, Body) {
        let budget = body::Budget::new(1 << 20);
        let own = tempfile::tempdir().unwrap();
        let spool = Spool {
            buffer_size,
            budget: &budget,
            dir: own.path(),
            owner: None,
        };
        let pieces: Vec<&[u8]> = body.as_bytes().chunks(7).collect();
        let parsed = multipart(
            crate::body::tests::chunked(&pieces),
            "B".into(),
            1 << 20,
            settings,
            &spool,
            &tokio::sync::Semaphore::new(1),
        )
        .await
        .unwrap();
        let entries = match &parsed.held {
            Held::Memory { bytes, .. } => bytes.to_vec(),
            Held::File { path, .. } => std::fs::read(path).unwrap(),
            Held::Empty => Vec::new(),
        };
        let form = parsed.form.unwrap();
        let text = format!(
            "a:{}:{{{}}}",
            form.entries,
            String::from_utf8(entries).unwrap()
        );
        (text, parsed)
    }

    fn part(disposition: &str, data: &str) -> String {
        format!("--B\r\nContent-Disposition: form-data; {disposition}\r\n\r\n{data}\r\n")
    }

    #[tokio::test]
    async fn fields_asked_for_are_kept_aside_with_their_short_values() {
        let dir = tempfile::tempdir().unwrap();
        let long = "k".repeat(KEPT_VALUE + 1);
        let body = [
            part("name=\"a\"", "1"),
            part("name=\"keep\"", "first"),
            part("name=\"keep\"; filename=\"f.txt\"", "a file is no field"),
            part("name=\"keep\"", &long),
            part("name=\"other\"", "2"),
            "--B--\r\n".to_owned(),
        ]
        .concat();
        let mut settings = settings(dir.path(), 100, 20);
        settings.keep_fields = &["keep"];
        let (_, parsed) = parse(&body, &settings, 1 << 10).await;
        assert_eq!(
            parsed.kept_fields,
            [
                ("keep".to_owned(), Some("first".to_owned())),
                ("keep".to_owned(), None),
            ]
        );
        settings.keep_fields = &[];
        let (_, parsed) = parse(&body, &settings, 1 << 10).await;
        assert!(parsed.kept_fields.is_empty());
    }

    #[tokio::test]
    async fn parsing_stops_at_the_parts_limit() {
        let dir = tempfile::tempdir().unwrap();
        let body = [
            part("name=\"a\"", "1"),
            "--B\r\nContent-Type: text/plain\r\n\r\nno disposition: not a part PHP counts\r\n"
                .to_owned(),
            part("name=\"f\"; filename=\"\"", ""),
            part("name=\"c\"", "3"),
            "--B--\r\n".to_owned(),
        ]
        .concat();
        let (text, parsed) = parse(&body, &settings(dir.path(), 2, 20), 1 << 10).await;
        assert_eq!(
            text,
            "a:2:{i:0;a:2:{i:0;s:1:\"a\";i:1;s:1:\"1\";}\
             i:1;a:6:{i:0;s:1:\"f\";i:1;s:0:\"\";i:2;s:0:\"\";i:3;s:0:\"\";i:4;i:4;i:5;i:0;}}"
        );
        assert_eq!(parsed.form.unwrap().flags, flags::PARTS_LIMIT);
        assert_eq!(parsed.len, body.len());

        let (_, parsed) = parse(&body, &settings(dir.path(), 3, 20), 1 << 10).await;
        assert_eq!(
            parsed.form.unwrap(),
            Form {
                entries: 3,
                flags: 0
            }
        );
    }

    #[tokio::test]
    async fn max_file_uploads_counts_files_sent_and_warns_once() {
        let dir = tempfile::tempdir().unwrap();
        let body = [
            part("name=\"e\"; filename=\"\"", ""),
            part("name=\"u1\"; filename=\"1.txt\"", "x"),
            part("name=\"e\"; filename=\"\"", ""),
            part("name=\"u2\"; filename=\"2.txt\"", "y"),
            part("name=\"u3\"; filename=\"3.txt\"", "z"),
            part("name=\"after\"", "field"),
            part("name=\"e\"; filename=\"\"", ""),
            "--B--\r\n".to_owned(),
        ]
        .concat();
        let (text, parsed) = parse(&body, &settings(dir.path(), 100, 2), 1 << 10).await;
        let form = parsed.form.unwrap();
        assert_eq!(form.flags, flags::UPLOADS_LIMIT);
        // e, u1, e, u2, the field; u3 and the last empty input are dropped.
        assert_eq!(form.entries, 5, "{text}");
        assert_eq!(parsed.uploads.len(), 2);
        assert!(text.contains("s:5:\"field\""), "{text}");

        let (_, parsed) = parse(&body, &settings(dir.path(), 100, 0), 1 << 10).await;
        assert_eq!(parsed.form.unwrap().entries, 1, "no file at all");
        assert!(parsed.uploads.is_empty());
    }

    /// PHP drops every file after one whose name it would have to repair.
    #[tokio::test]
    async fn files_after_a_broken_name_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let body = [
            part("name=\"ok\"; filename=\"1.txt\"", "x"),
            part("name=\"a[b]c\"; filename=\"2.txt\"", "y"),
            part("name=\"later\"; filename=\"3.txt\"", "z"),
            part("name=\"field\"", "kept"),
            "--B--\r\n".to_owned(),
        ]
        .concat();
        let (_, parsed) = parse(&body, &settings(dir.path(), 100, 20), 1 << 10).await;
        assert_eq!(parsed.form.unwrap().entries, 2);
        assert_eq!(parsed.uploads.len(), 1);
    }

    /// Issue 16 (2): a form is held like any body: its entries past the
    /// buffer go to a file, and the file it was received in is gone once
    /// it is parsed.
    #[tokio::test]
    async fn large_forms_are_held_in_files() {
        let dir = tempfile::tempdir().unwrap();
        let big = "v".repeat(5000);
        let body = [part("name=\"big\"", &big), "--B--\r\n".to_owned()].concat();
        let budget = body::Budget::new(1 << 20);
        let own = tempfile::tempdir().unwrap();
        let spool = Spool {
            buffer_size: 1024,
            budget: &budget,
            dir: own.path(),
            owner: None,
        };
        let parsed = multipart(
            crate::body::tests::chunked(&[body.as_bytes()]),
            "B".into(),
            1 << 20,
            &settings(dir.path(), 100, 20),
            &spool,
            &tokio::sync::Semaphore::new(1),
        )
        .await
        .unwrap();
        let names: Vec<String> = std::fs::read_dir(own.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        assert!(names[0].starts_with("hearth-form-"), "{names:?}");
        let Held::File { path, len } = &parsed.held else {
            panic!("{:?}", parsed.held)
        };
        assert_eq!(std::fs::metadata(path).unwrap().len() as usize, *len);
        assert_eq!(budget.left(), 1 << 20, "nothing held in memory");
    }
}
