//! The PHP producer (`Hearth\Queue`, php/src) against this crate, on a
//! real redis-server and a SQLite file: jobs pushed by `php` are stored as
//! this crate stores them, and are reserved, failed and acked by it with
//! the options PHP set (attempts, backoff, delay, reply-to).
//!
//! PHP is `php` on PATH (HEARTH_TEST_PHP names another); it runs
//! tests/fixtures/push.php, which pushes the jobs it reads on stdin.

mod suite;
mod support;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use hearth_queue::{Backoff, DeadReason, Job, JobId, NewJob, Outcome, Queue, Receipt};
use suite::{Env, PATIENCE};

/// Pushes `jobs` (a JSON list, see push.php) with PHP; returns the ids.
fn php_push(url: &str, jobs: &str) -> Vec<JobId> {
    let php = std::env::var("HEARTH_TEST_PHP").unwrap_or_else(|_| "php".into());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/push.php");
    let mut child = Command::new(&php)
        .arg(script)
        .arg(url)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{php} (PHP, with pdo_sqlite) is needed: {e}"));
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(jobs.as_bytes())
        .expect("write jobs");
    let out = child.wait_with_output().expect("php runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "php push.php failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .trim()
        .split(',')
        .map(|id| JobId(id.parse().unwrap_or_else(|_| panic!("an id: {stdout:?}"))))
        .collect()
}

/// Reserves until one job comes (or PATIENCE passes); with the time it came.
async fn reserve_one(c: &hearth_queue::Consumer) -> (Job, SystemTime) {
    let give_up = Instant::now() + PATIENCE;
    loop {
        let mut jobs = c
            .reserve(1, Duration::from_millis(200))
            .await
            .expect("reserve");
        if let Some(j) = jobs.pop() {
            return (j, SystemTime::now());
        }
        assert!(Instant::now() < give_up, "no job came");
    }
}

async fn results(q: &Queue, channel: &str, n: usize) -> Vec<hearth_queue::JobResult> {
    let mut r = q.results(channel).expect("results");
    let mut out = Vec::new();
    let give_up = Instant::now() + PATIENCE;
    while out.len() < n {
        out.extend(
            r.next(100, Duration::from_millis(200))
                .await
                .expect("results"),
        );
        assert!(Instant::now() < give_up, "{} of {n} results", out.len());
    }
    out
}

fn text(b: &[u8]) -> &str {
    std::str::from_utf8(b).expect("UTF-8")
}

/// What the crate stores for each job of the queue, without what differs
/// between two pushes of one job (its id, the time it was pushed): Redis
/// entries' fields in order (delayed ones unpacked, with their delay), or
/// the file's rows.
async fn stored(env: &Env) -> Vec<Vec<(String, String)>> {
    match env {
        Env::Redis { server, name } => {
            let client =
                redis::Client::open(format!("redis://127.0.0.1:{}/", server.port)).expect("client");
            let mut c = client
                .get_multiplexed_async_connection()
                .await
                .expect("connect");
            // Ready entries, then delayed ones with their due time less
            // their push time, all as field lists.
            let lists: Vec<Vec<Vec<u8>>> = redis::cmd("EVAL")
                .arg(
                    r"
local out = {}
for _, e in ipairs(redis.call('XRANGE', KEYS[1], '-', '+')) do out[#out + 1] = e[2] end
local d = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
for i = 1, #d, 2 do
  local f = cmsgpack.unpack(d[i])
  local at = 0
  for j = 1, #f, 2 do if f[j] == 'at' then at = tonumber(f[j + 1]) end end
  f[#f + 1] = 'due-at'; f[#f + 1] = tostring(tonumber(d[i + 1]) - at)
  out[#out + 1] = f
end
return out",
                )
                .arg(2)
                .arg(format!("hearth:{{{name}}}:ready"))
                .arg(format!("hearth:{{{name}}}:delayed"))
                .query_async(&mut c)
                .await
                .expect("read the stored jobs");
            lists
                .into_iter()
                .map(|f| {
                    f.chunks(2)
                        .map(|kv| (text(&kv[0]).to_string(), text(&kv[1]).to_string()))
                        .filter(|(k, _)| k != "id" && k != "at")
                        .collect()
                })
                .collect()
        }
        Env::File { dir } => {
            let c = rusqlite::Connection::open(dir.path().join("queue.db")).expect("open");
            let mut st = c
                .prepare(
                    "SELECT state, typeof(payload), CAST(payload AS TEXT), attempts, max_attempts, \
                     backoff_ms, backoff_max_ms, quote(reply_to), due_at - enqueued_at, \
                     quote(consumer), quote(touched_at), quote(last_error), quote(dead_reason), \
                     quote(dead_at) FROM jobs ORDER BY id",
                )
                .expect("prepare");
            let names = [
                "state",
                "type",
                "payload",
                "attempts",
                "max_attempts",
                "backoff_ms",
                "backoff_max_ms",
                "reply_to",
                "due-at",
                "consumer",
                "touched_at",
                "last_error",
                "dead_reason",
                "dead_at",
            ];
            let rows = st
                .query_map([], |r| {
                    (0..names.len())
                        .map(|i| {
                            let v: rusqlite::types::Value = r.get(i)?;
                            Ok((names[i].to_string(), format!("{v:?}")))
                        })
                        .collect::<rusqlite::Result<Vec<_>>>()
                })
                .expect("query");
            rows.collect::<rusqlite::Result<_>>().expect("rows")
        }
    }
}

/// A PHP job and a delayed shell task pushed by PHP are stored field for
/// field as the same jobs pushed by the crate (PHP first, so on a file
/// the crate opens the file PHP created).
async fn php_jobs_are_stored_as_the_crate_stores_them(env: Env) {
    let ids = php_push(
        &env.url(),
        r#"[{"call": "App\\Mail::send", "args": ["ann@example.com"], "attempts": 5,
             "backoff": 0.25, "backoff_max": 10, "reply_to": "php-1", "timeout": 30},
            {"cmd": "convert a.png b.jpg", "delay": 30}]"#,
    );
    assert_eq!(ids, vec![JobId(1), JobId(2)]);
    let q = env.open(suite::config()).await;
    let ours = q
        .push_many(vec![
            NewJob::new(
                r#"{"call":"App\\Mail::send","args":["ann@example.com"],"timeout":30}"#.as_bytes(),
            )
            .attempts(5)
            .backoff(Backoff::exponential(
                Duration::from_millis(250),
                Duration::from_secs(10),
            ))
            .reply_to("php-1"),
            NewJob::new(r#"{"cmd":"convert a.png b.jpg"}"#.as_bytes())
                .delay(Duration::from_secs(30)),
        ])
        .await
        .expect("push");
    assert_eq!(ours, vec![JobId(3), JobId(4)], "one sequence of ids");
    let mut rows = stored(&env).await;
    // Redis keeps ready and delayed jobs apart: sort by payload.
    rows.sort();
    assert_eq!(rows.len(), 4);
    assert_eq!(
        rows[0], rows[1],
        "PHP's job and the crate's are stored alike"
    );
    assert_eq!(
        rows[2], rows[3],
        "PHP's job and the crate's are stored alike"
    );
    let flat = format!("{rows:?}");
    assert!(flat.contains("30000"), "the delay is kept: {flat}");
    assert!(
        flat.contains("Mail::send") && flat.contains("php-1"),
        "{flat}"
    );
}

#[tokio::test]
async fn redis_php_jobs_are_stored_as_the_crate_stores_them() {
    php_jobs_are_stored_as_the_crate_stores_them(Env::redis()).await;
}

#[tokio::test]
async fn file_php_jobs_are_stored_as_the_crate_stores_them() {
    php_jobs_are_stored_as_the_crate_stores_them(Env::file()).await;
}

/// PHP jobs and shell tasks pushed in one pushMany() are reserved by a
/// consumer as attempt 1 with PHP's options and payloads, and acked with
/// their results recorded to PHP's reply-to channel (the crate opens the
/// queue first: on a file, PHP pushes into the file the crate created).
async fn php_jobs_are_reserved_and_acked(env: Env) {
    let q = env.open(suite::config()).await;
    let ids = php_push(
        &env.url(),
        r#"[{"call": "App\\Jobs\\greet", "args": {"name": "Ann"}, "reply_to": "php-2"},
            {"cmd": "echo hi", "reply_to": "php-2", "timeout": "500ms"},
            {"argv": ["wc", "-c", "b c.txt"], "reply_to": "php-2", "attempts": 1}]"#,
    );
    assert_eq!(ids.len(), 3);
    let c = q.consumer().expect("consumer");
    let mut jobs = Vec::new();
    while jobs.len() < 3 {
        jobs.push(reserve_one(&c).await.0);
    }
    jobs.sort_by_key(|j| j.id);
    let payloads: Vec<&str> = jobs.iter().map(|j| text(&j.payload)).collect();
    assert_eq!(
        payloads,
        vec![
            r#"{"call":"App\\Jobs\\greet","args":{"name":"Ann"}}"#,
            r#"{"cmd":"echo hi","timeout":"500ms"}"#,
            r#"{"argv":["wc","-c","b c.txt"]}"#,
        ]
    );
    for (j, id) in jobs.iter().zip(&ids) {
        assert_eq!(j.id, *id);
        assert_eq!(j.attempt, 1);
        assert_eq!(j.reply_to.as_deref(), Some("php-2"));
        assert_eq!(j.backoff, Backoff::default());
        assert!(j.last_error.is_none());
    }
    assert_eq!(
        jobs.iter().map(|j| j.max_attempts).collect::<Vec<_>>(),
        vec![3, 3, 1]
    );
    for j in &jobs {
        let result = format!("\"done {}\"", j.id);
        assert_eq!(
            c.ack(j, result.as_bytes()).await.expect("ack"),
            Receipt::Applied
        );
    }
    let mut got = results(&q, "php-2", 3).await;
    got.sort_by_key(|r| r.id);
    for (r, id) in got.iter().zip(&ids) {
        assert_eq!((r.id, r.attempt), (*id, 1));
        assert_eq!(
            r.outcome,
            Outcome::Done(format!("\"done {id}\"").into_bytes())
        );
    }
    let stats = q.stats().await.expect("stats");
    assert_eq!((stats.pushed, stats.done, stats.ready), (3, 3, 0));
}

#[tokio::test]
async fn redis_php_jobs_are_reserved_and_acked() {
    php_jobs_are_reserved_and_acked(Env::redis()).await;
}

#[tokio::test]
async fn file_php_jobs_are_reserved_and_acked() {
    php_jobs_are_reserved_and_acked(Env::file()).await;
}

/// A job PHP pushed with a delay is not delivered before its time (its
/// push time plus the delay), while the job pushed with it without one is
/// delivered at once.
async fn a_delayed_php_job_waits_for_its_time(env: Env) {
    let delay = Duration::from_millis(1500);
    let ids = php_push(
        &env.url(),
        r#"[{"call": "App\\later", "delay": 1.5}, {"call": "App\\now"}]"#,
    );
    let q = env.open(suite::config()).await;
    let c = q.consumer().expect("consumer");
    let (first, _) = reserve_one(&c).await;
    assert_eq!(
        (first.id, text(&first.payload)),
        (ids[1], r#"{"call":"App\\now","args":[]}"#)
    );
    c.ack(&first, b"null").await.expect("ack");
    let (later, came) = reserve_one(&c).await;
    assert_eq!(later.id, ids[0]);
    assert!(
        came >= later.enqueued_at + delay,
        "delivered {:?} after its push, before its delay of {delay:?}",
        came.duration_since(later.enqueued_at).unwrap_or_default()
    );
}

#[tokio::test]
async fn redis_a_delayed_php_job_waits_for_its_time() {
    a_delayed_php_job_waits_for_its_time(Env::redis()).await;
}

#[tokio::test]
async fn file_a_delayed_php_job_waits_for_its_time() {
    a_delayed_php_job_waits_for_its_time(Env::file()).await;
}

/// A job PHP pushed with 3 attempts and a backoff of 0.2 s (at most 0.3 s)
/// is delivered 3 times, each failed attempt waiting its backoff, then
/// goes to the dead-letter store with the last error, recorded to PHP's
/// reply-to channel.
async fn a_failing_php_job_gets_the_attempts_php_set(env: Env) {
    let ids = php_push(
        &env.url(),
        r#"[{"call": "App\\flaky", "attempts": 3, "backoff": 0.2, "backoff_max": 0.3,
             "reply_to": "php-4"}]"#,
    );
    let q = env.open(suite::config()).await;
    let c = q.consumer().expect("consumer");
    let backoff = Backoff::exponential(Duration::from_millis(200), Duration::from_millis(300));
    let mut failed_at: Option<SystemTime> = None;
    for attempt in 1..=3 {
        let (job, came) = reserve_one(&c).await;
        assert_eq!(
            (job.id, job.attempt, job.max_attempts),
            (ids[0], attempt, 3)
        );
        assert_eq!(job.backoff, backoff);
        if let Some(t) = failed_at {
            let waited = came.duration_since(t).unwrap_or_default();
            assert!(
                waited >= backoff.delay(attempt - 1),
                "attempt {attempt} came {waited:?} after the failure, before its backoff"
            );
            assert_eq!(
                job.last_error.as_deref(),
                Some(format!("boom {}", attempt - 1).as_str())
            );
        }
        failed_at = Some(SystemTime::now());
        assert_eq!(
            c.fail(&job, &format!("boom {attempt}"))
                .await
                .expect("fail"),
            Receipt::Applied
        );
    }
    let r = results(&q, "php-4", 1).await;
    assert_eq!((r[0].id, r[0].attempt), (ids[0], 3));
    assert_eq!(
        r[0].outcome,
        Outcome::Dead {
            reason: DeadReason::Failed,
            error: "boom 3".into()
        }
    );
    assert!(c
        .reserve(1, Duration::from_millis(300))
        .await
        .expect("reserve")
        .is_empty());
    let stats = q.stats().await.expect("stats");
    assert_eq!((stats.failed, stats.dead, stats.died), (3, 1, 1));
}

#[tokio::test]
async fn redis_a_failing_php_job_gets_the_attempts_php_set() {
    a_failing_php_job_gets_the_attempts_php_set(Env::redis()).await;
}

#[tokio::test]
async fn file_a_failing_php_job_gets_the_attempts_php_set() {
    a_failing_php_job_gets_the_attempts_php_set(Env::file()).await;
}
