//! `hearth work`'s options: its flags and the `[work]` section of
//! `hearth.toml`, with their defaults and checks.
//!
//! The options a job shares with `hearth run` (`--jobs`, `--timeout`,
//! `--kill-after`, `--max-output`, the PHP job workers) have the same
//! flags, keys, help and checks (a test keeps the help equal); `--max-output`
//! has a smaller default, since a result must fit in the queue.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hearth_pool::PoolConfig;
use hearth_queue::{QueueConfig, QueueUrl};
use serde::{Deserialize, Serialize};

use super::run::{check_job_workers, job_workers};
use super::values::{self, Address, Listen, Seconds, Size, SocketMode};
use super::{Fault, Origins, RunOptions, Section};

/// Everything `hearth work` can be told. A field's doc comment is its
/// `--help`; its name is its key under `[work]`; [`Default`] holds its
/// default. Fields without a key (`#[serde(skip)]`) are flags only.
#[derive(Debug, Clone, clap::Args, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorkOptions {
    /// The queue to take jobs from: redis://HOST[:PORT][/DB]/NAME, or file:PATH
    /// (a queue file on this host; in the config file, relative to it)
    /// [default: none; --queue or --listen is needed]
    #[arg(long, short, value_name = "URL")]
    pub queue: Option<String>,

    /// Take synchronous calls (Hearth\Jobs::call from php-fpm, the CLI or a
    /// Hearth worker) on this unix socket: unix:PATH (with --php-bootstrap)
    /// [default: none]
    #[arg(long, value_name = "unix:PATH")]
    pub listen: Option<Listen>,

    /// Permission bits of the --listen socket, in octal. Whoever may connect
    /// may call any function the bootstrap can: give it to the app's users only
    #[arg(long, value_name = "MODE")]
    pub listen_mode: SocketMode,

    /// Callers connected at once on --listen; one more is told the listener is
    /// busy and closed
    #[arg(long, value_name = "N")]
    pub max_callers: usize,

    /// TOML file with these options under [work]
    #[arg(long, short, value_name = "FILE")]
    #[serde(skip)]
    pub config: Option<PathBuf>,

    /// Tasks to run at once [default: the number of CPUs]
    #[arg(short, long, value_name = "N")]
    pub jobs: Option<usize>,

    /// Stop a task after this long (SIGTERM to its process group, then
    /// SIGKILL): seconds, or a number with ms, s, m or h; 0: no limit
    /// [default: none]
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<Seconds>,

    /// Time between SIGTERM and SIGKILL when a task is stopped
    #[arg(long, value_name = "DURATION")]
    pub kill_after: Seconds,

    /// Keep at most this much of each task's stdout and of its stderr
    #[arg(long, value_name = "SIZE")]
    pub max_output: Size,

    /// On SIGTERM/SIGINT, how long running jobs have to finish before they are
    /// stopped (and run again later)
    #[arg(long, value_name = "DURATION")]
    pub grace_period: Seconds,

    /// How long a job this host took stays invisible to other consumers: renewed
    /// every third of it while the job runs; once it passes, the job of a host
    /// that died is delivered again. Every consumer of a queue should have the same
    #[arg(long, value_name = "DURATION")]
    pub visibility_timeout: Seconds,

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

    /// Replace a job worker after it ran N jobs (up to 10% more, so workers do
    /// not all restart together); 0: never (with --php-bootstrap)
    #[arg(long, value_name = "N")]
    pub max_jobs: u64,

    /// Replace a job worker, between jobs, once its resident memory passes SIZE;
    /// 0: never (with --php-bootstrap)
    #[arg(long, value_name = "SIZE")]
    pub max_memory: Size,

    /// Replace a job worker, between jobs, once it is this old (with
    /// --php-bootstrap) [default: never]
    #[arg(long, value_name = "DURATION")]
    pub ttl: Option<Seconds>,

    /// Answer hearth status, reload and stop (given the same --control-socket) on
    /// this unix socket, mode 0600 [default: none]
    #[arg(long, value_name = "PATH")]
    pub control_socket: Option<PathBuf>,

    /// Serve the dashboard, /metrics, /healthz and /readyz on this address; an
    /// address other networks reach needs an admin token [default: off]
    #[arg(long, value_name = "IP:PORT")]
    pub admin: Option<Address>,

    /// File holding the admin token: the dashboard's actions (reload, retry,
    /// delete or purge jobs) need it [default: actions off]
    #[arg(long, value_name = "PATH")]
    pub admin_token_file: Option<PathBuf>,

    /// The admin token itself (in the file only, never on a command line)
    #[arg(skip)]
    pub admin_token: Option<String>,
}

impl Default for WorkOptions {
    /// Every default of `hearth work`: `hearth run`'s where they share an
    /// option.
    fn default() -> WorkOptions {
        let run = RunOptions::default();
        WorkOptions {
            queue: None,
            listen: None,
            listen_mode: SocketMode(0o660),
            max_callers: 256,
            config: None,
            jobs: None,
            timeout: None,
            kill_after: run.kill_after,
            // A result, both outputs included, must fit in the queue's
            // 1 MiB: twice 256K, even as base64, does.
            max_output: Size(256 << 10),
            grace_period: Seconds::from_secs(30),
            visibility_timeout: Seconds(QueueConfig::default().visibility_timeout),
            php_bootstrap: None,
            php: run.php,
            ini: Vec::new(),
            boot_timeout: run.boot_timeout,
            max_jobs: 0,
            max_memory: Size(0),
            ttl: None,
            control_socket: None,
            admin: None,
            admin_token_file: None,
            admin_token: None,
        }
    }
}

/// The shortest visibility timeout: a hold is renewed every third of it.
const MIN_VISIBILITY: Duration = Duration::from_secs(1);

impl Section for WorkOptions {
    const NAME: &'static str = "work";

    fn of(file: super::file::FileConfig) -> WorkOptions {
        file.work
    }

    fn file_paths(&mut self) -> Vec<(&'static str, &mut Option<PathBuf>)> {
        vec![
            ("php_bootstrap", &mut self.php_bootstrap),
            ("control_socket", &mut self.control_socket),
            ("admin_token_file", &mut self.admin_token_file),
        ]
    }

    fn paths_from_file(&mut self, dir: &Path) {
        if let Some(Listen::Unix(path)) = &mut self.listen {
            if path.is_relative() {
                *path = dir.join(&*path);
            }
        }
        // file:PATH in the file: relative to it, as the other paths.
        if let Some(url) = &self.queue {
            if let Some(path) = url.strip_prefix("file:") {
                if !path.starts_with('/') && !path.is_empty() {
                    self.queue = Some(format!("file:{}", dir.join(path).display()));
                }
            }
        }
    }

    fn add_up(&mut self, file: WorkOptions, given: &Origins<'_>) {
        // php.ini settings: the file's, then the flags'.
        if given.on_command_line("ini") {
            self.ini.splice(0..0, file.ini);
        }
    }

    fn validate(&self, given: &Origins<'_>) -> Result<(), Fault> {
        match (&self.queue, &self.listen) {
            (None, None) => return Err(Fault::new(
                "queue",
                "is needed: the queue to take jobs from (redis://HOST:PORT/NAME or file:PATH), \
                     or {listen}, the socket to take calls on (unix:PATH), or both",
            )),
            (Some(url), _) => {
                QueueUrl::parse(url).map_err(|e| Fault::new("queue", e.to_string()))?;
            }
            (None, Some(_)) => {}
        }
        match &self.listen {
            Some(Listen::Tcp(_)) => {
                return Err(Fault::new(
                    "listen",
                    "takes unix:PATH only: a call runs any function the bootstrap can, \
                     so it is never offered on a network port",
                ))
            }
            Some(Listen::Unix(_)) if self.php_bootstrap.is_none() => {
                return Err(Fault::new(
                    "listen",
                    "needs {php_bootstrap}: calls run in warm PHP job workers",
                ))
            }
            Some(_) => {}
            None => {
                for field in ["listen_mode", "max_callers"] {
                    if given.on_command_line(field) {
                        return Err(Fault::new(field, "needs {listen}"));
                    }
                }
            }
        }
        if self.max_callers == 0 {
            return Err(Fault::new("max_callers", "must be at least 1"));
        }
        if self.jobs == Some(0) {
            return Err(Fault::new("jobs", "must be at least 1"));
        }
        if self.visibility_timeout.0 < MIN_VISIBILITY {
            return Err(Fault::new(
                "visibility_timeout",
                "must be at least 1s (a running job's hold is renewed every third of it)",
            ));
        }
        check_job_workers(
            self.php_bootstrap.is_some(),
            &self.ini,
            given,
            &["max_jobs", "max_memory", "ttl"],
        )
    }
}

impl WorkOptions {
    /// Jobs at once: `jobs`, or one per CPU.
    pub fn jobs(&self) -> usize {
        self.jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
    }

    /// The queue's URL (checked by `validate`), if it takes jobs from one.
    pub fn queue_url(&self) -> Option<QueueUrl> {
        let url = self.queue.as_deref()?;
        Some(QueueUrl::parse(url).unwrap_or_else(|_| QueueUrl::File(PathBuf::from(url))))
    }

    /// The call listener's socket path (checked by `validate`), if any.
    pub fn listen_path(&self) -> Option<PathBuf> {
        match &self.listen {
            Some(Listen::Unix(path)) => {
                Some(std::path::absolute(path).unwrap_or_else(|_| path.clone()))
            }
            _ => None,
        }
    }

    /// The call listener's configuration.
    pub fn call_config(&self) -> hearth_run::calls::CallConfig {
        hearth_run::calls::CallConfig {
            max_connections: self.max_callers,
            max_timeout: self.timeout.and_then(Seconds::nonzero),
            grace_period: self.grace_period.0,
            ..hearth_run::calls::CallConfig::default()
        }
    }

    /// The queue handle's settings.
    pub fn queue_config(&self) -> QueueConfig {
        QueueConfig {
            visibility_timeout: self.visibility_timeout.0,
            ..QueueConfig::default()
        }
    }

    /// How every job runs.
    pub fn exec_options(&self) -> hearth_run::exec::ExecOptions {
        hearth_run::exec::ExecOptions {
            timeout: self.timeout.and_then(Seconds::nonzero),
            kill_after: self.kill_after.0,
            max_output: self.max_output.as_usize(),
        }
    }

    /// The consumer loop's configuration.
    pub fn work_config(&self, queue: &QueueConfig) -> hearth_run::work::WorkConfig {
        hearth_run::work::WorkConfig {
            jobs: self.jobs(),
            max_output: self.max_output.as_usize(),
            max_result: queue.max_result,
            grace_period: self.grace_period.0,
            extend_every: queue.visibility_timeout / 3,
            reserve_wait: Duration::from_secs(1),
            counters: std::sync::Arc::default(),
        }
    }

    /// The job workers' pool, running `script` (the job worker script
    /// written for the bootstrap).
    pub fn job_pool_config(&self, script: &Path) -> PoolConfig {
        let mut pool = job_workers(
            &self.php,
            &self.ini,
            self.boot_timeout,
            self.kill_after,
            self.jobs(),
            script,
        );
        pool.max_requests = self.max_jobs;
        pool.max_memory = self.max_memory.0;
        pool.ttl = self.ttl.and_then(Seconds::nonzero);
        // Only as many jobs as workers are taken, so a job waits for a
        // worker only while one is replaced; one that waits longer than a
        // boot (the workers fail to boot) fails, and the queue retries it,
        // perhaps on another host.
        pool.queue_timeout = pool.boot_timeout + Duration::from_secs(30);
        pool
    }
}
