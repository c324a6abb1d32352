//! `hearth work` against real queues: a redis-server started by the test
//! (AOF on, a free port, a temporary directory) and a queue file in a
//! temporary directory. Jobs are pushed and results read with the
//! `hearth-queue` crate, as a producer would; the consumers are the real
//! binary, running real shell tasks and PHP jobs in real PHP workers.
#![allow(clippy::unwrap_used)]

mod queue_support;

use std::process::{Command, Stdio};
use std::time::Duration;

use hearth_queue::{DeadReason, NewJob, Outcome, Queue, QueueConfig};
use queue_support::*;
use serde_json::{json, Value};

fn shell_jobs_run_with_results(engine: Engine) {
    let dir = tempfile::tempdir().unwrap();
    let mut q = Producer::open(&engine);
    let ok = q.push(&json!({"id": "a", "cmd": "echo hi; echo warn >&2"}), 1, "r");
    let argv = q.push(&json!({"argv": ["sh", "-c", "cat; echo \"$X\"; pwd"], "stdin": "in\n", "env": {"X": "ex"}, "cwd": "sub"}), 1, "r");
    let exits = q.push(
        &json!({"id": "exits", "cmd": "echo oops >&2; exit 3"}),
        1,
        "r",
    );
    let slow = q.push(&json!({"cmd": "sleep 30", "timeout": "300ms"}), 1, "r");
    let missing = q.push(&json!({"argv": ["/nonexistent/prog"]}), 1, "r");
    let typo = q.push(&json!({"comand": "echo x"}), 3, "r");
    let php = q.push(&json!({"call": "strlen", "args": ["x"]}), 3, "r");
    let binary = q.push_raw(vec![0xff, 0xfe], 3, "r");
    let ids = q.push(&json!({"cmd": "echo $HEARTH_JOB_ID $HEARTH_JOB_ATTEMPT", "env": {"HEARTH_JOB_ID": "mine"}}), 1, "r");
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let _work = Work::start(&engine, dir.path(), &["-j", "3"]);
    let r = by_id(q.results("r", 9));

    let a = done(&r[&ok]);
    assert_eq!(a["id"], "a");
    assert_eq!(a["seq"], ok.0);
    assert_eq!(a["status"], 0);
    assert_eq!(a["stdout"], "hi\n");
    assert_eq!(a["stderr"], "warn\n");
    assert_eq!(
        (a["job"].as_u64(), a["attempt"].as_u64()),
        (Some(ok.0), Some(1))
    );
    assert_eq!(a["attempts"], 1);
    assert!(a["duration_ms"].as_f64().is_some());
    let b = done(&r[&argv]);
    assert_eq!(b["id"], argv.0, "the id defaults to the job's");
    let sub = std::fs::canonicalize(dir.path().join("sub")).unwrap();
    assert_eq!(b["stdout"], format!("in\nex\n{}\n", sub.display()));
    assert_eq!(done(&r[&ids])["stdout"], format!("{} 1\n", ids.0));

    let (reason, error) = dead(&r[&exits]);
    assert_eq!(reason, DeadReason::Failed);
    assert_eq!(error, "exit status 3; stderr: oops");
    let (reason, error) = dead(&r[&slow]);
    assert_eq!(reason, DeadReason::Failed);
    // Stopped at its limit or, on a busy machine, a little after it.
    let after: f64 = error
        .strip_prefix("ran past its time limit: stopped after ")
        .and_then(|rest| rest.split('s').next())
        .and_then(|secs| secs.parse().ok())
        .unwrap_or_else(|| panic!("{error}"));
    assert!(after >= 0.3, "{error}");
    assert!(error.ends_with("(killed by SIGTERM)"), "{error}");
    let (_, error) = dead(&r[&missing]);
    assert!(
        error.starts_with("cannot start /nonexistent/prog: "),
        "{error}"
    );

    // Payloads that are not tasks are dead at once, whatever their
    // attempts, with the reason.
    for (id, expected) in [
        (typo, "invalid task: unknown field `comand`"),
        (binary, "invalid task: the payload is not UTF-8 text"),
    ] {
        let (reason, error) = dead(&r[&id]);
        assert_eq!(reason, DeadReason::Rejected, "{error}");
        assert!(error.contains(expected), "{error}");
        assert_eq!(r[&id].attempt, 1);
    }
    // A PHP job on a host without PHP job workers fails (another host
    // may have them), naming the missing option, after its attempts.
    let (reason, error) = dead(&r[&php]);
    assert_eq!(reason, DeadReason::Failed, "{error}");
    assert!(
        error.contains("this host has no PHP job workers: start it with --php-bootstrap FILE"),
        "{error}"
    );
    assert_eq!(r[&php].attempt, 3);
    let s = q.stats();
    assert_eq!((s.done, s.died, s.dead, s.retried), (3, 6, 6, 2), "{s:?}");
    let reasons: Vec<_> = q.dead().iter().map(|d| d.dead_reason).collect();
    assert_eq!(reasons.len(), 6, "{reasons:?}");
}

#[test]
fn shell_jobs_run_with_results_through_redis() {
    shell_jobs_run_with_results(Engine::redis());
}

#[test]
fn shell_jobs_run_with_results_through_a_file() {
    shell_jobs_run_with_results(Engine::file());
}

fn php_jobs_run_with_results(engine: Engine) {
    let dir = app_dir();
    let mut q = Producer::open(&engine);
    let add = q.push(
        &json!({"id": 1, "call": "App\\Jobs\\add", "args": [2, 3]}),
        1,
        "r",
    );
    let greet = q.push(
        &json!({"call": "App\\Jobs\\greet", "args": {"name": "Ann"}}),
        1,
        "r",
    );
    let throws = q.push(
        &json!({"call": "App\\Jobs\\fail", "args": ["no way"]}),
        1,
        "r",
    );
    let slow = q.push(
        &json!({"call": "App\\Jobs\\nap", "args": [30], "timeout": 0.3}),
        1,
        "r",
    );
    let shell = q.push(&json!({"cmd": "echo not php"}), 2, "r");
    let work = Work::start(
        &engine,
        dir.path(),
        &[
            "-j",
            "2",
            "--php-bootstrap",
            "bootstrap.php",
            "--kill-after",
            "1s",
        ],
    );
    let r = by_id(q.results("r", 5));
    let a = done(&r[&add]);
    assert_eq!((a["id"].as_u64(), a["result"].as_u64()), (Some(1), Some(5)));
    assert_eq!(a["status"], 0);
    assert!(a["worker"].as_u64().is_some());
    assert!(a.get("stderr").is_none(), "{a}");
    let g = done(&r[&greet]);
    assert_eq!(g["result"], "Hello, Ann!");
    assert_eq!(g["stdout"], "greeting Ann\n");
    assert_eq!(g["job"], greet.0);
    let (reason, error) = dead(&r[&throws]);
    assert_eq!(reason, DeadReason::Failed);
    let bootstrap = std::fs::canonicalize(dir.path().join("bootstrap.php")).unwrap();
    assert_eq!(
        error,
        format!(
            "DomainException: no way (code 42) at {}:6",
            bootstrap.display()
        )
    );
    let (_, error) = dead(&r[&slow]);
    assert!(
        error.starts_with("the job ran past its time limit of 0.300s; its PHP worker"),
        "{error}"
    );
    // One host takes both kinds (issue 12): the shell task runs as a
    // process beside the PHP workers.
    let sh = done(&r[&shell]);
    assert_eq!(sh["stdout"], "not php\n");
    assert_eq!(sh["status"], 0);
    assert!(sh.get("worker").is_none(), "{sh}");
    // The worker stopped for the time limit was replaced: jobs go on.
    let after = q.push(&json!({"call": "App\\Jobs\\add", "args": [1, 1]}), 1, "r");
    let r = q.results("r", 1);
    assert_eq!((r[0].id, done(&r[0])["result"].as_u64()), (after, Some(2)));
    let log = work.log();
    assert!(log.contains("job failed"), "{log}");
    assert!(log.contains("job done"), "{log}");
}

#[test]
fn php_jobs_run_with_results_through_redis() {
    php_jobs_run_with_results(Engine::redis());
}

#[test]
fn php_jobs_run_with_results_through_a_file() {
    php_jobs_run_with_results(Engine::file());
}

/// A result must fit in the queue (1 MiB): output that does not is left
/// out (the result says how much there was); a PHP return value that
/// does not fails the job, saying so.
#[test]
fn a_result_too_large_for_the_queue_is_cut_or_failed() {
    let engine = Engine::file();
    let dir = tempfile::tempdir().unwrap();
    let mut q = Producer::open(&engine);
    // 256K of NUL bytes (kept by --max-output) is 1.5M as JSON (\u0000).
    let zeros = q.push(
        &json!({"cmd": "head -c 300000 /dev/zero; echo err >&2"}),
        1,
        "r",
    );
    let _work = Work::start(&engine, dir.path(), &["-j", "1"]);
    let r = q.results("r", 1);
    assert_eq!(r[0].id, zeros);
    let line = done(&r[0]);
    assert_eq!(
        (line["stdout"].as_str(), line["stdout_truncated"].as_bool()),
        (Some(""), Some(true))
    );
    assert_eq!(line["stdout_bytes"], 300_000);
    assert_eq!(
        (line["stderr"].as_str(), line["stderr_truncated"].as_bool()),
        (Some(""), Some(true))
    );
    assert_eq!(line["stderr_bytes"], 4);
    drop(_work);

    let dir = app_dir();
    let big = q.push(
        &json!({"call": "App\\Jobs\\huge", "args": [2_000_000]}),
        1,
        "r",
    );
    let _work = Work::start(
        &engine,
        dir.path(),
        &["-j", "1", "--php-bootstrap", "bootstrap.php"],
    );
    let r = q.results("r", 1);
    assert_eq!(r[0].id, big);
    let (reason, error) = dead(&r[0]);
    assert_eq!(reason, DeadReason::Failed);
    assert!(error.starts_with("its result of 2000"), "{error}");
    assert!(
        error.ends_with("bytes is over the queue's limit of 1048576 bytes"),
        "{error}"
    );
}

/// A job that always throws is failed at each attempt with its error,
/// retried by the queue, and dead after its last attempt, its error kept.
#[test]
fn a_job_that_always_throws_ends_dead_after_its_attempts() {
    for engine in [Engine::redis(), Engine::file()] {
        let dir = app_dir();
        let mut q = Producer::open(&engine);
        let id = q.push(
            &json!({"call": "App\\Jobs\\fail", "args": ["always"]}),
            3,
            "r",
        );
        let work = Work::start(
            &engine,
            dir.path(),
            &["-j", "1", "--php-bootstrap", "bootstrap.php"],
        );
        let r = q.results("r", 1);
        assert_eq!((r[0].id, r[0].attempt), (id, 3), "{}", engine.name());
        let (reason, error) = dead(&r[0]);
        assert_eq!(reason, DeadReason::Failed);
        assert!(
            error.starts_with("DomainException: always (code 42) at "),
            "{error}"
        );
        let dead = q.dead();
        assert_eq!(dead.len(), 1);
        assert_eq!((dead[0].id, dead[0].attempts), (id, 3));
        assert_eq!(dead[0].last_error.as_deref(), Some(error.as_str()));
        let s = q.stats();
        assert_eq!((s.failed, s.retried, s.died, s.done), (3, 2, 1, 0), "{s:?}");
        assert_eq!(
            work.log().matches("job failed").count(),
            3,
            "{}",
            work.log()
        );
        assert!(work
            .log()
            .contains("that was its last attempt: dead-lettered"));
    }
}

/// Issue 12: a PHP job sees its queue job's id and attempt in `$_SERVER`
/// during the call, as a shell task sees them in its environment: a job
/// that fails on its first attempt sees attempt 2 on its retry.
#[test]
fn a_php_job_sees_its_id_and_attempt() {
    const APP: &str = r#"<?php
namespace App;
function flaky(): array {
    $seen = [$_SERVER['HEARTH_JOB_ID'] ?? null, $_SERVER['HEARTH_JOB_ATTEMPT'] ?? null];
    if ($seen[1] === '1') { throw new \RuntimeException('first attempt fails'); }
    return $seen;
}
"#;
    for engine in [Engine::redis(), Engine::file()] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("app.php"), APP).unwrap();
        let mut q = Producer::open(&engine);
        let id = q.push(&json!({"call": "App\\flaky"}), 2, "r");
        let _work = Work::start(
            &engine,
            dir.path(),
            &["-j", "1", "--php-bootstrap", "app.php"],
        );
        let r = q.results("r", 1);
        assert_eq!((r[0].id, r[0].attempt), (id, 2), "{}", engine.name());
        let line = done(&r[0]);
        assert_eq!(line["result"], json!([id.0.to_string(), "2"]), "{line}");
    }
}

/// With -j 2, two of five jobs are held, the other three stay ready: a
/// consumer never holds a job no worker runs.
#[test]
fn only_as_many_jobs_as_free_workers_are_held() {
    for engine in [Engine::redis(), Engine::file()] {
        let dir = tempfile::tempdir().unwrap();
        let mut q = Producer::open(&engine);
        let wait_for_go = "touch started-$$; while [ ! -f go ]; do sleep 0.02; done";
        let jobs: Vec<Value> = (0..5).map(|_| json!({"cmd": wait_for_go})).collect();
        q.push_many(&jobs, "r");
        let _work = Work::start(&engine, dir.path(), &["-j", "2"]);
        let started = || {
            std::fs::read_dir(dir.path())
                .unwrap()
                .filter(|e| {
                    e.as_ref()
                        .unwrap()
                        .file_name()
                        .to_string_lossy()
                        .starts_with("started-")
                })
                .count()
        };
        eventually("two jobs to start", || started() == 2);
        // Give the consumer every chance to take more than it should.
        std::thread::sleep(Duration::from_millis(1500));
        let s = q.stats();
        assert_eq!(
            (s.reserved, s.ready, started()),
            (2, 3, 2),
            "{}: {s:?}",
            engine.name()
        );
        std::fs::write(dir.path().join("go"), "").unwrap();
        let r = q.results("r", 5);
        assert!(r.iter().all(|r| matches!(r.outcome, Outcome::Done(_))));
    }
}

/// A job that runs three times its visibility timeout keeps its hold
/// while another consumer is waiting for work: it runs once, as attempt 1.
#[test]
fn a_long_job_keeps_its_hold() {
    let engine = Engine::redis();
    let dir = tempfile::tempdir().unwrap();
    let mut q = Producer::open(&engine);
    let id = q.push(&json!({"cmd": "sleep 3.5; echo done"}), 3, "r");
    let args = ["-j", "1", "--visibility-timeout", "1s"];
    let first = Work::start(&engine, dir.path(), &args);
    eventually("the job to be taken", || q.stats().reserved == 1);
    let _second = Work::start(&engine, dir.path(), &args);
    let r = q.results("r", 1);
    assert_eq!((r[0].id, r[0].attempt), (id, 1));
    assert_eq!(done(&r[0])["stdout"], "done\n");
    let s = q.stats();
    assert_eq!((s.retried, s.done, s.reserved), (0, 1, 0), "{s:?}");
    assert!(!first.log().contains("hold expired"), "{}", first.log());
}

/// SIGTERM while a job runs: the job finishes and is acked, the next one
/// is not taken, and hearth work exits with 0.
#[test]
fn sigterm_lets_the_running_job_finish_and_exits_0() {
    for engine in [Engine::redis(), Engine::file()] {
        let dir = tempfile::tempdir().unwrap();
        let mut q = Producer::open(&engine);
        let first = q.push(
            &json!({"cmd": "touch started; sleep 1; echo finished"}),
            3,
            "r",
        );
        let _second = q.push(&json!({"cmd": "echo second"}), 3, "r");
        let mut work = Work::start(&engine, dir.path(), &["-j", "1"]);
        eventually("the job to start", || dir.path().join("started").exists());
        work.signal(rustix::process::Signal::TERM);
        assert_eq!(work.wait_exit(), Some(0), "{}", work.log());
        let r = q.results("r", 1);
        assert_eq!((r[0].id, r[0].attempt), (first, 1));
        assert_eq!(done(&r[0])["stdout"], "finished\n");
        let s = q.stats();
        assert_eq!(
            (s.done, s.reserved, s.ready),
            (1, 0, 1),
            "{}: {s:?}",
            engine.name()
        );
        assert!(
            work.log().contains("SIGTERM: taking no more jobs"),
            "{}",
            work.log()
        );
    }
}

/// Past the grace period the running job is stopped and failed as
/// interrupted, so it runs again; hearth work still exits with 0.
#[test]
fn a_job_past_the_grace_period_is_stopped_and_runs_again() {
    let engine = Engine::file();
    let dir = tempfile::tempdir().unwrap();
    let q = Producer::open(&engine);
    let id = q.push(&json!({"cmd": "touch started; sleep 30"}), 3, "r");
    let mut work = Work::start(
        &engine,
        dir.path(),
        &["-j", "1", "--grace-period", "300ms", "--kill-after", "1s"],
    );
    eventually("the job to start", || dir.path().join("started").exists());
    work.signal(rustix::process::Signal::TERM);
    assert_eq!(work.wait_exit(), Some(0), "{}", work.log());
    assert!(
        work.log().contains("the grace period is over"),
        "{}",
        work.log()
    );
    let ready = q.ready();
    assert_eq!(ready.len(), 1, "{ready:?}");
    assert_eq!((ready[0].id, ready[0].attempts), (id, 1));
    assert_eq!(
        ready[0].last_error.as_deref(),
        Some("stopped by the shutdown of hearth work before it finished")
    );
}

/// 10,000 trivial PHP jobs over three `hearth work` processes, one of
/// them killed (SIGKILL) mid-batch: every job's result arrives exactly
/// once; the jobs the killed one held (at most its -j of 2) come again as
/// attempt 2.
#[test]
fn ten_thousand_jobs_over_three_consumers_one_killed() {
    let engine = Engine::redis();
    let dir = app_dir();
    let mut q = Producer::open(&engine);
    let n = 10_000;
    let jobs: Vec<Value> = (0..n)
        .map(|i| json!({"call": "App\\Jobs\\add", "args": [i, 1]}))
        .collect();
    let ids = q.push_many(&jobs, "batch");
    let args = [
        "-j",
        "2",
        "--php-bootstrap",
        "bootstrap.php",
        "--visibility-timeout",
        "2s",
        "--log-level",
        "info",
    ];
    let mut consumers: Vec<Work> = (0..3)
        .map(|_| Work::start(&engine, dir.path(), &args))
        .collect();
    let mut results = q.results("batch", n / 4);
    consumers[0].kill();
    results.extend(q.results("batch", n - results.len()));
    // Anything more (a second result for a job) would come now.
    std::thread::sleep(Duration::from_secs(3));
    results.extend(q.next_results("batch", Duration::from_millis(500)));
    let results = by_id(results);
    assert_eq!(results.len(), n);
    let mut again = 0;
    for (i, id) in ids.iter().enumerate() {
        let r = &results[id];
        let line = done(r);
        assert_eq!(line["result"].as_u64(), Some(i as u64 + 1));
        assert_eq!(line["attempt"].as_u64(), Some(u64::from(r.attempt)));
        match r.attempt {
            1 => {}
            2 => again += 1,
            other => panic!("job {id} settled at attempt {other}"),
        }
    }
    assert!(
        again <= 2,
        "{again} jobs came again; the killed consumer held 2 at most"
    );
    let s = q.stats();
    assert_eq!(
        (s.done, s.retried, s.reserved, s.ready),
        (n as u64, again, 0, 0),
        "{s:?}"
    );
    eprintln!("{again} job(s) of the killed consumer ran again as attempt 2");
}

/// Redis killed (SIGKILL) and started again (AOF on) mid-batch: the
/// consumers reconnect by themselves and every job's result arrives,
/// once.
#[test]
fn redis_restarting_mid_batch_loses_nothing() {
    let mut engine = Engine::redis();
    let dir = app_dir();
    let mut q = Producer::open(&engine);
    let n = 2_000;
    let jobs: Vec<Value> = (0..n)
        .map(|i| json!({"call": "App\\Jobs\\add", "args": [i, 1]}))
        .collect();
    let ids = q.push_many(&jobs, "batch");
    let args = [
        "-j",
        "2",
        "--php-bootstrap",
        "bootstrap.php",
        "--log-level",
        "info",
    ];
    let consumers: Vec<Work> = (0..2)
        .map(|_| Work::start(&engine, dir.path(), &args))
        .collect();
    let mut results = q.results("batch", n / 4);
    let Engine::Redis(server) = &mut engine else {
        unreachable!()
    };
    server.restart();
    results.extend(q.results("batch", n - results.len()));
    std::thread::sleep(Duration::from_secs(2));
    results.extend(q.next_results("batch", Duration::from_millis(500)));
    let results = by_id(results);
    assert_eq!(results.len(), n);
    for (i, id) in ids.iter().enumerate() {
        assert_eq!(done(&results[id])["result"].as_u64(), Some(i as u64 + 1));
    }
    let s = q.stats();
    assert_eq!((s.done, s.reserved, s.ready), (n as u64, 0, 0), "{s:?}");
    for c in &consumers {
        assert!(
            c.log().contains("queue unreachable, retrying"),
            "{}",
            c.log()
        );
    }
}

/// SIGKILL `hearth work` on a queue file mid-batch and start it again:
/// every job completes, once.
#[test]
fn a_killed_consumer_of_a_file_queue_restarts_and_every_job_completes() {
    let engine = Engine::file();
    let dir = tempfile::tempdir().unwrap();
    let mut q = Producer::open(&engine);
    let n = 2_000;
    let jobs: Vec<Value> = (0..n)
        .map(|i| json!({"argv": ["echo", i.to_string()]}))
        .collect();
    let ids = q.push_many(&jobs, "batch");
    let args = ["-j", "4", "--visibility-timeout", "2s"];
    let mut first = Work::start(&engine, dir.path(), &args);
    let mut results = q.results("batch", n / 4);
    first.kill();
    let held = q.stats().reserved;
    assert!(held <= 4, "the killed consumer held {held}");
    let _second = Work::start(&engine, dir.path(), &args);
    results.extend(q.results("batch", n - results.len()));
    std::thread::sleep(Duration::from_secs(3));
    results.extend(q.next_results("batch", Duration::from_millis(500)));
    let results = by_id(results);
    assert_eq!(results.len(), n);
    for (i, id) in ids.iter().enumerate() {
        assert_eq!(done(&results[id])["stdout"], format!("{i}\n"));
    }
    let again = results.values().filter(|r| r.attempt == 2).count() as u64;
    assert_eq!(again, held, "the jobs it held, and only those, ran again");
    let s = q.stats();
    assert_eq!((s.done, s.reserved, s.ready), (n as u64, 0, 0), "{s:?}");
}

/// SIGHUP replaces the PHP job workers; jobs go on.
#[test]
fn sighup_replaces_the_php_job_workers() {
    let engine = Engine::file();
    let dir = app_dir();
    let mut q = Producer::open(&engine);
    let work = Work::start(
        &engine,
        dir.path(),
        &["-j", "1", "--php-bootstrap", "bootstrap.php"],
    );
    q.push(&json!({"call": "App\\Jobs\\pid"}), 1, "r");
    let before = done(&q.results("r", 1)[0])["result"].clone();
    work.signal(rustix::process::Signal::HUP);
    work.wait_for_log("job workers reloaded");
    q.push(&json!({"call": "App\\Jobs\\pid"}), 1, "r");
    let after = done(&q.results("r", 1)[0])["result"].clone();
    assert!(before.is_u64() && after.is_u64());
    assert_ne!(before, after, "the worker was replaced");
}

/// Where the options come from: `[work]` in the config file, with a
/// `file:` queue relative to it.
#[test]
fn work_reads_its_section_of_the_config_file() {
    let dir = app_dir();
    let config = dir.path().join("hearth.toml");
    std::fs::write(
        &config,
        "[work]\nqueue = \"file:jobs.db\"\njobs = 1\nphp_bootstrap = \"bootstrap.php\"\n",
    )
    .unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    // The queue the file names: jobs.db beside it.
    let url = format!("file:{}", dir.path().join("jobs.db").display());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let producer = rt
        .block_on(Queue::open(&url, QueueConfig::default()))
        .unwrap();
    let job = NewJob::new(json!({"call": "App\\Jobs\\add", "args": [20, 22]}).to_string());
    rt.block_on(producer.push(job.reply_to("r"))).unwrap();
    let mut child = Command::new(HEARTH)
        .args(["work", "--config"])
        .arg(&config)
        .current_dir(elsewhere.path())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut reader = producer.results("r").unwrap();
    let got = rt.block_on(reader.next(1, PATIENCE)).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(got.len(), 1);
    assert_eq!(done(&got[0])["result"], 42);
}

/// Unusable options are refused before anything starts, naming them.
#[test]
fn unusable_options_are_refused_by_name() {
    for (args, expected) in [
        (vec![], "--queue: is needed"),
        (
            vec!["--queue", "memcached://x"],
            "--queue: queue URL: memcached://x: expected",
        ),
        (
            vec!["--queue", "file:/tmp/x.db", "-j", "0"],
            "--jobs: must be at least 1",
        ),
        (
            vec!["--queue", "file:/tmp/x.db", "--visibility-timeout", "500ms"],
            "--visibility-timeout: must be at least 1s",
        ),
        (
            vec!["--queue", "file:/tmp/x.db", "--max-jobs", "5"],
            "--max-jobs: needs --php-bootstrap",
        ),
    ] {
        let out = Command::new(HEARTH)
            .arg("work")
            .args(&args)
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}

/// `hearth status`, `hearth reload` and `hearth stop` over the control
/// socket of a `hearth work`: its jobs and its queue's counts; workers
/// replaced after their current job, which is not lost; a graceful stop.
#[test]
fn status_reload_and_stop_over_the_control_socket() {
    let engine = Engine::file();
    let dir = app_dir();
    let socket = dir.path().join("work.sock");
    let socket_arg = socket.to_string_lossy().into_owned();
    let mut q = Producer::open(&engine);
    q.push(&json!({"call": "App\\Jobs\\pid"}), 1, "r");
    let mut work = Work::start(
        &engine,
        dir.path(),
        &[
            "-j",
            "2",
            "--php-bootstrap",
            "bootstrap.php",
            "--control-socket",
            &socket_arg,
        ],
    );
    let before = done(&q.results("r", 1)[0])["result"].clone();
    let slow = q.push(&json!({"call": "App\\Jobs\\nap", "args": [2]}), 1, "r");
    eventually("the slow job to run", || q.stats().reserved == 1);
    let status = ctl(&["status", "--control-socket", &socket_arg, "--json"]);
    let status: Value = serde_json::from_str(&status).unwrap();
    let w = &status["work"];
    assert_eq!(w["queue"], engine.url());
    assert_eq!(
        (w["kind"].as_str(), w["slots"].as_u64()),
        (Some("php"), Some(2))
    );
    assert_eq!(
        (w["running"].as_u64(), w["done"].as_u64()),
        (Some(1), Some(1)),
        "{status}"
    );
    assert_eq!(w["queue_stats"]["reserved"], 1, "{status}");
    assert_eq!(w["queue_stats"]["done"], 1, "{status}");
    assert_eq!(status["pool"]["live"], 2, "{status}");
    assert_eq!(status["stopping"], false);
    let table = ctl(&["status", "--control-socket", &socket_arg]);
    assert!(
        table.contains(&format!(
            "taking shell tasks and PHP jobs from {} as ",
            engine.url()
        )),
        "{table}"
    );
    assert!(
        table.contains("jobs: 2 at once, 1 running; done 1, failed 0"),
        "{table}"
    );
    assert!(
        table.contains("queue: 0 ready, 0 delayed, 1 reserved, 0 dead"),
        "{table}"
    );
    assert!(
        table.contains("workers: 2 live (1 busy, 1 idle)"),
        "{table}"
    );

    let reloaded = ctl(&["reload", "--control-socket", &socket_arg]);
    assert!(
        reloaded.starts_with("reloaded: every job worker runs "),
        "{reloaded}"
    );
    // The job that ran through the reload finished, once.
    let r = q.results("r", 1);
    assert_eq!((r[0].id, r[0].attempt), (slow, 1));
    assert_eq!(done(&r[0])["result"], "awake");
    q.push(&json!({"call": "App\\Jobs\\pid"}), 1, "r");
    let after = done(&q.results("r", 1)[0])["result"].clone();
    assert_ne!(before, after, "the workers were replaced");

    let stopped = ctl(&["stop", "--control-socket", &socket_arg]);
    assert_eq!(stopped, "shutting down gracefully\nstopped\n");
    assert_eq!(work.wait_exit(), Some(0), "{}", work.log());
    assert!(!socket.exists(), "the control socket is removed at exit");
}

/// Without PHP workers there is nothing to reload, and `hearth reload`
/// says so.
#[test]
fn a_shell_task_host_has_nothing_to_reload() {
    let engine = Engine::file();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("work.sock");
    let socket_arg = socket.to_string_lossy().into_owned();
    let _work = Work::start(
        &engine,
        dir.path(),
        &["-j", "1", "--control-socket", &socket_arg],
    );
    let said = ctl(&["reload", "--control-socket", &socket_arg]);
    assert_eq!(said, "nothing to reload: each shell task starts afresh\n");
    let status: Value =
        serde_json::from_str(&ctl(&["status", "--control-socket", &socket_arg, "--json"])).unwrap();
    assert_eq!(status["work"]["kind"], "shell");
    assert!(status.get("pool").is_none(), "{status}");
}

/// `/metrics` on the admin listener: this process's jobs by outcome, a
/// histogram of their run times, and its queue's counts; `/readyz` and
/// `/healthz`.
#[test]
fn metrics_and_health_on_the_admin_listener() {
    let engine = Engine::redis();
    let dir = tempfile::tempdir().unwrap();
    let mut q = Producer::open(&engine);
    q.push(&json!({"cmd": "true"}), 1, "r");
    q.push(&json!({"cmd": "true"}), 1, "r");
    q.push(&json!({"cmd": "exit 2"}), 1, "r");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let admin = format!("127.0.0.1:{port}");
    let _work = Work::start(&engine, dir.path(), &["-j", "2", "--admin", &admin]);
    q.results("r", 3);
    let get = |path: &str| {
        use std::io::{Read as _, Write as _};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.write_all(
            format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        text
    };
    let url = hearth_queue::QueueUrl::parse(&engine.url())
        .unwrap()
        .to_string();
    let dead = format!("hearth_queue_jobs{{queue=\"{url}\",state=\"dead\"}} 1\n");
    let mut metrics = String::new();
    eventually("the queue's counts in /metrics", || {
        metrics = get("/metrics");
        metrics.contains(&dead)
    });
    for line in [
        "hearth_work_jobs_total{outcome=\"done\"} 2\n",
        "hearth_work_jobs_total{outcome=\"failed\"} 1\n",
        "hearth_work_jobs_running 0\n",
        "hearth_work_slots 2\n",
        "hearth_work_job_duration_seconds_count{outcome=\"done\"} 2\n",
        "hearth_work_job_duration_seconds_count{outcome=\"failed\"} 1\n",
        &format!("hearth_queue_events_total{{queue=\"{url}\",event=\"pushed\"}} 3\n"),
        &format!("hearth_queue_events_total{{queue=\"{url}\",event=\"died\"}} 1\n"),
        &format!("hearth_queue_jobs{{queue=\"{url}\",state=\"ready\"}} 0\n"),
        &format!("hearth_queue_oldest_ready_age_seconds{{queue=\"{url}\"}} 0.0\n"),
    ] {
        assert!(metrics.contains(line), "{line} in:\n{metrics}");
    }
    assert!(!metrics.contains("hearth_http_"), "{metrics}");
    assert!(get("/readyz").contains("ready: 2 live workers"));
    assert!(get("/healthz").ends_with("ok\n"));
}

/// `hearth ARGS` (a control socket client), which must succeed: its stdout.
fn ctl(args: &[&str]) -> String {
    let out = Command::new(HEARTH)
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "hearth {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}
