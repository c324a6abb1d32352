//! The shared suite against a temporary SQLite file, and what only the
//! file engine has: several processes sharing one file.

mod suite;
mod support;

use std::collections::HashSet;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hearth_queue::{NewJob, Outcome, Queue, QueueConfig};
use suite::{Env, PATIENCE};

suite_tests!(Env::file());

const CHILD_ENV: &str = "HEARTH_QUEUE_TEST_CHILD_URL";

/// The visibility timeout of the processes below: short so that the jobs
/// of a killed one come back soon, long enough that a live one acks its
/// 16 jobs well within it on a loaded machine.
fn child_config() -> QueueConfig {
    QueueConfig {
        visibility_timeout: Duration::from_secs(5),
        retry_for: PATIENCE,
        ..suite::config()
    }
}

fn spawn_child(url: &str) -> Child {
    let exe = std::env::current_exe().expect("test binary");
    Command::new(exe)
        .args([
            "--exact",
            "consume_as_child_process",
            "--ignored",
            "--nocapture",
        ])
        .args(["--test-threads=1"])
        .env(CHILD_ENV, url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn child")
}

/// Three processes (this test binary run again as
/// `consume_as_child_process`) share a queue file of 10,000 jobs; one is
/// killed (SIGKILL) mid-batch and another started: every job's result
/// arrives once, none is lost, and only the jobs the killed process held
/// (one reserve of 16 at most) come again, as attempt 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn processes_share_one_file_and_survive_a_kill() {
    let env = Env::file();
    let q = env.open(child_config()).await;
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
    let mut children: Vec<Child> = (0..3).map(|_| spawn_child(&env.url())).collect();
    let mut r = q.results("procs").expect("results");
    let mut ids = HashSet::new();
    let mut again = 0;
    let mut killed = false;
    let give_up = Instant::now() + PATIENCE * 8;
    while (ids.len() as u64) < n {
        for res in r
            .next(1000, Duration::from_millis(500))
            .await
            .expect("results")
        {
            assert!(ids.insert(res.id), "result of {} twice", res.id);
            assert!(matches!(res.outcome, Outcome::Done(ref p) if p.starts_with(b"pid ")));
            if res.attempt > 1 {
                assert_eq!(res.attempt, 2);
                again += 1;
            }
        }
        if !killed && ids.len() >= 3000 {
            children[0].kill().expect("SIGKILL a consumer");
            children.push(spawn_child(&env.url()));
            killed = true;
        }
        assert!(
            Instant::now() < give_up,
            "only {} of {n} results",
            ids.len()
        );
    }
    assert!(killed);
    assert!(
        again <= 16,
        "{again} jobs came again; the killed process held 16 at most"
    );
    eprintln!("{again} jobs the killed process held came again as attempt 2");
    for c in children {
        let out = c.wait_with_output().expect("child exits");
        eprint!("{}", String::from_utf8_lossy(&out.stdout));
    }
    let s = q.stats().await.expect("stats");
    assert_eq!((s.done, s.ready, s.reserved), (n, 0, 0));
    assert_eq!(s.retried, again);
}

/// Not a test of its own: the consumer process
/// `processes_share_one_file_and_survive_a_kill`
/// starts. Consumes until the queue has nothing left, then exits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by processes_share_one_file_and_survive_a_kill as a child process"]
async fn consume_as_child_process() {
    let url =
        std::env::var(CHILD_ENV).expect("started by processes_share_one_file_and_survive_a_kill");
    let q = Queue::open(&url, child_config()).await.expect("open");
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

/// A queue file that cannot be opened or is not a queue is refused with an
/// error naming the file; a bad setting names the field.
#[tokio::test]
async fn unusable_files_are_refused_clearly() {
    let dir = tempfile::tempdir().expect("temp dir");
    let quick = QueueConfig {
        retry_for: Duration::from_millis(300),
        ..suite::config()
    };
    let missing = dir.path().join("no/such/dir/q.db");
    let e = Queue::open(&format!("file:{}", missing.display()), quick.clone())
        .await
        .expect_err("no directory");
    assert!(
        e.is_engine() && e.to_string().contains("no/such/dir"),
        "{e}"
    );

    let junk = dir.path().join("junk.db");
    std::fs::write(&junk, vec![b'x'; 8192]).expect("write");
    let e = Queue::open(&format!("file:{}", junk.display()), quick.clone())
        .await
        .expect_err("not a database");
    assert!(e.is_engine() && e.to_string().contains("junk.db"), "{e}");

    let other = dir.path().join("other.db");
    let c = rusqlite::Connection::open(&other).expect("sqlite");
    c.execute_batch(
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
         INSERT INTO meta VALUES ('schema', 'hearth-queue 99');",
    )
    .expect("schema");
    drop(c);
    let e = Queue::open(&format!("file:{}", other.display()), quick.clone())
        .await
        .expect_err("another version");
    assert!(
        e.is_engine() && e.to_string().contains("another version"),
        "{e}"
    );

    let bad = QueueConfig {
        visibility_timeout: Duration::ZERO,
        ..quick
    };
    let e = Queue::open(&format!("file:{}", dir.path().join("q.db").display()), bad)
        .await
        .expect_err("zero timeout");
    assert!(
        e.is_invalid() && e.to_string().contains("visibility_timeout"),
        "{e}"
    );
    assert!(Queue::open("file:", suite::config())
        .await
        .is_err_and(|e| e.is_url()));
}
