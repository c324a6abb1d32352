//! Running one PHP job: a call of a PHP function in a warm worker of the
//! same pool `hearth serve` uses, booted once from the app's bootstrap
//! file (`Hearth\Internal\JobRuntime` on the PHP side).
//!
//! A job is one `Call` frame to a worker and one `Result` frame back. A job
//! that kills its worker fails alone: the pool replaces the worker, and the
//! result says how it died. A job past its time limit gets its worker
//! stopped by the pool (SIGTERM, then SIGKILL after the pool's kill
//! timeout, which `hearth run` sets to `--kill-after`), logged as a timeout
//! and replaced.

use std::time::{Duration, Instant};

use hearth_pool::{Lease, Pool};
use hearth_proto::fields::{self, Fields};
use hearth_proto::{begin_frame, end_frame, Frame, Kind};
use tokio::sync::watch;

use crate::exec::{aborted, epoch_now, ExecOptions};
use crate::output::{Captured, ErrorValue, Outcome};
use crate::task::{Task, Work};

/// Runs one attempt at a PHP job on `pool`.
pub async fn run(
    pool: &Pool,
    task: &Task,
    options: &ExecOptions,
    mut abort: watch::Receiver<bool>,
) -> Outcome {
    let started = epoch_now();
    let clock = Instant::now();
    let Work::Call { function, args } = &task.work else {
        return Outcome::not_started(
            "a shell task cannot run in a PHP worker".to_owned(),
            started,
        );
    };
    // The queue job's id and attempt, for `$_SERVER['HEARTH_JOB_ID']` and
    // `['HEARTH_JOB_ATTEMPT']` during the call (none under `hearth run`).
    let job = task.job.map(|j| (j.id.to_string(), j.attempt.to_string()));
    let encode = |buf: &mut bytes::BytesMut, id: u32, _: &std::sync::Arc<hearth_pool::Paths>| {
        let at = begin_frame(buf, Kind::Call, 0, id);
        fields::put(buf, "function", function.as_bytes());
        fields::put(buf, "args", args.as_bytes());
        if let Some((job_id, attempt)) = &job {
            fields::put(buf, "job_id", job_id.as_bytes());
            fields::put(buf, "job_attempt", attempt.as_bytes());
        }
        end_frame(buf, at);
    };
    let dispatched = tokio::select! {
        lease = pool.dispatch(function.len() + args.len() + 128, encode) => lease,
        () = aborted(&mut abort) => {
            return Outcome { interrupted: true, started, ..Outcome::default() };
        }
    };
    let mut lease = match dispatched {
        Ok(lease) => lease,
        Err(e) => {
            let mut outcome =
                Outcome::not_started(format!("no PHP worker took the job: {e}"), started);
            outcome.stderr = None;
            outcome.duration = clock.elapsed();
            return outcome;
        }
    };
    let pid = lease.pid();
    let limit = task.timeout.or(options.timeout);
    let deadline = limit.and_then(|l| tokio::time::Instant::now().checked_add(l));
    // Past its time limit, the pool stops the worker (SIGTERM, then SIGKILL
    // `kill_after` later: its kill timeout) and logs why.
    let mut timed_out = false;
    // Asked to stop by the runner (`--halt now`, a second signal): SIGTERM,
    // then SIGKILL at `kill_at`.
    let mut interrupted = false;
    let mut kill_at = None;
    let result = loop {
        tokio::select! {
            frame = lease.next() => break frame,
            () = sleep_until(deadline), if !timed_out && !interrupted => {
                lease.terminate();
                timed_out = true;
            }
            () = aborted(&mut abort), if !interrupted && !timed_out => {
                lease.signal(rustix::process::Signal::TERM);
                interrupted = true;
                kill_at = tokio::time::Instant::now().checked_add(options.kill_after);
            }
            () = sleep_until(kill_at) => {
                lease.signal(rustix::process::Signal::KILL);
                kill_at = None;
            }
        }
    };
    if timed_out && result.is_ok() {
        // It answered after all, its code handling SIGTERM: it is replaced
        // all the same (its job was cut short), at once rather than after
        // waiting `kill_after` for an exit that will not come.
        lease.signal(rustix::process::Signal::KILL);
    }
    let mut outcome = match result {
        Ok(frame) if frame.kind == Kind::Result => decode(&frame),
        Ok(frame) => {
            lease.poison();
            failure(format!(
                "the PHP worker (pid {pid}) answered the job with a {:?} frame",
                frame.kind
            ))
        }
        Err(e) if !e.is_worker_lost() => {
            // Alive but talking nonsense: it is killed and replaced.
            lease.poison();
            failure(format!(
                "the PHP worker (pid {pid}) broke the protocol while running the job ({e}); it is replaced"
            ))
        }
        Err(e) => died(&lease, pid, e, limit, timed_out).await,
    };
    outcome.worker = Some(pid);
    outcome.started = started;
    outcome.duration = clock.elapsed();
    outcome.interrupted = interrupted;
    outcome.timed_out = timed_out;
    outcome
}

/// Resolves at `at`; never without one.
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The outcome the worker reported.
fn decode(frame: &Frame) -> Outcome {
    let parsed = Fields::decode(&frame.payload).map_err(|e| e.to_string());
    let parsed = parsed.and_then(|f| {
        let json = f.get("json").cloned().unwrap_or_default();
        let output = f.get("output").cloned().unwrap_or_default();
        // What the job printed, when more than one frame could carry.
        let printed = f
            .get_str("output_bytes")
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(output.len() as u64);
        #[derive(serde::Deserialize)]
        struct Reply<'a> {
            status: i32,
            #[serde(borrow, default)]
            result: Option<&'a serde_json::value::RawValue>,
            #[serde(borrow, default)]
            error: Option<&'a serde_json::value::RawValue>,
        }
        let reply: Reply<'_> =
            serde_json::from_slice(&json).map_err(|e| format!("unreadable job result: {e}"))?;
        Ok(Outcome {
            status: Some(reply.status),
            // A job that returns nothing returns null.
            result: (reply.status == 0).then(|| {
                reply
                    .result
                    .map_or_else(|| "null".to_owned(), |r| r.get().to_owned())
            }),
            error: reply.error.map(|e| ErrorValue::Json(e.get().to_owned())),
            stdout: Captured {
                total: printed.max(output.len() as u64),
                bytes: output.to_vec(),
                spool: None,
                held: None,
            },
            ..Outcome::default()
        })
    });
    parsed.unwrap_or_else(failure)
}

/// The worker went away before answering: find out how.
async fn died(
    lease: &Lease,
    pid: u32,
    error: hearth_pool::Error,
    limit: Option<Duration>,
    timed_out: bool,
) -> Outcome {
    use std::os::unix::process::ExitStatusExt as _;
    let status = lease.exit_status(Duration::from_secs(5)).await;
    let signal = status.and_then(|s| s.signal());
    let how = match (status.and_then(|s| s.code()), signal) {
        (_, Some(sig)) => format!("killed by {}", crate::output::signal_name(sig)),
        (Some(code), None) => format!("exited with status {code}"),
        (None, None) => error.to_string(),
    };
    let message = if timed_out {
        format!(
            "the job ran past its time limit of {:.3}s; its PHP worker (pid {pid}) was stopped ({how}) and is replaced",
            limit.unwrap_or_default().as_secs_f64()
        )
    } else {
        format!("the PHP worker (pid {pid}) died while running the job ({how}); it is replaced")
    };
    let mut outcome = failure(message);
    outcome.status = None;
    outcome.signal = signal;
    outcome
}

/// A failure described by Hearth rather than by PHP, shaped like a PHP
/// job's error so readers handle one kind.
fn failure(message: String) -> Outcome {
    let error = serde_json::json!({
        "class": "",
        "message": message,
        "code": 0,
        "file": "",
        "line": 0,
        "trace": "",
    });
    Outcome {
        status: Some(1),
        error: Some(ErrorValue::Json(error.to_string())),
        ..Outcome::default()
    }
}
