//! Running one shell task: spawn it, feed its stdin, drain both of its
//! outputs while it runs (so no amount of output can block it), and stop
//! its whole process group when its time is up.
//!
//! Spawning goes through `std::process::Command`, which uses
//! `posix_spawn` (a `vfork`-style clone on Linux) when, as here, no code
//! has to run in the child before `exec`: the cost of starting a task does
//! not grow with the runner's memory. Exits are waited for through tokio's
//! child reaper, which is woken by the kernel (pidfd or SIGCHLD), never by
//! a polling loop.

use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime};

use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::watch;

use crate::output::{Captured, Outcome};
use crate::task::{Task, Work};

/// How every attempt is run.
#[derive(Debug, Clone, Copy)]
pub struct ExecOptions {
    /// The default time limit (a task's own `timeout` wins).
    pub timeout: Option<Duration>,
    /// Between SIGTERM and SIGKILL when a task is stopped.
    pub kill_after: Duration,
    /// Bytes of each output stream kept for the result.
    pub max_output: usize,
}

/// Seconds since the Unix epoch.
pub(crate) fn epoch_now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Resolves when the runner asks running tasks to stop.
pub(crate) async fn aborted(abort: &mut watch::Receiver<bool>) {
    if abort.wait_for(|stop| *stop).await.is_err() {
        // The runner is gone; nothing will ever ask.
        std::future::pending::<()>().await;
    }
}

/// Runs one attempt at a shell or argv task.
pub async fn run(task: &Task, options: &ExecOptions, mut abort: watch::Receiver<bool>) -> Outcome {
    let started = epoch_now();
    let clock = Instant::now();
    let (program, mut command) = match &task.work {
        Work::Shell(cmd) => {
            let mut c = tokio::process::Command::new("/bin/sh");
            c.arg("-c").arg(cmd);
            ("/bin/sh", c)
        }
        Work::Argv(argv) => {
            let mut c = tokio::process::Command::new(&argv[0]);
            c.args(&argv[1..]);
            (argv[0].as_str(), c)
        }
        Work::Call { .. } => {
            return Outcome::not_started("a PHP job needs --php-bootstrap".to_owned(), started)
        }
    };
    command
        .envs(task.env.iter().map(|(k, v)| (k, v)))
        .stdin(if task.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own group, so that a timeout stops what it started too.
        .process_group(0);
    if let Some(cwd) = &task.cwd {
        command.current_dir(cwd);
    }
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            let mut outcome = Outcome::not_started(
                match &task.cwd {
                    Some(cwd) => format!("cannot start {program} in {}: {e}", cwd.display()),
                    None => format!("cannot start {program}: {e}"),
                },
                started,
            );
            outcome.duration = clock.elapsed();
            return outcome;
        }
    };
    let group = child.id().and_then(|pid| i32::try_from(pid).ok());
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let input = task.stdin.as_deref();
    let feed = async move {
        if let (Some(mut pipe), Some(data)) = (stdin, input) {
            // A task that exits without reading its input is not an error.
            let _ = pipe.write_all(data.as_bytes()).await;
        }
    };
    let max = options.max_output;
    let work = async {
        let (_, out, err, status) =
            tokio::join!(feed, drain(stdout, max), drain(stderr, max), child.wait());
        (out, err, status)
    };
    tokio::pin!(work);

    let limit = task.timeout.or(options.timeout);
    let deadline = async {
        match limit {
            Some(limit) => tokio::time::sleep(limit).await,
            None => std::future::pending().await,
        }
    };
    let mut timed_out = false;
    let mut interrupted = false;
    let (stdout, stderr, status) = tokio::select! {
        done = &mut work => done,
        () = deadline => {
            timed_out = true;
            stop(group, work, options.kill_after).await
        }
        () = aborted(&mut abort) => {
            interrupted = true;
            stop(group, work, options.kill_after).await
        }
    };
    use std::os::unix::process::ExitStatusExt as _;
    let (status, signal) = match status {
        Ok(s) => (s.code(), s.signal()),
        Err(_) => (None, None),
    };
    Outcome {
        status,
        signal,
        timed_out,
        stdout,
        stderr: Some(stderr),
        duration: clock.elapsed(),
        started,
        interrupted,
        ..Outcome::default()
    }
}

/// SIGTERM to the task's process group; SIGKILL if it is still there
/// after `kill_after`. Returns what the task left.
async fn stop<F: std::future::Future + Unpin>(
    group: Option<i32>,
    mut work: F,
    kill_after: Duration,
) -> F::Output {
    signal_group(group, rustix::process::Signal::TERM);
    tokio::select! {
        done = &mut work => done,
        () = tokio::time::sleep(kill_after) => {
            signal_group(group, rustix::process::Signal::KILL);
            work.await
        }
    }
}

fn signal_group(group: Option<i32>, signal: rustix::process::Signal) {
    if let Some(pid) = group.and_then(rustix::process::Pid::from_raw) {
        let _ = rustix::process::kill_process_group(pid, signal);
    }
}

/// Reads a stream to its end, keeping the first `max` bytes.
async fn drain(stream: Option<impl AsyncRead + Unpin>, max: usize) -> Captured {
    let mut captured = Captured::default();
    let Some(mut stream) = stream else {
        return captured;
    };
    let mut scratch = Vec::new();
    loop {
        let room = max.saturating_sub(captured.bytes.len());
        let read = if room > 0 {
            captured.bytes.reserve(room.min(65536));
            stream.read_buf(&mut captured.bytes).await
        } else {
            // Past the cap: read on (the task must not block) and drop it.
            if scratch.is_empty() {
                scratch = vec![0; 65536];
            }
            stream.read(&mut scratch).await
        };
        match read {
            Ok(0) => break,
            Ok(n) => captured.total += n as u64,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    captured.bytes.truncate(max);
    captured
}
