//! The shared suite against a real redis-server, and what only Redis has:
//! a restart in the middle of a consume loop.

mod suite;
mod support;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hearth_queue::{JobId, NewJob, Outcome, QueueConfig};
use suite::{Env, PATIENCE};

suite_tests!(Env::redis());

/// redis-server killed (-9) and started again on the same port and
/// directory (AOF) while three consumers work, for longer than the
/// connection manager's own reconnect tries: the consumers reconnect by
/// themselves, an ack made while Redis is down is applied once it is back,
/// and every job's result arrives once (a job whose delivery was cut by
/// the kill comes again as attempt 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn consumers_ride_out_a_redis_restart() {
    let mut env = Env::redis();
    let q = env
        .open(QueueConfig {
            retry_for: Duration::from_secs(60),
            visibility_timeout: Duration::from_secs(30),
            ..suite::config()
        })
        .await;
    let n = 3000u64;
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        q.push_many(
            chunk
                .iter()
                .map(|i| NewJob::new(i.to_string()).reply_to("restart"))
                .collect(),
        )
        .await
        .expect("push");
    }
    let acked = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for _ in 0..3 {
        let (q, acked, stop) = (q.clone(), acked.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let c = q.consumer().expect("consumer");
            while !stop.load(Ordering::Relaxed) {
                for j in c
                    .reserve(16, Duration::from_millis(200))
                    .await
                    .expect("reserve")
                {
                    c.ack(&j, b"ok").await.expect("ack survives the restart");
                    acked.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    let give_up = Instant::now() + PATIENCE;
    while acked.load(Ordering::Relaxed) < n / 4 {
        assert!(Instant::now() < give_up, "consumers did not start");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let Env::Redis { server, .. } = &mut env else {
        unreachable!()
    };
    // One job held from just before the restart, acked while Redis is
    // down. Reserved here rather than before the consumers start, so that
    // a slow machine cannot let its visibility timeout pass (and the job
    // go to another consumer) before Redis is back.
    let holder = q.consumer().expect("holder");
    let held = holder
        .reserve(1, PATIENCE)
        .await
        .expect("reserve")
        .pop()
        .expect("a job");
    let before = acked.load(Ordering::Relaxed);
    server.kill();
    let held_id = held.id;
    let late_ack = tokio::spawn(async move { holder.ack(&held, b"held").await });
    // Down for longer than the connection manager's own reconnect tries.
    tokio::time::sleep(Duration::from_secs(4)).await;
    server.restart();
    eprintln!("restarted redis after {before} acks");

    let mut r = q.results("restart").expect("results");
    let mut ids = HashSet::new();
    let mut duplicates = 0;
    let give_up = Instant::now() + PATIENCE * 4;
    while (ids.len() as u64) < n {
        for res in r
            .next(1000, Duration::from_millis(500))
            .await
            .expect("results")
        {
            let want: &[u8] = if res.id == held_id { b"held" } else { b"ok" };
            assert_eq!(res.outcome, Outcome::Done(want.to_vec()));
            if !ids.insert(res.id) {
                duplicates += 1;
            }
            if res.attempt > 1 {
                eprintln!("job {} settled on attempt {}", res.id, res.attempt);
            }
        }
        assert!(
            Instant::now() < give_up,
            "only {} of {n} results",
            ids.len()
        );
    }
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.expect("consumer task");
    }
    assert_eq!(duplicates, 0, "one outcome per job");
    let receipt = late_ack
        .await
        .expect("ack task")
        .expect("ack made while Redis was down");
    assert_eq!(receipt, hearth_queue::Receipt::Applied);
    let s = q.stats().await.expect("stats");
    assert_eq!(
        (s.ready, s.reserved, s.delayed, s.dead),
        (0, 0, 0, 0),
        "{s:?}"
    );
    assert_eq!(s.done, n);
}

/// A Redis nobody listens on is reported as unavailable once `retry_for`
/// has passed, and a wrong password as an engine error at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_or_refusing_redis_is_reported() {
    let server = support::RedisServer::start();
    let port = server.port;
    drop(server);
    let quick = QueueConfig {
        retry_for: Duration::from_millis(500),
        ..suite::config()
    };
    let e = hearth_queue::Queue::open(&format!("redis://127.0.0.1:{port}/q"), quick.clone())
        .await
        .expect_err("nobody listens");
    assert!(e.is_unavailable(), "{e}");

    let server = support::RedisServer::start();
    let e = hearth_queue::Queue::open(
        &format!("redis://:wrong@127.0.0.1:{}/q", server.port),
        QueueConfig {
            retry_for: PATIENCE,
            ..quick
        },
    )
    .await
    .expect_err("no password is set");
    assert!(e.is_engine(), "{e}");
    assert!(
        !e.to_string().contains("wrong"),
        "the password is not shown: {e}"
    );
}

/// A `deadix` field that points at no `dead` entry (written here behind
/// the queue's back, as a bug or another program could) is no dead job:
/// `delete_dead` says false, removes no other entry, and drops the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_dead_drops_an_index_field_that_points_nowhere() {
    let env = Env::redis();
    let q = env.open(suite::config()).await;
    let dead = q.push(NewJob::new("dies").attempts(1)).await.expect("push");
    let c = q.consumer().expect("consumer");
    let j = c
        .reserve(1, PATIENCE)
        .await
        .expect("reserve")
        .pop()
        .expect("a job");
    c.fail(&j, "nope").await.expect("fail");
    let Env::Redis { server, name } = &env else {
        unreachable!()
    };
    let client =
        redis::Client::open(format!("redis://127.0.0.1:{}/", server.port)).expect("client");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let _: i64 = redis::cmd("HSET")
        .arg(format!("hearth:{{{name}}}:deadix"))
        .arg(4242)
        .arg("1-1")
        .query_async(&mut conn)
        .await
        .expect("HSET");
    assert!(!q.delete_dead(JobId(4242)).await.expect("delete"));
    assert_eq!(env.traces_of(JobId(4242)).await, Vec::<String>::new());
    assert_eq!(q.stats().await.expect("stats").dead, 1);
    assert!(q.delete_dead(dead).await.expect("delete"));
    assert_eq!(q.stats().await.expect("stats").dead, 0);
}
