//! What the pool tells about itself: why workers were replaced, and a
//! snapshot of each worker for `hearth status`.
//!
//! Everything here is cheap on the request path: counters are atomics
//! bumped when a worker exits, and a worker's current request is a copy
//! into a fixed buffer under the lock its request already takes. The
//! costly parts (memory from `/proc`, formatting) run only when someone
//! asks for a snapshot.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

/// Why a worker was replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RestartReason {
    /// It died or was killed without being asked to (a crash, the OOM
    /// killer, a broken protocol).
    Crashed = 0,
    /// It served `max_requests`.
    MaxRequests = 1,
    /// Its resident memory passed `max_memory`.
    MaxMemory = 2,
    /// It was older than `ttl`.
    Ttl = 3,
    /// It was idle longer than `idle_ttl`.
    IdleTtl = 4,
    /// A request ran past `request_timeout`.
    RequestTimeout = 5,
    /// A reload replaced it.
    Reload = 6,
    /// It exited by itself (`exit`, a fatal error,
    /// `Worker::replaceAfterRequest()`).
    Exited = 7,
}

impl RestartReason {
    /// Every reason, in the order of their numbers.
    pub const ALL: [RestartReason; 8] = [
        RestartReason::Crashed,
        RestartReason::MaxRequests,
        RestartReason::MaxMemory,
        RestartReason::Ttl,
        RestartReason::IdleTtl,
        RestartReason::RequestTimeout,
        RestartReason::Reload,
        RestartReason::Exited,
    ];

    /// The name used in metrics labels and `hearth status`.
    pub fn as_str(self) -> &'static str {
        match self {
            RestartReason::Crashed => "crashed",
            RestartReason::MaxRequests => "max_requests",
            RestartReason::MaxMemory => "max_memory",
            RestartReason::Ttl => "ttl",
            RestartReason::IdleTtl => "idle_ttl",
            RestartReason::RequestTimeout => "request_timeout",
            RestartReason::Reload => "reload",
            RestartReason::Exited => "exited",
        }
    }

    pub(crate) fn from_u8(n: u8) -> Option<RestartReason> {
        RestartReason::ALL.get(usize::from(n)).copied()
    }
}

/// Why a worker was started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum StartReason {
    /// To fill a slot that always runs (`min_workers`), at start.
    Min = 0,
    /// Requests were waiting for a worker: an extra one, beyond
    /// `min_workers`.
    Demand = 1,
    /// In place of a worker that went (a crash, a lifecycle limit, a
    /// reload).
    Replace = 2,
}

impl StartReason {
    pub const ALL: [StartReason; 3] = [StartReason::Min, StartReason::Demand, StartReason::Replace];

    /// The name used in metrics labels and `hearth status`.
    pub fn as_str(self) -> &'static str {
        match self {
            StartReason::Min => "min",
            StartReason::Demand => "demand",
            StartReason::Replace => "replace",
        }
    }
}

/// The pool's sizing decisions, counted: workers started by why, extra
/// workers stopped for being idle, workers not started for the memory
/// budget. Atomics bumped at each decision, never per request.
#[derive(Debug, Default)]
pub(crate) struct Decisions {
    started: [AtomicU64; 3],
    scaled_down: AtomicU64,
    refused_memory: AtomicU64,
}

impl Decisions {
    pub fn started(&self, reason: StartReason) {
        self.started[reason as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub fn scaled_down(&self) {
        self.scaled_down.fetch_add(1, Ordering::Relaxed);
    }

    pub fn refused_memory(&self) {
        self.refused_memory.fetch_add(1, Ordering::Relaxed);
    }

    pub fn started_snapshot(&self) -> [(StartReason, u64); 3] {
        StartReason::ALL.map(|r| (r, self.started[r as usize].load(Ordering::Relaxed)))
    }

    pub fn scaled_down_count(&self) -> u64 {
        self.scaled_down.load(Ordering::Relaxed)
    }

    pub fn refused_memory_count(&self) -> u64 {
        self.refused_memory.load(Ordering::Relaxed)
    }
}

/// How many replaced workers [`RestartCounts`] remembers.
pub const PAST_WORKERS: usize = 50;

/// Restarts counted by reason, and the last [`PAST_WORKERS`] workers
/// replaced (a lock taken only when a worker goes, never per request).
#[derive(Debug, Default)]
pub(crate) struct RestartCounts {
    counts: [AtomicU64; 8],
    past: Mutex<VecDeque<PastWorker>>,
}

impl RestartCounts {
    /// Counts the replacement of a worker, and remembers it.
    pub fn add(&self, reason: RestartReason, worker: PastWorker) {
        self.counts[reason as usize].fetch_add(1, Ordering::Relaxed);
        let mut past = self.past.lock().unwrap_or_else(|e| e.into_inner());
        if past.len() == PAST_WORKERS {
            past.pop_front();
        }
        past.push_back(worker);
    }

    pub fn snapshot(&self) -> [(RestartReason, u64); 8] {
        RestartReason::ALL.map(|r| (r, self.counts[r as usize].load(Ordering::Relaxed)))
    }

    /// The workers replaced, newest first.
    pub fn past(&self) -> Vec<PastWorker> {
        let past = self.past.lock().unwrap_or_else(|e| e.into_inner());
        past.iter().rev().cloned().collect()
    }
}

/// A worker that was replaced, as [`crate::Pool::past_workers`] tells it.
#[derive(Debug, Clone)]
pub struct PastWorker {
    /// The pool slot it filled.
    pub slot: usize,
    pub pid: u32,
    pub reason: RestartReason,
    /// When it was replaced (or found gone).
    pub ended: SystemTime,
    /// Requests it completed.
    pub requests: u64,
    /// How long it ran.
    pub age: Duration,
}

/// The longest request label kept (method, space, target); longer ones
/// are cut, on a character boundary.
pub(crate) const LABEL_MAX: usize = 160;

/// The request a worker is running, as its HTTP front described it: a
/// fixed buffer, so that setting it never allocates.
#[derive(Debug, Clone)]
pub(crate) struct Current {
    len: usize,
    text: [u8; LABEL_MAX],
    since: Option<Instant>,
}

impl Default for Current {
    fn default() -> Current {
        Current {
            len: 0,
            text: [0; LABEL_MAX],
            since: None,
        }
    }
}

impl Current {
    /// Records `method target`, cut to [`LABEL_MAX`] bytes.
    pub fn set(&mut self, method: &str, target: &str, since: Instant) {
        let mut len = 0;
        for piece in [method, " ", target] {
            let room = LABEL_MAX - len;
            let take = if piece.len() <= room {
                piece.len()
            } else {
                (0..=room)
                    .rev()
                    .find(|&i| piece.is_char_boundary(i))
                    .unwrap_or(0)
            };
            self.text[len..len + take].copy_from_slice(&piece.as_bytes()[..take]);
            len += take;
        }
        self.len = len;
        self.since = Some(since);
    }

    pub fn clear(&mut self) {
        self.len = 0;
        self.since = None;
    }

    /// The label and when the request began, if one runs.
    pub fn get(&self) -> Option<(String, Instant)> {
        let since = self.since?;
        Some((
            String::from_utf8_lossy(&self.text[..self.len]).into_owned(),
            since,
        ))
    }
}

/// What a worker is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerState {
    /// Started, not yet through its handshake.
    Booting,
    /// Waiting for a request.
    Idle,
    /// Running a request.
    Busy,
    /// Told to stop, or due for replacement; exits after its request.
    Stopping,
}

impl WorkerState {
    pub fn as_str(self) -> &'static str {
        match self {
            WorkerState::Booting => "booting",
            WorkerState::Idle => "idle",
            WorkerState::Busy => "busy",
            WorkerState::Stopping => "stopping",
        }
    }
}

/// One worker, as [`crate::Pool::workers`] saw it.
#[derive(Debug, Clone)]
pub struct WorkerInfo {
    /// The pool slot it fills.
    pub slot: usize,
    pub pid: u32,
    pub state: WorkerState,
    /// Requests it has completed.
    pub requests: u64,
    /// Resident memory in bytes, from `/proc/PID/statm`, if readable.
    pub memory: Option<u64>,
    /// Time since its process started.
    pub age: Duration,
    /// The request it is running (`METHOD target`, as the HTTP front
    /// labelled it) and for how long, if it runs one.
    pub request: Option<(String, Duration)>,
}

/// A process's resident memory in bytes, from `/proc/PID/statm`.
pub(crate) fn resident_memory(pid: u32) -> Option<u64> {
    let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * rustix::param::page_size() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_cut_on_a_character_boundary() {
        let mut c = Current::default();
        let now = Instant::now();
        c.set("GET", "/short?x=1", now);
        assert_eq!(c.get().map(|(l, _)| l).as_deref(), Some("GET /short?x=1"));
        let long = "é".repeat(200);
        c.set("POST", &long, now);
        let (label, _) = c.get().expect("set");
        assert!(label.len() <= LABEL_MAX && label.len() >= LABEL_MAX - 1);
        assert!(label.starts_with("POST é"));
        assert!(!label.contains('\u{fffd}'), "{label}");
        c.clear();
        assert!(c.get().is_none());
    }

    #[test]
    fn reasons_round_trip_through_their_numbers() {
        for r in RestartReason::ALL {
            assert_eq!(RestartReason::from_u8(r as u8), Some(r));
        }
        assert_eq!(RestartReason::from_u8(8), None);
    }
}
