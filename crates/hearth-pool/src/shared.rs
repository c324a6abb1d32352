//! The state the pool's tasks share: the supervisors, the requests, the
//! sweeper and the public [`crate::Pool`] handle.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use hearth_proto::message::Ready;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::line::WaitingLine;
use crate::observe::RestartCounts;
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
}

/// Locks a std mutex, ignoring poisoning (the data stays consistent: every
/// critical section here is a few assignments).
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
