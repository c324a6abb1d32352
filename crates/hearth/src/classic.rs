//! `hearth serve --root DIR` without a worker script: classic mode. The
//! site's scripts run in a php-fpm pool Hearth configures from its
//! options, starts, reloads and stops ([`hearth_fpm::pool`]); requests are
//! routed as nginx + Debian's `snippets/fastcgi-php.conf` route them
//! ([`hearth_http::ClassicSite`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use hearth_fpm::fastcgi;
use hearth_fpm::pool::{Config as FpmConfig, IniSetting, Pool as FpmPool, ProcessManager};
use hearth_http::ClassicSite;
use serde_json::{json, Value};

use crate::control::{ControlState, Engine};

mod supervise;
use crate::options::ServeOptions;

/// The classic engine: the site and its php-fpm pool, supervised
/// ([`Classic::supervise`]).
#[derive(Debug)]
pub struct Classic {
    site: Arc<ClassicSite>,
    /// Taken out when the server stops, and while php-fpm is started again
    /// after its master died.
    fpm: tokio::sync::RwLock<Option<FpmPool>>,
    /// php-fpm's configuration, to start it again.
    config: FpmConfig,
    /// When the server started, for the status.
    started: Instant,
    /// Children always running (`pm.start_servers`, or all of them).
    min_children: usize,
    /// How long a reload may take (php-fpm waits up to its
    /// `process_control_timeout` for busy children).
    reload_wait: Duration,
    /// How long its children have to finish when it stops.
    stop_timeout: Duration,
    /// What the supervision enforces on the children.
    limits: supervise::ChildLimits,
    /// The supervision's state and counts.
    watch: supervise::Watch,
}

impl Classic {
    /// Reloads: the document root resolved again (a switched `current`
    /// symlink is followed), then php-fpm's children replaced (SIGUSR2).
    pub async fn reload(&self) -> anyhow::Result<String> {
        let fpm = self.fpm.read().await;
        let Some(fpm) = fpm.as_ref() else {
            if self.watch.is_stopping() {
                bail!("shutting down");
            }
            bail!("php-fpm is being started again (its master exited); try again shortly");
        };
        let real = self.site.reroute().map_err(|e| {
            tracing::error!("reload failed, the old root keeps serving: {e}");
            anyhow::anyhow!("reload failed, the old root keeps serving: {e}")
        })?;
        if let Err(e) = fpm.reload(self.reload_wait).await {
            tracing::error!("php-fpm reload failed: {e}");
            bail!("php-fpm reload failed: {e}");
        }
        let message = format!(
            "reloaded: php-fpm's children replaced, serving {}",
            real.display()
        );
        tracing::info!("{message}");
        Ok(message)
    }

    /// The status report, in the shape of worker mode's (`hearth
    /// status`), with php-fpm's children as the workers.
    pub async fn status(&self, state: &ControlState) -> Value {
        let (pool, workers, running) = self.children().await;
        let stopping =
            state.stopping.load(std::sync::atomic::Ordering::Acquire) || self.watch.is_stopping();
        json!({
            "version": env!("CARGO_PKG_VERSION"),
            "pid": std::process::id(),
            "listen": state.listen.as_ref().map(ToString::to_string),
            "mode": "classic",
            "script": format!("classic mode: {} (php-fpm)", self.site.real_root().display()),
            "root": self.site.real_root(),
            "uptime": self.started.elapsed().as_secs_f64(),
            "stopping": stopping,
            "php_fpm": if running { "running" } else if stopping { "stopped" } else { "starting again" },
            "pool": pool,
            "workers": workers,
        })
    }

    /// php-fpm's pool totals and children, in the shape of worker mode's
    /// `pool` and `workers`, and whether php-fpm is running.
    pub async fn children(&self) -> (Value, Value, bool) {
        let fpm = self.fpm.read().await;
        let running = fpm.is_some();
        let children = match fpm.as_ref() {
            Some(fpm) => fpm.children().await.unwrap_or_else(|e| {
                tracing::warn!("php-fpm's status page: {e}");
                Vec::new()
            }),
            None => Vec::new(),
        };
        drop(fpm);
        // The child answering the status request itself is not busy.
        let is_busy = |c: &hearth_fpm::pool::Child| {
            !c.is_idle() && !c.request_uri.starts_with(&self.config.status_path)
        };
        let busy = children.iter().filter(|c| is_busy(c)).count();
        let workers: Vec<Value> = children
            .iter()
            .enumerate()
            .map(|(slot, c)| {
                let request = is_busy(c).then(|| {
                    json!({
                        "method": "",
                        "uri": c.request_uri,
                        "script": c.script,
                        "seconds": c.request_duration_us as f64 / 1e6,
                    })
                });
                json!({
                    "slot": slot,
                    "pid": c.pid,
                    "state": if is_busy(c) { "busy" } else { "idle" },
                    "requests": c.requests,
                    "memory": c.resident_memory(),
                    "age": c.age().as_secs_f64(),
                    "request": request,
                })
            })
            .collect();
        let counts = self.watch.counts();
        let pool = json!({
            "workers": self.site.children(),
            "min_workers": self.min_children,
            "max_workers": self.site.children(),
            "live": children.len(),
            "busy": busy,
            "idle": children.len() - busy,
            "failing": 0,
            "queue": 0,
            "started": Value::Null,
            "restarts": counts.total(),
            "restarts_by_reason": counts.by_reason(),
        });
        (pool, Value::Array(workers), running)
    }

    /// Stops php-fpm: its children finish their requests within `grace`,
    /// then are stopped firmly. The supervision ends: php-fpm is not
    /// started again.
    pub async fn stop(&self, grace: Duration) {
        self.watch.stopping();
        let Some(fpm) = self.fpm.write().await.take() else {
            return;
        };
        match fpm.stop(grace).await {
            Ok(status) => tracing::info!("php-fpm stopped ({status})"),
            Err(e) => tracing::error!("stopping php-fpm: {e}"),
        }
    }

    /// Kills php-fpm's master and children at once (SIGKILL to its
    /// process group): the second signal.
    pub fn kill_now(&self) {
        if let Some(pid) = rustix::process::Pid::from_raw(self.watch.master() as i32) {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
}

/// `/metrics` and `/readyz`: php-fpm's children as the supervision last
/// saw them (once a second; none while php-fpm is down).
impl hearth_http::PoolReport for Classic {
    fn report(&self) -> hearth_http::PoolSnapshot {
        let (live, busy) = self.watch.seen();
        hearth_http::PoolSnapshot {
            waiting: 0,
            live,
            busy,
            idle: live.saturating_sub(busy),
            min_workers: self.min_children,
            workers: self.site.children(),
            failing: 0,
            started: None,
            restarts_by_reason: self
                .watch
                .counts()
                .0
                .into_iter()
                .map(|(reason, n)| (reason.to_owned(), n))
                .collect(),
            stopping: self.watch.is_stopping(),
            sizing: None,
            routes: Vec::new(),
        }
    }
}

impl Classic {
    /// Starts php-fpm with `config` for the site at `root` (absolute, a
    /// directory), its requests routed with `routing`. The supervision
    /// ([`Classic::supervise`]) is the caller's to spawn.
    pub async fn start(
        options: &ServeOptions,
        root: &Path,
        routing: hearth_classic::Options,
        config: &FpmConfig,
    ) -> anyhow::Result<Classic> {
        let (children, min_children) = match config.process_manager {
            ProcessManager::Static { children } => (children, children),
            ProcessManager::Dynamic {
                max_children,
                start,
                ..
            } => (max_children, start),
            ProcessManager::OnDemand { max_children, .. } => (max_children, 0),
        };
        let as_usize = |n: u32| usize::try_from(n).unwrap_or(usize::MAX);
        let fpm = FpmPool::start(config)
            .await
            .context("cannot start php-fpm")?;
        let timeout = options.request_timeout.nonzero();
        // php-fpm's request_terminate_timeout ends a script that runs too
        // long; Hearth's own wait is a second longer, so that the 504 comes
        // with the child replaced. Without a limit, a day.
        let wait = timeout.map_or(Duration::from_secs(86_400), |t| {
            whole_seconds(t) + Duration::from_secs(1)
        });
        let limits = fastcgi::Limits {
            head_timeout: wait,
            read_timeout: wait,
            terminate_after: config.request_terminate_timeout,
            ..fastcgi::Limits::default()
        };
        let site = match ClassicSite::new(
            root,
            routing,
            fpm.socket().to_path_buf(),
            limits,
            (as_usize(children), options.queue_timeout.0),
        ) {
            Ok(site) => Arc::new(site),
            Err(e) => {
                let _ = fpm.stop(Duration::from_secs(1)).await;
                bail!("document root {}: {e}", root.display());
            }
        };
        let master = fpm.pid();
        Ok(Classic {
            site,
            fpm: tokio::sync::RwLock::new(Some(fpm)),
            config: config.clone(),
            started: Instant::now(),
            min_children: as_usize(min_children),
            reload_wait: whole_seconds(options.stop_timeout.0) + Duration::from_secs(10),
            stop_timeout: options.stop_timeout.0,
            limits: supervise::ChildLimits {
                max_memory: options.max_memory.0,
                ttl: options
                    .ttl
                    .and_then(crate::options::values::Seconds::nonzero),
            },
            watch: supervise::Watch::new(master),
        })
    }

    /// How long its children have to finish when it stops
    /// (`--stop-timeout`).
    pub fn stop_timeout(&self) -> Duration {
        self.stop_timeout
    }

    /// Why the supervision gave up on php-fpm, if it did (the server
    /// then stops and exits non-zero).
    pub fn gave_up(&self) -> Option<String> {
        self.watch.gave_up()
    }

    /// The site: its root, router and php-fpm socket.
    pub fn site(&self) -> &Arc<ClassicSite> {
        &self.site
    }

    /// php-fpm's master: its pid and private directory (none while it is
    /// stopped or being started again).
    pub async fn master(&self) -> Option<(u32, PathBuf)> {
        let fpm = self.fpm.read().await;
        fpm.as_ref().map(|fpm| (fpm.pid(), fpm.dir().to_path_buf()))
    }

    /// Whether php-fpm starts children only for requests (a mixed site's
    /// pool): such a pool is not asked for its status page once a second,
    /// which would keep a child alive for it.
    fn on_demand(&self) -> bool {
        matches!(self.config.process_manager, ProcessManager::OnDemand { .. })
    }
}

/// Whole seconds, rounded up (php-fpm's durations are whole seconds).
fn whole_seconds(d: Duration) -> Duration {
    Duration::from_secs(d.as_secs() + u64::from(d.subsec_nanos() > 0))
}

/// php-fpm's `pm` from `--min-workers` and `--workers`. Equal (the
/// default), `pm = static`. Else `pm = dynamic`, as near worker mode's
/// meaning as php-fpm allows: `min` children start and stay when idle
/// (`start_servers` and `max_spare_servers`), one more starts whenever no
/// child is idle (`min_spare_servers = 1`: php-fpm's check, once a
/// second, starts 1, then 2, 4 ... up to 32 a second while needed), never
/// more than `max` in all (`max_children`); idle children past `min` are
/// stopped one a second (php-fpm has no idle delay in this mode, so
/// `--scale-down-after` has no counterpart).
fn process_manager(min: usize, max: usize) -> ProcessManager {
    let n = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
    if min >= max {
        return ProcessManager::Static { children: n(max) };
    }
    ProcessManager::Dynamic {
        max_children: n(max),
        start: n(min),
        min_spare: 1,
        max_spare: n(min),
    }
}

/// php-fpm's configuration from `hearth serve`'s options.
pub(crate) fn fpm_config(options: &ServeOptions) -> anyhow::Result<FpmConfig> {
    // The same rules as for workers: as root a user must be named, and
    // `--user root` says so for root itself.
    let user = crate::serve::worker_user(options.user.as_deref())?;
    let as_root = rustix::process::geteuid().is_root();
    let (fpm_user, group, allow_root) = match (as_root, options.user.as_deref()) {
        (true, Some(_)) if user.is_none() => (Some("root".to_owned()), None, true),
        (true, Some(spec)) => match spec.split_once(':') {
            Some((u, g)) => (Some(u.to_owned()), Some(g.to_owned()), false),
            None => (Some(spec.to_owned()), None, false),
        },
        _ => (None, None, false),
    };
    let env = options
        .env
        .iter()
        .filter_map(|var| {
            let value = match &var.value {
                Some(value) => value.clone(),
                None => std::env::var(&var.name).ok()?,
            };
            Some((var.name.clone(), value))
        })
        .collect();
    let timeout = options.request_timeout.nonzero().map(whole_seconds);
    Ok(FpmConfig {
        binary: options.php_fpm.clone(),
        process_manager: process_manager(options.min_workers(), options.workers()),
        max_requests: u32::try_from(options.max_requests).unwrap_or(u32::MAX),
        request_terminate_timeout: timeout,
        process_control_timeout: whole_seconds(options.stop_timeout.0),
        user: fpm_user,
        group,
        allow_root_children: allow_root,
        ini: options
            .ini
            .iter()
            .map(|(name, value)| IniSetting {
                name: name.clone(),
                value: value.clone(),
                admin: false,
            })
            .collect(),
        clear_env: options.clear_env,
        env,
        catch_workers_output: true,
        ..FpmConfig::default()
    })
}

pub fn run(
    options: ServeOptions,
    inherited: Option<crate::systemd::Inherited>,
) -> anyhow::Result<()> {
    let threads = options.threads();
    let runtime = if threads == 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .thread_name("hearth")
            .build()?
    };
    runtime.block_on(serve(options, inherited))
}

async fn serve(
    options: ServeOptions,
    inherited: Option<crate::systemd::Inherited>,
) -> anyhow::Result<()> {
    let given = options.root.clone().unwrap_or_default();
    let root = std::path::absolute(&given)
        .with_context(|| format!("document root {}", given.display()))?;
    match std::fs::metadata(&root) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => bail!("document root {} is not a directory", given.display()),
        Err(e) => bail!("document root {}: {e}", given.display()),
    }
    let config = fpm_config(&options)?;
    let tls = match (&options.tls_cert, &options.tls_key) {
        (Some(cert), Some(key)) => Some(hearth_http::TlsConfig::from_pem_files(cert, key)?),
        _ => None,
    };
    let http = options.serve_config(tls);
    let observe = crate::observe::ObserveSetup::from_options(&options)?;

    let crate::listen::Bound {
        listener,
        addr,
        file: socket_file,
    } = crate::listen::bind(&options.listen, inherited).await?;
    let control = crate::observe::bind_control(&observe, &addr)?;
    let classic = Classic::start(&options, &root, options.classic_options(), &config)
        .await
        .context("classic mode")?;
    let site = classic.site().clone();
    let Some((master, dir)) = classic.master().await else {
        bail!("php-fpm stopped at start");
    };
    if let Some(front) = options.fallback.for_router() {
        let script = site.real_root().join(front.trim_start_matches('/'));
        if !script.is_file() {
            tracing::warn!(
                "the front controller {front} is not in {}: requests for anything not on disk \
                 will get 404 (--fallback names another script, --fallback off says there is none)",
                site.real_root().display()
            );
        }
    }
    tracing::info!(
        "hearth {} starting classic mode for {}{} on {}://{addr} with {} php-fpm children (pid {}, {})",
        env!("CARGO_PKG_VERSION"),
        root.display(),
        if site.real_root() == root {
            String::new()
        } else {
            format!(" ({})", site.real_root().display())
        },
        if http.tls.is_some() { "https" } else { "http" },
        match config.process_manager {
            ProcessManager::Dynamic { start, max_children, .. } => format!("{start} to {max_children}"),
            ProcessManager::Static { children } => children.to_string(),
            ProcessManager::OnDemand { max_children, .. } => format!("up to {max_children}"),
        },
        master,
        dir.display(),
    );
    let classic = Arc::new(classic);
    let observing = match crate::observe::start(
        &observe,
        control,
        addr.clone(),
        Engine::Classic(classic.clone()),
    )
    .await
    {
        Ok(observing) => observing,
        Err(e) => {
            classic.stop(options.stop_timeout.0).await;
            return Err(e);
        }
    };
    tokio::spawn(reload_on_hangup(classic.clone()));
    crate::systemd::ready("php-fpm started");
    if options.watch {
        let given = options.watch_dir.clone().unwrap_or_else(|| root.clone());
        tokio::spawn(reload_on_change(classic.clone(), given));
    }
    tokio::spawn(classic.clone().supervise(observing.stop.clone()));
    let stopping = observing.stopping.clone();
    let stop = observing.stop.clone();
    let killer = classic.clone();
    let shutdown = async move {
        crate::serve::shutdown_signal_then(stop, "php-fpm", move || killer.kill_now()).await;
        stopping.store(true, std::sync::atomic::Ordering::Release);
        crate::systemd::stopping();
    };
    let served = hearth_http::serve_classic(
        listener,
        site,
        hearth_http::ServeConfig {
            observer: observing.observer.clone(),
            ..http
        },
        shutdown,
    )
    .await;
    drop(socket_file);
    classic.stop(options.stop_timeout.0).await;
    drop(observing);
    if let Some(why) = classic.gave_up() {
        tracing::error!("stopped: {why}");
        bail!("{why}");
    }
    tracing::info!("stopped");
    served.map_err(Into::into)
}

/// `--watch` in classic mode: php-fpm reads each script again anyway
/// (OPcache revalidates it within `opcache.revalidate_freq`, 2 s by
/// default), but an edit should show on the next request, with OPcache
/// and the `.user.ini` cache emptied: a changed `.php` file under the
/// root (or `--watch-dir`) reloads php-fpm, as `hearth reload` does.
/// Changes that arrive together make one reload.
async fn reload_on_change(classic: Arc<Classic>, given: std::path::PathBuf) {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<String>(8);
    let mut watched: Option<(crate::serve::WatchTargets, notify::RecommendedWatcher)> = None;
    loop {
        let targets = crate::serve::WatchTargets {
            dir: std::fs::canonicalize(&given).unwrap_or_else(|_| given.clone()),
            links: crate::serve::symlinks_on(&given),
        };
        if watched.as_ref().map(|(t, _)| t) != Some(&targets) {
            watched = None;
            match crate::serve::watch_php_files(&targets, tx.clone()) {
                Ok(watcher) => {
                    tracing::info!("watching {} for changed PHP files", targets.dir.display());
                    watched = Some((targets, watcher));
                }
                Err(e) => tracing::error!("cannot watch {}: {e}", targets.dir.display()),
            }
        }
        let Some(why) = rx.recv().await else { return };
        tokio::time::sleep(Duration::from_millis(200)).await;
        while rx.try_recv().is_ok() {}
        tracing::info!("{why}: reloading php-fpm");
        let _reloading = crate::systemd::Reloading::begin();
        let _ = classic.reload().await;
    }
}

/// Reloads on SIGHUP, as in worker mode.
async fn reload_on_hangup(classic: Arc<Classic>) {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hup = match signal(SignalKind::hangup()) {
        Ok(hup) => hup,
        Err(e) => {
            tracing::warn!("cannot listen for SIGHUP, reloads need a restart: {e}");
            return;
        }
    };
    while hup.recv().await.is_some() {
        tracing::info!("SIGHUP received: reloading php-fpm");
        let _reloading = crate::systemd::Reloading::begin();
        let _ = classic.reload().await;
    }
}
