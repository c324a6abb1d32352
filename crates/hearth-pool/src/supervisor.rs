//! Keeping each worker slot filled: boot, hand to the pool, watch, replace.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hearth_proto::message::Ready;
use hearth_proto::Kind;
use tokio::process::Child;

use crate::dispatch::{self, lock};
use crate::observe::RestartReason;
use crate::pool::Shared;
use crate::process::{self, Spawned};
use crate::worker::{Retire, Worker, WorkerShared};
use crate::{Error, Paths};

/// Keeps one slot's worker running: boots it, hands it to the pool, waits
/// for it to exit, and boots the next, backing off while boots fail.
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
                let ws = worker.shared.clone();
                let pid = ws.pid;
                if marked_failing {
                    shared.failing.fetch_sub(1, Ordering::AcqRel);
                    marked_failing = false;
                    tracing::info!(
                        pid,
                        "worker booted again after {failures} failed attempt(s)"
                    );
                }
                shared.boot_failures[slot].store(0, Ordering::Release);
                shared.booted.store(true, Ordering::Release);
                *lock(&shared.slots[slot]) = Some(ws.clone());
                *lock(&shared.ready) = Some(worker.ready.clone());
                let mut worker = worker;
                worker.request_limit = request_limit(shared.config.max_requests, pid);
                ws.extra.store(extra, Ordering::Release);
                let booted = Instant::now();
                dispatch::add(&shared, worker);
                shared.ready_notify.notify_waiters();

                // Watches the worker until it exits. When a replacement is
                // wanted (a lifecycle limit, a reload), the replacement
                // boots while this worker still serves, takes the slot, and
                // only then is this one retired: the pool never runs short.
                let mut ws = ws;
                let mut pid = pid;
                let mut booted = booted;
                let mut watching = Box::pin(watch(child, ws.clone(), shared.clone()));
                let status = loop {
                    tokio::select! {
                        status = &mut watching => break status,
                        () = ws.replacement_wanted() => {}
                    }
                    if shared.stopping.load(Ordering::Acquire) {
                        continue;
                    }
                    shared.started.fetch_add(1, Ordering::Relaxed);
                    match boot(&shared, Some(slot), shared.paths()).await {
                        Ok((mut next, next_child)) => {
                            let old = std::mem::replace(&mut ws, next.shared.clone());
                            let old_watch = std::mem::replace(
                                &mut watching,
                                Box::pin(watch(next_child, ws.clone(), shared.clone())),
                            );
                            pid = ws.pid;
                            booted = Instant::now();
                            next.request_limit = request_limit(shared.config.max_requests, pid);
                            ws.extra.store(extra, Ordering::Release);
                            *lock(&shared.slots[slot]) = Some(ws.clone());
                            *lock(&shared.ready) = Some(next.ready.clone());
                            dispatch::add(&shared, next);
                            shared.ready_notify.notify_waiters();
                            shared.restarts.fetch_add(1, Ordering::Relaxed);
                            shared
                                .restart_reasons
                                .add(old.reason().unwrap_or(RestartReason::Exited));
                            dispatch::retire_worker(&shared, &old);
                            let old_pid = old.pid;
                            tokio::spawn(async move {
                                let status = old_watch.await;
                                old.set_exit(status.as_ref().ok().copied());
                                old.fail_queued();
                                tracing::info!(
                                    pid = old_pid,
                                    "worker replaced by {pid}; it exited ({})",
                                    describe(&status)
                                );
                            });
                        }
                        Err(e) => {
                            tracing::error!(
                                pid,
                                "could not boot a replacement for the worker, which keeps serving: {e}"
                            );
                            *lock(&shared.last_boot_error) = Some(e.to_string());
                            ws.set_replacement_state(crate::worker::REPLACEMENT_FAILED);
                            // Asked again after a pause, not on every request.
                            let again = ws.clone();
                            let pause_for = shared.config.max_backoff;
                            tokio::spawn(async move {
                                tokio::time::sleep(pause_for).await;
                                if again.replacement_state() == crate::worker::REPLACEMENT_FAILED {
                                    again.set_replacement_state(crate::worker::NO_REPLACEMENT);
                                }
                            });
                        }
                    }
                };
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
                shared
                    .restart_reasons
                    .add(ws.reason().unwrap_or(match ws.retire_mode() {
                        Retire::Graceful | Retire::Stopping => RestartReason::Exited,
                        Retire::Terminate => RestartReason::RequestTimeout,
                        Retire::Now | Retire::No => RestartReason::Crashed,
                    }));
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

/// A worker's `max_requests`, plus up to 10% picked by its pid, so that
/// workers booted together are not all replaced on the same request.
fn request_limit(max_requests: u64, pid: u32) -> u64 {
    if max_requests == 0 {
        return u64::MAX;
    }
    let spread = max_requests / 10;
    let pick = u64::from(pid).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
    max_requests + pick % (spread + 1)
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
    let demand = shared.waiting.load() > 0;
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

/// Starts a worker and waits for its handshake.
/// Removes a path when dropped.
struct Unlink(std::path::PathBuf);

impl Drop for Unlink {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Clears a slot's booting mark when dropped.
struct Booting<'a>(Option<&'a std::sync::Mutex<Option<(u32, Instant)>>>);

impl Drop for Booting<'_> {
    fn drop(&mut self) {
        if let Some(mark) = self.0 {
            *lock(mark) = None;
        }
    }
}

/// Starts a worker running the app from `paths` and waits for its
/// handshake, or for it to exit. With a slot, status reports show the
/// worker as booting in it meanwhile.
pub(crate) async fn boot(
    shared: &Shared,
    slot: Option<usize>,
    paths: Arc<Paths>,
) -> Result<(Worker, Child), Error> {
    let config = &shared.config;
    let fifo = shared.next_fifo();
    // The FIFO's name is only needed until the worker has opened it, which
    // it does before its handshake; it goes when boot() returns.
    let _unlink = fifo.clone().map(Unlink);
    let Spawned {
        mut child,
        pid,
        channel,
        output,
        forwarders,
    } = process::spawn(config, &shared.php, &paths, fifo.as_deref())?;
    let _booting = Booting(slot.map(|slot| {
        let mark = &shared.booting[slot];
        *lock(mark) = Some((pid, Instant::now()));
        mark
    }));
    let script = paths.script.clone();
    let mut worker = Worker::new(WorkerShared::new(pid, channel, paths), config.max_payload);
    // Registered before the check, so a stop between the two is not missed.
    let stop = shared.stop.notified();
    tokio::pin!(stop);
    stop.as_mut().enable();
    if shared.stopping.load(Ordering::Acquire) {
        let _ = child.start_kill();
        let _ = child.wait().await;
        return Err(Error::boot("stopped while booting"));
    }
    let handshake = tokio::time::timeout(config.boot_timeout, worker.read_frame());
    let failure = tokio::select! {
        result = handshake => match result {
            Ok(Ok(frame)) if frame.kind == Kind::Ready => match Ready::decode(&frame.payload) {
                Ok(ready) if ready.protocol == u32::from(hearth_proto::VERSION) => {
                    worker.ready = Arc::new(ready);
                    worker.started = Instant::now();
                    output.release();
                    return Ok((worker, child));
                }
                Ok(ready) => format!(
                    "the worker's PHP library speaks protocol {} but this hearth speaks {}; \
                     use the PHP library that came with this hearth",
                    ready.protocol,
                    hearth_proto::VERSION
                ),
                Err(e) => format!("bad handshake: {e}"),
            },
            Ok(Ok(frame)) => format!("expected a ready handshake, got a {:?} frame", frame.kind),
            Ok(Err(e)) if e.is_worker_lost() => String::new(),
            Ok(Err(e)) => format!("handshake failed: {e}"),
            Err(_) => format!(
                "no ready handshake within {:?} ({})",
                config.boot_timeout,
                config.boot_hint
            ),
        },
        _ = child.wait() => String::new(),
        _ = &mut stop => "stopped while booting".to_owned(),
    };
    let exited = failure.is_empty();
    let status = if exited {
        // The worker exited (or closed its end) before the handshake.
        child.wait().await
    } else {
        let _ = child.start_kill();
        child.wait().await
    };
    // What it printed, all of it: the pipes close when it is gone.
    for f in forwarders {
        let _ = tokio::time::timeout(Duration::from_secs(1), f).await;
    }
    let stopped = failure == "stopped while booting";
    if stopped {
        // Not a failure of the script: what it printed goes to the log.
        output.release();
        return Err(Error::boot(format!("{}: {failure}", script.display())));
    }
    let printed = output.take_for_error().join("\n");
    let said = |text: &str| {
        if printed.is_empty() {
            format!("{text}; it printed nothing")
        } else {
            format!("{text}:\n{printed}")
        }
    };
    Err(Error::boot(match &status {
        Ok(status) if exited && status.success() => format!(
            "{} exited without calling {}. {}{}",
            script.display(),
            config.entry_point,
            config.entry_help,
            if printed.is_empty() {
                " It printed nothing.".to_owned()
            } else if !printed.contains('\n') && printed.len() <= 200 {
                format!(" It printed {printed:?}.")
            } else {
                format!("\nIt printed:\n{printed}")
            }
        ),
        _ if exited => said(&format!(
            "{} exited while booting ({})",
            script.display(),
            describe(&status)
        )),
        _ => said(&format!("{}: {failure}", script.display())),
    }))
}

/// Waits for a worker to exit, ending it when asked to.
async fn watch(
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

fn describe(status: &std::io::Result<std::process::ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Ok(s) => match (s.code(), s.signal()) {
            (Some(code), _) => format!("exit status {code}"),
            (None, Some(sig)) => format!("killed by signal {sig}"),
            _ => s.to_string(),
        },
        Err(e) => format!("status unknown: {e}"),
    }
}
