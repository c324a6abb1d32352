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

use crate::output::{Captured, Outcome, Spool};
use crate::runner::LineSink;
use crate::task::{Stream, Task, Work};

/// Bytes of each output stream a task keeps in memory; past that, the rest
/// goes to a temporary file.
pub const SPOOL_AT: usize = 1 << 20;

/// The size asked for a task's stdout pipe.
const PIPE_SIZE: usize = 256 << 10;

/// How every attempt is run.
#[derive(Debug, Clone, Copy)]
pub struct ExecOptions {
    /// The default time limit (a task's own `timeout` wins).
    pub timeout: Option<Duration>,
    /// Between SIGTERM and SIGKILL when a task is stopped.
    pub kill_after: Duration,
    /// Bytes of each output stream kept for the result (`usize::MAX`: all).
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
    if task.slot > 0 {
        // As GNU parallel gives them.
        command
            .env("PARALLEL_SEQ", task.seq.to_string())
            .env("PARALLEL_JOBSLOT", task.slot.to_string())
            .env("PARALLEL_PID", std::process::id().to_string());
    }
    let (out, err) = match task.stream {
        Stream::Inherit => (Stdio::inherit(), Stdio::inherit()),
        _ => (Stdio::piped(), Stdio::piped()),
    };
    command
        .envs(task.env.iter().map(|(k, v)| (k, v)))
        .stdin(match (&task.stdin_file, &task.stdin) {
            (Some(file), _) => {
                use std::io::Seek as _;
                // Each attempt reads it from the start.
                match file.try_clone().and_then(|mut f| f.rewind().map(|()| f)) {
                    Ok(f) => Stdio::from(f),
                    Err(e) => {
                        return Outcome::not_started(
                            format!("cannot give the task its input: {e}"),
                            started,
                        )
                    }
                }
            }
            (None, Some(_)) => Stdio::piped(),
            (None, None) => Stdio::null(),
        })
        .stdout(out)
        .stderr(err)
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
    if let Some(out) = &stdout {
        // A larger pipe lets a task write its output in fewer wake-ups of
        // both sides; past the system's limits the kernel refuses, and the
        // default (64 KiB) stays.
        let _ = rustix::pipe::fcntl_setpipe_size(out, PIPE_SIZE);
    }
    let stderr = child.stderr.take();
    let input = task.stdin.as_deref();
    let feed = async move {
        if let (Some(mut pipe), Some(data)) = (stdin, input) {
            // A task that exits without reading its input is not an error.
            let _ = pipe.write_all(data).await;
        }
    };
    let max = options.max_output;
    let sink = match &task.stream {
        Stream::Lines(sink) => Some(sink),
        _ => None,
    };
    let work = async {
        let (_, out, err, status) = tokio::join!(
            feed,
            drain(stdout, max, sink.map(|s| (s, false))),
            drain(stderr, max, sink.map(|s| (s, true))),
            child.wait()
        );
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

/// Reads a stream to its end, keeping the first `max` bytes: up to
/// [`SPOOL_AT`] in memory, the rest in a temporary file. With a line sink
/// (`--line-buffer`), each line goes to the output as it comes instead,
/// and nothing is kept.
async fn drain(
    stream: Option<impl AsyncRead + Unpin>,
    max: usize,
    sink: Option<(&LineSink, bool)>,
) -> Captured {
    let mut captured = Captured::default();
    let Some(mut stream) = stream else {
        return captured;
    };
    if let Some((sink, stderr)) = sink {
        return drain_lines(stream, sink, stderr).await;
    }
    let mut spool: Option<(tokio::fs::File, u64)> = None;
    let mut spool_failed = false;
    let mut reserved = 0;
    let mut scratch = vec![0; 65536];
    loop {
        let kept = captured.bytes.len() as u64 + spool.as_ref().map_or(0, |s| s.1);
        let room = (max as u64).saturating_sub(kept);
        let Some(n) = read_some(&mut stream, &mut scratch).await else {
            break;
        };
        captured.total += n as u64;
        // Past the cap: read on (the task must not block) and drop it.
        let take = n.min(usize::try_from(room).unwrap_or(usize::MAX));
        let mut data = &scratch[..take];
        if spool.is_none() && captured.bytes.len() < SPOOL_AT {
            let fits = data.len().min(SPOOL_AT - captured.bytes.len());
            // Past the process's budget, output goes to the spool at once.
            if crate::output::reserve(fits) {
                reserved += fits;
                captured.bytes.extend_from_slice(&data[..fits]);
                data = &data[fits..];
            }
        }
        if data.is_empty() || spool_failed {
            continue;
        }
        if spool.is_none() {
            match tempfile::tempfile() {
                Ok(file) => spool = Some((tokio::fs::File::from_std(file), 0)),
                Err(e) => {
                    spool_failed = true;
                    crate::say_stderr(&format!(
                        "hearth run: cannot keep a task's output past {} MiB (no temporary file: {e}); the rest is dropped",
                        SPOOL_AT >> 20
                    ));
                    continue;
                }
            }
        }
        if let Some((file, len)) = &mut spool {
            use tokio::io::AsyncWriteExt as _;
            if let Err(e) = file.write_all(data).await {
                spool_failed = true;
                crate::say_stderr(&format!(
                    "hearth run: cannot keep a task's output past {} bytes (writing the temporary file failed: {e}); the rest is dropped",
                    captured.bytes.len() as u64 + *len
                ));
            } else {
                *len += data.len() as u64;
            }
        }
    }
    if reserved > 0 {
        captured.held = Some(std::sync::Arc::new(crate::output::Held(reserved)));
    }
    if let Some((file, len)) = spool {
        let mut file = file;
        use tokio::io::AsyncWriteExt as _;
        let _ = file.flush().await;
        let file = file.into_std().await;
        captured.spool = Some(Spool {
            file: std::sync::Arc::new(file),
            len,
        });
    }
    captured
}

/// Reads what is there into `buf`: `None` at the end of the stream, or
/// when it fails (a task's output ends either way).
async fn read_some(stream: &mut (impl AsyncRead + Unpin), buf: &mut [u8]) -> Option<usize> {
    loop {
        match stream.read(buf).await {
            Ok(0) => return None,
            Ok(n) => return Some(n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return None,
        }
    }
}

/// The longest line `--line-buffer` holds back waiting for its end; a
/// longer one goes out in pieces.
const MAX_LINE: usize = 1 << 20;

/// Sends each whole line of `stream` to the output as it comes.
async fn drain_lines(
    mut stream: impl AsyncRead + Unpin,
    sink: &LineSink,
    stderr: bool,
) -> Captured {
    let mut captured = Captured::default();
    let mut partial: Vec<u8> = Vec::new();
    let mut scratch = vec![0; 65536];
    loop {
        let Some(n) = read_some(&mut stream, &mut scratch).await else {
            break;
        };
        captured.total += n as u64;
        partial.extend_from_slice(&scratch[..n]);
        let cut = match partial.iter().rposition(|&b| b == b'\n') {
            Some(i) => i + 1,
            None if partial.len() >= MAX_LINE => partial.len(),
            None => continue,
        };
        let rest = partial.split_off(cut);
        sink.send(stderr, std::mem::replace(&mut partial, rest))
            .await;
    }
    if !partial.is_empty() {
        sink.send(stderr, partial).await;
    }
    captured
}
