//! The one suite both engines pass: each case takes an `Env` (a real
//! redis-server, or a temporary SQLite file) and promises the semantics in
//! the crate's docs. Waits are for state, with timeouts; no case asserts
//! how fast anything is.
#![allow(dead_code)]

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hearth_queue::{
    Backoff, DeadReason, JobId, NewJob, Outcome, Part, Queue, QueueConfig, Receipt,
};

use crate::support::RedisServer;

/// A stream entry as XRANGE gives it: its id and its fields.
type StreamEntry = (String, Vec<(String, Vec<u8>)>);

/// Long enough for any wait in these tests on a loaded machine.
pub const PATIENCE: Duration = Duration::from_secs(30);

pub enum Env {
    Redis { server: RedisServer, name: String },
    File { dir: tempfile::TempDir },
}

impl Env {
    pub fn redis() -> Self {
        Env::Redis {
            server: RedisServer::start(),
            name: "jobs".into(),
        }
    }

    pub fn file() -> Self {
        Env::File {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    pub fn url(&self) -> String {
        match self {
            Env::Redis { server, name } => format!("redis://127.0.0.1:{}/{name}", server.port),
            Env::File { dir } => format!("file:{}", dir.path().join("queue.db").display()),
        }
    }

    pub async fn open(&self, config: QueueConfig) -> Queue {
        Queue::open(&self.url(), config).await.expect("open queue")
    }

    /// Stores an entry no consumer can read as a job, behind the queue's
    /// back (as another program or a bug would).
    pub async fn inject_malformed(&self) {
        match self {
            Env::Redis { server, name } => {
                let client = redis::Client::open(format!("redis://127.0.0.1:{}/", server.port))
                    .expect("client");
                let mut c = client
                    .get_multiplexed_async_connection()
                    .await
                    .expect("connect");
                let _: String = redis::cmd("XADD")
                    .arg(format!("hearth:{{{name}}}:ready"))
                    .arg("*")
                    .arg("id")
                    .arg("not-a-number")
                    .arg("payload")
                    .arg("x")
                    .query_async(&mut c)
                    .await
                    .expect("XADD");
            }
            Env::File { dir } => {
                let c = rusqlite::Connection::open(dir.path().join("queue.db")).expect("open");
                c.execute(
                    "INSERT INTO jobs (state, payload, attempts, max_attempts, backoff_ms, \
                     backoff_max_ms, enqueued_at, due_at) VALUES (0, 'x', 0, 'lots', 0, 0, 0, 0)",
                    [],
                )
                .expect("insert");
            }
        }
    }

    /// Where job `id` is still stored, read behind the queue's back: the
    /// Redis `deadix` field and `dead` or `ready` entries naming it, the
    /// file's `jobs` row. Empty when no trace is left.
    pub async fn traces_of(&self, id: JobId) -> Vec<String> {
        let mut found = Vec::new();
        match self {
            Env::Redis { server, name } => {
                let client = redis::Client::open(format!("redis://127.0.0.1:{}/", server.port))
                    .expect("client");
                let mut c = client
                    .get_multiplexed_async_connection()
                    .await
                    .expect("connect");
                let indexed: bool = redis::cmd("HEXISTS")
                    .arg(format!("hearth:{{{name}}}:deadix"))
                    .arg(id.0)
                    .query_async(&mut c)
                    .await
                    .expect("HEXISTS");
                if indexed {
                    found.push("a deadix field".to_string());
                }
                for stream in ["dead", "ready"] {
                    let entries: Vec<StreamEntry> = redis::cmd("XRANGE")
                        .arg(format!("hearth:{{{name}}}:{stream}"))
                        .arg("-")
                        .arg("+")
                        .query_async(&mut c)
                        .await
                        .expect("XRANGE");
                    let want = id.0.to_string().into_bytes();
                    for (entry, fields) in entries {
                        if fields.iter().any(|(k, v)| k == "id" && *v == want) {
                            found.push(format!("{stream} entry {entry}"));
                        }
                    }
                }
            }
            Env::File { dir } => {
                let c = rusqlite::Connection::open(dir.path().join("queue.db")).expect("open");
                let state: Option<i64> = c
                    .query_row("SELECT state FROM jobs WHERE id = ?", [id.0 as i64], |r| {
                        r.get(0)
                    })
                    .ok();
                if let Some(state) = state {
                    found.push(format!("a jobs row in state {state}"));
                }
            }
        }
        found
    }
}

pub fn config() -> QueueConfig {
    QueueConfig {
        poll_interval: Duration::from_millis(50),
        retry_for: PATIENCE,
        ..QueueConfig::default()
    }
}

fn job(payload: &str) -> NewJob {
    NewJob::new(payload.as_bytes().to_vec())
}

/// Reserves until one job comes or PATIENCE passes.
async fn reserve_one(c: &hearth_queue::Consumer) -> hearth_queue::Job {
    let give_up = Instant::now() + PATIENCE;
    loop {
        let mut jobs = c
            .reserve(1, Duration::from_millis(500))
            .await
            .expect("reserve");
        if let Some(j) = jobs.pop() {
            return j;
        }
        assert!(Instant::now() < give_up, "no job came");
    }
}

/// Reads the channel until `n` outcomes came.
async fn read_results(q: &Queue, channel: &str, n: usize) -> Vec<hearth_queue::JobResult> {
    let mut r = q.results(channel).expect("results");
    let mut out = Vec::new();
    let give_up = Instant::now() + PATIENCE * 4;
    while out.len() < n {
        out.extend(
            r.next(1000, Duration::from_millis(500))
                .await
                .expect("results"),
        );
        assert!(
            Instant::now() < give_up,
            "only {} of {n} results came",
            out.len()
        );
    }
    out
}

pub async fn push_reserve_ack_with_results(env: Env) {
    let q = env.open(config()).await;
    let ids = q
        .push_many(
            (0..3)
                .map(|i| job(&format!("{{\"n\":{i}}}")).reply_to("r1"))
                .collect(),
        )
        .await
        .expect("push");
    assert_eq!(ids.len(), 3);
    assert_eq!(
        ids.iter().collect::<HashSet<_>>().len(),
        3,
        "ids are unique"
    );
    let lone = q.push(job("lone")).await.expect("push one");
    assert!(!ids.contains(&lone));

    let c = q.consumer().expect("consumer");
    let mut got = Vec::new();
    while got.len() < 4 {
        got.extend(c.reserve(10, PATIENCE).await.expect("reserve"));
    }
    assert_eq!(got.len(), 4);
    for j in &got {
        assert_eq!(j.attempt, 1);
        assert_eq!(j.max_attempts, 3);
        assert!(j.last_error.is_none());
    }
    let first = got.iter().find(|j| j.id == ids[0]).expect("first job");
    assert_eq!(first.payload, b"{\"n\":0}");
    assert_eq!(first.reply_to.as_deref(), Some("r1"));

    for j in &got {
        let r = c
            .ack(j, format!("done {}", j.id).as_bytes())
            .await
            .expect("ack");
        assert_eq!(r, Receipt::Applied);
    }
    assert_eq!(c.ack(first, b"again").await.expect("ack"), Receipt::Stale);

    let results = read_results(&q, "r1", 3).await;
    let mut seen: Vec<JobId> = results.iter().map(|r| r.id).collect();
    seen.sort();
    assert_eq!(seen, ids);
    for r in &results {
        assert_eq!(r.attempt, 1);
        assert_eq!(
            r.outcome,
            Outcome::Done(format!("done {}", r.id).into_bytes())
        );
    }
    let s = q.stats().await.expect("stats");
    assert_eq!((s.ready, s.reserved, s.delayed, s.dead), (0, 0, 0, 0));
    assert_eq!((s.pushed, s.done), (4, 4));
    assert!(c
        .reserve(5, Duration::ZERO)
        .await
        .expect("reserve")
        .is_empty());
}

pub async fn fail_retries_after_backoff_then_dead(env: Env) {
    let q = env.open(config()).await;
    let backoff = Backoff::exponential(Duration::from_millis(300), Duration::from_millis(400));
    let id = q
        .push(job("flaky").attempts(3).backoff(backoff).reply_to("r2"))
        .await
        .expect("push");
    let c = q.consumer().expect("consumer");
    let mut errors: Vec<String> = Vec::new();
    let mut failed_at: Option<Instant> = None;
    for attempt in 1..=3u32 {
        let j = reserve_one(&c).await;
        if let Some(t) = failed_at {
            // Not before its backoff has passed (Redis's clock rounds to ms).
            let waited = t.elapsed();
            let due = backoff.delay(attempt - 1);
            assert!(
                waited + Duration::from_millis(5) >= due,
                "attempt {attempt} after {waited:?}"
            );
        }
        assert_eq!((j.id, j.attempt), (id, attempt));
        assert_eq!(j.last_error, errors.last().cloned());
        let e = format!("boom {attempt}");
        failed_at = Some(Instant::now());
        // The attempt's result: kept with the outcome of the last one.
        let line = format!("the output of attempt {attempt}");
        let receipt = c.fail_with_result(&j, &e, Some(line.as_bytes())).await;
        assert_eq!(receipt.expect("fail"), Receipt::Applied);
        errors.push(e);
    }
    assert_eq!(errors, vec!["boom 1", "boom 2", "boom 3"]);
    let dead = q.peek(Part::Dead, 10).await.expect("peek");
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].id, id);
    assert_eq!(dead[0].dead_reason, Some(DeadReason::Failed));
    assert_eq!(dead[0].last_error.as_deref(), Some("boom 3"));
    assert_eq!(dead[0].payload, b"flaky");
    let results = read_results(&q, "r2", 1).await;
    assert_eq!(results[0].id, id);
    assert_eq!(results[0].attempt, 3);
    assert_eq!(
        results[0].outcome,
        Outcome::Dead {
            reason: DeadReason::Failed,
            error: "boom 3".into()
        }
    );
    assert_eq!(
        results[0].last_result.as_deref(),
        Some(&b"the output of attempt 3"[..])
    );
    let s = q.stats().await.expect("stats");
    assert_eq!(
        (s.dead, s.failed, s.retried, s.died, s.done),
        (1, 3, 2, 1, 0)
    );
    assert!(c
        .reserve(1, Duration::from_millis(600))
        .await
        .expect("reserve")
        .is_empty());
}

/// A job its consumer rejects goes dead at once with its reason, whatever
/// attempts it had left, and `retry_dead` brings it back with them.
pub async fn reject_ends_a_job_at_once(env: Env) {
    let q = env.open(config()).await;
    let id = q
        .push(job("not work").attempts(5).reply_to("rj"))
        .await
        .expect("push");
    let c = q.consumer().expect("consumer");
    let j = reserve_one(&c).await;
    assert_eq!(
        c.reject(&j, "invalid task: expected a JSON object")
            .await
            .expect("reject"),
        Receipt::Applied
    );
    assert_eq!(
        c.reject(&j, "again").await.expect("reject twice"),
        Receipt::Stale
    );
    let dead = q.peek(Part::Dead, 10).await.expect("peek");
    assert_eq!(dead.len(), 1);
    assert_eq!((dead[0].id, dead[0].max_attempts), (id, 5));
    assert_eq!(dead[0].dead_reason, Some(DeadReason::Rejected));
    assert_eq!(
        dead[0].last_error.as_deref(),
        Some("invalid task: expected a JSON object")
    );
    let results = read_results(&q, "rj", 1).await;
    assert_eq!((results[0].id, results[0].attempt), (id, 1));
    assert_eq!(
        results[0].outcome,
        Outcome::Dead {
            reason: DeadReason::Rejected,
            error: "invalid task: expected a JSON object".into()
        }
    );
    let s = q.stats().await.expect("stats");
    assert_eq!((s.dead, s.failed, s.retried, s.died), (1, 1, 0, 1));
    assert!(q.retry_dead(id).await.expect("retry"));
    let again = reserve_one(&c).await;
    assert_eq!((again.id, again.attempt), (id, 1));
    c.ack(&again, b"ok").await.expect("ack");
}

pub async fn retry_from_dead(env: Env) {
    let q = env.open(config()).await;
    let a = q.push(job("a").attempts(1)).await.expect("push");
    let b = q.push(job("b").attempts(1)).await.expect("push");
    let d = q.push(job("d").attempts(1)).await.expect("push");
    let c = q.consumer().expect("consumer");
    for _ in 0..3 {
        let j = reserve_one(&c).await;
        c.fail(&j, "nope").await.expect("fail");
    }
    assert_eq!(q.stats().await.expect("stats").dead, 3);
    assert!(!q.retry_dead(JobId(999_999)).await.expect("retry"));
    assert!(q.retry_dead(a).await.expect("retry"));
    assert!(
        !q.retry_dead(a).await.expect("retry twice"),
        "no longer dead"
    );
    let j = reserve_one(&c).await;
    assert_eq!((j.id, j.attempt, j.payload.as_slice()), (a, 1, &b"a"[..]));
    assert_eq!(j.last_error.as_deref(), Some("nope"));
    c.ack(&j, b"ok").await.expect("ack");
    assert_eq!(q.retry_all_dead().await.expect("retry all"), 2);
    let mut back: Vec<JobId> = vec![reserve_one(&c).await.id, reserve_one(&c).await.id];
    back.sort();
    assert_eq!(back, vec![b, d]);
    let s = q.stats().await.expect("stats");
    assert_eq!((s.dead, s.reserved), (0, 2));
}

/// `delete_dead` removes one dead job for good and nothing else: the
/// other dead jobs stay, a ready, delayed or held job with the id asked
/// for is left alone (false), and the deleted job is never delivered
/// again, not even by `retry_all_dead`.
pub async fn delete_dead_removes_one_dead_job(env: Env) {
    let q = env.open(config()).await;
    let a = q.push(job("a").attempts(1)).await.expect("push");
    let b = q
        .push(job("b").attempts(1).reply_to("del"))
        .await
        .expect("push");
    let d = q.push(job("d").attempts(1)).await.expect("push");
    let c = q.consumer().expect("consumer");
    for _ in 0..3 {
        let j = reserve_one(&c).await;
        c.fail(&j, "nope").await.expect("fail");
    }
    let s = q.stats().await.expect("stats");
    assert_eq!((s.dead, s.died, s.failed), (3, 3, 3));

    assert!(!q.delete_dead(JobId(999_999)).await.expect("delete"));
    assert!(q.delete_dead(b).await.expect("delete"));
    assert!(
        !q.delete_dead(b).await.expect("delete twice"),
        "already gone"
    );
    assert_eq!(env.traces_of(b).await, Vec::<String>::new());
    let dead: Vec<JobId> = q
        .peek(Part::Dead, 10)
        .await
        .expect("peek")
        .iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(dead, vec![a, d]);
    let s = q.stats().await.expect("stats");
    assert_eq!(
        (s.dead, s.died, s.failed, s.pushed, s.done),
        (2, 3, 3, 3, 0),
        "dead goes down; no cumulative counter moves: {s:?}"
    );
    assert!(
        !q.retry_dead(b).await.expect("retry"),
        "retry no longer finds it"
    );
    // Its outcome, recorded when it died, stays on its channel.
    let results = read_results(&q, "del", 1).await;
    assert_eq!(results[0].id, b);
    assert!(matches!(results[0].outcome, Outcome::Dead { .. }));

    // Jobs that are not dead are not deleted.
    let ready = q.push(job("ready")).await.expect("push");
    let later = q
        .push(job("later").delay(Duration::from_secs(3600)))
        .await
        .expect("push");
    assert!(!q.delete_dead(ready).await.expect("delete a ready job"));
    assert!(!q.delete_dead(later).await.expect("delete a delayed job"));
    let s = q.stats().await.expect("stats");
    assert_eq!((s.ready, s.delayed, s.dead), (1, 1, 2), "{s:?}");
    let held = reserve_one(&c).await;
    assert_eq!(held.id, ready);
    assert!(!q.delete_dead(ready).await.expect("delete a held job"));
    assert_eq!(q.stats().await.expect("stats").reserved, 1);
    assert_eq!(c.ack(&held, b"").await.expect("ack"), Receipt::Applied);

    // The deleted job never comes back.
    assert!(c
        .reserve(10, Duration::from_millis(300))
        .await
        .expect("reserve")
        .is_empty());
    assert_eq!(q.retry_all_dead().await.expect("retry all"), 2);
    let mut back: Vec<JobId> = vec![reserve_one(&c).await.id, reserve_one(&c).await.id];
    back.sort();
    assert_eq!(back, vec![a, d]);
    assert!(c
        .reserve(10, Duration::from_millis(300))
        .await
        .expect("reserve")
        .is_empty());
    let s = q.stats().await.expect("stats");
    assert_eq!((s.dead, s.reserved, s.delayed), (0, 2, 1), "{s:?}");
}

pub async fn delayed_jobs_come_on_time(env: Env) {
    let q = env.open(config()).await;
    let delay = Duration::from_millis(1500);
    let pushed = Instant::now();
    let id = q.push(job("later").delay(delay)).await.expect("push");
    let now = q.push(job("now")).await.expect("push");
    let s = q.stats().await.expect("stats");
    if pushed.elapsed() < delay {
        assert_eq!((s.delayed, s.ready), (1, 1), "{s:?}");
    }
    let c = q.consumer().expect("consumer");
    let first = reserve_one(&c).await;
    assert_eq!(first.id, now);
    c.ack(&first, b"").await.expect("ack");
    let j = reserve_one(&c).await;
    let late = pushed.elapsed();
    assert_eq!(j.id, id);
    assert!(late >= delay, "delivered after {late:?}, before its delay");
    eprintln!("delayed job delivered {:?} after its time", late - delay);
}

pub async fn expired_hold_is_reclaimed_as_attempt_2(env: Env) {
    let cfg = QueueConfig {
        visibility_timeout: Duration::from_millis(600),
        ..config()
    };
    let q = env.open(cfg).await;
    let id = q.push(job("slow").reply_to("r3")).await.expect("push");
    let a = q.consumer().expect("consumer a");
    let b = q.consumer().expect("consumer b");
    assert_ne!(a.name(), b.name());
    let held = reserve_one(&a).await;
    assert_eq!(held.attempt, 1);
    // a "dies": b gets it once the visibility timeout has passed.
    let again = reserve_one(&b).await;
    assert_eq!((again.id, again.attempt), (id, 2));
    assert_eq!(a.fail(&held, "late").await.expect("fail"), Receipt::Stale);
    assert_eq!(a.extend(&held).await.expect("extend"), Receipt::Stale);
    assert_eq!(b.extend(&again).await.expect("extend"), Receipt::Applied);
    assert_eq!(b.ack(&again, b"b's").await.expect("ack"), Receipt::Applied);
    assert_eq!(a.ack(&held, b"a's").await.expect("ack"), Receipt::Stale);
    let r = read_results(&q, "r3", 1).await;
    assert_eq!(
        (r[0].attempt, &r[0].outcome),
        (2, &Outcome::Done(b"b's".to_vec()))
    );
    let s = q.stats().await.expect("stats");
    assert_eq!((s.done, s.retried, s.reserved), (1, 1, 0));

    // A job lost on its last attempt goes to the dead-letter store.
    let last = q
        .push(job("once").attempts(1).reply_to("r3"))
        .await
        .expect("push");
    let held = reserve_one(&a).await;
    assert_eq!(held.id, last);
    let give_up = Instant::now() + PATIENCE;
    while q.stats().await.expect("stats").dead == 0 {
        assert!(b
            .reserve(1, Duration::from_millis(200))
            .await
            .expect("reserve")
            .is_empty());
        assert!(Instant::now() < give_up, "never reclaimed");
    }
    let dead = q.peek(Part::Dead, 10).await.expect("peek");
    assert_eq!(
        (dead[0].id, dead[0].dead_reason),
        (last, Some(DeadReason::Lost))
    );
    let r = read_results(&q, "r3", 2).await;
    assert!(matches!(
        r[1].outcome,
        Outcome::Dead {
            reason: DeadReason::Lost,
            ..
        }
    ));
}

pub async fn extend_keeps_a_long_job(env: Env) {
    let cfg = QueueConfig {
        visibility_timeout: Duration::from_secs(3),
        ..config()
    };
    let q = env.open(cfg).await;
    q.push(job("long")).await.expect("push");
    let a = q.consumer().expect("a");
    let b = q.consumer().expect("b");
    let held = reserve_one(&a).await;
    // Held for twice its visibility timeout, renewed every 200 ms.
    let until = Instant::now() + Duration::from_secs(6);
    while Instant::now() < until {
        assert_eq!(a.extend(&held).await.expect("extend"), Receipt::Applied);
        assert!(b
            .reserve(1, Duration::from_millis(200))
            .await
            .expect("reserve")
            .is_empty());
    }
    assert_eq!(a.ack(&held, b"").await.expect("ack"), Receipt::Applied);
}

pub async fn malformed_entry_goes_dead_and_the_consumer_goes_on(env: Env) {
    let q = env.open(config()).await;
    env.inject_malformed().await;
    let good = q.push(job("good")).await.expect("push");
    let c = q.consumer().expect("consumer");
    let j = reserve_one(&c).await;
    assert_eq!(j.id, good);
    c.ack(&j, b"").await.expect("ack");
    let give_up = Instant::now() + PATIENCE;
    let dead = loop {
        let d = q.peek(Part::Dead, 10).await.expect("peek");
        if !d.is_empty() {
            break d;
        }
        assert!(c
            .reserve(1, Duration::from_millis(200))
            .await
            .expect("reserve")
            .is_empty());
        assert!(Instant::now() < give_up, "malformed entry never dead");
    };
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].dead_reason, Some(DeadReason::Malformed));
    assert!(dead[0].last_error.as_deref().is_some_and(|e| !e.is_empty()));
    let s = q.stats().await.expect("stats");
    assert_eq!((s.dead, s.ready, s.reserved, s.done), (1, 0, 0, 1));
}

pub async fn stats_peek_and_purge(env: Env) {
    let q = env.open(config()).await;
    q.push_many(vec![job("r1"), job("r2"), job("r3")])
        .await
        .expect("push");
    q.push_many(vec![
        job("d1").delay(Duration::from_secs(3600)),
        job("d2").delay(Duration::from_secs(3600)),
    ])
    .await
    .expect("push delayed");
    q.push(job("dies").attempts(1)).await.expect("push");
    let c = q.consumer().expect("consumer");
    let held = reserve_one(&c).await;
    assert_eq!(held.payload, b"r1");
    let give_up = Instant::now() + PATIENCE;
    let s = loop {
        let s = q.stats().await.expect("stats");
        if s.oldest_ready_age
            .is_some_and(|a| a >= Duration::from_millis(10))
        {
            break s;
        }
        assert!(Instant::now() < give_up);
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(
        (s.ready, s.delayed, s.reserved, s.dead, s.pushed),
        (3, 2, 1, 0, 6)
    );
    let peeked = q.peek(Part::Ready, 10).await.expect("peek");
    let payloads: Vec<&[u8]> = peeked.iter().map(|j| j.payload.as_slice()).collect();
    assert_eq!(payloads, vec![&b"r2"[..], b"r3", b"dies"]);
    assert_eq!(q.peek(Part::Ready, 1).await.expect("peek").len(), 1);
    assert!(q
        .peek(Part::Delayed, 1)
        .await
        .is_err_and(|e| e.is_invalid()));

    // Make one dead.
    let mut dies = None;
    while dies.is_none() {
        for j in c.reserve(10, PATIENCE).await.expect("reserve") {
            if j.payload == b"dies" {
                c.fail(&j, "x").await.expect("fail");
                dies = Some(j.id);
            } else {
                c.ack(&j, b"").await.expect("ack");
            }
        }
    }
    q.push_many(vec![job("r4"), job("r5")]).await.expect("push");
    assert_eq!(q.purge(Part::Dead).await.expect("purge"), 1);
    assert_eq!(q.purge(Part::Delayed).await.expect("purge"), 2);
    assert_eq!(q.purge(Part::Ready).await.expect("purge"), 2);
    let s = q.stats().await.expect("stats");
    assert_eq!(
        (s.ready, s.delayed, s.reserved, s.dead),
        (0, 0, 1, 0),
        "{s:?}"
    );
    assert_eq!(s.oldest_ready_age, None);
    assert_eq!(
        c.ack(&held, b"").await.expect("ack"),
        Receipt::Applied,
        "held jobs survive purge"
    );
}

pub async fn bounds_are_refused_clearly(env: Env) {
    let cfg = QueueConfig {
        max_payload: 100,
        max_result: 10,
        ..config()
    };
    let q = env.open(cfg).await;
    let e = q
        .push(NewJob::new(vec![b'x'; 101]))
        .await
        .expect_err("too large");
    assert!(e.is_too_large(), "{e}");
    let e = q
        .push_many(vec![job("fine"), NewJob::new(vec![b'x'; 101])])
        .await
        .expect_err("batch with one too large");
    assert!(e.is_too_large());
    assert!(q
        .push(job("x").reply_to("no spaces"))
        .await
        .is_err_and(|e| e.is_invalid()));
    assert_eq!(q.stats().await.expect("stats").pushed, 0, "nothing stored");
    q.push(NewJob::new(vec![b'x'; 100]))
        .await
        .expect("at the limit");
    let c = q.consumer().expect("consumer");
    let j = reserve_one(&c).await;
    assert!(c.ack(&j, &[0u8; 11]).await.is_err_and(|e| e.is_too_large()));
    assert_eq!(c.ack(&j, &[0u8; 10]).await.expect("ack"), Receipt::Applied);
    let long = "e".repeat(10_000);
    q.push(job("y").attempts(1)).await.expect("push");
    let j = reserve_one(&c).await;
    c.fail(&j, &long).await.expect("fail");
    let dead = q.peek(Part::Dead, 1).await.expect("peek");
    assert_eq!(dead[0].last_error.as_deref().map(str::len), Some(4096));
}

/// `consumers` tasks take `n` jobs; every job's result arrives exactly
/// once, and (nothing being reclaimed) every job is delivered once.
pub async fn many_consumers_lose_nothing(env: Env, n: usize, consumers: usize) {
    let q = env.open(config()).await;
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        q.push_many(
            chunk
                .iter()
                .map(|i| job(&i.to_string()).reply_to("many"))
                .collect(),
        )
        .await
        .expect("push");
    }
    let deliveries: Arc<Mutex<HashMap<JobId, u32>>> = Arc::default();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut tasks = Vec::new();
    for _ in 0..consumers {
        let q = q.clone();
        let deliveries = deliveries.clone();
        let done = done.clone();
        tasks.push(tokio::spawn(async move {
            let c = q.consumer().expect("consumer");
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                for j in c
                    .reserve(32, Duration::from_millis(200))
                    .await
                    .expect("reserve")
                {
                    *deliveries.lock().expect("lock").entry(j.id).or_default() += 1;
                    assert_eq!(c.ack(&j, &j.payload).await.expect("ack"), Receipt::Applied);
                }
            }
        }));
    }
    let results = read_results(&q, "many", n).await;
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in tasks {
        t.await.expect("consumer task");
    }
    let mut ids = HashSet::new();
    for r in &results {
        assert!(ids.insert(r.id), "result of {} twice", r.id);
        assert_eq!(r.attempt, 1);
        assert!(matches!(&r.outcome, Outcome::Done(p) if !p.is_empty()));
    }
    assert_eq!(ids.len(), n);
    {
        let d = deliveries.lock().expect("lock");
        assert_eq!(d.len(), n);
        assert!(d.values().all(|&k| k == 1), "a job was delivered twice");
    }
    let s = q.stats().await.expect("stats");
    assert_eq!((s.done, s.ready, s.reserved), (n as u64, 0, 0));
}

/// Generates one `#[tokio::test]` per case for an engine.
#[macro_export]
macro_rules! suite_tests {
    ($env:expr) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn push_reserve_ack_with_results() {
            suite::push_reserve_ack_with_results($env).await
        }
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn fail_retries_after_backoff_then_dead() {
            suite::fail_retries_after_backoff_then_dead($env).await
        }
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn reject_ends_a_job_at_once() {
            suite::reject_ends_a_job_at_once($env).await
        }
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn retry_from_dead() {
            suite::retry_from_dead($env).await
        }
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn delete_dead_removes_one_dead_job() {
            suite::delete_dead_removes_one_dead_job($env).await
        }
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn delayed_jobs_come_on_time() {
            suite::delayed_jobs_come_on_time($env).await
        }
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn expired_hold_is_reclaimed_as_attempt_2() {
            suite::expired_hold_is_reclaimed_as_attempt_2($env).await
        }
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn extend_keeps_a_long_job() {
            suite::extend_keeps_a_long_job($env).await
        }
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn malformed_entry_goes_dead_and_the_consumer_goes_on() {
            suite::malformed_entry_goes_dead_and_the_consumer_goes_on($env).await
        }
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn stats_peek_and_purge() {
            suite::stats_peek_and_purge($env).await
        }
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn bounds_are_refused_clearly() {
            suite::bounds_are_refused_clearly($env).await
        }
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn ten_thousand_jobs_over_four_consumers() {
            suite::many_consumers_lose_nothing($env, 10_000, 4).await
        }
    };
}
