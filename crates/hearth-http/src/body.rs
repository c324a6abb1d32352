//! Request bodies, received whole before a worker is involved (a slow
//! client never holds a PHP process), and what receiving them may cost.
//!
//! Like nginx's `client_body_buffer_size`, a body stays in memory up to
//! the buffer size and goes to a temporary file beyond it; the bytes of
//! bodies held in memory across all connections are bounded too
//! ([`Budget`]), and past that bound bodies go to files however small.
//! Memory follows the bytes received, never the frames they came in: a
//! body sent in a million one-byte chunks is gathered into one buffer (or
//! one file) like any other. Whether the workers can open those files
//! themselves or not (an `open_basedir` that excludes them), the files are
//! where the bytes wait: for workers that cannot, Hearth reads a file back
//! into frames only once a worker takes the request.
//!
//! HTTP/1.1 bodies are timed by the connection guard; HTTP/2 ones by
//! [`Paced`], with the same `--body-timeout` between two reads.
//!
//! Multipart forms are parsed from what this module received (see
//! [`form`](crate::form)).

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Limited};
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use tempfile::TempPath;
use tokio::time::{Instant, Sleep};

/// Errors of request bodies, boxed as `http_body` errors are.
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why a body could not be read.
#[derive(Debug)]
pub(crate) enum BodyError {
    /// Longer than the body limit: 413.
    TooLarge,
    /// Broken framing or a multipart body that does not parse: 400.
    Malformed(String),
    /// No byte of it for the body timeout: 408.
    Stalled,
    /// The client went away or the disk failed; nothing to answer.
    Io(String),
    /// The body could not be written to its temporary file: 500.
    Spool(String),
}

/// Where the bytes of a received body wait for a worker.
#[derive(Debug, Default)]
pub(crate) enum Held {
    /// No bytes.
    #[default]
    Empty,
    /// In memory, with their share of the budget (given back when this is
    /// dropped, with the bytes).
    Memory {
        bytes: Bytes,
        _reserved: Option<Reservation>,
    },
    /// In a temporary file of `len` bytes, removed when this is dropped
    /// (after the response).
    File { path: TempPath, len: usize },
}

impl Held {
    /// Bytes held.
    pub fn len(&self) -> usize {
        match self {
            Held::Empty => 0,
            Held::Memory { bytes, .. } => bytes.len(),
            Held::File { len, .. } => *len,
        }
    }
}

/// A request body as the worker will get it.
#[derive(Debug, Default)]
pub(crate) struct Body {
    /// The raw bytes (php://input), or for a parsed multipart form its
    /// serialized entries ([`Form`]).
    pub held: Held,
    /// Set for a parsed multipart form.
    pub form: Option<Form>,
    /// The workers open `held`'s file themselves (`BODY_FILE`); otherwise
    /// Hearth reads it back into frames when a worker takes the request.
    pub worker_reads_file: bool,
    /// Bytes received (the whole body, as declared by the client): the
    /// CONTENT_LENGTH PHP sees.
    pub len: usize,
    /// Uploaded files, removed when this is dropped (after the response),
    /// unless the app moved them away.
    pub uploads: Vec<TempPath>,
    /// Fields of a multipart form asked for by name (debug mode's Xdebug
    /// triggers), in the order sent, with their values when short.
    pub kept_fields: Vec<(String, Option<String>)>,
}

/// A parsed multipart form: its entries are held as the body of a PHP
/// `serialize()`d list, without the `a:N:{`...`}` around them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Form {
    /// Entries in the list.
    pub entries: usize,
    /// Protocol flags for its `FORM` frames: the limits PHP would have
    /// warned about ([`hearth_proto::flags::PARTS_LIMIT`],
    /// [`hearth_proto::flags::UPLOADS_LIMIT`]).
    pub flags: u16,
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
    pub fn left(&self) -> usize {
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

/// Where received bytes go.
#[derive(Debug)]
pub(crate) struct Spool<'a> {
    /// Up to this many bytes stay in memory, budget permitting.
    pub buffer_size: usize,
    pub budget: &'a Arc<Budget>,
    /// Where files are written: the workers' upload_tmp_dir for files
    /// they open themselves, Hearth's own temporary directory otherwise.
    pub dir: &'a Path,
    /// The workers' user and group, when they run as another user than
    /// Hearth and open the files themselves: files are handed to them.
    pub owner: Option<(u32, u32)>,
}

impl Spool<'_> {
    /// Hearth's own temporary directory, for files no worker opens.
    pub fn own_dir() -> PathBuf {
        std::env::temp_dir()
    }
}

/// Writes to a file go out in pieces of this size: small chunks (a
/// chunked body in tiny chunks) are gathered into one write, and no more
/// than this is waiting for the disk per body. A body that pauses holds
/// none of it.
const WRITE_SIZE: usize = 64 << 10;

/// Bytes being received: gathered in memory up to the spool's buffer
/// size while the budget allows, then moved to a file and written there.
#[derive(Debug)]
pub(crate) struct Sink<'a> {
    spool: &'a Spool<'a>,
    /// `hearth-body-`, `hearth-form-`: what the file holds.
    prefix: &'static str,
    memory: BytesMut,
    reserved: Option<Reservation>,
    file: Option<SpoolFile>,
    len: usize,
}

impl<'a> Sink<'a> {
    pub fn new(spool: &'a Spool<'a>, prefix: &'static str) -> Sink<'a> {
        Sink {
            spool,
            prefix,
            memory: BytesMut::new(),
            reserved: None,
            file: None,
            len: 0,
        }
    }

    /// Adds `chunk`: to memory if it fits the buffer and the budget, else
    /// (with everything before it) to the file.
    pub async fn push(&mut self, chunk: &[u8]) -> Result<(), BodyError> {
        self.len += chunk.len();
        if self.file.is_none() {
            let fits = self.memory.len() + chunk.len() <= self.spool.buffer_size
                && match &mut self.reserved {
                    Some(r) => r.grow(chunk.len()),
                    None => {
                        self.reserved = self.spool.budget.take(chunk.len());
                        self.reserved.is_some()
                    }
                };
            if fits {
                self.memory.extend_from_slice(chunk);
                return Ok(());
            }
            self.spill().await?;
        }
        match &mut self.file {
            Some(file) => file.write(chunk).await,
            None => Ok(()),
        }
    }

    /// From now on bytes go to a file (those in memory first).
    pub async fn spill(&mut self) -> Result<(), BodyError> {
        if self.file.is_some() {
            return Ok(());
        }
        let mut file = SpoolFile::create(self.spool, self.prefix).await?;
        let memory = std::mem::take(&mut self.memory);
        self.reserved = None;
        if !memory.is_empty() {
            file.write(&memory).await?;
        }
        self.file = Some(file);
        Ok(())
    }

    /// The bytes pause: those gathered for the file go to it, and their
    /// buffer is given back, so that a body that trickles in holds no
    /// memory between its pieces.
    pub async fn pause(&mut self) -> Result<(), BodyError> {
        match &mut self.file {
            Some(file) => file.pause().await,
            None => Ok(()),
        }
    }

    /// What was received, where it is.
    pub async fn finish(self) -> Result<Held, BodyError> {
        if let Some(file) = self.file {
            return Ok(Held::File {
                path: file.finish().await?,
                len: self.len,
            });
        }
        if self.len == 0 {
            return Ok(Held::Empty);
        }
        Ok(Held::Memory {
            bytes: self.memory.freeze(),
            _reserved: self.reserved,
        })
    }
}

/// Reads a body, refusing more than `limit` bytes: into memory up to the
/// spool's buffer size, then into a temporary file. Returns where it is
/// and how long it was.
pub(crate) async fn raw<B>(body: B, limit: u64, spool: &Spool<'_>) -> Result<Held, BodyError>
where
    B: HttpBody<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let mut body = Limited::new(body, limit);
    let mut sink = Sink::new(spool, "hearth-body-");
    // A body announced larger than the buffer goes to a file from the start.
    if body
        .size_hint()
        .exact()
        .is_some_and(|n| n > spool.buffer_size as u64)
    {
        sink.spill().await?;
    }
    loop {
        let frame = match futures_util::FutureExt::now_or_never(body.frame()) {
            Some(frame) => frame,
            None => {
                sink.pause().await?;
                body.frame().await
            }
        };
        let Some(frame) = frame else {
            break;
        };
        let Ok(chunk) = frame.map_err(classify)?.into_data() else {
            // Trailers: PHP has no use for them.
            continue;
        };
        sink.push(&chunk).await?;
    }
    sink.finish().await
}

pub(crate) fn classify(e: BoxError) -> BodyError {
    if e.downcast_ref::<http_body_util::LengthLimitError>()
        .is_some()
    {
        return BodyError::TooLarge;
    }
    if e.downcast_ref::<StalledError>().is_some() {
        return BodyError::Stalled;
    }
    match e.downcast_ref::<hyper::Error>() {
        Some(he) if he.is_parse() => BodyError::Malformed(he.to_string()),
        _ => BodyError::Io(e.to_string()),
    }
}

/// A body being written to a temporary file.
#[derive(Debug)]
struct SpoolFile {
    path: TempPath,
    /// Written on a blocking thread, and back here between writes (tokio's
    /// own file keeps a buffer of its own for as long as the file is
    /// open; a body that pauses should hold none).
    file: Option<std::fs::File>,
    /// Small chunks gathered for one write; released while the body
    /// pauses.
    pending: BytesMut,
}

impl SpoolFile {
    /// A `PREFIX-XXXXXX` file, mode 0600, owned by the workers' user when
    /// they open it.
    async fn create(spool: &Spool<'_>, prefix: &'static str) -> Result<SpoolFile, BodyError> {
        let dir = spool.dir.to_path_buf();
        let owner = spool.owner;
        let created = tokio::task::spawn_blocking(move || {
            let named = tempfile::Builder::new()
                .prefix(prefix)
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
        Ok(SpoolFile {
            path,
            file: Some(file),
            pending: BytesMut::new(),
        })
    }

    async fn write(&mut self, chunk: &[u8]) -> Result<(), BodyError> {
        if self.pending.len() + chunk.len() > WRITE_SIZE && !self.pending.is_empty() {
            self.flush().await?;
        }
        if chunk.len() >= WRITE_SIZE {
            return self.write_out(Bytes::copy_from_slice(chunk)).await;
        }
        if self.pending.capacity() == 0 {
            self.pending.reserve(WRITE_SIZE);
        }
        self.pending.extend_from_slice(chunk);
        Ok(())
    }

    /// Writes the gathered chunks.
    async fn flush(&mut self) -> Result<(), BodyError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let pending = self.pending.split().freeze();
        self.write_out(pending).await
    }

    async fn write_out(&mut self, bytes: Bytes) -> Result<(), BodyError> {
        use std::io::Write as _;
        let failed = |e: &dyn std::fmt::Display| {
            BodyError::Spool(format!("cannot write {}: {e}", self.path.display()))
        };
        let Some(mut file) = self.file.take() else {
            return Err(failed(&"an earlier write failed"));
        };
        let (file, written) = tokio::task::spawn_blocking(move || {
            let written = file.write_all(&bytes);
            (file, written)
        })
        .await
        .map_err(|e| failed(&e))?;
        self.file = Some(file);
        written.map_err(|e| failed(&e))
    }

    /// While the body pauses: what is gathered goes to disk, and its
    /// buffer is given back.
    async fn pause(&mut self) -> Result<(), BodyError> {
        self.flush().await?;
        self.pending = BytesMut::new();
        Ok(())
    }

    /// Writes what is left; the file is complete for the worker to read.
    async fn finish(mut self) -> Result<TempPath, BodyError> {
        self.flush().await?;
        Ok(self.path)
    }
}

/// The error of a [`Paced`] body that waited too long for its next bytes.
#[derive(Debug)]
struct StalledError(Duration);

impl std::fmt::Display for StalledError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "request body stalled: no data for {:?}", self.0)
    }
}

impl std::error::Error for StalledError {}

/// A request body that fails once its reader has waited `limit` for the
/// next frame: nginx's `client_body_timeout`, the time between two reads.
/// Only waiting counts: time the reader spends elsewhere (writing to disk)
/// between two frames does not.
///
/// HTTP/2 bodies need it: hyper has no timeout on a stream's body, and the
/// connection guard only sees HTTP/1.1 sockets.
#[derive(Debug)]
pub(crate) struct Paced<B> {
    inner: B,
    /// The limit and its timer; none: the body is timed elsewhere (an
    /// HTTP/1.1 body, by the connection guard).
    timer: Option<(Duration, Pin<Box<Sleep>>)>,
    /// The timer is set for the current wait.
    waiting: bool,
}

impl<B> Paced<B> {
    pub fn new(inner: B, limit: Option<Duration>) -> Paced<B> {
        Paced {
            inner,
            timer: limit.map(|limit| (limit, Box::pin(tokio::time::sleep(limit)))),
            waiting: false,
        }
    }
}

impl<B> HttpBody for Paced<B>
where
    B: HttpBody + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = B::Data;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, BoxError>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            this.waiting = false;
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        let Some((limit, timer)) = &mut this.timer else {
            return Poll::Pending;
        };
        if !this.waiting {
            this.waiting = true;
            timer.as_mut().reset(Instant::now() + *limit);
        }
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(StalledError(*limit))))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A body arriving in `pieces`, of unknown length (as a chunked one).
    pub(crate) fn chunked(
        pieces: &[&[u8]],
    ) -> impl HttpBody<Data = Bytes, Error = std::convert::Infallible> + Unpin {
        let frames: Vec<Result<Frame<Bytes>, std::convert::Infallible>> = pieces
            .iter()
            .map(|p| Ok(Frame::data(Bytes::copy_from_slice(p))))
            .collect();
        http_body_util::StreamBody::new(futures_util::stream::iter(frames))
    }

    fn spool<'a>(dir: &'a Path, budget: &'a Arc<Budget>, buffer_size: usize) -> Spool<'a> {
        Spool {
            buffer_size,
            budget,
            dir,
            owner: None,
        }
    }

    fn in_memory(held: &Held) -> &[u8] {
        match held {
            Held::Memory { bytes, .. } => bytes,
            other => panic!("not in memory: {other:?}"),
        }
    }

    fn in_file(held: &Held) -> Vec<u8> {
        match held {
            Held::File { path, len } => {
                let bytes = std::fs::read(path).expect("read");
                assert_eq!(bytes.len(), *len, "the length told");
                bytes
            }
            other => panic!("not in a file: {other:?}"),
        }
    }

    #[tokio::test]
    async fn bodies_up_to_the_buffer_stay_in_memory_and_larger_ones_go_to_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let budget = Budget::new(1 << 20);
        let spool = spool(dir.path(), &budget, 8);
        let body = raw(chunked(&[b"1234", b"5678"]), 100, &spool)
            .await
            .unwrap();
        assert_eq!((in_memory(&body), body.len()), (&b"12345678"[..], 8));
        assert_eq!(budget.left(), (1 << 20) - 8, "held while the body is");
        drop(body);
        assert_eq!(budget.left(), 1 << 20, "given back with it");

        let body = raw(chunked(&[b"1234", b"5678", b"9"]), 100, &spool)
            .await
            .unwrap();
        assert_eq!((in_file(&body), body.len()), (b"123456789".to_vec(), 9));
        assert_eq!(budget.left(), 1 << 20, "nothing held for a spooled body");
        let Held::File { path, .. } = &body else {
            unreachable!()
        };
        let path = path.to_path_buf();
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
        assert_eq!(in_file(&body), b"0123456789");

        let body = raw(chunked(&[]), 100, &spool).await.unwrap();
        assert!(matches!(body, Held::Empty), "{body:?}");
    }

    #[tokio::test]
    async fn past_the_memory_budget_even_small_bodies_go_to_files() {
        let dir = tempfile::tempdir().unwrap();
        let budget = Budget::new(10);
        let spool = spool(dir.path(), &budget, 8);
        let first = raw(chunked(&[b"12345678"]), 100, &spool).await.unwrap();
        assert_eq!(in_memory(&first), b"12345678");
        let second = raw(chunked(&[b"abc"]), 100, &spool).await.unwrap();
        assert_eq!(in_file(&second), b"abc", "2 bytes of budget left, 3 needed");
        let third = raw(chunked(&[b"x", b"y"]), 100, &spool).await.unwrap();
        assert_eq!(in_memory(&third), b"xy");
        assert_eq!(budget.left(), 0);
        drop((first, third));
        assert_eq!(budget.left(), 10);
    }

    /// Issue 16 (1): a body in one-byte chunks is gathered into one
    /// buffer, or one file, like any other.
    #[tokio::test]
    async fn tiny_chunks_are_gathered_and_every_byte_arrives() {
        let dir = tempfile::tempdir().unwrap();
        let budget = Budget::new(1 << 20);
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let mut pieces: Vec<&[u8]> = data.chunks(1).take(1000).collect();
        pieces.extend(data[1000..].chunks(70_000));
        let spool_all = spool(dir.path(), &budget, 0);
        let body = raw(chunked(&pieces), 1 << 20, &spool_all).await.unwrap();
        assert_eq!(in_file(&body), data);

        let in_memory_spool = spool(dir.path(), &budget, 1 << 20);
        let tiny: Vec<&[u8]> = data[..50_000].chunks(1).collect();
        let body = raw(chunked(&tiny), 1 << 20, &in_memory_spool)
            .await
            .unwrap();
        let Held::Memory { bytes, .. } = &body else {
            panic!("{body:?}")
        };
        assert_eq!(&bytes[..], &data[..50_000]);
        assert_eq!(budget.left(), (1 << 20) - 50_000, "counted in the budget");
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

    /// A body that never ends, sending `sent` and then nothing.
    fn stalls_after(
        sent: &'static [u8],
    ) -> impl HttpBody<Data = Bytes, Error = std::convert::Infallible> + Unpin {
        let first = futures_util::stream::iter([Ok(Frame::data(Bytes::from_static(sent)))]);
        http_body_util::StreamBody::new(futures_util::StreamExt::chain(
            first,
            futures_util::stream::pending(),
        ))
    }

    /// Issue 16 (2): an HTTP/2 body that stops arriving ends after the body
    /// timeout, counted from the last bytes, however long the body took
    /// before.
    #[tokio::test(start_paused = true)]
    async fn a_paced_body_fails_once_no_bytes_come_for_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let budget = Budget::new(1 << 20);
        let spool = spool(dir.path(), &budget, 1 << 10);
        let limit = Duration::from_secs(60);
        let begun = Instant::now();
        let body = Paced::new(stalls_after(b"abc"), Some(limit));
        let stalled = raw(body, 100, &spool).await;
        assert!(matches!(stalled, Err(BodyError::Stalled)), "{stalled:?}");
        assert_eq!(
            begun.elapsed(),
            limit,
            "the paused clock moved by the limit"
        );

        // Bytes that keep coming reset the clock.
        let slow = futures_util::stream::unfold(0, move |sent| async move {
            if sent == 5 {
                return None;
            }
            tokio::time::sleep(limit / 2).await;
            let frame = Frame::data(Bytes::from_static(b"x"));
            Some((Ok::<_, std::convert::Infallible>(frame), sent + 1))
        });
        let body = Paced::new(http_body_util::StreamBody::new(Box::pin(slow)), Some(limit));
        let whole = raw(body, 100, &spool).await.unwrap();
        assert_eq!(in_memory(&whole), b"xxxxx");
    }
}
