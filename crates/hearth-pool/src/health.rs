//! Crash loops on requests: workers that boot but die on the requests
//! they are given (a broken deploy whose request path exits or hits a
//! fatal error). A data structure with no I/O: the supervisors report
//! deaths, requests report successes, and dispatch asks whether a request
//! may go to a worker at all.
//!
//! After [`CRASH_LOOP_AFTER`] workers in a row died on a request, with no
//! request served in between, or once workers died on most of the last
//! [`WINDOW`] requests (a worker that serves one request and dies on the
//! next, over and over), the pool is failing: requests are answered
//! at once (503, with `Retry-After`) instead of being handed to workers
//! that would die on them, and supervisors wait before replacing a dead
//! worker, backing off as for boot failures. One request at a time, after
//! each backoff, is let through to try again; when one is served (the
//! deploy was fixed, a reload ran), the pool serves again, with its record
//! of recent requests cleared.
//!
//! Meanwhile the pool tells a load balancer to send it nothing
//! ([`RequestHealth::unready`]): from the crash loop's start until a
//! request is served, a reload asks to try the new code, or no worker has
//! died on a request for [`READY_AGAIN_AFTER`] (no request came to try:
//! the load balancer took the instance out, and is let back in to try).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

/// Workers in a row that must die on a request, with none served in
/// between, before the pool calls it a crash loop: one death is an
/// accident, and the request that caused it already got its answer.
pub(crate) const CRASH_LOOP_AFTER: u32 = 3;

/// The recent requests whose outcomes (served, or the worker died) are
/// kept while some worker died on one: when most of them died, the pool
/// is in a crash loop even without [`CRASH_LOOP_AFTER`] in a row.
pub(crate) const WINDOW: u32 = 20;

/// Outcomes needed before their share counts: a pool that just started
/// is not judged on its first few requests.
const WINDOW_MIN: u32 = 10;

/// How long after the last worker died on a request a pool in a crash
/// loop tells load balancers it is ready again, so that one sends the
/// request that tries. Long beside load balancers' checks (a few seconds
/// apart, a few failed in a row), so that an instance that stays broken
/// stays out of rotation most of the time; short enough that one whose
/// cause went away (a database back) is back within a minute without a
/// reload.
pub const READY_AGAIN_AFTER: Duration = Duration::from_secs(30);

/// The wait before the `failures`th attempt in a row: 100 ms, doubled at
/// each failure, at most `max`.
pub(crate) fn backoff(failures: u32, max: Duration) -> Duration {
    let ms = 100u64.saturating_mul(1 << failures.saturating_sub(1).min(16));
    Duration::from_millis(ms).min(max)
}

/// What made the pool fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureCause {
    /// Workers fail to boot.
    Boot,
    /// Workers boot but die on the requests they are given.
    Requests,
}

impl FailureCause {
    /// The name used in `hearth status` and metrics labels.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureCause::Boot => "boot",
            FailureCause::Requests => "requests",
        }
    }
}

/// A pool failing to run its workers, as [`crate::PoolStatus`] tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failing {
    pub cause: FailureCause,
    /// Since when.
    pub since: SystemTime,
    /// Failed attempts in a row (boots, or workers dead on a request).
    pub attempts: u32,
    /// Why the last attempt failed.
    pub last_error: String,
    /// Time until the next attempt (a boot, or a request let through);
    /// zero when it is due.
    pub next_attempt: Duration,
}

/// The pool's record of workers dying on requests.
#[derive(Debug, Default)]
pub(crate) struct RequestHealth {
    /// Some worker died on one of the recent requests: the request path
    /// takes the lock only then.
    troubled: AtomicBool,
    /// In a crash loop: requests are refused but for one per backoff.
    failing: AtomicBool,
    state: Mutex<LoopState>,
    /// Workers that died on a request, ever.
    crashes: AtomicU64,
}

#[derive(Debug, Default)]
struct LoopState {
    /// Workers dead on a request in a row, none served in between.
    streak: u32,
    since: Option<SystemTime>,
    last_error: String,
    /// When the next request is let through to a worker.
    next_attempt: Option<Instant>,
    /// Workers dead on a request since the loop began.
    loop_crashes: u32,
    /// The recent outcomes, newest in bit 0: 1 when the worker died.
    outcomes: u32,
    /// How many of [`WINDOW`] outcomes `outcomes` holds.
    seen: u32,
    /// When the last worker died on a request; none after a reload, whose
    /// new code has not failed yet.
    last_crash: Option<Instant>,
}

impl LoopState {
    fn record(&mut self, died: bool) {
        let mask = (1u32 << WINDOW) - 1;
        self.outcomes = ((self.outcomes << 1) | u32::from(died)) & mask;
        self.seen = (self.seen + 1).min(WINDOW);
    }

    fn deaths(&self) -> u32 {
        self.outcomes.count_ones()
    }

    /// Workers died on most of the recent requests.
    fn mostly_dying(&self) -> bool {
        self.seen >= WINDOW_MIN && self.deaths() * 2 > self.seen
    }

    /// Why the pool is failing, for the log and the 503's reason.
    fn why(&self) -> String {
        if self.streak >= CRASH_LOOP_AFTER {
            format!("{} in a row", self.streak)
        } else {
            format!("{} of the last {} requests", self.deaths(), self.seen)
        }
    }
}

impl RequestHealth {
    fn state(&self) -> std::sync::MutexGuard<'_, LoopState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A worker died on a request, for `why`. Returns how long its
    /// supervisor should wait before booting the next one: none until
    /// the pool is in a crash loop, and never unless `loops` (the pool's
    /// `crash_loops`).
    pub fn crashed(&self, why: String, max_backoff: Duration, loops: bool) -> Option<Duration> {
        self.crashes.fetch_add(1, Ordering::Relaxed);
        let mut s = self.state();
        s.streak = s.streak.saturating_add(1);
        s.record(true);
        s.last_error = why;
        s.last_crash = Some(Instant::now());
        self.troubled.store(true, Ordering::Release);
        let failing = self.failing.load(Ordering::Acquire);
        if !loops || !(failing || s.streak >= CRASH_LOOP_AFTER || s.mostly_dying()) {
            return None;
        }
        s.loop_crashes = s.loop_crashes.saturating_add(1);
        let delay = backoff(s.loop_crashes, max_backoff);
        if !self.failing.swap(true, Ordering::AcqRel) {
            s.since = Some(SystemTime::now());
            tracing::error!(
                "workers are dying on requests ({}, the last: {}); answering 503 and \
                 trying one request again in {:.1}s",
                s.why(),
                s.last_error,
                delay.as_secs_f64()
            );
        } else {
            tracing::warn!(
                "a worker died on a request again (attempt {}): {}; next try in {:.1}s",
                s.loop_crashes,
                s.last_error,
                delay.as_secs_f64()
            );
        }
        s.next_attempt = Some(Instant::now() + delay);
        Some(delay)
    }

    /// A request was served and its worker lived: the crash loop, if any,
    /// is over. One atomic load when all is well (no worker died on any
    /// of the recent requests).
    pub fn served(&self) {
        if !self.troubled.load(Ordering::Acquire) {
            return;
        }
        let mut s = self.state();
        if self.failing.swap(false, Ordering::AcqRel) {
            tracing::info!(
                "a worker served a request again after {} worker(s) died on one; serving again",
                s.loop_crashes
            );
            *s = LoopState::default();
        } else {
            s.streak = 0;
            s.record(false);
        }
        if s.deaths() == 0 {
            *s = LoopState::default();
            self.troubled.store(false, Ordering::Release);
        }
    }

    /// Whether a request may go to a worker: always, but in a crash loop,
    /// where only one request per backoff is let through; the others are
    /// told why not.
    pub fn admit(&self) -> Result<(), String> {
        if !self.failing.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut s = self.state();
        let now = Instant::now();
        match s.next_attempt {
            Some(at) if at > now => Err(format!(
                "workers are dying on requests ({}): {}",
                s.why(),
                s.last_error
            )),
            _ => {
                // This request tries again. If it is never answered (its
                // client leaves), the next one tries after another wait.
                s.next_attempt = Some(now + Duration::from_secs(1));
                Ok(())
            }
        }
    }

    /// The next request tries again at once (the code was reloaded), and
    /// the outcomes of the old code's requests no longer count.
    pub fn retry_now(&self) {
        if !self.troubled.load(Ordering::Acquire) {
            return;
        }
        let mut s = self.state();
        s.next_attempt = None;
        s.last_crash = None;
        (s.outcomes, s.seen) = (0, 0);
    }

    /// Why a load balancer should send the pool no request at `now`, if
    /// it should not: in a crash loop, until a reload or until
    /// [`READY_AGAIN_AFTER`] has passed since the last worker died on a
    /// request.
    pub fn unready(&self, now: Instant) -> Option<String> {
        if !self.failing.load(Ordering::Acquire) {
            return None;
        }
        let s = self.state();
        let recent = s
            .last_crash
            .is_some_and(|at| now.saturating_duration_since(at) < READY_AGAIN_AFTER);
        recent.then(|| {
            format!(
                "workers are dying on requests ({}): {}",
                s.why(),
                s.last_error
            )
        })
    }

    /// The crash loop, if the pool is in one.
    pub fn failing(&self) -> Option<Failing> {
        if !self.failing.load(Ordering::Acquire) {
            return None;
        }
        let s = self.state();
        Some(Failing {
            cause: FailureCause::Requests,
            since: s.since.unwrap_or_else(SystemTime::now),
            attempts: s.streak,
            last_error: s.last_error.clone(),
            next_attempt: s.next_attempt.map_or(Duration::ZERO, |at| {
                at.saturating_duration_since(Instant::now())
            }),
        })
    }

    /// Workers that died on a request since the pool started.
    pub fn crashes(&self) -> u64 {
        self.crashes.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: Duration = Duration::from_secs(5);

    #[test]
    fn a_crash_loop_takes_deaths_in_a_row_and_ends_with_one_request_served() {
        let h = RequestHealth::default();
        assert!(h.crashed("exit status 1".into(), MAX, true).is_none());
        h.served();
        assert!(h.crashed("exit status 1".into(), MAX, true).is_none());
        assert!(h.crashed("exit status 1".into(), MAX, true).is_none());
        assert!(h.admit().is_ok(), "two in a row is not a loop yet");
        let pause = h.crashed("exit status 255".into(), MAX, true);
        assert_eq!(pause, Some(Duration::from_millis(100)));
        let failing = h.failing().expect("failing");
        assert_eq!(failing.cause, FailureCause::Requests);
        assert_eq!(failing.attempts, 3);
        assert_eq!(failing.last_error, "exit status 255");
        assert!(h.admit().is_err(), "refused until the next attempt");
        assert_eq!(
            h.crashed("again".into(), MAX, true),
            Some(Duration::from_millis(200))
        );
        h.retry_now();
        assert!(h.admit().is_ok(), "after a reload, one request tries");
        assert!(h.admit().is_err(), "one at a time");
        h.served();
        assert!(h.failing().is_none());
        assert!(h.admit().is_ok());
        assert_eq!(h.crashes(), 5);
    }

    #[test]
    fn workers_dying_on_most_requests_are_a_crash_loop_too() {
        let h = RequestHealth::default();
        // Workers dying on 3 requests in 5, never 3 in a row.
        let pattern = [false, true, false, true, true].repeat(4);
        let mut pause = None;
        for (at, died) in pattern.into_iter().enumerate() {
            if !died {
                h.served();
                continue;
            }
            pause = h.crashed("exit status 255".into(), MAX, true);
            if pause.is_some() {
                // The share counts once 10 requests are known.
                assert!(at >= WINDOW_MIN as usize - 1, "a loop after {at} requests");
                break;
            }
        }
        assert_eq!(pause, Some(Duration::from_millis(100)));
        let failing = h.failing().expect("failing");
        assert!(
            h.admit().unwrap_err().contains("of the last"),
            "{failing:?}"
        );
        // One served: over, and the record starts again.
        h.retry_now();
        assert!(h.admit().is_ok());
        h.served();
        assert!(h.failing().is_none());
        assert!(h.crashed("exit status 1".into(), MAX, true).is_none());
    }

    #[test]
    fn a_worker_dying_on_one_request_in_three_is_no_crash_loop() {
        let h = RequestHealth::default();
        for _ in 0..30 {
            h.served();
            h.served();
            assert!(h.crashed("exit status 1".into(), MAX, true).is_none());
        }
        assert!(h.failing().is_none());
        // Twenty served in a row clear the record: back to one load.
        for _ in 0..WINDOW {
            h.served();
        }
        assert!(!h.troubled.load(Ordering::Acquire));
    }

    #[test]
    fn a_crash_loop_is_unready_until_a_reload_a_request_served_or_a_quiet_while() {
        let h = RequestHealth::default();
        let now = Instant::now();
        assert!(h.unready(now).is_none());
        for _ in 0..CRASH_LOOP_AFTER - 1 {
            h.crashed("exit status 1".into(), MAX, true);
        }
        assert!(h.unready(now).is_none(), "not a loop yet");
        h.crashed("exit status 1".into(), MAX, true);
        let why = h.unready(Instant::now()).expect("unready in the loop");
        assert_eq!(
            why,
            "workers are dying on requests (3 in a row): exit status 1"
        );
        // The backoff ends long before: still unready, while no request
        // came to try.
        let later = Instant::now() + Duration::from_secs(10);
        assert!(h.unready(later).is_some());
        // No worker died for READY_AGAIN_AFTER: ready again, to try.
        let quiet = Instant::now() + READY_AGAIN_AFTER + Duration::from_secs(1);
        assert!(h.unready(quiet).is_none());
        assert!(h.failing().is_some(), "still failing until one is served");
        // The one that tries dies too: unready again.
        h.crashed("exit status 1".into(), MAX, true);
        assert!(h.unready(Instant::now()).is_some());
        // A reload: ready to try the new code, until it fails too.
        h.retry_now();
        assert!(h.unready(Instant::now()).is_none());
        h.crashed("exit status 2".into(), MAX, true);
        assert!(h
            .unready(Instant::now())
            .is_some_and(|w| w.contains("exit status 2")));
        h.served();
        assert!(h.unready(Instant::now()).is_none());
    }

    #[test]
    fn without_crash_loops_deaths_are_counted_and_nothing_is_refused() {
        let h = RequestHealth::default();
        for _ in 0..10 {
            assert!(h.crashed("exit status 1".into(), MAX, false).is_none());
        }
        assert!(h.failing().is_none());
        assert!(h.admit().is_ok());
        assert_eq!(h.crashes(), 10);
    }

    #[test]
    fn backoff_doubles_up_to_the_most() {
        assert_eq!(backoff(1, MAX), Duration::from_millis(100));
        assert_eq!(backoff(3, MAX), Duration::from_millis(400));
        assert_eq!(backoff(40, MAX), MAX);
    }
}
