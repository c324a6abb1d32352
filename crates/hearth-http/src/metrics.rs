//! Prometheus metrics: request counts and latencies recorded as requests
//! end, and the pool's state read when `/metrics` is scraped.

use std::sync::Arc;

use hearth_pool::{Pool, RouteGrowth};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::access_log::AccessLog;
use crate::dashboard::{Recent, Served};

/// Request latency buckets, in seconds.
const BUCKETS: [f64; 14] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: &'static str,
    code: u16,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClassLabels {
    class: &'static str,
}

/// What the metrics and the admin endpoints read of the processes that
/// run PHP: worker mode's pool, or classic mode's php-fpm.
pub trait PoolReport: Send + Sync + std::fmt::Debug + 'static {
    /// The processes' state now (cheap: read at each scrape).
    fn report(&self) -> PoolSnapshot;
    /// With several pools, each one's state by name; the metrics then
    /// carry a `pool` label. None for a single pool.
    fn pools(&self) -> Vec<(String, PoolSnapshot)> {
        Vec::new()
    }
}

/// The processes' state at one moment, for `/metrics` and `/readyz`.
#[derive(Debug, Clone, Default)]
pub struct PoolSnapshot {
    /// Requests waiting for a process.
    pub waiting: usize,
    /// Processes ready or busy.
    pub live: usize,
    pub busy: usize,
    pub idle: usize,
    /// Processes always running, and at most.
    pub min_workers: usize,
    pub workers: usize,
    /// Slots whose process is failing to start.
    pub failing: usize,
    /// Processes started, first starts included (none: not known).
    pub started: Option<u64>,
    /// Processes replaced, by reason.
    pub restarts_by_reason: Vec<(String, u64)>,
    /// The processes are being stopped.
    pub stopping: bool,
    /// The [`METRIC_ROUTES`] routes whose requests grew workers most
    /// (worker mode only).
    pub routes: Vec<RouteGrowth>,
    /// Worker mode's sizing and health (none elsewhere).
    pub sizing: Option<Sizing>,
}

/// The name of the server's default worker pool (the only one, or the
/// one of `[serve]` beside `[[serve.pool]]`s) in metrics labels and status.
pub const POOL_NAME: &str = "default";

/// How a worker pool sizes itself and how it fares, for `/metrics`.
#[derive(Debug, Clone, Default)]
pub struct Sizing {
    /// Workers booting now, and at most at once.
    pub booting: usize,
    pub max_booting: usize,
    /// The live workers' resident memory, and the budget (0: none).
    pub memory: u64,
    pub max_pool_memory: u64,
    /// Workers started, by why.
    pub started_by_reason: Vec<(&'static str, u64)>,
    /// Workers that went, by why.
    pub retired_by_reason: Vec<(&'static str, u64)>,
    /// Extra workers not started for the memory budget.
    pub refused_memory: u64,
    /// Workers that died on a request.
    pub request_crashes: u64,
    /// Why the pool is failing (`boot`, `requests`), if it is, and the
    /// seconds to its next attempt.
    pub failing: Option<(&'static str, f64)>,
    /// Why a load balancer should send the pool no request now (no live
    /// worker, a crash loop, stopping), if it should not: `/readyz`.
    pub not_ready: Option<String>,
}

/// Routes in the metrics: the top ones by growth only, so that the label
/// set stays small whatever paths clients send.
pub const METRIC_ROUTES: usize = 10;

impl PoolReport for Pool {
    fn report(&self) -> PoolSnapshot {
        let status = self.status();
        PoolSnapshot {
            waiting: status.waiting,
            live: status.live,
            busy: status.busy,
            idle: status.idle,
            min_workers: self.config().min_workers,
            workers: status.workers,
            failing: status.failing,
            started: Some(status.started),
            restarts_by_reason: status
                .restarts_by_reason
                .into_iter()
                .map(|(reason, n)| (reason.as_str().to_owned(), n))
                .collect(),
            stopping: self.is_stopping(),
            sizing: Some(sizing(self, &status)),
            routes: self.routes(METRIC_ROUTES).0,
        }
    }
}

fn sizing(pool: &Pool, status: &hearth_pool::PoolStatus) -> Sizing {
    let mut retired: Vec<(&'static str, u64)> = status
        .restarts_by_reason
        .iter()
        .map(|(reason, n)| (reason.as_str(), *n))
        .collect();
    retired.push(("scale_down", status.scaled_down));
    Sizing {
        booting: status.booting,
        max_booting: status.max_booting,
        memory: pool.memory(),
        max_pool_memory: pool.config().max_pool_memory,
        started_by_reason: status
            .started_by_reason
            .iter()
            .map(|(reason, n)| (reason.as_str(), *n))
            .collect(),
        retired_by_reason: retired,
        refused_memory: status.refused_memory,
        request_crashes: status.request_crashes,
        failing: status
            .failing_state
            .as_ref()
            .map(|f| (f.cause.as_str(), f.next_attempt.as_secs_f64())),
        not_ready: pool
            .not_ready()
            .or_else(|| (status.live == 0).then(|| "no live worker".to_owned())),
    }
}

/// The server's metrics. Recording costs a few atomics and a read lock
/// on a small map per request; nothing is recorded unless metrics are on
/// (an admin listener is configured).
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    durations: Family<ClassLabels, Histogram, fn() -> Histogram>,
    in_flight: Gauge,
    send_timeouts: Counter,
    sendfile_bytes: Counter,
    /// The dashboard's record of the last seconds.
    recent: Arc<Recent>,
}

impl Metrics {
    /// Metrics for a server in front of `pool`; `access_log` adds its
    /// count of dropped lines.
    pub fn new(pool: Arc<dyn PoolReport>, access_log: Option<AccessLog>) -> Metrics {
        let mut registry = Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "hearth_http_requests",
            "HTTP requests answered, by method and status code",
            requests.clone(),
        );
        let durations = Family::<ClassLabels, Histogram>::new_with_constructor(
            (|| Histogram::new(BUCKETS)) as fn() -> Histogram,
        );
        registry.register(
            "hearth_http_request_duration_seconds",
            "Time from a request's arrival to the end of its response, by status class",
            durations.clone(),
        );
        let in_flight = Gauge::default();
        registry.register(
            "hearth_http_requests_in_flight",
            "Requests being handled now",
            in_flight.clone(),
        );
        let send_timeouts = Counter::default();
        registry.register(
            "hearth_http_send_timeouts",
            "Responses cut because their client took none of them for send_timeout",
            send_timeouts.clone(),
        );
        let sendfile_bytes = Counter::default();
        registry.register(
            "hearth_http_sendfile_bytes",
            "Bytes of files (static files, X-Sendfile and X-Accel-Redirect responses) the kernel \
             sent with sendfile(2), never read into Hearth",
            sendfile_bytes.clone(),
        );
        registry.register_collector(Box::new(PoolCollector { pool, access_log }));
        Metrics {
            registry,
            requests,
            durations,
            in_flight,
            send_timeouts,
            sendfile_bytes,
            recent: Arc::default(),
        }
    }

    /// Metrics for a command that serves no HTTP (`hearth work`): the
    /// pool's, when it has one, and what `collector` reads at each
    /// scrape. The HTTP families are left out.
    pub fn without_http(
        pool: Option<Arc<dyn PoolReport>>,
        collector: Box<dyn Collector>,
    ) -> Metrics {
        let mut registry = Registry::default();
        if let Some(pool) = pool {
            registry.register_collector(Box::new(PoolCollector {
                pool,
                access_log: None,
            }));
        }
        registry.register_collector(collector);
        Metrics {
            registry,
            requests: Family::default(),
            durations: Family::new_with_constructor(
                (|| Histogram::new(BUCKETS)) as fn() -> Histogram,
            ),
            in_flight: Gauge::default(),
            send_timeouts: Counter::default(),
            sendfile_bytes: Counter::default(),
            recent: Arc::default(),
        }
    }

    pub(crate) fn begin(&self) {
        self.in_flight.inc();
    }

    /// A request for `path` ended with `status` after `took`; it waited
    /// `waited` for `worker` when it went to one.
    pub(crate) fn end(
        &self,
        method: &http::Method,
        path: &str,
        status: u16,
        took: std::time::Duration,
        served: Option<Served>,
    ) {
        let seconds = took.as_secs_f64();
        self.recent.record(
            method,
            path,
            status,
            took,
            served.map(|s| s.waited),
            served.map(|s| s.pid),
        );
        self.in_flight.dec();
        self.requests
            .get_or_create(&RequestLabels {
                method: method_label(method),
                code: status,
            })
            .inc();
        self.durations
            .get_or_create(&ClassLabels {
                class: class_label(status),
            })
            .observe(seconds);
    }

    /// A response was cut by the send timeout (a stream reset, or a
    /// connection closed).
    pub(crate) fn send_timed_out(&self) {
        self.send_timeouts.inc();
    }

    /// What counts the bytes of files sent with sendfile(2).
    pub(crate) fn sendfile_bytes(&self) -> Counter {
        self.sendfile_bytes.clone()
    }

    /// What the dashboard reads of the last seconds.
    pub fn recent(&self) -> &Arc<Recent> {
        &self.recent
    }

    /// The metrics in the text format.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(8 << 10);
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::error!("cannot encode the metrics: {e}");
        }
        out
    }
}

/// Methods as labels: the standard ones by name, anything else as
/// `other`, so that clients cannot grow the label set without bound.
fn method_label(method: &http::Method) -> &'static str {
    use http::Method;
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::OPTIONS => "OPTIONS",
        Method::CONNECT => "CONNECT",
        Method::TRACE => "TRACE",
        _ => "other",
    }
}

fn class_label(status: u16) -> &'static str {
    match status / 100 {
        1 => "1xx",
        2 => "2xx",
        3 => "3xx",
        4 => "4xx",
        _ => "5xx",
    }
}

/// A pool gauge: its name, its help, and how to read it from a snapshot.
type PoolGauge<'a> = (&'a str, &'a str, fn(&PoolSnapshot) -> usize);

/// The labels of one pool's metrics: its name, when there are several.
fn pool_labels(pool: Option<&str>) -> Vec<(&'static str, &str)> {
    pool.map(|name| ("pool", name)).into_iter().collect()
}

/// Reads the pool's counters and gauges at scrape time.
#[derive(Debug)]
struct PoolCollector {
    pool: Arc<dyn PoolReport>,
    access_log: Option<AccessLog>,
}

/// Encodes one gauge without labels (for other commands' collectors too).
pub fn gauge(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    value: i64,
) -> Result<(), std::fmt::Error> {
    let metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    ConstGauge::new(value).encode(metric)
}

/// Encodes one counter without labels (for other commands' collectors too).
pub fn counter(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    value: u64,
) -> Result<(), std::fmt::Error> {
    let metric = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    ConstCounter::new(value).encode(metric)
}

/// A metric of one value per reason and pool, labelled with the pool's
/// name.
fn by_reason(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    pools: &[(&str, &Sizing)],
    counts: impl Fn(&Sizing) -> Vec<(&'static str, u64)>,
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (pool, sizing) in pools {
        for (reason, count) in counts(sizing) {
            let labels = [("pool", *pool), ("reason", reason)];
            ConstCounter::new(count).encode(family.encode_family(&labels)?)?;
        }
    }
    Ok(())
}

/// A gauge per pool, labelled with the pool's name.
fn pool_gauge<T: prometheus_client::encoding::EncodeGaugeValue + Copy + std::fmt::Debug>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    pools: &[(&str, &Sizing)],
    value: impl Fn(&Sizing) -> T,
) -> Result<(), std::fmt::Error>
where
    ConstGauge<T>: EncodeMetric,
{
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (pool, sizing) in pools {
        ConstGauge::new(value(sizing)).encode(family.encode_family(&[("pool", *pool)])?)?;
    }
    Ok(())
}

/// The pools' sizing decisions and health, each labelled with its name.
fn encode_sizing(
    encoder: &mut DescriptorEncoder<'_>,
    pools: &[(&str, &Sizing)],
) -> Result<(), std::fmt::Error> {
    let n = |v: usize| i64::try_from(v).unwrap_or(i64::MAX);
    let b = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    by_reason(
        encoder,
        "hearth_pool_workers_started",
        "Workers started, by why: min (min_workers), demand (requests waited), replace",
        pools,
        |s| s.started_by_reason.clone(),
    )?;
    by_reason(
        encoder,
        "hearth_pool_workers_retired",
        "Workers that went, by why: the restart reasons, and scale_down",
        pools,
        |s| s.retired_by_reason.clone(),
    )?;
    by_reason(
        encoder,
        "hearth_pool_workers_refused",
        "Extra workers wanted but not started, by why: memory (max_pool_memory)",
        pools,
        |s| vec![("memory", s.refused_memory)],
    )?;
    let mut crashes = encoder.encode_descriptor(
        "hearth_pool_request_crashes",
        "Workers that died on a request (a failing exit status or a signal)",
        None,
        MetricType::Counter,
    )?;
    for (pool, s) in pools {
        ConstCounter::new(s.request_crashes).encode(crashes.encode_family(&[("pool", *pool)])?)?;
    }
    pool_gauge(
        encoder,
        "hearth_pool_workers_booting",
        "Workers booting now",
        pools,
        |s| n(s.booting),
    )?;
    pool_gauge(
        encoder,
        "hearth_pool_workers_booting_max",
        "Workers booting at once at most",
        pools,
        |s| n(s.max_booting),
    )?;
    pool_gauge(
        encoder,
        "hearth_pool_memory_bytes",
        "Resident memory (RSS) of the live workers, summed",
        pools,
        |s| b(s.memory),
    )?;
    pool_gauge(
        encoder,
        "hearth_pool_memory_limit_bytes",
        "The workers' memory budget (max_pool_memory; 0: none)",
        pools,
        |s| b(s.max_pool_memory),
    )?;
    let mut failing = encoder.encode_descriptor(
        "hearth_pool_failing",
        "1 while the pool fails, by cause: boot (workers fail to boot), requests (workers die on requests)",
        None,
        MetricType::Gauge,
    )?;
    for (pool, s) in pools {
        for cause in ["boot", "requests"] {
            let on = s.failing.is_some_and(|(c, _)| c == cause);
            let labels = [("pool", *pool), ("cause", cause)];
            ConstGauge::new(i64::from(on)).encode(failing.encode_family(&labels)?)?;
        }
    }
    pool_gauge(
        encoder,
        "hearth_pool_ready",
        "1 while the pool takes requests (what /readyz answers for it), 0 otherwise",
        pools,
        |s| i64::from(s.not_ready.is_none()),
    )?;
    pool_gauge(
        encoder,
        "hearth_pool_next_attempt_seconds",
        "While the pool fails, seconds until it tries again (0 otherwise)",
        pools,
        |s| s.failing.map_or(0.0, |(_, at)| at),
    )
}

/// The labels of one route's metrics: its pool's name (when there are
/// several) and the route.
fn route_labels<'a>(pool: Option<&'a str>, r: &'a RouteGrowth) -> Vec<(&'static str, &'a str)> {
    let mut labels = pool_labels(pool);
    labels.push(("route", r.route.as_str()));
    labels
}

/// Memory growth by route, for the routes that grew workers most; a
/// route leaves these families when others overtake it. With several
/// pools, each pool's routes carry its name too.
fn route_families(
    encoder: &mut DescriptorEncoder<'_>,
    pools: &[(Option<&str>, &[RouteGrowth])],
) -> Result<(), std::fmt::Error> {
    let mut requests = encoder.encode_descriptor(
        "hearth_route_requests",
        "Requests whose worker memory growth was measured, by route (the routes that grew workers most)",
        None,
        MetricType::Counter,
    )?;
    for (pool, routes) in pools {
        for r in *routes {
            let labels = route_labels(*pool, r);
            let metric = requests.encode_family(&labels)?;
            ConstCounter::new(r.requests).encode(metric)?;
        }
    }
    let mut grew = encoder.encode_descriptor(
        "hearth_route_requests_grew",
        "Requests after which their worker used more memory than before, by route",
        None,
        MetricType::Counter,
    )?;
    for (pool, routes) in pools {
        for r in *routes {
            let labels = route_labels(*pool, r);
            let metric = grew.encode_family(&labels)?;
            ConstCounter::new(r.grew).encode(metric)?;
        }
    }
    let mut growth = encoder.encode_descriptor(
        "hearth_route_memory_growth_bytes",
        "What requests grew their worker's memory (memory_get_usage() after cleanup) by in all, by route",
        None,
        MetricType::Gauge,
    )?;
    for (pool, routes) in pools {
        for r in *routes {
            let labels = route_labels(*pool, r);
            let metric = growth.encode_family(&labels)?;
            ConstGauge::new(r.growth).encode(metric)?;
        }
    }
    Ok(())
}

impl Collector for PoolCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        // One pool: its metrics as they are; several: each with its name
        // in a `pool` label.
        let named = self.pool.pools();
        let snapshots: Vec<(Option<&str>, PoolSnapshot)> = if named.is_empty() {
            vec![(None, self.pool.report())]
        } else {
            named
                .iter()
                .map(|(name, s)| (Some(name.as_str()), s.clone()))
                .collect()
        };
        let n = |v: usize| i64::try_from(v).unwrap_or(i64::MAX);
        let gauges: [PoolGauge<'_>; 7] = [
            (
                "hearth_pool_queue_depth",
                "Requests waiting for a free worker",
                |s| s.waiting,
            ),
            (
                "hearth_pool_workers_live",
                "Workers booted and not exited",
                |s| s.live,
            ),
            (
                "hearth_pool_workers_busy",
                "Workers running a request",
                |s| s.busy,
            ),
            (
                "hearth_pool_workers_idle",
                "Workers waiting for a request",
                |s| s.idle,
            ),
            (
                "hearth_pool_workers_min",
                "Workers always running (min_workers)",
                |s| s.min_workers,
            ),
            (
                "hearth_pool_workers_max",
                "Workers at most (workers)",
                |s| s.workers,
            ),
            (
                "hearth_pool_workers_failing",
                "Slots whose worker is failing to boot",
                |s| s.failing,
            ),
        ];
        for (name, help, value) in gauges {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            if let [(None, snapshot)] = &snapshots[..] {
                ConstGauge::new(n(value(snapshot))).encode(family)?;
                continue;
            }
            for (pool, snapshot) in &snapshots {
                let labels = pool_labels(*pool);
                let metric = family.encode_family(&labels)?;
                ConstGauge::new(n(value(snapshot))).encode(metric)?;
            }
        }
        if snapshots.iter().all(|(_, s)| s.started.is_some()) {
            let mut family = encoder.encode_descriptor(
                "hearth_pool_worker_starts",
                "Workers started, first boots included",
                None,
                MetricType::Counter,
            )?;
            match &snapshots[..] {
                [(None, snapshot)] => {
                    ConstCounter::new(snapshot.started.unwrap_or(0)).encode(family)?;
                }
                _ => {
                    for (pool, snapshot) in &snapshots {
                        let labels = pool_labels(*pool);
                        let metric = family.encode_family(&labels)?;
                        ConstCounter::new(snapshot.started.unwrap_or(0)).encode(metric)?;
                    }
                }
            }
        }
        let mut restarts = encoder.encode_descriptor(
            "hearth_pool_worker_restarts",
            "Workers replaced, by reason",
            None,
            MetricType::Counter,
        )?;
        for (pool, snapshot) in &snapshots {
            for (reason, count) in &snapshot.restarts_by_reason {
                let mut labels = pool_labels(*pool);
                labels.push(("reason", reason.as_str()));
                let metric = restarts.encode_family(&labels)?;
                ConstCounter::new(*count).encode(metric)?;
            }
        }
        let routes: Vec<(Option<&str>, &[RouteGrowth])> = snapshots
            .iter()
            .filter(|(_, s)| !s.routes.is_empty())
            .map(|(pool, s)| (*pool, &s.routes[..]))
            .collect();
        if !routes.is_empty() {
            route_families(&mut encoder, &routes)?;
        }
        let sizings: Vec<(&str, &Sizing)> = snapshots
            .iter()
            .filter_map(|(pool, s)| Some((pool.unwrap_or(POOL_NAME), s.sizing.as_ref()?)))
            .collect();
        if !sizings.is_empty() {
            encode_sizing(&mut encoder, &sizings)?;
        }
        if let Some(log) = &self.access_log {
            counter(
                &mut encoder,
                "hearth_access_log_dropped",
                "Access log lines dropped because the writer fell behind",
                log.dropped(),
            )?;
        }
        Ok(())
    }
}
