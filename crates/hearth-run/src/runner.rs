//! The runner: reads tasks as they come, keeps `-j` of them running, and
//! writes each result as its task finishes.
//!
//! Three threads of control and bounded queues between them keep memory
//! flat however long the input: a reader thread parses input lines (at
//! most [`QUEUE`] tasks ahead of the runner), the runner's event loop
//! starts and finishes tasks, and a writer thread writes result lines to
//! stdout (a slow reader of the results slows the runner, it does not grow
//! it).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::future::Future;
use std::io::{BufRead, IsTerminal as _, Write as _};
use std::path::PathBuf;
use std::pin::Pin;
use std::str::FromStr;
use std::time::{Duration, Instant};

use futures_util::stream::{FuturesUnordered, StreamExt as _};
use hearth_pool::{Pool, PoolConfig};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::sync::{mpsc, watch};

use crate::exec::ExecOptions;
use crate::executor::{start_pool, Executor};
use crate::joblog::{self, JobLog, Logged};
use crate::output::{self, Outcome};
use crate::task::{Parser, Task};

/// Writes a line to stderr. Unlike `eprintln!`, never panics: a runner
/// whose stderr is gone (its parent closed the pipe) still finishes its
/// tasks and writes their results.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// Tasks parsed ahead of the runner.
pub(crate) const QUEUE: usize = 1024;

/// Everything `hearth run` was asked to do.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Tasks at once (PHP workers, for PHP jobs).
    pub jobs: usize,
    pub keep_order: bool,
    pub timeout: Option<Duration>,
    pub kill_after: Duration,
    pub retries: u32,
    pub halt: Option<Halt>,
    pub joblog: Option<PathBuf>,
    pub resume: Resume,
    pub max_output: usize,
    /// Show a progress bar (when stderr is a terminal).
    pub progress: bool,
    /// The worker pool for PHP jobs; none for shell tasks.
    pub php: Option<PoolConfig>,
    pub format: InputFormat,
}

/// Where tasks come from.
#[derive(Debug, Clone)]
pub enum Input {
    Stdin,
    File(PathBuf),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputFormat {
    /// JSON Lines.
    Json,
    /// One task per line: a shell command, or the argument for `template`.
    Lines { template: Vec<String> },
}

/// What `--resume` skips.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    No,
    /// Every task the job log lists.
    Finished,
    /// Only the tasks the job log lists as succeeded (`--resume-failed`).
    Succeeded,
}

/// When to give up after failures (`--halt`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Halt {
    pub mode: HaltMode,
    /// Failures that trigger it.
    pub failures: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HaltMode {
    /// Stop the running tasks too.
    Now,
    /// Let the running tasks finish.
    Soon,
}

impl FromStr for Halt {
    type Err = String;

    /// `now`, `soon`, or GNU parallel's `now,fail=N` and `soon,fail=N`.
    fn from_str(s: &str) -> Result<Halt, String> {
        let (mode, rest) = s.split_once(',').unwrap_or((s, "fail=1"));
        let mode = match mode {
            "now" => HaltMode::Now,
            "soon" => HaltMode::Soon,
            _ => {
                return Err(format!(
                    "`{s}`: expected now, soon, now,fail=N or soon,fail=N"
                ))
            }
        };
        let failures = rest
            .strip_prefix("fail=")
            .and_then(|n| n.parse::<u64>().ok())
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("`{s}`: expected fail=N with N at least 1 after the comma"))?;
        Ok(Halt { mode, failures })
    }
}

/// How a run went.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// Tasks that finished (succeeded or failed) in this run.
    pub finished: u64,
    pub failed: u64,
    /// Skipped by `--resume`.
    pub skipped: u64,
    /// Of those, the ones the job log lists as failed: failures of the
    /// batch, which the exit status counts.
    pub skipped_failed: u64,
    /// Stopped by the runner (`--halt now`, a second signal); neither
    /// written nor logged, so `--resume` runs them again.
    pub interrupted: u64,
    /// Unusable input: the message, with its line number.
    pub input_error: Option<String>,
    /// The signal that stopped the run.
    pub signal: Option<i32>,
    pub halted: bool,
    pub elapsed: Duration,
}

/// The exit status for every error other than failed tasks: a refused
/// command line, unusable input, a file that cannot be read or written,
/// PHP workers that do not boot. GNU parallel's "other error", out of the
/// range of failure counts (0 to 101) and of signals (128 + N).
pub const ERROR_STATUS: u8 = 255;

/// The most failures the exit status counts; it means "more than 100".
const MAX_FAILURES_STATUS: u64 = 101;

impl Summary {
    /// The exit status, as GNU parallel's: 0 when every task of the batch
    /// succeeded, 1-100 the number of failed tasks, 101 more than 100 (the
    /// batch's: with `--resume`, those the job log lists as failed count);
    /// [`ERROR_STATUS`] for unusable input; 128 + the signal that stopped
    /// the run.
    pub fn exit_code(&self) -> u8 {
        if self.input_error.is_some() {
            return ERROR_STATUS;
        }
        if let Some(sig) = self.signal {
            return u8::try_from(128 + sig).unwrap_or(255);
        }
        let failed = self.failed.saturating_add(self.skipped_failed);
        u8::try_from(failed.min(MAX_FAILURES_STATUS)).unwrap_or(101)
    }
}

/// What the reader thread hands the runner.
pub(crate) enum Item {
    Task(Task),
    /// Listed in the job log: not run again.
    Skip {
        seq: u64,
        id: Box<serde_json::value::RawValue>,
        logged: Logged,
    },
    /// Unusable input; nothing more follows.
    Error(String),
    /// The input ended after this many tasks.
    End(u64),
}

struct Finished {
    task: Task,
    order: u64,
    attempts: u32,
    outcome: Outcome,
}

type Running = FuturesUnordered<Pin<Box<dyn Future<Output = Finished>>>>;

/// Runs every task of `input`: [`prepare`], then [`Prepared::run`]. An
/// `Err` means nothing could run at all; the message says why.
pub async fn run(config: RunConfig, input: Input) -> Result<Summary, String> {
    prepare(config, input).await?.run().await
}

/// A batch ready to run: its job log and its input are open, and its PHP
/// workers, if it has any, have booted.
pub struct Prepared {
    config: RunConfig,
    clock: Instant,
    /// What the job log lists, for `--resume`.
    done: HashMap<u64, Logged>,
    log: Option<JobLog>,
    reader: Box<dyn BufRead + Send>,
    parser: Parser,
    pool: Option<Pool>,
    signals: Signals,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("config", &self.config)
            .field("log", &self.log)
            .field("parser", &self.parser)
            .finish_non_exhaustive()
    }
}

/// The signals that stop a run: the first starts nothing more, the second
/// stops the running tasks.
struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

/// Does everything that can refuse a batch as a whole, before any task
/// runs: reads the job log (`--resume`) or checks that it is unused, opens
/// it and the input, and boots the PHP workers. An `Err` says why the
/// batch cannot run; a PHP worker that failed to boot is reported there
/// once, with its output.
pub async fn prepare(config: RunConfig, input: Input) -> Result<Prepared, String> {
    let clock = Instant::now();
    let Opened { done, log, reader } = open(&config, &input)?;
    let parser = match (&config.format, config.php.is_some()) {
        (InputFormat::Lines { template }, _) => Parser::Lines {
            template: template.clone(),
        },
        (InputFormat::Json, true) => Parser::Mixed,
        (InputFormat::Json, false) => Parser::Shell,
    };
    let signals = Signals {
        int: signal(tokio::signal::unix::SignalKind::interrupt())?,
        term: signal(tokio::signal::unix::SignalKind::terminate())?,
        hup: signal(tokio::signal::unix::SignalKind::hangup())?,
    };
    let pool = match &config.php {
        Some(pool_config) => {
            let started = start_pool(pool_config.clone()).await?;
            if let Some(partial) = started.partial {
                say!("hearth run: {partial}");
            }
            Some(started.pool)
        }
        None => None,
    };
    Ok(Prepared {
        config,
        clock,
        done,
        log,
        reader,
        parser,
        pool,
        signals,
    })
}

/// What a batch reads and writes, open: the job log and what it lists
/// (for `--resume`), and the input.
pub(crate) struct Opened {
    pub(crate) done: HashMap<u64, Logged>,
    pub(crate) log: Option<JobLog>,
    pub(crate) reader: Box<dyn BufRead + Send>,
}

/// Reads the job log (`--resume`) or checks that it is unused, opens it
/// and the input.
pub(crate) fn open(config: &RunConfig, input: &Input) -> Result<Opened, String> {
    let done = match (&config.joblog, config.resume) {
        (_, Resume::No) => HashMap::new(),
        (Some(path), _) => joblog::read(path)?,
        (None, _) => {
            return Err("--resume needs --joblog FILE: the log of the run to resume".to_owned())
        }
    };
    let log = match &config.joblog {
        Some(path) => {
            if config.resume == Resume::No {
                joblog::check_unused(path)?;
            }
            Some(
                JobLog::open(path)
                    .map_err(|e| format!("cannot write the job log {}: {e}", path.display()))?,
            )
        }
        None => None,
    };
    let reader: Box<dyn BufRead + Send> = match input {
        Input::Stdin => {
            if std::io::stdin().is_terminal() {
                say!("hearth run: reading tasks from standard input (Ctrl-D to end)");
            }
            Box::new(std::io::BufReader::with_capacity(65536, std::io::stdin()))
        }
        Input::File(path) => Box::new(std::io::BufReader::with_capacity(
            65536,
            std::fs::File::open(path)
                .map_err(|e| format!("cannot read tasks from {}: {e}", path.display()))?,
        )),
    };
    Ok(Opened { done, log, reader })
}

impl Prepared {
    /// Runs every task; see the module documentation.
    pub async fn run(self) -> Result<Summary, String> {
        let Prepared {
            config,
            clock,
            done,
            mut log,
            reader,
            parser,
            pool,
            signals:
                Signals {
                    int: mut sigint,
                    term: mut sigterm,
                    hup: mut sighup,
                },
        } = self;
        let (item_tx, mut items) = mpsc::channel(QUEUE);
        let resume = config.resume;
        let spawned = std::thread::Builder::new()
            .name("hearth-input".into())
            .spawn(move || read_input(reader, &parser, &done, resume, &item_tx));
        if let Err(e) = spawned {
            if let Some(pool) = pool {
                pool.shutdown().await;
            }
            return Err(format!("cannot start the input reader: {e}"));
        }
        let (writer, writer_thread) = Writer::start();

        let progress = progress_bar(config.progress);
        let options = ExecOptions {
            timeout: config.timeout,
            kill_after: config.kill_after,
            max_output: config.max_output,
        };
        let (abort_tx, abort) = watch::channel(false);
        let executor = Executor::new(pool, options);

        let mut summary = Summary::default();
        let mut emitter = Emitter {
            keep_order: config.keep_order,
            next: 0,
            pending: BTreeMap::new(),
            writer,
            line: String::new(),
        };
        let mut running: Running = FuturesUnordered::new();
        let mut retry: VecDeque<(Task, u64, u32)> = VecDeque::new();
        let mut input_open = true;
        let mut starting = true;
        let mut next_order = 0u64;
        let jobs = config.jobs.max(1);

        let start = |task: Task, order: u64, attempts: u32, running: &mut Running| {
            let abort = abort.clone();
            let executor = executor.clone();
            running.push(Box::pin(async move {
                let outcome = executor.run(&task, abort).await;
                Finished {
                    task,
                    order,
                    attempts,
                    outcome,
                }
            }));
        };

        loop {
            while starting && running.len() < jobs {
                let Some((task, order, attempts)) = retry.pop_front() else {
                    break;
                };
                start(task, order, attempts, &mut running);
            }
            if running.is_empty() && (!starting || (!input_open && retry.is_empty())) {
                break;
            }
            let want_input = input_open && starting && running.len() < jobs && retry.is_empty();
            tokio::select! {
                biased;
                Some(finished) = running.next(), if !running.is_empty() => {
                    let Finished { task, order, attempts, outcome } = finished;
                    if outcome.interrupted {
                        summary.interrupted += 1;
                        continue;
                    }
                    if !outcome.succeeded() && attempts <= config.retries && starting {
                        tracing::debug!(seq = task.seq, attempts, "task failed; trying again");
                        retry.push_back((task, order, attempts + 1));
                        continue;
                    }
                    if let Some(log) = &mut log {
                        let (exit, signal) = (outcome.logged_exit(), outcome.signal.unwrap_or(0));
                        if let Err(e) = log.record(task.seq, outcome.started, outcome.duration.as_secs_f64(), exit, signal, &task.command_line()) {
                            progress.suspend(|| say!("hearth run: cannot write the job log {}: {e}", log.path().display()));
                        }
                    }
                    summary.finished += 1;
                    let failed = !outcome.succeeded();
                    emitter.result(order, &task, &outcome, attempts, config.max_output).await;
                    progress.inc(1);
                    if failed {
                        summary.failed += 1;
                        progress.set_message(format!("{} failed", summary.failed));
                        if let Some(halt) = config.halt {
                            if summary.failed >= halt.failures && !summary.halted {
                                summary.halted = true;
                                starting = false;
                                let running_now = running.len();
                                progress.suspend(|| say!(
                                    "hearth run: halting after {} failed task(s){}",
                                    summary.failed,
                                    match (halt.mode, running_now) {
                                        (_, 0) => String::new(),
                                        (HaltMode::Now, n) => format!("; stopping {n} running"),
                                        (HaltMode::Soon, n) => format!("; waiting for {n} running"),
                                    }
                                ));
                                if halt.mode == HaltMode::Now {
                                    let _ = abort_tx.send(true);
                                }
                            }
                        }
                    }
                    if emitter.writer.closed {
                        starting = false;
                    }
                }
                item = items.recv(), if want_input => match item {
                    Some(Item::Task(task)) => {
                        start(task, next_order, 1, &mut running);
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
                        starting = false;
                        input_open = false;
                    }
                    Some(Item::End(total)) => {
                        progress.set_length(total);
                        input_open = false;
                    }
                    None => input_open = false,
                },
                _ = sigint.recv() => on_signal(libc_sig::INT, &mut summary, &mut starting, &abort_tx, running.len(), &progress),
                _ = sigterm.recv() => on_signal(libc_sig::TERM, &mut summary, &mut starting, &abort_tx, running.len(), &progress),
                // A closed terminal: like SIGTERM, rather than dying with tasks
                // left running and their results lost.
                _ = sighup.recv() => on_signal(libc_sig::HUP, &mut summary, &mut starting, &abort_tx, running.len(), &progress),
            }
        }
        emitter.finish().await;
        progress.finish_and_clear();
        drop(emitter);
        let _ = writer_thread.join();
        executor.shutdown().await;
        summary.elapsed = clock.elapsed();
        Ok(summary)
    }
}

/// Signal numbers, for exit statuses and messages.
pub(crate) mod libc_sig {
    pub const HUP: i32 = 1;
    pub const INT: i32 = 2;
    pub const TERM: i32 = 15;
}

pub(crate) fn signal(
    kind: tokio::signal::unix::SignalKind,
) -> Result<tokio::signal::unix::Signal, String> {
    tokio::signal::unix::signal(kind).map_err(|e| format!("cannot handle signals: {e}"))
}

/// First SIGINT or SIGTERM: start nothing more and let running tasks
/// finish. Second: stop them too.
fn on_signal(
    sig: i32,
    summary: &mut Summary,
    starting: &mut bool,
    abort: &watch::Sender<bool>,
    running: usize,
    progress: &ProgressBar,
) {
    let name = output::signal_name(sig);
    if summary.signal.is_none() {
        summary.signal = Some(sig);
        *starting = false;
        if running > 0 {
            progress.suspend(|| {
                say!(
                    "hearth run: {name}: starting no more tasks; waiting for {running} running (send it again to stop them)"
                );
            });
        }
    } else {
        progress.suspend(|| say!("hearth run: {name}: stopping {running} running task(s)"));
        let _ = abort.send(true);
    }
}

pub(crate) fn progress_bar(wanted: bool) -> ProgressBar {
    if !wanted || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} {elapsed_precise} [{wide_bar}] {human_pos}/{human_len} {per_sec} ETA {eta} {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// The reader thread: turns input lines into tasks, stopping at the first
/// unusable one.
pub(crate) fn read_input(
    mut reader: Box<dyn BufRead + Send>,
    parser: &Parser,
    done: &HashMap<u64, Logged>,
    resume: Resume,
    tx: &mpsc::Sender<Item>,
) {
    let mut line = Vec::new();
    let mut number = 0u64;
    let mut seq = 0u64;
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                let _ = tx.blocking_send(Item::Error(format!(
                    "reading tasks failed after line {number}: {e}"
                )));
                return;
            }
        }
        number += 1;
        let Ok(text) = std::str::from_utf8(&line) else {
            let _ = tx.blocking_send(Item::Error(format!("line {number}: not UTF-8 text")));
            return;
        };
        let text = text.trim_end_matches(['\n', '\r']);
        if text.trim().is_empty() {
            continue;
        }
        seq += 1;
        let item = match parser.parse(text, seq) {
            Ok(task) => match done.get(&seq) {
                Some(logged)
                    if resume == Resume::Finished
                        || (resume == Resume::Succeeded && logged.succeeded()) =>
                {
                    Item::Skip {
                        seq,
                        id: task.id,
                        logged: *logged,
                    }
                }
                _ => Item::Task(task),
            },
            Err(message) => {
                let _ = tx.blocking_send(Item::Error(format!("line {number}: {message}")));
                return;
            }
        };
        if tx.blocking_send(item).is_err() {
            return;
        }
    }
    let _ = tx.blocking_send(Item::End(seq));
}

/// Writes result lines in completion order, or in input order with
/// `--keep-order` (holding the lines that arrive early).
pub(crate) struct Emitter {
    pub(crate) keep_order: bool,
    pub(crate) next: u64,
    pub(crate) pending: BTreeMap<u64, Vec<u8>>,
    pub(crate) writer: Writer,
    pub(crate) line: String,
}

impl Emitter {
    async fn result(
        &mut self,
        order: u64,
        task: &Task,
        outcome: &Outcome,
        attempts: u32,
        max_output: usize,
    ) {
        self.line.clear();
        output::write_result(
            &mut self.line,
            task.id.get(),
            task.seq,
            outcome,
            attempts,
            max_output,
        );
        self.emit(order).await;
    }

    pub(crate) async fn skipped(
        &mut self,
        order: u64,
        seq: u64,
        id: &serde_json::value::RawValue,
        logged: Logged,
    ) {
        self.line.clear();
        output::write_skipped(&mut self.line, id.get(), seq, logged.exit, logged.signal);
        self.emit(order).await;
    }

    /// Writes `line` (with its newline), the result of input position
    /// `order`.
    pub(crate) async fn line(&mut self, order: u64, line: String) {
        self.line = line;
        self.emit(order).await;
    }

    async fn emit(&mut self, order: u64) {
        let line = std::mem::take(&mut self.line).into_bytes();
        if !self.keep_order {
            self.writer.send(line).await;
            return;
        }
        self.pending.insert(order, line);
        while let Some(line) = self.pending.remove(&self.next) {
            self.writer.send(line).await;
            self.next += 1;
        }
    }

    /// Writes what is still held back (tasks before it were interrupted).
    pub(crate) async fn finish(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        for (_, line) in pending {
            self.writer.send(line).await;
        }
    }
}

/// The writer thread's inbox. Result lines are written by a thread of
/// their own so that a blocking write to a slow pipe never stalls the
/// tasks' output draining.
pub(crate) struct Writer {
    tx: Option<mpsc::Sender<Vec<u8>>>,
    pub(crate) closed: bool,
}

impl Writer {
    pub(crate) fn start() -> (Writer, std::thread::JoinHandle<()>) {
        let (tx, mut rx) = mpsc::channel::<Vec<u8>>(QUEUE);
        let thread = std::thread::spawn(move || {
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::with_capacity(65536, stdout.lock());
            while let Some(line) = rx.blocking_recv() {
                if out.write_all(&line).is_err() {
                    break;
                }
                // Flush when nothing more is waiting, so results reach a
                // reader as soon as they exist but in few writes.
                let mut broken = false;
                while let Ok(line) = rx.try_recv() {
                    if out.write_all(&line).is_err() {
                        broken = true;
                        break;
                    }
                }
                if broken || out.flush().is_err() {
                    break;
                }
            }
            let _ = out.flush();
        });
        (
            Writer {
                tx: Some(tx),
                closed: false,
            },
            thread,
        )
    }

    async fn send(&mut self, line: Vec<u8>) {
        let Some(tx) = &self.tx else { return };
        if tx.send(line).await.is_err() {
            if !self.closed {
                say!("hearth run: standard output is closed; starting no more tasks");
            }
            self.closed = true;
            self.tx = None;
        }
    }
}

impl Drop for Emitter {
    fn drop(&mut self) {
        self.writer.tx = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halt_forms() {
        assert_eq!(
            "now".parse::<Halt>().unwrap(),
            Halt {
                mode: HaltMode::Now,
                failures: 1
            }
        );
        assert_eq!(
            "soon,fail=3".parse::<Halt>().unwrap(),
            Halt {
                mode: HaltMode::Soon,
                failures: 3
            }
        );
        assert!("later".parse::<Halt>().is_err());
        assert!("now,fail=0".parse::<Halt>().is_err());
        assert!("now,success=1".parse::<Halt>().is_err());
    }

    #[test]
    fn exit_codes() {
        let mut s = Summary::default();
        assert_eq!(s.exit_code(), 0);
        s.failed = 3;
        assert_eq!(s.exit_code(), 3);
        s.skipped_failed = 2;
        assert_eq!(s.exit_code(), 5, "failures the job log lists count");
        s.skipped_failed = 0;
        s.failed = 100;
        assert_eq!(s.exit_code(), 100);
        s.failed = 101;
        assert_eq!(s.exit_code(), 101);
        s.failed = 500;
        assert_eq!(s.exit_code(), 101);
        s.signal = Some(2);
        assert_eq!(s.exit_code(), 130);
        s.input_error = Some("line 1".into());
        assert_eq!(s.exit_code(), 255);
    }
}
