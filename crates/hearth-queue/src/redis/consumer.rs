//! A consumer of a Redis queue: reserve (promote, reclaim, read), ack,
//! fail, extend.

use std::time::Duration;

use ::redis::aio::ConnectionManager;
use ::redis::Value;
use std::sync::Arc;
use tokio::sync::Mutex;
use tokio::time::Instant;

use super::entry::{self, array, decode_job, encode_job, int, read_reply, Entry};
use super::{classify, is_nogroup, RedisQueue, GROUP, LONGEST_BLOCK, PROMOTE_LIMIT};
use crate::config::MAX_BATCH;
use crate::error::Result;
use crate::job::{duration_ms, truncate, DeadReason, Job, Receipt};
use crate::retry::retry;

/// How often a consumer removes the group's long-gone consumers, and how
/// long gone they must be.
const FORGET_EVERY: Duration = Duration::from_secs(300);
const FORGET_IDLE: Duration = Duration::from_secs(3600);

/// One consumer of a Redis queue (one member of the group).
#[derive(Debug)]
pub(crate) struct RedisConsumer {
    pub(super) queue: Arc<RedisQueue>,
    pub(super) name: String,
    /// The connection `XREADGROUP BLOCK` waits on; one reserve at a time.
    pub(super) block: Mutex<ConnectionManager>,
    /// When this consumer last removed long-gone consumers.
    pub(super) forgot: std::sync::Mutex<Option<Instant>>,
    /// When this consumer last ran the claim script, and when the next
    /// delayed job was then due.
    pub(super) claimed: std::sync::Mutex<Option<(Instant, Option<Instant>)>>,
}

impl RedisConsumer {
    pub async fn reserve(&self, max: usize, wait: Duration) -> Result<Vec<Job>> {
        let max = max.clamp(1, MAX_BATCH);
        let q = &*self.queue;
        let deadline = Instant::now() + wait;
        let conn = self.block.lock().await;
        self.forget_gone().await?;
        loop {
            let (claimed, next_due) = self.claim_when_due(max).await?;
            let jobs = self.accept(claimed).await?;
            if !jobs.is_empty() {
                return Ok(jobs);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let mut block = left.min(q.config.poll_interval).min(LONGEST_BLOCK);
            // A delayed job due before the block would end: Redis ends a
            // BLOCK on its own timer (every 100 ms at the default hz 10),
            // so read without blocking and wait for the due time here.
            let due_soon = next_due.filter(|d| *d < block);
            if due_soon.is_some() {
                block = Duration::ZERO;
            }
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
            if let Some(d) = due_soon {
                let left = deadline.saturating_duration_since(Instant::now());
                tokio::time::sleep(d.min(left)).await;
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
        let n = self.forget(FORGET_IDLE).await?;
        if n > 0 {
            tracing::info!(consumers = n, "removed consumers gone for an hour");
        }
        Ok(())
    }

    /// Removes the group's consumers that hold nothing and were idle for
    /// `idle`; returns how many.
    async fn forget(&self, idle: Duration) -> Result<i64> {
        let q = &*self.queue;
        let mut inv = q.scripts.forget.prepare_invoke();
        inv.key(&q.keys.ready).arg(GROUP).arg(duration_ms(idle));
        Ok(int(&q.run("forget consumers", &inv).await?).unwrap_or(0))
    }

    /// The claim script's work, at most once per poll interval, or sooner
    /// when the delayed job it saw last is due. While jobs flow, a reserve
    /// after every job would otherwise run it for every job (5 of the 10
    /// Redis commands a job costs the queue); what it finds (a due delayed
    /// job, a hold past the visibility timeout) is then found at most one
    /// poll interval later, the lateness a blocked read already allows.
    async fn claim_when_due(&self, max: usize) -> Result<(Vec<(Entry, u32)>, Option<Duration>)> {
        let now = Instant::now();
        let last = *self.claimed.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((at, due)) = last {
            let recent = now.duration_since(at) < self.queue.config.poll_interval;
            if recent && due.is_none_or(|d| d > now) {
                return Ok((Vec::new(), due.map(|d| d - now)));
            }
        }
        let (claimed, next_due) = self.claim(max).await?;
        *self.claimed.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((now, next_due.map(|d| now + d)));
        Ok((claimed, next_due))
    }

    /// Moves due delayed jobs to the stream and claims expired holds;
    /// also says when the next delayed job is due, if any.
    async fn claim(&self, max: usize) -> Result<(Vec<(Entry, u32)>, Option<Duration>)> {
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
                return Ok((Vec::new(), None));
            }
            other => other?,
        };
        let reply = array(&v);
        let next_due = reply
            .get(1)
            .and_then(int)
            .and_then(|ms| u64::try_from(ms).ok())
            .map(Duration::from_millis);
        let claimed = reply
            .first()
            .map(array)
            .unwrap_or_default()
            .iter()
            .filter_map(|c| {
                let parts = array(c);
                let e = entry::entry(&Value::Array(parts.get(..2)?.to_vec()))?;
                let n = parts.get(2).and_then(int).unwrap_or(1).max(1);
                Some((e, u32::try_from(n).unwrap_or(u32::MAX)))
            })
            .collect();
        Ok((claimed, next_due))
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
                        None,
                    )
                    .await?;
                }
                Ok(job) => jobs.push(job),
                Err(why) => {
                    tracing::warn!(entry = %e.id, error = %why, "malformed job moved to dead-letter");
                    self.settle(&e.id, None, Mode::Malformed, &why, false, None)
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
        result: Option<&[u8]>,
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
            .arg(if count_failed { "1" } else { "0" })
            .arg(result.unwrap_or_default());
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

    pub async fn fail(&self, job: &Job, error: &str, result: Option<&[u8]>) -> Result<Receipt> {
        if let Some(r) = result {
            self.queue.config.check_result(r)?;
        }
        let mode = if job.attempt < job.max_attempts {
            Mode::Retry(duration_ms(job.backoff.delay(job.attempt)))
        } else {
            Mode::Dead(DeadReason::Failed)
        };
        self.settle(&job.entry, Some(job), mode, error, true, result)
            .await
    }

    pub async fn reject(&self, job: &Job, error: &str) -> Result<Receipt> {
        let mode = Mode::Dead(DeadReason::Rejected);
        self.settle(&job.entry, Some(job), mode, error, true, None)
            .await
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use crate::{NewJob, QueueConfig, QueueUrl};

    /// Consumers that come and go do not pile up in the group: those
    /// holding nothing are removed, one holding a job stays.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn gone_consumers_are_removed_from_the_group() {
        let server = crate::test_support::RedisServer::start();
        let url = format!("redis://127.0.0.1:{}/forget", server.port);
        let QueueUrl::Redis(r) = QueueUrl::parse(&url).expect("url") else {
            unreachable!()
        };
        let q = Arc::new(
            super::RedisQueue::open(&r, Arc::new(QueueConfig::default()))
                .await
                .expect("open"),
        );
        q.push_many(&[NewJob::new("x")]).await.expect("push");
        let holder = q.consumer("holder".into()).expect("consumer");
        let held = holder
            .reserve(1, Duration::from_secs(10))
            .await
            .expect("reserve");
        assert_eq!(held.len(), 1);
        // A consumer joins the group when it first takes a job.
        for name in ["gone-1", "gone-2"] {
            q.push_many(&[NewJob::new("y")]).await.expect("push");
            let c = q.consumer(name.into()).expect("consumer");
            let jobs = c
                .reserve(1, Duration::from_secs(10))
                .await
                .expect("reserve");
            assert_eq!(
                c.ack(&jobs[0], b"").await.expect("ack"),
                crate::Receipt::Applied
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(
            holder
                .forget(Duration::from_millis(1))
                .await
                .expect("forget"),
            2
        );
        assert_eq!(
            holder
                .forget(Duration::from_millis(1))
                .await
                .expect("forget"),
            0
        );
        assert_eq!(
            holder.ack(&held[0], b"").await.expect("ack"),
            crate::Receipt::Applied
        );
        assert_eq!(
            holder
                .forget(Duration::from_secs(3600))
                .await
                .expect("forget"),
            0
        );
    }
}
