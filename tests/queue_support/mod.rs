//! Helpers for the tests of `hearth work` and `hearth queue`: a queue on
//! a real redis-server (started by the test: AOF on, a free port, a
//! temporary directory) or in a queue file, a producer with the
//! `hearth-queue` crate, and a running `hearth work`.
// Test code: a failure is a test failure.
#![allow(clippy::unwrap_used, dead_code)]

#[path = "../../crates/hearth-queue/tests/support/mod.rs"]
mod redis_support;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hearth_queue::{
    Backoff, DeadReason, JobId, JobResult, NewJob, Outcome, Part, Queue, QueueConfig, Results,
    Stats,
};
pub use redis_support::RedisServer;
use serde_json::Value;

pub const HEARTH: &str = env!("CARGO_BIN_EXE_hearth");

/// Long enough for any wait here on a loaded machine.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// A queue engine for one test.
pub enum Engine {
    Redis(RedisServer),
    File(tempfile::TempDir),
}

impl Engine {
    pub fn redis() -> Engine {
        Engine::Redis(RedisServer::start())
    }

    pub fn file() -> Engine {
        Engine::File(tempfile::tempdir().unwrap())
    }

    pub fn url(&self) -> String {
        match self {
            Engine::Redis(server) => format!("redis://127.0.0.1:{}/jobs", server.port),
            Engine::File(dir) => format!("file:{}", dir.path().join("jobs.db").display()),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Engine::Redis(_) => "redis",
            Engine::File(_) => "file",
        }
    }
}

/// The producer's side, with the `hearth-queue` crate.
pub struct Producer {
    rt: tokio::runtime::Runtime,
    queue: Queue,
    readers: HashMap<String, Results>,
}

impl Producer {
    pub fn open(engine: &Engine) -> Producer {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let queue = rt
            .block_on(Queue::open(&engine.url(), QueueConfig::default()))
            .unwrap();
        Producer {
            rt,
            queue,
            readers: HashMap::new(),
        }
    }

    /// Pushes one payload with results to `channel`, no backoff.
    pub fn push(&self, payload: &Value, attempts: u32, channel: &str) -> JobId {
        self.push_raw(payload.to_string().into_bytes(), attempts, channel)
    }

    pub fn push_raw(&self, payload: Vec<u8>, attempts: u32, channel: &str) -> JobId {
        let job = NewJob::new(payload)
            .attempts(attempts)
            .backoff(Backoff::none())
            .reply_to(channel);
        self.rt.block_on(self.queue.push(job)).unwrap()
    }

    pub fn push_many(&self, payloads: &[Value], channel: &str) -> Vec<JobId> {
        let mut ids = Vec::new();
        for chunk in payloads.chunks(1000) {
            let jobs = chunk
                .iter()
                .map(|p| {
                    NewJob::new(p.to_string().into_bytes())
                        .backoff(Backoff::none())
                        .reply_to(channel)
                })
                .collect();
            ids.extend(self.rt.block_on(self.queue.push_many(jobs)).unwrap());
        }
        ids
    }

    /// Reads `channel` until `n` outcomes came since the last read.
    pub fn results(&mut self, channel: &str, n: usize) -> Vec<JobResult> {
        let mut out = Vec::new();
        let give_up = Instant::now() + PATIENCE * 3;
        while out.len() < n {
            out.extend(self.next_results(channel, Duration::from_millis(500)));
            assert!(
                Instant::now() < give_up,
                "only {} of {n} results came",
                out.len()
            );
        }
        out
    }

    /// What came on `channel` within `wait`.
    pub fn next_results(&mut self, channel: &str, wait: Duration) -> Vec<JobResult> {
        if !self.readers.contains_key(channel) {
            // A Redis reader's connection starts on the runtime.
            let _in_runtime = self.rt.enter();
            let reader = self.queue.results(channel).unwrap();
            self.readers.insert(channel.to_owned(), reader);
        }
        let reader = self.readers.get_mut(channel).unwrap();
        self.rt.block_on(reader.next(1000, wait)).unwrap()
    }

    /// Takes every ready job and fails it (a job of one attempt goes dead).
    pub fn fail_all(&self) {
        self.rt.block_on(async {
            let c = self.queue.consumer().unwrap();
            loop {
                let jobs = c.reserve(1000, Duration::from_millis(200)).await.unwrap();
                if jobs.is_empty() {
                    break;
                }
                for j in jobs {
                    c.fail(&j, "failed by the test").await.unwrap();
                }
            }
        });
    }

    pub fn stats(&self) -> Stats {
        self.rt.block_on(self.queue.stats()).unwrap()
    }

    pub fn dead(&self) -> Vec<hearth_queue::JobInfo> {
        self.rt.block_on(self.queue.peek(Part::Dead, 100)).unwrap()
    }

    pub fn ready(&self) -> Vec<hearth_queue::JobInfo> {
        self.rt.block_on(self.queue.peek(Part::Ready, 100)).unwrap()
    }
}

/// The result line a job was acked with.
pub fn done(r: &JobResult) -> Value {
    match &r.outcome {
        Outcome::Done(bytes) => serde_json::from_slice(bytes).unwrap(),
        other => panic!("job {} not done: {other:?}", r.id),
    }
}

/// The reason and error a job died with.
pub fn dead(r: &JobResult) -> (DeadReason, String) {
    match &r.outcome {
        Outcome::Dead { reason, error } => (*reason, error.clone()),
        other => panic!("job {} not dead: {other:?}", r.id),
    }
}

pub fn by_id(results: Vec<JobResult>) -> HashMap<JobId, JobResult> {
    let mut map = HashMap::new();
    for r in results {
        let id = r.id;
        assert!(map.insert(id, r).is_none(), "two results for job {id}");
    }
    map
}

/// A running `hearth work`, with its log; stopped when dropped.
pub struct Work {
    child: Child,
    log: Arc<Mutex<String>>,
}

impl Work {
    /// `hearth work --queue URL ARGS` in `dir`, logging at debug level.
    pub fn start(engine: &Engine, dir: &Path, args: &[&str]) -> Work {
        let url = engine.url();
        let mut all = vec!["--queue", url.as_str()];
        all.extend_from_slice(args);
        Work::spawn(dir, &all)
    }

    /// `hearth work ARGS` in `dir`, logging at debug level, once it says
    /// it is taking work.
    pub fn spawn(dir: &Path, args: &[&str]) -> Work {
        let mut child = Command::new(HEARTH)
            .arg("work")
            .args(args)
            .current_dir(dir)
            .env("HEARTH_LOG", "debug")
            .env_remove("RUST_LOG")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let log = collect_lines(child.stderr.take().unwrap());
        let work = Work { child, log };
        work.wait_for_log("taking ");
        work
    }

    pub fn log(&self) -> String {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn wait_for_log(&self, needle: &str) {
        let deadline = Instant::now() + PATIENCE;
        while !self.log().contains(needle) {
            assert!(
                Instant::now() < deadline,
                "the log never said {needle:?}:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn signal(&self, signal: rustix::process::Signal) {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32).unwrap();
        rustix::process::kill_process(pid, signal).unwrap();
    }

    /// Waits for the exit; its status code.
    pub fn wait_exit(&mut self) -> Option<i32> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(
                Instant::now() < deadline,
                "hearth work did not exit; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Work {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.signal(rustix::process::Signal::INT);
            self.signal(rustix::process::Signal::INT);
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            self.kill();
        }
    }
}

/// What `pipe` says, line by line as it comes, read by a thread of its own.
pub fn collect_lines(pipe: impl std::io::Read + Send + 'static) -> Arc<Mutex<String>> {
    let text = Arc::new(Mutex::new(String::new()));
    let sink = text.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            let mut text = sink.lock().unwrap_or_else(|e| e.into_inner());
            text.push_str(&line);
            text.push('\n');
        }
    });
    text
}

/// Polls `check` until it holds, or panics naming `what`.
pub fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub const BOOTSTRAP: &str = r#"<?php
namespace App\Jobs;

function add(int $a, int $b): int { return $a + $b; }
function greet(string $name): string { echo "greeting {$name}\n"; return "Hello, {$name}!"; }
function fail(string $why): void { throw new \DomainException($why, 42); }
function pid(): int { return getmypid(); }
function nap(float $s): string { usleep((int) ($s * 1e6)); return 'awake'; }
function huge(int $n): string { return str_repeat('y', $n); }
"#;

/// A directory with the bootstrap above.
pub fn app_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bootstrap.php"), BOOTSTRAP).unwrap();
    dir
}
