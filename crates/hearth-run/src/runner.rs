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

use std::sync::Arc;

use crate::args::{ArgReader, ArgsConfig};
use crate::exec::ExecOptions;
use crate::executor::{start_pool, Executor};
use crate::joblog::{self, JobLog, Logged};
use crate::output::{self, Captured, Outcome};
use crate::task::{default_id, Parser, Stream, Task};
use crate::template::{JobArgs, Template};

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
    /// Attempts a task gets in all (GNU parallel's `--retries`); 0 and 1
    /// both mean one.
    pub retries: u32,
    pub halt: Option<Halt>,
    pub joblog: Option<PathBuf>,
    /// `--joblog +FILE`: add to the log whatever it lists.
    pub joblog_append: bool,
    pub resume: Resume,
    /// Bytes of each output stream kept (`usize::MAX`: all of it).
    pub max_output: usize,
    /// Show a progress bar (when stderr is a terminal).
    pub progress: bool,
    /// `--bar`: show progress even when stderr is no terminal, as a line
    /// a second.
    pub progress_always: bool,
    /// `--memfree`: start a task only with this many bytes available.
    pub memfree: Option<u64>,
    /// `--load`: start a task only while the load average is below this.
    pub load: Option<f64>,
    /// The worker pool for PHP jobs; none for shell tasks.
    pub php: Option<PoolConfig>,
    pub format: InputFormat,
    /// What is written, and where.
    pub output: OutputConfig,
    /// The least time between two task starts (`--delay`).
    pub delay: Option<Duration>,
    /// Print each task's command line instead of running it.
    pub dry_run: bool,
}

/// What is written for each task, and where.
#[derive(Debug, Clone, Default)]
pub struct OutputConfig {
    /// One JSON line per task (else the tasks' own output, as GNU parallel
    /// prints it).
    pub json: bool,
    /// `--tag` and `--tagstring`: what goes before each line of output.
    pub tag: Option<Tag>,
    pub mode: OutputMode,
    /// `--results`
    pub results: Option<Results>,
    /// `-v`: each task's command line before its output.
    pub verbose: bool,
    /// `-t`: each task's command line on stderr as it starts.
    pub trace: bool,
    /// `--header`: the names of the sources, for `--results DIR`'s
    /// directories (else 1, 2...).
    pub names: Vec<String>,
}

/// How a task's output reaches stdout in plain output.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OutputMode {
    /// All of it when the task ends (`--group`).
    #[default]
    Group,
    /// Line by line as it comes (`--line-buffer`).
    Lines,
    /// As the task writes it (`-u`).
    Ungroup,
}

/// What goes before each line of a task's output.
#[derive(Debug, Clone)]
pub enum Tag {
    /// `--tag`: the arguments.
    Args,
    /// `--tagstring STR`, with its replacement strings.
    Template(Arc<Template>),
}

/// `--results`
#[derive(Debug, Clone)]
pub enum Results {
    /// `NAME.jsonl`: the JSON result lines, in that file.
    Jsonl(PathBuf),
    /// A directory, laid out as GNU parallel's: one directory per argument
    /// (`DIR/1/ARG/2/ARG2/`) with `seq`, `stdout` and `stderr` files.
    Dir(PathBuf),
}

/// Where tasks come from.
#[derive(Debug, Clone)]
pub enum Input {
    Stdin,
    File(PathBuf),
}

#[derive(Debug, Clone)]
pub enum InputFormat {
    /// JSON Lines.
    Json,
    /// Arguments for a COMMAND, as GNU parallel takes them (see
    /// [`crate::args`] and [`crate::template`]).
    Args(Box<ArgsInput>),
    /// Blocks of input for a COMMAND (see [`crate::pipe`]).
    Pipe(Box<PipeInput>),
}

/// `--pipe`: standard input (or a FILE) cut into blocks, each the
/// standard input of a task running COMMAND.
#[derive(Debug, Clone)]
pub struct PipeInput {
    pub pipe: crate::pipe::PipeConfig,
    pub template: Arc<Template>,
    /// `--cat`: each block in a temporary file, `{}` its name, instead of
    /// on standard input.
    pub cat: bool,
    /// Where the blocks come from (`--pipepart -a FILE`); none: standard
    /// input.
    pub file: Option<PathBuf>,
}

/// A COMMAND and where its arguments come from.
#[derive(Debug, Clone)]
pub struct ArgsInput {
    pub args: ArgsConfig,
    pub template: Arc<Template>,
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

/// When to give up (`--halt`), as GNU parallel's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Halt {
    pub mode: HaltMode,
    /// What is counted.
    pub on: HaltOn,
    pub limit: HaltLimit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HaltMode {
    /// Stop the running tasks too.
    Now,
    /// Let the running tasks finish.
    Soon,
}

/// What `--halt` counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HaltOn {
    Fail,
    Success,
    Done,
}

/// How many of them halt the run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum HaltLimit {
    Count(u64),
    /// A share of all the tasks (they are read before the first starts).
    Percent(f64),
}

impl Halt {
    /// Whether `count` tasks of the kind `--halt` counts, of `total`,
    /// reach its limit.
    fn reached(&self, count: u64, total: Option<u64>) -> bool {
        match self.limit {
            HaltLimit::Count(n) => count >= n,
            HaltLimit::Percent(p) => {
                total.is_some_and(|t| t > 0 && count as f64 * 100.0 >= p * t as f64)
            }
        }
    }
}

impl FromStr for Halt {
    type Err = String;

    /// `now`, `soon` (at the first failure), `now,fail=N`, `soon,success=N%`,
    /// `now,done=N`..., and parallel's older numbers: 1 is `soon,fail=1`,
    /// 2 `now,fail=1`, -1 `soon,success=1`, -2 `now,success=1`.
    fn from_str(s: &str) -> Result<Halt, String> {
        let expected = || {
            format!(
                "`{s}`: expected now or soon, then ,fail=N, ,success=N or ,done=N (N a count, or a share like 20%)"
            )
        };
        let legacy = |mode, on| Halt {
            mode,
            on,
            limit: HaltLimit::Count(1),
        };
        match s {
            "1" => return Ok(legacy(HaltMode::Soon, HaltOn::Fail)),
            "2" => return Ok(legacy(HaltMode::Now, HaltOn::Fail)),
            "-1" => return Ok(legacy(HaltMode::Soon, HaltOn::Success)),
            "-2" => return Ok(legacy(HaltMode::Now, HaltOn::Success)),
            _ => {}
        }
        let (mode, rest) = s.split_once(',').unwrap_or((s, "fail=1"));
        let mode = match mode {
            "now" => HaltMode::Now,
            "soon" => HaltMode::Soon,
            _ => return Err(expected()),
        };
        let (on, limit) = rest.split_once('=').ok_or_else(expected)?;
        let on = match on {
            "fail" => HaltOn::Fail,
            "success" => HaltOn::Success,
            "done" => HaltOn::Done,
            _ => return Err(expected()),
        };
        let limit =
            match limit.strip_suffix('%') {
                Some(p) => HaltLimit::Percent(
                    p.parse::<f64>()
                        .ok()
                        .filter(|p| *p > 0.0 && *p <= 100.0)
                        .ok_or_else(|| {
                            format!("`{s}`: the share must be above 0% and at most 100%")
                        })?,
                ),
                None => HaltLimit::Count(limit.parse::<u64>().ok().filter(|n| *n > 0).ok_or_else(
                    || format!("`{s}`: the count must be a whole number, at least 1"),
                )?),
            };
        Ok(Halt { mode, on, limit })
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
    /// The exit status `--halt` decides, as GNU parallel's: the failed
    /// task's own status after `fail=1`, 0 after `success=N`, the share
    /// of failed tasks in percent with `fail=N%`.
    pub halt_status: Option<u8>,
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
        if let Some(status) = self.halt_status {
            return status;
        }
        let failed = self.failed.saturating_add(self.skipped_failed);
        u8::try_from(failed.min(MAX_FAILURES_STATUS)).unwrap_or(101)
    }
}

/// What the reader thread hands the runner.
pub(crate) enum Item {
    Task(Box<Task>),
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

/// Where a batch's tasks come from, open.
pub(crate) enum Tasks {
    /// JSON Lines.
    Json {
        reader: Box<dyn BufRead + Send>,
        parser: Parser,
    },
    /// A COMMAND's arguments.
    Args {
        reader: ArgReader,
        template: Arc<Template>,
    },
    /// Blocks of input.
    Pipe {
        blocks: crate::pipe::Blocks,
        template: Arc<Template>,
        /// `--cat`: the directory of the blocks' files.
        cat: Option<Arc<tempfile::TempDir>>,
    },
}

/// A batch ready to run: its job log and its input are open, and its PHP
/// workers, if it has any, have booted.
pub struct Prepared {
    config: RunConfig,
    clock: Instant,
    /// What the job log lists, for `--resume`.
    done: HashMap<u64, Logged>,
    log: Option<JobLog>,
    tasks: Tasks,
    pool: Option<Pool>,
    signals: Signals,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("config", &self.config)
            .field("log", &self.log)
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
    let Opened { done, log, tasks } = open(&config, &input, config.php.is_some())?;
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
        tasks,
        pool,
        signals,
    })
}

/// What a batch reads and writes, open: the job log and what it lists
/// (for `--resume`), and the input.
pub(crate) struct Opened {
    pub(crate) done: HashMap<u64, Logged>,
    pub(crate) log: Option<JobLog>,
    pub(crate) tasks: Tasks,
}

/// Reads the job log (`--resume`) or checks that it is unused, opens it
/// and the input. `mixed`: JSON lines may be PHP jobs too.
pub(crate) fn open(config: &RunConfig, input: &Input, mixed: bool) -> Result<Opened, String> {
    let done = match (&config.joblog, config.resume) {
        (_, Resume::No) => HashMap::new(),
        (Some(path), _) => joblog::read(path)?,
        (None, _) => {
            return Err("--resume needs --joblog FILE: the log of the run to resume".to_owned())
        }
    };
    let tasks = match &config.format {
        InputFormat::Args(args) => {
            if args.args.sources.is_empty() && std::io::stdin().is_terminal() {
                say!("hearth run: reading arguments from standard input (Ctrl-D to end)");
            }
            Tasks::Args {
                reader: ArgReader::open(&args.args)?,
                template: args.template.clone(),
            }
        }
        InputFormat::Pipe(pipe) => {
            let reader: Box<dyn std::io::Read + Send> = match &pipe.file {
                Some(path) => Box::new(
                    std::fs::File::open(path)
                        .map_err(|e| format!("cannot read {}: {e}", path.display()))?,
                ),
                None => {
                    if std::io::stdin().is_terminal() {
                        say!("hearth run: reading standard input (Ctrl-D to end)");
                    }
                    Box::new(std::io::stdin())
                }
            };
            let cat = if pipe.cat {
                Some(Arc::new(
                    tempfile::Builder::new()
                        .prefix("hearth-run-")
                        .tempdir()
                        .map_err(|e| format!("--cat: cannot create a temporary directory: {e}"))?,
                ))
            } else {
                None
            };
            Tasks::Pipe {
                blocks: crate::pipe::Blocks::new(reader, pipe.pipe.clone()),
                template: pipe.template.clone(),
                cat,
            }
        }
        InputFormat::Json => {
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
            Tasks::Json {
                reader,
                parser: if mixed { Parser::Mixed } else { Parser::Shell },
            }
        }
    };
    let log = match &config.joblog {
        Some(path) if !config.dry_run => {
            if config.resume == Resume::No && !config.joblog_append {
                joblog::check_unused(path)?;
            }
            Some(
                JobLog::open(path)
                    .map_err(|e| format!("cannot write the job log {}: {e}", path.display()))?,
            )
        }
        _ => None,
    };
    Ok(Opened { done, log, tasks })
}

/// Starts the reader thread of `tasks`.
pub(crate) fn read_tasks(
    tasks: Tasks,
    done: HashMap<u64, Logged>,
    resume: Resume,
    tx: mpsc::Sender<Item>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("hearth-input".into())
        .spawn(move || match tasks {
            Tasks::Json { reader, parser } => read_input(reader, &parser, &done, resume, &tx),
            Tasks::Args { reader, template } => read_args(reader, &template, &done, resume, &tx),
            Tasks::Pipe {
                blocks,
                template,
                cat,
            } => read_blocks(blocks, &template, cat.as_deref(), &done, resume, &tx),
        })
}

/// Job slots (`{%}`): the lowest free one for each task that starts.
#[derive(Debug, Default)]
struct Slots {
    free: std::collections::BTreeSet<u64>,
    next: u64,
}

impl Slots {
    fn take(&mut self) -> u64 {
        match self.free.pop_first() {
            Some(slot) => slot,
            None => {
                self.next += 1;
                self.next
            }
        }
    }

    fn give(&mut self, slot: u64) {
        self.free.insert(slot);
    }
}

impl Prepared {
    /// Runs every task; see the module documentation.
    pub async fn run(self) -> Result<Summary, String> {
        let Prepared {
            config,
            clock,
            done,
            mut log,
            tasks,
            pool,
            signals:
                Signals {
                    int: mut sigint,
                    term: mut sigterm,
                    hup: mut sighup,
                },
        } = self;
        let (template, total) = match &tasks {
            Tasks::Args { reader, template } => (Some(template.clone()), reader.total()),
            Tasks::Pipe { template, .. } => (Some(template.clone()), None),
            Tasks::Json { .. } => (None, None),
        };
        // Blocks are large: one waits, the others are read as tasks start.
        let ahead = match &tasks {
            Tasks::Pipe { .. } => 1,
            _ => QUEUE,
        };
        // The --cat files live as long as the run.
        let _cat_dir = match &tasks {
            Tasks::Pipe { cat, .. } => cat.clone(),
            _ => None,
        };
        let (item_tx, mut items) = mpsc::channel(ahead);
        if let Err(e) = read_tasks(tasks, done, config.resume, item_tx) {
            if let Some(pool) = pool {
                pool.shutdown().await;
            }
            return Err(format!("cannot start the input reader: {e}"));
        }
        let (writer, writer_thread) = Writer::start();
        let mut results = match &config.output.results {
            Some(results) => Some(ResultsWriter::open(results, config.output.names.clone())?),
            None => None,
        };

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
        let mut total = total;
        let mut succeeded = 0u64;
        let mut slots = Slots::default();
        let mut next_start: Option<tokio::time::Instant> = None;
        let mut waiting_for_resources = false;
        let mut report =
            ProgressLines::new(config.progress_always && !std::io::stderr().is_terminal());
        let jobs = config.jobs.max(1);
        let attempts_allowed = config.retries.max(1);
        let line_sink = emitter.writer.sender();

        let start = |mut task: Task,
                     order: u64,
                     attempts: u32,
                     running: &mut Running,
                     slots: &mut Slots,
                     total: Option<u64>| {
            task.slot = slots.take();
            if let (Some(template), Some(values)) = (&template, &task.args) {
                if template.uses_slot() {
                    let job = JobArgs {
                        values,
                        seq: task.seq,
                        slot: task.slot,
                        total,
                    };
                    let (work, line) = template.render(&job);
                    task.work = work;
                    task.shown = Some(line);
                }
            }
            if !config.output.json {
                task.stream = match config.output.mode {
                    OutputMode::Group => Stream::Capture,
                    OutputMode::Ungroup => Stream::Inherit,
                    OutputMode::Lines => match &line_sink {
                        Some(tx) => Stream::Lines(LineSink {
                            tx: tx.clone(),
                            prefix: tag_of(&config.output.tag, &task, total),
                        }),
                        None => Stream::Capture,
                    },
                };
            }
            if config.output.trace {
                say!("{}", task.command_line());
            }
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
            let now = tokio::time::Instant::now();
            let mut may_start = next_start.is_none_or(|at| at <= now);
            let would_start = starting && running.len() < jobs && (input_open || !retry.is_empty());
            if may_start && would_start && (config.memfree.is_some() || config.load.is_some()) {
                if let Some(why) = resources_short(config.memfree, config.load) {
                    if !waiting_for_resources {
                        progress.suspend(|| say!("hearth run: waiting to start more tasks: {why}"));
                        waiting_for_resources = true;
                    }
                    next_start = Some(now + RESOURCES_EVERY);
                    may_start = false;
                } else {
                    waiting_for_resources = false;
                }
            }
            while starting && may_start && running.len() < jobs {
                let Some((task, order, attempts)) = retry.pop_front() else {
                    break;
                };
                start(task, order, attempts, &mut running, &mut slots, total);
                next_start = config.delay.map(|d| now + d);
                if config.delay.is_some() {
                    break;
                }
            }
            if running.is_empty() && (!starting || (!input_open && retry.is_empty())) {
                break;
            }
            let may_start = next_start.is_none_or(|at| at <= tokio::time::Instant::now());
            let want_input =
                input_open && starting && may_start && running.len() < jobs && retry.is_empty();
            let delayed =
                starting && !may_start && running.len() < jobs && (input_open || !retry.is_empty());
            tokio::select! {
                biased;
                Some(finished) = running.next(), if !running.is_empty() => {
                    let Finished { task, order, attempts, outcome } = finished;
                    slots.give(task.slot);
                    if outcome.interrupted {
                        summary.interrupted += 1;
                        continue;
                    }
                    if !outcome.succeeded() && attempts < attempts_allowed && starting {
                        tracing::debug!(seq = task.seq, attempts, "task failed; trying again");
                        retry.push_back((task, order, attempts + 1));
                        continue;
                    }
                    if let Some(log) = &mut log {
                        let (exit, signal) = (outcome.logged_exit(), outcome.signal.unwrap_or(0));
                        if let Err(e) = log.record(task.seq, outcome.started, outcome.duration.as_secs_f64(), outcome.stdout.total, exit, signal, &task.command_line()) {
                            progress.suspend(|| say!("hearth run: cannot write the job log {}: {e}", log.path().display()));
                        }
                    }
                    summary.finished += 1;
                    let failed = !outcome.succeeded();
                    let own = own_status(&outcome);
                    if let Some(results) = &mut results {
                        if let Err(e) = results.record(&task, &outcome, attempts, config.max_output) {
                            progress.suspend(|| say!("hearth run: cannot write --results: {e}"));
                        }
                    }
                    if config.output.json {
                        emitter.result(order, &task, outcome, attempts, config.max_output).await;
                    } else if matches!(config.output.results, Some(Results::Dir(_))) {
                        // As parallel: the output is in the directory only.
                        emitter.nothing(order).await;
                    } else {
                        let prefix = tag_of(&config.output.tag, &task, total);
                        emitter.plain(order, &task, outcome, prefix, config.max_output, config.output.verbose).await;
                    }
                    progress.inc(1);
                    if failed {
                        summary.failed += 1;
                        progress.set_message(format!("{} failed", summary.failed));
                    } else {
                        succeeded += 1;
                    }
                    if let Some(halt) = config.halt {
                        let count = match halt.on {
                            HaltOn::Fail => summary.failed,
                            HaltOn::Success => succeeded,
                            HaltOn::Done => summary.finished,
                        };
                        let counted = match halt.on {
                            HaltOn::Fail => failed,
                            HaltOn::Success => !failed,
                            HaltOn::Done => true,
                        };
                        if counted && !summary.halted && halt.reached(count, total) {
                            summary.halted = true;
                            starting = false;
                            summary.halt_status = match (halt.on, halt.limit) {
                                (HaltOn::Fail, HaltLimit::Count(1)) => Some(own),
                                (HaltOn::Success, _) => Some(0),
                                _ => None,
                            };
                            let running_now = running.len();
                            let what = match halt.on {
                                HaltOn::Fail => "failed",
                                HaltOn::Success => "succeeded",
                                HaltOn::Done => "finished",
                            };
                            progress.suspend(|| say!(
                                "hearth run: halting after {count} {what} task(s){}",
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
                    if emitter.writer.closed {
                        starting = false;
                    }
                }
                item = items.recv(), if want_input => match item {
                    Some(Item::Task(task)) if config.dry_run => {
                        let mut line = task.command_line();
                        line.push('\n');
                        emitter.line(next_order, line).await;
                        next_order += 1;
                        summary.finished += 1;
                        if emitter.writer.closed {
                            starting = false;
                        }
                    }
                    Some(Item::Task(task)) => {
                        start(*task, next_order, 1, &mut running, &mut slots, total);
                        next_order += 1;
                        next_start = config.delay.map(|d| tokio::time::Instant::now() + d);
                    }
                    Some(Item::Skip { seq, id, logged }) => {
                        summary.skipped += 1;
                        if !logged.succeeded() {
                            summary.skipped_failed += 1;
                        }
                        if config.output.json {
                            emitter.skipped(next_order, seq, &id, logged).await;
                        } else {
                            emitter.nothing(next_order).await;
                        }
                        next_order += 1;
                        progress.inc(1);
                    }
                    Some(Item::Error(message)) => {
                        progress.suspend(|| say!("hearth run: {message}"));
                        summary.input_error = Some(message);
                        starting = false;
                        input_open = false;
                    }
                    Some(Item::End(count)) => {
                        progress.set_length(count);
                        total = Some(count);
                        input_open = false;
                    }
                    None => input_open = false,
                },
                () = tokio::time::sleep_until(next_start.unwrap_or_else(tokio::time::Instant::now)), if delayed => {}
                () = report.tick(), if report.on() => report.say(summary.finished, total, summary.failed),
                _ = sigint.recv() => on_signal(libc_sig::INT, &mut summary, &mut starting, &abort_tx, running.len(), &progress),
                _ = sigterm.recv() => on_signal(libc_sig::TERM, &mut summary, &mut starting, &abort_tx, running.len(), &progress),
                // A closed terminal: like SIGTERM, rather than dying with tasks
                // left running and their results lost.
                _ = sighup.recv() => on_signal(libc_sig::HUP, &mut summary, &mut starting, &abort_tx, running.len(), &progress),
            }
        }
        if let Some(halt) = config.halt {
            if halt.on == HaltOn::Fail && matches!(halt.limit, HaltLimit::Percent(_)) {
                // As parallel: the share of the tasks that failed.
                if let Some(t) = total.filter(|t| *t > 0) {
                    summary.halt_status =
                        Some(u8::try_from(summary.failed * 100 / t).unwrap_or(100));
                }
            }
        }
        emitter.finish().await;
        if report.on() {
            report.say(summary.finished, total, summary.failed);
        }
        progress.finish_and_clear();
        drop(emitter);
        drop(retry);
        drop(line_sink);
        let _ = writer_thread.join();
        if let Some(results) = results {
            if let Err(e) = results.finish() {
                say!("hearth run: cannot write --results: {e}");
            }
        }
        executor.shutdown().await;
        summary.elapsed = clock.elapsed();
        Ok(summary)
    }
}

/// How often `--memfree` and `--load` look again when they hold tasks
/// back.
const RESOURCES_EVERY: Duration = Duration::from_millis(250);

/// Why no task may start now, by `--memfree` (`MemAvailable` of
/// /proc/meminfo) and `--load` (the 1-minute load average).
fn resources_short(memfree: Option<u64>, load: Option<f64>) -> Option<String> {
    if let Some(want) = memfree {
        let available = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                m.lines()
                    .find_map(|l| l.strip_prefix("MemAvailable:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            })
            .map(|kb| kb * 1024);
        if let Some(available) = available.filter(|a| *a < want) {
            return Some(format!(
                "{} MiB of memory available, --memfree asks for {} MiB",
                available >> 20,
                want >> 20
            ));
        }
    }
    if let Some(max) = load {
        let now = std::fs::read_to_string("/proc/loadavg").ok().and_then(|l| {
            l.split_whitespace()
                .next()
                .and_then(|v| v.parse::<f64>().ok())
        });
        if let Some(now) = now.filter(|n| *n >= max) {
            return Some(format!(
                "the load average is {now:.2}, --load asks for below {max:.2}"
            ));
        }
    }
    None
}

/// `--bar`, `--eta` and `--progress` when stderr is no terminal: a line a
/// second on stderr.
struct ProgressLines {
    on: bool,
    next: tokio::time::Instant,
    clock: Instant,
}

impl ProgressLines {
    fn new(on: bool) -> ProgressLines {
        ProgressLines {
            on,
            next: tokio::time::Instant::now() + Duration::from_secs(1),
            clock: Instant::now(),
        }
    }

    fn on(&self) -> bool {
        self.on
    }

    /// Resolves at the next second's line.
    async fn tick(&mut self) {
        tokio::time::sleep_until(self.next).await;
        self.next += Duration::from_secs(1);
    }

    fn say(&self, done: u64, total: Option<u64>, failed: u64) {
        let secs = self.clock.elapsed().as_secs_f64().max(1e-3);
        let rate = done as f64 / secs;
        match total {
            Some(t) if t > 0 => {
                let eta = if rate > 0.0 {
                    format!(", ETA {:.0}s", (t.saturating_sub(done)) as f64 / rate)
                } else {
                    String::new()
                };
                say!(
                    "hearth run: {done}/{t} done ({:.0}%), {failed} failed, {rate:.1}/s{eta}",
                    done as f64 * 100.0 / t as f64
                );
            }
            _ => say!("hearth run: {done} done, {failed} failed, {rate:.1}/s"),
        }
    }
}

/// A failed task's own exit status, for `--halt now,fail=1`: its exit
/// status, 128 + the signal that killed it, or 127 when it could not
/// start (as the shell says of a command it cannot find).
fn own_status(outcome: &Outcome) -> u8 {
    match (outcome.status, outcome.signal) {
        (Some(code), _) if code != 0 => u8::try_from(code & 0xff).unwrap_or(1),
        (_, Some(sig)) => u8::try_from(128 + sig).unwrap_or(255),
        (None, None) => 127,
        // Exit 0 but failed anyway: timed out.
        _ => 1,
    }
}

/// What goes before each line of `task`'s output (`--tag`, `--tagstring`).
fn tag_of(tag: &Option<Tag>, task: &Task, total: Option<u64>) -> Option<Arc<str>> {
    let tag = tag.as_ref()?;
    let values = task.args.as_deref().unwrap_or(&[]);
    let text = match tag {
        Tag::Args => values.join(" "),
        Tag::Template(template) => template.text(&JobArgs {
            values,
            seq: task.seq,
            slot: task.slot,
            total,
        }),
    };
    Some(Arc::from(format!("{text}\t")))
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

/// The reader thread of JSON Lines: turns input lines into tasks, stopping
/// at the first unusable one. Blank lines are skipped.
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
            Ok(task) => skip_or_run(task, done, resume),
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

/// The task, or its skip when `--resume` finds it in the job log.
fn skip_or_run(task: Task, done: &HashMap<u64, Logged>, resume: Resume) -> Item {
    match done.get(&task.seq) {
        Some(logged)
            if resume == Resume::Finished
                || (resume == Resume::Succeeded && logged.succeeded()) =>
        {
            Item::Skip {
                seq: task.seq,
                id: task.id,
                logged: *logged,
            }
        }
        _ => Item::Task(Box::new(task)),
    }
}

/// The reader thread of a COMMAND's arguments: makes each job's task.
pub(crate) fn read_args(
    mut reader: ArgReader,
    template: &Template,
    done: &HashMap<u64, Logged>,
    resume: Resume,
    tx: &mpsc::Sender<Item>,
) {
    let total = reader.total();
    let mut seq = 0u64;
    loop {
        let values = match reader.next_job() {
            Ok(Some(values)) => values,
            Ok(None) => break,
            Err(message) => {
                let _ = tx.blocking_send(Item::Error(message));
                return;
            }
        };
        seq += 1;
        let job = JobArgs {
            values: &values,
            seq,
            slot: 1,
            total,
        };
        let (work, line) = template.render(&job);
        let task = Task {
            shown: Some(line),
            ..Task::new(seq, default_id(seq), work)
        };
        let task = Task {
            args: Some(Arc::from(values)),
            ..task
        };
        if tx.blocking_send(skip_or_run(task, done, resume)).is_err() {
            return;
        }
    }
    let _ = tx.blocking_send(Item::End(seq));
}

/// Blocks this large go to the task through a temporary file.
const FILE_BLOCK: usize = 64 << 10;

/// A block in an unnamed temporary file, rewound.
fn write_block(block: &[u8]) -> std::io::Result<std::fs::File> {
    use std::io::{Seek as _, Write as _};
    let mut file = tempfile::tempfile()?;
    file.write_all(block)?;
    file.rewind()?;
    Ok(file)
}

/// The reader thread of `--pipe`: makes each block a task's standard
/// input (with `--cat`, a file whose name is `{}`).
pub(crate) fn read_blocks(
    mut blocks: crate::pipe::Blocks,
    template: &Template,
    cat: Option<&tempfile::TempDir>,
    done: &HashMap<u64, Logged>,
    resume: Resume,
    tx: &mpsc::Sender<Item>,
) {
    let mut seq = 0u64;
    loop {
        let block = match blocks.next_block() {
            Ok(Some(block)) => block,
            Ok(None) => break,
            Err(e) => {
                let _ = tx.blocking_send(Item::Error(format!(
                    "reading the input failed after block {seq}: {e}"
                )));
                return;
            }
        };
        seq += 1;
        let (values, stdin) = match cat {
            Some(dir) => {
                let path = dir.path().join(seq.to_string());
                if let Err(e) = std::fs::write(&path, &block) {
                    let _ = tx.blocking_send(Item::Error(format!(
                        "--cat: cannot write {}: {e}",
                        path.display()
                    )));
                    return;
                }
                (vec![path.to_string_lossy().into_owned()], None)
            }
            None => (Vec::new(), Some(block)),
        };
        // A large block waits in a temporary file, which the task reads
        // itself: memory holds one block, the one being cut.
        let (stdin, stdin_file) = match stdin {
            Some(block) if block.len() >= FILE_BLOCK => match write_block(&block) {
                Ok(file) => (None, Some(Arc::new(file))),
                Err(e) => {
                    let _ = tx.blocking_send(Item::Error(format!(
                        "--pipe: cannot keep a block in a temporary file: {e}"
                    )));
                    return;
                }
            },
            other => (other, None),
        };
        let job = JobArgs {
            values: &values,
            seq,
            slot: 1,
            total: None,
        };
        let (work, line) = template.render(&job);
        let task = Task {
            shown: Some(line),
            stdin,
            stdin_file,
            args: Some(Arc::from(values.clone())),
            ..Task::new(seq, default_id(seq), work)
        };
        if tx.blocking_send(skip_or_run(task, done, resume)).is_err() {
            return;
        }
    }
    let _ = tx.blocking_send(Item::End(seq));
}

/// Writes results in completion order, or in input order with
/// `--keep-order` (holding those that arrive early).
pub(crate) struct Emitter {
    pub(crate) keep_order: bool,
    pub(crate) next: u64,
    pub(crate) pending: BTreeMap<u64, Vec<Out>>,
    pub(crate) writer: Writer,
    pub(crate) line: String,
}

impl Emitter {
    async fn result(
        &mut self,
        order: u64,
        task: &Task,
        outcome: Outcome,
        attempts: u32,
        max_output: usize,
    ) {
        if outcome.stdout.spool.is_some()
            || outcome.stderr.as_ref().is_some_and(|c| c.spool.is_some())
        {
            // Large: the writer thread writes it from the spool files.
            let result = JsonResult {
                id: task.id.get().to_owned(),
                seq: task.seq,
                outcome,
                attempts,
                max_output,
            };
            self.emit(order, vec![Out::Json(Box::new(result))]).await;
            return;
        }
        self.line.clear();
        output::write_result(
            &mut self.line,
            task.id.get(),
            task.seq,
            &outcome,
            attempts,
            max_output,
        );
        let line = std::mem::take(&mut self.line).into_bytes();
        self.emit(order, vec![Out::Stdout(line)]).await;
    }

    /// A task's own output, as GNU parallel prints it: its stdout, then
    /// its stderr, each line after `prefix`; with what went wrong on
    /// stderr.
    async fn plain(
        &mut self,
        order: u64,
        task: &Task,
        outcome: Outcome,
        prefix: Option<Arc<str>>,
        max_output: usize,
        verbose: bool,
    ) {
        let mut out = Vec::with_capacity(4);
        if verbose {
            let mut line = task.command_line();
            line.push('\n');
            out.push(Out::Stdout(line.into_bytes()));
        }
        let notes = notes(task, &outcome, max_output);
        let Outcome { stdout, stderr, .. } = outcome;
        out.push(Out::Task {
            stderr: false,
            captured: stdout,
            prefix: prefix.clone(),
        });
        if let Some(stderr) = stderr {
            out.push(Out::Task {
                stderr: true,
                captured: stderr,
                prefix,
            });
        }
        if !notes.is_empty() {
            out.push(Out::Stderr(notes.into_bytes()));
        }
        self.emit(order, out).await;
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
        let line = std::mem::take(&mut self.line).into_bytes();
        self.emit(order, vec![Out::Stdout(line)]).await;
    }

    /// Nothing for input position `order` (a task skipped in plain
    /// output), so that `--keep-order` goes on past it.
    async fn nothing(&mut self, order: u64) {
        self.emit(order, Vec::new()).await;
    }

    /// Writes `line` (with its newline), the result of input position
    /// `order`.
    pub(crate) async fn line(&mut self, order: u64, line: String) {
        self.emit(order, vec![Out::Stdout(line.into_bytes())]).await;
    }

    async fn emit(&mut self, order: u64, out: Vec<Out>) {
        if !self.keep_order {
            for o in out {
                self.writer.send(o).await;
            }
            return;
        }
        self.pending.insert(order, out);
        while let Some(out) = self.pending.remove(&self.next) {
            for o in out {
                self.writer.send(o).await;
            }
            self.next += 1;
        }
    }

    /// Writes what is still held back (tasks before it were interrupted).
    pub(crate) async fn finish(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        for (_, out) in pending {
            for o in out {
                self.writer.send(o).await;
            }
        }
    }
}

/// What `hearth run` says on stderr of a task in plain output: why it did
/// not start, that it was stopped, that its output was cut.
fn notes(task: &Task, outcome: &Outcome, max_output: usize) -> String {
    let mut notes = String::new();
    let name = task.command_line();
    if let Some(output::ErrorValue::Message(m) | output::ErrorValue::Json(m)) = &outcome.error {
        notes.push_str(&format!("hearth run: {name}: {m}\n"));
    }
    if outcome.timed_out {
        notes.push_str(&format!(
            "hearth run: {name}: stopped after its time limit\n"
        ));
    }
    for (what, c) in [
        ("stdout", Some(&outcome.stdout)),
        ("stderr", outcome.stderr.as_ref()),
    ] {
        if let Some(c) = c.filter(|c| c.truncated() && max_output != usize::MAX) {
            notes.push_str(&format!(
                "hearth run: {name}: {what} cut to its first {} of {} bytes (--max-output)\n",
                c.kept(),
                c.total
            ));
        }
    }
    notes
}

/// A result line to write from its output's spool files.
#[derive(Debug)]
pub(crate) struct JsonResult {
    id: String,
    seq: u64,
    outcome: Outcome,
    attempts: u32,
    max_output: usize,
}

/// What the writer thread writes.
#[derive(Debug)]
pub(crate) enum Out {
    /// A result line, written piece by piece.
    Json(Box<JsonResult>),
    /// Bytes for stdout, as they are (a JSON line, a `--dry-run` line).
    Stdout(Vec<u8>),
    /// Bytes for stderr.
    Stderr(Vec<u8>),
    /// A task's output: each line after `prefix`.
    Task {
        stderr: bool,
        captured: Captured,
        prefix: Option<Arc<str>>,
    },
}

/// A task's output, line by line, as it comes (`--line-buffer`).
#[derive(Debug, Clone)]
pub struct LineSink {
    tx: mpsc::Sender<Out>,
    prefix: Option<Arc<str>>,
}

impl LineSink {
    /// Writes whole lines (or a last piece without its newline).
    pub(crate) async fn send(&self, stderr: bool, bytes: Vec<u8>) {
        let captured = Captured {
            total: bytes.len() as u64,
            bytes,
            spool: None,
            held: None,
        };
        let _ = self
            .tx
            .send(Out::Task {
                stderr,
                captured,
                prefix: self.prefix.clone(),
            })
            .await;
    }
}

/// The writer thread's inbox. Output is written by a thread of its own so
/// that a blocking write to a slow pipe never stalls the tasks' output
/// draining.
pub(crate) struct Writer {
    tx: Option<mpsc::Sender<Out>>,
    pub(crate) closed: bool,
}

impl Writer {
    pub(crate) fn start() -> (Writer, std::thread::JoinHandle<()>) {
        let (tx, mut rx) = mpsc::channel::<Out>(QUEUE);
        let thread = std::thread::spawn(move || {
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::with_capacity(65536, stdout.lock());
            let mut err = std::io::BufWriter::with_capacity(8192, std::io::stderr());
            while let Some(first) = rx.blocking_recv() {
                let mut next = Some(first);
                let mut broken = false;
                // Flush when nothing more is waiting, so output reaches a
                // reader as soon as it exists but in few writes.
                while let Some(o) = next.take().or_else(|| rx.try_recv().ok()) {
                    if write_out(&mut out, &mut err, o).is_err() {
                        broken = true;
                        break;
                    }
                }
                let _ = err.flush();
                if broken || out.flush().is_err() {
                    break;
                }
            }
            let _ = out.flush();
            let _ = err.flush();
        });
        (
            Writer {
                tx: Some(tx),
                closed: false,
            },
            thread,
        )
    }

    /// A sender for line sinks (the writer thread ends when every sender
    /// is gone).
    fn sender(&self) -> Option<mpsc::Sender<Out>> {
        self.tx.clone()
    }

    pub(crate) async fn send(&mut self, o: Out) {
        let Some(tx) = &self.tx else { return };
        if tx.send(o).await.is_err() {
            if !self.closed {
                say!("hearth run: standard output is closed; starting no more tasks");
            }
            self.closed = true;
            self.tx = None;
        }
    }
}

/// Writes one piece of output. An `Err` means stdout is gone; stderr's
/// errors are ignored.
fn write_out(
    out: &mut impl std::io::Write,
    err: &mut impl std::io::Write,
    o: Out,
) -> std::io::Result<()> {
    match o {
        Out::Json(r) => {
            output::write_result_to(out, &r.id, r.seq, &r.outcome, r.attempts, r.max_output)
        }
        Out::Stdout(bytes) => out.write_all(&bytes),
        Out::Stderr(bytes) => {
            let _ = err.write_all(&bytes);
            Ok(())
        }
        Out::Task {
            stderr,
            captured,
            prefix,
        } => {
            if stderr {
                let _ = out.flush();
                let _ = write_captured(err, &captured, prefix.as_deref());
                Ok(())
            } else {
                write_captured(out, &captured, prefix.as_deref())
            }
        }
    }
}

/// Writes a task's output, from memory then from its spool file, each
/// line after `prefix`.
fn write_captured(
    w: &mut impl std::io::Write,
    c: &Captured,
    prefix: Option<&str>,
) -> std::io::Result<()> {
    let mut line_start = true;
    let mut put = |w: &mut dyn std::io::Write, data: &[u8]| -> std::io::Result<()> {
        match prefix {
            None => w.write_all(data),
            Some(prefix) => {
                for piece in data.split_inclusive(|&b| b == b'\n') {
                    if line_start {
                        w.write_all(prefix.as_bytes())?;
                    }
                    w.write_all(piece)?;
                    line_start = piece.ends_with(b"\n");
                }
                Ok(())
            }
        }
    };
    put(w, &c.bytes)?;
    if let Some(spool) = &c.spool {
        use std::os::unix::fs::FileExt as _;
        let mut buf = vec![0; 1 << 16];
        let mut at = 0u64;
        while at < spool.len {
            let want = usize::try_from((spool.len - at).min(buf.len() as u64)).unwrap_or(buf.len());
            let n = spool.file.read_at(&mut buf[..want], at)?;
            if n == 0 {
                break;
            }
            put(w, &buf[..n])?;
            at += n as u64;
        }
    }
    Ok(())
}

impl Drop for Emitter {
    fn drop(&mut self) {
        self.writer.tx = None;
    }
}

/// `--results`: the JSON result lines in a file, or GNU parallel's
/// directory of each task's output.
enum ResultsWriter {
    Jsonl(std::io::BufWriter<std::fs::File>),
    Dir(PathBuf, Vec<String>),
}

impl ResultsWriter {
    fn open(results: &Results, names: Vec<String>) -> Result<ResultsWriter, String> {
        match results {
            Results::Jsonl(path) => {
                let file = std::fs::File::create(path)
                    .map_err(|e| format!("cannot write --results {}: {e}", path.display()))?;
                Ok(ResultsWriter::Jsonl(std::io::BufWriter::new(file)))
            }
            Results::Dir(dir) => {
                std::fs::create_dir_all(dir)
                    .map_err(|e| format!("cannot create --results {}: {e}", dir.display()))?;
                Ok(ResultsWriter::Dir(dir.clone(), names))
            }
        }
    }

    fn record(
        &mut self,
        task: &Task,
        outcome: &Outcome,
        attempts: u32,
        max_output: usize,
    ) -> std::io::Result<()> {
        match self {
            ResultsWriter::Jsonl(file) => output::write_result_to(
                file,
                task.id.get(),
                task.seq,
                outcome,
                attempts,
                max_output,
            ),
            ResultsWriter::Dir(root, names) => {
                let mut dir = root.clone();
                let values = task.args.as_deref().unwrap_or(&[]);
                for (i, v) in values.iter().enumerate() {
                    match names.get(i) {
                        Some(name) => dir.push(results_name(name)),
                        None => dir.push((i + 1).to_string()),
                    }
                    dir.push(results_name(v));
                }
                std::fs::create_dir_all(&dir)?;
                std::fs::write(dir.join("seq"), task.seq.to_string())?;
                let mut stdout = std::fs::File::create(dir.join("stdout"))?;
                write_captured(&mut stdout, &outcome.stdout, None)?;
                let mut stderr = std::fs::File::create(dir.join("stderr"))?;
                if let Some(c) = &outcome.stderr {
                    write_captured(&mut stderr, c, None)?;
                }
                Ok(())
            }
        }
    }

    fn finish(self) -> std::io::Result<()> {
        use std::io::Write as _;
        match self {
            ResultsWriter::Jsonl(mut file) => file.flush(),
            ResultsWriter::Dir(..) => Ok(()),
        }
    }
}

/// An argument as a directory name of `--results`, as GNU parallel makes
/// it: `\` becomes `\\` and `/` becomes `\_`; an empty one is `\0`... and
/// names longer than a file name may be are cut.
fn results_name(value: &str) -> String {
    if value.is_empty() {
        return String::new();
    }
    let mut name = value.replace('\\', "\\\\").replace('/', "\\_");
    if name.len() > 255 {
        let mut cut = 255;
        while !name.is_char_boundary(cut) {
            cut -= 1;
        }
        name.truncate(cut);
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halt_forms() {
        let halt = |mode, on, limit| Halt { mode, on, limit };
        for (text, expected) in [
            (
                "now",
                halt(HaltMode::Now, HaltOn::Fail, HaltLimit::Count(1)),
            ),
            (
                "soon,fail=3",
                halt(HaltMode::Soon, HaltOn::Fail, HaltLimit::Count(3)),
            ),
            (
                "now,success=1",
                halt(HaltMode::Now, HaltOn::Success, HaltLimit::Count(1)),
            ),
            (
                "soon,done=20%",
                halt(HaltMode::Soon, HaltOn::Done, HaltLimit::Percent(20.0)),
            ),
            ("2", halt(HaltMode::Now, HaltOn::Fail, HaltLimit::Count(1))),
            (
                "-1",
                halt(HaltMode::Soon, HaltOn::Success, HaltLimit::Count(1)),
            ),
        ] {
            assert_eq!(text.parse::<Halt>().unwrap(), expected, "{text}");
        }
        for bad in [
            "later",
            "now,fail=0",
            "now,win=1",
            "now,fail=0%",
            "now,fail=101%",
            "now,fail",
        ] {
            assert!(bad.parse::<Halt>().is_err(), "{bad}");
        }
        let h = halt(HaltMode::Now, HaltOn::Fail, HaltLimit::Percent(50.0));
        assert!(!h.reached(2, Some(5)));
        assert!(h.reached(3, Some(5)));
        assert!(!h.reached(3, None), "a share needs the total");
    }

    #[test]
    fn slots_are_reused_lowest_first() {
        let mut slots = Slots::default();
        assert_eq!((slots.take(), slots.take(), slots.take()), (1, 2, 3));
        slots.give(2);
        slots.give(1);
        assert_eq!((slots.take(), slots.take(), slots.take()), (1, 2, 4));
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
        s.halt_status = Some(7);
        assert_eq!(s.exit_code(), 7, "--halt decides");
        s.signal = Some(2);
        assert_eq!(s.exit_code(), 130);
        s.input_error = Some("line 1".into());
        assert_eq!(s.exit_code(), 255);
    }
}
