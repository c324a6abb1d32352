//! The Redis engine: a stream with a consumer group per queue, a sorted set
//! for delayed jobs and backoffs, a dead-letter stream and a results stream
//! per reply-to channel, each change made by one Lua script
//! (`scripts` lists the keys and fields). A consumer is in `consumer`,
//! a results reader in `results`.
//!
//! Connections are redis-rs connection managers: they reconnect with
//! backoff by themselves; a call that fails because Redis is away is tried
//! again (see `crate::retry`) for `retry_for`, so an ack made while Redis
//! restarts is applied when it is back. Blocking reads (`XREADGROUP
//! BLOCK`, `XREAD BLOCK`) have a connection of their own, so they never
//! hold up the acks sharing the queue's connection.

mod consumer;
mod entry;
mod results;
mod scripts;

pub(crate) use consumer::RedisConsumer;
pub(crate) use results::RedisResults;

use std::sync::Arc;
use std::time::Duration;

use ::redis::aio::{ConnectionManager, ConnectionManagerConfig};
use ::redis::{
    ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo, RedisError,
    RetryMethod, ScriptInvocation, Value,
};
use tokio::sync::Mutex;

use crate::config::{QueueConfig, MAX_BATCH};
use crate::error::{Error, Result};
use crate::job::{duration_ms, JobId, JobInfo, NewJob, Part, Stats};
use crate::retry::{retry, Fail};
use crate::url::RedisUrl;
use entry::{array, info, int, string};
use scripts::Scripts;

/// The consumer group every consumer of a queue joins.
const GROUP: &str = "hearth";
/// Jobs, and payload bytes, pushed per script call at most: a large batch
/// is cut so one call never holds Redis for long.
const PUSH_CHUNK: usize = 500;
const PUSH_CHUNK_BYTES: usize = 8 << 20;
/// Delayed jobs moved to the stream per look.
const PROMOTE_LIMIT: usize = 1000;
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
        let (client, conn) = connect(url)?;
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

    /// Whether the queue at `url` has any of its keys, creating none.
    pub async fn exists(url: &RedisUrl, retry_for: Duration) -> Result<bool> {
        let (_, conn) = connect(url)?;
        let keys = Keys::new(&url.name);
        let found: i64 = retry("exists", retry_for, || async {
            ::redis::cmd("EXISTS")
                .arg(&keys.ready)
                .arg(&keys.delayed)
                .arg(&keys.dead)
                .arg(&keys.deadix)
                .arg(&keys.stats)
                .arg(&keys.seq)
                .query_async::<i64>(&mut conn.clone())
                .await
                .map_err(classify)
        })
        .await?;
        Ok(found > 0)
    }
}

/// A client for `url`, and a connection manager that connects when first
/// used.
fn connect(url: &RedisUrl) -> Result<(::redis::Client, ConnectionManager)> {
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
    Ok((client, conn))
}

impl RedisQueue {
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
        for chunk in chunks(jobs) {
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

    pub async fn delete_dead(&self, id: JobId) -> Result<bool> {
        let mut inv = self.scripts.delete_dead.prepare_invoke();
        inv.key(&self.keys.dead).key(&self.keys.deadix).arg(id.0);
        let v = self.run("delete", &inv).await?;
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
            claimed: std::sync::Mutex::new(None),
        })
    }
}

/// `jobs` cut into runs of at most [`PUSH_CHUNK`] jobs and about
/// [`PUSH_CHUNK_BYTES`] of payload (a run always has one job at least).
fn chunks(jobs: &[NewJob]) -> Vec<&[NewJob]> {
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, j) in jobs.iter().enumerate() {
        if i > start && (i - start == PUSH_CHUNK || bytes + j.payload.len() > PUSH_CHUNK_BYTES) {
            out.push(&jobs[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += j.payload.len();
    }
    if start < jobs.len() {
        out.push(&jobs[start..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_are_cut_by_count_and_by_bytes() {
        let small: Vec<NewJob> = (0..1201).map(|_| NewJob::new(vec![0u8; 10])).collect();
        let lens: Vec<usize> = chunks(&small).iter().map(|c| c.len()).collect();
        assert_eq!(lens, vec![500, 500, 201]);
        let big: Vec<NewJob> = (0..20).map(|_| NewJob::new(vec![0u8; 1 << 20])).collect();
        let lens: Vec<usize> = chunks(&big).iter().map(|c| c.len()).collect();
        assert_eq!(lens, vec![8, 8, 4]);
        let huge = vec![NewJob::new(vec![0u8; 9 << 20])];
        assert_eq!(chunks(&huge).len(), 1);
        assert!(chunks(&[]).is_empty());
    }
}
