//! Classic mode's supervision of php-fpm, the part of worker mode's
//! supervision php-fpm does not do itself: children past `--max-memory`
//! or `--ttl` are retired between requests, and a master that died is
//! started again (with backoff, then given up on).
//!
//! Once a second the task reads php-fpm's status page (pids, start time,
//! state) and each child's resident memory (`/proc/PID/statm`), and asks
//! each idle child that is over a limit to leave (SIGQUIT: it ends after
//! any request it has begun, and php-fpm's master starts another).

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hearth_fpm::pool::{Child, Pool as FpmPool};
use tokio::sync::Notify;

use super::Classic;

/// How often the children are looked at.
const CHECK_INTERVAL: Duration = Duration::from_secs(1);
/// A master that ran this long before it died was healthy: the failures
/// counted towards giving up start again from zero.
const STABLE_AFTER: Duration = Duration::from_secs(60);
/// Failures in a row (a master that died within [`STABLE_AFTER`] of its
/// start, a start that failed) at which Hearth gives up and exits: a
/// master's death and five failed starts, about 8 s of backoff.
const MAX_FAILURES: u32 = 6;
/// The wait before a second attempt; it doubles for each further one, up
/// to [`MAX_BACKOFF`]. The first attempt after a healthy master died is
/// at once.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(8);

/// The limits php-fpm does not enforce and Hearth does, per child.
#[derive(Debug, Clone, Copy)]
pub(super) struct ChildLimits {
    /// `--max-memory`: resident memory in bytes (0: none).
    pub max_memory: u64,
    /// `--ttl`: the oldest a child may be.
    pub ttl: Option<Duration>,
}

impl ChildLimits {
    fn any(&self) -> bool {
        self.max_memory > 0 || self.ttl.is_some()
    }

    /// Why `child` should leave, if it should: its reason (as in worker
    /// mode's `restarts_by_reason`) and a sentence for the log.
    fn worn_out(&self, child: &Child) -> Option<(&'static str, String)> {
        if self.max_memory > 0 {
            if let Some(rss) = child.resident_memory().filter(|&m| m >= self.max_memory) {
                return Some((
                    "max_memory",
                    format!(
                        "it uses {} MiB, over {} MiB (max_memory)",
                        rss >> 20,
                        self.max_memory >> 20
                    ),
                ));
            }
        }
        if let Some(ttl) = self.ttl {
            if child.age() >= ttl {
                return Some(("ttl", format!("it is older than {ttl:?} (ttl)")));
            }
        }
        None
    }
}

/// What the supervision knows and counts, shared with the status.
#[derive(Debug)]
pub(super) struct Watch {
    /// Set when the server stops: php-fpm is not started again.
    stopping: AtomicBool,
    /// The running master's pid; 0 while php-fpm is down.
    master: AtomicU32,
    /// Children asked to leave that have not left yet (not asked twice).
    retiring: Mutex<HashSet<u32>>,
    /// Replacements Hearth caused, by reason.
    counts: Mutex<BTreeMap<&'static str, u64>>,
    /// Why Hearth gave up on php-fpm: `hearth serve` then exits non-zero.
    gave_up: Mutex<Option<String>>,
    /// The children (live, busy) at the last look (none while php-fpm is
    /// down), for `/metrics` and `/readyz`.
    seen: Mutex<(usize, usize)>,
}

/// Replacements Hearth caused, by reason.
pub(super) struct Counts(pub BTreeMap<&'static str, u64>);

impl Counts {
    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }

    pub fn by_reason(&self) -> serde_json::Value {
        serde_json::json!(self.0)
    }
}

impl Watch {
    pub fn new(master: u32) -> Watch {
        Watch {
            stopping: AtomicBool::new(false),
            master: AtomicU32::new(master),
            retiring: Mutex::new(HashSet::new()),
            counts: Mutex::new(BTreeMap::new()),
            gave_up: Mutex::new(None),
            seen: Mutex::new((0, 0)),
        }
    }

    pub fn stopping(&self) {
        self.stopping.store(true, Ordering::Release);
    }

    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// The running master's pid (0 while php-fpm is down).
    pub fn master(&self) -> u32 {
        self.master.load(Ordering::Acquire)
    }

    /// The children (live, busy) at the last look.
    pub fn seen(&self) -> (usize, usize) {
        *self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn saw(&self, live: usize, busy: usize) {
        *self.seen.lock().unwrap_or_else(|e| e.into_inner()) = (live, busy);
    }

    pub fn counts(&self) -> Counts {
        Counts(
            self.counts
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        )
    }

    pub fn gave_up(&self) -> Option<String> {
        self.gave_up
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn count(&self, reason: &'static str) {
        *self
            .counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(reason)
            .or_default() += 1;
    }
}

impl Classic {
    /// Supervises php-fpm until the server stops: retires children past
    /// `--max-memory` or `--ttl`, and starts php-fpm again when its master
    /// dies (PHP requests get 503 meanwhile). After [`MAX_FAILURES`]
    /// failures in a row it gives up: the reason is kept (see
    /// [`Watch::gave_up`]) and `stop` is notified, so the server shuts
    /// down and exits non-zero.
    pub async fn supervise(self: Arc<Self>, stop: Arc<Notify>) {
        let mut failures = 0;
        loop {
            let (exited, pid, since) = {
                let fpm = self.fpm.read().await;
                let Some(fpm) = fpm.as_ref() else { return };
                (fpm.on_exit(), fpm.pid(), Instant::now())
            };
            tokio::pin!(exited);
            let mut tick = tokio::time::interval(CHECK_INTERVAL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    () = &mut exited => break,
                    _ = tick.tick() => self.look_at_children().await,
                }
            }
            if self.watch.is_stopping() {
                return;
            }
            let old = {
                let mut fpm = self.fpm.write().await;
                match fpm.as_ref() {
                    Some(p) if p.pid() == pid => fpm.take(),
                    _ => None,
                }
            };
            let Some(old) = old else { return };
            self.site.set_socket(None);
            self.watch.master.store(0, Ordering::Release);
            self.watch.saw(0, 0);
            let why = old.exited().await;
            tracing::error!(
                "php-fpm's master (pid {pid}) died: {why}\nPHP requests get 503 until php-fpm \
                 is started again"
            );
            // Its children, left behind, are killed with its process group.
            drop(old);
            self.watch.count("php_fpm_exited");
            failures = if since.elapsed() >= STABLE_AFTER {
                1
            } else {
                failures + 1
            };
            if !self.start_again(&mut failures).await {
                if !self.watch.is_stopping() {
                    stop.notify_one();
                }
                return;
            }
        }
    }

    /// Starts php-fpm again, after a backoff that grows with `failures`.
    /// False when the server is stopping or Hearth gave up.
    async fn start_again(&self, failures: &mut u32) -> bool {
        loop {
            if *failures >= MAX_FAILURES {
                let why = format!(
                    "php-fpm failed {failures} times in a row (it died within {STABLE_AFTER:?} \
                     of starting, or would not start); giving up"
                );
                tracing::error!("{why}: stopping the server");
                *self.watch.gave_up.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
                return false;
            }
            if *failures > 1 {
                let backoff = FIRST_BACKOFF
                    .saturating_mul(1 << (*failures - 2).min(16))
                    .min(MAX_BACKOFF);
                tracing::info!("starting php-fpm again in {backoff:?}");
                tokio::time::sleep(backoff).await;
            }
            if self.watch.is_stopping() {
                return false;
            }
            match FpmPool::start(&self.config).await {
                Ok(pool) => {
                    let mut fpm = self.fpm.write().await;
                    if self.watch.is_stopping() {
                        drop(fpm);
                        let _ = pool.stop(Duration::from_secs(1)).await;
                        return false;
                    }
                    tracing::warn!(
                        "php-fpm started again (pid {}, {}): serving PHP requests again",
                        pool.pid(),
                        pool.dir().display()
                    );
                    self.site.set_socket(Some(pool.socket().to_path_buf()));
                    self.watch.master.store(pool.pid(), Ordering::Release);
                    *fpm = Some(pool);
                    return true;
                }
                Err(e) => {
                    *failures += 1;
                    tracing::error!(
                        "php-fpm did not start again (failure {failures} of {MAX_FAILURES} in a \
                         row): {e}"
                    );
                }
            }
        }
    }

    /// Reads the children from the status page (for `/metrics` and
    /// `/readyz`), then asks each idle one over `--max-memory` or past
    /// `--ttl` to leave (once), logging why and counting it.
    async fn look_at_children(&self) {
        // A mixed site's on-demand pool: reading the status page would
        // start a child and keep it alive; its idle children leave by
        // themselves (`pm.process_idle_timeout`).
        if self.on_demand() {
            return;
        }
        let fpm = self.fpm.read().await;
        let Some(pool) = fpm.as_ref() else { return };
        let children = match pool.children().await {
            Ok(children) => children,
            Err(e) => {
                tracing::debug!("php-fpm's status page: {e}");
                return;
            }
        };
        // The child answering the status page is busy with it alone.
        let busy = children.iter().filter(|c| !c.is_idle()).count();
        self.watch.saw(children.len(), busy.saturating_sub(1));
        if !self.limits.any() {
            return;
        }
        let mut retiring = self
            .watch
            .retiring
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        retiring.retain(|pid| children.iter().any(|c| c.pid == *pid));
        for child in children.iter().filter(|c| c.is_idle()) {
            if retiring.contains(&child.pid) {
                continue;
            }
            let Some((reason, why)) = self.limits.worn_out(child) else {
                continue;
            };
            match pool.retire(child.pid) {
                Ok(true) => {
                    tracing::info!(
                        pid = child.pid,
                        reason,
                        "retiring php-fpm child {}: {why}",
                        child.pid
                    );
                    retiring.insert(child.pid);
                    self.watch.count(reason);
                }
                Ok(false) => {}
                Err(e) => tracing::warn!("cannot retire php-fpm child {}: {e}", child.pid),
            }
        }
    }
}
