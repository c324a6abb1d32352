//! Handing workers to requests.
//!
//! A request takes an idle worker if there is one (the most recently used,
//! whose caches are warm), or waits in a FIFO line, bounded by the queue
//! timeout. A worker that has just started a request while others wait
//! offers one place behind it to the first of them: that request is
//! written to the worker's channel at once, and the worker starts it the
//! moment it writes the previous response, instead of sleeping until
//! Hearth has read that response and sent another. The worker still runs
//! one request at a time.
//!
//! A queued request cannot have started while the request ahead of it is
//! still running, so if the worker fails, exits or breaks before finishing
//! that one, the queued request is dispatched again, ahead of everyone.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use hearth_proto::message::ErrorReport;
use hearth_proto::{encode_frame, flags, Frame, Kind};
use tokio::sync::oneshot;

use crate::observe::RestartReason;
use crate::pool::Shared;
use crate::worker::{Handover, Queued, Retire, Worker, WorkerShared, WRITE_PENDING, WRITE_STARTED};
use crate::{Error, Paths};

/// Requests larger than this are never queued behind another: their bytes
/// could fill the channel of a worker that is not reading yet.
pub(crate) const QUEUE_MAX_BYTES: usize = 64 * 1024;

/// Idle workers older than this are checked before being handed a request.
const IDLE_CHECK_AFTER: Duration = Duration::from_millis(1);

/// With `max_memory`, a worker's memory is read after this many requests
/// or this long, whichever comes first: a few syscalls per check, not per
/// request, and a worker leaking a megabyte a request overshoots by a few.
const MEMORY_CHECK_REQUESTS: u64 = 4;
const MEMORY_CHECK_INTERVAL: Duration = Duration::from_millis(500);

/// The idle workers and the requests waiting for one.
#[derive(Debug, Default)]
pub(crate) struct Dispatch {
    /// Booted, idle workers, the most recently used on top.
    pub idle: Vec<Worker>,
    waiters: VecDeque<Waiter>,
    next_waiter: u64,
    /// No more requests: the pool is stopping.
    pub closed: bool,
}

#[derive(Debug)]
struct Waiter {
    id: u64,
    /// Small enough to be queued behind another request.
    queueable: bool,
    tx: oneshot::Sender<Assignment>,
}

/// What a waiting request is given.
#[derive(Debug)]
enum Assignment {
    /// An idle worker: write the request and read the response.
    Worker(Worker),
    /// A place behind the request a worker has just started: write the
    /// request with this id, then wait for the handover.
    Queued {
        link: Arc<WorkerShared>,
        id: u32,
        handover: oneshot::Receiver<Handover>,
        state: Arc<AtomicU8>,
    },
}

/// Counts waiters without taking the lock, to skip queue offers when
/// nobody waits (always, on a server that is not saturated).
#[derive(Debug, Default)]
pub(crate) struct WaiterCount(AtomicUsize);

impl WaiterCount {
    /// Requests waiting in line now.
    pub fn load(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }
}

impl Shared {
    fn dispatch(&self) -> std::sync::MutexGuard<'_, Dispatch> {
        self.dispatch.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set_waiting(&self, d: &Dispatch) {
        self.waiting.0.store(d.waiters.len(), Ordering::Release);
    }
}

/// Sends a request to a worker: `encode` writes its frames for the request
/// id and the worker's paths it is given (it may be called more than once
/// if a worker turns out to be gone before the request reached it). `len` is about how many bytes
/// `encode` writes.
pub(crate) async fn dispatch(
    pool: &Arc<Shared>,
    len: usize,
    encode: impl Fn(&mut BytesMut, u32, &Arc<Paths>),
) -> Result<Lease, Error> {
    let queueable = pool.config.pipelining && len <= QUEUE_MAX_BYTES;
    let mut first_in_line = false;
    let mut attempts = pool.slots.len() + 1;
    loop {
        match assign(pool, queueable, first_in_line).await? {
            Assignment::Worker(mut worker) => {
                worker.shared.link().busy = true;
                let id = worker.shared.next_request_id();
                encode(&mut worker.wbuf, id, &worker.shared.paths);
                // Until the request is written whole, dropping the lease
                // (this future cancelled) kills the worker: half a request
                // would leave it waiting for the rest.
                let mut lease = Lease::new(pool.clone(), worker, id);
                let worker = lease.worker.as_mut().expect("a new lease holds a worker");
                match worker.flush().await {
                    Ok(()) => {
                        lease.sent = true;
                        offer_queue(pool, &lease.link());
                        return Ok(lease);
                    }
                    // It took none of the request: it never saw it.
                    Err((e, false)) if attempts > 1 => {
                        tracing::debug!(pid = lease.pid(), "worker gone before its request: {e}");
                        attempts -= 1;
                    }
                    Err((e, _)) => return Err(e),
                }
            }
            Assignment::Queued {
                link,
                id,
                handover,
                state,
            } => {
                let mut bytes = BytesMut::with_capacity(len + 128);
                encode(&mut bytes, id, &link.paths);
                // From here the write completes even if this request is
                // dropped, and whoever frees the worker then reads and
                // discards the response.
                state.store(WRITE_STARTED, Ordering::Release);
                let writer = link.clone();
                let write =
                    tokio::spawn(async move { writer.channel.write_all(&bytes).await.is_ok() });
                let _ = write.await;
                let mut handover = HandoverGuard {
                    pool,
                    rx: Some(handover),
                    id,
                };
                match handover.recv().await {
                    Ok(Handover::Worker(worker)) => {
                        let mut lease = Lease::new(pool.clone(), worker, id);
                        lease.sent = true;
                        offer_queue(pool, &link);
                        return Ok(lease);
                    }
                    Ok(Handover::Lost) | Err(_) => {
                        tracing::debug!(
                            pid = link.pid,
                            request = id,
                            "worker lost before a queued request; dispatching it again"
                        );
                        first_in_line = true;
                    }
                }
            }
        }
    }
}

/// The receiving end of a place in line. Dropped before it received its
/// assignment (the request was cancelled), it gives back a worker that was
/// already on its way.
struct AssignGuard<'a> {
    pool: &'a Arc<Shared>,
    rx: oneshot::Receiver<Assignment>,
}

impl Drop for AssignGuard<'_> {
    fn drop(&mut self) {
        self.rx.close();
        if let Ok(Assignment::Worker(worker)) = self.rx.try_recv() {
            release(self.pool, worker);
        }
        // A queue place given and dropped unused has written nothing:
        // release() sees that and passes the worker on.
    }
}

/// The receiving end of a queued request's handover. Dropped after the
/// handover (the request was cancelled), it reads and discards the
/// response of the request it had written.
struct HandoverGuard<'a> {
    pool: &'a Arc<Shared>,
    rx: Option<oneshot::Receiver<Handover>>,
    id: u32,
}

impl HandoverGuard<'_> {
    async fn recv(&mut self) -> Result<Handover, oneshot::error::RecvError> {
        let rx = self.rx.as_mut().expect("received once");
        let result = rx.await;
        self.rx = None;
        result
    }
}

impl Drop for HandoverGuard<'_> {
    fn drop(&mut self) {
        if let Some(mut rx) = self.rx.take() {
            rx.close();
            if let Ok(Handover::Worker(worker)) = rx.try_recv() {
                tokio::spawn(finish_abandoned(self.pool.clone(), worker, self.id));
            }
        }
    }
}

/// An idle worker at once, or a place in line.
async fn assign(
    pool: &Arc<Shared>,
    queueable: bool,
    first_in_line: bool,
) -> Result<Assignment, Error> {
    let (id, rx) = {
        let mut d = pool.dispatch();
        if d.closed {
            return Err(Error::unavailable("the server is shutting down"));
        }
        while let Some(worker) = d.idle.pop() {
            if worker.shared.is_dead() {
                continue;
            }
            // A worker idle for a while may have died meanwhile (the OOM
            // killer, an operator) without being reaped yet: one poll()
            // tells, and a busy server, whose workers are back at work
            // within microseconds, never pays for it.
            if worker.idle_since.elapsed() > IDLE_CHECK_AFTER && !worker.is_quiet() {
                tracing::warn!(
                    pid = worker.pid(),
                    "idle worker hung up or sent unexpected bytes; replacing it"
                );
                worker.shared.retire(Retire::Now);
                continue;
            }
            return Ok(Assignment::Worker(worker));
        }
        if let Some(why) = pool.hopeless() {
            return Err(Error::unavailable(why));
        }
        // A request put back in line (its worker failed first) always gets
        // its place back; a new one may find the line full.
        if !first_in_line && pool.config.max_queue > 0 && d.waiters.len() >= pool.config.max_queue {
            return Err(Error::unavailable(format!(
                "the queue is full: {} requests already wait for a worker (max_queue)",
                d.waiters.len()
            )));
        }
        let (tx, rx) = oneshot::channel();
        let id = d.next_waiter;
        d.next_waiter += 1;
        let waiter = Waiter { id, queueable, tx };
        if first_in_line {
            d.waiters.push_front(waiter);
        } else {
            d.waiters.push_back(waiter);
        }
        pool.set_waiting(&d);
        // Every worker is busy: an extra one starts now, if the pool may grow.
        if pool.dormant.load(Ordering::Acquire) > 0 {
            pool.grow.notify_one();
        }
        (id, rx)
    };
    let mut guard = AssignGuard { pool, rx };
    match tokio::time::timeout(pool.config.queue_timeout, &mut guard.rx).await {
        Ok(Ok(assignment)) => Ok(assignment),
        Ok(Err(_)) => Err(Error::unavailable("the server is shutting down")),
        Err(_) => {
            let withdrawn = {
                let mut d = pool.dispatch();
                let at = d.waiters.iter().position(|w| w.id == id);
                if let Some(at) = at {
                    d.waiters.remove(at);
                    pool.set_waiting(&d);
                }
                at.is_some()
            };
            if withdrawn {
                return Err(Error::unavailable(format!(
                    "every worker stayed busy for {:?}",
                    pool.config.queue_timeout
                )));
            }
            // Given something at the last moment: take it.
            (&mut guard.rx)
                .await
                .map_err(|_| Error::unavailable("the server is shutting down"))
        }
    }
}

/// Called by a request that has just written itself to `link`'s worker:
/// offers the place behind it to the first queueable request in line.
fn offer_queue(pool: &Arc<Shared>, link: &Arc<WorkerShared>) {
    if !pool.config.pipelining || pool.waiting.0.load(Ordering::Acquire) == 0 {
        return;
    }
    let mut d = pool.dispatch();
    let mut l = link.link();
    if !l.busy
        || l.queued.is_some()
        || link.retire_mode() != Retire::No
        || link.is_dead()
        || link.recycle_due()
    {
        return;
    }
    while let Some(at) = d.waiters.iter().position(|w| w.queueable) {
        let waiter = d.waiters.remove(at).expect("position is in range");
        let (handover_tx, handover) = oneshot::channel();
        let id = link.next_request_id();
        let state = Arc::new(AtomicU8::new(WRITE_PENDING));
        let assignment = Assignment::Queued {
            link: link.clone(),
            id,
            handover,
            state: state.clone(),
        };
        if waiter.tx.send(assignment).is_ok() {
            tracing::debug!(
                pid = link.pid,
                request = id,
                "request queued behind the one the worker is running"
            );
            l.queued = Some(Queued {
                id,
                handover: handover_tx,
                state,
            });
            break;
        }
        // That request went away while waiting; try the next.
    }
    pool.set_waiting(&d);
}

/// A worker whose request has ended: to the request queued behind it, to
/// the first request in line, to the idle stack, or stopped.
fn release(pool: &Arc<Shared>, mut worker: Worker) {
    // A worker past a lifecycle limit is replaced, but only when no
    // request has been queued behind it: that one may already be in the
    // worker's channel and must run there (it runs, then the worker goes).
    let mut worn = worker.shared.recycle_due();
    if !worn && worker.shared.replacement_state() == crate::worker::NO_REPLACEMENT {
        match worn_out(pool, &mut worker) {
            // Over its memory limit it takes no more requests: each could
            // grow it further. The slot is short while the next one boots.
            Some((reason @ RestartReason::MaxMemory, why)) => {
                tracing::info!(pid = worker.pid(), "replacing the worker: {why}");
                worker.shared.set_reason(reason);
                worker.shared.mark_recycle();
                worn = true;
            }
            // Otherwise it serves on while its replacement boots, and the
            // supervisor retires it once the replacement is ready.
            Some((reason, why)) if worker.shared.want_replacement() => {
                tracing::info!(pid = worker.pid(), "replacing the worker: {why}");
                worker.shared.set_reason(reason);
            }
            _ => {}
        }
    }
    let queued = {
        let mut l = worker.shared.link();
        let queued = l.queued.take();
        l.busy = queued.is_some();
        l.current.clear();
        queued
    };
    if let Some(q) = queued {
        match q.handover.send(Handover::Worker(worker)) {
            Ok(()) => return,
            Err(Handover::Worker(w)) => {
                if q.state.load(Ordering::Acquire) == WRITE_STARTED {
                    // Its request is (being) written; the worker will
                    // answer it, with nobody to receive the answer.
                    tracing::debug!(
                        pid = w.pid(),
                        request = q.id,
                        "draining the response to a queued request whose client left"
                    );
                    let pool = pool.clone();
                    tokio::spawn(finish_abandoned(pool, w, q.id));
                    return;
                }
                worker = w;
                worker.shared.link().busy = false;
            }
            Err(Handover::Lost) => unreachable!("a worker was sent"),
        }
    }
    if pool.stopping.load(Ordering::Acquire) || worn {
        stop_worker(&worker);
        return;
    }
    if worker.shared.is_dead() {
        return;
    }
    worker.trim();
    worker.idle_since = Instant::now();
    let mut d = pool.dispatch();
    while let Some(waiter) = d.waiters.pop_front() {
        match waiter.tx.send(Assignment::Worker(worker)) {
            Ok(()) => {
                pool.set_waiting(&d);
                return;
            }
            Err(Assignment::Worker(w)) => worker = w,
            Err(Assignment::Queued { .. }) => unreachable!("a worker was sent"),
        }
    }
    pool.set_waiting(&d);
    // Marked for replacement (a reload) since the check above.
    if worker.shared.recycle_due() {
        drop(d);
        stop_worker(&worker);
        return;
    }
    d.idle.push(worker);
}

/// Replaces a worker after its current request, or now if it is idle.
pub(crate) fn retire_worker(pool: &Arc<Shared>, link: &Arc<WorkerShared>) {
    link.mark_recycle();
    let idle = {
        let mut d = pool.dispatch();
        let at = d.idle.iter().position(|w| Arc::ptr_eq(&w.shared, link));
        at.map(|at| d.idle.remove(at))
    };
    if let Some(worker) = idle {
        stop_worker(&worker);
    }
}

/// Why a worker that has just finished a request should be replaced, if
/// it should: `max_requests`, `ttl`, `max_memory`.
fn worn_out(pool: &Shared, worker: &mut Worker) -> Option<(RestartReason, String)> {
    let config = &pool.config;
    if worker.served >= worker.request_limit {
        return Some((
            RestartReason::MaxRequests,
            format!("it served {} requests (max_requests)", worker.served),
        ));
    }
    if let Some(ttl) = config.ttl {
        if worker.started.elapsed() >= ttl {
            return Some((
                RestartReason::Ttl,
                format!("it is older than {ttl:?} (ttl)"),
            ));
        }
    }
    if config.max_memory > 0 {
        let (at, served) = worker.memory_checked;
        if worker.served - served >= MEMORY_CHECK_REQUESTS || at.elapsed() >= MEMORY_CHECK_INTERVAL
        {
            worker.memory_checked = (Instant::now(), worker.served);
            if let Some(rss) = resident_memory(worker.pid()) {
                if rss >= config.max_memory {
                    return Some((
                        RestartReason::MaxMemory,
                        format!(
                            "it uses {} MiB, over {} MiB (max_memory)",
                            rss >> 20,
                            config.max_memory >> 20
                        ),
                    ));
                }
            }
        }
    }
    None
}

/// A process's resident memory in bytes, from `/proc/PID/statm`.
pub(crate) fn resident_memory(pid: u32) -> Option<u64> {
    let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * rustix::param::page_size() as u64)
}

/// Replaces idle workers past `idle_ttl` or `ttl`, for a pool that has
/// either: they would otherwise wait for a request to be checked.
pub(crate) async fn sweep_idle(pool: Arc<Shared>) {
    let config = &pool.config;
    let extra_slots = config.min_workers < pool.slots.len();
    let shortest = [
        config.idle_ttl,
        config.ttl,
        extra_slots.then_some(config.scale_down_after),
    ]
    .into_iter()
    .flatten()
    .min()
    .unwrap_or(Duration::from_secs(1));
    let period = (shortest / 4).clamp(Duration::from_millis(50), Duration::from_secs(1));
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if pool.stopping.load(Ordering::Acquire) {
            return;
        }
        let mut expired = Vec::new();
        let mut unneeded = Vec::new();
        {
            let mut d = pool.dispatch();
            for w in std::mem::take(&mut d.idle) {
                if w.shared.extra.load(Ordering::Acquire)
                    && w.idle_since.elapsed() >= config.scale_down_after
                {
                    unneeded.push(w);
                } else if config.idle_ttl.is_some_and(|t| w.idle_since.elapsed() >= t) {
                    w.shared.set_reason(RestartReason::IdleTtl);
                    expired.push(w);
                } else if config.ttl.is_some_and(|t| w.started.elapsed() >= t) {
                    w.shared.set_reason(RestartReason::Ttl);
                    expired.push(w);
                } else {
                    d.idle.push(w);
                }
            }
        }
        for worker in expired {
            tracing::info!(
                pid = worker.pid(),
                "replacing the worker: idle past idle_ttl, or past ttl"
            );
            worker.shared.mark_recycle();
            stop_worker(&worker);
        }
        for worker in unneeded {
            tracing::info!(
                pid = worker.pid(),
                "stopping an extra worker idle for {:?} (scale_down_after)",
                config.scale_down_after
            );
            worker.shared.shrunk.store(true, Ordering::Release);
            worker.shared.mark_recycle();
            stop_worker(&worker);
        }
    }
}

/// Reads and discards the response to request `id`, then releases the worker.
async fn finish_abandoned(pool: Arc<Shared>, mut worker: Worker, id: u32) {
    match drain(&mut worker, id).await {
        Ok(()) => release(&pool, worker),
        Err(e) => {
            // A worker exiting by itself (CLOSE) keeps its stop timeout;
            // anything else is broken and goes at once.
            if worker.shared.retire_mode() != Retire::Graceful {
                if !e.is_worker_lost() {
                    tracing::warn!(
                        pid = worker.pid(),
                        "abandoned response could not be drained: {e}"
                    );
                }
                worker.shared.retire(Retire::Now);
            }
            worker.shared.fail_queued();
        }
    }
}

/// Reads and discards the rest of a response nobody waits for.
async fn drain(worker: &mut Worker, id: u32) -> Result<(), Error> {
    loop {
        let frame = worker.read_frame().await?;
        if frame.request_id != id {
            return Err(
                hearth_proto::Error::unexpected("frame outside the current request").into(),
            );
        }
        if frame.kind == Kind::Error {
            log_report(worker.pid(), &frame);
        }
        if frame.kind == Kind::End && frame.has_flag(flags::DETACHED) {
            continue;
        }
        if matches!(frame.kind, Kind::End | Kind::Result) {
            worker.count_served();
            if frame.has_flag(flags::CLOSE) {
                worker.shared.retire(Retire::Graceful);
                return Err(Error::worker_lost("exiting"));
            }
            return Ok(());
        }
    }
}

/// Sends the stop message to a worker with nothing to do.
pub(crate) fn stop_worker(worker: &Worker) {
    let mut frame = BytesMut::with_capacity(hearth_proto::HEADER_LEN);
    encode_frame(&mut frame, Kind::Stop, 0, 0, &[]);
    if worker.try_send(&frame) {
        worker.shared.retire(Retire::Graceful);
    } else {
        worker.shared.retire(Retire::Now);
    }
}

/// Hands a freshly booted worker to the pool.
pub(crate) fn add(pool: &Arc<Shared>, worker: Worker) {
    release(pool, worker);
}

/// Refuses every waiting request; used when the pool stops.
pub(crate) fn close(pool: &Arc<Shared>) -> Vec<Worker> {
    let mut d = pool.dispatch();
    d.closed = true;
    d.waiters.clear();
    pool.set_waiting(&d);
    std::mem::take(&mut d.idle)
}

/// One worker, lent to one request until its response has ended.
///
/// Dropping a lease mid-response (the client went away) lets a background
/// task read the rest of the response before the worker goes back to the
/// pool, so the next request never sees this one's frames.
#[derive(Debug)]
pub struct Lease {
    worker: Option<Worker>,
    pool: Arc<Shared>,
    request_id: u32,
    /// The request has been written whole.
    sent: bool,
    in_flight: bool,
    /// The response ended but the request goes on (`flags::DETACHED`).
    detached: bool,
    broken: bool,
    /// When the request's time is up (see [`Lease::set_deadline`]).
    deadline: Option<tokio::time::Instant>,
    /// The worker ran past the deadline: SIGTERM, then SIGKILL.
    overran: bool,
}

impl Lease {
    fn new(pool: Arc<Shared>, worker: Worker, request_id: u32) -> Lease {
        Lease {
            worker: Some(worker),
            pool,
            request_id,
            sent: false,
            in_flight: true,
            detached: false,
            broken: false,
            deadline: None,
            overran: false,
        }
    }

    /// Gives the request a hard time limit: a frame that has not arrived
    /// by `at` fails with a timed-out error, and the worker is stopped
    /// (SIGTERM, then SIGKILL after the kill timeout) and replaced.
    pub fn set_deadline(&mut self, at: tokio::time::Instant) {
        self.deadline = Some(at);
    }

    /// Reads the next frame, within the deadline if there is one.
    async fn read(&mut self) -> Result<Frame, Error> {
        let worker = self.worker.as_mut().expect("lease holds a worker");
        let Some(at) = self.deadline else {
            return worker.read_frame().await;
        };
        match tokio::time::timeout_at(at, worker.read_frame()).await {
            Ok(result) => result,
            Err(_) => {
                self.overran = true;
                self.broken = true;
                Err(Error::timed_out(format!(
                    "worker {} did not finish the request in time; stopping it",
                    self.pid()
                )))
            }
        }
    }

    fn link(&self) -> Arc<WorkerShared> {
        self.worker
            .as_ref()
            .expect("lease holds a worker")
            .shared
            .clone()
    }

    /// Labels the worker with the request it runs (`method target`, cut to
    /// a fixed length; no allocation), for status reports, until the
    /// request ends.
    pub fn set_current(&self, method: &str, target: &str) {
        if let Some(worker) = &self.worker {
            worker
                .shared
                .link()
                .current
                .set(method, target, Instant::now());
        }
    }

    /// The pid of the worker handling the request.
    pub fn pid(&self) -> u32 {
        self.worker.as_ref().map_or(0, Worker::pid)
    }

    /// Requests this worker has completed before the current one.
    pub fn served(&self) -> u64 {
        self.worker.as_ref().map_or(0, |w| w.served)
    }

    /// The next frame of the response: `Head`, `Body` or `End`. Error
    /// reports are logged on the way and not returned.
    pub async fn next(&mut self) -> Result<Frame, Error> {
        loop {
            if self.overran {
                return Err(Error::timed_out("the request already ran out of time"));
            }
            let result = self.read().await;
            if self.overran {
                return result;
            }
            if let Some(frame) = self.accept(result)? {
                return Ok(frame);
            }
        }
    }

    /// The next frame if the worker has already sent it; no waiting.
    pub fn next_buffered(&mut self) -> Result<Option<Frame>, Error> {
        loop {
            let worker = self.worker.as_mut().expect("lease holds a worker");
            let result = match worker.buffered_frame() {
                Ok(Some(frame)) => Ok(frame),
                Ok(None) => return Ok(None),
                Err(e) => Err(e),
            };
            if let Some(frame) = self.accept(result)? {
                return Ok(Some(frame));
            }
        }
    }

    fn accept(&mut self, result: Result<Frame, Error>) -> Result<Option<Frame>, Error> {
        let frame = match result {
            Ok(frame) => frame,
            Err(e) => {
                self.broken = true;
                return Err(e);
            }
        };
        if !self.in_flight || self.detached || frame.request_id != self.request_id {
            self.broken = true;
            return Err(Error::from(hearth_proto::Error::unexpected(
                "frame outside the current request",
            )));
        }
        match frame.kind {
            Kind::Head | Kind::Body => Ok(Some(frame)),
            Kind::End if frame.has_flag(flags::DETACHED) => {
                // The response is complete but the request goes on; the
                // worker stays with this lease (and, once the lease is
                // dropped, with the task that waits for the final End).
                self.detached = true;
                Ok(Some(frame))
            }
            Kind::End | Kind::Result => {
                self.in_flight = false;
                let worker = self.worker.as_mut().expect("lease holds a worker");
                worker.count_served();
                if frame.has_flag(flags::CLOSE) {
                    worker.shared.retire(Retire::Graceful);
                }
                Ok(Some(frame))
            }
            Kind::Error => {
                log_report(self.pid(), &frame);
                Ok(None)
            }
            _ => {
                self.broken = true;
                Err(Error::from(hearth_proto::Error::unexpected(
                    "frame kind a worker may not send",
                )))
            }
        }
    }

    /// Marks the worker as unusable: it is killed when the lease is dropped.
    pub fn poison(&mut self) {
        self.broken = true;
    }

    /// Asks the worker's process to stop with `signal` (a request that ran
    /// past its time limit). Its supervisor replaces it once it exits.
    pub fn signal(&self, signal: rustix::process::Signal) {
        if let Some(pid) = i32::try_from(self.pid())
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        {
            if !self.link().is_dead() {
                let _ = rustix::process::kill_process(pid, signal);
            }
        }
    }

    /// Stops the worker because its request ran past a time limit that the
    /// caller keeps itself (rather than with [`Lease::set_deadline`]): its
    /// supervisor sends SIGTERM now and SIGKILL after the kill timeout,
    /// logs the stop as a timeout, not as a crash, and replaces it. What
    /// the worker sends before it exits can still be read.
    pub fn terminate(&self) {
        if let Some(worker) = &self.worker {
            worker.shared.retire(Retire::Terminate);
        }
    }

    /// How the worker's process ended, after [`Lease::next`] failed because
    /// the worker went away: waits up to `within` for it to be reaped.
    pub async fn exit_status(
        &self,
        within: std::time::Duration,
    ) -> Option<std::process::ExitStatus> {
        self.link().exit_status(within).await
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let Some(worker) = self.worker.take() else {
            return;
        };
        if self.overran {
            worker.shared.retire(Retire::Terminate);
            worker.shared.fail_queued();
            return;
        }
        if self.broken || !self.sent {
            worker.shared.retire(Retire::Now);
            worker.shared.fail_queued();
            return;
        }
        if matches!(
            worker.shared.retire_mode(),
            Retire::Graceful | Retire::Terminate | Retire::Now
        ) {
            // Exiting by itself (CLOSE); its supervisor replaces it, and
            // the request queued behind goes elsewhere.
            worker.shared.fail_queued();
            return;
        }
        if self.in_flight {
            tokio::spawn(finish_abandoned(self.pool.clone(), worker, self.request_id));
            return;
        }
        release(&self.pool, worker);
    }
}

pub(crate) fn log_report(pid: u32, frame: &Frame) {
    match ErrorReport::decode(&frame.payload) {
        Ok(report) => {
            let trace = report.field("trace");
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
        }
        Err(e) => tracing::error!(target: "hearth::worker", pid, "unreadable error report: {e}"),
    }
}

/// Locks a std mutex, ignoring poisoning (the data stays consistent: every
/// critical section here is a few assignments).
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
