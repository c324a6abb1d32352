//! The Redis engine: a stream with a consumer group per queue, a sorted set
//! for delayed jobs and backoffs, a dead-letter stream and a results stream
//! per reply-to channel, each change made by one Lua script
//! ([`scripts`] lists the keys and fields).
//!
//! Connections are redis-rs connection managers: they reconnect with
//! backoff by themselves; a call that fails because Redis is away is tried
//! again (see [`crate::retry`]) for `retry_for`, so an ack made while Redis
//! restarts is applied when it is back. Blocking reads (`XREADGROUP
//! BLOCK`, `XREAD BLOCK`) have a connection of their own, so they never
//! hold up the acks sharing the queue's connection.

mod entry;
mod scripts;

use std::sync::Arc;
use std::time::Duration;

use ::redis::aio::{ConnectionManager, ConnectionManagerConfig};
use ::redis::{
    ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo, RedisError,
    RetryMethod, ScriptInvocation, Value,
};
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::config::{QueueConfig, MAX_BATCH};
use crate::error::{Error, Result};
use crate::job::{
    duration_ms, truncate, DeadReason, Job, JobId, JobInfo, JobResult, NewJob, Part, Receipt, Stats,
};
use crate::retry::{retry, Fail};
use crate::url::RedisUrl;
use entry::{array, decode_job, decode_result, encode_job, info, int, read_reply, string, Entry};
use scripts::Scripts;

/// The consumer group every consumer of a queue joins.
const GROUP: &str = "hearth";
/// Jobs pushed per script call: a large batch is cut so one call never
/// holds Redis for long.
const PUSH_CHUNK: usize = 500;
/// Delayed jobs moved to the stream per look.
const PROMOTE_LIMIT: usize = 1000;
/// How often a consumer removes the group's long-gone consumers, and how
/// long gone they must be.
const FORGET_EVERY: Duration = Duration::from_secs(300);
const FORGET_IDLE: Duration = Duration::from_secs(3600);
/// The longest a blocking read waits in one call.
const LONGEST_BLOCK: Duration = Duration::from_secs(5);

/// A Redis queue handle.
#[derive(Debug)]
pub(crate) struct RedisQueue {
    client: ::redis::Client,
    conn: ConnectionManager,
    keys: Keys,
    config: Arc<QueueConfig>,
    scripts: Scripts,
}

#[derive(Debug)]
struct Keys {
    prefix: String,
    ready: String,
    delayed: String,
    dead: String,
    deadix: String,
    stats: String,
    seq: String,
}

impl Keys {
    fn new(name: &str) -> Self {
        let prefix = format!("hearth:{{{name}}}:");
        let k = |s: &str| format!("{prefix}{s}");
        Keys {
            ready: k("ready"),
            delayed: k("delayed"),
            dead: k("dead"),
            deadix: k("deadix"),
            stats: k("stats"),
            seq: k("seq"),
            prefix,
        }
    }

    fn result(&self, channel: &str) -> String {
        format!("{}result:{channel}", self.prefix)
    }
}

fn classify(e: RedisError) -> Fail {
    let transient = !matches!(e.kind(), ::redis::ErrorKind::AuthenticationFailed)
        && (e.is_io_error()
            || e.is_timeout()
            || e.is_connection_dropped()
            || e.is_connection_refusal()
            || matches!(
                e.retry_method(),
                RetryMethod::Reconnect | RetryMethod::RetryImmediately | RetryMethod::WaitAndRetry
            ));
    if transient {
        Fail::Transient(e.to_string())
    } else {
        Fail::Permanent(Error::engine(e.to_string()))
    }
}

fn is_nogroup(f: &Fail) -> bool {
    matches!(f, Fail::Permanent(e) if e.to_string().contains("NOGROUP"))
}

fn manager_config(response_timeout: Duration) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_min_delay(Duration::from_millis(50))
        .set_max_delay(Duration::from_secs(2))
        .set_number_of_retries(6)
        .set_connection_timeout(Some(Duration::from_secs(5)))
        .set_response_timeout(Some(response_timeout))
}

impl RedisQueue {
    pub async fn open(url: &RedisUrl, config: Arc<QueueConfig>) -> Result<Self> {
        let mut redis = RedisConnectionInfo::default().set_db(url.db);
        if let Some(u) = &url.username {
            redis = redis.set_username(u);
        }
        if let Some(p) = &url.password {
            redis = redis.set_password(p);
        }
        let info: ConnectionInfo = ConnectionAddr::Tcp(url.host.clone(), url.port)
            .into_connection_info()
            .map_err(|e| Error::url(e.to_string()))?
            .set_redis_settings(redis);
        let client = ::redis::Client::open(info).map_err(|e| Error::url(e.to_string()))?;
        let conn = ConnectionManager::new_lazy_with_config(
            client.clone(),
            manager_config(Duration::from_secs(30)),
        )
        .map_err(|e| Error::engine(e.to_string()))?;
        let q = RedisQueue {
            client,
            conn,
            keys: Keys::new(&url.name),
            config,
            scripts: Scripts::new(),
        };
        q.ensure_group().await?;
        Ok(q)
    }

    fn retry_for(&self) -> Duration {
        self.config.retry_for
    }

    /// Creates the stream and its group if missing (from the stream's
    /// start, so jobs added before the group are delivered too).
    async fn ensure_group(&self) -> Result<()> {
        retry("create consumer group", self.retry_for(), || async {
            let r: Result<Value, RedisError> = ::redis::cmd("XGROUP")
                .arg("CREATE")
                .arg(&self.keys.ready)
                .arg(GROUP)
                .arg("0")
                .arg("MKSTREAM")
                .query_async(&mut self.conn.clone())
                .await;
            match r {
                Ok(_) => Ok(()),
                Err(e) if e.code() == Some("BUSYGROUP") => Ok(()),
                Err(e) => Err(classify(e)),
            }
        })
        .await
    }

    /// Runs a prepared script, retried while Redis is away.
    async fn run(&self, what: &str, inv: &ScriptInvocation<'_>) -> Result<Value> {
        retry(what, self.retry_for(), || async {
            inv.invoke_async::<Value>(&mut self.conn.clone())
                .await
                .map_err(classify)
        })
        .await
    }

    /// A connection for blocking reads.
    fn blocking_connection(&self) -> Result<ConnectionManager> {
        ConnectionManager::new_lazy_with_config(
            self.client.clone(),
            manager_config(LONGEST_BLOCK + Duration::from_secs(10)),
        )
        .map_err(|e| Error::engine(e.to_string()))
    }

    pub async fn push_many(&self, jobs: &[NewJob]) -> Result<Vec<JobId>> {
        let mut ids = Vec::with_capacity(jobs.len());
        for chunk in jobs.chunks(PUSH_CHUNK) {
            let mut inv = self.scripts.push.prepare_invoke();
            inv.key(&self.keys.ready)
                .key(&self.keys.delayed)
                .key(&self.keys.seq)
                .key(&self.keys.stats)
                .arg(chunk.len());
            for j in chunk {
                inv.arg(j.payload.as_slice())
                    .arg(j.max_attempts)
                    .arg(j.backoff.base_ms())
                    .arg(j.backoff.max_ms())
                    .arg(j.reply_to.as_deref().unwrap_or(""))
                    .arg(duration_ms(j.delay));
            }
            let v = self.run("push", &inv).await?;
            for id in array(&v) {
                let id = int(id).ok_or_else(|| Error::engine("push: a job id is not a number"))?;
                ids.push(JobId(id as u64));
            }
        }
        Ok(ids)
    }

    pub async fn stats(&self) -> Result<Stats> {
        let mut inv = self.scripts.stats.prepare_invoke();
        inv.key(&self.keys.ready)
            .key(&self.keys.delayed)
            .key(&self.keys.dead)
            .key(&self.keys.stats)
            .arg(GROUP);
        let v = self.run("stats", &inv).await?;
        let a = array(&v);
        let n = |i: usize| a.get(i).and_then(int).unwrap_or(0).max(0) as u64;
        let mut s = Stats {
            ready: n(0),
            reserved: n(1),
            delayed: n(2),
            dead: n(3),
            ..Stats::default()
        };
        if let Some(counters) = a.get(4) {
            for kv in array(counters).chunks(2) {
                let (Some(k), Some(v)) = (kv.first().and_then(string), kv.get(1).and_then(int))
                else {
                    continue;
                };
                let v = v.max(0) as u64;
                match k.as_str() {
                    "pushed" => s.pushed = v,
                    "done" => s.done = v,
                    "failed" => s.failed = v,
                    "retried" => s.retried = v,
                    "died" => s.died = v,
                    _ => {}
                }
            }
        }
        let oldest = a.get(5).and_then(string).unwrap_or_default();
        if let Some(ms) = oldest.split('-').next().and_then(|m| m.parse::<u64>().ok()) {
            let now = n(6);
            s.oldest_ready_age = Some(Duration::from_millis(now.saturating_sub(ms)));
        }
        Ok(s)
    }

    pub async fn peek(&self, part: Part, limit: usize) -> Result<Vec<JobInfo>> {
        let limit = limit.clamp(1, MAX_BATCH);
        let v = match part {
            Part::Ready => {
                let mut inv = self.scripts.peek_ready.prepare_invoke();
                inv.key(&self.keys.ready).arg(GROUP).arg(limit);
                self.run("peek", &inv).await?
            }
            Part::Dead => {
                retry("peek", self.retry_for(), || async {
                    ::redis::cmd("XRANGE")
                        .arg(&self.keys.dead)
                        .arg("-")
                        .arg("+")
                        .arg("COUNT")
                        .arg(limit)
                        .query_async::<Value>(&mut self.conn.clone())
                        .await
                        .map_err(classify)
                })
                .await?
            }
            Part::Delayed => {
                return Err(Error::invalid(
                    "peek shows ready and dead jobs; delayed jobs are counted by stats",
                ))
            }
        };
        Ok(array(&v)
            .iter()
            .filter_map(entry::entry)
            .map(|e| info(&e))
            .collect())
    }

    pub async fn retry_dead(&self, id: JobId) -> Result<bool> {
        let mut inv = self.scripts.retry_dead.prepare_invoke();
        inv.key(&self.keys.ready)
            .key(&self.keys.dead)
            .key(&self.keys.deadix)
            .arg("one")
            .arg(id.0)
            .arg(1);
        let v = self.run("retry", &inv).await?;
        Ok(int(&v).unwrap_or(0) > 0)
    }

    pub async fn retry_all_dead(&self) -> Result<u64> {
        // Only the entries dead now: a job that dies again meanwhile stays.
        let last = retry("retry", self.retry_for(), || async {
            ::redis::cmd("XREVRANGE")
                .arg(&self.keys.dead)
                .arg("+")
                .arg("-")
                .arg("COUNT")
                .arg(1)
                .query_async::<Value>(&mut self.conn.clone())
                .await
                .map_err(classify)
        })
        .await?;
        let Some(last) = array(&last).first().and_then(entry::entry) else {
            return Ok(0);
        };
        let mut total = 0;
        loop {
            let mut inv = self.scripts.retry_dead.prepare_invoke();
            inv.key(&self.keys.ready)
                .key(&self.keys.dead)
                .key(&self.keys.deadix)
                .arg("upto")
                .arg(&last.id)
                .arg(MAX_BATCH);
            let n = int(&self.run("retry", &inv).await?).unwrap_or(0).max(0) as u64;
            total += n;
            if n == 0 {
                return Ok(total);
            }
        }
    }

    pub async fn purge(&self, part: Part) -> Result<u64> {
        let word = match part {
            Part::Ready => "ready",
            Part::Delayed => "delayed",
            Part::Dead => "dead",
        };
        let mut total = 0;
        loop {
            let mut inv = self.scripts.purge.prepare_invoke();
            inv.key(&self.keys.ready)
                .key(&self.keys.delayed)
                .key(&self.keys.dead)
                .key(&self.keys.deadix)
                .arg(word)
                .arg(GROUP)
                .arg(MAX_BATCH);
            let n = int(&self.run("purge", &inv).await?).unwrap_or(0).max(0) as u64;
            total += n;
            if n == 0 || part != Part::Ready {
                return Ok(total);
            }
        }
    }

    pub async fn delete_results(&self, channel: &str) -> Result<()> {
        let key = self.keys.result(channel);
        retry("delete results", self.retry_for(), || async {
            ::redis::cmd("DEL")
                .arg(&key)
                .query_async::<Value>(&mut self.conn.clone())
                .await
                .map(drop)
                .map_err(classify)
        })
        .await
    }

    pub fn results(self: &Arc<Self>, channel: &str) -> Result<RedisResults> {
        Ok(RedisResults {
            conn: self.blocking_connection()?,
            key: self.keys.result(channel),
            last: "0-0".into(),
            retry_for: self.retry_for(),
        })
    }

    pub fn consumer(self: &Arc<Self>, name: String) -> Result<RedisConsumer> {
        Ok(RedisConsumer {
            queue: self.clone(),
            name,
            block: Mutex::new(self.blocking_connection()?),
            forgot: std::sync::Mutex::new(None),
        })
    }
}

/// One consumer of a Redis queue (one member of the group).
#[derive(Debug)]
pub(crate) struct RedisConsumer {
    queue: Arc<RedisQueue>,
    name: String,
    /// The connection `XREADGROUP BLOCK` waits on; one reserve at a time.
    block: Mutex<ConnectionManager>,
    /// When this consumer last removed long-gone consumers.
    forgot: std::sync::Mutex<Option<Instant>>,
}

impl RedisConsumer {
    pub async fn reserve(&self, max: usize, wait: Duration) -> Result<Vec<Job>> {
        let max = max.clamp(1, MAX_BATCH);
        let q = &*self.queue;
        let deadline = Instant::now() + wait;
        let conn = self.block.lock().await;
        self.forget_gone().await?;
        loop {
            let claimed = self.claim(max).await?;
            let jobs = self.accept(claimed).await?;
            if !jobs.is_empty() {
                return Ok(jobs);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let block = left.min(q.config.poll_interval).min(LONGEST_BLOCK);
            let read = retry("reserve", q.retry_for(), || {
                let mut c = conn.clone();
                async move {
                    let mut cmd = ::redis::cmd("XREADGROUP");
                    cmd.arg("GROUP").arg(GROUP).arg(&self.name);
                    cmd.arg("COUNT").arg(max);
                    if !block.is_zero() {
                        cmd.arg("BLOCK").arg(duration_ms(block).max(1));
                    }
                    cmd.arg("STREAMS").arg(&q.keys.ready).arg(">");
                    match cmd.query_async::<Value>(&mut c).await.map_err(classify) {
                        Err(f) if is_nogroup(&f) => {
                            q.ensure_group().await?;
                            Ok(Value::Nil)
                        }
                        other => other,
                    }
                }
            })
            .await?;
            let entries = read_reply(&read).into_iter().map(|e| (e, 1)).collect();
            let jobs = self.accept(entries).await?;
            if !jobs.is_empty() || Instant::now() >= deadline {
                return Ok(jobs);
            }
        }
    }

    /// Removes consumers that hold nothing and were idle for
    /// [`FORGET_IDLE`], at most every [`FORGET_EVERY`].
    async fn forget_gone(&self) -> Result<()> {
        {
            let mut last = self.forgot.lock().unwrap_or_else(|p| p.into_inner());
            if last.is_some_and(|t| t.elapsed() < FORGET_EVERY) {
                return Ok(());
            }
            *last = Some(Instant::now());
        }
        let q = &*self.queue;
        let mut inv = q.scripts.forget.prepare_invoke();
        inv.key(&q.keys.ready)
            .arg(GROUP)
            .arg(duration_ms(FORGET_IDLE));
        let n = int(&q.run("forget consumers", &inv).await?).unwrap_or(0);
        if n > 0 {
            tracing::info!(consumers = n, "removed consumers gone for an hour");
        }
        Ok(())
    }

    /// Moves due delayed jobs to the stream and claims expired holds.
    async fn claim(&self, max: usize) -> Result<Vec<(Entry, u32)>> {
        let q = &*self.queue;
        let mut inv = q.scripts.claim.prepare_invoke();
        inv.key(&q.keys.ready)
            .key(&q.keys.delayed)
            .key(&q.keys.stats)
            .arg(GROUP)
            .arg(&self.name)
            .arg(duration_ms(q.config.visibility_timeout))
            .arg(max)
            .arg(PROMOTE_LIMIT);
        let v = match q.run("reclaim", &inv).await {
            Err(e) if e.to_string().contains("NOGROUP") => {
                q.ensure_group().await?;
                return Ok(Vec::new());
            }
            other => other?,
        };
        Ok(array(&v)
            .iter()
            .filter_map(|c| {
                let parts = array(c);
                let e = entry::entry(&Value::Array(parts.get(..2)?.to_vec()))?;
                let n = parts.get(2).and_then(int).unwrap_or(1).max(1);
                Some((e, u32::try_from(n).unwrap_or(u32::MAX)))
            })
            .collect())
    }

    /// Jobs from entries this consumer now holds; malformed entries and
    /// jobs past their last attempt go to the dead-letter store.
    async fn accept(&self, entries: Vec<(Entry, u32)>) -> Result<Vec<Job>> {
        let mut jobs = Vec::with_capacity(entries.len());
        for (e, deliveries) in entries {
            match decode_job(&e, deliveries) {
                Ok(job) if job.attempt > job.max_attempts => {
                    let error = job
                        .last_error
                        .clone()
                        .unwrap_or_else(|| "its consumer was lost".into());
                    tracing::warn!(job = %job.id, attempt = job.attempt, "job lost on its last attempt, moved to dead-letter");
                    self.settle(
                        &job.entry,
                        Some(&job),
                        Mode::Dead(DeadReason::Lost),
                        &error,
                        false,
                    )
                    .await?;
                }
                Ok(job) => jobs.push(job),
                Err(why) => {
                    tracing::warn!(entry = %e.id, error = %why, "malformed job moved to dead-letter");
                    self.settle(&e.id, None, Mode::Malformed, &why, false)
                        .await?;
                }
            }
        }
        Ok(jobs)
    }

    async fn settle(
        &self,
        entry: &str,
        job: Option<&Job>,
        mode: Mode,
        error: &str,
        count_failed: bool,
    ) -> Result<Receipt> {
        let q = &*self.queue;
        let error = truncate(error, q.config.max_error);
        let reply = job.and_then(|j| j.reply_to.as_deref());
        let reply_key = reply.map(|c| q.keys.result(c));
        let (word, delay, reason, fields) = match (&mode, job) {
            (Mode::Retry(d), Some(j)) => ("retry", *d, "", encode_job(j, j.attempt, Some(&error))),
            (Mode::Dead(r), Some(j)) => ("dead", 0, r.as_str(), encode_job(j, j.attempt, None)),
            _ => ("malformed", 0, DeadReason::Malformed.as_str(), Vec::new()),
        };
        let mut inv = q.scripts.settle.prepare_invoke();
        inv.key(&q.keys.ready)
            .key(&q.keys.delayed)
            .key(&q.keys.dead)
            .key(&q.keys.deadix)
            .key(&q.keys.stats)
            .key(&q.keys.seq)
            .key(reply_key.as_deref().unwrap_or(&q.keys.ready))
            .arg(GROUP)
            .arg(entry)
            .arg(&self.name)
            .arg(word)
            .arg(delay)
            .arg(reason)
            .arg(&error)
            .arg(q.config.max_dead)
            .arg(if reply.is_some() && word != "retry" {
                "1"
            } else {
                "0"
            })
            .arg(q.config.max_results)
            .arg(q.config.results_ttl.as_secs().max(1))
            .arg(job.map(|j| j.id.0.to_string()).unwrap_or_default())
            .arg(job.map(|j| j.attempt).unwrap_or(0))
            .arg(if count_failed { "1" } else { "0" });
        for f in &fields {
            inv.arg(f.as_slice());
        }
        let v = q.run("fail", &inv).await?;
        Ok(receipt(&v))
    }

    pub async fn ack(&self, job: &Job, result: &[u8]) -> Result<Receipt> {
        let q = &*self.queue;
        q.config.check_result(result)?;
        let reply_key = job.reply_to.as_deref().map(|c| q.keys.result(c));
        let mut inv = q.scripts.ack.prepare_invoke();
        inv.key(&q.keys.ready)
            .key(&q.keys.stats)
            .key(reply_key.as_deref().unwrap_or(&q.keys.ready))
            .arg(GROUP)
            .arg(&job.entry)
            .arg(if reply_key.is_some() { "1" } else { "0" })
            .arg(job.id.0)
            .arg(job.attempt)
            .arg(result)
            .arg(q.config.max_results)
            .arg(q.config.results_ttl.as_secs().max(1));
        Ok(receipt(&q.run("ack", &inv).await?))
    }

    pub async fn fail(&self, job: &Job, error: &str) -> Result<Receipt> {
        let mode = if job.attempt < job.max_attempts {
            Mode::Retry(duration_ms(job.backoff.delay(job.attempt)))
        } else {
            Mode::Dead(DeadReason::Failed)
        };
        self.settle(&job.entry, Some(job), mode, error, true).await
    }

    pub async fn extend(&self, job: &Job) -> Result<Receipt> {
        let q = &*self.queue;
        let mut inv = q.scripts.extend.prepare_invoke();
        inv.key(&q.keys.ready)
            .arg(GROUP)
            .arg(&job.entry)
            .arg(&self.name);
        Ok(receipt(&q.run("extend", &inv).await?))
    }
}

enum Mode {
    Retry(u64),
    Dead(DeadReason),
    Malformed,
}

fn receipt(v: &Value) -> Receipt {
    if int(v).unwrap_or(0) > 0 {
        Receipt::Applied
    } else {
        Receipt::Stale
    }
}

/// A reader of one results channel.
#[derive(Debug)]
pub(crate) struct RedisResults {
    conn: ConnectionManager,
    key: String,
    last: String,
    retry_for: Duration,
}

impl RedisResults {
    pub async fn next(&mut self, max: usize, wait: Duration) -> Result<Vec<JobResult>> {
        let max = max.clamp(1, MAX_BATCH);
        let deadline = Instant::now() + wait;
        loop {
            let block = deadline
                .saturating_duration_since(Instant::now())
                .min(LONGEST_BLOCK);
            let v = retry("results", self.retry_for, || {
                let mut c = self.conn.clone();
                let mut cmd = ::redis::cmd("XREAD");
                cmd.arg("COUNT").arg(max);
                if !block.is_zero() {
                    cmd.arg("BLOCK").arg(duration_ms(block).max(1));
                }
                cmd.arg("STREAMS").arg(&self.key).arg(&self.last);
                async move { cmd.query_async::<Value>(&mut c).await.map_err(classify) }
            })
            .await?;
            let entries = read_reply(&v);
            if let Some(last) = entries.last() {
                self.last = last.id.clone();
            }
            let out: Vec<JobResult> = entries.iter().filter_map(decode_result).collect();
            if !out.is_empty() || Instant::now() >= deadline {
                return Ok(out);
            }
        }
    }
}
