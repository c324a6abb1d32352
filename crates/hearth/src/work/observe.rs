//! What `hearth work` shows of itself: its status over the control socket
//! (`hearth status`, `hearth reload`, `hearth stop`, as `hearth serve`'s),
//! and `/metrics`, `/healthz`, `/readyz` on the admin listener (`--admin`,
//! served by `hearth-http`'s admin listener).

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use hearth_http::admin::AdminToken;
use hearth_http::dashboard::{Action, Refusal};
use hearth_http::{encode_counter, encode_gauge, Metrics, PoolReport, PoolSnapshot};
use hearth_queue::{JobId, Part, Queue, Stats};
use hearth_run::calls::{CallCounters, CallEnd, CallObserver, CallSummary};
use hearth_run::work::{JobEnd, JobObserver, WorkCounters};
use hearth_run::Executor;
use http::StatusCode;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::MetricType;
use serde_json::{json, Value};
use tokio::sync::{mpsc, Notify};

use crate::control::{Boxed, ControlSocket, ControlState, Controlled, Engine};

/// How long a status report waits for the queue's counts.
const STATS_WAIT: Duration = Duration::from_secs(2);
/// How often the copy of the queue's counts that `/metrics` and the
/// dashboard's samples read is read again: each second, so that the
/// dashboard's throughput chart moves every second.
const STATS_EVERY: Duration = Duration::from_secs(1);

/// Job run times, in seconds: from a millisecond to ten minutes.
const BUCKETS: [f64; 16] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0,
];

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EndLabels {
    outcome: &'static str,
}

/// A running `hearth work`, as status and metrics see it.
#[derive(Debug)]
pub struct Observed {
    /// The queue and this process's consumer name, when it takes jobs.
    queue: Option<(Queue, String)>,
    /// The queue's URL, without a password.
    shown: String,
    /// The call listener's socket and counts, when it takes calls.
    calls: Option<(String, Arc<CallCounters>)>,
    call_durations: Family<EndLabels, Histogram, fn() -> Histogram>,
    slots: usize,
    counters: Arc<WorkCounters>,
    executor: Executor,
    /// The queue's counts as last read, for `/metrics`.
    stats: Mutex<Option<Stats>>,
    durations: Family<EndLabels, Histogram, fn() -> Histogram>,
}

impl Observed {
    pub fn new(
        queue: Option<(Queue, String)>,
        calls: Option<(String, Arc<CallCounters>)>,
        slots: usize,
        counters: Arc<WorkCounters>,
        executor: Executor,
    ) -> Arc<Observed> {
        let shown = queue
            .as_ref()
            .map(|(q, _)| q.url().to_string())
            .unwrap_or_default();
        let observed = Arc::new(Observed {
            queue,
            shown,
            calls: calls.clone(),
            call_durations: Family::new_with_constructor(
                (|| Histogram::new(BUCKETS)) as fn() -> Histogram,
            ),
            slots,
            counters: counters.clone(),
            executor,
            stats: Mutex::new(None),
            durations: Family::new_with_constructor(
                (|| Histogram::new(BUCKETS)) as fn() -> Histogram,
            ),
        });
        counters.observe(observed.clone());
        if let Some((_, calls)) = calls {
            calls.observe(observed.clone());
        }
        observed
    }

    /// The call listener's counts, when it takes calls.
    pub fn calls_summary(&self) -> Option<CallSummary> {
        self.calls.as_ref().map(|(_, c)| c.summary())
    }

    fn calls_json(socket: &str, summary: &CallSummary, slots: usize) -> Value {
        json!({
            "socket": socket,
            "workers": slots,
            "connections": summary.connections,
            "running": summary.running,
            "ok": summary.ok,
            "failed": summary.failed,
            "timed_out": summary.timed_out,
            "refused": summary.refused,
            "interrupted": summary.interrupted,
            "turned_away": summary.turned_away,
            "malformed": summary.malformed,
        })
    }

    fn stats_json(stats: &Stats) -> Value {
        json!({
            "ready": stats.ready,
            "delayed": stats.delayed,
            "reserved": stats.reserved,
            "dead": stats.dead,
            "pushed": stats.pushed,
            "done": stats.done,
            "failed": stats.failed,
            "retried": stats.retried,
            "died": stats.died,
            "oldest_ready_age_ms": stats.oldest_ready_age.map(|d| d.as_millis() as u64),
        })
    }
}

impl JobObserver for Observed {
    fn ended(&self, how: JobEnd, ran: Duration) {
        self.durations
            .get_or_create(&EndLabels {
                outcome: how.as_str(),
            })
            .observe(ran.as_secs_f64());
    }
}

impl CallObserver for Observed {
    fn ended(&self, how: CallEnd, took: Duration) {
        self.call_durations
            .get_or_create(&EndLabels {
                outcome: how.as_str(),
            })
            .observe(took.as_secs_f64());
    }
}

impl Controlled for Observed {
    fn status<'a>(&'a self, state: &'a ControlState) -> Boxed<'a, Value> {
        Box::pin(async move {
            let mut report = match self.executor.pool() {
                Some(pool) => crate::control::status(state, pool),
                None => json!({
                    "version": env!("CARGO_PKG_VERSION"),
                    "pid": std::process::id(),
                    "uptime": state.started.elapsed().as_secs_f64(),
                }),
            };
            report["stopping"] = json!(self.counters.stopping());
            // Jobs have no routes: memory growth by route is for requests.
            if let Some(map) = report.as_object_mut() {
                map.remove("routes");
            }
            if let Some((socket, calls)) = &self.calls {
                report["calls"] = Observed::calls_json(socket, &calls.summary(), self.slots);
            }
            let Some((queue, consumer)) = &self.queue else {
                return report;
            };
            let done = self.counters.summary();
            let stats = match tokio::time::timeout(STATS_WAIT, queue.stats()).await {
                Ok(Ok(stats)) => Observed::stats_json(&stats),
                Ok(Err(e)) => json!({"error": e.to_string()}),
                Err(_) => json!({"error": format!("no answer within {STATS_WAIT:?}")}),
            };
            report["work"] = json!({
                "queue": self.shown,
                "consumer": consumer,
                "kind": if self.executor.pool().is_some() { "php" } else { "shell" },
                "slots": self.slots,
                "running": self.counters.running(),
                "done": done.done,
                "failed": done.failed,
                "rejected": done.rejected,
                "interrupted": done.interrupted,
                "queue_stats": stats,
            });
            report
        })
    }

    fn queues(&self) -> Boxed<'_, Vec<Value>> {
        Box::pin(async move {
            match &self.queue {
                Some((queue, _)) => vec![self.queue_json(queue).await],
                None => Vec::new(),
            }
        })
    }

    fn jobs_sample(&self) -> Option<Value> {
        self.queue.as_ref()?;
        let done = self.counters.summary();
        let stats = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        let stats = stats.as_ref();
        Some(json!({
            "done": stats.map_or(done.done, |s| s.done),
            "failed": stats.map_or(done.failed, |s| s.failed),
            "ready": stats.map(|s| s.ready),
            "oldest_ready_age": stats.and_then(|s| s.oldest_ready_age).map(|d| d.as_secs_f64()),
        }))
    }

    fn queue_action(&self, action: Action) -> Boxed<'_, Result<String, Refusal>> {
        Box::pin(self.queue_act(action))
    }

    fn reload(&self) -> Boxed<'_, Result<String, String>> {
        Box::pin(async move {
            let Some(pool) = self.executor.pool() else {
                tracing::info!(
                    "reload asked for: nothing to reload (each shell task starts afresh)"
                );
                return Ok("nothing to reload: each shell task starts afresh".to_owned());
            };
            tracing::info!("reload asked for over the control socket: replacing the PHP job workers after their current job");
            match pool.reload().await {
                Ok(paths) => {
                    tracing::info!("job workers reloaded");
                    Ok(format!(
                        "reloaded: every job worker runs {}",
                        paths.script.display()
                    ))
                }
                Err(e) => {
                    tracing::error!(error = %e, "reload failed; the running job workers go on");
                    Err(format!("reload failed, the running job workers go on: {e}"))
                }
            }
        })
    }
}

/// Dead jobs the dashboard lists.
const DEAD_SHOWN: usize = 50;
/// The longest error of a dead job the dashboard shows, in bytes.
const ERROR_SHOWN: usize = 2000;

impl Observed {
    /// The queue's counts and its oldest dead jobs, for the dashboard.
    async fn queue_json(&self, queue: &Queue) -> Value {
        let (stats, dead) = tokio::join!(
            tokio::time::timeout(STATS_WAIT, queue.stats()),
            tokio::time::timeout(STATS_WAIT, queue.peek(Part::Dead, DEAD_SHOWN)),
        );
        let stats = match stats {
            Ok(Ok(stats)) => Observed::stats_json(&stats),
            Ok(Err(e)) => json!({"error": e.to_string()}),
            Err(_) => json!({"error": format!("no answer within {STATS_WAIT:?}")}),
        };
        let dead = match dead {
            Ok(Ok(jobs)) => jobs
                .iter()
                .map(|job| {
                    let error = job.last_error.as_deref().map(|e| {
                        let end = (0..=ERROR_SHOWN.min(e.len()))
                            .rev()
                            .find(|&i| e.is_char_boundary(i))
                            .unwrap_or(0);
                        &e[..end]
                    });
                    json!({
                        "id": job.id.0,
                        "attempts": job.attempts,
                        "max_attempts": job.max_attempts,
                        "enqueued": hearth_http::dashboard::unix(job.enqueued_at),
                        "reason": job.dead_reason.map(|r| r.as_str()),
                        "error": error,
                        "payload_bytes": job.payload.len(),
                    })
                })
                .collect(),
            Ok(Err(e)) => json!({"error": e.to_string()}),
            Err(_) => json!({"error": format!("no answer within {STATS_WAIT:?}")}),
        };
        json!({"url": self.shown, "stats": stats, "dead": dead})
    }

    /// Does a dashboard action on the queue.
    async fn queue_act(&self, action: Action) -> Result<String, Refusal> {
        let no_queue = || Refusal::new(StatusCode::NOT_FOUND, "no such queue");
        let (queue, _) = self.queue.as_ref().ok_or_else(no_queue)?;
        let failed = |e: hearth_queue::Error| {
            Refusal::new(StatusCode::BAD_GATEWAY, format!("the queue failed: {e}"))
        };
        match action {
            Action::Retry { queue: 0, id } => {
                if queue.retry_dead(JobId(id)).await.map_err(failed)? {
                    tracing::info!(job = id, "dead job put back from the dashboard");
                    Ok(format!("job {id} is ready again"))
                } else {
                    Err(Refusal::new(
                        StatusCode::NOT_FOUND,
                        format!("no dead job {id}"),
                    ))
                }
            }
            Action::Delete { queue: 0, id } => {
                if queue.delete_dead(JobId(id)).await.map_err(failed)? {
                    tracing::info!(job = id, "dead job deleted from the dashboard");
                    Ok(format!("dead job {id} deleted"))
                } else {
                    Err(Refusal::new(
                        StatusCode::NOT_FOUND,
                        format!("no dead job {id}"),
                    ))
                }
            }
            Action::Purge { queue: 0, part } => {
                let which = match part {
                    "ready" => Part::Ready,
                    "delayed" => Part::Delayed,
                    _ => Part::Dead,
                };
                let n = queue.purge(which).await.map_err(failed)?;
                tracing::info!(part, jobs = n, "queue purged from the dashboard");
                Ok(format!("{n} {part} jobs removed"))
            }
            Action::Reload
            | Action::Retry { .. }
            | Action::Delete { .. }
            | Action::Purge { .. } => Err(no_queue()),
        }
    }
}

impl PoolReport for Observed {
    /// The PHP job workers; for shell tasks, the slots as workers.
    fn report(&self) -> PoolSnapshot {
        let mut snapshot = match self.executor.pool() {
            Some(pool) => pool.report(),
            None => {
                let busy = usize::try_from(self.counters.running()).unwrap_or(usize::MAX);
                PoolSnapshot {
                    live: self.slots,
                    busy,
                    idle: self.slots.saturating_sub(busy),
                    min_workers: self.slots,
                    workers: self.slots,
                    ..PoolSnapshot::default()
                }
            }
        };
        snapshot.stopping |= self.counters.stopping();
        snapshot
    }
}

/// The jobs of this process and the counts of its queue, read at each
/// scrape.
#[derive(Debug)]
struct WorkCollector(Arc<Observed>);

impl Collector for WorkCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let o = &self.0;
        if let Some(calls) = o.calls_summary() {
            encode_calls(&mut encoder, o, &calls)?;
        }
        if o.queue.is_none() {
            return Ok(());
        }
        let done = o.counters.summary();
        let mut jobs = encoder.encode_descriptor(
            "hearth_work_jobs",
            "Jobs this process ended, by outcome (done, failed, rejected, interrupted)",
            None,
            MetricType::Counter,
        )?;
        for (outcome, n) in [
            ("done", done.done),
            ("failed", done.failed),
            ("rejected", done.rejected),
            ("interrupted", done.interrupted),
        ] {
            ConstCounter::new(n).encode(jobs.encode_family(&[("outcome", outcome)])?)?;
        }
        encode_gauge(
            &mut encoder,
            "hearth_work_jobs_running",
            "Jobs this process holds now (running, or being acked)",
            i64::try_from(o.counters.running()).unwrap_or(i64::MAX),
        )?;
        encode_gauge(
            &mut encoder,
            "hearth_work_slots",
            "Jobs this process runs at once at most (-j)",
            i64::try_from(o.slots).unwrap_or(i64::MAX),
        )?;
        let durations = encoder.encode_descriptor(
            "hearth_work_job_duration_seconds",
            "How long this process's jobs ran, by outcome",
            None,
            MetricType::Histogram,
        )?;
        o.durations.encode(durations)?;
        let stats = o.stats.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let Some(s) = stats else {
            return Ok(());
        };
        let queue = o.shown.as_str();
        let mut states = encoder.encode_descriptor(
            "hearth_queue_jobs",
            "Jobs in the queue now, by state (ready, delayed, reserved: held by consumers, dead)",
            None,
            MetricType::Gauge,
        )?;
        for (state, n) in [
            ("ready", s.ready),
            ("delayed", s.delayed),
            ("reserved", s.reserved),
            ("dead", s.dead),
        ] {
            let labels = [("queue", queue), ("state", state)];
            ConstGauge::new(i64::try_from(n).unwrap_or(i64::MAX))
                .encode(states.encode_family(&labels)?)?;
        }
        let mut totals = encoder.encode_descriptor(
            "hearth_queue_events",
            "Since the queue was created, by all its consumers: pushed, done, failed (attempts), retried (deliveries after the first), died",
            None,
            MetricType::Counter,
        )?;
        for (event, n) in [
            ("pushed", s.pushed),
            ("done", s.done),
            ("failed", s.failed),
            ("retried", s.retried),
            ("died", s.died),
        ] {
            let labels = [("queue", queue), ("event", event)];
            ConstCounter::new(n).encode(totals.encode_family(&labels)?)?;
        }
        let mut oldest = encoder.encode_descriptor(
            "hearth_queue_oldest_ready_age_seconds",
            "How long the oldest ready job has waited (0 when none is ready)",
            None,
            MetricType::Gauge,
        )?;
        let age = s.oldest_ready_age.unwrap_or_default().as_secs_f64();
        ConstGauge::new(age).encode(oldest.encode_family(&[("queue", queue)])?)?;
        Ok(())
    }
}

/// The call listener's counts and call durations.
fn encode_calls(
    encoder: &mut DescriptorEncoder<'_>,
    o: &Observed,
    calls: &CallSummary,
) -> Result<(), std::fmt::Error> {
    let mut ended = encoder.encode_descriptor(
        "hearth_calls",
        "Calls (Hearth\\Jobs::call) this process answered, by outcome (ok, failed, timed_out, refused, interrupted)",
        None,
        MetricType::Counter,
    )?;
    for (how, n) in calls.by_outcome() {
        ConstCounter::new(n).encode(ended.encode_family(&[("outcome", how.as_str())])?)?;
    }
    encode_gauge(
        encoder,
        "hearth_calls_running",
        "Calls running or waiting for a job worker now",
        i64::try_from(calls.running).unwrap_or(i64::MAX),
    )?;
    encode_gauge(
        encoder,
        "hearth_call_connections",
        "Callers connected to the call listener now",
        i64::try_from(calls.connections).unwrap_or(i64::MAX),
    )?;
    encode_counter(
        encoder,
        "hearth_call_connections_turned_away",
        "Callers closed at once because --max-callers were connected",
        calls.turned_away,
    )?;
    let durations = encoder.encode_descriptor(
        "hearth_call_duration_seconds",
        "From a call's arrival to its answer, by outcome",
        None,
        MetricType::Histogram,
    )?;
    o.call_durations.encode(durations)
}

/// Binds the control socket, if asked for (before the workers start: a
/// second `hearth work` on the same path fails at once).
pub fn bind_control(path: Option<&std::path::Path>) -> anyhow::Result<Option<ControlSocket>> {
    path.map(ControlSocket::bind).transpose()
}

/// The admin listener's address and token, when `--admin` is given;
/// fails on an unreadable or too short token, and on an address other
/// networks reach without one.
pub fn admin_setup(
    options: &crate::options::WorkOptions,
) -> anyhow::Result<Option<(std::net::SocketAddr, Option<AdminToken>)>> {
    let token = crate::dashboard::token(
        options.admin_token.as_deref(),
        options.admin_token_file.as_deref(),
    )?;
    let Some(addr) = options.admin.map(|a| a.0) else {
        return Ok(None);
    };
    crate::dashboard::check_address(addr, token.as_ref())?;
    Ok(Some((addr, token)))
}

/// Starts the control socket's server and the admin listener, as asked
/// for; a `hearth stop` becomes a stop request to the loop.
pub async fn start(
    observed: &Arc<Observed>,
    control: Option<&ControlSocket>,
    admin: Option<(std::net::SocketAddr, Option<AdminToken>)>,
    stop: mpsc::UnboundedSender<String>,
) -> anyhow::Result<()> {
    let notify = Arc::new(Notify::new());
    let state = Arc::new(ControlState {
        engine: Engine::Other(observed.clone()),
        listen: None,
        started: Instant::now(),
        stop: notify.clone(),
        stopping: Arc::new(AtomicBool::new(false)),
    });
    if let Some(control) = control {
        control.serve(state.clone())?;
        tokio::spawn(async move {
            loop {
                notify.notified().await;
                if stop.send("hearth stop".to_owned()).is_err() {
                    return;
                }
            }
        });
        tracing::info!("control socket at {}", control.path().display());
    }
    if let Some((addr, token)) = admin {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr} (--admin)"))?;
        let bound = listener.local_addr()?;
        let pool: Option<Arc<dyn PoolReport>> = observed
            .executor
            .pool()
            .map(|p| Arc::new(p.clone()) as Arc<dyn PoolReport>);
        let metrics = Arc::new(Metrics::without_http(
            pool,
            Box::new(WorkCollector(observed.clone())),
        ));
        tokio::spawn(hearth_http::admin::serve(
            listener,
            hearth_http::admin::AdminState {
                pool: observed.clone(),
                metrics,
                stopping: Arc::new(AtomicBool::new(false)),
                dashboard: crate::dashboard::Panel::new(state),
                token: token.clone(),
            },
        ));
        let reader = observed.clone();
        tokio::spawn(async move {
            let Some((queue, _)) = &reader.queue else {
                return;
            };
            loop {
                match queue.stats().await {
                    Ok(stats) => {
                        *reader.stats.lock().unwrap_or_else(|p| p.into_inner()) = Some(stats);
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot read the queue's counts for /metrics")
                    }
                }
                tokio::time::sleep(STATS_EVERY).await;
            }
        });
        tracing::info!(
            "admin endpoints at http://{bound}/: the dashboard, /metrics, /healthz, /readyz; \
             dashboard actions {}",
            if token.is_some() {
                "need the admin token"
            } else {
                "off (no admin token)"
            }
        );
    }
    Ok(())
}
