//! `hearth run --queue URL` against real queues (a redis-server the test
//! starts on a free port in a temporary directory, and a queue file), with
//! real `hearth work` consumers: the batch is submitted as jobs and its
//! results come back as a local run writes them.
#![allow(clippy::unwrap_used)]

mod queue_support;

use std::collections::{BTreeSet, HashMap};
use std::io::Write as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use queue_support::*;
use serde_json::{json, Value};

/// What a run wrote and how it ended.
struct Ran {
    code: Option<i32>,
    results: Vec<Value>,
    stderr: String,
}

impl Ran {
    fn by_id(&self) -> HashMap<String, Value> {
        let mut map = HashMap::new();
        for r in &self.results {
            let id = r["id"].to_string().trim_matches('"').to_owned();
            assert!(
                map.insert(id.clone(), r.clone()).is_none(),
                "two results for {id}"
            );
        }
        map
    }
}

/// `hearth run ARGS` in `dir` with `input` on stdin, to the end (killed
/// after a minute: a test never hangs).
fn run(dir: &Path, args: &[&str], input: &str) -> Ran {
    let mut child = Command::new(HEARTH)
        .arg("run")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_owned();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(input.as_bytes());
    });
    let pid = child.id();
    let watchdog = std::thread::spawn(move || {
        let deadline = Instant::now() + PATIENCE;
        while Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
            if !Path::new(&format!("/proc/{pid}")).exists() {
                return;
            }
        }
        if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    });
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    drop(watchdog);
    Ran {
        code: out.status.code(),
        results: String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
            .collect(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn lines(tasks: &[Value]) -> String {
    tasks.iter().map(|t| format!("{t}\n")).collect()
}

/// A `hearth run --queue` in the background, its stderr read as it comes.
struct Background {
    child: Child,
    stderr: Arc<Mutex<String>>,
}

impl Background {
    fn start(dir: &Path, args: &[&str], input_file: &Path) -> Background {
        let mut child = Command::new(HEARTH)
            .arg("run")
            .args(args)
            .arg(input_file)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = collect_lines(child.stderr.take().unwrap());
        // Drained so that results never block it.
        let mut out = child.stdout.take().unwrap();
        std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
        Background { child, stderr }
    }

    fn stderr(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn wait_for_stderr(&self, needle: &str) {
        let deadline = Instant::now() + PATIENCE;
        while !self.stderr().contains(needle) {
            assert!(
                Instant::now() < deadline,
                "hearth run never said {needle:?}:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn signal(&self, signal: rustix::process::Signal) {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32).unwrap();
        rustix::process::kill_process(pid, signal).unwrap();
    }

    fn wait_exit(&mut self) -> Option<i32> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(
                Instant::now() < deadline,
                "hearth run did not exit:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The fields a run's timing or its host decide, left out of comparisons.
const VARYING: [&str; 4] = ["duration_ms", "worker", "job", "attempt"];

fn comparable(v: &Value) -> Value {
    let mut v = v.clone();
    for k in VARYING.iter().chain(&["dead"]) {
        v.as_object_mut().unwrap().remove(*k);
    }
    v
}

fn mixed_batch() -> Vec<Value> {
    vec![
        json!({"id": "sh", "cmd": "echo hi; echo warn >&2"}),
        json!({"id": "argv", "argv": ["sh", "-c", "cat; echo \"$X\""], "stdin": "in\n", "env": {"X": "ex"}}),
        json!({"cmd": "echo no id"}),
        json!({"id": "add", "call": "App\\Jobs\\add", "args": [2, 3]}),
        json!({"id": "greet", "call": "App\\Jobs\\greet", "args": {"name": "Ann"}}),
        json!({"id": 7, "cmd": "printf 'a\\377b'"}),
        json!({"id": "exits", "cmd": "echo oops >&2; exit 3"}),
        json!({"id": "throws", "call": "App\\Jobs\\fail", "args": ["no way"]}),
    ]
}

/// A mixed batch of shell tasks and PHP jobs run by two consumers: every
/// result arrives once, in the JSONL of a local run of the same input
/// (the same fields and values, but for timing, the worker and the job's
/// id in the queue), failures as the queue records them, and the same
/// exit status.
fn a_batch_comes_back_as_a_local_run(engine: Engine) {
    let dir = app_dir();
    let input = lines(&mixed_batch());
    let local = run(
        dir.path(),
        &["--php-bootstrap", "bootstrap.php", "-j", "2"],
        &input,
    );
    assert_eq!(local.code, Some(2), "{}", local.stderr);

    let url = engine.url();
    let consumers = [
        Work::start(
            &engine,
            dir.path(),
            &["-j", "2", "--php-bootstrap", "bootstrap.php"],
        ),
        Work::start(
            &engine,
            dir.path(),
            &["-j", "2", "--php-bootstrap", "bootstrap.php"],
        ),
    ];
    let remote = run(dir.path(), &["--queue", &url], &input);
    assert_eq!(remote.code, Some(2), "{}", remote.stderr);
    assert_eq!(remote.results.len(), local.results.len());
    let (local, remote) = (local.by_id(), remote.by_id());
    let ids: BTreeSet<_> = remote.keys().cloned().collect();
    assert_eq!(ids, local.keys().cloned().collect::<BTreeSet<_>>());
    for id in ["sh", "argv", "3", "add", "greet", "7", "exits", "throws"] {
        let (l, r) = (&local[id], &remote[id]);
        assert_eq!(comparable(r), comparable(l), "{id}");
        let keys = |v: &Value| {
            v.as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect::<BTreeSet<_>>()
        };
        let mut expected = keys(l);
        expected.insert("job".into());
        if matches!(id, "exits" | "throws") {
            // A job that failed for good: the line of its last attempt,
            // and why the queue let it die.
            expected.insert("dead".into());
            assert_eq!(r["dead"], "failed", "{id}");
        }
        assert_eq!(
            keys(r),
            expected,
            "{id}: the fields of a local result, and job"
        );
    }
    assert_eq!(remote["add"]["result"], 5);
    assert!(remote["add"]["worker"].as_u64().is_some());
    assert_eq!(remote["7"]["stdout_encoding"], "base64");
    let e = &remote["exits"];
    assert_eq!(
        (
            e["seq"].as_u64(),
            e["status"].as_i64(),
            e["stderr"].as_str()
        ),
        (Some(7), Some(3), Some("oops\n"))
    );
    assert_eq!(remote["throws"]["error"]["class"], "DomainException");
    // Each consumer may have taken some; none ran a job twice.
    let log: String = consumers.iter().map(Work::log).collect();
    assert_eq!(log.matches("job started").count(), 8, "{log}");
    let q = Producer::open(&engine);
    assert_eq!(q.stats().pushed, 8);
    assert_eq!(
        result_channels(&engine),
        "",
        "the run's results channel is removed"
    );
}

/// The results channels left in the queue, one per line.
fn result_channels(engine: &Engine) -> String {
    let out = match engine {
        Engine::Redis(server) => Command::new("redis-cli")
            .args([
                "-p",
                &server.port.to_string(),
                "--scan",
                "--pattern",
                "hearth:{jobs}:result:*",
            ])
            .output()
            .unwrap(),
        Engine::File(dir) => Command::new("sqlite3")
            .arg(dir.path().join("jobs.db"))
            .arg("SELECT DISTINCT channel FROM results")
            .output()
            .unwrap(),
    };
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[test]
fn a_batch_comes_back_as_a_local_run_through_redis() {
    a_batch_comes_back_as_a_local_run(Engine::redis());
}

#[test]
fn a_batch_comes_back_as_a_local_run_through_a_file() {
    a_batch_comes_back_as_a_local_run(Engine::file());
}

/// A batch longer than the 10,000 jobs a run keeps outstanding streams
/// through: the next tasks are pushed as results come back, and every
/// result arrives once.
#[test]
fn a_batch_past_the_outstanding_bound_streams_through() {
    let engine = Engine::redis();
    let dir = app_dir();
    let input = dir.path().join("tasks");
    let n = 25_000u64;
    let mut text = String::new();
    for i in 0..n {
        text.push_str(&format!(
            "{{\"call\":\"App\\\\Jobs\\\\add\",\"args\":[{i},1]}}\n"
        ));
    }
    std::fs::write(&input, text).unwrap();
    let _consumers = [
        Work::start(
            &engine,
            dir.path(),
            &["-j", "2", "--php-bootstrap", "bootstrap.php"],
        ),
        Work::start(
            &engine,
            dir.path(),
            &["-j", "2", "--php-bootstrap", "bootstrap.php"],
        ),
    ];
    let ran = run(
        dir.path(),
        &["--queue", &engine.url(), input.to_str().unwrap()],
        "",
    );
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    assert_eq!(ran.results.len() as u64, n);
    let mut seqs = BTreeSet::new();
    for r in &ran.results {
        let seq = r["seq"].as_u64().unwrap();
        assert_eq!(r["result"].as_u64(), Some(seq), "{r}");
        assert!(seqs.insert(seq), "two results for {seq}");
    }
    assert_eq!(seqs.len() as u64, n);
    assert_eq!(Producer::open(&engine).stats().pushed, n);
}

/// `--lines`, a COMMAND, `--keep-order`, `--timeout` and `--retries`
/// carry over: the timeout into each job, the retries as its attempts.
#[test]
fn lines_keep_order_timeout_and_retries_carry_over() {
    let engine = Engine::file();
    let dir = tempfile::tempdir().unwrap();
    let _work = Work::start(&engine, dir.path(), &["-j", "3"]);
    let url = engine.url();
    let ran = run(
        dir.path(),
        &[
            "--queue",
            &url,
            "-k",
            "-q",
            "--",
            "sh",
            "-c",
            "sleep $0; echo $0",
        ],
        "0.3\n0\n0.1\n",
    );
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    let out: Vec<_> = ran.results.iter().map(|r| r["stdout"].clone()).collect();
    assert_eq!(out, [json!("0.3\n"), json!("0\n"), json!("0.1\n")]);
    let seqs: Vec<_> = ran.results.iter().map(|r| r["seq"].as_u64()).collect();
    assert_eq!(seqs, [Some(1), Some(2), Some(3)]);

    let flaky = json!({"id": "flaky", "cmd": "test \"$HEARTH_JOB_ATTEMPT\" = 2"});
    let slow = json!({"id": "slow", "cmd": "sleep 30"});
    let ran = run(
        dir.path(),
        &["--queue", &url, "--retries", "2", "--timeout", "300ms"],
        &lines(&[flaky, slow]),
    );
    assert_eq!(ran.code, Some(1), "{}", ran.stderr);
    let r = ran.by_id();
    assert_eq!(
        (
            r["flaky"]["status"].as_i64(),
            r["flaky"]["attempts"].as_u64()
        ),
        (Some(0), Some(2))
    );
    let slow = &r["slow"];
    assert_eq!(slow["timed_out"], true, "{slow}");
    assert_eq!(slow["signal"], "SIGTERM", "{slow}");
    assert_eq!(slow["attempts"], 2, "{slow}");
}

/// `--joblog`, then `--resume` with more input: only the tasks the job log
/// does not list are submitted; those it lists are written as skipped, and
/// its failures count in the exit status.
#[test]
fn resume_submits_only_the_unfinished_tasks() {
    for engine in [Engine::redis(), Engine::file()] {
        let dir = tempfile::tempdir().unwrap();
        let _work = Work::start(&engine, dir.path(), &["-j", "2"]);
        let url = engine.url();
        let joblog = dir.path().join("jobs.log");
        let joblog = joblog.to_str().unwrap();
        let tasks: Vec<Value> = (1..=5)
            .map(|i| json!({"id": i, "cmd": if i == 2 { "exit 4".to_owned() } else { format!("echo {i}") }}))
            .collect();
        let first = run(
            dir.path(),
            &["--queue", &url, "--joblog", joblog],
            &lines(&tasks[..3]),
        );
        assert_eq!(first.code, Some(1), "{}", first.stderr);
        let log = std::fs::read_to_string(joblog).unwrap();
        assert_eq!(log.lines().count(), 4, "a header and 3 tasks:\n{log}");
        assert!(
            log.lines().any(|l| l.split('\t').nth(6) == Some("4")),
            "{log}"
        );

        let again = run(
            dir.path(),
            &["--queue", &url, "--joblog", joblog, "--resume"],
            &lines(&tasks),
        );
        assert_eq!(
            again.code,
            Some(1),
            "the logged failure counts: {}",
            again.stderr
        );
        let r = again.by_id();
        for id in ["1", "2", "3"] {
            assert_eq!(r[id]["skipped"], true, "{id}: {}", r[id]);
        }
        assert_eq!(r["2"]["status"], 4);
        for id in ["4", "5"] {
            assert_eq!(r[id]["stdout"], format!("{id}\n"));
        }
        let q = Producer::open(&engine);
        assert_eq!(q.stats().pushed, 5, "{}: 3, then only 2", engine.name());
        assert_eq!(std::fs::read_to_string(joblog).unwrap().lines().count(), 6);
    }
}

/// Ctrl-C twice, then `--resume`: the tasks with a result are skipped,
/// the others submitted again (the jobs the first run left queued still
/// run too: at least once).
#[test]
fn interrupted_then_resumed() {
    let engine = Engine::file();
    let dir = tempfile::tempdir().unwrap();
    // Room for the jobs of both runs at once.
    let _work = Work::start(&engine, dir.path(), &["-j", "4"]);
    let url = engine.url();
    let tasks = dir.path().join("tasks");
    std::fs::write(
        &tasks,
        lines(&[
            json!({"id": "quick", "cmd": "echo quick"}),
            json!({"id": "slow1", "cmd": "sleep 3; echo slow1"}),
            json!({"id": "slow2", "cmd": "sleep 3; echo slow2"}),
        ]),
    )
    .unwrap();
    let joblog = dir.path().join("jobs.log");
    let joblog = joblog.to_str().unwrap();
    let mut first = Background::start(dir.path(), &["--queue", &url, "--joblog", joblog], &tasks);
    eventually("the quick task's line in the job log", || {
        std::fs::read_to_string(joblog).is_ok_and(|l| l.contains("echo quick"))
    });
    first.signal(rustix::process::Signal::INT);
    first.wait_for_stderr("SIGINT: submitting no more tasks");
    first.signal(rustix::process::Signal::INT);
    assert_eq!(first.wait_exit(), Some(130), "{}", first.stderr());
    assert!(
        first.stderr().contains(
            "run it again with the same --joblog and --resume to submit the tasks without a result"
        ),
        "{}",
        first.stderr()
    );
    let again = run(
        dir.path(),
        &[
            "--queue",
            &url,
            "--joblog",
            joblog,
            "--resume",
            tasks.to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(again.code, Some(0), "{}", again.stderr);
    let r = again.by_id();
    assert_eq!(r["quick"]["skipped"], true);
    for id in ["slow1", "slow2"] {
        assert_eq!(r[id]["stdout"], format!("{id}\n"), "{}", r[id]);
    }
    assert_eq!(
        Producer::open(&engine).stats().pushed,
        5,
        "3, then the 2 without a result"
    );
}

/// Without a consumer, nothing is taken: the run says so on stderr,
/// naming the queue and how many jobs wait, rather than hang silently. A
/// first Ctrl-C submits nothing more and says that the queued jobs keep
/// running and how to resume; a second stops waiting (exit 130), and the
/// jobs are still in the queue. At most 10,000 jobs are outstanding: the
/// rest of a long input is not read in or pushed meanwhile.
#[test]
fn without_a_consumer_the_run_says_so_and_ctrl_c_leaves_the_jobs_queued() {
    for engine in [Engine::redis(), Engine::file()] {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("tasks");
        let mut text = String::new();
        for i in 0..25_000 {
            text.push_str(&format!("{{\"cmd\":\"echo {i}\"}}\n"));
        }
        std::fs::write(&input, text).unwrap();
        let url = engine.url();
        let joblog = dir.path().join("jobs.log");
        let mut run = Background::start(
            dir.path(),
            &["--queue", &url, "--joblog", joblog.to_str().unwrap()],
            &input,
        );
        run.wait_for_stderr("none taken by a consumer");
        let said = run.stderr();
        // The queue as it reads it: redis://127.0.0.1:PORT/0/jobs.
        let shown = match engine {
            Engine::Redis(_) => url.replace("/jobs", "/0/jobs"),
            Engine::File(_) => url.clone(),
        };
        assert!(
            said.contains(&format!(
                "10000 job(s) of this run wait in the queue {shown} (10000 ready, none taken"
            )),
            "{said}"
        );
        assert!(
            said.contains(&format!("is `hearth work --queue {shown}` running?")),
            "{said}"
        );
        let q = Producer::open(&engine);
        assert_eq!(q.stats().pushed, 10_000, "{}", engine.name());

        run.signal(rustix::process::Signal::INT);
        run.wait_for_stderr("SIGINT: submitting no more tasks; waiting for the results of the 10000 job(s) already queued");
        assert!(run.stderr().contains("--resume"), "{}", run.stderr());
        run.signal(rustix::process::Signal::INT);
        assert_eq!(run.wait_exit(), Some(130), "{}", run.stderr());
        assert!(
            run.stderr().contains(
                "no longer waiting; the 10000 job(s) already queued still run on the consumers"
            ),
            "{}",
            run.stderr()
        );
        let s = q.stats();
        assert_eq!((s.pushed, s.ready), (10_000, 10_000), "{s:?}");
    }
}

/// The options the consumers decide are refused by name with --queue, as
/// is a queue URL that is not one.
#[test]
fn options_the_consumers_decide_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("file:{}", dir.path().join("q.db").display());
    for (args, expected) in [
        (vec!["-j", "2"], "--jobs: does not combine with --queue"),
        (
            vec!["--kill-after", "1s"],
            "--kill-after: does not combine with --queue",
        ),
        (
            vec!["--max-output", "1K"],
            "--max-output: does not combine with --queue",
        ),
        (
            vec!["--php-bootstrap", "app.php"],
            "--php-bootstrap: does not combine with --queue",
        ),
        (vec!["--php", "php"], "--php: does not combine with --queue"),
        (
            vec!["--ini", "memory_limit=1G"],
            "--ini: does not combine with --queue",
        ),
        (
            vec!["--boot-timeout", "5s"],
            "--boot-timeout: does not combine with --queue",
        ),
        (
            vec!["--halt", "now"],
            "--halt: does not combine with --queue",
        ),
    ] {
        let mut all = vec!["--queue", db.as_str()];
        all.extend(&args);
        let ran = run(dir.path(), &all, "{\"cmd\":\"true\"}\n");
        assert_eq!(ran.code, Some(255), "{args:?}");
        assert!(ran.stderr.contains(expected), "{args:?}: {}", ran.stderr);
        assert!(ran.results.is_empty());
    }
    let ran = run(dir.path(), &["--queue", "memcached://x"], "");
    assert_eq!(ran.code, Some(255));
    assert!(
        ran.stderr.contains("--queue: queue URL: memcached://x"),
        "{}",
        ran.stderr
    );
    assert!(
        !dir.path().join("q.db").exists(),
        "a refused run opens no queue"
    );
}
