//! `hearth run --queue URL`: the batch runs on the hosts that consume the
//! queue (`hearth work --queue URL`) instead of here. Each task becomes a
//! job whose payload is the task as one input line ([`Task::to_line`]) and
//! whose reply-to is a results channel of this run's own; the results are
//! read back as they arrive and written as a local run writes them, with
//! the job log, `--resume`, `--keep-order`, the exit status and the
//! summary of a local run.
//!
//! Memory stays flat however long the input: the reader thread parses at
//! most [`QUEUE`](crate::runner::QUEUE) tasks ahead, tasks are pushed in
//! batches of at most [`PUSH_BATCH`], and at most [`MAX_OUTSTANDING`] jobs
//! are in the queue without their result written; the next batch is
//! pushed as results come back.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use hearth_queue::{JobId, JobResult, NewJob, Outcome as QueueOutcome, Queue};
use serde_json::value::RawValue;
use tokio::sync::mpsc;

use crate::output;
use crate::runner::{
    libc_sig, open, progress_bar, read_tasks, signal, Emitter, Item, Opened, Writer, QUEUE,
};
use crate::Input;
use crate::{RunConfig, Summary};

/// Writes a line to stderr, never panicking (see the runner's).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// The most jobs of one run in the queue whose result is not written yet
/// (held back by `--keep-order` included): the next tasks are pushed as
/// results come back.
pub const MAX_OUTSTANDING: usize = 10_000;

/// The most tasks pushed in one call (one round trip).
pub const PUSH_BATCH: usize = 500;

/// How long without a result before the first note on stderr of what the
/// run waits for; each further note waits twice as long, up to
/// [`MAX_NOTE_EVERY`], until a result comes.
pub const NOTE_EVERY: Duration = Duration::from_secs(5);

/// The longest wait between two notes.
pub const MAX_NOTE_EVERY: Duration = Duration::from_secs(60);

/// A job of this run in the queue, waiting for its result.
struct Pending {
    seq: u64,
    id: Box<RawValue>,
    /// The command as the job log shows it.
    command: String,
    /// Input position, for `--keep-order`.
    order: u64,
}

/// Runs the batch `input` on the consumers of `queue`. An `Err` means
/// nothing was submitted (the job log or the input cannot be opened), or
/// the queue failed while jobs were submitted (the message says how many
/// were already queued).
pub async fn submit(config: RunConfig, input: Input, queue: Queue) -> Result<Summary, String> {
    let clock = Instant::now();
    // The consumers decide what they can run: both kinds go.
    let Opened {
        done,
        mut log,
        tasks,
    } = open(&config, &input, true)?;
    let mut sigint = signal(tokio::signal::unix::SignalKind::interrupt())?;
    let mut sigterm = signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut sighup = signal(tokio::signal::unix::SignalKind::hangup())?;
    let channel = channel_name();
    let url = queue.url().to_string();
    let reader_results = {
        let mut results = queue
            .results(&channel)
            .map_err(|e| format!("cannot read results from the queue {url}: {e}"))?;
        let (tx, rx) = mpsc::channel::<Result<Vec<JobResult>, String>>(4);
        let task = tokio::spawn(async move {
            loop {
                let next = results
                    .next(1000, Duration::from_secs(1))
                    .await
                    .map_err(|e| e.to_string());
                let failed = next.is_err();
                if tx.send(next).await.is_err() || failed {
                    return;
                }
            }
        });
        (task, rx)
    };
    let (reader_task, mut results) = reader_results;

    let (item_tx, mut items) = mpsc::channel(QUEUE);
    let resume = config.resume;
    read_tasks(tasks, done, resume, item_tx)
        .map_err(|e| format!("cannot start the input reader: {e}"))?;
    let (writer, writer_thread) = Writer::start();
    let mut emitter = Emitter {
        keep_order: config.keep_order,
        next: 0,
        pending: Default::default(),
        writer,
        line: String::new(),
    };
    let progress = progress_bar(config.progress);
    let attempts = config.retries.max(1);

    let mut summary = Summary::default();
    let mut outstanding: HashMap<JobId, Pending> = HashMap::new();
    let mut submitting = true;
    let mut input_open = true;
    let mut next_order = 0u64;
    let mut batch: Vec<(NewJob, Pending)> = Vec::new();
    let mut quiet_since = tokio::time::Instant::now();
    let mut note_every = NOTE_EVERY;
    let mut failure: Option<String> = None;
    let mut stopped_waiting = false;

    loop {
        if outstanding.is_empty() && batch.is_empty() && (!input_open || !submitting) {
            break;
        }
        let room = outstanding.len() + emitter.pending.len() + batch.len() < MAX_OUTSTANDING;
        let want_input = submitting && input_open && room && batch.len() < PUSH_BATCH;
        // Push what was read once the reader has nothing more at hand (or
        // the batch is full), so a slow input is not held back.
        if !batch.is_empty() && (!want_input || items.is_empty()) {
            let (jobs, pending): (Vec<NewJob>, Vec<Pending>) =
                std::mem::take(&mut batch).into_iter().unzip();
            match queue.push_many(jobs).await {
                Ok(ids) => {
                    if outstanding.is_empty() {
                        quiet_since = tokio::time::Instant::now();
                    }
                    for (id, p) in ids.into_iter().zip(pending) {
                        outstanding.insert(id, p);
                    }
                }
                Err(e) => {
                    let message = format!(
                        "cannot push jobs to the queue {url}: {e}; {} job(s) of this run already queued keep running on its consumers, their results not collected",
                        outstanding.len()
                    );
                    progress.suspend(|| say!("hearth run: {message}"));
                    summary.interrupted += outstanding.len() as u64;
                    failure = Some(message);
                    break;
                }
            }
            continue;
        }
        let note_at = quiet_since + note_every;
        tokio::select! {
            biased;
            got = results.recv() => match got {
                Some(Ok(got)) => {
                    if !got.is_empty() {
                        quiet_since = tokio::time::Instant::now();
                        note_every = NOTE_EVERY;
                    }
                    for r in got {
                        let Some(p) = outstanding.remove(&r.id) else {
                            tracing::debug!(job = %r.id, "a result for a job this run is not waiting for");
                            continue;
                        };
                        let finished = result_line(&p, &r);
                        if let Some(log) = &mut log {
                            if let Err(e) = log.record(p.seq, finished.started, finished.duration, 0, finished.exit, finished.signal, &p.command) {
                                progress.suspend(|| say!("hearth run: cannot write the job log {}: {e}", log.path().display()));
                            }
                        }
                        summary.finished += 1;
                        if !finished.succeeded {
                            summary.failed += 1;
                            progress.set_message(format!("{} failed", summary.failed));
                        }
                        emitter.line(p.order, finished.line).await;
                        progress.inc(1);
                    }
                    if emitter.writer.closed {
                        submitting = false;
                        batch.clear();
                    }
                }
                Some(Err(e)) => {
                    let message = format!(
                        "cannot read results from the queue {url}: {e}; {} job(s) of this run keep running on its consumers, their results not collected",
                        outstanding.len()
                    );
                    progress.suspend(|| say!("hearth run: {message}"));
                    summary.interrupted += outstanding.len() as u64;
                    failure = Some(message);
                    break;
                }
                None => break,
            },
            item = items.recv(), if want_input => match item {
                Some(Item::Task(task)) => {
                    let line = task.to_line(config.timeout);
                    if line.len() > queue.config().max_payload {
                        let message = format!(
                            "task {} (seq {}): {} bytes as a job, over the queue's limit of {} bytes",
                            task.id.get(), task.seq, line.len(), queue.config().max_payload
                        );
                        progress.suspend(|| say!("hearth run: {message}"));
                        summary.input_error = Some(message);
                        submitting = false;
                        input_open = false;
                        continue;
                    }
                    let job = NewJob::new(line.into_bytes()).attempts(attempts).reply_to(channel.clone());
                    batch.push((job, Pending {
                        seq: task.seq,
                        command: task.command_line(),
                        id: task.id,
                        order: next_order,
                    }));
                    next_order += 1;
                }
                Some(Item::Skip { seq, id, logged }) => {
                    summary.skipped += 1;
                    if !logged.succeeded() {
                        summary.skipped_failed += 1;
                    }
                    emitter.skipped(next_order, seq, &id, logged).await;
                    next_order += 1;
                    progress.inc(1);
                }
                Some(Item::Error(message)) => {
                    progress.suspend(|| say!("hearth run: {message}"));
                    summary.input_error = Some(message);
                    submitting = false;
                    input_open = false;
                }
                Some(Item::End(total)) => {
                    progress.set_length(total);
                    input_open = false;
                }
                None => input_open = false,
            },
            () = tokio::time::sleep_until(note_at), if !outstanding.is_empty() => {
                let stats = queue.stats().await;
                let waiting = outstanding.len();
                let quiet = quiet_since.elapsed().as_secs();
                progress.suspend(|| match stats {
                    Ok(s) if s.reserved == 0 => say!(
                        "hearth run: no result for {quiet}s: {waiting} job(s) of this run wait in the queue {url} ({} ready, none taken by a consumer: is `hearth work --queue {url}` running?)",
                        s.ready
                    ),
                    Ok(s) => say!(
                        "hearth run: no result for {quiet}s: {waiting} job(s) of this run wait in the queue {url} ({} ready, {} held by consumers)",
                        s.ready, s.reserved
                    ),
                    Err(e) => say!(
                        "hearth run: no result for {quiet}s: {waiting} job(s) of this run wait in the queue {url} (its counts cannot be read: {e})"
                    ),
                });
                quiet_since = tokio::time::Instant::now();
                note_every = (note_every * 2).min(MAX_NOTE_EVERY);
            }
            sig = signals(&mut sigint, &mut sigterm, &mut sighup) => {
                // Read but not pushed: left for --resume, as tasks a local
                // run had not started.
                batch.clear();
                if on_signal(sig, &mut summary, &mut submitting, outstanding.len(), config.joblog.is_some(), &progress) {
                    stopped_waiting = true;
                    break;
                }
            }
        }
    }
    if stopped_waiting {
        summary.interrupted += outstanding.len() as u64;
    }
    reader_task.abort();
    drop(items);
    emitter.finish().await;
    progress.finish_and_clear();
    drop(emitter);
    let _ = writer_thread.join();
    // Results of jobs still queued (after a second signal, or a failure)
    // would go to a channel nobody reads: removed all the same, and
    // removed again by the queue a day after its last write.
    if let Err(e) = queue.delete_results(&channel).await {
        say!("hearth run: cannot remove this run's results channel {channel} from the queue {url}: {e} (the queue removes it a day after its last result)");
    }
    if let Some(message) = failure {
        return Err(message);
    }
    summary.elapsed = clock.elapsed();
    Ok(summary)
}

/// The next SIGINT, SIGTERM or SIGHUP (a closed terminal: as SIGTERM).
async fn signals(
    int: &mut tokio::signal::unix::Signal,
    term: &mut tokio::signal::unix::Signal,
    hup: &mut tokio::signal::unix::Signal,
) -> i32 {
    tokio::select! {
        _ = int.recv() => libc_sig::INT,
        _ = term.recv() => libc_sig::TERM,
        _ = hup.recv() => libc_sig::HUP,
    }
}

/// First SIGINT, SIGTERM or SIGHUP: submit nothing more and wait for the
/// results of the jobs queued. Second: stop waiting (true).
fn on_signal(
    sig: i32,
    summary: &mut Summary,
    submitting: &mut bool,
    outstanding: usize,
    joblog: bool,
    progress: &indicatif::ProgressBar,
) -> bool {
    let name = output::signal_name(sig);
    let resume = if joblog {
        "run it again with the same --joblog and --resume to submit the tasks without a result"
    } else {
        "without --joblog, a later run cannot tell which tasks are done"
    };
    if summary.signal.is_none() {
        summary.signal = Some(sig);
        *submitting = false;
        progress.suspend(|| {
            say!(
                "hearth run: {name}: submitting no more tasks; waiting for the results of the {outstanding} job(s) already queued, which run on the consumers (send it again to stop waiting; {resume})"
            );
        });
        false
    } else {
        progress.suspend(|| {
            say!(
                "hearth run: {name}: no longer waiting; the {outstanding} job(s) already queued still run on the consumers, their results not collected ({resume}: those may then run twice)"
            );
        });
        true
    }
}

/// A result line as a local run writes it, and what the job log records.
struct Finished {
    line: String,
    succeeded: bool,
    started: f64,
    /// Seconds.
    duration: f64,
    exit: i32,
    signal: i32,
}

/// The line for the result `r` of job `p`: the consumer's result line for
/// a job done (its `seq` and `id` made this run's, `attempt` left out: it
/// is `attempts`), or one made from the queue's record of a job that died
/// (see docs/queues.md).
fn result_line(p: &Pending, r: &JobResult) -> Finished {
    let now = crate::exec::epoch_now();
    match &r.outcome {
        QueueOutcome::Done(bytes) => {
            match serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(bytes) {
                Ok(mut fields) => {
                    let duration = fields
                        .get("duration_ms")
                        .and_then(serde_json::Value::as_f64)
                        .unwrap_or(0.0)
                        / 1000.0;
                    fields.remove("attempt");
                    let rest: Vec<_> = fields
                        .into_iter()
                        .filter(|(k, _)| k != "id" && k != "seq")
                        .collect();
                    let mut line = format!("{{\"id\":{},\"seq\":{}", p.id.get(), p.seq);
                    for (k, v) in rest {
                        let _ = write!(line, ",{}:{}", serde_json::Value::String(k), v);
                    }
                    line.push_str("}\n");
                    Finished {
                        line,
                        succeeded: true,
                        started: now - duration,
                        duration,
                        exit: 0,
                        signal: 0,
                    }
                }
                Err(e) => dead_line(
                    p,
                    r,
                    "unreadable",
                    &format!("the consumer's result is not a JSON object: {e}"),
                    now,
                ),
            }
        }
        QueueOutcome::Dead { reason, error } => {
            let last = r.last_result.as_deref().and_then(|bytes| {
                serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(bytes).ok()
            });
            match last {
                Some(fields) => failed_line(p, r, fields, reason.as_str(), now),
                None => dead_line(p, r, reason.as_str(), error, now),
            }
        }
    }
}

/// The line of a job that died after failing, from the result line its
/// consumer recorded with its last attempt: as a local run writes a failed
/// task (status, signal, output, a PHP job's error object), its `seq` and
/// `id` made this run's, with `dead` (why it died) and `job`.
fn failed_line(
    p: &Pending,
    r: &JobResult,
    mut fields: serde_json::Map<String, serde_json::Value>,
    reason: &str,
    now: f64,
) -> Finished {
    let duration = fields
        .get("duration_ms")
        .and_then(serde_json::Value::as_f64)
        .unwrap_or(0.0)
        / 1000.0;
    let status = fields
        .get("status")
        .and_then(serde_json::Value::as_i64)
        .and_then(|s| i32::try_from(s).ok());
    let signal = fields
        .get("signal")
        .and_then(serde_json::Value::as_str)
        .and_then(signal_number);
    for key in ["id", "seq", "attempt", "attempts", "job", "dead"] {
        fields.remove(key);
    }
    let mut line = format!("{{\"id\":{},\"seq\":{}", p.id.get(), p.seq);
    for (k, v) in fields {
        let _ = write!(line, ",{}:{}", serde_json::Value::String(k), v);
    }
    let _ = writeln!(
        line,
        ",\"attempts\":{},\"dead\":{},\"job\":{}}}",
        r.attempt,
        serde_json::Value::String(reason.to_owned()),
        r.id
    );
    Finished {
        line,
        succeeded: false,
        started: now - duration,
        duration,
        exit: match (status, signal) {
            (Some(code), None) if code != 0 => code,
            _ => -1,
        },
        signal: signal.unwrap_or(0),
    }
}

/// The line of a job that died: what the queue keeps of it is the error
/// of its last attempt (`exit status 3; stderr: ...`, `killed by
/// SIGKILL`, a PHP exception), from which the status and signal are read
/// back.
fn dead_line(p: &Pending, r: &JobResult, reason: &str, error: &str, now: f64) -> Finished {
    let status = error.strip_prefix("exit status ").and_then(|rest| {
        let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
        digits.parse::<i32>().ok()
    });
    let signal = ["killed by ", "(killed by "].iter().find_map(|marker| {
        let at = error.find(marker)? + marker.len();
        let name: String = error[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        signal_number(&name)
    });
    let timed_out = error.contains("time limit");
    let mut line = format!("{{\"id\":{},\"seq\":{},\"status\":", p.id.get(), p.seq);
    match status {
        Some(code) if signal.is_none() => {
            let _ = write!(line, "{code}");
        }
        _ => line.push_str("null"),
    }
    match signal {
        Some(sig) => {
            let _ = write!(line, ",\"signal\":\"{}\"", output::signal_name(sig));
        }
        None => line.push_str(",\"signal\":null"),
    }
    let _ = write!(line, ",\"attempts\":{}", r.attempt);
    if timed_out {
        line.push_str(",\"timed_out\":true");
    }
    let _ = writeln!(
        line,
        ",\"error\":{},\"dead\":{},\"job\":{}}}",
        serde_json::Value::String(error.to_owned()),
        serde_json::Value::String(reason.to_owned()),
        r.id
    );
    Finished {
        line,
        succeeded: false,
        started: now,
        duration: 0.0,
        exit: match (status, signal) {
            (Some(code), None) if code != 0 => code,
            _ => -1,
        },
        signal: signal.unwrap_or(0),
    }
}

/// 9 for `SIGKILL`.
fn signal_number(name: &str) -> Option<i32> {
    (1..=64).find(|&n| output::signal_name(n) == name)
}

/// A results channel no other run has: host, process, time.
fn channel_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let host: String = host
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        .take(64)
        .collect();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("run-{host}-{}-{nanos:x}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_queue::DeadReason;

    fn pending() -> Pending {
        Pending {
            seq: 4,
            id: RawValue::from_string("\"t\"".into()).unwrap(),
            command: "x".into(),
            order: 3,
        }
    }

    fn parse(f: &Finished) -> serde_json::Value {
        assert!(f.line.ends_with("}\n"));
        serde_json::from_str(&f.line).unwrap()
    }

    #[test]
    fn a_done_job_reads_as_a_local_result() {
        let r = JobResult {
            id: JobId(17),
            attempt: 2,
            outcome: QueueOutcome::Done(
                br#"{"id":17,"seq":17,"status":0,"signal":null,"stdout":"hi\n","stderr":"","duration_ms":1500.0,"attempts":2,"job":17,"attempt":2}"#.to_vec(),
            ),
            last_result: None,
        };
        let f = result_line(&pending(), &r);
        let v = parse(&f);
        assert!(f.succeeded);
        assert_eq!((f.exit, f.signal, f.duration), (0, 0, 1.5));
        assert_eq!(v["id"], "t");
        assert_eq!(v["seq"], 4);
        assert_eq!(v["attempts"], 2);
        assert_eq!(v["job"], 17);
        assert!(v.get("attempt").is_none());
        let keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
        assert_eq!(
            keys,
            [
                "id",
                "seq",
                "status",
                "signal",
                "stdout",
                "stderr",
                "duration_ms",
                "attempts",
                "job"
            ]
        );
    }

    #[test]
    fn a_dead_job_keeps_its_status_signal_and_error() {
        for (error, status, signal, exit, timed_out) in [
            ("exit status 3; stderr: oops", Some(3), None, 3, false),
            ("killed by SIGSEGV", None, Some("SIGSEGV"), -1, false),
            (
                "ran past its time limit: stopped after 0.301s (killed by SIGTERM)",
                None,
                Some("SIGTERM"),
                -1,
                true,
            ),
            (
                "DomainException: no way (code 42) at /a.php:3",
                None,
                None,
                -1,
                false,
            ),
        ] {
            let r = JobResult {
                id: JobId(9),
                attempt: 3,
                outcome: QueueOutcome::Dead {
                    reason: DeadReason::Failed,
                    error: error.into(),
                },
                last_result: None,
            };
            let f = result_line(&pending(), &r);
            let v = parse(&f);
            assert!(!f.succeeded);
            assert_eq!(f.exit, exit, "{error}");
            assert_eq!(v["status"].as_i64(), status.map(i64::from), "{error}");
            assert_eq!(v["signal"].as_str(), signal, "{error}");
            assert_eq!(v.get("timed_out").is_some(), timed_out, "{error}");
            assert_eq!(v["error"], error);
            assert_eq!(v["attempts"], 3);
            assert_eq!(v["dead"], "failed");
            assert_eq!((v["id"].as_str(), v["seq"].as_u64()), (Some("t"), Some(4)));
        }
    }

    #[test]
    fn a_dead_job_with_its_last_result_reads_as_a_local_failure() {
        let r = JobResult {
            id: JobId(9),
            attempt: 3,
            outcome: QueueOutcome::Dead {
                reason: DeadReason::Failed,
                error: "exit status 3; stderr: oops".into(),
            },
            last_result: Some(
                br#"{"id":9,"seq":9,"status":3,"signal":null,"stdout":"out\n","stderr":"oops\n","duration_ms":250.0,"attempts":1,"job":9,"attempt":3}"#.to_vec(),
            ),
        };
        let f = result_line(&pending(), &r);
        let v = parse(&f);
        assert!(!f.succeeded);
        assert_eq!((f.exit, f.signal, f.duration), (3, 0, 0.25));
        assert_eq!(
            (v["stdout"].as_str(), v["stderr"].as_str()),
            (Some("out\n"), Some("oops\n"))
        );
        assert_eq!((v["id"].as_str(), v["seq"].as_u64()), (Some("t"), Some(4)));
        assert_eq!(
            (v["attempts"].as_u64(), v["job"].as_u64()),
            (Some(3), Some(9))
        );
        assert_eq!(v["dead"], "failed");
        assert!(v.get("attempt").is_none() && v.get("error").is_none());
    }

    #[test]
    fn channel_names_are_queue_names() {
        let name = channel_name();
        assert!(name.len() <= 128 && name.starts_with("run-"), "{name}");
        assert!(name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')));
    }
}
