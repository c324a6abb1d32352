//! The one way a task runs, for `hearth run` and `hearth work` alike: a
//! shell task as a process of its own ([`exec`]), a PHP job as a call in a
//! warm worker of a pool booted once ([`jobs`]).

use std::time::Duration;

use hearth_pool::{Pool, PoolConfig};
use tokio::sync::watch;

use crate::exec::{self, ExecOptions};
use crate::jobs;
use crate::output::Outcome;
use crate::task::{Parser, Task, Work};

/// Why a PHP job fails on a host without PHP job workers.
pub const NO_PHP_WORKERS: &str =
    "a PHP job (\"call\"), but this host has no PHP job workers: start it with --php-bootstrap FILE";

/// Runs tasks: shell tasks as processes, PHP jobs in its pool's workers.
/// Without a pool, a PHP job fails saying what is missing. Cheap to clone
/// (the pool is shared).
#[derive(Debug, Clone)]
pub struct Executor {
    pool: Option<Pool>,
    options: ExecOptions,
}

impl Executor {
    /// An executor of shell tasks, and of PHP jobs on `pool`.
    pub fn new(pool: Option<Pool>, options: ExecOptions) -> Executor {
        Executor { pool, options }
    }

    /// The PHP job workers, if it runs PHP jobs.
    pub fn pool(&self) -> Option<&Pool> {
        self.pool.as_ref()
    }

    /// How every attempt is run.
    pub fn options(&self) -> &ExecOptions {
        &self.options
    }

    /// How a JSON task reads for a host that takes both kinds (`hearth
    /// work`): a line with `call` is a PHP job, one with `cmd` or `argv` a
    /// shell task. A PHP job that reaches an executor without a pool fails
    /// when it runs (another host may have the workers it needs).
    pub fn parser(&self) -> Parser {
        Parser::Mixed
    }

    /// Runs one attempt at `task`; `abort` turning true stops it (SIGTERM,
    /// then SIGKILL after `kill_after`), and the outcome says it was
    /// interrupted.
    pub async fn run(&self, task: &Task, abort: watch::Receiver<bool>) -> Outcome {
        match (&task.work, &self.pool) {
            (Work::Call { .. }, Some(pool)) => jobs::run(pool, task, &self.options, abort).await,
            (Work::Call { .. }, None) => {
                Outcome::not_started(NO_PHP_WORKERS.to_owned(), crate::exec::epoch_now())
            }
            (Work::Shell(_) | Work::Argv(_), _) => exec::run(task, &self.options, abort).await,
        }
    }

    /// Stops the PHP job workers, if any.
    pub async fn shutdown(&self) {
        if let Some(pool) = &self.pool {
            pool.shutdown().await;
        }
    }
}

/// PHP job workers that booted, and what to tell the user if only some
/// of them did.
#[derive(Debug)]
pub struct Started {
    pub pool: Pool,
    /// Set when some workers failed to boot while others run: what
    /// failed, for the command to say once.
    pub partial: Option<String>,
}

/// Starts the PHP job workers and waits until each has booted or failed
/// to. A failure of them all is the `Err`, said once, with the worker's
/// output: the caller may hold back the pool's own report of each
/// worker's failure while this runs (`hearth run` and `hearth work` do),
/// since it would repeat the same error and trace once per worker.
pub async fn start_pool(config: PoolConfig) -> Result<Started, String> {
    let boot_timeout = config.boot_timeout;
    let pool = Pool::start(config)
        .await
        .map_err(|e| format!("cannot start PHP workers: {e}"))?;
    let mut partial = None;
    if !pool.wait_ready(boot_timeout + Duration::from_secs(1)).await {
        let status = pool.status();
        let why = pool
            .boot_error()
            .map(|e| format!(": {e}"))
            .unwrap_or_default();
        if status.live == 0 {
            pool.kill_all();
            return Err(format!("the PHP workers failed to boot{why}"));
        }
        partial = Some(format!(
            "{} of {} PHP workers failed to boot (booted again while jobs run on the others){why}",
            status.workers - status.live,
            status.workers
        ));
    }
    Ok(Started { pool, partial })
}
