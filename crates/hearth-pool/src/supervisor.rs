//! Keeping each worker slot filled: boot, install, watch, replace, back off.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::process::Child;
use tracing::Instrument as _;

use crate::boot::{boot, describe};
use crate::health::backoff;
use crate::observe::{RestartReason, StartReason};
use crate::recycle;
use crate::shared::{lock, Shared};
use crate::worker::{Retire, WorkerShared, REPLACEMENT_FAILED};

/// Keeps one slot's worker running: boots it, installs it in the pool,
/// waits for it to exit (replacing it on the way when asked to, see
/// [`run`]), and boots the next, backing off while boots fail.
///
/// A slot beyond `min_workers` starts dormant, boots a worker when a
/// request has to wait for one, and goes dormant again when that worker is
/// stopped for being idle.
pub(crate) async fn supervise(shared: Arc<Shared>, slot: usize) {
    let mut failures: u32 = 0;
    let mut marked_failing = false;
    let extra = slot >= shared.config.min_workers.max(1);
    let mut dormant = extra;
    let mut why = StartReason::Min;
    while !shared.stopping.load(Ordering::Acquire) {
        if dormant {
            if !wait_for_demand(&shared).await {
                break;
            }
            dormant = false;
            why = StartReason::Demand;
        }
        // Boots are staggered: a burst that wakes every dormant slot boots
        // `max_booting` workers at a time, and each slot checks, once its
        // turn comes, that a request still waits for it.
        let Some(permit) = boot_permit(&shared).await else {
            break;
        };
        let mut growing = None;
        if why == StartReason::Demand {
            if shared.line.waiting() <= shared.growing.load(Ordering::Acquire) {
                tracing::debug!(
                    slot,
                    "no request waits for an extra worker any more: not starting one"
                );
                dormant = true;
                continue;
            }
            if let Some(refusal) = memory_refusal(&shared) {
                drop(permit);
                if let Some(over) = refusal {
                    shared.decisions.refused_memory();
                    tracing::debug!(
                        decision = "refused",
                        reason = "memory",
                        slot,
                        "not starting an extra worker: {over}"
                    );
                    shared.ready_notify.notify_waiters();
                }
                // Asked again after a pause, not at every waiting request.
                shared.dormant.fetch_add(1, Ordering::AcqRel);
                pause(&shared, MEMORY_RECHECK).await;
                shared.dormant.fetch_sub(1, Ordering::AcqRel);
                dormant = true;
                continue;
            }
            growing = Some(Growing::new(&shared));
        }
        shared.started.fetch_add(1, Ordering::Relaxed);
        shared.decisions.started(why);
        tracing::debug!(
            decision = "started",
            reason = why.as_str(),
            slot,
            "starting a worker"
        );
        let booted_worker = boot(&shared, Some(slot), shared.paths()).await;
        drop(permit);
        match booted_worker {
            Ok((worker, child)) => {
                if marked_failing {
                    shared.failing.fetch_sub(1, Ordering::AcqRel);
                    marked_failing = false;
                    tracing::info!(
                        pid = worker.pid(),
                        "worker booted again after {failures} failed attempt(s)"
                    );
                }
                if shared.failing.load(Ordering::Acquire) == 0 {
                    *lock(&shared.boot_failing) = (None, None);
                }
                let ws = recycle::install(&shared, slot, worker, extra);
                drop(growing);
                // More requests wait than extra workers boot for them:
                // the next dormant slot's turn.
                if shared.line.waiting() > shared.growing.load(Ordering::Acquire)
                    && shared.dormant.load(Ordering::Acquire) > 0
                {
                    shared.grow.notify_one();
                }
                let (ws, status, booted) = run(&shared, slot, extra, ws, child).await;
                let pid = ws.pid;
                ws.set_exit(status.as_ref().ok().copied());
                ws.fail_queued();
                *lock(&shared.slots[slot]) = None;
                shared.ready_notify.notify_waiters();
                let stopping = shared.stopping.load(Ordering::Acquire);
                match (&status, ws.retire_mode()) {
                    _ if stopping => tracing::debug!(pid, "worker stopped ({})", describe(&status)),
                    (_, Retire::Graceful | Retire::Stopping) => tracing::info!(
                        pid,
                        "worker exited ({}); starting a new one",
                        describe(&status)
                    ),
                    (_, Retire::Terminate) => tracing::warn!(
                        pid,
                        "worker stopped after a request ran past its time limit ({}); starting a new one",
                        describe(&status)
                    ),
                    (_, Retire::Now) => tracing::warn!(
                        pid,
                        "worker killed ({}); starting a new one",
                        describe(&status)
                    ),
                    (_, Retire::No) => tracing::warn!(
                        pid,
                        "worker died ({}); starting a new one",
                        describe(&status)
                    ),
                }
                if stopping {
                    break;
                }
                if ws.shrunk.load(Ordering::Acquire) {
                    shared.decisions.scaled_down();
                    tracing::debug!(
                        decision = "retired",
                        reason = "scale_down",
                        pid,
                        slot,
                        "extra worker stopped"
                    );
                    dormant = true;
                    failures = 0;
                    continue;
                }
                why = StartReason::Replace;
                shared.restarts.fetch_add(1, Ordering::Relaxed);
                let reason = ws.reason().unwrap_or(match ws.retire_mode() {
                    Retire::Graceful | Retire::Stopping => RestartReason::Exited,
                    Retire::Terminate => RestartReason::RequestTimeout,
                    Retire::Now | Retire::No => RestartReason::Crashed,
                });
                tracing::debug!(
                    decision = "retired",
                    reason = reason.as_str(),
                    pid,
                    slot,
                    "worker replaced"
                );
                shared.restart_reasons.add(reason, ws.past(slot, reason));
                let mut crash_pause = None;
                if died_on_request(&ws, &status) {
                    let said = ws
                        .last_report()
                        .map(|r| format!("; it reported: {r}"))
                        .unwrap_or_default();
                    crash_pause = shared.health.crashed(
                        format!(
                            "worker {pid} died on a request ({}){said}",
                            describe(&status)
                        ),
                        shared.config.max_backoff,
                        shared.config.crash_loops,
                    );
                    shared.ready_notify.notify_waiters();
                } else if ws.served.load(Ordering::Relaxed) > 0
                    && status.as_ref().is_ok_and(std::process::ExitStatus::success)
                {
                    // Exited by itself after serving (`exit` at the end of
                    // a request): its requests were served.
                    shared.health.served();
                }
                // A worker that dies right after booting, every time, must
                // not make this loop spin.
                if let Some(delay) = crash_pause {
                    pause(&shared, delay).await;
                } else if booted.elapsed() < Duration::from_secs(1)
                    && ws.retire_mode() == Retire::No
                {
                    failures += 1;
                    pause(&shared, backoff(failures, shared.config.max_backoff)).await;
                } else {
                    failures = 0;
                }
            }
            Err(e) => {
                drop(growing);
                failures += 1;
                if !marked_failing {
                    if shared.failing.fetch_add(1, Ordering::AcqRel) == 0 {
                        lock(&shared.boot_failing).0 = Some(std::time::SystemTime::now());
                    }
                    marked_failing = true;
                }
                let delay = backoff(failures, shared.config.max_backoff);
                if shared.stopping.load(Ordering::Acquire) {
                    tracing::debug!("worker boot ended by the shutdown: {e}");
                } else {
                    tracing::error!(
                        "worker failed to boot (attempt {failures}, next in {:.1}s): {e}",
                        delay.as_secs_f64()
                    );
                }
                *lock(&shared.last_boot_error) = Some(e.to_string());
                {
                    let next = std::time::Instant::now() + delay;
                    let mut f = lock(&shared.boot_failing);
                    f.1 = Some(f.1.map_or(next, |at| {
                        if at < std::time::Instant::now() {
                            next
                        } else {
                            at.min(next)
                        }
                    }));
                }
                shared.boot_failures[slot].store(failures, Ordering::Release);
                // No worker can come: the requests already waiting get
                // their 503 now, as later ones do, not after the queue
                // timeout.
                if shared.hopeless().is_some() {
                    let refused = shared.line.lock().refuse_waiters();
                    if refused > 0 {
                        tracing::debug!("{refused} waiting requests refused: no worker can boot");
                    }
                }
                shared.ready_notify.notify_waiters();
                pause(&shared, delay).await;
            }
        }
    }
    if marked_failing {
        shared.failing.fetch_sub(1, Ordering::AcqRel);
    }
}

/// How long a slot refused for `max_pool_memory` waits before it may be
/// woken again: the budget is checked a few times a second at most, not
/// at every request that waits.
const MEMORY_RECHECK: Duration = Duration::from_millis(250);

/// Whether an extra worker must not start for `max_pool_memory`: Some
/// with why when the budget was checked now, Some(None) when it was
/// refused less than [`MEMORY_RECHECK`] ago (taken as given, and not
/// counted again), None when it fits.
fn memory_refusal(shared: &Shared) -> Option<Option<String>> {
    if shared.config.max_pool_memory == 0 {
        return None;
    }
    let mut at = lock(&shared.memory_refused_at);
    if at.is_some_and(|t| t.elapsed() < MEMORY_RECHECK) {
        return Some(None);
    }
    let over = shared.over_memory_budget()?;
    *at = Some(std::time::Instant::now());
    Some(Some(over))
}

/// An extra worker booting for a waiting request, counted while it boots.
struct Growing<'a>(&'a Shared);

impl<'a> Growing<'a> {
    fn new(shared: &'a Shared) -> Growing<'a> {
        shared.growing.fetch_add(1, Ordering::AcqRel);
        Growing(shared)
    }
}

impl Drop for Growing<'_> {
    fn drop(&mut self) {
        self.0.growing.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A turn to boot a worker (see `max_booting`); none if the pool stops
/// first.
async fn boot_permit(shared: &Shared) -> Option<tokio::sync::SemaphorePermit<'_>> {
    let stop = shared.stop.notified();
    tokio::pin!(stop);
    stop.as_mut().enable();
    if shared.stopping.load(Ordering::Acquire) {
        return None;
    }
    tokio::select! {
        permit = shared.boot_permits.acquire() => permit.ok(),
        () = &mut stop => None,
    }
}

/// Whether a worker died because of a request: it was running one (or
/// exited by itself at the end of one), it went without being asked to
/// (not stopped, recycled, scaled down or timed out, nor killed by the
/// pool), and its exit status says it failed (not 0) or a signal ended
/// it. A worker that exits with status 0 (`exit` at the end of a request,
/// `Worker::replaceAfterRequest()`) did not fail, nor did one killed
/// while idle (an operator, the OOM killer between requests).
fn died_on_request(ws: &WorkerShared, status: &std::io::Result<std::process::ExitStatus>) -> bool {
    use std::os::unix::process::ExitStatusExt;
    let mode = ws.retire_mode();
    let killed_by_pool = mode == Retire::Now
        && status
            .as_ref()
            .is_ok_and(|s| s.signal() == Some(rustix::process::Signal::KILL.as_raw()));
    let unasked = !matches!(mode, Retire::Stopping | Retire::Terminate)
        && !killed_by_pool
        && !ws.recycle_due()
        && !ws.shrunk.load(Ordering::Acquire);
    let on_a_request = ws.link().busy || mode == Retire::Graceful;
    let failed = !status.as_ref().is_ok_and(std::process::ExitStatus::success);
    unasked && failed && on_a_request && ws.took_requests()
}

/// Watches the slot's worker `ws` until it exits, and returns the slot's
/// last worker, how it exited and when it booted.
///
/// When a replacement is wanted (a lifecycle limit, a reload), the
/// replacement boots while this worker still serves, takes the slot, and
/// only then is this one retired: the pool never runs short. The old
/// worker's exit is then awaited by a task of its own, and the new one is
/// watched from here.
async fn run(
    shared: &Arc<Shared>,
    slot: usize,
    extra: bool,
    mut ws: Arc<WorkerShared>,
    child: Child,
) -> (
    Arc<WorkerShared>,
    std::io::Result<std::process::ExitStatus>,
    std::time::Instant,
) {
    let mut booted = std::time::Instant::now();
    let mut watching = Box::pin(watch(child, ws.clone(), shared.clone()));
    loop {
        tokio::select! {
            status = &mut watching => return (ws, status, booted),
            () = ws.replacement_wanted() => {}
        }
        if shared.stopping.load(Ordering::Acquire) {
            continue;
        }
        let Some(permit) = boot_permit(shared).await else {
            continue;
        };
        shared.started.fetch_add(1, Ordering::Relaxed);
        shared.decisions.started(StartReason::Replace);
        tracing::debug!(
            decision = "started",
            reason = "replace",
            slot,
            pid = ws.pid,
            "starting a replacement for the worker"
        );
        let booted_worker = boot(shared, Some(slot), shared.paths()).await;
        drop(permit);
        match booted_worker {
            Ok((next, next_child)) => {
                let old = ws;
                ws = recycle::replace(shared, slot, &old, next, extra);
                booted = std::time::Instant::now();
                let old_watch = std::mem::replace(
                    &mut watching,
                    Box::pin(watch(next_child, ws.clone(), shared.clone())),
                );
                let pid = ws.pid;
                tokio::spawn(
                    async move {
                        let status = old_watch.await;
                        old.set_exit(status.as_ref().ok().copied());
                        old.fail_queued();
                        tracing::info!(
                            pid = old.pid,
                            "worker replaced by {pid}; it exited ({})",
                            describe(&status)
                        );
                    }
                    .in_current_span(),
                );
            }
            Err(e) => {
                tracing::error!(
                    pid = ws.pid,
                    "could not boot a replacement for the worker, which keeps serving: {e}"
                );
                *lock(&shared.last_boot_error) = Some(e.to_string());
                ws.set_replacement_state(REPLACEMENT_FAILED);
                // Asked again after a pause, not on every request.
                let again = ws.clone();
                let pause_for = shared.config.max_backoff;
                tokio::spawn(async move {
                    tokio::time::sleep(pause_for).await;
                    if again.replacement_state() == REPLACEMENT_FAILED {
                        again.set_replacement_state(crate::worker::NO_REPLACEMENT);
                    }
                });
            }
        }
    }
}

/// Waits, as a dormant slot, until a request has to wait for a worker.
/// False if the pool stops first.
async fn wait_for_demand(shared: &Shared) -> bool {
    let stop = shared.stop.notified();
    tokio::pin!(stop);
    stop.as_mut().enable();
    if shared.stopping.load(Ordering::Acquire) {
        return false;
    }
    shared.dormant.fetch_add(1, Ordering::AcqRel);
    // Requests that were already waiting, and that no other extra worker
    // boots for, count as demand.
    let demand = shared.line.waiting() > shared.growing.load(Ordering::Acquire);
    let woken = demand
        || tokio::select! {
            () = shared.grow.notified() => true,
            () = &mut stop => false,
        };
    shared.dormant.fetch_sub(1, Ordering::AcqRel);
    woken && !shared.stopping.load(Ordering::Acquire)
}

/// Sleeps, unless the pool starts stopping.
async fn pause(shared: &Shared, delay: Duration) {
    let stop = shared.stop.notified();
    if shared.stopping.load(Ordering::Acquire) {
        return;
    }
    tokio::select! {
        _ = tokio::time::sleep(delay) => {}
        _ = stop => {}
    }
}

/// Waits for a worker to exit, ending it when asked to.
pub(crate) async fn watch(
    mut child: Child,
    ws: Arc<WorkerShared>,
    shared: Arc<Shared>,
) -> std::io::Result<std::process::ExitStatus> {
    let config = &shared.config;
    loop {
        tokio::select! {
            status = child.wait() => return status,
            _ = ws.retire_requested() => {}
        }
        match ws.retire_mode() {
            Retire::No => continue,
            Retire::Now => {
                let _ = child.start_kill();
                return child.wait().await;
            }
            Retire::Terminate => return terminate(&mut child, ws.pid, config.kill_timeout).await,
            Retire::Stopping | Retire::Graceful => {
                if let Ok(status) = tokio::time::timeout(config.stop_timeout, child.wait()).await {
                    return status;
                }
                tracing::warn!(
                    pid = ws.pid,
                    "worker did not exit within {:?}; sending SIGTERM",
                    config.stop_timeout
                );
                return terminate(&mut child, ws.pid, config.kill_timeout).await;
            }
        }
    }
}

/// SIGTERM, then SIGKILL if the worker is still there after `kill_timeout`.
async fn terminate(
    child: &mut Child,
    pid: u32,
    kill_timeout: Duration,
) -> std::io::Result<std::process::ExitStatus> {
    signal(pid, rustix::process::Signal::TERM);
    if let Ok(status) = tokio::time::timeout(kill_timeout, child.wait()).await {
        return status;
    }
    tracing::warn!(
        pid,
        "worker ignored SIGTERM for {kill_timeout:?}; sending SIGKILL"
    );
    let _ = child.start_kill();
    child.wait().await
}

/// Signals a child that has not been reaped yet (its pid cannot have been reused).
fn signal(pid: u32, sig: rustix::process::Signal) {
    if let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process(pid, sig);
    }
}
