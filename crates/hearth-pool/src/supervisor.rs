//! Keeping each worker slot filled: boot, install, watch, replace, back off.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::process::Child;
use tracing::Instrument as _;

use crate::boot::{boot, describe};
use crate::observe::RestartReason;
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
    while !shared.stopping.load(Ordering::Acquire) {
        if dormant {
            if !wait_for_demand(&shared).await {
                break;
            }
            dormant = false;
            tracing::debug!(slot, "requests are waiting: starting an extra worker");
        }
        shared.started.fetch_add(1, Ordering::Relaxed);
        match boot(&shared, Some(slot), shared.paths()).await {
            Ok((worker, child)) => {
                if marked_failing {
                    shared.failing.fetch_sub(1, Ordering::AcqRel);
                    marked_failing = false;
                    tracing::info!(
                        pid = worker.pid(),
                        "worker booted again after {failures} failed attempt(s)"
                    );
                }
                let ws = recycle::install(&shared, slot, worker, extra);
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
                    dormant = true;
                    failures = 0;
                    continue;
                }
                shared.restarts.fetch_add(1, Ordering::Relaxed);
                let reason = ws.reason().unwrap_or(match ws.retire_mode() {
                    Retire::Graceful | Retire::Stopping => RestartReason::Exited,
                    Retire::Terminate => RestartReason::RequestTimeout,
                    Retire::Now | Retire::No => RestartReason::Crashed,
                });
                shared.restart_reasons.add(reason, ws.past(slot, reason));
                // A worker that dies right after booting, every time, must
                // not make this loop spin.
                if booted.elapsed() < Duration::from_secs(1) && ws.retire_mode() == Retire::No {
                    failures += 1;
                    pause(&shared, backoff(failures, shared.config.max_backoff)).await;
                } else {
                    failures = 0;
                }
            }
            Err(e) => {
                failures += 1;
                if !marked_failing {
                    shared.failing.fetch_add(1, Ordering::AcqRel);
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
                shared.boot_failures[slot].store(failures, Ordering::Release);
                shared.ready_notify.notify_waiters();
                pause(&shared, delay).await;
            }
        }
    }
    if marked_failing {
        shared.failing.fetch_sub(1, Ordering::AcqRel);
    }
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
        shared.started.fetch_add(1, Ordering::Relaxed);
        match boot(shared, Some(slot), shared.paths()).await {
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
    // Requests that were already waiting count as demand.
    let demand = shared.line.waiting() > 0;
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

fn backoff(failures: u32, max: Duration) -> Duration {
    let ms = 100u64.saturating_mul(1 << failures.saturating_sub(1).min(16));
    Duration::from_millis(ms).min(max)
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
