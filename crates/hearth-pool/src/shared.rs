//! The state the pool's tasks share: the supervisors, the requests, the
//! sweeper and the public [`crate::Pool`] handle.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use hearth_proto::message::Ready;
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinHandle;

use crate::health::RequestHealth;
use crate::line::WaitingLine;
use crate::observe::{resident_memory, Decisions, RestartCounts};
use crate::php::PhpInfo;
use crate::routes::RouteTable;
use crate::worker::WorkerShared;
use crate::{Paths, PoolConfig};

#[derive(Debug)]
pub(crate) struct Shared {
    pub config: PoolConfig,
    pub php: PhpInfo,
    /// Where workers booted now run the app from: resolved at start and
    /// replaced by each reload whose trial worker booted.
    paths: Mutex<Arc<Paths>>,
    /// Idle workers and the requests waiting for one.
    pub line: WaitingLine,
    pub stopping: AtomicBool,
    pub stop: Notify,
    /// The worker of each slot, while one is running.
    pub slots: Vec<Mutex<Option<Arc<WorkerShared>>>>,
    /// Slots whose worker currently fails to boot.
    pub failing: AtomicUsize,
    /// Each slot's failed boots in a row, since its last worker booted.
    pub boot_failures: Vec<AtomicU32>,
    /// Whether any worker has booted since the pool started.
    pub booted: AtomicBool,
    pub last_boot_error: Mutex<Option<String>>,
    /// The most recent handshake: the PHP settings requests are shaped by.
    pub ready: Mutex<Option<Arc<Ready>>>,
    /// Woken at every change in the workers: one booted, exited or failed
    /// to boot.
    pub ready_notify: Notify,
    pub supervisors: Mutex<Vec<JoinHandle<()>>>,
    /// Held while a reload runs: one at a time.
    pub reloading: tokio::sync::Mutex<()>,
    /// Reloads finished, whether they succeeded or not.
    pub reloads: AtomicU64,
    pub reloaded: Notify,
    pub restarts: AtomicU64,
    /// Restarts by why the worker went.
    pub restart_reasons: RestartCounts,
    /// The pid of the worker each slot is booting, and since when.
    pub booting: Vec<Mutex<Option<(u32, Instant)>>>,
    pub started: AtomicU64,
    /// Slots beyond `min_workers` with no worker, waiting for demand.
    pub dormant: AtomicUsize,
    /// Wakes a dormant slot: a request had to wait for a worker.
    pub grow: Notify,
    /// Debug mode: one permit per slot, held by a request's own worker
    /// from its boot until it has exited.
    pub fresh: Arc<Semaphore>,
    /// Debug mode: the slots a request's own worker holds.
    pub fresh_claims: Mutex<Vec<bool>>,
    /// Debug mode: requests waiting for a free slot (`max_queue`).
    pub fresh_waiting: AtomicUsize,
    /// Boots in flight at most (`max_booting`): a permit is held from
    /// spawn to handshake.
    pub boot_permits: tokio::sync::Semaphore,
    /// Extra workers booting for requests that wait: one per waiting
    /// request at most.
    pub growing: AtomicUsize,
    /// Workers started by why, scaled down, refused for memory.
    pub decisions: Decisions,
    /// Workers dying on requests.
    pub health: RequestHealth,
    /// When an extra worker was last refused for `max_pool_memory`: for
    /// a short while after, slots take the answer as given.
    pub memory_refused_at: Mutex<Option<Instant>>,
    /// Since when some slot fails to boot, and when the soonest of them
    /// tries again.
    pub boot_failing: Mutex<(Option<std::time::SystemTime>, Option<Instant>)>,
    /// Memory growth by route, from the workers' reports.
    pub routes: Mutex<RouteTable>,
}

impl Shared {
    /// The state of a pool of `config.workers` slots (at least one), none
    /// of them running yet.
    pub fn new(config: PoolConfig, php: PhpInfo, paths: Arc<Paths>) -> Shared {
        let workers = config.workers.max(1);
        Shared {
            php,
            paths: Mutex::new(paths),
            line: WaitingLine::default(),
            stopping: AtomicBool::new(false),
            stop: Notify::new(),
            slots: (0..workers).map(|_| Mutex::new(None)).collect(),
            failing: AtomicUsize::new(0),
            boot_failures: (0..workers).map(|_| AtomicU32::new(0)).collect(),
            booted: AtomicBool::new(false),
            last_boot_error: Mutex::new(None),
            ready: Mutex::new(None),
            ready_notify: Notify::new(),
            supervisors: Mutex::new(Vec::new()),
            reloading: tokio::sync::Mutex::new(()),
            reloads: AtomicU64::new(0),
            reloaded: Notify::new(),
            restarts: AtomicU64::new(0),
            restart_reasons: RestartCounts::default(),
            booting: (0..workers).map(|_| Mutex::new(None)).collect(),
            started: AtomicU64::new(0),
            dormant: AtomicUsize::new(0),
            grow: Notify::new(),
            fresh: Arc::new(Semaphore::new(workers)),
            fresh_claims: Mutex::new(vec![false; workers]),
            fresh_waiting: AtomicUsize::new(0),
            boot_permits: tokio::sync::Semaphore::new(config.max_booting.max(1)),
            growing: AtomicUsize::new(0),
            decisions: Decisions::default(),
            health: RequestHealth::default(),
            memory_refused_at: Mutex::new(None),
            boot_failing: Mutex::new((None, None)),
            routes: Mutex::new(RouteTable::default()),
            config,
        }
    }

    /// Where a worker booted now runs the app from.
    pub fn paths(&self) -> Arc<Paths> {
        lock(&self.paths).clone()
    }

    /// Where workers booted from now on run the app from (a reload).
    pub fn set_paths(&self, paths: Arc<Paths>) {
        *lock(&self.paths) = paths;
    }

    /// Why waiting for a worker is pointless: every slot is failing to boot.
    pub fn hopeless(&self) -> Option<String> {
        let failing = self.failing.load(Ordering::Acquire);
        let active = self.slots.len() - self.dormant.load(Ordering::Acquire).min(self.slots.len());
        if failing > 0 && failing >= active {
            let last = lock(&self.last_boot_error).clone().unwrap_or_default();
            return Some(format!("workers are failing to boot: {last}"));
        }
        None
    }

    /// Workers booting now.
    pub fn booting(&self) -> usize {
        self.booting.iter().filter(|b| lock(b).is_some()).count()
    }

    /// The resident memory of the live workers, in bytes, and how many
    /// were read.
    pub fn workers_memory(&self) -> (u64, usize) {
        let mut total = 0;
        let mut counted = 0;
        for slot in &self.slots {
            let pid = lock(slot).as_ref().filter(|w| !w.is_dead()).map(|w| w.pid);
            if let Some(rss) = pid.and_then(resident_memory) {
                total += rss;
                counted += 1;
            }
        }
        (total, counted)
    }

    /// Why one more worker would not fit in `max_pool_memory`, if it
    /// would not: the live workers' resident memory, plus their mean for
    /// each worker booting and for the new one, is over the budget.
    /// Without live workers to go by, it fits.
    pub fn over_memory_budget(&self) -> Option<String> {
        let limit = self.config.max_pool_memory;
        if limit == 0 {
            return None;
        }
        let (used, counted) = self.workers_memory();
        if counted == 0 {
            return None;
        }
        let mean = used / counted as u64;
        let booting = self.booting() as u64;
        let wanted = used + mean * (booting + 1);
        (wanted > limit).then(|| {
            format!(
                "{counted} workers use {} MiB; with {} more of {} MiB each that is {} MiB, \
                 over max_pool_memory ({} MiB)",
                used >> 20,
                booting + 1,
                mean >> 20,
                wanted >> 20,
                limit >> 20
            )
        })
    }
}

/// Locks a std mutex, ignoring poisoning (the data stays consistent: every
/// critical section here is a few assignments).
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
