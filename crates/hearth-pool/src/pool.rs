//! The pool's public face: starting it, asking how it does, reloading
//! and stopping it.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use hearth_proto::message::Ready;
use tracing::Instrument as _;

use crate::dispatch;
use crate::fresh::{self, Fresh};
use crate::health::{Failing, FailureCause};
use crate::lease::Lease;
use crate::observe::{resident_memory, RestartReason, StartReason, WorkerInfo, WorkerState};
use crate::php::PhpInfo;
use crate::reload;
use crate::shared::{lock, Shared};
use crate::supervisor::supervise;
use crate::sweep::sweep_idle;
use crate::worker::Retire;
use crate::{Error, Paths, PoolConfig};

/// A pool of warm PHP workers. Cheap to clone; all clones are the same pool.
#[derive(Debug, Clone)]
pub struct Pool {
    shared: Arc<Shared>,
}

/// A snapshot of the pool for status pages and logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolStatus {
    /// Slots configured.
    pub workers: usize,
    /// Workers booted and not yet exited.
    pub live: usize,
    /// Workers waiting for a request.
    pub idle: usize,
    /// Slots whose worker is failing to boot.
    pub failing: usize,
    /// Workers started since the pool started, first boots included.
    pub started: u64,
    /// Workers that exited and were replaced.
    pub restarts: u64,
    /// Those restarts by reason, every reason listed.
    pub restarts_by_reason: [(RestartReason, u64); 8],
    /// Workers running a request.
    pub busy: usize,
    /// Requests waiting in line for a worker.
    pub waiting: usize,
    /// Workers booting now, and at most at once (`max_booting`).
    pub booting: usize,
    pub max_booting: usize,
    /// Workers started, by why (first boots and replacements included;
    /// a boot that failed counts too).
    pub started_by_reason: [(StartReason, u64); 3],
    /// Extra workers stopped for being idle past `scale_down_after`.
    pub scaled_down: u64,
    /// Times an extra worker was wanted but not started, for
    /// `max_pool_memory`.
    pub refused_memory: u64,
    /// Workers that died on a request.
    pub request_crashes: u64,
    /// The pool failing to run workers: boots failing, or workers dying
    /// on requests (which takes precedence: requests are refused).
    pub failing_state: Option<Failing>,
}

impl Pool {
    /// Probes the PHP binary and starts the supervisors. Workers boot in the
    /// background; requests wait for them (see [`Pool::wait_ready`]).
    pub async fn start(config: PoolConfig) -> Result<Pool, Error> {
        let php = PhpInfo::probe(&config).await?;
        let paths = Arc::new(Paths::resolve(&config)?);
        let workers = config.workers.max(1);
        // Its tasks' log lines name the pool, when it has a name.
        let span = match &config.name {
            Some(name) => tracing::info_span!("pool", pool = %name),
            None => tracing::Span::none(),
        };
        let shared = Arc::new(Shared::new(config, php, paths));
        if shared.config.debug {
            // No warm workers: each request boots its own.
            *lock(&shared.supervisors) = vec![tokio::spawn(fresh::trial(shared.clone()))];
            return Ok(Pool { shared });
        }
        let mut handles: Vec<_> = (0..workers)
            .map(|slot| tokio::spawn(supervise(shared.clone(), slot).instrument(span.clone())))
            .collect();
        if shared.config.idle_ttl.is_some()
            || shared.config.ttl.is_some()
            || shared.config.min_workers < workers
        {
            handles.push(tokio::spawn(sweep_idle(shared.clone()).instrument(span)));
        }
        *lock(&shared.supervisors) = handles;
        Ok(Pool { shared })
    }

    /// What the probe found out about the PHP binary.
    pub fn php(&self) -> &PhpInfo {
        &self.shared.php
    }

    pub fn config(&self) -> &PoolConfig {
        &self.shared.config
    }

    /// Where workers booted now run the app from: the real paths of the
    /// script, working directory and document root, as resolved at start
    /// or by the last successful reload. A worker keeps the paths it was
    /// booted from; a request sees its worker's.
    pub fn paths(&self) -> Arc<Paths> {
        self.shared.paths()
    }

    /// The handshake of the most recently booted worker, with the PHP
    /// settings (upload limits, temp dir) that requests are shaped by.
    pub fn settings(&self) -> Option<Arc<Ready>> {
        lock(&self.shared.ready).clone()
    }

    /// The settings of [`Pool::settings`], waiting for the first worker's
    /// handshake when none has come yet (a request that arrives while the
    /// pool boots), until `timeout` or until the pool stops.
    pub async fn settings_within(&self, timeout: Duration) -> Option<Arc<Ready>> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let changed = self.shared.ready_notify.notified();
            let stop = self.shared.stop.notified();
            if let Some(ready) = self.settings() {
                return Some(ready);
            }
            if self.shared.stopping.load(Ordering::Acquire) {
                return None;
            }
            tokio::select! {
                () = changed => {}
                () = stop => {}
                () = tokio::time::sleep_until(deadline) => return self.settings(),
            }
        }
    }

    /// Waits until every slot has booted a worker or failed to, or until
    /// `timeout`. Returns whether every slot has a live worker.
    pub async fn wait_ready(&self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.shared.ready_notify.notified();
            let status = self.status();
            let wanted = status.workers.min(self.shared.config.min_workers.max(1));
            if status.live >= wanted {
                return true;
            }
            if status.live + status.failing >= wanted && status.failing > 0 {
                return false;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return false;
            }
        }
    }

    /// Waits until the pool's first worker has booted. Fails when, before
    /// any has, every slot that boots at start has failed `attempts` boots
    /// in a row: a script that cannot boot, for which waiting longer would
    /// only mean answering 503s. Returns at once when the pool stops.
    ///
    /// Each boot attempt is bounded by the boot timeout, so this ends.
    pub async fn wait_started(&self, attempts: u32) -> Result<(), Error> {
        let s = &self.shared;
        let starting = s.config.min_workers.clamp(1, s.slots.len());
        loop {
            let changed = s.ready_notify.notified();
            let stop = s.stop.notified();
            if s.booted.load(Ordering::Acquire) || s.stopping.load(Ordering::Acquire) {
                return Ok(());
            }
            let failed = &s.boot_failures[..starting];
            if failed.iter().all(|f| f.load(Ordering::Acquire) >= attempts) {
                return Err(Error::boot(format!(
                    "no worker could boot ({attempts} attempts in a row): {}",
                    self.boot_error().unwrap_or_default()
                )));
            }
            tokio::select! {
                () = changed => {}
                () = stop => {}
            }
        }
    }

    /// Completes at the next change in the pool's workers: one booted,
    /// exited or failed to boot. Made before reading [`Pool::status`], it
    /// misses no change after that.
    pub fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.shared.ready_notify.notified()
    }

    /// Why the last worker that failed to boot failed.
    pub fn boot_error(&self) -> Option<String> {
        lock(&self.shared.last_boot_error).clone()
    }

    pub fn status(&self) -> PoolStatus {
        let s = &self.shared;
        let (mut live, mut busy) = (0, 0);
        for slot in &s.slots {
            if let Some(w) = lock(slot).as_ref().filter(|w| !w.is_dead()) {
                live += 1;
                busy += usize::from(w.link().busy);
            }
        }
        PoolStatus {
            workers: s.slots.len(),
            live,
            idle: s.line.lock().idle_len(),
            failing: s.failing.load(Ordering::Relaxed),
            started: s.started.load(Ordering::Relaxed),
            restarts: s.restarts.load(Ordering::Relaxed),
            restarts_by_reason: s.restart_reasons.snapshot(),
            busy,
            waiting: s.line.waiting() + s.fresh_waiting.load(Ordering::Relaxed),
            booting: s.booting(),
            max_booting: s.config.max_booting.max(1),
            started_by_reason: s.decisions.started_snapshot(),
            scaled_down: s.decisions.scaled_down_count(),
            refused_memory: s.decisions.refused_memory_count(),
            request_crashes: s.health.crashes(),
            failing_state: s.health.failing().or_else(|| self.boot_failing()),
        }
    }

    /// Why a load balancer should send the pool no requests now, if it
    /// should not: it is stopping, every worker fails to boot (requests get
    /// a 503), or workers die on requests (a crash loop: see
    /// [`crate::READY_AGAIN_AFTER`] for when it asks for requests again).
    /// A pool with some workers failing to boot and others serving is
    /// ready: its requests are served.
    pub fn not_ready(&self) -> Option<String> {
        let s = &self.shared;
        if s.stopping.load(Ordering::Acquire) {
            return Some("shutting down".to_owned());
        }
        s.health
            .unready(std::time::Instant::now())
            .or_else(|| s.hopeless())
    }

    /// Slots failing to boot, as a [`Failing`].
    fn boot_failing(&self) -> Option<Failing> {
        let s = &self.shared;
        if s.failing.load(Ordering::Acquire) == 0 {
            return None;
        }
        let (since, next) = *lock(&s.boot_failing);
        Some(Failing {
            cause: FailureCause::Boot,
            since: since.unwrap_or_else(std::time::SystemTime::now),
            attempts: s
                .boot_failures
                .iter()
                .map(|f| f.load(Ordering::Acquire))
                .max()
                .unwrap_or(0),
            last_error: self.boot_error().unwrap_or_default(),
            next_attempt: next.map_or(Duration::ZERO, |at| {
                at.saturating_duration_since(std::time::Instant::now())
            }),
        })
    }

    /// The live workers' resident memory in bytes, summed (what
    /// `max_pool_memory` is checked against). Reads `/proc`: for status
    /// reports, not for the request path.
    pub fn memory(&self) -> u64 {
        self.shared.workers_memory().0
    }

    /// The `n` routes whose requests grew workers most, most first, and
    /// how many routes are counted on their own (at most
    /// [`crate::ROUTE_LIMIT`]; the rest are [`crate::OTHER_ROUTE`]).
    pub fn routes(&self, n: usize) -> (Vec<crate::RouteGrowth>, usize) {
        let routes = lock(&self.shared.routes);
        (routes.top(n), routes.len())
    }

    /// The last [`crate::PAST_WORKERS`] workers replaced, newest first,
    /// with why.
    pub fn past_workers(&self) -> Vec<crate::PastWorker> {
        self.shared.restart_reasons.past()
    }

    /// A snapshot of every worker, booting ones included, in slot order.
    /// Reads each one's memory from `/proc`: for status reports, not for
    /// the request path.
    pub fn workers(&self) -> Vec<WorkerInfo> {
        let s = &self.shared;
        let stopping = s.stopping.load(Ordering::Acquire);
        let mut out = Vec::new();
        for (slot, (worker, booting)) in s.slots.iter().zip(&s.booting).enumerate() {
            let worker = lock(worker).clone().filter(|w| !w.is_dead());
            let Some(w) = worker else {
                if let Some((pid, since)) = *lock(booting) {
                    out.push(WorkerInfo {
                        slot,
                        pid,
                        state: WorkerState::Booting,
                        requests: 0,
                        memory: resident_memory(pid),
                        age: since.elapsed(),
                        request: None,
                    });
                }
                continue;
            };
            let (busy, current) = {
                let l = w.link();
                (l.busy, l.current.get())
            };
            let state = if stopping || w.recycle_due() || w.retire_mode() != Retire::No {
                WorkerState::Stopping
            } else if busy {
                WorkerState::Busy
            } else {
                WorkerState::Idle
            };
            out.push(WorkerInfo {
                slot,
                pid: w.pid,
                state,
                requests: w.served.load(Ordering::Relaxed),
                memory: resident_memory(w.pid),
                age: w.created.elapsed(),
                request: current.map(|(label, since)| (label, since.elapsed())),
            });
        }
        out
    }

    /// Whether the pool has begun to stop.
    pub fn is_stopping(&self) -> bool {
        self.shared.stopping.load(Ordering::Acquire)
    }

    /// Hands a request to a worker: waits (bounded by the queue timeout)
    /// for one, lets `encode` write the request's frames for the request id
    /// it is given, and sends them. `len` is about how many bytes `encode`
    /// writes (small requests may be queued behind another, see
    /// [`PoolConfig::pipelining`]).
    ///
    /// A worker that takes none of the request (it died while idle), or
    /// fails before a request queued on it could start, has not seen the
    /// request, so another worker is tried and `encode` runs again. Once a
    /// worker may have started the request, a failure is final.
    ///
    /// In debug mode ([`PoolConfig::debug`]) this is
    /// [`Pool::dispatch_fresh`] with no trigger.
    pub async fn dispatch(
        &self,
        len: usize,
        encode: impl Fn(&mut BytesMut, u32, &Arc<Paths>),
    ) -> Result<Lease, Error> {
        if self.shared.config.debug {
            return fresh::dispatch(&self.shared, &Fresh::default(), encode).await;
        }
        dispatch::dispatch(&self.shared, len, encode).await
    }

    /// Debug mode: boots a worker for this request alone, with
    /// `fresh.env` in its environment, waiting (within the queue timeout)
    /// while every slot has a worker; writes the request to it once it is
    /// ready, and stops it after the request. Outside debug mode, the
    /// same as [`Pool::dispatch`] (the environment is not used).
    pub async fn dispatch_fresh(
        &self,
        fresh: &Fresh,
        len: usize,
        encode: impl Fn(&mut BytesMut, u32, &Arc<Paths>),
    ) -> Result<Lease, Error> {
        if !self.shared.config.debug {
            return dispatch::dispatch(&self.shared, len, encode).await;
        }
        fresh::dispatch(&self.shared, fresh, encode).await
    }

    /// Replaces every worker with one running the code as it is now,
    /// without dropping a request, and returns the paths they run from.
    ///
    /// The script, working directory and document root are resolved again
    /// first: after a deploy that switched a symlink, the new workers run
    /// the release it now points to. A trial worker boots from those
    /// paths: if it fails (the new code is broken), the running workers
    /// are left alone and keep serving, the pool's paths stay as they
    /// were, and the error is returned. Then the workers are replaced one
    /// slot at a time: the slot's supervisor boots the replacement (from
    /// the new paths) while the old worker serves on, hands the slot over,
    /// and retires the old worker after its current request; the pool is
    /// never a worker short. A reload asked for while one runs waits for
    /// it.
    pub async fn reload(&self) -> Result<Arc<Paths>, Error> {
        let _one_at_a_time = self.shared.reloading.lock().await;
        let result = reload::reload(&self.shared).await;
        self.shared.reloads.fetch_add(1, Ordering::AcqRel);
        self.shared.reloaded.notify_waiters();
        result
    }

    /// How many reloads have finished (succeeded or failed), and a future
    /// that completes when the next one does: for whoever follows what
    /// the paths lead to (a file watcher). The future is registered when
    /// this returns, so a reload that finishes after the count was read is
    /// not missed.
    pub fn reloads(&self) -> (u64, tokio::sync::futures::Notified<'_>) {
        let next = self.shared.reloaded.notified();
        (self.shared.reloads.load(Ordering::Acquire), next)
    }

    /// Kills every worker (and whatever it started) at once, for a server
    /// that must exit now. Workers are in process groups of their own.
    pub fn kill_all(&self) {
        for slot in &self.shared.slots {
            if let Some(w) = lock(slot).as_ref() {
                if let Some(pid) = i32::try_from(w.pid)
                    .ok()
                    .and_then(rustix::process::Pid::from_raw)
                {
                    let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
                }
            }
        }
    }

    /// Stops the pool: no new requests, idle workers get the stop message,
    /// busy ones get it when their request ends; each then has the stop
    /// timeout to exit before SIGTERM, and the kill timeout before SIGKILL.
    pub async fn shutdown(&self) {
        let s = &self.shared;
        if s.stopping.swap(true, Ordering::AcqRel) {
            return;
        }
        s.stop.notify_waiters();
        let idle = s.line.lock().close();
        for worker in idle {
            worker.stop();
        }
        // Busy workers get the stop message when their request ends; each
        // worker's supervisor gives it the stop timeout to be done.
        for slot in &s.slots {
            if let Some(w) = lock(slot).as_ref() {
                w.retire(Retire::Stopping);
            }
        }
        let handles = std::mem::take(&mut *lock(&s.supervisors));
        for handle in handles {
            let _ = handle.await;
        }
        if s.config.debug {
            // Each request's worker holds a permit until it has exited,
            // which its retirement above bounds.
            let all = u32::try_from(s.slots.len()).unwrap_or(u32::MAX);
            let _ = s.fresh.acquire_many(all).await;
        }
    }
}
