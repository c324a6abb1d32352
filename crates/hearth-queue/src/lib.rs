//! Durable job queues: one semantics over two engines, Redis Streams
//! (`redis://HOST:PORT[/DB]/NAME`, for many hosts) and an embedded SQLite
//! file (`file:PATH`, for one host, shared by its processes). The URL forms
//! are in [`url`].
//!
//! ```no_run
//! # async fn demo() -> hearth_queue::Result<()> {
//! use std::time::Duration;
//! use hearth_queue::{NewJob, Outcome, Queue, QueueConfig};
//!
//! let queue = Queue::open("file:/var/lib/hearth/jobs.db", QueueConfig::default()).await?;
//! // A producer: a batch in one round trip, results to a channel.
//! let ids = queue
//!     .push_many(vec![NewJob::new(br#"{"fn":"App\\Mail::send"}"#.to_vec()).reply_to("batch-1")])
//!     .await?;
//! // A consumer host: take up to 8 jobs, waiting up to a second for work.
//! let consumer = queue.consumer()?;
//! for job in consumer.reserve(8, Duration::from_secs(1)).await? {
//!     // ... run it; a long job calls consumer.extend(&job) now and then ...
//!     consumer.ack(&job, b"\"sent\"").await?;
//! }
//! // The producer reads the outcomes back.
//! let mut results = queue.results("batch-1")?;
//! for r in results.next(100, Duration::from_secs(1)).await? {
//!     assert!(ids.contains(&r.id) && matches!(r.outcome, Outcome::Done(_)));
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # Delivery
//!
//! - **At least once.** A job is pushed once and given an id; it is
//!   delivered to one consumer at a time, as attempt 1, 2, ... A consumer
//!   ends its hold with [`Consumer::ack`] (done, with a result) or
//!   [`Consumer::fail`] (with an error). A hold lasts
//!   [`QueueConfig::visibility_timeout`], renewed by [`Consumer::extend`];
//!   past it (its consumer died or hung) the job is delivered again, to any
//!   consumer, with the next attempt number: a job delivered twice is seen
//!   as attempt 2, so handlers can be idempotent.
//! - **Results before acks.** A job pushed with a reply-to channel has its
//!   outcome recorded to that channel in the same transaction (one Lua
//!   script on Redis, one SQLite transaction) as its ack, or as its move to
//!   the dead-letter store. The first consumer to ack a job wins: a later
//!   ack of the same job (its hold had expired and another consumer took
//!   it) is [`Receipt::Stale`] and records nothing, so a channel has one
//!   outcome per job.
//! - **Failures.** A failed attempt goes back after the job's [`Backoff`]
//!   while attempts remain; after the last, the job goes to the dead-letter
//!   store with [`DeadReason::Failed`] and the error. A job whose consumer
//!   was lost on its last attempt goes there as [`DeadReason::Lost`]. A
//!   stored entry that cannot be read as a job goes there as
//!   [`DeadReason::Malformed`] with what is wrong; the consumer goes on.
//!   A consumer that finds a job can never succeed (its payload is not
//!   work it can run) ends it at once with [`Consumer::reject`], as
//!   [`DeadReason::Rejected`] with its reason.
//!   [`Queue::retry_dead`] puts dead jobs back with their attempts reset;
//!   [`Queue::delete_dead`] removes one for good.
//! - **Delays.** A delayed job (or one waiting for its backoff) becomes
//!   deliverable at its time. A consumer that is waiting takes it within a
//!   few ms (it waits for the next due time itself, not on Redis's timer,
//!   which ends a blocking read only every 100 ms at Redis's default
//!   `hz 10`); a job pushed with a delay while every consumer is already
//!   waiting is seen at the end of that wait, at most
//!   [`QueueConfig::poll_interval`] (100 ms by default) plus Redis's timer
//!   late. The file engine polls at least every 20 ms.
//! - **Order.** Jobs are delivered in the order they became ready, by
//!   each engine's clock (Redis's own for a Redis queue), but consumers
//!   run them in parallel and retries go to the back: no order between
//!   jobs is promised.
//! - **Engine restarts.** A call that finds the engine away (Redis
//!   restarting, the file locked by another process) is retried for
//!   [`QueueConfig::retry_for`] before it fails as unavailable; jobs held
//!   meanwhile stay held, and an ack made during a Redis restart is
//!   applied once it is back. Redis must keep its data across the restart
//!   (AOF, `appendonly yes`). A push whose reply is lost with the
//!   connection is retried and may enqueue the job twice.
//! - **Bounds.** Payloads and results have a size limit (1 MiB by default,
//!   refused with [`Error::is_too_large`]); errors are cut to 4 KiB; a
//!   results channel keeps its last 100,000 outcomes and is removed after a
//!   day without writes; the dead-letter store keeps the last 100,000 jobs;
//!   `reserve` and `peek` return at most 1,000 jobs.
//!
//! # Engines
//!
//! **Redis** (≥ 6.2; tested with 7.0). All keys of queue `NAME` start with
//! `hearth:{NAME}:` (one hash tag, so one cluster slot):
//!
//! | key | type | holds |
//! |---|---|---|
//! | `ready` | stream, consumer group `hearth` | jobs deliverable now, and held ones (pending) |
//! | `delayed` | sorted set, score = due time (ms, Redis's clock) | delayed jobs and jobs waiting for their backoff (msgpack'd field lists) |
//! | `dead` | stream | the dead-letter store: the job's fields and `reason`, `error`, `dead_at` |
//! | `deadix` | hash | job id → its `dead` entry, for `retry` and `delete_dead` |
//! | `stats` | hash | counters `pushed`, `done`, `failed`, `retried`, `died` |
//! | `seq` | string | the last job id given |
//! | `result:CHANNEL` | stream, `MAXLEN ~`, `EXPIRE` | outcomes: `id`, `attempt`, `status` (`done`/`dead`), `result` or `reason` and `error` |
//!
//! A `ready` entry's fields are `id`, `payload`, `attempts` (made before
//! this entry), `max`, `backoff` and `backoff_max` (ms), `at` (pushed,
//! ms), and optionally `reply` and `error` (the previous attempt's). A
//! delivery's attempt is `attempts` plus the entry's delivery count. Every
//! change is one Lua script (push, promote-and-reclaim with `XAUTOCLAIM`
//! and `XPENDING`, ack, fail-or-dead, extend with `XCLAIM ... JUSTID`,
//! stats, peek, purge, retry, delete a dead job); a consumer blocks in
//! `XREADGROUP BLOCK` on a connection of its own (so its acks never wait
//! behind it) for at most `poll_interval`, then promotes due delayed jobs
//! and reclaims expired holds. Connections are redis-rs connection managers, which reconnect
//! with backoff. Consumers that hold nothing and were idle an hour are
//! removed from the group.
//!
//! **File** (SQLite in WAL mode, compiled in with `rusqlite`'s `bundled`
//! feature: no system library to install or match). Tables `jobs` (state
//! waiting/reserved/dead, attempts, due time, holder and its last renewal,
//! last error, dead reason), `results` (per channel, trimmed to
//! `max_results`, channels idle past `results_ttl` removed), `counters`
//! and `meta` (schema version). Every change is a `BEGIN IMMEDIATE`
//! transaction with a busy timeout; a reserve takes expired holds, then
//! ready jobs with one `UPDATE ... RETURNING`. `synchronous=NORMAL`: a
//! commit survives the process being killed, not a power cut in its last
//! moments (as Redis with `appendfsync everysec`). A blocked reserve is
//! woken at once by a push through the same handle, and sees other
//! processes' pushes by polling: after 1 ms, doubling to 20 ms.

pub mod backoff;
pub mod config;
pub mod error;
mod file;
pub mod job;
mod redis;
mod retry;
/// The test suite's redis-server, for the unit tests that need one.
#[cfg(test)]
#[path = "../tests/support/mod.rs"]
mod test_support;
pub mod url;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub use backoff::Backoff;
pub use config::{QueueConfig, MAX_BATCH};
pub use error::{Error, Result};
pub use job::{DeadReason, Job, JobId, JobInfo, JobResult, NewJob, Outcome, Part, Receipt, Stats};
pub use url::QueueUrl;

use crate::file::{FileConsumer, FileQueue, FileResults};
use crate::redis::{RedisConsumer, RedisQueue, RedisResults};
use crate::url::check_name;

/// A handle on one queue; cheap to clone, shared by producers, consumers
/// and operators alike.
#[derive(Debug, Clone)]
pub struct Queue {
    engine: Engine,
    url: Arc<QueueUrl>,
    config: Arc<QueueConfig>,
}

#[derive(Debug, Clone)]
enum Engine {
    Redis(Arc<RedisQueue>),
    File(Arc<FileQueue>),
}

impl Queue {
    /// Opens the queue at `url` (see [`url`]), creating what it needs (the
    /// Redis stream and consumer group, the SQLite file and its tables).
    pub async fn open(url: &str, config: QueueConfig) -> Result<Queue> {
        Self::open_url(QueueUrl::parse(url)?, config).await
    }

    /// [`Queue::open`] for a parsed URL.
    pub async fn open_url(url: QueueUrl, config: QueueConfig) -> Result<Queue> {
        config.validate()?;
        let config = Arc::new(config);
        let engine = match &url {
            QueueUrl::Redis(r) => {
                Engine::Redis(Arc::new(RedisQueue::open(r, config.clone()).await?))
            }
            QueueUrl::File(p) => Engine::File(Arc::new(FileQueue::open(p, config.clone()).await?)),
        };
        Ok(Queue {
            engine,
            url: Arc::new(url),
            config,
        })
    }

    /// Opens the queue at `url` only if it is there, creating nothing: a
    /// queue file that exists, a Redis queue with at least one of its
    /// keys. Otherwise [`Error::is_no_such_queue`]. For operators' commands,
    /// where a mistyped name must not leave an empty queue behind.
    pub async fn open_existing(url: QueueUrl, config: QueueConfig) -> Result<Queue> {
        config.validate()?;
        match &url {
            QueueUrl::Redis(r) => {
                if !RedisQueue::exists(r, config.retry_for).await? {
                    return Err(Error::no_such_queue(format!(
                        "{url} has no keys hearth:{{{}}}:* in database {}",
                        r.name, r.db
                    )));
                }
            }
            QueueUrl::File(p) => {
                if !p.exists() {
                    return Err(Error::no_such_queue(format!(
                        "no queue file at {}",
                        p.display()
                    )));
                }
            }
        }
        Self::open_url(url, config).await
    }

    /// The queue's URL (without a password when shown).
    pub fn url(&self) -> &QueueUrl {
        &self.url
    }

    /// The settings the handle was opened with.
    pub fn config(&self) -> &QueueConfig {
        &self.config
    }

    /// Pushes one job; returns its id.
    pub async fn push(&self, job: NewJob) -> Result<JobId> {
        let ids = self.push_many(vec![job]).await?;
        ids.into_iter()
            .next()
            .ok_or_else(|| Error::engine("push returned no id"))
    }

    /// Pushes a batch in one round trip (Redis: one script call per 500
    /// jobs; file: one transaction); returns the ids in order. Every job
    /// is checked first: one refused job refuses the batch, nothing stored.
    pub async fn push_many(&self, jobs: Vec<NewJob>) -> Result<Vec<JobId>> {
        for j in &jobs {
            self.config.check_job(j)?;
        }
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        match &self.engine {
            Engine::Redis(r) => r.push_many(&jobs).await,
            Engine::File(f) => f.push_many(jobs).await,
        }
    }

    /// A new consumer with a name of its own (host, process, a counter).
    pub fn consumer(&self) -> Result<Consumer> {
        self.consumer_named(&default_consumer_name())
    }

    /// A consumer named `name`. Names must be unique among the queue's
    /// live consumers: holds are checked by name.
    pub fn consumer_named(&self, name: &str) -> Result<Consumer> {
        check_name("consumer name", name)?;
        let inner = match &self.engine {
            Engine::Redis(r) => ConsumerInner::Redis(r.consumer(name.to_string())?),
            Engine::File(f) => ConsumerInner::File(f.consumer(name.to_string())),
        };
        Ok(Consumer {
            name: name.to_string(),
            inner,
        })
    }

    /// A reader of the results channel `channel`, from its oldest kept
    /// outcome.
    pub fn results(&self, channel: &str) -> Result<Results> {
        check_name("results channel", channel)?;
        let inner = match &self.engine {
            Engine::Redis(r) => ResultsInner::Redis(r.results(channel)?),
            Engine::File(f) => ResultsInner::File(f.results(channel)),
        };
        Ok(Results { inner })
    }

    /// Removes the results channel `channel` (a producer done with it).
    pub async fn delete_results(&self, channel: &str) -> Result<()> {
        check_name("results channel", channel)?;
        match &self.engine {
            Engine::Redis(r) => r.delete_results(channel).await,
            Engine::File(f) => f.delete_results(channel).await,
        }
    }

    /// Counts of jobs in each state and since the queue was created.
    pub async fn stats(&self) -> Result<Stats> {
        match &self.engine {
            Engine::Redis(r) => r.stats().await,
            Engine::File(f) => f.stats().await,
        }
    }

    /// Up to `limit` (at most [`MAX_BATCH`]) ready or dead jobs, oldest
    /// first, without taking them.
    pub async fn peek(&self, part: Part, limit: usize) -> Result<Vec<JobInfo>> {
        match &self.engine {
            Engine::Redis(r) => r.peek(part, limit).await,
            Engine::File(f) => f.peek(part, limit).await,
        }
    }

    /// Puts dead job `id` back, ready, with its attempts reset; false when
    /// no dead job has that id.
    pub async fn retry_dead(&self, id: JobId) -> Result<bool> {
        match &self.engine {
            Engine::Redis(r) => r.retry_dead(id).await,
            Engine::File(f) => f.retry_dead(Some(id)).await.map(|n| n > 0),
        }
    }

    /// Removes dead job `id` for good: true when a dead job with that id
    /// was removed, false when no dead job has that id. Only the
    /// dead-letter store is looked in: a ready, delayed or held job with
    /// that id is left as it is (and false is returned).
    ///
    /// One atomic change (a Lua script on Redis, a transaction on SQLite)
    /// removes the job and its entry in the dead-letter index, so it is
    /// never delivered again and [`Queue::retry_dead`] no longer finds it.
    /// In [`Stats`], `dead` goes down by one; no cumulative counter
    /// changes (`died` still counts its move to the dead-letter store, as
    /// after [`Queue::purge`]). An outcome already recorded to its
    /// reply-to channel stays there.
    pub async fn delete_dead(&self, id: JobId) -> Result<bool> {
        match &self.engine {
            Engine::Redis(r) => r.delete_dead(id).await,
            Engine::File(f) => f.delete_dead(id).await,
        }
    }

    /// Puts every dead job back (those dead when the call began); returns
    /// how many.
    pub async fn retry_all_dead(&self) -> Result<u64> {
        match &self.engine {
            Engine::Redis(r) => r.retry_all_dead().await,
            Engine::File(f) => f.retry_dead(None).await,
        }
    }

    /// Removes the ready, delayed or dead jobs; returns how many. Held jobs
    /// are never purged.
    pub async fn purge(&self, part: Part) -> Result<u64> {
        match &self.engine {
            Engine::Redis(r) => r.purge(part).await,
            Engine::File(f) => f.purge(part).await,
        }
    }
}

fn default_consumer_name() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let host: String = host
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        .take(64)
        .collect();
    let host = if host.is_empty() { "host".into() } else { host };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{host}-{}-{}-{nanos:x}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// One consumer: takes jobs and ends its holds. Its methods take `&self`,
/// so one consumer can be shared by the tasks running its jobs; `reserve`
/// calls are served one at a time.
#[derive(Debug)]
pub struct Consumer {
    name: String,
    inner: ConsumerInner,
}

#[derive(Debug)]
enum ConsumerInner {
    Redis(RedisConsumer),
    File(FileConsumer),
}

impl Consumer {
    /// The consumer's name (its holds are recorded under it).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Takes up to `max` jobs (at most [`MAX_BATCH`]), waiting up to
    /// `wait` for the first; empty when none came. Jobs whose holder's
    /// visibility timeout passed are taken first, as their next attempt.
    pub async fn reserve(&self, max: usize, wait: Duration) -> Result<Vec<Job>> {
        match &self.inner {
            ConsumerInner::Redis(r) => r.reserve(max, wait).await,
            ConsumerInner::File(f) => f.reserve(max, wait).await,
        }
    }

    /// Ends the job as done, recording `result` to its reply-to channel in
    /// the same transaction. [`Receipt::Stale`] when another consumer
    /// finished it first.
    pub async fn ack(&self, job: &Job, result: &[u8]) -> Result<Receipt> {
        match &self.inner {
            ConsumerInner::Redis(r) => r.ack(job, result).await,
            ConsumerInner::File(f) => f.ack(job, result).await,
        }
    }

    /// Ends the attempt as failed with `error`: the job goes back after its
    /// backoff, or to the dead-letter store after its last attempt.
    /// [`Receipt::Stale`] when this consumer no longer holds it.
    pub async fn fail(&self, job: &Job, error: &str) -> Result<Receipt> {
        self.fail_with_result(job, error, None).await
    }

    /// As [`Consumer::fail`], with what the attempt produced (a result
    /// line, at most [`QueueConfig::max_result`] bytes): when this was the
    /// job's last attempt, it is recorded with its outcome to its reply-to
    /// channel (`JobResult::last_result`), so a producer sees the failed
    /// attempt's output, not only its error.
    pub async fn fail_with_result(
        &self,
        job: &Job,
        error: &str,
        result: Option<&[u8]>,
    ) -> Result<Receipt> {
        match &self.inner {
            ConsumerInner::Redis(r) => r.fail(job, error, result).await,
            ConsumerInner::File(f) => f.fail(job, error, result).await,
        }
    }

    /// Ends the job at once in the dead-letter store with
    /// [`DeadReason::Rejected`] and `error`, whatever attempts it has left:
    /// for a job that can never succeed, such as a payload this consumer
    /// cannot read as work. Counted as a failed attempt; its outcome is
    /// recorded to its reply-to channel, and [`Queue::retry_dead`] can put
    /// it back. [`Receipt::Stale`] when this consumer no longer holds it.
    pub async fn reject(&self, job: &Job, error: &str) -> Result<Receipt> {
        match &self.inner {
            ConsumerInner::Redis(r) => r.reject(job, error).await,
            ConsumerInner::File(f) => f.reject(job, error).await,
        }
    }

    /// Renews the hold for another full visibility timeout from now.
    /// [`Receipt::Stale`] when this consumer no longer holds it.
    pub async fn extend(&self, job: &Job) -> Result<Receipt> {
        match &self.inner {
            ConsumerInner::Redis(r) => r.extend(job).await,
            ConsumerInner::File(f) => f.extend(job).await,
        }
    }
}

/// A reader of one results channel; each call returns the outcomes
/// recorded since the previous one.
#[derive(Debug)]
pub struct Results {
    inner: ResultsInner,
}

#[derive(Debug)]
enum ResultsInner {
    Redis(RedisResults),
    File(FileResults),
}

impl Results {
    /// Up to `max` outcomes (at most [`MAX_BATCH`]), waiting up to `wait`
    /// for the first; empty when none came.
    pub async fn next(&mut self, max: usize, wait: Duration) -> Result<Vec<JobResult>> {
        match &mut self.inner {
            ResultsInner::Redis(r) => r.next(max, wait).await,
            ResultsInner::File(f) => f.next(max, wait).await,
        }
    }
}
