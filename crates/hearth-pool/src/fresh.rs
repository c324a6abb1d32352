//! Debug mode: a worker booted for each request and stopped after it.
//!
//! Xdebug decides whether to debug (or profile) a process when the
//! process starts running PHP code: from `xdebug.start_with_request` and
//! from a trigger (`XDEBUG_SESSION`, `XDEBUG_TRIGGER`, ...) among the
//! request's variables or in the environment. A warm worker started long
//! before the request never sees the request's trigger. In debug mode
//! each request gets a worker of its own, started with the request's
//! triggers in its environment, so that Xdebug starts a session (or a
//! profile) for it from the first line of the worker script, the app's
//! boot included, as under php-fpm; the worker stops after that request.
//!
//! At start, and at each reload, a trial worker boots once with Xdebug
//! off (`XDEBUG_MODE=off`: no debugger session, no profile), to check
//! the script and to learn PHP's settings; then no worker runs until a
//! request comes. At most one worker per slot runs at once.

use std::ffi::OsString;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::sync::{oneshot, OwnedSemaphorePermit};

use crate::boot::{boot_with, describe};
use crate::lease::Lease;
use crate::shared::{lock, Shared};
use crate::supervisor::watch;
use crate::worker::{Retire, Worker};
use crate::{Error, Paths};

/// What a debug-mode request asks of the worker booted for it.
#[derive(Debug, Clone, Default)]
pub struct Fresh {
    /// Added to the worker's environment: the request's Xdebug triggers
    /// (`XDEBUG_SESSION=PHPSTORM`), which Xdebug reads when the worker
    /// starts.
    pub env: Vec<(OsString, OsString)>,
    /// A debugger may hold the worker (the request carries a debugging
    /// trigger): its boot has no time limit, as a developer may stop on a
    /// breakpoint in the app's boot code.
    pub held: bool,
}

/// The environment of the trial worker: Xdebug, if loaded, stays off.
fn no_xdebug() -> Vec<(OsString, OsString)> {
    vec![("XDEBUG_MODE".into(), "off".into())]
}

/// Boots a trial worker, retrying with a backoff until one boots or the
/// pool stops: its handshake gives the settings requests are shaped by.
/// While it fails, every slot counts as failing (the script cannot boot).
pub(crate) async fn trial(shared: Arc<Shared>) {
    let mut failures: u32 = 0;
    while !shared.stopping.load(Ordering::Acquire) {
        shared.started.fetch_add(1, Ordering::Relaxed);
        let booted = boot_with(
            &shared,
            None,
            shared.paths(),
            &no_xdebug(),
            Some(shared.config.boot_timeout),
        )
        .await;
        match booted {
            Ok((worker, mut child)) => {
                let pid = worker.pid();
                tracing::info!(
                    pid,
                    "debug mode: the worker script boots; each request runs in a worker \
                     started for it (up to {} at once), with its Xdebug triggers",
                    shared.slots.len()
                );
                *lock(&shared.ready) = Some(worker.ready.clone());
                for f in &shared.boot_failures {
                    f.store(0, Ordering::Release);
                }
                shared.failing.store(0, Ordering::Release);
                shared.booted.store(true, Ordering::Release);
                shared.ready_notify.notify_waiters();
                worker.stop();
                if tokio::time::timeout(shared.config.stop_timeout, child.wait())
                    .await
                    .is_err()
                {
                    let _ = child.start_kill();
                    let _ = child.wait().await;
                }
                return;
            }
            Err(e) => {
                failures += 1;
                shared.failing.store(shared.slots.len(), Ordering::Release);
                for f in &shared.boot_failures {
                    f.store(failures, Ordering::Release);
                }
                *lock(&shared.last_boot_error) = Some(e.to_string());
                shared.ready_notify.notify_waiters();
                if shared.stopping.load(Ordering::Acquire) {
                    return;
                }
                let delay =
                    Duration::from_millis(100u64 << failures.min(6)).min(shared.config.max_backoff);
                tracing::error!(
                    "worker failed to boot (attempt {failures}, next in {:.1}s): {e}",
                    delay.as_secs_f64()
                );
                let stop = shared.stop.notified();
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    () = stop => {}
                }
            }
        }
    }
}

/// A request counted among those waiting for a slot, until dropped.
struct Waiting<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A slot held by one request's worker, from before its boot until it has
/// exited; given back when dropped.
struct Claim {
    pool: Arc<Shared>,
    slot: usize,
    _permit: OwnedSemaphorePermit,
}

impl Drop for Claim {
    fn drop(&mut self) {
        lock(&self.pool.fresh_claims)[self.slot] = false;
        self.pool.ready_notify.notify_waiters();
    }
}

/// Boots a worker for one request (waiting, within the queue timeout, for
/// a free slot), writes the request to it and lends it to the request.
/// After the request the worker is stopped.
pub(crate) async fn dispatch(
    pool: &Arc<Shared>,
    fresh: &Fresh,
    encode: impl Fn(&mut BytesMut, u32, &Arc<Paths>),
) -> Result<Lease, Error> {
    if pool.stopping.load(Ordering::Acquire) {
        return Err(Error::unavailable("the server is shutting down"));
    }
    if let Some(why) = pool.hopeless() {
        return Err(Error::unavailable(why));
    }
    let permit = match pool.fresh.clone().try_acquire_owned() {
        Ok(permit) => Ok(Ok(permit)),
        Err(_) => {
            let waiting = pool.fresh_waiting.fetch_add(1, Ordering::AcqRel);
            let _waiting = Waiting(&pool.fresh_waiting);
            if pool.config.max_queue > 0 && waiting >= pool.config.max_queue {
                return Err(Error::unavailable(format!(
                    "the queue is full: {waiting} requests already wait for a worker (max_queue)"
                )));
            }
            let wait = pool.fresh.clone().acquire_owned();
            tokio::time::timeout(pool.config.queue_timeout, wait).await
        }
    };
    let permit = match permit {
        Ok(Ok(permit)) => permit,
        Ok(Err(_)) => return Err(Error::unavailable("the server is shutting down")),
        Err(_) => {
            return Err(Error::unavailable(format!(
                "every worker stayed busy for {:?}",
                pool.config.queue_timeout
            )))
        }
    };
    let slot = {
        let mut claims = lock(&pool.fresh_claims);
        let free = claims.iter().position(|held| !held);
        // One permit per slot: a permit always finds a free slot.
        let Some(slot) = free else {
            return Err(Error::unavailable("no free worker slot"));
        };
        claims[slot] = true;
        slot
    };
    let claim = Claim {
        pool: pool.clone(),
        slot,
        _permit: permit,
    };
    let (tx, rx) = oneshot::channel();
    let timeout = (!fresh.held).then_some(pool.config.boot_timeout);
    // In a task of its own: the worker is watched (and its slot held)
    // until it has exited, whatever becomes of the request.
    tokio::spawn(run(pool.clone(), claim, fresh.env.clone(), timeout, tx));
    let mut worker = match rx.await {
        Ok(booted) => booted?,
        Err(_) => return Err(Error::unavailable("the server is shutting down")),
    };
    worker.shared.link().busy = true;
    let id = worker.shared.next_request_id();
    encode(&mut worker.wbuf, id, &worker.shared.paths);
    let mut lease = Lease::new(pool.clone(), worker, id);
    lease.send().await.map_err(|(e, _)| e)?;
    Ok(lease)
}

/// Boots the request's worker in its claimed slot, hands it over, and
/// watches it until it exits.
async fn run(
    shared: Arc<Shared>,
    claim: Claim,
    env: Vec<(OsString, OsString)>,
    timeout: Option<Duration>,
    tx: oneshot::Sender<Result<Worker, Error>>,
) {
    let slot = claim.slot;
    shared.started.fetch_add(1, Ordering::Relaxed);
    let (worker, child) = match boot_with(&shared, Some(slot), shared.paths(), &env, timeout).await
    {
        Ok(booted) => booted,
        Err(e) => {
            if !shared.stopping.load(Ordering::Acquire) {
                tracing::error!("debug mode: the request's worker failed to boot: {e}");
                *lock(&shared.last_boot_error) = Some(e.to_string());
            }
            let _ = tx.send(Err(e));
            return;
        }
    };
    let ws = worker.shared.clone();
    // One request, then it stops: release() stops a worker due for
    // replacement instead of keeping it.
    ws.mark_recycle();
    *lock(&shared.ready) = Some(worker.ready.clone());
    *lock(&shared.slots[slot]) = Some(ws.clone());
    shared.booted.store(true, Ordering::Release);
    shared.ready_notify.notify_waiters();
    if shared.stopping.load(Ordering::Acquire) {
        ws.retire(Retire::Stopping);
    }
    if let Err(Ok(worker)) = tx.send(Ok(worker)) {
        // The request went away while the worker booted.
        worker.stop();
    }
    let status = watch(child, ws.clone(), shared.clone()).await;
    ws.set_exit(status.as_ref().ok().copied());
    ws.fail_queued();
    *lock(&shared.slots[slot]) = None;
    let pid = ws.pid;
    match ws.retire_mode() {
        Retire::Graceful | Retire::Stopping => {
            tracing::debug!(
                pid,
                "debug mode: the request's worker exited ({})",
                describe(&status)
            );
        }
        Retire::Terminate => tracing::warn!(
            pid,
            "debug mode: worker stopped after its request ran past its time limit ({})",
            describe(&status)
        ),
        Retire::Now => tracing::warn!(pid, "debug mode: worker killed ({})", describe(&status)),
        Retire::No => tracing::warn!(pid, "debug mode: worker died ({})", describe(&status)),
    }
    drop(claim);
}
