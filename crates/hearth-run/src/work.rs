//! `hearth work`: a consumer host. Jobs come from a queue (`hearth-queue`),
//! each payload one task in the JSON format of a `hearth run` input line,
//! and each runs as `hearth run` runs it (the same [`Executor`]); its result
//! line is recorded with the job's ack.
//!
//! The loop keeps at most `jobs` jobs in hand: it reserves only as many as
//! there are free slots, so no job is held that no worker runs, and it
//! renews the hold of each running job every third of the visibility
//! timeout, so a long job is not delivered again elsewhere. A job ends in
//! one of four ways:
//!
//! A job is a shell task (`cmd`, `argv`) or a PHP job (`call`): one host
//! takes both, a PHP job failing, to be retried (by a host with PHP job
//! workers, perhaps), on a host started without `--php-bootstrap`. A
//! shell task gets the job's id and attempt in its environment
//! (`HEARTH_JOB_ID`, `HEARTH_JOB_ATTEMPT`), a PHP job in `$_SERVER` during
//! the call, to make its effect idempotent.
//!
//! - it succeeded: acked, with its result line;
//! - it failed (a non-zero exit, a PHP exception, a timeout): failed with
//!   a text saying what happened, and the queue retries it after its
//!   backoff or, after its last attempt, moves it to the dead-letter store;
//! - its payload is not a task: rejected, dead at once with the reason (it
//!   can never succeed);
//! - it was stopped by the shutdown (the grace period ran out, or a second
//!   signal): failed as interrupted, so it runs again, as `hearth run`
//!   runs a stopped task again on `--resume`.
//!
//! Stopping is a parameter ([`work`]'s `stop`): the first request takes no
//! more jobs and lets the running ones finish within the grace period;
//! past it, or at a second request, the running ones are stopped as
//! `hearth run` stops tasks (SIGTERM, then SIGKILL after `--kill-after`).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::{FuturesUnordered, StreamExt as _};
use hearth_queue::{Consumer, Job, Receipt};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::executor::Executor;
use crate::output::{self, ErrorValue, Outcome};
use crate::task::{QueueJob, Task, Work};

/// How the loop runs.
#[derive(Debug, Clone)]
pub struct WorkConfig {
    /// Jobs at once (PHP workers, for PHP jobs).
    pub jobs: usize,
    /// Bytes of each output stream kept in a result.
    pub max_output: usize,
    /// The largest result the queue records (`QueueConfig::max_result`):
    /// a result line longer than this is written again without output.
    pub max_result: usize,
    /// After the first stop request, how long running jobs have to finish.
    pub grace_period: Duration,
    /// How often a running job's hold is renewed: a third of the queue's
    /// visibility timeout.
    pub extend_every: Duration,
    /// The longest one reserve waits for a job before the loop looks again.
    pub reserve_wait: Duration,
    /// Where the loop counts what it does, for status and metrics.
    pub counters: Arc<WorkCounters>,
}

/// What a loop has done so far, updated as it goes (read by `hearth
/// status` and `/metrics` while it runs).
#[derive(Debug, Default)]
pub struct WorkCounters {
    stopping: std::sync::atomic::AtomicBool,
    running: AtomicU64,
    done: AtomicU64,
    failed: AtomicU64,
    rejected: AtomicU64,
    interrupted: AtomicU64,
    unrecorded: AtomicU64,
    observer: std::sync::OnceLock<Arc<dyn JobObserver>>,
}

/// Told of each job that ends (for a latency histogram).
pub trait JobObserver: Send + Sync + std::fmt::Debug {
    /// A job ended `how` after running for `ran` (zero for a payload
    /// that was not a task).
    fn ended(&self, how: JobEnd, ran: Duration);
}

/// How a job ended, from the loop's side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobEnd {
    /// Acked with its result.
    Done,
    /// Its attempt failed.
    Failed,
    /// Its payload was not a task: dead at once.
    Rejected,
    /// Stopped by the shutdown: failed, to run again.
    Interrupted,
}

impl JobEnd {
    /// `done`, `failed`, `rejected`, `interrupted`.
    pub fn as_str(self) -> &'static str {
        match self {
            JobEnd::Done => "done",
            JobEnd::Failed => "failed",
            JobEnd::Rejected => "rejected",
            JobEnd::Interrupted => "interrupted",
        }
    }
}

impl WorkCounters {
    /// Sets the observer told of each job's end (once; later calls are
    /// ignored).
    pub fn observe(&self, observer: Arc<dyn JobObserver>) {
        let _ = self.observer.set(observer);
    }

    /// Whether the loop has been asked to stop (it takes no more jobs).
    pub fn stopping(&self) -> bool {
        self.stopping.load(Ordering::Relaxed)
    }

    /// Jobs in hand now (running, or being acked).
    pub fn running(&self) -> u64 {
        self.running.load(Ordering::Relaxed)
    }

    /// The counts so far.
    pub fn summary(&self) -> WorkSummary {
        WorkSummary {
            done: self.done.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            rejected: self.rejected.load(Ordering::Relaxed),
            interrupted: self.interrupted.load(Ordering::Relaxed),
            unrecorded: self.unrecorded.load(Ordering::Relaxed),
        }
    }

    fn ended(&self, settled: &Settled) {
        let counter = match settled.ended {
            JobEnd::Done => &self.done,
            JobEnd::Failed => &self.failed,
            JobEnd::Rejected => &self.rejected,
            JobEnd::Interrupted => &self.interrupted,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        if !settled.recorded {
            self.unrecorded.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(observer) = self.observer.get() {
            observer.ended(settled.ended, settled.ran);
        }
    }
}

/// What a loop did, for its last log line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkSummary {
    /// Jobs acked.
    pub done: u64,
    /// Attempts failed (the queue retries or dead-letters them).
    pub failed: u64,
    /// Jobs whose payload was not a task, dead-lettered at once.
    pub rejected: u64,
    /// Jobs stopped by the shutdown, failed so they run again.
    pub interrupted: u64,
    /// Acks and fails the queue did not apply: the hold had expired and
    /// another consumer had the job, or the queue was unreachable.
    pub unrecorded: u64,
}

/// One job's end, whether the queue recorded it, and how long it ran.
struct Settled {
    ended: JobEnd,
    recorded: bool,
    ran: Duration,
}

type Running<'a> = FuturesUnordered<Pin<Box<dyn Future<Output = Settled> + 'a>>>;
type Reserving<'a> = Pin<Box<dyn Future<Output = hearth_queue::Result<Vec<Job>>> + 'a>>;

/// The longest wait before another reserve after the queue failed one.
const MAX_RESERVE_BACKOFF: Duration = Duration::from_secs(5);

/// Takes jobs from `consumer` and runs them with `executor` until `stop`
/// asks it to stop (each message is a request, named by what made it:
/// `SIGTERM`). Returns once no job is running.
pub async fn work(
    consumer: &Consumer,
    executor: &Executor,
    config: &WorkConfig,
    mut stop: mpsc::UnboundedReceiver<String>,
) -> WorkSummary {
    let jobs = config.jobs.max(1);
    let (abort_tx, abort) = watch::channel(false);
    let counters = &config.counters;
    let mut running: Running<'_> = FuturesUnordered::new();
    let mut reserving: Option<Reserving<'_>> = None;
    let mut stopping = false;
    let mut stop_open = true;
    let mut grace_ends: Option<Instant> = None;
    let mut aborted = false;
    let mut reserve_again: Option<Instant> = None;
    let mut backoff = Duration::from_millis(100);

    loop {
        if !stopping && reserving.is_none() && reserve_again.is_none() && running.len() < jobs {
            let free = jobs - running.len();
            reserving = Some(Box::pin(consumer.reserve(free, config.reserve_wait)));
        }
        if stopping && reserving.is_none() && running.is_empty() {
            break;
        }
        tokio::select! {
            // A reserve in flight is never dropped: the jobs it took would
            // stay held, unseen, until their visibility timeout. When a
            // stop comes meanwhile, what it brings is run.
            taken = next_reserve(&mut reserving), if reserving.is_some() => {
                reserving = None;
                match taken {
                    Ok(taken) => {
                        backoff = Duration::from_millis(100);
                        for job in taken {
                            counters.running.fetch_add(1, Ordering::Relaxed);
                            running.push(Box::pin(run_job(consumer, executor, config, job, abort.clone())));
                        }
                    }
                    Err(e) => {
                        tracing::error!(error = %e, retry_in = ?backoff, "cannot take jobs from the queue");
                        reserve_again = Some(Instant::now() + backoff);
                        backoff = (backoff * 2).min(MAX_RESERVE_BACKOFF);
                    }
                }
            }
            Some(settled) = running.next(), if !running.is_empty() => {
                counters.running.fetch_sub(1, Ordering::Relaxed);
                counters.ended(&settled);
            }
            () = sleep_until(reserve_again), if reserve_again.is_some() => {
                reserve_again = None;
            }
            request = stop.recv(), if stop_open => match request {
                None => stop_open = false,
                Some(what) if !stopping => {
                    stopping = true;
                    counters.stopping.store(true, Ordering::Relaxed);
                    reserve_again = None;
                    grace_ends = Instant::now().checked_add(config.grace_period);
                    tracing::info!(
                        running = running.len(),
                        grace_period = ?config.grace_period,
                        "{what}: taking no more jobs; running jobs have the grace period to finish (send it again to stop them now)"
                    );
                }
                Some(what) if !aborted => {
                    aborted = true;
                    tracing::warn!(running = running.len(), "{what} again: stopping the running jobs; they will run again");
                    let _ = abort_tx.send(true);
                }
                Some(_) => {}
            },
            () = sleep_until(grace_ends), if grace_ends.is_some() && !aborted => {
                aborted = true;
                tracing::warn!(running = running.len(), "the grace period is over: stopping the running jobs; they will run again");
                let _ = abort_tx.send(true);
            }
        }
    }
    counters.summary()
}

/// The jobs of the reserve in flight; never without one.
async fn next_reserve(reserving: &mut Option<Reserving<'_>>) -> hearth_queue::Result<Vec<Job>> {
    match reserving {
        Some(r) => r.await,
        None => std::future::pending().await,
    }
}

/// Resolves at `at`; never without one.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Runs one job to its end and records that end with the queue.
async fn run_job(
    consumer: &Consumer,
    executor: &Executor,
    config: &WorkConfig,
    job: Job,
    abort: watch::Receiver<bool>,
) -> Settled {
    let mut task = match parse(executor, &job) {
        Ok(task) => task,
        Err(why) => {
            tracing::warn!(job = %job.id, attempt = job.attempt, error = %why, "the job's payload is not a task: dead-lettered");
            let recorded = settle(consumer.reject(&job, &why).await, &job, "reject");
            return Settled {
                ended: JobEnd::Rejected,
                recorded,
                ran: Duration::ZERO,
            };
        }
    };
    // What a task needs to be idempotent: a PHP job gets them in the call
    // (`$_SERVER`), a shell task in its environment (set last: they win).
    task.job = Some(QueueJob {
        id: job.id.0,
        attempt: job.attempt,
    });
    if !matches!(task.work, Work::Call { .. }) {
        task.env
            .push(("HEARTH_JOB_ID".to_owned(), job.id.to_string()));
        task.env
            .push(("HEARTH_JOB_ATTEMPT".to_owned(), job.attempt.to_string()));
    }
    tracing::debug!(job = %job.id, attempt = job.attempt, task = %task.command_line(), "job started");
    let outcome = {
        // Renewed alongside the run, never in its way: a renewal that
        // waits for Redis must not hold up draining the task's output.
        let hold = keep_held(consumer, &job, config.extend_every);
        tokio::select! {
            outcome = executor.run(&task, abort) => outcome,
            never = hold => match never {},
        }
    };
    if outcome.interrupted {
        let why = "stopped by the shutdown of hearth work before it finished";
        tracing::warn!(job = %job.id, attempt = job.attempt, "job stopped by the shutdown; it will run again");
        let recorded = settle(consumer.fail(&job, why).await, &job, "fail");
        return Settled {
            ended: JobEnd::Interrupted,
            recorded,
            ran: outcome.duration,
        };
    }
    let line = result_line(&task, &job, &outcome, config);
    if !outcome.succeeded() {
        // The last attempt's line is recorded with the job's death, for
        // the producer to see its output (`hearth run --queue`); an
        // earlier one's would not be kept, so it is not sent.
        let why = failure_text(&outcome);
        let last = line.as_deref().filter(|_| job.attempt >= job.max_attempts);
        return fail(consumer, &job, &why, last, outcome.duration).await;
    }
    let Some(line) = line else {
        let mut whole = String::new();
        output::write_job_result(
            &mut whole,
            task.id.get(),
            job.id.0,
            job.attempt,
            &outcome,
            0,
        );
        let why = format!(
            "its result of {} bytes is over the queue's limit of {} bytes",
            whole.len(),
            config.max_result
        );
        return fail(consumer, &job, &why, None, outcome.duration).await;
    };
    tracing::debug!(
        job = %job.id,
        attempt = job.attempt,
        duration_ms = outcome.duration.as_secs_f64() * 1000.0,
        "job done"
    );
    let recorded = settle(consumer.ack(&job, line.as_bytes()).await, &job, "ack");
    Settled {
        ended: JobEnd::Done,
        recorded,
        ran: outcome.duration,
    }
}

/// The attempt's result line, its output cut when the whole line would
/// be over the queue's limit (the line says so); `None` when even without
/// output it is over.
fn result_line(task: &Task, job: &Job, outcome: &Outcome, config: &WorkConfig) -> Option<String> {
    let mut line = String::new();
    output::write_job_result(
        &mut line,
        task.id.get(),
        job.id.0,
        job.attempt,
        outcome,
        config.max_output,
    );
    if line.len() > config.max_result {
        line.clear();
        output::write_job_result(&mut line, task.id.get(), job.id.0, job.attempt, outcome, 0);
    }
    (line.len() <= config.max_result).then_some(line)
}

/// The job's payload as a task, or why it is not one.
fn parse(executor: &Executor, job: &Job) -> Result<Task, String> {
    let text = std::str::from_utf8(&job.payload)
        .map_err(|_| "invalid task: the payload is not UTF-8 text".to_owned())?;
    let task = executor.parser().parse(text.trim(), job.id.0)?;
    Ok(task)
}

async fn fail(
    consumer: &Consumer,
    job: &Job,
    why: &str,
    line: Option<&str>,
    ran: Duration,
) -> Settled {
    let next = if job.attempt < job.max_attempts {
        "the queue retries it after its backoff"
    } else {
        "that was its last attempt: dead-lettered"
    };
    tracing::warn!(job = %job.id, attempt = job.attempt, max_attempts = job.max_attempts, error = %why, "job failed; {next}");
    let receipt = consumer
        .fail_with_result(job, why, line.map(str::as_bytes))
        .await;
    let recorded = settle(receipt, job, "fail");
    Settled {
        ended: JobEnd::Failed,
        recorded,
        ran,
    }
}

/// Whether the queue applied an ack, fail or reject; logs when not.
fn settle(receipt: hearth_queue::Result<Receipt>, job: &Job, what: &str) -> bool {
    match receipt {
        Ok(Receipt::Applied) => true,
        Ok(Receipt::Stale) => {
            tracing::warn!(job = %job.id, attempt = job.attempt, "the queue did not take this {what}: another consumer had the job (its hold had expired) and finished it first");
            false
        }
        Err(e) => {
            tracing::error!(job = %job.id, attempt = job.attempt, error = %e, "cannot {what} the job; it will be delivered again after its visibility timeout");
            false
        }
    }
}

/// Renews the job's hold every `every`, for as long as it is polled.
async fn keep_held(consumer: &Consumer, job: &Job, every: Duration) -> std::convert::Infallible {
    let mut lost = false;
    loop {
        tokio::time::sleep(every).await;
        match consumer.extend(job).await {
            Ok(Receipt::Applied) => lost = false,
            Ok(Receipt::Stale) if !lost => {
                lost = true;
                tracing::warn!(job = %job.id, attempt = job.attempt, "the job's hold expired and another consumer took it; this run goes on, and the first result recorded wins");
            }
            Ok(Receipt::Stale) => {}
            Err(e) => {
                tracing::warn!(job = %job.id, error = %e, "cannot renew the job's hold");
            }
        }
    }
}

/// What went wrong, in a line: the text a failed attempt is recorded
/// with (the job's last error, and its dead-letter error).
pub fn failure_text(outcome: &Outcome) -> String {
    let mut text = match &outcome.error {
        Some(ErrorValue::Message(m)) => m.clone(),
        Some(ErrorValue::Json(json)) => php_error(json),
        None if outcome.timed_out => format!(
            "ran past its time limit: stopped after {:.3}s ({})",
            outcome.duration.as_secs_f64(),
            ended_by(outcome)
        ),
        None => ended_by(outcome),
    };
    if outcome.timed_out && !text.contains("time limit") {
        text = format!("ran past its time limit: {text}");
    }
    if let Some(stderr) = &outcome.stderr {
        let tail = String::from_utf8_lossy(tail(&stderr.bytes, 1024));
        let tail = tail.trim();
        if !tail.is_empty() {
            text.push_str("; stderr: ");
            text.push_str(tail);
        }
    }
    text
}

/// `exit status 3`, `killed by SIGSEGV`.
fn ended_by(outcome: &Outcome) -> String {
    match (outcome.signal, outcome.status) {
        (Some(sig), _) => format!("killed by {}", output::signal_name(sig)),
        (None, Some(code)) => format!("exit status {code}"),
        (None, None) => "ended without an exit status".to_owned(),
    }
}

/// `DomainException: no way (code 42) at /app/jobs.php:23`, or the message
/// alone for a failure Hearth describes itself (no class).
fn php_error(json: &str) -> String {
    let Ok(e) = serde_json::from_str::<serde_json::Value>(json) else {
        return json.to_owned();
    };
    let field = |k: &str| e.get(k).and_then(|v| v.as_str()).unwrap_or_default();
    let message = field("message");
    let class = field("class");
    if class.is_empty() {
        return message.to_owned();
    }
    let mut text = format!("{class}: {message}");
    if let Some(code) = e.get("code").and_then(serde_json::Value::as_i64) {
        if code != 0 {
            text.push_str(&format!(" (code {code})"));
        }
    }
    let file = field("file");
    if !file.is_empty() {
        let line = e
            .get("line")
            .and_then(serde_json::Value::as_i64)
            .unwrap_or(0);
        text.push_str(&format!(" at {file}:{line}"));
    }
    text
}

/// The last `max` bytes of `bytes` (from a character boundary when it is
/// text).
fn tail(bytes: &[u8], max: usize) -> &[u8] {
    let mut start = bytes.len().saturating_sub(max);
    while start < bytes.len() && (bytes[start] & 0xC0) == 0x80 {
        start += 1;
    }
    &bytes[start..]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::Captured;

    fn with_stderr(text: &str) -> Option<Captured> {
        Some(Captured {
            bytes: text.as_bytes().to_vec(),
            total: text.len() as u64,
            spool: None,
            held: None,
        })
    }

    #[test]
    fn failures_say_what_happened() {
        let exit = Outcome {
            status: Some(3),
            stderr: with_stderr("oops\n"),
            ..Outcome::default()
        };
        assert_eq!(failure_text(&exit), "exit status 3; stderr: oops");
        let killed = Outcome {
            signal: Some(11),
            stderr: with_stderr(""),
            ..Outcome::default()
        };
        assert_eq!(failure_text(&killed), "killed by SIGSEGV");
        let slow = Outcome {
            signal: Some(15),
            timed_out: true,
            duration: Duration::from_millis(500),
            stderr: with_stderr(""),
            ..Outcome::default()
        };
        assert_eq!(
            failure_text(&slow),
            "ran past its time limit: stopped after 0.500s (killed by SIGTERM)"
        );
        let graceful = Outcome {
            status: Some(0),
            timed_out: true,
            duration: Duration::from_millis(500),
            ..Outcome::default()
        };
        assert_eq!(
            failure_text(&graceful),
            "ran past its time limit: stopped after 0.500s (exit status 0)"
        );
        let missing = Outcome::not_started("cannot start /nope: No such file".into(), 0.0);
        assert_eq!(failure_text(&missing), "cannot start /nope: No such file");
        let php = Outcome {
            status: Some(1),
            error: Some(ErrorValue::Json(
                r#"{"class":"DomainException","message":"no way","code":42,"file":"/app/b.php","line":23,"trace":""}"#.into(),
            )),
            ..Outcome::default()
        };
        assert_eq!(
            failure_text(&php),
            "DomainException: no way (code 42) at /app/b.php:23"
        );
        let own = Outcome {
            status: None,
            timed_out: true,
            error: Some(ErrorValue::Json(
                r#"{"class":"","message":"the job ran past its time limit of 0.500s","code":0,"file":"","line":0,"trace":""}"#.into(),
            )),
            ..Outcome::default()
        };
        assert_eq!(
            failure_text(&own),
            "the job ran past its time limit of 0.500s"
        );
    }

    #[test]
    fn a_long_stderr_keeps_its_end_on_a_character_boundary() {
        let text = format!("{}€end", "x".repeat(2000));
        let o = Outcome {
            status: Some(1),
            stderr: with_stderr(&text),
            ..Outcome::default()
        };
        let t = failure_text(&o);
        assert!(t.ends_with("€end"), "{t}");
        assert!(t.len() < 1100, "{}", t.len());
        assert_eq!(tail("a€".as_bytes(), 2), b"");
    }
}
