//! The shared suite against a temporary SQLite file, and what only the
//! file engine has: several processes sharing one file.

mod suite;
mod support;

use std::collections::HashSet;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hearth_queue::{NewJob, Outcome, Queue, QueueConfig};
use suite::{Env, PATIENCE};

suite_tests!(Env::file());

const CHILD_ENV: &str = "HEARTH_QUEUE_TEST_CHILD_URL";

/// Three processes (this test binary run again as
/// `consume_as_child_process`) and this one's tasks share a queue file:
/// 10,000 jobs, every result once, none lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn processes_share_one_file() {
    let env = Env::file();
    let q = env.open(suite::config()).await;
    let n = 10_000u64;
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        q.push_many(
            chunk
                .iter()
                .map(|i| NewJob::new(i.to_string()).reply_to("procs"))
                .collect(),
        )
        .await
        .expect("push");
    }
    let exe = std::env::current_exe().expect("test binary");
    let mut children: Vec<_> = (0..3)
        .map(|_| {
            Command::new(&exe)
                .args([
                    "--exact",
                    "consume_as_child_process",
                    "--ignored",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(CHILD_ENV, env.url())
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("spawn child")
        })
        .collect();
    let mut r = q.results("procs").expect("results");
    let mut ids = HashSet::new();
    let give_up = Instant::now() + PATIENCE * 8;
    while (ids.len() as u64) < n {
        for res in r
            .next(1000, Duration::from_millis(500))
            .await
            .expect("results")
        {
            assert!(ids.insert(res.id), "result of {} twice", res.id);
            assert_eq!(res.attempt, 1);
            assert!(matches!(res.outcome, Outcome::Done(ref p) if p.starts_with(b"pid ")));
        }
        assert!(
            Instant::now() < give_up,
            "only {} of {n} results",
            ids.len()
        );
    }
    let mut pids = HashSet::new();
    for c in children.iter_mut() {
        let status = c.wait().expect("child exits");
        assert!(status.success(), "a child failed: {status}");
    }
    for c in children {
        let out = c.wait_with_output().expect("child output");
        let text = String::from_utf8_lossy(&out.stdout);
        if let Some(line) = text.lines().find(|l| l.starts_with("took ")) {
            pids.insert(line.to_string());
        }
    }
    eprintln!("children: {pids:?}");
    let s = q.stats().await.expect("stats");
    assert_eq!((s.done, s.ready, s.reserved), (n, 0, 0));
}

/// Not a test of its own: the consumer process `processes_share_one_file`
/// starts. Consumes until the queue has nothing left, then exits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by processes_share_one_file as a child process"]
async fn consume_as_child_process() {
    let url = std::env::var(CHILD_ENV).expect("started by processes_share_one_file");
    let q = Queue::open(
        &url,
        QueueConfig {
            retry_for: PATIENCE,
            ..suite::config()
        },
    )
    .await
    .expect("open");
    let c = q.consumer().expect("consumer");
    let mut took = 0u64;
    let reply = format!("pid {}", std::process::id());
    loop {
        let jobs = c
            .reserve(16, Duration::from_millis(300))
            .await
            .expect("reserve");
        if jobs.is_empty() {
            let s = q.stats().await.expect("stats");
            if s.ready + s.delayed + s.reserved == 0 {
                break;
            }
        }
        for j in jobs {
            c.ack(&j, reply.as_bytes()).await.expect("ack");
            took += 1;
        }
    }
    println!("took {took} in {}", std::process::id());
}
