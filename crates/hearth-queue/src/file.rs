//! The file engine: the queue in one SQLite file (WAL mode) on this host,
//! shared by every process that opens it. The statements are in
//! `store`; this module runs them off the async threads and waits for
//! work.
//!
//! A blocked `reserve` is woken at once by a push from the same handle; a
//! push from another process is seen by polling, first after 1 ms, then
//! doubling up to `LONGEST_POLL` (a poll is one indexed read and takes no
//! lock).

mod store;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::config::{QueueConfig, MAX_BATCH};
use crate::error::{Error, Result};
use crate::job::{now_ms, Job, JobId, JobInfo, JobResult, NewJob, Part, Receipt, Stats};
use crate::retry::{retry, Fail};

/// The `schema` row of table `meta` this version reads and writes; a file
/// of any other is refused (the PHP producer, php/src/Internal/Queue, checks
/// the same).
pub(crate) const SCHEMA_VERSION: &str = "hearth-queue 1";

/// The longest wait between two polls of a blocked `reserve`.
pub const LONGEST_POLL: Duration = Duration::from_millis(20);
/// How often results channels idle past their time-to-live are removed.
const RESULTS_SWEEP: Duration = Duration::from_secs(60);

/// A handle on a queue file.
#[derive(Debug)]
pub(crate) struct FileQueue {
    path: PathBuf,
    conn: Arc<Mutex<Connection>>,
    config: Arc<QueueConfig>,
    pushed: Notify,
    last_sweep: Mutex<Instant>,
}

fn classify(e: rusqlite::Error) -> Fail {
    classify_at(None, e)
}

/// Busy and locked are worth another try; the rest is said with the file.
fn classify_at(path: Option<&Path>, e: rusqlite::Error) -> Fail {
    let why = match path {
        Some(p) => format!("{}: {e}", p.display()),
        None => e.to_string(),
    };
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => Fail::Transient(why),
        _ => Fail::Permanent(Error::engine(why)),
    }
}

impl FileQueue {
    pub async fn open(path: &Path, config: Arc<QueueConfig>) -> Result<Self> {
        let p = path.to_path_buf();
        let busy = config.busy_timeout;
        let conn = retry("open", config.retry_for, || {
            let p = p.clone();
            async move {
                tokio::task::spawn_blocking(move || {
                    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
                        | OpenFlags::SQLITE_OPEN_CREATE
                        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
                    let at = |e| classify_at(Some(&p), e);
                    let conn = Connection::open_with_flags(&p, flags).map_err(at)?;
                    store::init(&conn, busy).map_err(at)?;
                    let schema: String = conn
                        .query_row("SELECT value FROM meta WHERE key = 'schema'", [], |r| {
                            r.get(0)
                        })
                        .map_err(at)?;
                    if schema != SCHEMA_VERSION {
                        return Err(Fail::Permanent(Error::engine(format!(
                            "{}: a queue file of another version ({schema})",
                            p.display()
                        ))));
                    }
                    Ok(conn)
                })
                .await
                .map_err(|e| Fail::Permanent(Error::engine(e.to_string())))?
            }
        })
        .await?;
        let q = FileQueue {
            path: path.to_path_buf(),
            conn: Arc::new(Mutex::new(conn)),
            config,
            pushed: Notify::new(),
            last_sweep: Mutex::new(Instant::now()),
        };
        q.sweep_results().await?;
        Ok(q)
    }

    /// Runs `f` on the connection on a blocking thread, retried while the
    /// file is locked past the busy timeout.
    async fn with<T, F>(&self, what: &str, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: Fn(&Connection, &QueueConfig) -> rusqlite::Result<T> + Send + Sync + 'static,
    {
        let f = Arc::new(f);
        retry(what, self.config.retry_for, || {
            let conn = self.conn.clone();
            let config = self.config.clone();
            let f = f.clone();
            async move {
                tokio::task::spawn_blocking(move || {
                    let conn = conn.lock().unwrap_or_else(|p| p.into_inner());
                    f(&conn, &config).map_err(classify)
                })
                .await
                .map_err(|e| Fail::Permanent(Error::engine(e.to_string())))?
            }
        })
        .await
        .map_err(|e| {
            if e.is_engine() {
                Error::engine(format!("{}: {e}", self.path.display()))
            } else {
                e
            }
        })
    }

    pub async fn push_many(&self, jobs: Vec<NewJob>) -> Result<Vec<JobId>> {
        let jobs = Arc::new(jobs);
        let ids = self.with("push", move |c, _| store::push(c, &jobs)).await?;
        self.pushed.notify_waiters();
        Ok(ids)
    }

    pub async fn stats(&self) -> Result<Stats> {
        self.with("stats", |c, _| store::stats(c)).await
    }

    pub async fn peek(&self, part: Part, limit: usize) -> Result<Vec<JobInfo>> {
        if part == Part::Delayed {
            return Err(Error::invalid(
                "peek shows ready and dead jobs; delayed jobs are counted by stats",
            ));
        }
        let limit = limit.clamp(1, MAX_BATCH);
        self.with("peek", move |c, _| store::peek(c, part, limit))
            .await
    }

    pub async fn retry_dead(&self, id: Option<JobId>) -> Result<u64> {
        let n = self
            .with("retry", move |c, _| store::retry_dead(c, id))
            .await?;
        self.pushed.notify_waiters();
        Ok(n)
    }

    pub async fn delete_dead(&self, id: JobId) -> Result<bool> {
        self.with("delete", move |c, _| store::delete_dead(c, id))
            .await
    }

    pub async fn purge(&self, part: Part) -> Result<u64> {
        self.with("purge", move |c, _| store::purge(c, part)).await
    }

    pub async fn delete_results(&self, channel: &str) -> Result<()> {
        let channel = channel.to_string();
        self.with("delete results", move |c, _| {
            store::delete_results(c, Some(&channel), None)
        })
        .await
        .map(drop)
    }

    async fn sweep_results(&self) -> Result<()> {
        let older = now_ms() as i64 - crate::job::duration_ms(self.config.results_ttl) as i64;
        self.with("sweep results", move |c, _| {
            store::delete_results(c, None, Some(older))
        })
        .await
        .map(drop)
    }

    pub fn consumer(self: &Arc<Self>, name: String) -> FileConsumer {
        FileConsumer {
            queue: self.clone(),
            name: Arc::new(name),
        }
    }

    pub fn results(self: &Arc<Self>, channel: &str) -> FileResults {
        FileResults {
            queue: self.clone(),
            channel: Arc::new(channel.to_string()),
            after: 0,
        }
    }
}

/// One consumer of a queue file.
#[derive(Debug)]
pub(crate) struct FileConsumer {
    queue: Arc<FileQueue>,
    name: Arc<String>,
}

impl FileConsumer {
    pub async fn reserve(&self, max: usize, wait: Duration) -> Result<Vec<Job>> {
        let max = max.clamp(1, MAX_BATCH);
        let q = &*self.queue;
        let deadline = Instant::now() + wait;
        let mut poll = Duration::from_millis(1);
        loop {
            let sweep_due = {
                let mut last = q.last_sweep.lock().unwrap_or_else(|p| p.into_inner());
                let due = last.elapsed() >= RESULTS_SWEEP;
                if due {
                    *last = Instant::now();
                }
                due
            };
            if sweep_due {
                q.sweep_results().await?;
            }
            let woken = q.pushed.notified();
            if q.with("reserve", store::has_work).await? {
                let name = self.name.clone();
                let jobs = q
                    .with("reserve", move |c, cfg| store::reserve(c, cfg, &name, max))
                    .await?;
                if !jobs.is_empty() {
                    return Ok(jobs);
                }
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(Vec::new());
            }
            let nap = poll.min(deadline - now);
            tokio::select! {
                _ = woken => poll = Duration::from_millis(1),
                _ = tokio::time::sleep(nap) => poll = (poll * 2).min(LONGEST_POLL),
            }
        }
    }

    pub async fn ack(&self, job: &Job, result: &[u8]) -> Result<Receipt> {
        self.queue.config.check_result(result)?;
        let job = Arc::new(job.clone());
        let result = Arc::new(result.to_vec());
        self.queue
            .with("ack", move |c, cfg| store::ack(c, cfg, &job, &result))
            .await
    }

    pub async fn fail(&self, job: &Job, error: &str, result: Option<&[u8]>) -> Result<Receipt> {
        if let Some(r) = result {
            self.queue.config.check_result(r)?;
        }
        self.end_attempt(job, error, store::Give::Retry, result)
            .await
    }

    pub async fn reject(&self, job: &Job, error: &str) -> Result<Receipt> {
        self.end_attempt(job, error, store::Give::Up, None).await
    }

    async fn end_attempt(
        &self,
        job: &Job,
        error: &str,
        give: store::Give,
        result: Option<&[u8]>,
    ) -> Result<Receipt> {
        let job = Arc::new(job.clone());
        let error = Arc::new(error.to_string());
        let result = Arc::new(result.map(<[u8]>::to_vec));
        let name = self.name.clone();
        let r = self
            .queue
            .with("fail", move |c, cfg| {
                store::fail(c, cfg, &name, &job, &error, give, result.as_deref())
            })
            .await?;
        self.queue.pushed.notify_waiters();
        Ok(r)
    }

    pub async fn extend(&self, job: &Job) -> Result<Receipt> {
        let job = Arc::new(job.clone());
        let name = self.name.clone();
        self.queue
            .with("extend", move |c, _| store::extend(c, &name, &job))
            .await
    }
}

/// A reader of one results channel of a queue file.
#[derive(Debug)]
pub(crate) struct FileResults {
    queue: Arc<FileQueue>,
    channel: Arc<String>,
    after: i64,
}

impl FileResults {
    pub async fn next(&mut self, max: usize, wait: Duration) -> Result<Vec<JobResult>> {
        let max = max.clamp(1, MAX_BATCH);
        let deadline = Instant::now() + wait;
        let mut poll = Duration::from_millis(1);
        loop {
            let channel = self.channel.clone();
            let after = self.after;
            let rows = self
                .queue
                .with("results", move |c, _| {
                    store::results_after(c, &channel, after, max)
                })
                .await?;
            if let Some((seq, _)) = rows.last() {
                self.after = *seq;
                return Ok(rows.into_iter().map(|(_, r)| r).collect());
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(Vec::new());
            }
            tokio::time::sleep(poll.min(deadline - now)).await;
            poll = (poll * 2).min(LONGEST_POLL);
        }
    }
}
