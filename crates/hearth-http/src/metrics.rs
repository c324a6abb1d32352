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
            routes: self.routes(METRIC_ROUTES).0,
        }
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
        registry.register_collector(Box::new(PoolCollector { pool, access_log }));
        Metrics {
            registry,
            requests,
            durations,
            in_flight,
            send_timeouts,
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

/// Memory growth by route, for the routes that grew workers most; a
/// route leaves these families when others overtake it.
fn route_families(
    encoder: &mut DescriptorEncoder<'_>,
    routes: &[RouteGrowth],
) -> Result<(), std::fmt::Error> {
    let mut requests = encoder.encode_descriptor(
        "hearth_route_requests",
        "Requests whose worker memory growth was measured, by route (the routes that grew workers most)",
        None,
        MetricType::Counter,
    )?;
    for r in routes {
        let labels = [("route", r.route.as_str())];
        let metric = requests.encode_family(&labels)?;
        ConstCounter::new(r.requests).encode(metric)?;
    }
    let mut grew = encoder.encode_descriptor(
        "hearth_route_requests_grew",
        "Requests after which their worker used more memory than before, by route",
        None,
        MetricType::Counter,
    )?;
    for r in routes {
        let labels = [("route", r.route.as_str())];
        let metric = grew.encode_family(&labels)?;
        ConstCounter::new(r.grew).encode(metric)?;
    }
    let mut growth = encoder.encode_descriptor(
        "hearth_route_memory_growth_bytes",
        "What requests grew their worker's memory (memory_get_usage() after cleanup) by in all, by route",
        None,
        MetricType::Gauge,
    )?;
    for r in routes {
        let labels = [("route", r.route.as_str())];
        let metric = growth.encode_family(&labels)?;
        ConstGauge::new(r.growth).encode(metric)?;
    }
    Ok(())
}

impl Collector for PoolCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let status = self.pool.report();
        let n = |v: usize| i64::try_from(v).unwrap_or(i64::MAX);
        gauge(
            &mut encoder,
            "hearth_pool_queue_depth",
            "Requests waiting for a free worker",
            n(status.waiting),
        )?;
        gauge(
            &mut encoder,
            "hearth_pool_workers_live",
            "Workers booted and not exited",
            n(status.live),
        )?;
        gauge(
            &mut encoder,
            "hearth_pool_workers_busy",
            "Workers running a request",
            n(status.busy),
        )?;
        gauge(
            &mut encoder,
            "hearth_pool_workers_idle",
            "Workers waiting for a request",
            n(status.idle),
        )?;
        gauge(
            &mut encoder,
            "hearth_pool_workers_min",
            "Workers always running (min_workers)",
            n(status.min_workers),
        )?;
        gauge(
            &mut encoder,
            "hearth_pool_workers_max",
            "Workers at most (workers)",
            n(status.workers),
        )?;
        gauge(
            &mut encoder,
            "hearth_pool_workers_failing",
            "Slots whose worker is failing to boot",
            n(status.failing),
        )?;
        if let Some(started) = status.started {
            counter(
                &mut encoder,
                "hearth_pool_worker_starts",
                "Workers started, first boots included",
                started,
            )?;
        }
        let mut restarts = encoder.encode_descriptor(
            "hearth_pool_worker_restarts",
            "Workers replaced, by reason",
            None,
            MetricType::Counter,
        )?;
        for (reason, count) in status.restarts_by_reason {
            let labels = [("reason", reason.as_str())];
            let metric = restarts.encode_family(&labels)?;
            ConstCounter::new(count).encode(metric)?;
        }
        if !status.routes.is_empty() {
            route_families(&mut encoder, &status.routes)?;
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
