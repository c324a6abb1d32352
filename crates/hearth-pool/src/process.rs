//! Starting a worker process and forwarding what it prints to the log.

use std::collections::VecDeque;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Child;

use crate::php::{worker_command, PhpInfo};
use crate::worker::Channel;
use crate::{Error, Paths, PoolConfig};

/// Lines kept from a worker's output, to explain a failed boot.
const TAIL_LINES: usize = 20;
/// Longer lines are cut; output floods must not grow memory.
const MAX_LINE: usize = 16 * 1024;

/// A freshly started worker process, before its handshake.
#[derive(Debug)]
pub(crate) struct Spawned {
    pub child: Child,
    pub pid: u32,
    pub channel: Channel,
    pub tail: OutputTail,
    /// The tasks forwarding stdout and stderr; they end when the process does.
    pub forwarders: Vec<tokio::task::JoinHandle<()>>,
}

/// The last lines a worker printed on stdout and stderr.
#[derive(Debug, Clone, Default)]
pub(crate) struct OutputTail(Arc<Mutex<VecDeque<String>>>);

impl OutputTail {
    fn push(&self, line: String) {
        let mut lines = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if lines.len() == TAIL_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    /// The kept lines, oldest first, joined for an error message.
    pub fn text(&self) -> String {
        let lines = self.0.lock().unwrap_or_else(|e| e.into_inner());
        lines.iter().cloned().collect::<Vec<_>>().join("\n")
    }
}

/// Starts a worker running the app from `paths`. With `fifo` (a path in a private directory) it talks
/// over pipes: requests on its stdin, responses on a FIFO it opens at that
/// path; without, over one socketpair on its stdin.
pub(crate) fn spawn(
    config: &PoolConfig,
    info: &PhpInfo,
    paths: &Paths,
    fifo: Option<&Path>,
) -> Result<Spawned, Error> {
    let mut cmd = worker_command(config, info, paths);
    let channel = match fifo {
        Some(path) => {
            use rustix::fs::{mkfifoat, open, Mode, OFlags, CWD};
            use rustix::pipe::{pipe_with, PipeFlags};
            mkfifoat(CWD, path, Mode::RUSR | Mode::WUSR).map_err(std::io::Error::from)?;
            if let Some(user) = &config.user {
                std::os::unix::fs::chown(path, Some(user.uid), Some(user.gid))?;
            }
            // Non-blocking, so opening does not wait for the worker to
            // open the other end.
            let responses = open(
                path,
                OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(std::io::Error::from)?;
            let (requests_out, requests_in) =
                pipe_with(PipeFlags::CLOEXEC).map_err(std::io::Error::from)?;
            cmd.stdin(Stdio::from(requests_out));
            cmd.env("HEARTH_RESPONSES", path);
            Channel::pipes(responses, requests_in)?
        }
        None => {
            let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
            cmd.stdin(Stdio::from(OwnedFd::from(theirs)));
            Channel::socket(ours)?
        }
    };
    let mut child = cmd.spawn().map_err(|e| {
        Error::boot(format!(
            "cannot start {} {}: {e}",
            config.php.display(),
            paths.script.display()
        ))
    })?;
    // The command still holds the child's end of the channel; close it so
    // that a dead worker reads as end-of-file.
    drop(cmd);
    let pid = child.id().unwrap_or_default();
    if config.batch_scheduling {
        set_batch_scheduling(pid);
    }
    let tail = OutputTail::default();
    let mut forwarders = Vec::with_capacity(2);
    if let Some(stdout) = child.stdout.take() {
        forwarders.push(tokio::spawn(forward(
            stdout,
            pid,
            Stream::Stdout,
            tail.clone(),
        )));
    }
    if let Some(stderr) = child.stderr.take() {
        forwarders.push(tokio::spawn(forward(
            stderr,
            pid,
            Stream::Stderr,
            tail.clone(),
        )));
    }
    Ok(Spawned {
        child,
        pid,
        channel,
        tail,
        forwarders,
    })
}

/// Puts a process under SCHED_BATCH (same priority, no wakeup preemption).
///
/// Neither rustix nor nix expose sched_setscheduler(), so this is the one
/// direct libc call in Hearth.
#[allow(unsafe_code)]
fn set_batch_scheduling(pid: u32) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_setscheduler only reads the sched_param behind the
    // pointer, which lives on this stack frame for the whole call.
    let rc = unsafe { libc::sched_setscheduler(pid, libc::SCHED_BATCH, &param) };
    if rc != 0 {
        tracing::debug!(
            pid,
            "SCHED_BATCH not applied: {}",
            std::io::Error::last_os_error()
        );
    }
}

#[derive(Debug, Clone, Copy)]
enum Stream {
    Stdout,
    Stderr,
}

/// Logs each line a worker prints, tagged with its pid, until the pipe closes.
///
/// Written by hand rather than with a lines codec because worker output need
/// not be UTF-8 and a line without an end must still be cut at MAX_LINE.
async fn forward(mut pipe: impl AsyncRead + Unpin, pid: u32, stream: Stream, tail: OutputTail) {
    let mut buf = BytesMut::with_capacity(4096);
    loop {
        match pipe.read_buf(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        while let Some(end) = buf.iter().position(|&b| b == b'\n') {
            let line = buf.split_to(end + 1);
            emit(&line[..end], pid, stream, &tail);
        }
        if buf.len() >= MAX_LINE {
            let line = buf.split_to(MAX_LINE);
            emit(&line, pid, stream, &tail);
        }
    }
    if !buf.is_empty() {
        emit(&buf, pid, stream, &tail);
    }
}

fn emit(line: &[u8], pid: u32, stream: Stream, tail: &OutputTail) {
    let line = String::from_utf8_lossy(line);
    let line = line.trim_end_matches('\r');
    if line.trim().is_empty() {
        return;
    }
    tail.push(line.to_owned());
    match stream {
        Stream::Stdout => {
            tracing::info!(target: "hearth::worker", pid, stream = "stdout", "{line}")
        }
        Stream::Stderr => {
            if line.starts_with("PHP Fatal error") || line.starts_with("PHP Parse error") {
                tracing::error!(target: "hearth::worker", pid, "{line}");
            } else if line.starts_with("PHP Warning") || line.starts_with("hearth: ") {
                tracing::warn!(target: "hearth::worker", pid, "{line}");
            } else {
                tracing::info!(target: "hearth::worker", pid, stream = "stderr", "{line}");
            }
        }
    }
}
