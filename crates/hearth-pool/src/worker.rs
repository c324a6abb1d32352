//! One worker process as the pool sees it: its bookkeeping, shared by
//! everyone who deals with it, and the handle a request holds.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::BytesMut;
use hearth_proto::message::{ErrorReport, Ready};
use hearth_proto::{encode_frame, Frame, FrameDecoder, Kind};
use tokio::sync::{oneshot, Notify};

use crate::channel::Channel;
use crate::observe::{Current, RestartReason};
use crate::{Error, Paths};

/// What the supervisor of a worker should do when asked to end it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Retire {
    /// Nothing asked yet.
    No = 0,
    /// The pool is stopping: the worker gets the stop message once its
    /// request ends, then the stop timeout, SIGTERM, SIGKILL.
    Stopping = 1,
    /// The worker was told to stop or is exiting by itself: give it the
    /// stop timeout, then SIGTERM, then SIGKILL.
    Graceful = 2,
    /// The worker ran past a request's time limit: SIGTERM at once, then
    /// SIGKILL after the kill timeout.
    Terminate = 3,
    /// The worker is broken (protocol error, abandoned mid-request): SIGKILL.
    Now = 4,
}

/// State shared by everyone who deals with one worker process: the
/// request currently holding it, a request queued behind that one, and the
/// supervisor.
#[derive(Debug)]
pub(crate) struct WorkerShared {
    pub pid: u32,
    /// Where it runs the app from: fixed when it boots.
    pub paths: Arc<Paths>,
    /// The channel. Reads belong to whoever holds the [`Worker`]; a queued
    /// request writes to it while the current one is still being read.
    pub channel: Channel,
    next_request_id: AtomicU32,
    /// Whether a request holds the worker, and the request queued behind
    /// it, changed together under one lock so that a queue slot is never
    /// offered on a worker that has just been released.
    pub link: Mutex<Link>,
    /// Set by the supervisor once the process has exited.
    dead: AtomicBool,
    /// Due for replacement (a lifecycle limit): takes no queued request.
    recycle: AtomicBool,
    /// Runs in a slot beyond `min_workers`: stopped when idle long enough.
    pub extra: AtomicBool,
    /// Stopped for being idle in such a slot: not replaced until needed.
    pub shrunk: AtomicBool,
    /// How the process ended, once the supervisor has reaped it.
    exit: Mutex<Option<std::process::ExitStatus>>,
    exited: Notify,
    retire: AtomicU8,
    retire_notify: Notify,
    /// When the process was started.
    pub created: Instant,
    /// Requests completed, mirrored from [`Worker::served`] for status
    /// reports (the [`Worker`] itself is held by one request at a time).
    pub served: AtomicU64,
    /// Why it is being replaced, once known: a [`RestartReason`] plus 1.
    reason: AtomicU8,
    /// A replacement is wanted: [`NO_REPLACEMENT`], [`REPLACEMENT_WANTED`]
    /// or [`REPLACEMENT_FAILED`]. The worker serves on until its
    /// replacement is ready, so the pool never runs short while one boots.
    replacement: AtomicU8,
    replacement_notify: Notify,
    /// The last error the worker reported (a fatal error, an uncaught
    /// exception), for the pool's status when it dies of it.
    last_report: Mutex<Option<String>>,
}

pub(crate) const NO_REPLACEMENT: u8 = 0;
pub(crate) const REPLACEMENT_WANTED: u8 = 1;
pub(crate) const REPLACEMENT_FAILED: u8 = 2;

/// See [`WorkerShared::link`].
#[derive(Debug, Default)]
pub(crate) struct Link {
    pub busy: bool,
    pub queued: Option<Queued>,
    /// The request running, as the HTTP front labelled it.
    pub current: Current,
}

/// A request written (or about to be written) to a busy worker, waiting
/// for the current request to end.
#[derive(Debug)]
pub(crate) struct Queued {
    pub id: u32,
    pub handover: oneshot::Sender<Handover>,
    /// [`WRITE_PENDING`] until the request's task starts writing, which it
    /// then finishes even if the client goes away: once writing started,
    /// the worker will answer, and someone must read that answer.
    pub state: Arc<AtomicU8>,
}

/// The queued request has not begun writing.
pub(crate) const WRITE_PENDING: u8 = 0;
/// The queued request's bytes are on their way to the worker.
pub(crate) const WRITE_STARTED: u8 = 1;

/// What a queued request learns when the request ahead of it ends.
#[derive(Debug)]
pub(crate) enum Handover {
    /// The worker is yours; your request is next in its channel.
    Worker(Worker),
    /// The worker failed or exited before reaching your request, which
    /// therefore never started: dispatch it again.
    Lost,
}

impl WorkerShared {
    pub fn new(pid: u32, channel: Channel, paths: Arc<Paths>) -> Arc<WorkerShared> {
        Arc::new(WorkerShared {
            pid,
            paths,
            channel,
            next_request_id: AtomicU32::new(0),
            link: Mutex::new(Link::default()),
            dead: AtomicBool::new(false),
            recycle: AtomicBool::new(false),
            extra: AtomicBool::new(false),
            shrunk: AtomicBool::new(false),
            exit: Mutex::new(None),
            exited: Notify::new(),
            retire: AtomicU8::new(Retire::No as u8),
            retire_notify: Notify::new(),
            created: Instant::now(),
            served: AtomicU64::new(0),
            reason: AtomicU8::new(0),
            replacement: AtomicU8::new(NO_REPLACEMENT),
            replacement_notify: Notify::new(),
            last_report: Mutex::new(None),
        })
    }

    /// The id for the next request written to this worker.
    pub fn next_request_id(&self) -> u32 {
        let id = self
            .next_request_id
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_add(1);
        if id == 0 {
            self.next_request_id
                .fetch_add(1, Ordering::Relaxed)
                .wrapping_add(1)
        } else {
            id
        }
    }

    /// Whether a request was ever written to it.
    pub fn took_requests(&self) -> bool {
        self.next_request_id.load(Ordering::Relaxed) > 0
    }

    /// Remembers the error the worker reported last.
    pub fn set_last_report(&self, report: String) {
        *self.last_report.lock().unwrap_or_else(|e| e.into_inner()) = Some(report);
    }

    /// The error the worker reported last, if any.
    pub fn last_report(&self) -> Option<String> {
        self.last_report
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn link(&self) -> std::sync::MutexGuard<'_, Link> {
        self.link.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Tells a queued request, if there is one, that it will not run here.
    pub fn fail_queued(&self) {
        let queued = self.link().queued.take();
        if let Some(q) = queued {
            let _ = q.handover.send(Handover::Lost);
        }
    }

    pub fn is_dead(&self) -> bool {
        self.dead.load(Ordering::Acquire)
    }

    fn mark_dead(&self) {
        self.dead.store(true, Ordering::Release);
    }

    /// Marks the worker for replacement after its current request.
    pub fn mark_recycle(&self) {
        self.recycle.store(true, Ordering::Release);
    }

    pub fn recycle_due(&self) -> bool {
        self.recycle.load(Ordering::Acquire)
    }

    /// Records how the process ended (the supervisor, after reaping it).
    pub fn set_exit(&self, status: Option<std::process::ExitStatus>) {
        *self.exit.lock().unwrap_or_else(|e| e.into_inner()) = status;
        self.mark_dead();
        self.exited.notify_waiters();
    }

    /// How the process ended: waits up to `within` for its supervisor to
    /// reap it. `None` if it has not exited by then (or the status is
    /// unknown).
    pub async fn exit_status(
        &self,
        within: std::time::Duration,
    ) -> Option<std::process::ExitStatus> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let notified = self.exited.notified();
            if self.is_dead() {
                return *self.exit.lock().unwrap_or_else(|e| e.into_inner());
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return None;
            }
        }
    }

    /// Asks the supervisor to end this worker. A stronger request wins.
    pub fn retire(&self, how: Retire) {
        self.retire.fetch_max(how as u8, Ordering::AcqRel);
        self.retire_notify.notify_one();
    }

    pub fn retire_mode(&self) -> Retire {
        match self.retire.load(Ordering::Acquire) {
            0 => Retire::No,
            1 => Retire::Stopping,
            2 => Retire::Graceful,
            3 => Retire::Terminate,
            _ => Retire::Now,
        }
    }

    /// Records why the worker is being replaced; the first reason given
    /// stands.
    pub fn set_reason(&self, reason: RestartReason) {
        let _ =
            self.reason
                .compare_exchange(0, reason as u8 + 1, Ordering::AcqRel, Ordering::Acquire);
    }

    /// Why the worker is being replaced, if a reason was recorded.
    pub fn reason(&self) -> Option<RestartReason> {
        RestartReason::from_u8(self.reason.load(Ordering::Acquire).checked_sub(1)?)
    }

    /// The worker as remembered once it has been replaced in `slot`.
    pub fn past(&self, slot: usize, reason: RestartReason) -> crate::observe::PastWorker {
        crate::observe::PastWorker {
            slot,
            pid: self.pid,
            reason,
            ended: std::time::SystemTime::now(),
            requests: self.served.load(Ordering::Relaxed),
            age: self.created.elapsed(),
        }
    }

    /// Asks the supervisor to boot this worker's replacement, then retire
    /// it. True if this call asked (it was not asked already, and the last
    /// attempt has not just failed).
    pub fn want_replacement(&self) -> bool {
        let asked = self
            .replacement
            .compare_exchange(
                NO_REPLACEMENT,
                REPLACEMENT_WANTED,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok();
        if asked {
            self.replacement_notify.notify_one();
        }
        asked
    }

    pub fn replacement_state(&self) -> u8 {
        self.replacement.load(Ordering::Acquire)
    }

    pub fn set_replacement_state(&self, state: u8) {
        self.replacement.store(state, Ordering::Release);
        self.replacement_notify.notify_waiters();
    }

    /// Resolves when a replacement is wanted.
    pub async fn replacement_wanted(&self) {
        loop {
            let notified = self.replacement_notify.notified();
            if self.replacement_state() == REPLACEMENT_WANTED {
                return;
            }
            notified.await;
        }
    }

    pub async fn retire_requested(&self) {
        self.retire_notify.notified().await;
    }
}

/// The pool's handle on one booted worker, held by one request at a time.
#[derive(Debug)]
pub(crate) struct Worker {
    pub shared: Arc<WorkerShared>,
    pub ready: Arc<Ready>,
    pub served: u64,
    /// When its handshake arrived (on the runtime's clock, which tests
    /// can pause and advance: `ttl` and `idle_ttl` are measured on it).
    pub started: tokio::time::Instant,
    /// When the worker last went back to the idle stack.
    pub idle_since: tokio::time::Instant,
    /// Requests it serves before it is replaced (`u64::MAX`: no limit).
    pub request_limit: u64,
    /// When its memory was last read, and how many requests it had served.
    pub memory_checked: (Instant, u64),
    /// Its part in memory growth by route (boxed: the handle moves
    /// between tasks at every request).
    pub growth: Box<Growth>,
    rbuf: BytesMut,
    pub(crate) wbuf: BytesMut,
    decoder: FrameDecoder,
}

/// A worker's part in memory growth by route.
#[derive(Debug, Default)]
pub(crate) struct Growth {
    /// The current request's route as the HTTP front labelled it, ids
    /// folded (see `routes::fold`); reused from request to request.
    pub route: String,
    /// The route of the last request and the memory its `End` reported:
    /// the next report tells how much that request grew the worker.
    pub measured: Option<(Arc<str>, u64)>,
    /// The last [`RECENT_ROUTES`] requests measured, newest last, with
    /// what each grew the worker by: logged when it is replaced for
    /// `max_memory`.
    pub recent: VecDeque<(Arc<str>, i64)>,
}

/// Requests a worker remembers the route and growth of, for the log line
/// of its replacement for `max_memory`.
pub(crate) const RECENT_ROUTES: usize = 10;

/// Buffers that grew past this while carrying a large body are released
/// after the request instead of being kept for the life of the worker.
const KEEP_BUFFER: usize = 256 * 1024;

impl Worker {
    pub fn new(shared: Arc<WorkerShared>, max_payload: u32) -> Worker {
        Worker {
            shared,
            ready: Arc::new(Ready {
                pid: 0,
                php_version: String::new(),
                sapi: String::new(),
                protocol: 0,
                fields: Default::default(),
            }),
            served: 0,
            started: tokio::time::Instant::now(),
            idle_since: tokio::time::Instant::now(),
            request_limit: u64::MAX,
            memory_checked: (Instant::now(), 0),
            growth: Box::default(),
            rbuf: BytesMut::with_capacity(16 * 1024),
            wbuf: BytesMut::with_capacity(4 * 1024),
            decoder: FrameDecoder::new(max_payload),
        }
    }

    pub fn pid(&self) -> u32 {
        self.shared.pid
    }

    /// The next frame from the worker, reading as much as needed.
    pub async fn read_frame(&mut self) -> Result<Frame, Error> {
        loop {
            if let Some(frame) = self.decoder.decode(&mut self.rbuf)? {
                return Ok(frame);
            }
            if self.rbuf.capacity() - self.rbuf.len() < 4096 {
                self.rbuf.reserve(64 * 1024);
            }
            match self.shared.channel.read_buf(&mut self.rbuf).await {
                Ok(0) => return Err(Error::worker_lost("the worker closed its channel")),
                Ok(_) => {}
                Err(e) => return Err(Error::worker_lost(format!("reading from the worker: {e}"))),
            }
        }
    }

    /// The next frame if it is already buffered; no I/O.
    pub fn buffered_frame(&mut self) -> Result<Option<Frame>, Error> {
        Ok(self.decoder.decode(&mut self.rbuf)?)
    }

    /// Writes the whole write buffer to the worker. The error says whether
    /// the worker may have read part of it (then it must not be retried).
    pub async fn flush(&mut self) -> Result<(), (Error, bool)> {
        let result = self.shared.channel.write_all(&self.wbuf).await;
        self.wbuf.clear();
        if self.wbuf.capacity() > KEEP_BUFFER {
            self.wbuf = BytesMut::with_capacity(4 * 1024);
        }
        result.map_err(|(e, written)| {
            (
                Error::worker_lost(format!("writing to the worker: {e}")),
                written > 0,
            )
        })
    }

    /// Sends a frame without waiting; for the stop message, which fits in
    /// an empty channel buffer. Returns whether it was written whole.
    pub fn try_send(&self, frame: &[u8]) -> bool {
        matches!(self.shared.channel.try_write(frame), Ok(n) if n == frame.len())
    }

    /// Whether the worker can take a request: see [`Channel::is_quiet`].
    pub fn is_quiet(&self) -> bool {
        self.shared.channel.is_quiet()
    }

    /// Counts a completed request, here and where status reports read it.
    pub fn count_served(&mut self) {
        self.served += 1;
        self.shared.served.store(self.served, Ordering::Relaxed);
    }

    /// Sends the stop message to a worker with nothing to do, and tells
    /// its supervisor to give it the stop timeout (or to kill it now, if
    /// the message could not be written).
    pub fn stop(&self) {
        let mut frame = BytesMut::with_capacity(hearth_proto::HEADER_LEN);
        encode_frame(&mut frame, Kind::Stop, 0, 0, &[]);
        if self.try_send(&frame) {
            self.shared.retire(Retire::Graceful);
        } else {
            self.shared.retire(Retire::Now);
        }
    }

    /// Called between requests: drops a read buffer that grew large.
    pub fn trim(&mut self) {
        if self.rbuf.is_empty() && self.rbuf.capacity() > KEEP_BUFFER {
            self.rbuf = BytesMut::with_capacity(16 * 1024);
        }
    }
}

/// Logs an error report (an uncaught exception, a fatal error) that the
/// worker `pid` sent inside a request.
/// Logs an error a worker reported, and returns it in one line.
pub(crate) fn log_report(pid: u32, frame: &Frame) -> String {
    match ErrorReport::decode(&frame.payload) {
        Ok(report) => {
            let trace = report.field("trace");
            let line = format!(
                "{} {}: {} in {}:{}",
                if report.field("kind") == "fatal" {
                    "PHP fatal error"
                } else {
                    "uncaught"
                },
                report.field("class"),
                report.field("message"),
                report.field("file"),
                report.field("line"),
            );
            tracing::error!(
                target: "hearth::worker",
                pid,
                kind = %report.field("kind"),
                method = %report.field("method"),
                uri = %report.field("uri"),
                "{} {}: {} in {}:{}{}{}",
                if report.field("kind") == "fatal" { "PHP fatal error" } else { "uncaught" },
                report.field("class"),
                report.field("message"),
                report.field("file"),
                report.field("line"),
                if trace.is_empty() { "" } else { "\nStack trace:\n" },
                trace,
            );
            line
        }
        Err(e) => {
            tracing::error!(target: "hearth::worker", pid, "unreadable error report: {e}");
            format!("unreadable error report: {e}")
        }
    }
}
