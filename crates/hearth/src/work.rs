//! `hearth work`: its options wired to the consumer loop
//! (`hearth_run::work`), the queue, the PHP job workers, signals, and
//! what it shows of itself (`observe`).

mod observe;

use anyhow::{anyhow, Context as _};
use hearth_queue::Queue;
use hearth_run::work::WorkConfig;
use hearth_run::Executor;
use tokio::sync::{mpsc, watch};

use crate::listen;
use crate::options::WorkOptions;
use crate::run::{job_pool, StartingWorkers};

/// The end of `hearth work --help`: the payload, the result, the signals.
pub(crate) const AFTER_HELP: &str = "\
A job's payload is one task in the format of a `hearth run` input line:
{\"cmd\": \"gzip -k a.log\"} or {\"argv\": [...]} (optional: id, env, cwd,
stdin, timeout), or a PHP job {\"call\": \"App\\\\Jobs\\\\resize\", \"args\":
[\"a.jpg\", 200]}, which needs --php-bootstrap (on a host without it, the
job fails and is retried, by another host perhaps). A job that succeeds is acked with the JSON
object `hearth run` prints for the task, plus \"job\" (its id in the queue)
and \"attempt\"; one that fails is retried by the queue after its backoff,
and dead-lettered after its last attempt; a payload that is not a task is
dead-lettered at once.

With --listen unix:PATH (and --php-bootstrap), it also takes synchronous
calls from PHP: Hearth\\Jobs::call('App\\Pdf::render', [$id], timeout: 5)
returns the value a warm worker computed, or throws a Hearth\\JobError.
See docs/calls.md.

SIGTERM or SIGINT (or `hearth stop --control-socket PATH`): take no more
jobs or calls, let running ones finish within --grace-period (then stop
them: jobs run again later), exit 0. Again: stop them now. SIGHUP (or
`hearth reload --control-socket PATH`): replace the PHP job workers after
their current job or call. `hearth status --control-socket PATH`: what it runs, its counts and
its queue's.

See docs/queues.md.";

pub fn run(options: WorkOptions) -> anyhow::Result<()> {
    let url = options.queue_url();
    // Kept alive until the end: it holds the job worker script.
    let mut scratch = None;
    let php = match &options.php_bootstrap {
        Some(bootstrap) => {
            let (config, dir) =
                job_pool("work", bootstrap, |script| options.job_pool_config(script))?;
            scratch = Some(dir);
            Some(config)
        }
        None => None,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(async {
        let (stop_tx, mut stop) = mpsc::unbounded_channel();
        let (reload_tx, mut reload) = mpsc::unbounded_channel();
        listen_for_signals(stop_tx.clone(), reload_tx)?;
        let admin = observe::admin_setup(&options)?;
        // Removed from disk when dropped, at the end.
        let control = observe::bind_control(options.control_socket.as_deref())?;
        // Bound before the workers start, as the control socket: a second
        // `hearth work` on the same path fails at once.
        let calls = match options.listen_path() {
            Some(path) => {
                let (listener, file) = listen::bind_socket_file(&path, options.listen_mode.0)?;
                Some((tokio::net::UnixListener::from_std(listener)?, file))
            }
            None => None,
        };
        let queue_config = options.queue_config();
        let queue = match &url {
            Some(url) => Some(
                Queue::open_url(url.clone(), queue_config.clone())
                    .await
                    .with_context(|| format!("cannot open the queue {url}"))?,
            ),
            None => None,
        };
        let consumer = queue.as_ref().map(Queue::consumer).transpose()?;
        let pool = match php {
            Some(config) => {
                let started = {
                    let _held = StartingWorkers::begin();
                    hearth_run::start_pool(config).await
                };
                let started = started.map_err(|e| anyhow!(e))?;
                if let Some(partial) = started.partial {
                    tracing::warn!("{partial}");
                }
                Some(started.pool)
            }
            None => None,
        };
        let executor = Executor::new(pool, options.exec_options());
        let config: WorkConfig = options.work_config(&queue_config);
        let call_config = options.call_config();
        let observed = observe::Observed::new(
            queue
                .clone()
                .zip(consumer.as_ref().map(|c| c.name().to_owned())),
            options
                .listen_path()
                .filter(|_| calls.is_some())
                .map(|path| (path.display().to_string(), call_config.counters.clone())),
            config.jobs,
            config.counters.clone(),
            executor.clone(),
        );
        observe::start(&observed, control.as_ref(), admin, stop_tx).await?;
        let kind = if executor.pool().is_some() {
            "shell tasks and PHP jobs"
        } else {
            "shell tasks"
        };
        if let (Some(url), Some(consumer)) = (&url, &consumer) {
            tracing::info!(
                queue = %url,
                consumer = consumer.name(),
                jobs = config.jobs,
                "taking {kind} from the queue"
            );
        }
        if let Some(path) = options.listen_path().filter(|_| calls.is_some()) {
            tracing::info!(
                workers = config.jobs,
                max_callers = call_config.max_connections,
                "taking calls (Hearth\\Jobs::call) on unix:{}",
                path.display()
            );
        }
        let reloads = {
            let executor = executor.clone();
            async move {
                while reload.recv().await.is_some() {
                    reload_workers(&executor).await;
                }
                std::future::pending::<()>().await;
            }
        };
        // Each stop request goes to the queue's loop and to the call
        // listener: the first stops them taking work, the next stops what
        // runs.
        let (loop_tx, loop_stop) = mpsc::unbounded_channel();
        let (calls_tx, calls_stop) = watch::channel(0u32);
        let calls_only = consumer.is_none();
        let fan_out = async move {
            let mut requests = 0;
            while let Some(what) = stop.recv().await {
                requests += 1;
                if calls_only {
                    tracing::info!("{what}: stopping");
                }
                let _ = loop_tx.send(what);
                let _ = calls_tx.send(requests);
            }
            std::future::pending::<()>().await;
        };
        let consuming = async {
            match &consumer {
                Some(consumer) => {
                    Some(hearth_run::work::work(consumer, &executor, &config, loop_stop).await)
                }
                None => None,
            }
        };
        let (listener, socket_file) = calls.unzip();
        let serving = async {
            if let Some(listener) = listener {
                hearth_run::calls::serve(listener, executor.clone(), call_config, calls_stop).await;
            }
        };
        let (summary, ()) = tokio::select! {
            ended = async { tokio::join!(consuming, serving) } => ended,
            () = reloads => unreachable!("reloads never end"),
            () = fan_out => unreachable!("the stop requests never end"),
        };
        executor.shutdown().await;
        drop(socket_file);
        drop(control);
        if let Some(summary) = summary {
            tracing::info!(
                done = summary.done,
                failed = summary.failed,
                rejected = summary.rejected,
                interrupted = summary.interrupted,
                "stopped"
            );
        } else {
            let calls = observed.calls_summary().unwrap_or_default();
            tracing::info!(
                ok = calls.ok,
                failed = calls.failed,
                timed_out = calls.timed_out,
                refused = calls.refused,
                interrupted = calls.interrupted,
                "stopped"
            );
        }
        anyhow::Ok(())
    });
    // The runtime goes first: it owns the workers' pipes.
    drop(runtime);
    drop(scratch);
    result
}

/// SIGTERM and SIGINT ask the loop to stop (the first gracefully, the next
/// at once); SIGHUP asks for the job workers to be replaced.
fn listen_for_signals(
    stop: mpsc::UnboundedSender<String>,
    reload: mpsc::UnboundedSender<()>,
) -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).context("cannot handle signals")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot handle signals")?;
    let mut hup = signal(SignalKind::hangup()).context("cannot handle signals")?;
    tokio::spawn(async move {
        loop {
            let name = tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
                _ = hup.recv() => {
                    let _ = reload.send(());
                    continue;
                }
            };
            if stop.send(name.to_owned()).is_err() {
                return;
            }
        }
    });
    Ok(())
}

/// Replaces the PHP job workers, each after its current job.
async fn reload_workers(executor: &Executor) {
    let Some(pool) = executor.pool() else {
        tracing::info!("SIGHUP: nothing to reload (each shell task starts afresh)");
        return;
    };
    tracing::info!("SIGHUP: replacing the PHP job workers after their current job");
    match pool.reload().await {
        Ok(_) => tracing::info!("job workers reloaded"),
        Err(e) => tracing::error!(error = %e, "reload failed; the running job workers go on"),
    }
}
