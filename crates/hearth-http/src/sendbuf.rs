//! What a PHP response holds while its client takes it.
//!
//! A worker's response is read as fast as the worker writes it, never at
//! the pace of the client: the worker is free for the next request as
//! soon as it has finished, however slow (or hostile) the client. This is
//! how nginx frees a php-fpm worker: `fastcgi_buffers` in memory, then a
//! temporary file up to `fastcgi_max_temp_file_size`.
//!
//! What waits for the client is bounded three ways:
//!
//! - each response keeps up to [`Limits::buffer`] in memory of its own;
//! - beyond that, up to [`MEMORY_PER_RESPONSE`] in all, taken from one
//!   memory budget shared by all responses ([`Limits::memory`]);
//! - the rest goes to an unlinked temporary file, within one disk budget
//!   shared by all responses ([`Limits::disk`]).
//!
//! When neither memory nor disk can take more, Hearth stops reading from
//! the worker until the client takes something: the worker then waits on
//! the client, within `--request-timeout`, as it would behind nginx once
//! `fastcgi_max_temp_file_size` is reached.
//!
//! The client side hands hyper a chunk at a time ([`CHUNK_HTTP1`],
//! [`CHUNK_HTTP2`]), so what hyper and h2 hold for a stalled response
//! stays small too.

use std::collections::VecDeque;
use std::fs::File;
use std::future::Future as _;
use std::io;
use std::os::unix::fs::FileExt as _;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::{Buf as _, Bytes};
use futures_util::Stream;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::throttle::{self, Throttle};

/// Temporary file failures (a full disk) are logged at most this often:
/// otherwise every response would say so.
const LOG_EVERY: Duration = Duration::from_secs(10);
static FILE_FAILURES: Throttle = Throttle::new(LOG_EVERY);

/// Most bytes handed to hyper at once over HTTP/1.1: a connection holds
/// one response, and larger pieces cost fewer trips through hyper.
pub(crate) const CHUNK_HTTP1: usize = 64 << 10;

/// Most bytes handed to hyper at once over HTTP/2, where a connection may
/// hold 128 responses: one DATA frame at the default frame size.
pub(crate) const CHUNK_HTTP2: usize = 16 << 10;

/// Most bytes of one response kept in memory, budget included: a piece
/// of body the worker sends at once (4 MiB at most) fits, so that a
/// client that keeps up never touches the disk.
pub(crate) const MEMORY_PER_RESPONSE: usize = 4 << 20;

/// Bytes shared by all responses; taken and given back as they come and go.
#[derive(Debug)]
pub(crate) struct Budget {
    left: AtomicU64,
}

impl Budget {
    pub fn new(bytes: u64) -> Arc<Budget> {
        Arc::new(Budget {
            left: AtomicU64::new(bytes),
        })
    }

    /// Takes up to `n` bytes, and says how many it took.
    fn take_up_to(&self, n: u64) -> u64 {
        let mut taken = 0;
        let _ = self
            .left
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
                taken = left.min(n);
                Some(left - taken)
            });
        taken
    }

    /// Takes exactly `n` bytes, or none.
    pub fn take(self: &Arc<Self>, n: u64) -> Option<Charge> {
        self.left
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
                left.checked_sub(n)
            })
            .ok()
            .map(|_| Charge {
                budget: self.clone(),
                bytes: n,
            })
    }

    fn give(&self, n: u64) {
        if n > 0 {
            self.left.fetch_add(n, Ordering::AcqRel);
        }
    }

    /// Bytes not taken.
    #[cfg(test)]
    pub fn left(&self) -> u64 {
        self.left.load(Ordering::Acquire)
    }
}

/// Bytes of a [`Budget`], given back when dropped.
#[derive(Debug)]
pub struct Charge {
    budget: Arc<Budget>,
    bytes: u64,
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.budget.give(self.bytes);
    }
}

/// How much responses may hold while their clients take them.
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    /// Bytes each response may keep in memory without touching the budget.
    pub buffer: usize,
    /// Memory shared by all responses, beyond their own `buffer`.
    pub memory: Arc<Budget>,
    /// Temporary files shared by all responses.
    pub disk: Arc<Budget>,
    /// Where the temporary files go (unlinked at once); None: the system's
    /// temporary directory (`TMPDIR`).
    pub dir: Option<PathBuf>,
}

impl Limits {
    /// Keeps a whole response of `len` bytes in memory, if it fits its own
    /// buffer (no charge) or the memory budget (the charge rides with the
    /// body). None: spool it.
    pub fn hold(&self, len: usize) -> Option<Option<Charge>> {
        if len <= self.buffer {
            return Some(None);
        }
        if len > MEMORY_PER_RESPONSE {
            return None;
        }
        self.memory.take((len - self.buffer) as u64).map(Some)
    }
}

/// The response's end, as the writer reports it.
type End = Result<(), String>;

#[derive(Debug, Default)]
struct State {
    /// Bytes in memory, oldest first; all of them come before the file's.
    memory: VecDeque<Bytes>,
    in_memory: usize,
    /// Bytes of `in_memory` taken from the memory budget.
    charged: u64,
    file: Option<Arc<File>>,
    /// The file could not be made or written: memory only, from now on.
    file_failed: bool,
    /// Bytes of the file written and taken; unread ones are in
    /// `read..written`. Both go back to 0 once the file is drained.
    written: u64,
    read: u64,
    /// The file's length, charged to the disk budget.
    file_len: u64,
    end: Option<End>,
    reader: Option<Waker>,
    reader_gone: bool,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    /// The reader took something or left.
    progress: Notify,
    limits: Limits,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        self.limits.memory.give(state.charged);
        self.limits.disk.give(state.file_len);
    }
}

/// A new response spool: the writer side for the task that reads the
/// worker, the reader side for the response body, which yields at most
/// `chunk` bytes at a time. `len`, when known, is the length the writer
/// will write (a whole response).
pub(crate) fn spool(limits: Limits, len: Option<u64>, chunk: usize) -> (Writer, Reader) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State::default()),
        progress: Notify::new(),
        limits,
    });
    (
        Writer {
            shared: shared.clone(),
            ended: false,
        },
        Reader {
            shared,
            reading: None,
            len,
            chunk: chunk.max(1),
            done: false,
        },
    )
}

/// Why the writer could not add more.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum PushError {
    /// The client is gone (the body was dropped): nobody reads the rest.
    Gone,
    /// Neither memory nor disk could take more, and the client took
    /// nothing more before the deadline.
    TimedOut,
}

/// The worker's side of a spool.
#[derive(Debug)]
pub(crate) struct Writer {
    shared: Arc<Shared>,
    ended: bool,
}

impl Writer {
    /// Adds `data` after what is there. Waits only when memory and disk
    /// are both full, for the client to take something, until `deadline`.
    pub async fn push(
        &mut self,
        mut data: Bytes,
        deadline: Option<Instant>,
    ) -> Result<(), PushError> {
        while !data.is_empty() {
            let progress = self.shared.progress.notified();
            tokio::pin!(progress);
            progress.as_mut().enable();
            let to_file = {
                let mut state = self.shared.lock();
                if state.reader_gone {
                    return Err(PushError::Gone);
                }
                if state.read == state.written {
                    // The file is drained: memory again, and the file
                    // starts over.
                    state.read = 0;
                    state.written = 0;
                    let room = self.memory_room(&mut state, data.len());
                    if room > 0 {
                        // A copy: the payload may share a large buffer.
                        let kept = Bytes::copy_from_slice(&data[..room]);
                        state.in_memory += room;
                        state.memory.push_back(kept);
                        data.advance(room);
                        if let Some(waker) = state.reader.take() {
                            waker.wake();
                        }
                        continue;
                    }
                }
                self.file_room(&mut state, data.len())
            };
            match to_file {
                Some((file, at, n)) => {
                    if let Err(e) = write_at(file, data.slice(..n), at).await {
                        // Degrade to memory alone: what the file holds is
                        // still read, and the worker waits for the client
                        // (disk full, say) rather than the response break.
                        if let Some(left_out) = FILE_FAILURES.allow() {
                            tracing::error!(
                                "cannot write a response to its temporary file: {e}; \
                                 its worker now waits for the client{}",
                                throttle::left_out(left_out, LOG_EVERY)
                            );
                        }
                        self.shared.lock().file_failed = true;
                        continue;
                    }
                    data.advance(n);
                    let mut state = self.shared.lock();
                    state.written = at + n as u64;
                    if let Some(waker) = state.reader.take() {
                        waker.wake();
                    }
                }
                None => {
                    // Memory and disk are full: wait for the client.
                    let waited = match deadline {
                        Some(at) => tokio::time::timeout_at(at, progress).await.is_ok(),
                        None => {
                            progress.await;
                            true
                        }
                    };
                    if !waited {
                        return Err(PushError::TimedOut);
                    }
                }
            }
        }
        Ok(())
    }

    /// How many of `want` bytes memory takes now: the response's own
    /// buffer first, then the shared budget.
    fn memory_room(&self, state: &mut State, want: usize) -> usize {
        let limits = &self.shared.limits;
        let own = limits.buffer.saturating_sub(state.in_memory);
        if want <= own {
            return want;
        }
        let cap = MEMORY_PER_RESPONSE.saturating_sub(state.in_memory.max(limits.buffer));
        let wanted = (want - own).min(cap) as u64;
        let got = limits.memory.take_up_to(wanted);
        state.charged += got;
        own + got as usize
    }

    /// Where in the file the next bytes go, and how many fit the disk
    /// budget (None: none do, or there is no file).
    fn file_room(&self, state: &mut State, want: usize) -> Option<(Arc<File>, u64, usize)> {
        if state.file_failed {
            return None;
        }
        let file = match &state.file {
            Some(file) => file.clone(),
            None => {
                let made = match &self.shared.limits.dir {
                    Some(dir) => tempfile::tempfile_in(dir),
                    None => tempfile::tempfile(),
                };
                match made {
                    Ok(file) => {
                        let file = Arc::new(file);
                        state.file = Some(file.clone());
                        file
                    }
                    Err(e) => {
                        if let Some(left_out) = FILE_FAILURES.allow() {
                            tracing::error!(
                                "cannot make a temporary file for a response: {e}; \
                                 its worker now waits for the client{}",
                                throttle::left_out(left_out, LOG_EVERY)
                            );
                        }
                        state.file_failed = true;
                        return None;
                    }
                }
            }
        };
        let at = state.written;
        let reusable = state.file_len.saturating_sub(at);
        let want = want as u64;
        if want > reusable {
            let got = self.shared.limits.disk.take_up_to(want - reusable);
            state.file_len += got;
        }
        let n = state.file_len.saturating_sub(at).min(want);
        (n > 0).then_some((file, at, n as usize))
    }

    /// The response ended: whole (`Ok`), or cut for the reason given.
    pub fn finish(mut self, end: End) {
        self.end(end);
    }

    fn end(&mut self, end: End) {
        self.ended = true;
        let mut state = self.shared.lock();
        state.end = Some(end);
        if let Some(waker) = state.reader.take() {
            waker.wake();
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if !self.ended {
            self.end(Err("the response was cut short".into()));
        }
    }
}

async fn write_at(file: Arc<File>, data: Bytes, at: u64) -> io::Result<()> {
    tokio::task::spawn_blocking(move || file.write_all_at(&data, at))
        .await
        .unwrap_or_else(|e| Err(io::Error::other(e)))
}

/// The client's side of a spool: the response body's bytes, a chunk at
/// a time.
#[derive(Debug)]
pub struct Reader {
    shared: Arc<Shared>,
    /// A read from the file under way.
    reading: Option<JoinHandle<io::Result<Bytes>>>,
    len: Option<u64>,
    chunk: usize,
    done: bool,
}

impl Reader {
    /// The body's length, when known in advance.
    pub(crate) fn len(&self) -> Option<u64> {
        self.len
    }

    /// The next bytes, None at the end, an error when the response was cut.
    pub(crate) fn poll_chunk(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, String>>> {
        if self.done {
            return Poll::Ready(None);
        }
        loop {
            if let Some(reading) = &mut self.reading {
                let read = std::task::ready!(Pin::new(reading).poll(cx));
                self.reading = None;
                let read = read.unwrap_or_else(|e| Err(io::Error::other(e)));
                return Poll::Ready(Some(match read {
                    Ok(bytes) => {
                        let mut state = self.shared.lock();
                        state.read += bytes.len() as u64;
                        drop(state);
                        self.shared.progress.notify_one();
                        Ok(bytes)
                    }
                    Err(e) => {
                        self.done = true;
                        Err(format!("cannot read a response's temporary file: {e}"))
                    }
                }));
            }
            let mut state = self.shared.lock();
            if let Some(front) = state.memory.front_mut() {
                let chunk = if front.len() > self.chunk {
                    front.split_to(self.chunk)
                } else {
                    state.memory.pop_front().unwrap_or_default()
                };
                state.in_memory -= chunk.len();
                let over = state.in_memory.saturating_sub(self.shared.limits.buffer) as u64;
                if state.charged > over {
                    self.shared.limits.memory.give(state.charged - over);
                    state.charged = over;
                }
                drop(state);
                self.shared.progress.notify_one();
                return Poll::Ready(Some(Ok(chunk)));
            }
            if state.read < state.written {
                let (at, n) = (
                    state.read,
                    (state.written - state.read).min(self.chunk as u64),
                );
                let Some(file) = state.file.clone() else {
                    self.done = true;
                    return Poll::Ready(Some(Err("a response's temporary file is gone".into())));
                };
                drop(state);
                self.reading = Some(tokio::task::spawn_blocking(move || {
                    let mut buf = vec![0; n as usize];
                    file.read_exact_at(&mut buf, at)?;
                    Ok(Bytes::from(buf))
                }));
                continue;
            }
            if let Some(end) = state.end.take() {
                self.done = true;
                return Poll::Ready(end.err().map(Err));
            }
            state.reader = Some(cx.waker().clone());
            return Poll::Pending;
        }
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.shared.lock().reader_gone = true;
        self.shared.progress.notify_one();
    }
}

/// A whole body held in memory (against the budget when `charge` is
/// set), handed out a chunk at a time.
#[derive(Debug)]
pub struct Held {
    data: Bytes,
    chunk: usize,
    _charge: Option<Charge>,
}

impl Held {
    pub fn new(data: Bytes, charge: Option<Charge>, chunk: usize) -> Held {
        Held {
            data,
            chunk: chunk.max(1),
            _charge: charge,
        }
    }

    /// The next chunk; None at the end.
    pub fn next_chunk(&mut self) -> Option<Bytes> {
        (!self.data.is_empty()).then(|| self.data.split_to(self.data.len().min(self.chunk)))
    }

    /// Bytes not handed out yet.
    pub fn remaining(&self) -> usize {
        self.data.len()
    }
}

/// What is left, for an encoder to read.
impl AsRef<[u8]> for Held {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

/// The bytes as a stream of I/O results, for an encoder to read.
impl Stream for Reader {
    type Item = io::Result<Bytes>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<io::Result<Bytes>>> {
        self.get_mut()
            .poll_chunk(cx)
            .map(|item| item.map(|r| r.map_err(io::Error::other)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt as _;

    fn limits(buffer: usize, memory: u64, disk: u64) -> Limits {
        Limits {
            buffer,
            memory: Budget::new(memory),
            disk: Budget::new(disk),
            dir: None,
        }
    }

    fn pattern(len: usize, seed: u8) -> Bytes {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    const CHUNK: usize = CHUNK_HTTP2;

    fn spool_(limits: Limits, len: Option<u64>) -> (Writer, Reader) {
        spool(limits, len, CHUNK)
    }

    async fn read_all(reader: &mut Reader) -> Vec<u8> {
        let mut out = Vec::new();
        while let Some(chunk) = reader.next().await {
            let chunk = chunk.expect("chunk");
            assert!(chunk.len() <= CHUNK, "{}", chunk.len());
            out.extend_from_slice(&chunk);
        }
        out
    }

    /// A client that reads nothing does not hold the writer: past memory,
    /// the bytes go to the file, in order, and the budgets come back.
    #[tokio::test]
    async fn a_response_goes_to_memory_then_to_the_file_in_order() {
        let limits = limits(4 << 10, 64 << 10, 8 << 20);
        let (memory, disk) = (limits.memory.clone(), limits.disk.clone());
        let (mut writer, mut reader) = spool_(limits, None);
        let mut sent = Vec::new();
        for (i, len) in [1000, 100_000, 3, 2_000_000, 70_000]
            .into_iter()
            .enumerate()
        {
            let piece = pattern(len, i as u8);
            sent.extend_from_slice(&piece);
            writer.push(piece, None).await.expect("push");
        }
        assert!(memory.left() < 64 << 10, "the budget took the overflow");
        assert!(disk.left() < 8 << 20, "the rest went to the file");
        writer.finish(Ok(()));
        assert_eq!(read_all(&mut reader).await, sent);
        drop(reader);
        assert_eq!(memory.left(), 64 << 10);
        assert_eq!(disk.left(), 8 << 20);
    }

    /// Bytes pushed while the client reads keep their order across the
    /// switches between memory and the file.
    #[tokio::test]
    async fn order_survives_reads_between_writes() {
        let (mut writer, mut reader) = spool_(limits(1 << 10, 0, 1 << 30), None);
        let mut sent = Vec::new();
        let mut got = Vec::new();
        for i in 0..200u32 {
            let piece = pattern((i as usize * 997) % 5000 + 1, i as u8);
            sent.extend_from_slice(&piece);
            writer.push(piece, None).await.expect("push");
            if i % 3 == 0 {
                if let Some(chunk) = reader.next().await {
                    got.extend_from_slice(&chunk.expect("chunk"));
                }
            }
        }
        writer.finish(Ok(()));
        got.extend(read_all(&mut reader).await);
        assert_eq!(got, sent);
    }

    /// With memory and disk full, the writer waits for the client, until
    /// its deadline; once the client takes something it goes on, and the
    /// drained file is used again from its start.
    #[tokio::test]
    async fn a_full_spool_waits_for_the_client_until_the_deadline() {
        let (mut writer, mut reader) = spool_(limits(1 << 10, 0, 4 << 10), None);
        let first = pattern(5 << 10, 1);
        writer.push(first.clone(), None).await.expect("fits");
        let soon = Instant::now() + std::time::Duration::from_millis(50);
        assert_eq!(
            writer.push(pattern(10, 2), Some(soon)).await,
            Err(PushError::TimedOut)
        );
        let second = pattern(8 << 10, 3);
        let pushing = {
            let second = second.clone();
            let far = Instant::now() + std::time::Duration::from_secs(30);
            tokio::spawn(async move {
                let pushed = writer.push(second, Some(far)).await;
                writer.finish(Ok(()));
                pushed
            })
        };
        let mut expected = first.to_vec();
        expected.extend_from_slice(&second);
        assert_eq!(read_all(&mut reader).await, expected);
        assert_eq!(pushing.await.expect("task"), Ok(()));
        assert_eq!(
            reader.shared.lock().file_len,
            4 << 10,
            "the file was reused"
        );
    }

    /// A client that leaves frees a writer waiting on it at once.
    #[tokio::test]
    async fn a_writer_waiting_on_a_client_that_leaves_stops() {
        let (mut writer, reader) = spool_(limits(1 << 10, 0, 0), None);
        writer.push(pattern(1 << 10, 1), None).await.expect("fits");
        let pushing = tokio::spawn(async move { writer.push(pattern(10, 2), None).await });
        tokio::task::yield_now().await;
        drop(reader);
        assert_eq!(pushing.await.expect("task"), Err(PushError::Gone));
    }

    #[tokio::test]
    async fn a_cut_response_ends_with_an_error() {
        let (mut writer, mut reader) = spool_(limits(1 << 10, 0, 1 << 20), None);
        writer.push(pattern(100, 0), None).await.expect("push");
        drop(writer);
        assert_eq!(
            reader.next().await.expect("data").expect("bytes").len(),
            100
        );
        assert!(reader.next().await.expect("the end").is_err());
        assert!(reader.next().await.is_none());
    }

    #[test]
    fn a_whole_response_is_held_within_its_buffer_or_the_budget() {
        let limits = limits(1 << 10, 10 << 10, 0);
        assert!(matches!(limits.hold(1 << 10), Some(None)));
        let charged = limits.hold(6 << 10).expect("fits").expect("charged");
        assert_eq!(limits.memory.left(), 5 << 10);
        assert!(limits.hold(7 << 10).is_none(), "the budget is short");
        drop(charged);
        assert_eq!(limits.memory.left(), 10 << 10);
        assert!(limits.hold(MEMORY_PER_RESPONSE + 1).is_none());
    }

    #[test]
    fn a_held_body_is_handed_out_a_chunk_at_a_time() {
        let mut held = Held::new(pattern(40, 0), None, 16);
        let sizes: Vec<usize> = std::iter::from_fn(|| held.next_chunk().map(|c| c.len())).collect();
        assert_eq!(sizes, [16, 16, 8]);
        assert_eq!(held.remaining(), 0);
    }
}
