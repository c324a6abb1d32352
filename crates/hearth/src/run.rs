//! `hearth run`: the task runner's command line.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{bail, Context as _};
use hearth_pool::PoolConfig;
use hearth_run::{Halt, Input, InputFormat, Resume, RunConfig};

use crate::assets;
use crate::config::{Seconds, Size};

/// The end of `hearth run --help`: the input, the output, the exit status.
const AFTER_HELP: &str = "\
Input lines look like {\"id\": 1, \"cmd\": \"gzip -k a.log\"} or
{\"id\": 2, \"argv\": [\"gzip\", \"-k\", \"b.log\"]} (optional: env, cwd, stdin,
timeout); with --php-bootstrap, {\"id\": 3, \"call\": \"App\\\\Jobs\\\\resize\",
\"args\": [\"a.jpg\", 200]}. Each finished task writes one JSON line to stdout.

Exit status (as GNU parallel's):
  0         every task succeeded (or there were none)
  1-100     that many tasks failed (with --resume, skipped tasks the job
            log lists as failed count too: the status is the batch's)
  101       more than 100 tasks failed
  255       any other error: a refused command line, unusable input, a FILE
            or job log that cannot be read or written, PHP workers that
            fail to boot (stderr says which)
  128+N     stopped by signal N: 129 SIGHUP, 130 SIGINT, 143 SIGTERM

See docs/task-runner.md.";

#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct RunArgs {
    /// Tasks, one JSON object per line ("-" or nothing: standard input)
    file: Option<PathBuf>,

    /// A command to run for each input line (implies --lines): "{}" in it is
    /// replaced by the line, else the line is appended as the last argument
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,

    /// Tasks to run at once [default: the number of CPUs]
    #[arg(short, long, value_name = "N")]
    jobs: Option<usize>,

    /// Write results in input order, not completion order
    #[arg(short = 'k', long)]
    keep_order: bool,

    /// Stop a task after this long (SIGTERM to its process group, then
    /// SIGKILL): seconds, or a number with ms, s, m or h
    #[arg(long, value_name = "DURATION")]
    timeout: Option<Seconds>,

    /// Time between SIGTERM and SIGKILL when a task is stopped
    #[arg(long, value_name = "DURATION", default_value = "2")]
    kill_after: Seconds,

    /// Run a failed task up to N more times
    #[arg(long, value_name = "N", default_value_t = 0)]
    retries: u32,

    /// Stop at the first failure: "now" stops running tasks too, "soon" lets them
    /// finish ("now,fail=N" / "soon,fail=N": after N failures)
    #[arg(long, value_name = "WHEN")]
    halt: Option<Halt>,

    /// Write a line per finished task to FILE (GNU parallel's joblog format);
    /// without --resume, a FILE that already lists tasks is refused
    #[arg(long, value_name = "FILE")]
    joblog: Option<PathBuf>,

    /// Skip the tasks the --joblog lists as finished
    #[arg(long, requires = "joblog")]
    resume: bool,

    /// Skip the tasks the --joblog lists as succeeded; run failed ones again
    #[arg(long, requires = "joblog", conflicts_with = "resume")]
    resume_failed: bool,

    /// Keep at most this much of each task's stdout and of its stderr
    #[arg(long, value_name = "SIZE", default_value = "16M")]
    max_output: Size,

    /// Never show the progress bar (shown on stderr only when it is a terminal)
    #[arg(long)]
    no_progress: bool,

    /// Each input line is a task: a shell command, or an argument for COMMAND
    #[arg(long)]
    lines: bool,

    /// Run PHP jobs in warm PHP workers that load FILE once
    #[arg(long, value_name = "FILE")]
    php_bootstrap: Option<PathBuf>,

    /// PHP binary for the job workers
    #[arg(
        long,
        value_name = "PATH",
        default_value = "php",
        requires = "php_bootstrap"
    )]
    php: PathBuf,

    /// Extra php.ini setting for the job workers (repeatable)
    #[arg(short = 'd', long = "ini", value_name = "NAME=VALUE", requires = "php_bootstrap", value_parser = crate::serve::parse_ini)]
    ini: Vec<(String, String)>,

    /// Time a job worker has to load the bootstrap
    #[arg(long, value_name = "DURATION", default_value = "60")]
    boot_timeout: Seconds,
}

pub fn run(args: RunArgs) -> anyhow::Result<u8> {
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    if jobs == 0 {
        bail!("--jobs must be at least 1");
    }
    let input = match &args.file {
        None => Input::Stdin,
        Some(p) if p.as_os_str() == "-" => Input::Stdin,
        Some(p) => Input::File(p.clone()),
    };
    let format = if args.lines || !args.command.is_empty() {
        if args.php_bootstrap.is_some() {
            bail!("--php-bootstrap reads JSON Lines of jobs; it does not combine with --lines or a COMMAND");
        }
        InputFormat::Lines {
            template: args.command.clone(),
        }
    } else {
        InputFormat::Json
    };
    let max_output = usize::try_from(args.max_output.0).unwrap_or(usize::MAX);
    // Kept alive until the run ends: it holds the job worker script.
    let mut scratch = None;
    let php = match &args.php_bootstrap {
        Some(bootstrap) => {
            let (config, dir) = job_pool(&args, bootstrap, jobs)?;
            scratch = Some(dir);
            Some(config)
        }
        None => None,
    };
    let config = RunConfig {
        jobs,
        keep_order: args.keep_order,
        timeout: args.timeout.map(|s| s.0).filter(|d| !d.is_zero()),
        kill_after: args.kill_after.0,
        retries: args.retries,
        halt: args.halt,
        joblog: args.joblog.clone(),
        resume: match (args.resume, args.resume_failed) {
            (true, _) => Resume::Finished,
            (_, true) => Resume::Succeeded,
            _ => Resume::No,
        },
        max_output,
        progress: !args.no_progress,
        php,
        format,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let prepared = {
        let _held = StartingWorkers::begin();
        runtime.block_on(hearth_run::prepare(config, input))
    };
    let summary = match prepared.map(|batch| runtime.block_on(batch.run())) {
        Ok(Ok(summary)) => summary,
        Ok(Err(message)) | Err(message) => {
            crate::say!("hearth run: {message}");
            return Ok(hearth_run::ERROR_STATUS);
        }
    };
    // The runtime goes first: it owns the workers' pipes.
    drop(runtime);
    drop(scratch);
    use std::io::IsTerminal as _;
    if std::io::stderr().is_terminal() && !args.no_progress {
        let secs = summary.elapsed.as_secs_f64();
        crate::say!(
            "hearth run: {} task(s) in {secs:.1}s ({:.0}/s), {} failed{}{}",
            summary.finished,
            summary.finished as f64 / secs.max(1e-9),
            summary.failed,
            match (summary.skipped, summary.skipped_failed) {
                (0, _) => String::new(),
                (skipped, 0) => format!(", {skipped} skipped (--resume)"),
                (skipped, failed) => format!(
                    ", {skipped} skipped (--resume; {failed} of them failed before, which the exit status counts)"
                ),
            },
            if summary.interrupted > 0 {
                format!(", {} interrupted", summary.interrupted)
            } else {
                String::new()
            },
        );
    }
    Ok(summary.exit_code())
}

/// Set while `hearth run` starts its PHP workers. The pool logs each
/// worker that fails to boot, with its output; with many workers that is
/// one copy of the same error and trace per worker, and `hearth run` then
/// reports the failure itself. Those reports are held back meanwhile (see
/// [`shown`]), so the error is printed once.
static STARTING_WORKERS: AtomicBool = AtomicBool::new(false);

/// Holds back the pool's boot failure reports while it lives.
struct StartingWorkers;

impl StartingWorkers {
    fn begin() -> StartingWorkers {
        STARTING_WORKERS.store(true, Ordering::Release);
        StartingWorkers
    }
}

impl Drop for StartingWorkers {
    fn drop(&mut self) {
        STARTING_WORKERS.store(false, Ordering::Release);
    }
}

/// Whether a log event is shown: all are but, while `hearth run` starts its
/// PHP workers, the errors of the pool and of the workers' output (a boot
/// failure, which `hearth run` reports itself).
pub(crate) fn shown(meta: &tracing::Metadata<'_>) -> bool {
    let held = STARTING_WORKERS.load(Ordering::Acquire)
        && meta.is_event()
        && *meta.level() == tracing::Level::ERROR
        && (meta.target().starts_with("hearth_pool") || meta.target() == "hearth::worker");
    !held
}

/// The pool of job workers: each runs a small generated script that loads
/// the PHP library built into this binary, then the app's bootstrap file
/// (in the global scope, as the app's own entry script would), then serves
/// jobs.
fn job_pool(
    args: &RunArgs,
    bootstrap: &std::path::Path,
    jobs: usize,
) -> anyhow::Result<(PoolConfig, tempfile::TempDir)> {
    let bootstrap = std::fs::canonicalize(bootstrap)
        .with_context(|| format!("--php-bootstrap {}", bootstrap.display()))?;
    if !bootstrap.is_file() {
        bail!("--php-bootstrap {} is not a file", bootstrap.display());
    }
    let lib = assets::extract()?.join("php");
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::Builder::new()
        .prefix("hearth-run-")
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
        .context("cannot create a directory for the job worker script")?;
    let script = dir.path().join("job-worker.php");
    std::fs::write(
        &script,
        format!(
            "<?php\n// Written by `hearth run`: a job worker for {}.\n\
             require {};\nrequire {};\n\\Hearth\\Internal\\JobRuntime::main();\n",
            bootstrap.display(),
            php_string(&lib.join("autoload.php").to_string_lossy()),
            php_string(&bootstrap.to_string_lossy()),
        ),
    )
    .context("cannot write the job worker script")?;
    let mut pool = PoolConfig::new(args.php.clone(), &script, jobs);
    pool.ini.clone_from(&args.ini);
    pool.boot_timeout = args.boot_timeout.0.max(Duration::from_millis(100));
    // A worker stopped for a job's time limit gets SIGKILL this long after
    // SIGTERM, as a shell task does.
    pool.kill_timeout = args.kill_after.0;
    // A job waits as long as it takes for a worker: -j bounds the jobs in
    // flight to the workers there are.
    pool.queue_timeout = Duration::from_secs(365 * 24 * 3600);
    pool.pipelining = false;
    // Jobs see the directory `hearth run` was started in, as a script run
    // from there would.
    pool.cwd = Some(std::env::current_dir().context("the current directory")?);
    pool.boot_hint =
        "the bootstrap file has not returned: does it wait for a service or for input?".to_owned();
    pool.entry_point = "the job loop".to_owned();
    pool.entry_help = format!(
        "The bootstrap file {} ended the process (exit?): it must return, so that jobs can call \
         its functions.",
        bootstrap.display()
    );
    Ok((pool, dir))
}

/// A PHP single-quoted string literal.
fn php_string(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
}
