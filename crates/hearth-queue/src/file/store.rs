//! The embedded queue's statements, each a transaction on one connection
//! (`BEGIN IMMEDIATE` for every change, so two processes never both decide
//! to take the same job).

use std::time::Duration;

use rusqlite::types::ValueRef;
use rusqlite::{params, Connection, OptionalExtension, Row, TransactionBehavior};

use crate::backoff::Backoff;
use crate::config::QueueConfig;
use crate::job::{
    duration_ms, from_ms, now_ms, truncate, DeadReason, Job, JobId, JobInfo, JobResult, NewJob,
    Outcome, Part, Receipt, Stats,
};
use crate::url::valid_name;

pub(crate) type SqlResult<T> = rusqlite::Result<T>;

const COLUMNS: &str = "id, payload, attempts, max_attempts, backoff_ms, backoff_max_ms, \
                       reply_to, enqueued_at, last_error, dead_reason";

pub(crate) fn init(conn: &Connection, busy: Duration) -> SqlResult<()> {
    conn.busy_timeout(busy)?;
    // WAL: readers never wait for the writer, and a commit is one append.
    // synchronous=NORMAL: a commit survives the process (kill -9), not a
    // power cut of the last moments, as Redis's appendfsync everysec.
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    let tx = begin(conn)?;
    tx.execute_batch(include_str!("schema.sql"))?;
    tx.commit()
}

fn begin(conn: &Connection) -> SqlResult<rusqlite::Transaction<'_>> {
    rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate)
}

fn bump(conn: &Connection, name: &str, by: i64) -> SqlResult<()> {
    conn.execute(
        "INSERT INTO counters (name, value) VALUES (?1, ?2) \
         ON CONFLICT (name) DO UPDATE SET value = value + ?2",
        params![name, by],
    )?;
    Ok(())
}

pub(crate) fn push(conn: &Connection, jobs: &[NewJob]) -> SqlResult<Vec<JobId>> {
    let tx = begin(conn)?;
    let now = now_ms() as i64;
    let mut ids = Vec::with_capacity(jobs.len());
    {
        let mut ins = tx.prepare_cached(
            "INSERT INTO jobs (state, payload, attempts, max_attempts, backoff_ms, \
             backoff_max_ms, reply_to, enqueued_at, due_at) VALUES (0, ?, 0, ?, ?, ?, ?, ?, ?)",
        )?;
        for j in jobs {
            ins.execute(params![
                j.payload,
                j.max_attempts,
                j.backoff.base_ms() as i64,
                j.backoff.max_ms() as i64,
                j.reply_to,
                now,
                now.saturating_add(duration_ms(j.delay) as i64),
            ])?;
            ids.push(JobId(tx.last_insert_rowid() as u64));
        }
    }
    bump(&tx, "pushed", jobs.len() as i64)?;
    tx.commit()?;
    Ok(ids)
}

/// A row read as a job; the error says why it is malformed.
fn decode(row: &Row<'_>) -> SqlResult<(i64, Result<Job, String>)> {
    let id: i64 = row.get(0)?;
    let int = |i: usize, name: &str| -> Result<i64, String> {
        match row.get_ref(i) {
            Ok(ValueRef::Integer(n)) if n >= 0 => Ok(n),
            _ => Err(format!("column {name} is not a count")),
        }
    };
    let job = (|| {
        let payload = match row.get_ref(1) {
            Ok(ValueRef::Blob(b)) | Ok(ValueRef::Text(b)) => b.to_vec(),
            _ => return Err("column payload is missing".to_string()),
        };
        let attempts = u32::try_from(int(2, "attempts")?).map_err(|e| e.to_string())?;
        let max = u32::try_from(int(3, "max_attempts")?).map_err(|e| e.to_string())?;
        if max == 0 {
            return Err("column max_attempts is 0".into());
        }
        let backoff = Backoff::from_ms(
            int(4, "backoff_ms")? as u64,
            int(5, "backoff_max_ms")? as u64,
        );
        let reply_to = match row.get_ref(6) {
            Ok(ValueRef::Null) => None,
            Ok(ValueRef::Text(t)) => match std::str::from_utf8(t) {
                Ok(s) if valid_name(s) => Some(s.to_string()),
                _ => return Err("column reply_to is not a channel name".into()),
            },
            _ => return Err("column reply_to is not text".into()),
        };
        let at = int(7, "enqueued_at")? as u64;
        let last_error = row.get::<_, Option<String>>(8).ok().flatten();
        Ok(Job {
            id: JobId(id as u64),
            payload,
            attempt: attempts,
            max_attempts: max,
            backoff,
            reply_to,
            enqueued_at: from_ms(at),
            last_error,
            entry: String::new(),
        })
    })();
    Ok((id, job))
}

fn record(
    conn: &Connection,
    cfg: &QueueConfig,
    channel: &str,
    id: JobId,
    attempt: u32,
    outcome: &Outcome,
    last_result: Option<&[u8]>,
) -> SqlResult<()> {
    let now = now_ms() as i64;
    match outcome {
        Outcome::Done(r) => conn.execute(
            "INSERT INTO results (channel, job_id, attempt, status, result, created_at) \
             VALUES (?, ?, ?, 'done', ?, ?)",
            params![channel, id.0 as i64, attempt, r, now],
        )?,
        Outcome::Dead { reason, error } => conn.execute(
            "INSERT INTO results \
             (channel, job_id, attempt, status, reason, error, result, created_at) \
             VALUES (?, ?, ?, 'dead', ?, ?, ?, ?)",
            params![
                channel,
                id.0 as i64,
                attempt,
                reason.as_str(),
                error,
                last_result,
                now
            ],
        )?,
    };
    conn.execute(
        "DELETE FROM results WHERE channel = ?1 AND seq <= \
         (SELECT seq FROM results WHERE channel = ?1 ORDER BY seq DESC LIMIT 1 OFFSET ?2)",
        params![channel, cfg.max_results as i64],
    )?;
    Ok(())
}

/// Moves job `id` (or a malformed row) to the dead-letter store.
fn kill(
    conn: &Connection,
    cfg: &QueueConfig,
    id: i64,
    job: Option<&Job>,
    reason: DeadReason,
    error: &str,
    last_result: Option<&[u8]>,
) -> SqlResult<()> {
    let error = truncate(error, cfg.max_error);
    conn.execute(
        "UPDATE jobs SET state = 2, consumer = NULL, dead_reason = ?, last_error = ?, \
         dead_at = ? WHERE id = ?",
        params![reason.as_str(), error, now_ms() as i64, id],
    )?;
    bump(conn, "died", 1)?;
    if let Some(j) = job {
        if let Some(c) = &j.reply_to {
            let outcome = Outcome::Dead { reason, error };
            record(conn, cfg, c, j.id, j.attempt, &outcome, last_result)?;
        }
    }
    let dead: i64 = conn.query_row("SELECT COUNT(*) FROM jobs WHERE state = 2", [], |r| {
        r.get(0)
    })?;
    let over = dead - cfg.max_dead as i64;
    if over > 0 {
        conn.execute(
            "DELETE FROM jobs WHERE id IN \
             (SELECT id FROM jobs WHERE state = 2 ORDER BY dead_at, id LIMIT ?)",
            params![over],
        )?;
    }
    Ok(())
}

/// Takes up to `max` jobs for `consumer`: expired holds first (attempt + 1),
/// then ready jobs. Malformed rows and jobs past their last attempt go to
/// the dead-letter store on the way.
pub(crate) fn reserve(
    conn: &Connection,
    cfg: &QueueConfig,
    consumer: &str,
    max: usize,
) -> SqlResult<Vec<Job>> {
    let now = now_ms() as i64;
    let expired_before = now - duration_ms(cfg.visibility_timeout) as i64;
    let tx = begin(conn)?;
    let mut jobs = Vec::new();
    let expired: Vec<(i64, Result<Job, String>)> = {
        let mut st = tx.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM jobs WHERE state = 1 AND touched_at <= ? \
             ORDER BY touched_at LIMIT ?"
        ))?;
        let rows = st.query_map(params![expired_before, max as i64], decode)?;
        rows.collect::<SqlResult<_>>()?
    };
    for (id, job) in expired {
        match job {
            Err(why) => kill(&tx, cfg, id, None, DeadReason::Malformed, &why, None)?,
            Ok(mut job) if job.attempt >= job.max_attempts => {
                let error = job
                    .last_error
                    .clone()
                    .unwrap_or_else(|| "its consumer was lost".into());
                job.attempt += 1;
                tracing::warn!(job = %job.id, "job lost on its last attempt, moved to dead-letter");
                kill(&tx, cfg, id, Some(&job), DeadReason::Lost, &error, None)?;
            }
            Ok(mut job) => {
                tx.execute(
                    "UPDATE jobs SET attempts = attempts + 1, consumer = ?, touched_at = ? \
                     WHERE id = ?",
                    params![consumer, now, id],
                )?;
                bump(&tx, "retried", 1)?;
                job.attempt += 1;
                jobs.push(job);
            }
        }
    }
    if jobs.len() < max {
        let taken: Vec<(i64, Result<Job, String>)> = {
            let mut st = tx.prepare_cached(&format!(
                "UPDATE jobs SET state = 1, attempts = attempts + 1, consumer = ?1, \
                 touched_at = ?2 WHERE id IN (SELECT id FROM jobs WHERE state = 0 \
                 AND due_at <= ?2 ORDER BY due_at, id LIMIT ?3) RETURNING {COLUMNS}"
            ))?;
            let rows = st.query_map(params![consumer, now, (max - jobs.len()) as i64], decode)?;
            rows.collect::<SqlResult<_>>()?
        };
        for (id, job) in taken {
            match job {
                Ok(job) => jobs.push(job),
                Err(why) => {
                    tracing::warn!(job = id, error = %why, "malformed job moved to dead-letter");
                    kill(&tx, cfg, id, None, DeadReason::Malformed, &why, None)?;
                }
            }
        }
        // RETURNING gives rows in no set order.
        jobs.sort_by_key(|j| j.id);
    }
    tx.commit()?;
    Ok(jobs)
}

/// Whether a reserve could find anything now (a read, no lock).
pub(crate) fn has_work(conn: &Connection, cfg: &QueueConfig) -> SqlResult<bool> {
    let now = now_ms() as i64;
    let expired_before = now - duration_ms(cfg.visibility_timeout) as i64;
    let mut st = conn.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM jobs WHERE state = 0 AND due_at <= ?1) \
         OR EXISTS (SELECT 1 FROM jobs WHERE state = 1 AND touched_at <= ?2)",
    )?;
    st.query_row(params![now, expired_before], |r| r.get(0))
}

pub(crate) fn ack(
    conn: &Connection,
    cfg: &QueueConfig,
    job: &Job,
    result: &[u8],
) -> SqlResult<Receipt> {
    let tx = begin(conn)?;
    let n = tx.execute(
        "DELETE FROM jobs WHERE id = ? AND state = 1",
        params![job.id.0 as i64],
    )?;
    if n == 0 {
        return Ok(Receipt::Stale);
    }
    bump(&tx, "done", 1)?;
    if let Some(c) = &job.reply_to {
        record(
            &tx,
            cfg,
            c,
            job.id,
            job.attempt,
            &Outcome::Done(result.to_vec()),
            None,
        )?;
    }
    tx.commit()?;
    Ok(Receipt::Applied)
}

/// What a failed attempt leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Give {
    /// Another attempt after the backoff, or the dead-letter store after
    /// the last.
    Retry,
    /// The dead-letter store now, as rejected.
    Up,
}

pub(crate) fn fail(
    conn: &Connection,
    cfg: &QueueConfig,
    consumer: &str,
    job: &Job,
    error: &str,
    give: Give,
    result: Option<&[u8]>,
) -> SqlResult<Receipt> {
    let error = truncate(error, cfg.max_error);
    let tx = begin(conn)?;
    let held: Option<i64> = tx
        .query_row(
            "SELECT attempts FROM jobs WHERE id = ? AND state = 1 AND consumer = ?",
            params![job.id.0 as i64, consumer],
            |r| r.get(0),
        )
        .optional()?;
    if held.is_none() {
        return Ok(Receipt::Stale);
    }
    bump(&tx, "failed", 1)?;
    if give == Give::Up {
        kill(
            &tx,
            cfg,
            job.id.0 as i64,
            Some(job),
            DeadReason::Rejected,
            &error,
            None,
        )?;
    } else if job.attempt < job.max_attempts {
        let due = now_ms().saturating_add(duration_ms(job.backoff.delay(job.attempt)));
        tx.execute(
            "UPDATE jobs SET state = 0, consumer = NULL, touched_at = NULL, last_error = ?, \
             due_at = ? WHERE id = ?",
            params![error, due as i64, job.id.0 as i64],
        )?;
        bump(&tx, "retried", 1)?;
    } else {
        kill(
            &tx,
            cfg,
            job.id.0 as i64,
            Some(job),
            DeadReason::Failed,
            &error,
            result,
        )?;
    }
    tx.commit()?;
    Ok(Receipt::Applied)
}

pub(crate) fn extend(conn: &Connection, consumer: &str, job: &Job) -> SqlResult<Receipt> {
    let n = conn.execute(
        "UPDATE jobs SET touched_at = ? WHERE id = ? AND state = 1 AND consumer = ?",
        params![now_ms() as i64, job.id.0 as i64, consumer],
    )?;
    Ok(if n > 0 {
        Receipt::Applied
    } else {
        Receipt::Stale
    })
}

pub(crate) fn stats(conn: &Connection) -> SqlResult<Stats> {
    let now = now_ms() as i64;
    let tx = conn.unchecked_transaction()?;
    let count = |sql: &str| -> SqlResult<u64> {
        tx.query_row(sql, params![now], |r| r.get::<_, i64>(0))
            .map(|n| n.max(0) as u64)
    };
    let mut s = Stats {
        ready: count("SELECT COUNT(*) FROM jobs WHERE state = 0 AND due_at <= ?")?,
        delayed: count("SELECT COUNT(*) FROM jobs WHERE state = 0 AND due_at > ?")?,
        reserved: count("SELECT COUNT(*) FROM jobs WHERE state = 1 AND ? IS NOT NULL")?,
        dead: count("SELECT COUNT(*) FROM jobs WHERE state = 2 AND ? IS NOT NULL")?,
        ..Stats::default()
    };
    let oldest: Option<i64> = tx.query_row(
        "SELECT MIN(due_at) FROM jobs WHERE state = 0 AND due_at <= ?",
        params![now],
        |r| r.get(0),
    )?;
    s.oldest_ready_age = oldest.map(|t| Duration::from_millis(now.saturating_sub(t).max(0) as u64));
    let mut st = tx.prepare("SELECT name, value FROM counters")?;
    let rows = st.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?;
    for row in rows {
        let (k, v) = row?;
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
    Ok(s)
}

pub(crate) fn peek(conn: &Connection, part: Part, limit: usize) -> SqlResult<Vec<JobInfo>> {
    let sql = match part {
        Part::Dead => format!("SELECT {COLUMNS} FROM jobs WHERE state = 2 AND ?1 IS NOT NULL ORDER BY dead_at, id LIMIT ?2"),
        _ => format!("SELECT {COLUMNS} FROM jobs WHERE state = 0 AND due_at <= ?1 ORDER BY due_at, id LIMIT ?2"),
    };
    let mut st = conn.prepare(&sql)?;
    let rows = st.query_map(params![now_ms() as i64, limit as i64], |r| {
        let blob = |i: usize| match r.get_ref(i) {
            Ok(ValueRef::Blob(b)) | Ok(ValueRef::Text(b)) => b.to_vec(),
            _ => Vec::new(),
        };
        let num = |i: usize| r.get::<_, i64>(i).unwrap_or(0).max(0);
        Ok(JobInfo {
            id: JobId(num(0) as u64),
            payload: blob(1),
            attempts: num(2) as u32,
            max_attempts: num(3) as u32,
            reply_to: r.get::<_, Option<String>>(6).ok().flatten(),
            enqueued_at: from_ms(num(7) as u64),
            last_error: r.get::<_, Option<String>>(8).ok().flatten(),
            dead_reason: r
                .get::<_, Option<String>>(9)
                .ok()
                .flatten()
                .map(|w| DeadReason::parse(&w)),
        })
    })?;
    rows.collect()
}

pub(crate) fn retry_dead(conn: &Connection, id: Option<JobId>) -> SqlResult<u64> {
    let tx = begin(conn)?;
    let set = "UPDATE jobs SET state = 0, attempts = 0, due_at = ?1, consumer = NULL, \
               touched_at = NULL, dead_reason = NULL, dead_at = NULL WHERE state = 2";
    let n = match id {
        Some(id) => tx.execute(
            &format!("{set} AND id = ?2"),
            params![now_ms() as i64, id.0 as i64],
        )?,
        None => tx.execute(set, params![now_ms() as i64])?,
    };
    tx.commit()?;
    Ok(n as u64)
}

/// Removes dead job `id`; a job with that id in any other state stays.
/// Whether one was removed.
pub(crate) fn delete_dead(conn: &Connection, id: JobId) -> SqlResult<bool> {
    let tx = begin(conn)?;
    let n = tx.execute(
        "DELETE FROM jobs WHERE id = ? AND state = 2",
        params![id.0 as i64],
    )?;
    tx.commit()?;
    Ok(n > 0)
}

pub(crate) fn purge(conn: &Connection, part: Part) -> SqlResult<u64> {
    let sql = match part {
        Part::Ready => "DELETE FROM jobs WHERE state = 0 AND due_at <= ?",
        Part::Delayed => "DELETE FROM jobs WHERE state = 0 AND due_at > ?",
        Part::Dead => "DELETE FROM jobs WHERE state = 2 AND ? IS NOT NULL",
    };
    let tx = begin(conn)?;
    let n = tx.execute(sql, params![now_ms() as i64])?;
    tx.commit()?;
    Ok(n as u64)
}

pub(crate) fn results_after(
    conn: &Connection,
    channel: &str,
    after: i64,
    max: usize,
) -> SqlResult<Vec<(i64, JobResult)>> {
    let mut st = conn.prepare_cached(
        "SELECT seq, job_id, attempt, status, result, reason, error FROM results \
         WHERE channel = ? AND seq > ? ORDER BY seq LIMIT ?",
    )?;
    let rows = st.query_map(params![channel, after, max as i64], |r| {
        let result = r.get::<_, Option<Vec<u8>>>(4)?;
        let (outcome, last_result) = if r.get::<_, String>(3)? == "done" {
            (Outcome::Done(result.unwrap_or_default()), None)
        } else {
            let dead = Outcome::Dead {
                reason: DeadReason::parse(&r.get::<_, Option<String>>(5)?.unwrap_or_default()),
                error: r.get::<_, Option<String>>(6)?.unwrap_or_default(),
            };
            (dead, result)
        };
        Ok((
            r.get(0)?,
            JobResult {
                id: JobId(r.get::<_, i64>(1)? as u64),
                attempt: r.get(2)?,
                outcome,
                last_result,
            },
        ))
    })?;
    rows.collect()
}

pub(crate) fn delete_results(
    conn: &Connection,
    channel: Option<&str>,
    older_than: Option<i64>,
) -> SqlResult<u64> {
    let tx = begin(conn)?;
    let n = match (channel, older_than) {
        (Some(c), _) => tx.execute("DELETE FROM results WHERE channel = ?", params![c])?,
        (None, Some(t)) => tx.execute(
            "DELETE FROM results WHERE channel IN \
             (SELECT channel FROM results GROUP BY channel HAVING MAX(created_at) < ?)",
            params![t],
        )?,
        (None, None) => 0,
    };
    tx.commit()?;
    Ok(n as u64)
}

#[cfg(test)]
mod tests {
    /// The PHP producer (`Hearth\Queue`, php/src) creates a queue file
    /// with a copy of schema.sql, kept in a nowdoc, and accepts the same
    /// version: both must be the crate's, or a file PHP created first
    /// would not be the crate's layout.
    #[test]
    fn the_php_producer_creates_the_crates_schema() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../php/src/Internal/Queue/FileSchema.php"
        );
        let php = std::fs::read_to_string(path).expect("read the PHP copy of schema.sql");
        let copy = php
            .split_once("<<<'SQL'\n")
            .and_then(|(_, rest)| rest.split_once("\nSQL;"))
            .map(|(text, _)| text)
            .expect("a nowdoc <<<'SQL' ... SQL; in FileSchema.php");
        assert!(
            copy == include_str!("schema.sql"),
            "{path} differs from src/file/schema.sql: copy it again"
        );
        let version = format!("const VERSION = '{}';", super::super::SCHEMA_VERSION);
        assert!(php.contains(&version), "{path} lacks {version}");
        assert!(include_str!("schema.sql").contains(&format!("'{}'", super::super::SCHEMA_VERSION)));
    }
}
