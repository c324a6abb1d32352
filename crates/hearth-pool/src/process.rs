//! Starting a worker process and forwarding what it prints to the log.

use std::os::fd::OwnedFd;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Child;

use crate::channel::Channel;
use crate::php::{worker_command, PhpInfo};
use crate::{Error, Paths, PoolConfig};

/// Lines of a failed boot's output that its error quotes; any before them
/// are logged on their own.
const TAIL_LINES: usize = 20;
/// Lines held while a worker boots. A boot that prints more has them
/// logged as they come instead.
const HOLD_LINES: usize = 200;
/// Longer lines are cut; output floods must not grow memory.
const MAX_LINE: usize = 16 * 1024;

/// A freshly started worker process, before its handshake.
#[derive(Debug)]
pub(crate) struct Spawned {
    pub child: Child,
    pub pid: u32,
    pub channel: Channel,
    pub output: Output,
    /// The tasks forwarding stdout and stderr; they end when the process does.
    pub forwarders: Vec<tokio::task::JoinHandle<()>>,
}

/// What a worker prints on stdout and stderr, on its way to the log.
///
/// While the worker boots, its lines are held: if it becomes ready they
/// are logged, in order; if it fails, the boot error quotes them, so that
/// a failed boot is one log record with its reason (a parse error is
/// logged once, not once as a line and again in the error). After the
/// boot, lines are logged as they come.
///
/// The CGI header block php-cgi prints before a script's first output
/// (`Content-type: text/html`, `X-Powered-By`, `Status: 500`) is left out:
/// it says nothing about the app. (The CLI SAPI prints none.)
#[derive(Debug, Clone)]
pub(crate) struct Output(Arc<Mutex<OutputState>>);

#[derive(Debug)]
struct OutputState {
    pid: u32,
    /// Lines held while booting; `None` once they are logged as they come.
    held: Option<Vec<(Stream, String)>>,
    /// Whether stdout may still be in php-cgi's header block.
    stdout_headers: bool,
}

impl Output {
    /// `cgi`: the SAPI prints a CGI header block first.
    fn new(pid: u32, cgi: bool) -> Output {
        Output(Arc::new(Mutex::new(OutputState {
            pid,
            held: Some(Vec::new()),
            stdout_headers: cgi,
        })))
    }

    fn state(&self) -> std::sync::MutexGuard<'_, OutputState> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn line(&self, line: &[u8], stream: Stream) {
        let line = String::from_utf8_lossy(line);
        let line = line.trim_end_matches('\r');
        let mut state = self.state();
        if let Stream::Stdout = stream {
            if state.stdout_headers {
                if line.is_empty() {
                    state.stdout_headers = false;
                    return;
                }
                if is_cgi_header(line) {
                    tracing::debug!(target: "hearth::worker", pid = state.pid, "CGI header left out: {line}");
                    return;
                }
                state.stdout_headers = false;
            }
        }
        if line.trim().is_empty() {
            return;
        }
        let pid = state.pid;
        match &mut state.held {
            Some(held) if held.len() < HOLD_LINES => held.push((stream, line.to_owned())),
            Some(_) => {
                // A boot this talkative is logged as it goes.
                for (stream, held) in state.held.take().into_iter().flatten() {
                    log(&held, pid, stream);
                }
                log(line, pid, stream);
            }
            None => log(line, pid, stream),
        }
    }

    /// The worker is ready: logs what it printed while booting, and from
    /// now on each line as it comes.
    pub fn release(&self) {
        let mut state = self.state();
        let pid = state.pid;
        for (stream, line) in state.held.take().into_iter().flatten() {
            log(&line, pid, stream);
        }
    }

    /// The worker failed to boot: the last lines it printed, for the boot
    /// error (oldest first). Earlier ones are logged now, so that none is
    /// lost or logged twice; lines that come later are logged as they come.
    pub fn take_for_error(&self) -> Vec<String> {
        let mut state = self.state();
        let pid = state.pid;
        let mut held = state.held.take().unwrap_or_default();
        let quoted = held.split_off(held.len().saturating_sub(TAIL_LINES));
        for (stream, line) in held {
            log(&line, pid, stream);
        }
        quoted.into_iter().map(|(_, line)| line).collect()
    }
}

/// A line of a CGI header block: `Name: value`.
fn is_cgi_header(line: &str) -> bool {
    line.split_once(": ").is_some_and(|(name, _)| {
        !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    })
}

/// Starts a worker running the app from `paths`, its channel one end of a
/// socketpair on its standard input (see [`Channel`]).
pub(crate) fn spawn(config: &PoolConfig, info: &PhpInfo, paths: &Paths) -> Result<Spawned, Error> {
    let mut cmd = worker_command(config, info, paths);
    let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
    cmd.stdin(Stdio::from(OwnedFd::from(theirs)));
    let channel = Channel::socket(ours)?;
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
    let output = Output::new(pid, info.supports_headers());
    let mut forwarders = Vec::with_capacity(2);
    if let Some(stdout) = child.stdout.take() {
        forwarders.push(tokio::spawn(forward(
            stdout,
            Stream::Stdout,
            output.clone(),
        )));
    }
    if let Some(stderr) = child.stderr.take() {
        forwarders.push(tokio::spawn(forward(
            stderr,
            Stream::Stderr,
            output.clone(),
        )));
    }
    Ok(Spawned {
        child,
        pid,
        channel,
        output,
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

/// Passes each line a worker prints to `output`, until the pipe closes.
///
/// Written by hand rather than with a lines codec because worker output need
/// not be UTF-8 and a line without an end must still be cut at MAX_LINE.
async fn forward(mut pipe: impl AsyncRead + Unpin, stream: Stream, output: Output) {
    let mut buf = BytesMut::with_capacity(4096);
    loop {
        match pipe.read_buf(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        while let Some(end) = buf.iter().position(|&b| b == b'\n') {
            let line = buf.split_to(end + 1);
            output.line(&line[..end], stream);
        }
        if buf.len() >= MAX_LINE {
            let line = buf.split_to(MAX_LINE);
            output.line(&line, stream);
        }
    }
    if !buf.is_empty() {
        output.line(&buf, stream);
    }
}

/// Logs a line a worker printed, tagged with its pid.
fn log(line: &str, pid: u32, stream: Stream) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn php_cgi_header_lines_are_told_from_output() {
        assert!(is_cgi_header("Content-type: text/html; charset=UTF-8"));
        assert!(is_cgi_header("X-Powered-By: PHP/8.2.7"));
        assert!(is_cgi_header("Status: 500 Internal Server Error"));
        assert!(!is_cgi_header("hello"));
        assert!(!is_cgi_header("PHP Parse error:  syntax error"));
        assert!(!is_cgi_header(": nothing"));
    }

    #[test]
    fn boot_output_is_held_then_quoted_without_the_header_block() {
        let output = Output::new(1, true);
        for line in [
            "Status: 500 Internal Server Error",
            "Content-type: text/html",
            "",
        ] {
            output.line(line.as_bytes(), Stream::Stdout);
        }
        output.line(b"hello\r", Stream::Stdout);
        output.line(b"Not-A-Header: after the block", Stream::Stdout);
        output.line(b"PHP Parse error:  oops", Stream::Stderr);
        assert_eq!(
            output.take_for_error(),
            [
                "hello",
                "Not-A-Header: after the block",
                "PHP Parse error:  oops"
            ]
        );
        // Once taken, nothing more is held.
        output.line(b"late", Stream::Stderr);
        assert!(output.take_for_error().is_empty());
        // Under the CLI SAPI, there is no header block to leave out.
        let cli = Output::new(1, false);
        cli.line(b"note: printed by the script", Stream::Stdout);
        assert_eq!(cli.take_for_error(), ["note: printed by the script"]);
    }

    #[test]
    fn a_failed_boot_quotes_its_last_lines() {
        let output = Output::new(1, false);
        for i in 0..(TAIL_LINES + 5) {
            output.line(format!("line {i}").as_bytes(), Stream::Stderr);
        }
        let quoted = output.take_for_error();
        assert_eq!(quoted.len(), TAIL_LINES);
        assert_eq!(quoted[0], "line 5");
    }
}
