//! Workers into the line and out of the pool.
//!
//! A worker enters the pool once, when it has booted ([`install`], the
//! one way in, for a slot's first worker and for a replacement alike).
//! After each request it comes back ([`release`]): to the request queued
//! behind it, to the first request in line, or to the idle stack, unless
//! it is worn out (`max_requests`, `ttl`, `max_memory`). A worn-out worker
//! serves on while its supervisor boots a replacement, which then takes
//! its slot and retires it ([`replace`]); one over `max_memory` stops at
//! once. A response nobody waits for any more is read out before the
//! worker comes back ([`finish_abandoned`]).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hearth_proto::message::EndReport;
use hearth_proto::{flags, Frame, Kind};

use crate::line::Assignment;
use crate::observe::{resident_memory, RestartReason};
use crate::routes::format_growth;
use crate::shared::{lock, Shared};
use crate::worker::{
    log_report, Handover, Retire, Worker, WorkerShared, NO_REPLACEMENT, RECENT_ROUTES,
    WRITE_STARTED,
};
use crate::Error;

/// With `max_memory`, a worker's memory is read after this many requests
/// or this long, whichever comes first: a few syscalls per check, not per
/// request, and a worker leaking a megabyte a request overshoots by a few.
const MEMORY_CHECK_REQUESTS: u64 = 4;
const MEMORY_CHECK_INTERVAL: Duration = Duration::from_millis(500);

/// Hands a freshly booted worker to the pool: it becomes the worker of
/// `slot` (whose failed boots are forgotten), its handshake the settings
/// requests are shaped by, and it goes to the first request in line or to
/// the idle stack. `extra`: the slot is beyond `min_workers`. Returns the
/// worker's shared state, which its supervisor watches.
pub(crate) fn install(
    pool: &Arc<Shared>,
    slot: usize,
    mut worker: Worker,
    extra: bool,
) -> Arc<WorkerShared> {
    let ws = worker.shared.clone();
    pool.boot_failures[slot].store(0, Ordering::Release);
    pool.booted.store(true, Ordering::Release);
    worker.request_limit = request_limit(pool.config.max_requests, ws.pid);
    ws.extra.store(extra, Ordering::Release);
    *lock(&pool.slots[slot]) = Some(ws.clone());
    *lock(&pool.ready) = Some(worker.ready.clone());
    release(pool, worker);
    pool.ready_notify.notify_waiters();
    ws
}

/// Installs `next` in `slot` in place of `old`, which was asked for a
/// replacement: `old` is counted as restarted and retired (at once if it
/// is idle, after its request if not). Returns `next`'s shared state.
pub(crate) fn replace(
    pool: &Arc<Shared>,
    slot: usize,
    old: &Arc<WorkerShared>,
    next: Worker,
    extra: bool,
) -> Arc<WorkerShared> {
    let ws = install(pool, slot, next, extra);
    pool.restarts.fetch_add(1, Ordering::Relaxed);
    let reason = old.reason().unwrap_or(RestartReason::Exited);
    tracing::debug!(
        decision = "retired",
        reason = reason.as_str(),
        pid = old.pid,
        slot,
        "worker replaced by {}",
        ws.pid
    );
    pool.restart_reasons.add(reason, old.past(slot, reason));
    retire(pool, old);
    ws
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

/// A worker whose request has ended: to the request queued behind it, to
/// the first request in line, to the idle stack, or stopped.
pub(crate) fn release(pool: &Arc<Shared>, mut worker: Worker) {
    // A worker past a lifecycle limit is replaced, but only when no
    // request has been queued behind it: that one may already be in the
    // worker's channel and must run there (it runs, then the worker goes).
    let mut worn = worker.shared.recycle_due();
    if !worn && worker.shared.replacement_state() == NO_REPLACEMENT {
        match worn_out(pool, &mut worker) {
            // Over its memory limit it takes no more requests: each could
            // grow it further. The slot is short while the next one boots.
            Some((reason @ RestartReason::MaxMemory, why)) => {
                tracing::info!(
                    pid = worker.pid(),
                    "replacing the worker: {why}; {}",
                    recent_routes(&worker)
                );
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
        worker.stop();
        return;
    }
    if worker.shared.is_dead() {
        return;
    }
    worker.trim();
    worker.idle_since = tokio::time::Instant::now();
    let mut line = pool.line.lock();
    while let Some(waiter) = line.pop_first() {
        match waiter.send(Assignment::Worker(worker)) {
            Ok(()) => return,
            Err(Assignment::Worker(w)) => worker = w,
            Err(Assignment::Queued { .. }) => unreachable!("a worker was sent"),
        }
    }
    // Marked for replacement (a reload) since the check above.
    if worker.shared.recycle_due() {
        drop(line);
        worker.stop();
        return;
    }
    line.push_idle(worker);
}

/// Replaces a worker after its current request, or now if it is idle.
pub(crate) fn retire(pool: &Arc<Shared>, link: &Arc<WorkerShared>) {
    link.mark_recycle();
    let idle = pool.line.lock().remove_idle(link);
    if let Some(worker) = idle {
        worker.stop();
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

/// Counts what the request before this one grew the worker by, under its
/// route, from the report in this request's final `End` (see
/// [`hearth_proto::message::EndReport`]), and remembers this request's
/// route and report for the next one. An `End` without a report (a
/// library that sends none) leaves nothing to compare the next one with.
pub(crate) fn note_end(pool: &Shared, worker: &mut Worker, frame: &Frame) {
    let report = if frame.has_flag(flags::REPORT) {
        match EndReport::decode(&frame.payload) {
            Ok(report) => report,
            Err(e) => {
                tracing::debug!(pid = worker.pid(), "unreadable report in an end frame: {e}");
                EndReport::default()
            }
        }
    } else {
        EndReport::default()
    };
    let Some(memory) = report.memory else {
        worker.growth.measured = None;
        return;
    };
    let mut routes = lock(&pool.routes);
    if let Some((key, before)) = worker.growth.measured.take() {
        let growth = i64::try_from(memory)
            .unwrap_or(i64::MAX)
            .saturating_sub(i64::try_from(before).unwrap_or(i64::MAX));
        routes.record(&key, growth);
        if worker.growth.recent.len() == RECENT_ROUTES {
            worker.growth.recent.pop_front();
        }
        worker.growth.recent.push_back((key, growth));
    }
    let key = match &report.route {
        // A name is cut to ROUTE_MAX_LEN by the table; one that is not
        // UTF-8 is cut first, so that its repair copies little.
        Some(name) => match std::str::from_utf8(name) {
            Ok(name) => routes.key(name),
            Err(_) => routes.key(&String::from_utf8_lossy(
                &name[..name.len().min(crate::routes::ROUTE_MAX_LEN)],
            )),
        },
        None if !worker.growth.route.is_empty() => routes.key(&worker.growth.route),
        None => return,
    };
    worker.growth.measured = Some((key, memory));
}

/// The routes a worker served last, newest first, with what each grew
/// it by: `the routes it served last: GET /a +12.0 KiB, ...`.
fn recent_routes(worker: &Worker) -> String {
    if worker.growth.recent.is_empty() {
        return "no request of it was measured (see docs/memory.md)".to_owned();
    }
    let list: Vec<String> = worker
        .growth
        .recent
        .iter()
        .rev()
        .map(|(route, growth)| format!("{route} {}", format_growth(*growth)))
        .collect();
    format!(
        "the routes it served last, newest first, with what each grew it by: {}",
        list.join(", ")
    )
}

/// Reads and discards the response to request `id`, then releases the worker.
pub(crate) async fn finish_abandoned(pool: Arc<Shared>, mut worker: Worker, id: u32) {
    match drain(&pool, &mut worker, id).await {
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
async fn drain(pool: &Shared, worker: &mut Worker, id: u32) -> Result<(), Error> {
    loop {
        let frame = worker.read_frame().await?;
        if frame.request_id != id {
            return Err(
                hearth_proto::Error::unexpected("frame outside the current request").into(),
            );
        }
        if frame.kind == Kind::Error {
            let report = log_report(worker.pid(), &frame);
            worker.shared.set_last_report(report);
        }
        if frame.kind == Kind::End && frame.has_flag(flags::DETACHED) {
            continue;
        }
        if matches!(frame.kind, Kind::End | Kind::Result) {
            worker.count_served();
            if frame.kind == Kind::End {
                note_end(pool, worker, &frame);
            }
            if frame.has_flag(flags::CLOSE) {
                worker.shared.retire(Retire::Graceful);
                return Err(Error::worker_lost("exiting"));
            }
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::request_limit;

    #[test]
    fn request_limits_spread_over_a_tenth() {
        assert_eq!(request_limit(0, 1234), u64::MAX);
        assert_eq!(request_limit(5, 1234), 5, "under 10 requests, no spread");
        let limits: std::collections::BTreeSet<u64> =
            (1..200).map(|pid| request_limit(100, pid)).collect();
        assert!(limits.iter().all(|l| (100..=110).contains(l)));
        assert!(limits.len() > 1, "workers booted together differ");
    }
}
