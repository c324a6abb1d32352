//! Running one PHP job: a call of a PHP function in a warm worker of the
//! same pool `hearth serve` uses, booted once from the app's bootstrap
//! file (`Hearth\Internal\JobRuntime` on the PHP side).
//!
//! A job is one `Call` frame to a worker and one `Result` frame back. A job
//! that kills its worker fails alone: the pool replaces the worker, and the
//! result says how it died. A job past its time limit gets its worker
//! stopped (SIGTERM, then SIGKILL) and replaced.

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
    let encode = |buf: &mut bytes::BytesMut, id: u32, _: &std::sync::Arc<hearth_pool::Paths>| {
        let at = begin_frame(buf, Kind::Call, 0, id);
        fields::put(buf, "function", function.as_bytes());
        fields::put(buf, "args", args.as_bytes());
        end_frame(buf, at);
    };
    let dispatched = tokio::select! {
        lease = pool.dispatch(function.len() + args.len() + 64, encode) => lease,
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
    let mut deadline = limit.map(|l| tokio::time::Instant::now() + l);
    // Whether the runner has signalled the worker (SIGTERM first, SIGKILL
    // `kill_after` later), for its time limit or because it was asked to.
    let mut stopping = false;
    let mut interrupted = false;
    let result = loop {
        let until_deadline = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            frame = lease.next() => break frame,
            () = until_deadline => {
                if stopping {
                    lease.signal(rustix::process::Signal::KILL);
                    deadline = None;
                } else {
                    lease.signal(rustix::process::Signal::TERM);
                    stopping = true;
                    deadline = Some(tokio::time::Instant::now() + options.kill_after);
                }
            }
            () = aborted(&mut abort), if !interrupted && !stopping => {
                interrupted = true;
                deadline = Some(tokio::time::Instant::now());
            }
        }
    };
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
        Err(e) => died(&lease, pid, e, limit, stopping && !interrupted).await,
    };
    outcome.worker = Some(pid);
    outcome.started = started;
    outcome.duration = clock.elapsed();
    outcome.interrupted = interrupted;
    outcome.timed_out = stopping && !interrupted;
    outcome
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
