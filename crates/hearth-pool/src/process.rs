//! Starting a worker process and forwarding what it prints to the log.

use std::os::fd::OwnedFd;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Child;
use tracing::Instrument as _;

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
const MAX_LINE: usize = 1024;
/// What one burst of output may put in the log, in bytes: a few lines of
/// PHP errors fit; the rest of a burst is counted, not logged. What a
/// worker prints on its own stdout and stderr is PHP's error log and
/// whatever escaped the library (after a fatal error, the app's output):
/// it may be a response, which must not be copied into the log.
const BURST_BYTES: usize = 4096;
/// A burst of output ends when the worker has printed nothing for this
/// long,
const BURST_QUIET: Duration = Duration::from_millis(100);
/// or when it has lasted this long: a worker that never stops printing
/// still has a few lines logged each second.
const BURST_LONGEST: Duration = Duration::from_secs(1);

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

    /// A line of Hearth's own about the worker's output (what was left
    /// out), held and logged in order with the worker's lines.
    fn note(&self, text: &str, stream: Stream) {
        let mut state = self.state();
        let pid = state.pid;
        match &mut state.held {
            Some(held) => held.push((stream, text.to_owned())),
            None => log(text, pid, stream),
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

/// Starts a worker running the app from `paths`, with `env` added to its
/// environment, its channel one end of a socketpair on its standard input
/// (see [`Channel`]).
pub(crate) fn spawn(
    config: &PoolConfig,
    info: &PhpInfo,
    paths: &Paths,
    env: &[(std::ffi::OsString, std::ffi::OsString)],
) -> Result<Spawned, Error> {
    let mut cmd = worker_command(config, info, paths, env);
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
        forwarders.push(tokio::spawn(
            forward(stdout, Stream::Stdout, output.clone()).in_current_span(),
        ));
    }
    if let Some(stderr) = child.stderr.take() {
        forwarders.push(tokio::spawn(
            forward(stderr, Stream::Stderr, output.clone()).in_current_span(),
        ));
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

/// Passes what a worker prints to `output`, line by line, until the pipe
/// closes; of each burst of output (see [`BURST_QUIET`]), the first
/// [`BURST_BYTES`] only, in lines of at most [`MAX_LINE`] bytes. What is
/// left out is counted, and said in one line when the burst ends:
/// `... (39,995,904 more bytes not logged)`.
///
/// Written by hand rather than with a lines codec because worker output need
/// not be UTF-8, a line without an end must still be cut at MAX_LINE, and
/// what is not logged must not be buffered either.
async fn forward(mut pipe: impl AsyncRead + Unpin, stream: Stream, output: Output) {
    let mut buf = BytesMut::with_capacity(4096);
    let mut burst = Burst::default();
    loop {
        let read = match burst.started {
            None => pipe.read_buf(&mut buf).await,
            Some(_) => match tokio::time::timeout(BURST_QUIET, pipe.read_buf(&mut buf)).await {
                Ok(read) => read,
                Err(_) => {
                    burst.end(&output, stream);
                    continue;
                }
            },
        };
        match read {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let started = *burst.started.get_or_insert_with(Instant::now);
        burst.take(&mut buf, &output, stream);
        if started.elapsed() >= BURST_LONGEST {
            burst.end(&output, stream);
        }
    }
    if !buf.is_empty() {
        let rest = buf.split();
        burst.line(&rest, false, &output, stream);
    }
    burst.end(&output, stream);
}

/// One burst of a worker's output on its way to the log.
#[derive(Debug, Default)]
struct Burst {
    /// When its first bytes came; none between bursts.
    started: Option<Instant>,
    /// Bytes of this burst logged so far.
    logged: usize,
    /// Bytes of this burst left out.
    skipped: u64,
    /// Inside a line already cut at MAX_LINE: the rest of it, up to its
    /// end, is left out.
    in_cut_line: bool,
}

impl Burst {
    /// Logs the whole lines in `buf` within the burst's budget and counts
    /// the rest; keeps a line without its end yet, up to MAX_LINE.
    fn take(&mut self, buf: &mut BytesMut, output: &Output, stream: Stream) {
        loop {
            match buf.iter().position(|&b| b == b'\n') {
                Some(end) => {
                    let line = buf.split_to(end + 1);
                    if std::mem::take(&mut self.in_cut_line) {
                        self.skipped += line.len() as u64;
                    } else {
                        self.line(&line[..end], false, output, stream);
                    }
                }
                None if self.in_cut_line => {
                    self.skipped += buf.len() as u64;
                    buf.clear();
                    return;
                }
                None if buf.len() >= MAX_LINE => {
                    let line = buf.split_to(MAX_LINE);
                    self.line(&line, true, output, stream);
                    self.in_cut_line = true;
                }
                None => return,
            }
        }
    }

    /// Logs `line` if the burst's budget allows; `cut`: more of it follows
    /// and will be left out.
    fn line(&mut self, line: &[u8], cut: bool, output: &Output, stream: Stream) {
        if self.logged + line.len() > BURST_BYTES {
            self.skipped += line.len() as u64 + 1;
            return;
        }
        self.logged += line.len() + 1;
        if cut {
            let mut marked = line.to_vec();
            marked.extend_from_slice(" [cut]".as_bytes());
            output.line(&marked, stream);
        } else {
            output.line(line, stream);
        }
    }

    /// The burst is over: says how much of it was left out, if any.
    fn end(&mut self, output: &Output, stream: Stream) {
        if self.skipped > 0 {
            let note = format!("... ({} more bytes not logged)", thousands(self.skipped));
            output.note(&note, stream);
        }
        *self = Burst::default();
    }
}

/// `39995904` as `39,995,904`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
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

    /// What `output` holds, as text (it holds everything while booting).
    fn held(output: &Output) -> Vec<String> {
        output
            .state()
            .held
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|(_, line)| line)
            .collect()
    }

    /// Issue 16 (10): a response that reached the worker's own output (40
    /// MB in one line) is logged as a short excerpt, marked as cut, and a
    /// count of what was left out; nothing more is buffered.
    #[test]
    fn a_flood_of_output_is_logged_as_an_excerpt_and_a_count() {
        let output = Output::new(1, false);
        let mut burst = Burst::default();
        let mut buf = BytesMut::new();
        let chunk = vec![b'z'; 65536];
        let mut sent = 0;
        while sent < 40_000_000 {
            let n = chunk.len().min(40_000_000 - sent);
            buf.extend_from_slice(&chunk[..n]);
            sent += n;
            burst.take(&mut buf, &output, Stream::Stdout);
            assert!(buf.len() < MAX_LINE, "nothing left out is kept");
        }
        burst.end(&output, Stream::Stdout);
        let lines = held(&output);
        assert_eq!(
            lines.len(),
            2,
            "{:?}",
            lines.iter().map(String::len).collect::<Vec<_>>()
        );
        assert_eq!(lines[0], format!("{} [cut]", "z".repeat(MAX_LINE)));
        assert_eq!(lines[1], "... (39,998,976 more bytes not logged)");
    }

    #[test]
    fn a_burst_logs_whole_lines_up_to_its_budget() {
        let output = Output::new(1, false);
        let mut burst = Burst::default();
        let line = format!("PHP Warning:  {}\n", "w".repeat(85));
        assert_eq!(line.len(), 100);
        let mut buf = BytesMut::from(line.repeat(1000).as_bytes());
        burst.take(&mut buf, &output, Stream::Stderr);
        burst.end(&output, Stream::Stderr);
        let lines = held(&output);
        let logged = BURST_BYTES / 100;
        assert_eq!(lines.len(), logged + 1);
        assert_eq!(lines[0], line.trim_end());
        assert_eq!(
            lines[logged],
            format!(
                "... ({} more bytes not logged)",
                thousands(100 * (1000 - logged as u64))
            )
        );
        // The next burst starts with a whole budget.
        let mut buf = BytesMut::from(line.as_bytes());
        burst.take(&mut buf, &output, Stream::Stderr);
        burst.end(&output, Stream::Stderr);
        assert_eq!(held(&output).len(), logged + 2);
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(999), "999");
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
