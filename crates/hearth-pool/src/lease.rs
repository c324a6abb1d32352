//! A worker lent to one request: reading its response, its deadline, and
//! what becomes of the worker when the lease ends.

use std::sync::Arc;
use std::time::Instant;

use hearth_proto::{flags, Frame, Kind};

use crate::recycle::{finish_abandoned, note_end, release};
use crate::shared::Shared;
use crate::worker::{log_report, Retire, Worker, WorkerShared};
use crate::Error;

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
    /// The request has been written whole.
    sent: bool,
    in_flight: bool,
    /// The response ended but the request goes on (`flags::DETACHED`).
    detached: bool,
    broken: bool,
    /// When the request's time is up (see [`Lease::set_deadline`]).
    deadline: Option<tokio::time::Instant>,
    /// The worker ran past the deadline: SIGTERM, then SIGKILL.
    overran: bool,
}

impl Lease {
    /// Lends `worker`, whose write buffer holds request `request_id`, to
    /// that request. Until [`Lease::send`] has written it whole, dropping
    /// the lease kills the worker: half a request would leave it waiting
    /// for the rest.
    pub(crate) fn new(pool: Arc<Shared>, worker: Worker, request_id: u32) -> Lease {
        Lease {
            worker: Some(worker),
            pool,
            request_id,
            sent: false,
            in_flight: true,
            detached: false,
            broken: false,
            deadline: None,
            overran: false,
        }
    }

    /// Lends `worker` to request `request_id`, which is already in its
    /// channel (it was queued behind the previous one).
    pub(crate) fn queued(pool: Arc<Shared>, worker: Worker, request_id: u32) -> Lease {
        let mut lease = Lease::new(pool, worker, request_id);
        lease.sent = true;
        lease
    }

    /// Writes the request in the worker's write buffer. The error says
    /// whether the worker may have read part of it (then it must not be
    /// sent elsewhere).
    pub(crate) async fn send(&mut self) -> Result<(), (Error, bool)> {
        let worker = self.worker.as_mut().expect("lease holds a worker");
        worker.flush().await?;
        self.sent = true;
        Ok(())
    }

    /// Gives the request a hard time limit: a frame that has not arrived
    /// by `at` fails with a timed-out error, and the worker is stopped
    /// (SIGTERM, then SIGKILL after the kill timeout) and replaced.
    pub fn set_deadline(&mut self, at: tokio::time::Instant) {
        self.deadline = Some(at);
    }

    /// Reads the next frame, within the deadline if there is one.
    async fn read(&mut self) -> Result<Frame, Error> {
        let worker = self.worker.as_mut().expect("lease holds a worker");
        let Some(at) = self.deadline else {
            return worker.read_frame().await;
        };
        match tokio::time::timeout_at(at, worker.read_frame()).await {
            Ok(result) => result,
            Err(_) => {
                self.overran = true;
                self.broken = true;
                Err(Error::timed_out(format!(
                    "worker {} did not finish the request in time; stopping it",
                    self.pid()
                )))
            }
        }
    }

    pub(crate) fn link(&self) -> Arc<WorkerShared> {
        self.worker
            .as_ref()
            .expect("lease holds a worker")
            .shared
            .clone()
    }

    /// Labels the worker with the request it runs (`method target`, cut to
    /// a fixed length; no allocation), for status reports, until the
    /// request ends; and names the request's route, for memory growth by
    /// route, unless the app names it (see [`crate::fold`]).
    pub fn set_current(&mut self, method: &str, target: &str) {
        if let Some(worker) = &mut self.worker {
            worker
                .shared
                .link()
                .current
                .set(method, target, Instant::now());
            crate::routes::fold(method, target, &mut worker.growth.route);
        }
    }

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
            if self.overran {
                return Err(Error::timed_out("the request already ran out of time"));
            }
            let result = self.read().await;
            if self.overran {
                return result;
            }
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
        if !self.in_flight || self.detached || frame.request_id != self.request_id {
            self.broken = true;
            return Err(Error::from(hearth_proto::Error::unexpected(
                "frame outside the current request",
            )));
        }
        match frame.kind {
            Kind::Head | Kind::Body => Ok(Some(frame)),
            Kind::End if frame.has_flag(flags::DETACHED) => {
                // The response is complete but the request goes on; the
                // worker stays with this lease (and, once the lease is
                // dropped, with the task that waits for the final End).
                self.detached = true;
                Ok(Some(frame))
            }
            Kind::End | Kind::Result => {
                self.in_flight = false;
                let worker = self.worker.as_mut().expect("lease holds a worker");
                worker.count_served();
                if frame.kind == Kind::End {
                    note_end(&self.pool, worker, &frame);
                }
                if frame.has_flag(flags::CLOSE) {
                    worker.shared.retire(Retire::Graceful);
                } else {
                    self.pool.health.served();
                }
                Ok(Some(frame))
            }
            Kind::Error => {
                let report = log_report(self.pid(), &frame);
                if let Some(worker) = &self.worker {
                    worker.shared.set_last_report(report);
                }
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

    /// Asks the worker's process to stop with `signal` (a request that ran
    /// past its time limit). Its supervisor replaces it once it exits.
    pub fn signal(&self, signal: rustix::process::Signal) {
        if let Some(pid) = i32::try_from(self.pid())
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        {
            if !self.link().is_dead() {
                let _ = rustix::process::kill_process(pid, signal);
            }
        }
    }

    /// Stops the worker because its request ran past a time limit that the
    /// caller keeps itself (rather than with [`Lease::set_deadline`]): its
    /// supervisor sends SIGTERM now and SIGKILL after the kill timeout,
    /// logs the stop as a timeout, not as a crash, and replaces it. What
    /// the worker sends before it exits can still be read.
    pub fn terminate(&self) {
        if let Some(worker) = &self.worker {
            worker.shared.retire(Retire::Terminate);
        }
    }

    /// How the worker's process ended, after [`Lease::next`] failed because
    /// the worker went away: waits up to `within` for it to be reaped.
    pub async fn exit_status(
        &self,
        within: std::time::Duration,
    ) -> Option<std::process::ExitStatus> {
        self.link().exit_status(within).await
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let Some(worker) = self.worker.take() else {
            return;
        };
        if self.overran {
            worker.shared.retire(Retire::Terminate);
            worker.shared.fail_queued();
            return;
        }
        if self.broken || !self.sent {
            worker.shared.retire(Retire::Now);
            worker.shared.fail_queued();
            return;
        }
        if matches!(
            worker.shared.retire_mode(),
            Retire::Graceful | Retire::Terminate | Retire::Now
        ) {
            // Exiting by itself (CLOSE); its supervisor replaces it, and
            // the request queued behind goes elsewhere.
            worker.shared.fail_queued();
            return;
        }
        if self.in_flight {
            tokio::spawn(finish_abandoned(self.pool.clone(), worker, self.request_id));
            return;
        }
        release(&self.pool, worker);
    }
}
