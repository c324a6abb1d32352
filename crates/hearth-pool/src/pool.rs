//! The supervised pool: one supervisor task per worker slot, an idle stack
//! of booted workers, and leases that hand one worker to one request.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use hearth_proto::message::{ErrorReport, Ready};
use hearth_proto::{encode_frame, flags, Frame, Kind};
use tokio::process::Child;
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinHandle;

use crate::php::PhpInfo;
use crate::process::{self, Spawned};
use crate::worker::{Retire, Worker, WorkerShared};
use crate::{Error, PoolConfig};

/// A pool of warm PHP workers. Cheap to clone; all clones are the same pool.
#[derive(Debug, Clone)]
pub struct Pool {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    config: PoolConfig,
    php: PhpInfo,
    /// Booted, idle workers; the most recently used on top, so a busy
    /// server keeps reusing the workers whose caches are warm.
    idle: Mutex<Vec<Worker>>,
    /// One permit per worker on the idle stack.
    available: Semaphore,
    stopping: AtomicBool,
    stop: Notify,
    /// The worker of each slot, while one is running.
    slots: Vec<Mutex<Option<Arc<WorkerShared>>>>,
    /// Slots whose worker currently fails to boot.
    failing: AtomicUsize,
    last_boot_error: Mutex<Option<String>>,
    /// The most recent handshake: the PHP settings requests are shaped by.
    ready: Mutex<Option<Arc<Ready>>>,
    ready_notify: Notify,
    supervisors: Mutex<Vec<JoinHandle<()>>>,
    restarts: AtomicU64,
    started: AtomicU64,
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
}

impl Pool {
    /// Probes the PHP binary and starts the supervisors. Workers boot in the
    /// background; requests wait for them (see [`Pool::wait_ready`]).
    pub async fn start(config: PoolConfig) -> Result<Pool, Error> {
        let php = PhpInfo::probe(&config.php).await?;
        if !config.script.is_file() {
            return Err(Error::boot(format!(
                "worker script {} does not exist",
                config.script.display()
            )));
        }
        let workers = config.workers.max(1);
        let shared = Arc::new(Shared {
            php,
            idle: Mutex::new(Vec::with_capacity(workers)),
            available: Semaphore::new(0),
            stopping: AtomicBool::new(false),
            stop: Notify::new(),
            slots: (0..workers).map(|_| Mutex::new(None)).collect(),
            failing: AtomicUsize::new(0),
            last_boot_error: Mutex::new(None),
            ready: Mutex::new(None),
            ready_notify: Notify::new(),
            supervisors: Mutex::new(Vec::new()),
            restarts: AtomicU64::new(0),
            started: AtomicU64::new(0),
            config,
        });
        let handles = (0..workers)
            .map(|slot| tokio::spawn(supervise(shared.clone(), slot)))
            .collect();
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

    /// The handshake of the most recently booted worker, with the PHP
    /// settings (upload limits, temp dir) that requests are shaped by.
    pub fn settings(&self) -> Option<Arc<Ready>> {
        lock(&self.shared.ready).clone()
    }

    /// Waits until every slot has booted a worker or failed to, or until
    /// `timeout`. Returns whether every slot has a live worker.
    pub async fn wait_ready(&self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.shared.ready_notify.notified();
            let status = self.status();
            if status.live >= status.workers {
                return true;
            }
            if status.live + status.failing >= status.workers && status.failing > 0 {
                return false;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return false;
            }
        }
    }

    pub fn status(&self) -> PoolStatus {
        let s = &self.shared;
        let live = s
            .slots
            .iter()
            .filter(|slot| lock(slot).as_ref().is_some_and(|w| !w.is_dead()))
            .count();
        PoolStatus {
            workers: s.slots.len(),
            live,
            idle: lock(&s.idle).len(),
            failing: s.failing.load(Ordering::Relaxed),
            started: s.started.load(Ordering::Relaxed),
            restarts: s.restarts.load(Ordering::Relaxed),
        }
    }

    /// Hands a request to a worker: waits (bounded by the queue timeout)
    /// for an idle worker, lets `encode` write the request's frames for the
    /// request id it is given, and sends them.
    ///
    /// A worker that refuses the very first byte of the request (it died
    /// while idle) has not seen it, so another worker is tried and `encode`
    /// may run again. Once any byte is taken, a failure is final.
    pub async fn dispatch(&self, encode: impl Fn(&mut BytesMut, u32)) -> Result<Lease, Error> {
        let mut attempts = self.shared.slots.len() + 1;
        loop {
            let mut lease = self.acquire().await?;
            let worker = lease.worker.as_mut().expect("a new lease holds a worker");
            let id = worker.next_request_id();
            encode(&mut worker.wbuf, id);
            lease.request_id = id;
            lease.in_flight = true;
            match worker.flush().await {
                Ok(()) => return Ok(lease),
                Err((e, false)) if attempts > 1 => {
                    tracing::debug!(pid = worker.pid(), "worker gone before its request: {e}");
                    lease.in_flight = false;
                    lease.broken = true;
                    attempts -= 1;
                }
                Err((e, _)) => {
                    lease.broken = true;
                    return Err(e);
                }
            }
        }
    }

    async fn acquire(&self) -> Result<Lease, Error> {
        let s = &self.shared;
        loop {
            let permit = match s.available.try_acquire() {
                Ok(permit) => permit,
                Err(tokio::sync::TryAcquireError::Closed) => {
                    return Err(Error::unavailable("the server is shutting down"))
                }
                Err(tokio::sync::TryAcquireError::NoPermits) => {
                    if let Some(why) = self.hopeless() {
                        return Err(Error::unavailable(why));
                    }
                    match tokio::time::timeout(s.config.queue_timeout, s.available.acquire()).await
                    {
                        Ok(Ok(permit)) => permit,
                        Ok(Err(_)) => {
                            return Err(Error::unavailable("the server is shutting down"))
                        }
                        Err(_) => {
                            return Err(Error::unavailable(format!(
                                "every worker stayed busy for {:?}",
                                s.config.queue_timeout
                            )))
                        }
                    }
                }
            };
            permit.forget();
            let worker = lock(&s.idle).pop();
            match worker {
                Some(worker) if !worker.shared.is_dead() => {
                    // A worker idle for a while may have died meanwhile (the
                    // OOM killer, an operator) without being reaped yet: one
                    // poll() tells, and a busy server, whose workers are back
                    // at work within microseconds, never pays for it.
                    if worker.idle_since.elapsed() > IDLE_CHECK_AFTER && !worker.is_quiet() {
                        tracing::warn!(
                            pid = worker.pid(),
                            "idle worker hung up or sent unexpected bytes; replacing it"
                        );
                        worker.shared.retire(Retire::Now);
                        continue;
                    }
                    return Ok(Lease {
                        worker: Some(worker),
                        pool: s.clone(),
                        request_id: 0,
                        in_flight: false,
                        broken: false,
                    });
                }
                // Died while idle; its supervisor is already replacing it.
                Some(_) | None => continue,
            }
        }
    }

    /// Why waiting for a worker is pointless: every slot is failing to boot.
    fn hopeless(&self) -> Option<String> {
        let s = &self.shared;
        let failing = s.failing.load(Ordering::Acquire);
        if failing > 0 && failing >= s.slots.len() {
            let last = lock(&s.last_boot_error).clone().unwrap_or_default();
            return Some(format!("workers are failing to boot: {last}"));
        }
        None
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
        s.available.close();
        s.stop.notify_waiters();
        let idle: Vec<Worker> = std::mem::take(&mut *lock(&s.idle));
        for worker in idle {
            stop_worker(&worker);
        }
        for slot in &s.slots {
            if let Some(w) = lock(slot).as_ref() {
                w.retire(Retire::Graceful);
            }
        }
        let handles = std::mem::take(&mut *lock(&s.supervisors));
        for handle in handles {
            let _ = handle.await;
        }
    }
}

/// One worker, lent to one request until its response has ended.
///
/// Dropping a lease mid-response (the client went away) lets a background
/// task read the rest of the response before the worker goes back to the
/// pool, so the next request never sees this one's frames.
#[derive(Debug)]
pub struct Lease {
    worker: Option<Worker>,
    pool: Arc<Shared>,
    request_id: u32,
    in_flight: bool,
    broken: bool,
}

impl Lease {
    /// The pid of the worker handling the request.
    pub fn pid(&self) -> u32 {
        self.worker.as_ref().map_or(0, Worker::pid)
    }

    /// Requests this worker has completed before the current one.
    pub fn served(&self) -> u64 {
        self.worker.as_ref().map_or(0, |w| w.served)
    }

    /// The next frame of the response: `Head`, `Body` or `End`. Error
    /// reports are logged on the way and not returned.
    pub async fn next(&mut self) -> Result<Frame, Error> {
        loop {
            let worker = self.worker.as_mut().expect("lease holds a worker");
            let result = worker.read_frame().await;
            if let Some(frame) = self.accept(result)? {
                return Ok(frame);
            }
        }
    }

    /// The next frame if the worker has already sent it; no waiting.
    pub fn next_buffered(&mut self) -> Result<Option<Frame>, Error> {
        loop {
            let worker = self.worker.as_mut().expect("lease holds a worker");
            let result = match worker.buffered_frame() {
                Ok(Some(frame)) => Ok(frame),
                Ok(None) => return Ok(None),
                Err(e) => Err(e),
            };
            if let Some(frame) = self.accept(result)? {
                return Ok(Some(frame));
            }
        }
    }

    fn accept(&mut self, result: Result<Frame, Error>) -> Result<Option<Frame>, Error> {
        let frame = match result {
            Ok(frame) => frame,
            Err(e) => {
                self.broken = true;
                return Err(e);
            }
        };
        let pid = self.pid();
        if !self.in_flight || frame.request_id != self.request_id {
            self.broken = true;
            return Err(Error::from(hearth_proto::Error::unexpected(
                "frame outside the current request",
            )));
        }
        match frame.kind {
            Kind::Head | Kind::Body => Ok(Some(frame)),
            Kind::End => {
                self.in_flight = false;
                let worker = self.worker.as_mut().expect("lease holds a worker");
                worker.served += 1;
                if frame.has_flag(flags::CLOSE) {
                    worker.shared.retire(Retire::Graceful);
                }
                Ok(Some(frame))
            }
            Kind::Error => {
                log_report(pid, &frame);
                Ok(None)
            }
            _ => {
                self.broken = true;
                Err(Error::from(hearth_proto::Error::unexpected(
                    "frame kind a worker may not send",
                )))
            }
        }
    }

    /// Marks the worker as unusable: it is killed when the lease is dropped.
    pub fn poison(&mut self) {
        self.broken = true;
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let Some(mut worker) = self.worker.take() else {
            return;
        };
        if self.broken {
            worker.shared.retire(Retire::Now);
            return;
        }
        if worker.shared.retire_mode() != Retire::No {
            // Exiting by itself (CLOSE); its supervisor replaces it.
            return;
        }
        if self.in_flight {
            let pool = self.pool.clone();
            let id = self.request_id;
            tokio::spawn(async move {
                match drain(&mut worker, id).await {
                    Ok(()) => release(&pool, worker),
                    Err(e) => {
                        tracing::warn!(
                            pid = worker.pid(),
                            "abandoned response could not be drained: {e}"
                        );
                        worker.shared.retire(Retire::Now);
                    }
                }
            });
            return;
        }
        release(&self.pool, worker);
    }
}

/// Reads and discards the rest of an abandoned response.
async fn drain(worker: &mut Worker, id: u32) -> Result<(), Error> {
    loop {
        let frame = worker.read_frame().await?;
        if frame.request_id != id {
            return Err(
                hearth_proto::Error::unexpected("frame outside the current request").into(),
            );
        }
        if frame.kind == Kind::Error {
            log_report(worker.pid(), &frame);
        }
        if frame.kind == Kind::End {
            worker.served += 1;
            if frame.has_flag(flags::CLOSE) {
                worker.shared.retire(Retire::Graceful);
                return Err(Error::worker_lost("exiting"));
            }
            return Ok(());
        }
    }
}

/// Idle workers older than this are checked before being handed a request.
const IDLE_CHECK_AFTER: Duration = Duration::from_millis(1);

/// Puts a worker back on the idle stack, or stops it if the pool is stopping.
fn release(pool: &Arc<Shared>, mut worker: Worker) {
    if pool.stopping.load(Ordering::Acquire) {
        stop_worker(&worker);
        return;
    }
    if worker.shared.is_dead() {
        return;
    }
    worker.trim();
    worker.idle_since = Instant::now();
    lock(&pool.idle).push(worker);
    pool.available.add_permits(1);
}

fn stop_worker(worker: &Worker) {
    let mut frame = BytesMut::with_capacity(hearth_proto::HEADER_LEN);
    encode_frame(&mut frame, Kind::Stop, 0, 0, &[]);
    if worker.try_send(&frame) {
        worker.shared.retire(Retire::Graceful);
    } else {
        worker.shared.retire(Retire::Now);
    }
}

fn log_report(pid: u32, frame: &Frame) {
    match ErrorReport::decode(&frame.payload) {
        Ok(report) => {
            let trace = report.field("trace");
            tracing::error!(
                target: "hearth::worker",
                pid,
                kind = %report.field("kind"),
                method = %report.field("method"),
                uri = %report.field("uri"),
                "{} {}: {} in {}:{}{}{}",
                if report.field("kind") == "fatal" { "PHP fatal error" } else { "uncaught" },
                report.field("class"),
                report.field("message"),
                report.field("file"),
                report.field("line"),
                if trace.is_empty() { "" } else { "\nStack trace:\n" },
                trace,
            );
        }
        Err(e) => tracing::error!(target: "hearth::worker", pid, "unreadable error report: {e}"),
    }
}

/// Keeps one slot's worker running: boots it, hands it to the pool, waits
/// for it to exit, and boots the next, backing off while boots fail.
async fn supervise(shared: Arc<Shared>, slot: usize) {
    let mut failures: u32 = 0;
    let mut marked_failing = false;
    while !shared.stopping.load(Ordering::Acquire) {
        shared.started.fetch_add(1, Ordering::Relaxed);
        match boot(&shared).await {
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
                *lock(&shared.slots[slot]) = Some(ws.clone());
                *lock(&shared.ready) = Some(worker.ready.clone());
                let booted = Instant::now();
                release(&shared, worker);
                shared.ready_notify.notify_waiters();

                let status = watch(child, &ws, &shared.config).await;
                ws.mark_dead();
                *lock(&shared.slots[slot]) = None;
                shared.ready_notify.notify_waiters();
                let stopping = shared.stopping.load(Ordering::Acquire);
                match (&status, ws.retire_mode()) {
                    _ if stopping => tracing::debug!(pid, "worker stopped ({})", describe(&status)),
                    (_, Retire::Graceful) => tracing::info!(
                        pid,
                        "worker exited ({}); starting a new one",
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
                shared.restarts.fetch_add(1, Ordering::Relaxed);
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
                    shared.ready_notify.notify_waiters();
                }
                let delay = backoff(failures, shared.config.max_backoff);
                tracing::error!(
                    "worker failed to boot (attempt {failures}, next in {:.1}s): {e}",
                    delay.as_secs_f64()
                );
                *lock(&shared.last_boot_error) = Some(e.to_string());
                pause(&shared, delay).await;
            }
        }
    }
    if marked_failing {
        shared.failing.fetch_sub(1, Ordering::AcqRel);
    }
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
async fn boot(shared: &Shared) -> Result<(Worker, Child), Error> {
    let config = &shared.config;
    let Spawned {
        mut child,
        pid,
        channel,
        tail,
        forwarders,
    } = process::spawn(config, &shared.php)?;
    let mut worker = Worker::new(WorkerShared::new(pid), channel, config.max_payload);
    let failure = match tokio::time::timeout(config.boot_timeout, worker.read_frame()).await {
        Ok(Ok(frame)) if frame.kind == Kind::Ready => match Ready::decode(&frame.payload) {
            Ok(ready) if ready.protocol == u32::from(hearth_proto::VERSION) => {
                worker.ready = Arc::new(ready);
                worker.started = Instant::now();
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
        Ok(Err(e)) if e.is_worker_lost() => {
            let status = child.wait().await;
            for f in forwarders {
                let _ = tokio::time::timeout(Duration::from_secs(1), f).await;
            }
            let output = tail.text();
            return Err(Error::boot(format!(
                "{} exited ({}) before calling Hearth\\Worker::serve(){}{}",
                config.script.display(),
                describe(&status),
                if output.is_empty() { "" } else { ":\n" },
                output
            )));
        }
        Ok(Err(e)) => format!("handshake failed: {e}"),
        Err(_) => format!(
            "no ready handshake within {:?} (does the script call Hearth\\Worker::serve()?)",
            config.boot_timeout
        ),
    };
    let _ = child.start_kill();
    let _ = child.wait().await;
    Err(Error::boot(format!(
        "{}: {failure}",
        config.script.display()
    )))
}

/// Waits for a worker to exit, ending it when asked to.
async fn watch(
    mut child: Child,
    ws: &WorkerShared,
    config: &PoolConfig,
) -> std::io::Result<std::process::ExitStatus> {
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
            Retire::Graceful => {
                if let Ok(status) = tokio::time::timeout(config.stop_timeout, child.wait()).await {
                    return status;
                }
                tracing::warn!(
                    pid = ws.pid,
                    "worker did not exit within {:?}; sending SIGTERM",
                    config.stop_timeout
                );
                signal(ws.pid, rustix::process::Signal::TERM);
                if let Ok(status) = tokio::time::timeout(config.kill_timeout, child.wait()).await {
                    return status;
                }
                tracing::warn!(
                    pid = ws.pid,
                    "worker ignored SIGTERM for {:?}; sending SIGKILL",
                    config.kill_timeout
                );
                let _ = child.start_kill();
                return child.wait().await;
            }
        }
    }
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

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
