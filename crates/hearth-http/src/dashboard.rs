//! The live dashboard's data, kept by the server itself so that a page
//! opened at any moment draws the last ten minutes at once: one sample a
//! second (requests, latency percentiles, status classes, the wait for a
//! worker, the workers busy), and the slowest recent requests.
//!
//! Recording costs a request two atomic increments and one atomic load
//! (a third increment when it waited for a worker); the lock of the slow
//! list is taken only by a request slower than the twentieth slowest of
//! the last ten minutes. The sampler swaps the counters once a second.
//!
//! What is kept of a request is its method, its path without the query
//! string, its status, its duration and its worker's pid: never a body, a
//! header, a cookie or a query string.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::StatusCode;
use serde_json::{json, Value};

/// Samples kept: ten minutes of one a second.
pub const HISTORY: usize = 600;
/// Slow requests kept.
pub const SLOW: usize = 20;
/// How long a slow request is kept.
pub const SLOW_FOR: Duration = Duration::from_secs(600);
/// The longest path kept of a slow request, in bytes.
const PATH_MAX: usize = 200;

/// Buckets of the latency histograms: four a power of two, from a
/// microsecond to 2^41 µs, so a percentile is within 12% of the truth.
const BUCKETS: usize = 42 * 4;

/// A boxed future, for [`Dashboard`]'s methods.
pub type Boxed<'a, T> = Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// What the command behind the admin listener (`hearth serve`, `hearth
/// work`) shows on the dashboard and does when an operator asks.
pub trait Dashboard: Send + Sync + std::fmt::Debug + 'static {
    /// `serve` or `work`.
    fn command(&self) -> &'static str;
    /// The status report, as `hearth status --json` prints it.
    fn status(&self) -> Boxed<'_, Value>;
    /// The job queues with their counts and dead jobs; none by default.
    fn queues(&self) -> Boxed<'_, Vec<Value>> {
        Box::pin(async { Vec::new() })
    }
    /// Jobs counts for this second's sample (cheap: no I/O), if any.
    fn jobs_sample(&self) -> Option<Value> {
        None
    }
    /// Does what an operator asked for; the message, or why not.
    fn act(&self, action: Action) -> Boxed<'_, Result<String, Refusal>>;
}

/// An operator's action from the dashboard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Replace every worker (`hearth reload`).
    Reload,
    /// Put dead job `id` of queue `queue` back.
    Retry { queue: usize, id: u64 },
    /// Remove dead job `id` of queue `queue`.
    Delete { queue: usize, id: u64 },
    /// Remove every job of one part (`ready`, `delayed`, `dead`) of a queue.
    Purge { queue: usize, part: &'static str },
}

/// An action refused or failed: the HTTP status and the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: StatusCode,
    pub message: String,
}

impl Refusal {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Refusal {
        Refusal {
            status,
            message: message.into(),
        }
    }
}

/// A histogram of durations that the sampler empties every second.
#[derive(Debug)]
struct Buckets([AtomicU64; BUCKETS]);

impl Default for Buckets {
    fn default() -> Buckets {
        Buckets(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

/// The bucket of a duration of `micros`: the power of two below it and
/// which quarter of the way to the next.
fn bucket(micros: u64) -> usize {
    let v = micros.max(1);
    let power = 63 - v.leading_zeros() as usize;
    let quarter = if power >= 2 {
        (v >> (power - 2)) & 3
    } else {
        (v << (2 - power)) & 3
    } as usize;
    (power * 4 + quarter).min(BUCKETS - 1)
}

/// The middle of bucket `i`, in seconds.
fn middle(i: usize) -> f64 {
    let (power, quarter) = (i / 4, (i % 4) as f64);
    let low = (4.0 + quarter) * 2f64.powi(power as i32) / 4.0;
    let high = (5.0 + quarter) * 2f64.powi(power as i32) / 4.0;
    (low + high) / 2.0 / 1e6
}

impl Buckets {
    fn record(&self, d: Duration) {
        let micros = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.0[bucket(micros)].fetch_add(1, Ordering::Relaxed);
    }

    /// The counts since the last take, emptied.
    fn take(&self) -> [u64; BUCKETS] {
        std::array::from_fn(|i| self.0[i].swap(0, Ordering::Relaxed))
    }
}

/// The `q` quantile (0 to 1) of `counts`, in seconds; none when empty.
fn quantile(counts: &[u64; BUCKETS], q: f64) -> Option<f64> {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
    let mut seen = 0;
    for (i, n) in counts.iter().enumerate() {
        seen += n;
        if seen >= rank {
            return Some(middle(i));
        }
    }
    None
}

/// One of the slowest recent requests.
#[derive(Debug, Clone)]
struct SlowRequest {
    at: SystemTime,
    method: String,
    path: String,
    status: u16,
    seconds: f64,
    worker: Option<u32>,
}

/// The worker that answered a request and how long the request waited
/// for it, carried from the handler to its record in the response's
/// extensions (only while observing).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Served {
    pub pid: u32,
    pub waited: Duration,
}

/// One second of requests, as the sampler takes it.
pub(crate) struct Second {
    latency: [u64; BUCKETS],
    wait: [u64; BUCKETS],
    classes: [u64; 5],
}

impl Second {
    /// The second's figures, as a sample's fields.
    pub(crate) fn json(&self) -> Value {
        let c = &self.classes;
        json!({
            "requests": c.iter().sum::<u64>(),
            "p50": quantile(&self.latency, 0.50),
            "p95": quantile(&self.latency, 0.95),
            "p99": quantile(&self.latency, 0.99),
            "classes": {"1xx": c[0], "2xx": c[1], "3xx": c[2], "4xx": c[3], "5xx": c[4]},
            "wait_p95": quantile(&self.wait, 0.95),
        })
    }
}

/// What the front records for the dashboard as requests end.
#[derive(Debug, Default)]
pub struct Recent {
    latency: Buckets,
    wait: Buckets,
    classes: [AtomicU64; 5],
    /// The duration (f64 bits) a request must pass to enter the slow list:
    /// the slowest list's last once it is full, else zero.
    floor: AtomicU64,
    slow: Mutex<Vec<SlowRequest>>,
}

impl Recent {
    /// A request ended: `status` after `took`, having waited `waited`
    /// for a worker when it went to one.
    pub(crate) fn record(
        &self,
        method: &http::Method,
        path: &str,
        status: u16,
        took: Duration,
        waited: Option<Duration>,
        worker: Option<u32>,
    ) {
        self.latency.record(took);
        if let Some(waited) = waited {
            self.wait.record(waited);
        }
        let class = usize::from((status / 100).clamp(1, 5) - 1);
        self.classes[class].fetch_add(1, Ordering::Relaxed);
        let seconds = took.as_secs_f64();
        if seconds <= f64::from_bits(self.floor.load(Ordering::Relaxed)) {
            return;
        }
        let mut slow = lock(&self.slow);
        slow.push(SlowRequest {
            at: SystemTime::now(),
            method: method.as_str().chars().take(16).collect(),
            path: cut(path, PATH_MAX).to_owned(),
            status,
            seconds,
            worker,
        });
        slow.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
        slow.truncate(SLOW);
        self.set_floor(&slow);
    }

    fn set_floor(&self, slow: &[SlowRequest]) {
        let floor = if slow.len() == SLOW {
            slow[SLOW - 1].seconds
        } else {
            0.0
        };
        self.floor.store(floor.to_bits(), Ordering::Relaxed);
    }

    /// Forgets slow requests older than [`SLOW_FOR`].
    pub(crate) fn prune(&self, now: SystemTime) {
        let mut slow = lock(&self.slow);
        let before = slow.len();
        slow.retain(|r| now.duration_since(r.at).unwrap_or_default() < SLOW_FOR);
        if slow.len() != before {
            self.set_floor(&slow);
        }
    }

    /// This second's latencies, waits for a worker and status classes,
    /// emptied for the next.
    pub(crate) fn take(&self) -> Second {
        Second {
            latency: self.latency.take(),
            wait: self.wait.take(),
            classes: std::array::from_fn(|i| self.classes[i].swap(0, Ordering::Relaxed)),
        }
    }

    /// The slowest recent requests, slowest first.
    pub fn slow_json(&self) -> Vec<Value> {
        lock(&self.slow)
            .iter()
            .map(|r| {
                json!({
                    "at": unix(r.at),
                    "method": r.method,
                    "path": r.path,
                    "status": r.status,
                    "seconds": r.seconds,
                    "worker": r.worker,
                })
            })
            .collect()
    }
}

/// `path` cut to at most `max` bytes, on a character boundary.
fn cut(path: &str, max: usize) -> &str {
    if path.len() <= max {
        return path;
    }
    let end = (0..=max)
        .rev()
        .find(|&i| path.is_char_boundary(i))
        .unwrap_or(0);
    &path[..end]
}

/// Seconds since the epoch, as JSON numbers carry them.
pub fn unix(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The samples of the last [`HISTORY`] seconds.
#[derive(Debug, Default)]
pub struct History {
    samples: Mutex<VecDeque<(f64, Value)>>,
}

impl History {
    pub(crate) fn push(&self, t: f64, sample: Value) {
        let mut samples = lock(&self.samples);
        if samples.len() == HISTORY {
            samples.pop_front();
        }
        samples.push_back((t, sample));
    }

    /// The samples taken after `since` (all with none), oldest first.
    pub fn since(&self, since: Option<f64>) -> Vec<Value> {
        let samples = lock(&self.samples);
        let since = since.unwrap_or(f64::NEG_INFINITY);
        let first = samples.partition_point(|(t, _)| *t <= since);
        samples.range(first..).map(|(_, s)| s.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_ordered_and_their_middles_are_close() {
        let mut last = 0;
        for micros in 1..100_000u64 {
            let b = bucket(micros);
            assert!(b >= last, "{micros}");
            last = b;
            let m = middle(b) * 1e6;
            let error = (m - micros as f64).abs() / micros as f64;
            assert!(error <= 0.125 || micros < 8, "{micros}: {m}");
        }
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn quantiles_come_from_the_counts() {
        let b = Buckets::default();
        for _ in 0..99 {
            b.record(Duration::from_millis(1));
        }
        b.record(Duration::from_millis(500));
        let counts = b.take();
        let p50 = quantile(&counts, 0.5).expect("p50");
        let p99 = quantile(&counts, 0.99).expect("p99");
        let p100 = quantile(&counts, 1.0).expect("max");
        assert!((p50 - 0.001).abs() < 0.0002, "{p50}");
        assert!((p99 - 0.001).abs() < 0.0002, "{p99}");
        assert!((p100 - 0.5).abs() < 0.06, "{p100}");
        assert_eq!(quantile(&b.take(), 0.5), None, "emptied by take");
    }

    #[test]
    fn the_slow_list_keeps_the_slowest_and_no_query() {
        let recent = Recent::default();
        for i in 0..100u64 {
            recent.record(
                &http::Method::GET,
                &format!("/r/{i}"),
                200,
                Duration::from_millis(i),
                None,
                Some(7),
            );
        }
        let slow = recent.slow_json();
        assert_eq!(slow.len(), SLOW);
        assert_eq!(slow[0]["path"], "/r/99");
        assert_eq!(slow[SLOW - 1]["path"], "/r/80");
        assert_eq!(f64::from_bits(recent.floor.load(Ordering::Relaxed)), 0.080);
        recent.prune(SystemTime::now() + SLOW_FOR + Duration::from_secs(1));
        assert!(recent.slow_json().is_empty());
        assert_eq!(recent.floor.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn long_paths_are_cut_on_a_character_boundary() {
        let long = "é".repeat(150);
        let c = cut(&long, PATH_MAX);
        assert!(c.len() <= PATH_MAX && c.len() >= PATH_MAX - 1);
        assert_eq!(cut("/x", PATH_MAX), "/x");
    }

    #[test]
    fn history_answers_since_a_time() {
        let h = History::default();
        for t in 0..(HISTORY as u64 + 5) {
            h.push(t as f64, json!({"t": t}));
        }
        assert_eq!(h.since(None).len(), HISTORY);
        assert_eq!(h.since(None)[0]["t"], 5);
        let later = h.since(Some(600.0));
        assert_eq!(later.len(), 4);
        assert_eq!(later[0]["t"], 601);
    }
}
