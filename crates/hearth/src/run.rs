//! `hearth run`: its options wired to the task runner, and the job
//! workers that run PHP jobs.

use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{bail, Context as _};
use hearth_pool::PoolConfig;
use hearth_run::Input;

use crate::assets;
use crate::options::run::read_words_with;
use crate::options::RunOptions;

/// The end of `hearth run --help`: the input, the output, the exit status.
pub(crate) const AFTER_HELP: &str = "\
Input lines look like {\"id\": 1, \"cmd\": \"gzip -k a.log\"} or
{\"id\": 2, \"argv\": [\"gzip\", \"-k\", \"b.log\"]} (optional: env, cwd, stdin,
timeout); with --php-bootstrap, also {\"id\": 3, \"call\":
\"App\\\\Jobs\\\\resize\", \"args\": [\"a.jpg\", 200]}. Each finished task writes one JSON line to
stdout. With a COMMAND (GNU parallel's command line), each task's own
output is printed instead, as parallel prints it (--json: JSON lines).
With --queue URL, the tasks run as jobs on the hosts that run `hearth work
--queue URL`, and their results come back here as the same lines.

Exit status (as GNU parallel's):
  0         every task succeeded (or there were none)
  1-100     that many tasks failed (with --resume, skipped tasks the job
            log lists as failed count too: the status is the batch's)
  101       more than 100 tasks failed
  255       any other error: a refused command line or config file,
            unusable input, a FILE or job log that cannot be read or
            written, PHP workers that fail to boot (stderr says which)
  128+N     stopped by signal N: 129 SIGHUP, 130 SIGINT, 143 SIGTERM
With --halt, as GNU parallel: after fail=1, the failed task's own
status; after success=N, 0; with fail=N%, the share of tasks that
failed, in percent.

See docs/task-runner.md.";

pub fn run(options: RunOptions) -> anyhow::Result<u8> {
    let words = read_words_with(
        &options.words,
        words_follow_dashdash(&options.words),
        options.arg_sep.as_deref().unwrap_or(":::"),
        options.arg_file_sep.as_deref().unwrap_or("::::"),
    );
    // Kept alive until the run ends: it holds the job worker script.
    let mut scratch = None;
    // With --queue, the consumers' workers run PHP jobs (a bootstrap in
    // the config file is for local runs).
    let php = match options
        .php_bootstrap
        .as_ref()
        .filter(|_| options.queue.is_none())
    {
        Some(bootstrap) => {
            let (config, dir) =
                job_pool("run", bootstrap, |script| options.job_pool_config(script))?;
            scratch = Some(dir);
            Some(config)
        }
        None => None,
    };
    let (config, input) = match options.run_config(&words, php) {
        Ok(made) => made,
        Err(message) => {
            crate::say!("hearth run: {message}");
            return Ok(hearth_run::ERROR_STATUS);
        }
    };
    if let (Input::File(path), false) = (&input, words.arguments) {
        if !path.exists() {
            let hint = if words.command.is_empty() && options.words.len() == 1 {
                format!(
                    " (to run it as a COMMAND for each line of standard input: hearth run -- {})",
                    options.words[0]
                )
            } else {
                String::new()
            };
            crate::say!(
                "hearth run: cannot read tasks from {}: no such file{hint}",
                path.display()
            );
            return Ok(hearth_run::ERROR_STATUS);
        }
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    if let Some(url) = options.queue_url() {
        let submitted = runtime.block_on(async {
            let queue =
                hearth_queue::Queue::open_url(url.clone(), hearth_queue::QueueConfig::default())
                    .await
                    .map_err(|e| format!("cannot open the queue {url}: {e}"))?;
            hearth_run::submit::submit(config, input, queue).await
        });
        drop(runtime);
        return Ok(match submitted {
            Ok(summary) => {
                summarize(&options, &summary);
                summary.exit_code()
            }
            Err(message) => {
                crate::say!("hearth run: {message}");
                hearth_run::ERROR_STATUS
            }
        });
    }
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
    summarize(&options, &summary);
    Ok(summary.exit_code())
}

/// Whether `words`, the last arguments of the command line, came after a
/// `--` (`hearth run -- gzip` runs gzip; `hearth run tasks.jsonl` reads a
/// file). clap takes the `--` away, so the raw arguments say.
fn words_follow_dashdash(words: &[String]) -> bool {
    let raw: Vec<std::ffi::OsString> = std::env::args_os().collect();
    raw.len() > words.len() && raw[raw.len() - words.len() - 1] == "--"
}

/// The last line on a terminal: how the run went.
fn summarize(options: &RunOptions, summary: &hearth_run::Summary) {
    use std::io::IsTerminal as _;
    if std::io::stderr().is_terminal() && !options.no_progress {
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
}

/// Set while `hearth run` starts its PHP workers. The pool logs each
/// worker that fails to boot, with its output; with many workers that is
/// one copy of the same error and trace per worker, and `hearth run` then
/// reports the failure itself. Those reports are held back meanwhile (see
/// [`shown`]), so the error is printed once.
static STARTING_WORKERS: AtomicBool = AtomicBool::new(false);

/// Holds back the pool's boot failure reports while it lives.
pub(crate) struct StartingWorkers;

impl StartingWorkers {
    pub(crate) fn begin() -> StartingWorkers {
        STARTING_WORKERS.store(true, Ordering::Release);
        StartingWorkers
    }
}

impl Drop for StartingWorkers {
    fn drop(&mut self) {
        STARTING_WORKERS.store(false, Ordering::Release);
    }
}

/// Whether a log event is shown: all are but, while `hearth run` or
/// `hearth work` starts its PHP workers, the errors of the pool and of the workers' output (a boot
/// failure, which `hearth run` reports itself).
pub(crate) fn shown(meta: &tracing::Metadata<'_>) -> bool {
    let held = STARTING_WORKERS.load(Ordering::Acquire)
        && meta.is_event()
        && *meta.level() == tracing::Level::ERROR
        && (meta.target().starts_with("hearth_pool") || meta.target() == "hearth::worker");
    !held
}

/// The pool of job workers of `hearth COMMAND` (`run`, `work`): each runs
/// a small generated script that loads the PHP library built into this
/// binary, then the app's bootstrap file (in the global scope, as the
/// app's own entry script would), then serves jobs. `config` makes the
/// pool's settings for that script.
pub(crate) fn job_pool(
    command: &str,
    bootstrap: &std::path::Path,
    config: impl FnOnce(&std::path::Path) -> PoolConfig,
) -> anyhow::Result<(PoolConfig, tempfile::TempDir)> {
    let bootstrap = std::fs::canonicalize(bootstrap)
        .with_context(|| format!("the PHP bootstrap {}", bootstrap.display()))?;
    if !bootstrap.is_file() {
        bail!("the PHP bootstrap {} is not a file", bootstrap.display());
    }
    let lib = assets::extract()?.join("php");
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::Builder::new()
        .prefix(&format!("hearth-{command}-"))
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
        .context("cannot create a directory for the job worker script")?;
    let script = dir.path().join("job-worker.php");
    std::fs::write(
        &script,
        format!(
            "<?php\n// Written by `hearth {command}`: a job worker for {}.\n\
             require {};\nrequire {};\n\\Hearth\\Internal\\JobRuntime::main();\n",
            bootstrap.display(),
            php_string(&lib.join("autoload.php").to_string_lossy()),
            php_string(&bootstrap.to_string_lossy()),
        ),
    )
    .context("cannot write the job worker script")?;
    let mut pool = config(&script);
    // Jobs see the directory `hearth COMMAND` was started in, as a script run
    // from there would.
    pool.cwd = Some(std::env::current_dir().context("the current directory")?);
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
