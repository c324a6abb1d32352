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

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::sync::oneshot;

use crate::lease::Lease;
use crate::line::Assignment;
use crate::recycle::{finish_abandoned, release};
use crate::shared::Shared;
use crate::worker::{Handover, Queued, Retire, WorkerShared, WRITE_PENDING, WRITE_STARTED};
use crate::{Error, Paths};

/// Requests larger than this are never queued behind another: their bytes
/// could fill the channel of a worker that is not reading yet.
pub(crate) const QUEUE_MAX_BYTES: usize = 64 * 1024;

/// Idle workers older than this are checked before being handed a request.
const IDLE_CHECK_AFTER: Duration = Duration::from_millis(1);

/// Sends a request to a worker: `encode` writes its frames for the request
/// id and the worker's paths it is given (it may be called more than once
/// if a worker turns out to be gone before the request reached it). `len`
/// is about how many bytes `encode` writes.
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
                match lease.send().await {
                    Ok(()) => {
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
                        let lease = Lease::queued(pool.clone(), worker, id);
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
        let mut line = pool.line.lock();
        if line.is_closed() {
            return Err(Error::unavailable("the server is shutting down"));
        }
        // In a crash loop, a request sent to a worker would most likely
        // kill it: answered at once, but for one now and then that tries.
        if !first_in_line {
            pool.health.admit().map_err(Error::unavailable)?;
        }
        while let Some(worker) = line.pop_idle() {
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
        let waiting = line.waiters_len();
        if !first_in_line && pool.config.max_queue > 0 && waiting >= pool.config.max_queue {
            return Err(Error::unavailable(format!(
                "the queue is full: {waiting} requests already wait for a worker (max_queue)"
            )));
        }
        let (id, rx) = line.enqueue(queueable, first_in_line);
        // Every worker is busy: an extra one starts now, if the pool may grow.
        if pool.dormant.load(Ordering::Acquire) > 0 {
            pool.grow.notify_one();
        }
        (id, rx)
    };
    let mut guard = AssignGuard { pool, rx };
    match tokio::time::timeout(pool.config.queue_timeout, &mut guard.rx).await {
        Ok(Ok(assignment)) => Ok(assignment),
        // Refused in line: every worker fails to boot, or the pool stops.
        Ok(Err(_)) => {
            Err(Error::unavailable(pool.hopeless().unwrap_or_else(|| {
                "the server is shutting down".to_owned()
            })))
        }
        Err(_) => {
            let withdrawn = pool.line.lock().withdraw(id);
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
    if !pool.config.pipelining || pool.line.waiting() == 0 {
        return;
    }
    let mut line = pool.line.lock();
    let mut l = link.link();
    if !l.busy
        || l.queued.is_some()
        || link.retire_mode() != Retire::No
        || link.is_dead()
        || link.recycle_due()
    {
        return;
    }
    while let Some(waiter) = line.pop_queueable() {
        let (handover_tx, handover) = oneshot::channel();
        let id = link.next_request_id();
        let state = Arc::new(AtomicU8::new(WRITE_PENDING));
        let assignment = Assignment::Queued {
            link: link.clone(),
            id,
            handover,
            state: state.clone(),
        };
        if waiter.send(assignment).is_ok() {
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
}
