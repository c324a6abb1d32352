//! Idle workers that should go without waiting for a request: past
//! `idle_ttl` or `ttl`, or extra workers idle past `scale_down_after`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::observe::RestartReason;
use crate::shared::Shared;

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
            let mut line = pool.line.lock();
            for w in line.take_idle() {
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
                    line.push_idle(w);
                }
            }
        }
        for worker in expired {
            tracing::info!(
                pid = worker.pid(),
                "replacing the worker: idle past idle_ttl, or past ttl"
            );
            worker.shared.mark_recycle();
            worker.stop();
        }
        for worker in unneeded {
            tracing::info!(
                pid = worker.pid(),
                "stopping an extra worker idle for {:?} (scale_down_after)",
                config.scale_down_after
            );
            worker.shared.shrunk.store(true, Ordering::Release);
            worker.shared.mark_recycle();
            worker.stop();
        }
    }
}
