//! `hearth run`'s options: its flags and the `[run]` section of
//! `hearth.toml`, with their defaults and checks, and the task runner's
//! configuration built from them.
//!
//! `[run]` holds how tasks run (how many at once, their limits, retries,
//! the PHP job workers); what a batch is and what is done with its results
//! (the input, a COMMAND, `--lines`, the job log and resuming, `--halt`,
//! `--keep-order`, the progress bar) are decided per run, on the command
//! line only.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hearth_pool::PoolConfig;
use hearth_run::{Halt, InputFormat, Resume, RunConfig};
use serde::{Deserialize, Serialize};

use super::values::{self, Seconds, Size};
use super::{Fault, Origins, Section};

/// Everything `hearth run` can be told. A field's doc comment is its
/// `--help`; its name is its key under `[run]`; [`Default`] holds its
/// default. Fields without a key (`#[serde(skip)]`) are flags only.
#[derive(Debug, Clone, clap::Args, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RunOptions {
    /// Tasks, one JSON object per line ("-" or nothing: standard input)
    #[arg(value_name = "FILE")]
    #[serde(skip)]
    pub file: Option<PathBuf>,

    /// A command to run for each input line (implies --lines): "{}" in it is
    /// replaced by the line, else the line is appended as the last argument
    #[arg(last = true, value_name = "COMMAND")]
    #[serde(skip)]
    pub command: Vec<String>,

    /// TOML file with these options under [run]
    #[arg(long, short, value_name = "FILE")]
    #[serde(skip)]
    pub config: Option<PathBuf>,

    /// Tasks to run at once [default: the number of CPUs]
    #[arg(short, long, value_name = "N")]
    pub jobs: Option<usize>,

    /// Write results in input order, not completion order
    #[arg(short = 'k', long)]
    #[serde(skip)]
    pub keep_order: bool,

    /// Stop a task after this long (SIGTERM to its process group, then
    /// SIGKILL): seconds, or a number with ms, s, m or h; 0: no limit
    /// [default: none]
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<Seconds>,

    /// Time between SIGTERM and SIGKILL when a task is stopped
    #[arg(long, value_name = "DURATION")]
    pub kill_after: Seconds,

    /// Run a failed task up to N more times
    #[arg(long, value_name = "N")]
    pub retries: u32,

    /// Stop at the first failure: "now" stops running tasks too, "soon" lets them
    /// finish ("now,fail=N" / "soon,fail=N": after N failures)
    #[arg(long, value_name = "WHEN")]
    #[serde(skip)]
    pub halt: Option<Halt>,

    /// Write a line per finished task to FILE (GNU parallel's joblog format);
    /// without --resume, a FILE that already lists tasks is refused
    #[arg(long, value_name = "FILE")]
    #[serde(skip)]
    pub joblog: Option<PathBuf>,

    /// Skip the tasks the --joblog lists as finished
    #[arg(long, requires = "joblog")]
    #[serde(skip)]
    pub resume: bool,

    /// Skip the tasks the --joblog lists as succeeded; run failed ones again
    #[arg(long, requires = "joblog", conflicts_with = "resume")]
    #[serde(skip)]
    pub resume_failed: bool,

    /// Keep at most this much of each task's stdout and of its stderr
    #[arg(long, value_name = "SIZE")]
    pub max_output: Size,

    /// Never show the progress bar (shown on stderr only when it is a terminal)
    #[arg(long)]
    #[serde(skip)]
    pub no_progress: bool,

    /// Each input line is a task: a shell command, or an argument for COMMAND
    #[arg(long)]
    #[serde(skip)]
    pub lines: bool,

    /// Run the tasks on the hosts that consume this queue (`hearth work --queue
    /// URL`) instead of here: redis://HOST[:PORT][/DB]/NAME or file:PATH; results
    /// come back as from a local run
    #[arg(long, short = 'q', value_name = "URL")]
    #[serde(skip)]
    pub queue: Option<String>,

    /// Run PHP jobs in warm PHP workers that load FILE once
    #[arg(long, value_name = "FILE")]
    pub php_bootstrap: Option<PathBuf>,

    /// PHP binary for the job workers (with --php-bootstrap)
    #[arg(long, value_name = "PATH")]
    pub php: PathBuf,

    /// Extra php.ini setting for the job workers (repeatable; with --php-bootstrap)
    #[arg(short = 'd', long = "ini", value_name = "NAME=VALUE", value_parser = values::parse_ini)]
    #[serde(with = "values::ini_table")]
    pub ini: Vec<(String, String)>,

    /// Time a job worker has to load the bootstrap
    #[arg(long, value_name = "DURATION")]
    pub boot_timeout: Seconds,
}

impl Default for RunOptions {
    /// Every default of `hearth run`.
    fn default() -> RunOptions {
        RunOptions {
            file: None,
            command: Vec::new(),
            config: None,
            jobs: None,
            keep_order: false,
            timeout: None,
            kill_after: Seconds::from_secs(2),
            retries: 0,
            halt: None,
            joblog: None,
            resume: false,
            resume_failed: false,
            max_output: Size(16 << 20),
            no_progress: false,
            lines: false,
            queue: None,
            php_bootstrap: None,
            // The CLI: jobs need no header() or sessions.
            php: PathBuf::from("php"),
            ini: Vec::new(),
            boot_timeout: Seconds::from_secs(60),
        }
    }
}

impl Section for RunOptions {
    const NAME: &'static str = "run";

    fn of(file: super::file::FileConfig) -> RunOptions {
        file.run
    }

    fn file_paths(&mut self) -> Vec<(&'static str, &mut Option<PathBuf>)> {
        vec![("php_bootstrap", &mut self.php_bootstrap)]
    }

    fn add_up(&mut self, file: RunOptions, given: &Origins<'_>) {
        // php.ini settings: the file's, then the flags' (PHP keeps the
        // last value given for a name).
        if given.on_command_line("ini") {
            self.ini.splice(0..0, file.ini);
        }
    }

    fn validate(&self, given: &Origins<'_>) -> Result<(), Fault> {
        if self.jobs == Some(0) {
            return Err(Fault::new("jobs", "must be at least 1"));
        }
        if let Some(url) = &self.queue {
            hearth_queue::QueueUrl::parse(url).map_err(|e| Fault::new("queue", e.to_string()))?;
            // The consumers run the tasks: how is theirs to say.
            for (field, why) in [
                ("jobs", "the consumers run the tasks, each as many at once as its own -j"),
                ("kill_after", "the consumers stop tasks, with their own --kill-after"),
                ("max_output", "the consumers keep output, up to their own --max-output"),
                ("php_bootstrap", "PHP jobs run in the consumers' workers: start `hearth work` with --php-bootstrap"),
                ("php", "PHP jobs run in the consumers' workers"),
                ("ini", "PHP jobs run in the consumers' workers"),
                ("boot_timeout", "PHP jobs run in the consumers' workers"),
                ("halt", "jobs already queued cannot be stopped from here"),
            ] {
                if given.on_command_line(field) {
                    return Err(Fault::new(field, format!("does not combine with {{queue}}: {why}")));
                }
            }
            return Ok(());
        }
        if self.php_bootstrap.is_some() && (self.lines || !self.command.is_empty()) {
            return Err(Fault::new(
                "php_bootstrap",
                "reads JSON Lines of jobs; it does not combine with {lines} or a COMMAND",
            ));
        }
        check_job_workers(self.php_bootstrap.is_some(), &self.ini, given, &[])
    }
}

impl RunOptions {
    /// Tasks at once: `jobs`, or one per CPU.
    pub fn jobs(&self) -> usize {
        self.jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
    }

    /// The task runner's configuration, with `php` the job workers' pool
    /// (none for shell tasks).
    pub fn run_config(&self, php: Option<PoolConfig>) -> RunConfig {
        RunConfig {
            jobs: self.jobs(),
            keep_order: self.keep_order,
            timeout: self.timeout.and_then(Seconds::nonzero),
            kill_after: self.kill_after.0,
            retries: self.retries,
            halt: self.halt,
            joblog: self.joblog.clone(),
            resume: match (self.resume, self.resume_failed) {
                (true, _) => Resume::Finished,
                (_, true) => Resume::Succeeded,
                _ => Resume::No,
            },
            max_output: self.max_output.as_usize(),
            progress: !self.no_progress,
            php,
            format: if self.lines || !self.command.is_empty() {
                InputFormat::Lines {
                    template: self.command.clone(),
                }
            } else {
                InputFormat::Json
            },
        }
    }

    /// The queue of `--queue`, parsed.
    pub fn queue_url(&self) -> Option<hearth_queue::QueueUrl> {
        // Checked by `validate`.
        self.queue
            .as_deref()
            .and_then(|url| hearth_queue::QueueUrl::parse(url).ok())
    }

    /// The job workers' pool, running `script` (the job worker script
    /// `hearth run` writes for the bootstrap).
    pub fn job_pool_config(&self, script: &Path) -> PoolConfig {
        let mut pool = job_workers(
            &self.php,
            &self.ini,
            self.boot_timeout,
            self.kill_after,
            self.jobs(),
            script,
        );
        // A job waits as long as it takes for a worker: -j bounds the jobs
        // in flight to the workers there are.
        pool.queue_timeout = Duration::from_secs(365 * 24 * 3600);
        pool
    }
}

/// The PHP job workers' pool of `hearth run` and `hearth work`: `workers`
/// workers of `php` with the `ini` settings, running `script` (the job
/// worker script written for the bootstrap).
pub(super) fn job_workers(
    php: &Path,
    ini: &[(String, String)],
    boot_timeout: Seconds,
    kill_after: Seconds,
    workers: usize,
    script: &Path,
) -> PoolConfig {
    let mut pool = PoolConfig::new(php, script, workers);
    pool.ini = ini.to_vec();
    pool.boot_timeout = boot_timeout.0.max(Duration::from_millis(100));
    // A worker stopped for a job's time limit gets SIGKILL this long
    // after SIGTERM, as a shell task does.
    pool.kill_timeout = kill_after.0;
    pool.pipelining = false;
    pool.boot_hint =
        "the bootstrap file has not returned: does it wait for a service or for input?".to_owned();
    pool
}

/// The checks of the PHP job worker options `hearth run` and `hearth work`
/// share: `php`, `ini` and each of `more` (options of the workers) need
/// `php_bootstrap` when given on the command line, and `ini`'s names must
/// be php.ini names.
pub(super) fn check_job_workers(
    bootstrap: bool,
    ini: &[(String, String)],
    given: &Origins<'_>,
    more: &[&'static str],
) -> Result<(), Fault> {
    // A project's file may name a PHP binary for the runs that have a
    // bootstrap; on the command line, one without is a mistake.
    if !bootstrap {
        for field in ["php", "ini"].iter().chain(more) {
            if given.on_command_line(field) {
                return Err(Fault::new(field, "needs {php_bootstrap}"));
            }
        }
    }
    for (name, _) in ini {
        if let Some(why) = values::bad_ini_name(name) {
            return Err(Fault::new("ini", why));
        }
    }
    Ok(())
}
