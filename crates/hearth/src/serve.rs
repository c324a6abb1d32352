//! `hearth serve`: its options resolved on disk (the script, the document
//! root, the certificate, the workers' user) into one setup, then the pool
//! and the HTTP front wired together.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _};
use hearth_http::ServeConfig;
use hearth_pool::{Pool, PoolConfig};

use crate::options::ServeOptions;

/// Everything `hearth serve` needs, resolved.
#[derive(Debug)]
struct Setup {
    listen: crate::options::values::Listen,
    /// The listening socket systemd passed, if it did.
    inherited: Option<crate::systemd::Inherited>,
    threads: usize,
    /// The default pool's workers; none when it is a classic site
    /// (`default`).
    pool: Option<PoolConfig>,
    /// The default pool when it is a classic site: `[serve]`'s root
    /// without a worker script, beside `[[serve.pool]]`s.
    default: Option<PoolSetup>,
    http: ServeConfig,
    demo: bool,
    /// A copy of the built-in files for workers running as `--user`; kept
    /// (and removed at exit) with the setup.
    _private_assets: Option<tempfile::TempDir>,
    /// With `--watch`: the directory given with `--watch-dir`, if one was
    /// (see [`reloader`]).
    watch: Option<Option<PathBuf>>,
    /// Control socket, admin listener, access log.
    observe: crate::observe::ObserveSetup,
    /// A mixed site's php-fpm half, when it is one.
    mixed: Option<MixedSetup>,
    /// The pools of `[[serve.pool]]`, besides the default one.
    pools: Vec<PoolSetup>,
}

/// One pool of `[[serve.pool]]`, resolved.
#[derive(Debug)]
struct PoolSetup {
    name: String,
    hosts: Vec<String>,
    prefixes: Vec<String>,
    kind: PoolKind,
    request_timeout: Option<Duration>,
}

/// What runs a pool's requests.
#[derive(Debug)]
enum PoolKind {
    /// Warm workers.
    Workers(Box<PoolConfig>),
    /// A classic site: its root (absolute, as given), its php-fpm pool's
    /// configuration, and the pool's options (its routing and limits).
    Classic {
        root: PathBuf,
        fpm: Box<hearth_fpm::pool::Config>,
        options: Box<ServeOptions>,
    },
}

/// A mixed site's classic half, resolved: what php-fpm runs and how
/// requests are shared between it and the workers.
#[derive(Debug)]
struct MixedSetup {
    /// The document root, absolute, as given (resolved at each reload).
    root: PathBuf,
    /// The front controller's path under the root: the worker script's,
    /// or `/index.php` for a worker script outside the root.
    front: String,
    /// The prefix routes, in the order given.
    areas: Vec<(String, hearth_http::Area)>,
    fpm: hearth_fpm::pool::Config,
    /// For the timeouts php-fpm's requests share with the workers'.
    options: ServeOptions,
}

fn resolve(options: ServeOptions) -> anyhow::Result<Setup> {
    let observe = crate::observe::ObserveSetup::from_options(&options)?;
    if options.script.is_none() && options.root.is_some() {
        return resolve_classic_default(options, observe);
    }
    let (script, demo) = match &options.script {
        Some(script) => (script.clone(), false),
        None => (assets::extract_demo()?, true),
    };
    let (script, real) = worker_script(&script)?;
    let watch = match (options.watch, &options.watch_dir) {
        (false, _) => None,
        (true, None) => Some(None),
        (true, Some(dir)) => {
            let dir = std::path::absolute(dir)
                .with_context(|| format!("--watch-dir {}", dir.display()))?;
            std::fs::canonicalize(&dir)
                .with_context(|| format!("--watch-dir {}", dir.display()))?;
            Some(Some(dir))
        }
    };

    let user = worker_user(options.user.as_deref())?;
    let mut private_assets = None;
    let script = match (&user, demo) {
        (Some(user), true) => {
            // Hearth's own copy of the demo is private to Hearth's user.
            let dir = crate::assets::extract_for(user.uid, user.gid)?;
            let script = dir.path().join("demo/worker.php");
            private_assets = Some(dir);
            script
        }
        _ => script,
    };
    let mut pool = options.pool_config(&script, user);
    for name in options.env_not_found() {
        tracing::warn!("--env {name}: Hearth's environment has no {name}; workers do not get it");
    }

    pool.document_root = document_root(options.root.as_deref())?;
    let pools = resolve_pools(&options)?;
    let tls = match (&options.tls_cert, &options.tls_key) {
        (Some(cert), Some(key)) => Some(hearth_http::TlsConfig::from_pem_files(cert, key)?),
        // `validate()` has refused one without the other.
        _ => None,
    };
    let http = options.serve_config(tls);
    let mixed = match &pool.document_root {
        Some(root) => mixed_setup(&options, &real, root)?,
        None => None,
    };
    Ok(Setup {
        mixed,
        pools,
        observe,
        watch,
        listen: options.listen.clone(),
        inherited: None,
        threads: options.threads(),
        pool: Some(pool),
        default: None,
        http,
        demo,
        _private_assets: private_assets,
    })
}

/// The pools of `[[serve.pool]]`, resolved.
fn resolve_pools(options: &ServeOptions) -> anyhow::Result<Vec<PoolSetup>> {
    let mut pools = Vec::new();
    for section in &options.pool {
        let own = section.options(options);
        let context = || format!("[[serve.pool]] {}", section.name);
        let kind = if section.is_classic() {
            classic_kind(&own).with_context(context)?
        } else {
            let script = own.script.as_deref().unwrap_or(Path::new(""));
            let (script, _) = worker_script(script).with_context(context)?;
            let user = worker_user(own.user.as_deref()).with_context(context)?;
            let mut config = own.pool_config(&script, user);
            config.name = Some(section.name.clone());
            config.document_root = document_root(own.root.as_deref()).with_context(context)?;
            PoolKind::Workers(Box::new(config))
        };
        pools.push(PoolSetup {
            name: section.name.clone(),
            hosts: section.hosts(),
            prefixes: section.path.clone(),
            kind,
            request_timeout: own.request_timeout.nonzero(),
        });
    }
    Ok(pools)
}

/// A classic pool's site and php-fpm, from its options.
fn classic_kind(own: &ServeOptions) -> anyhow::Result<PoolKind> {
    let root = document_root(own.root.as_deref())?.unwrap_or_default();
    let fpm = crate::classic::fpm_config(own)?;
    fpm.find_binary()
        .map_err(|e| anyhow::anyhow!("a classic site needs php-fpm: {e}"))?;
    Ok(PoolKind::Classic {
        root,
        fpm: Box::new(fpm),
        options: Box::new(own.clone()),
    })
}

/// `[serve]` with a root and no worker script, beside `[[serve.pool]]`s:
/// the default pool is a classic site, the others take their routes.
fn resolve_classic_default(
    options: ServeOptions,
    observe: crate::observe::ObserveSetup,
) -> anyhow::Result<Setup> {
    let default = PoolSetup {
        name: "default".to_owned(),
        hosts: Vec::new(),
        prefixes: Vec::new(),
        kind: classic_kind(&options)?,
        request_timeout: options.request_timeout.nonzero(),
    };
    let tls = match (&options.tls_cert, &options.tls_key) {
        (Some(cert), Some(key)) => Some(hearth_http::TlsConfig::from_pem_files(cert, key)?),
        _ => None,
    };
    if options.watch {
        tracing::warn!(
            "--watch follows a worker script: with a classic site as the default pool it \
             watches nothing (reload with hearth reload or SIGHUP)"
        );
    }
    Ok(Setup {
        mixed: None,
        pools: resolve_pools(&options)?,
        observe,
        watch: None,
        listen: options.listen.clone(),
        inherited: None,
        threads: options.threads(),
        pool: None,
        default: Some(default),
        http: options.serve_config(tls),
        demo: false,
        _private_assets: None,
    })
}

/// A worker script, made absolute as given (the pool resolves symlinks at
/// start and again at every reload, so that a deploy that switches a
/// `current` link is picked up by the next reload), and its real path.
fn worker_script(script: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
    let given = std::path::absolute(script)
        .with_context(|| format!("worker script {}", script.display()))?;
    let real = std::fs::canonicalize(&given)
        .with_context(|| format!("worker script {}", script.display()))?;
    if !real.is_file() {
        bail!("worker script {} is not a file", script.display());
    }
    Ok((given, real))
}

/// A document root, made absolute as given (resolved by the pool, as the
/// script is), once it is known to be a directory.
fn document_root(root: Option<&Path>) -> anyhow::Result<Option<PathBuf>> {
    let Some(root) = root else { return Ok(None) };
    let real =
        std::fs::canonicalize(root).with_context(|| format!("document root {}", root.display()))?;
    if !real.is_dir() {
        bail!("document root {} is not a directory", root.display());
    }
    Ok(Some(std::path::absolute(root)?))
}

/// How long an idle php-fpm child of a mixed site lives
/// (`pm.process_idle_timeout`, php-fpm's own default).
const CLASSIC_IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// A mixed site's classic half, when the options ask for one (a worker
/// script, a root, and `--classic` not off) and php-fpm can run; with
/// `--classic auto` and no php-fpm, none, and a warning.
fn mixed_setup(
    options: &ServeOptions,
    script: &Path,
    root: &Path,
) -> anyhow::Result<Option<MixedSetup>> {
    use crate::options::values::{ClassicChoice, RouteTo};
    if options.classic == ClassicChoice::Off || options.script.is_none() {
        return Ok(None);
    }
    let mut fpm = crate::classic::fpm_config(options)?;
    fpm.process_manager = hearth_fpm::pool::ProcessManager::OnDemand {
        max_children: u32::try_from(options.classic_workers()).unwrap_or(u32::MAX),
        idle_timeout: CLASSIC_IDLE_TIMEOUT,
    };
    if let Err(e) = fpm.find_binary() {
        if options.classic == ClassicChoice::On {
            bail!("--classic on: a mixed site needs php-fpm: {e}");
        }
        if options.route.iter().any(|r| r.to == RouteTo::Classic) {
            bail!("--route ...=classic: a classic area needs php-fpm: {e}");
        }
        tracing::warn!(
            "not a mixed site: {e}; every request that is not a static file goes to the \
             workers (--classic off says so without this warning)"
        );
        return Ok(None);
    }
    let real_root =
        std::fs::canonicalize(root).with_context(|| format!("document root {}", root.display()))?;
    let front = front_controller(script, &real_root);
    let areas = options
        .route
        .iter()
        .map(|r| {
            let area = match r.to {
                RouteTo::Worker => hearth_http::Area::Worker,
                RouteTo::Classic => hearth_http::Area::Classic,
            };
            (r.prefix.clone(), area)
        })
        .collect();
    Ok(Some(MixedSetup {
        root: root.to_path_buf(),
        front,
        areas,
        fpm,
        options: options.clone(),
    }))
}

/// The front controller of a mixed site: the worker script's path under
/// the root (`/index.php`) when it is a `.php` file there that the router
/// could run, else `/index.php` (the classic twin of a worker script kept
/// outside the root, as in `public/index.php` beside `worker.php`).
fn front_controller(real_script: &Path, real_root: &Path) -> String {
    let under = real_script
        .strip_prefix(real_root)
        .ok()
        .and_then(|rel| rel.to_str())
        .map(|rel| format!("/{rel}"))
        .filter(|front| {
            front.ends_with(".php") && !front.split('/').any(|seg| seg.starts_with('.'))
        });
    under.unwrap_or_else(|| "/index.php".to_owned())
}

pub fn run(options: ServeOptions) -> anyhow::Result<()> {
    // Before any thread or child process: it takes variables out of the
    // environment.
    let inherited = crate::systemd::take()?;
    if options.script.is_none() && options.root.is_some() && options.pool.is_empty() {
        return crate::classic::run(options, inherited);
    }
    let mut setup = resolve(options)?;
    setup.inherited = inherited;
    let runtime = if setup.threads == 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(setup.threads)
            .enable_all()
            .thread_name("hearth")
            .build()?
    };
    runtime.block_on(serve(setup))
}

async fn serve(mut setup: Setup) -> anyhow::Result<()> {
    let bound = crate::listen::bind(&setup.listen, setup.inherited.take()).await?;
    let addr = bound.addr.clone();
    let control = crate::observe::bind_control(&setup.observe, &addr)?;
    let mut classic_pools: crate::control::ClassicPools = Vec::new();
    let pool = match (&setup.pool, &setup.default) {
        (Some(config), _) => Some(start_default(config, &setup, &addr).await?),
        (None, Some(default)) => {
            tracing::info!(
                "hearth {} starting on {}://{addr} with a classic site as the default pool",
                env!("CARGO_PKG_VERSION"),
                if setup.http.tls.is_some() {
                    "https"
                } else {
                    "http"
                },
            );
            if let (_, Some(fpm)) = start_pool(default).await.context("classic site")? {
                classic_pools.push((default.name.clone(), fpm));
            }
            None
        }
        (None, None) => bail!("no pool to serve"),
    };
    let mut routed: Vec<hearth_http::PoolRoute> = Vec::new();
    for own in &setup.pools {
        let (target, fpm) = match start_pool(own).await {
            Ok(started) => started,
            Err(e) => {
                let started: Vec<Pool> = routed
                    .iter()
                    .filter_map(|r| r.workers().cloned())
                    .chain(pool.clone())
                    .collect();
                stop_pools(&started, &classic_pools).await;
                return Err(e.context(format!("[[serve.pool]] {}", own.name)));
            }
        };
        if let Some(fpm) = fpm {
            classic_pools.push((own.name.clone(), fpm));
        }
        routed.push(hearth_http::PoolRoute {
            name: own.name.clone(),
            hosts: own.hosts.clone(),
            prefixes: own.prefixes.clone(),
            target,
            request_timeout: own.request_timeout,
        });
    }
    let classic_pools = Arc::new(classic_pools);
    // A mixed site's php-fpm half.
    let classic = match (&setup.mixed, &pool) {
        (Some(mixed), Some(pool)) => match start_classic(mixed).await {
            Ok(classic) => Some(classic),
            Err(e) => {
                let started: Vec<Pool> = routed
                    .iter()
                    .filter_map(|r| r.workers().cloned())
                    .chain([pool.clone()])
                    .collect();
                stop_pools(&started, &classic_pools).await;
                return Err(e);
            }
        },
        _ => None,
    };
    let mixed_site = match (&classic, &setup.mixed) {
        (Some(classic), Some(mixed)) => Some(Arc::new(hearth_http::MixedSite::new(
            classic.site().clone(),
            &mixed.front,
            mixed.areas.clone(),
        ))),
        _ => None,
    };
    let pools = (!routed.is_empty()).then(|| {
        let target = match (&pool, classic_pools.first()) {
            (Some(pool), _) => match &mixed_site {
                Some(site) => hearth_http::Target::Mixed(pool.clone(), site.clone()),
                None => hearth_http::Target::Workers(pool.clone()),
            },
            (None, Some((_, classic))) => {
                let report: Arc<dyn hearth_http::PoolReport> = classic.clone();
                hearth_http::Target::Classic(classic.site().clone(), report)
            }
            // One or the other has started.
            (None, None) => unreachable!("the default pool has started"),
        };
        let default = hearth_http::PoolRoute {
            name: "default".to_owned(),
            hosts: Vec::new(),
            prefixes: Vec::new(),
            target,
            request_timeout: setup.http.request_timeout,
        };
        Arc::new(hearth_http::Pools::new(default, routed))
    });
    // Every worker pool, the default one first.
    let all: Vec<Pool> = match &pools {
        Some(pools) => pools.all().filter_map(|r| r.workers().cloned()).collect(),
        None => pool.iter().cloned().collect(),
    };
    let engine = match (&classic, &pools, &pool) {
        (_, Some(pools), _) => {
            // The control socket reports and reloads a mixed site's
            // php-fpm with its workers, as the default pool's.
            let mut fpm: crate::control::ClassicPools = classic_pools.to_vec();
            fpm.extend(classic.iter().map(|c| ("default".to_owned(), c.clone())));
            crate::control::Engine::Pools(pools.clone(), Arc::new(fpm))
        }
        (Some(classic), None, Some(pool)) => {
            crate::control::Engine::Mixed(pool.clone(), classic.clone())
        }
        (_, None, Some(pool)) => crate::control::Engine::Workers(pool.clone()),
        (_, None, None) => unreachable!("no pools without a default worker pool"),
    };
    let observing = match crate::observe::start(&setup.observe, control, addr.clone(), engine).await
    {
        Ok(observing) => observing,
        Err(e) => {
            stop_both(&all, classic.as_deref(), &classic_pools, &setup).await;
            return Err(e);
        }
    };
    let others: Vec<(String, Pool)> = pools
        .iter()
        .flat_map(|p| {
            p.all()
                .skip(1)
                .filter_map(|r| Some((r.name.clone(), r.workers()?.clone())))
        })
        .collect();
    tokio::spawn(reloader(
        pool.clone(),
        setup.watch.clone(),
        classic.clone(),
        others,
        classic_pools.clone(),
    ));
    match &pool {
        Some(pool) if pool.config().debug => {
            tracing::warn!(
                "debug mode (--debug): every request runs in a worker started for it, with its \
                 Xdebug triggers, and a request with a debugging trigger has no time limit; not \
                 for production (every request boots the app)"
            );
            tokio::spawn(report_debug_readiness(pool.clone()));
        }
        // Only classic sites: php-fpm is up.
        _ if all.is_empty() => crate::systemd::ready("php-fpm started"),
        _ => {
            tokio::spawn(report_readiness(all.clone()));
        }
    }
    // A script that cannot boot at start ends `hearth serve` with the
    // reason, instead of leaving a server that answers 503 forever. Once a
    // worker has booted, failures are retried with a backoff instead.
    let (gave_up_tx, mut gave_up) = tokio::sync::mpsc::channel(1);
    for starting in &all {
        let (starting, gave_up_tx) = (starting.clone(), gave_up_tx.clone());
        tokio::spawn(async move {
            if let Err(e) = starting.wait_started(START_ATTEMPTS).await {
                let _ = gave_up_tx.try_send(e);
            }
        });
    }
    drop(gave_up_tx);
    let failed_start = std::sync::Arc::new(std::sync::Mutex::new(None));

    let stopping = observing.stopping.clone();
    let (pool_for_signals, observing_stop) = (all.clone(), observing.stop.clone());
    if let Some(classic) = &classic {
        tokio::spawn(classic.clone().supervise(observing.stop.clone()));
    }
    for (_, classic) in classic_pools.iter() {
        tokio::spawn(classic.clone().supervise(observing.stop.clone()));
    }
    let killer: Vec<Arc<crate::classic::Classic>> = classic
        .iter()
        .cloned()
        .chain(classic_pools.iter().map(|(_, c)| c.clone()))
        .collect();
    let failure = failed_start.clone();
    let shutdown = async move {
        tokio::select! {
            () = shutdown_signal(pool_for_signals, observing_stop, killer) => {}
            Some(e) = gave_up.recv() => {
                tracing::error!("stopping: the worker script cannot boot");
                *failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
            }
        }
        stopping.store(true, std::sync::atomic::Ordering::Release);
        crate::systemd::stopping();
    };
    let http = ServeConfig {
        observer: observing.observer.clone(),
        ..setup.http.clone()
    };
    let crate::listen::Bound {
        listener,
        addr: _,
        file: socket_file,
    } = bound;
    match (&mixed_site, &pools, &pool) {
        (_, Some(pools), _) => {
            hearth_http::serve_pools(listener, pools.clone(), http, shutdown).await?
        }
        (Some(site), None, Some(pool)) => {
            hearth_http::serve_mixed(listener, pool.clone(), site.clone(), http, shutdown).await?
        }
        (None, None, Some(pool)) => {
            hearth_http::serve(listener, pool.clone(), http, shutdown).await?
        }
        (_, None, None) => unreachable!("no pools without a default worker pool"),
    }
    // Removes a unix socket's file.
    drop(socket_file);
    stop_both(&all, classic.as_deref(), &classic_pools, &setup).await;
    let gave_up = classic.as_ref().and_then(|c| c.gave_up()).or_else(|| {
        classic_pools
            .iter()
            .find_map(|(name, c)| Some(format!("pool {name}: {}", c.gave_up()?)))
    });
    if let Some(why) = gave_up {
        drop(observing);
        tracing::error!("stopped: {why}");
        bail!("{why}");
    }
    tracing::info!("stopped");
    // Removes the control socket.
    drop(observing);
    let failure = failed_start
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    match failure {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

/// Starts the default pool's workers and says so.
async fn start_default(
    config: &PoolConfig,
    setup: &Setup,
    addr: &hearth_http::ListenAddr,
) -> anyhow::Result<Pool> {
    let pool = Pool::start(config.clone()).await?;
    let php = pool.php();
    tracing::info!(
        "hearth {} starting {} on {}://{} with {} ({} {}, {}, {})",
        env!("CARGO_PKG_VERSION"),
        if setup.demo {
            "the built-in demo".to_owned()
        } else if pool.paths().script == config.script {
            config.script.display().to_string()
        } else {
            format!(
                "{} ({})",
                config.script.display(),
                pool.paths().script.display()
            )
        },
        if setup.http.tls.is_some() {
            "https"
        } else {
            "http"
        },
        addr,
        if config.min_workers < config.workers {
            format!("{} to {} workers", config.min_workers, config.workers)
        } else {
            plural(config.workers, "worker")
        },
        php.binary.display(),
        php.version,
        php.sapi,
        match (&php.extension, php.native) {
            (Some(path), _) => format!("Hearth extension {}", path.display()),
            (None, true) => "Hearth extension from php.ini".to_owned(),
            (None, false) => "no Hearth extension: the PHP library's request startup".to_owned(),
        },
    );
    if !php.supports_headers() {
        tracing::warn!(
            "{} is the CLI SAPI: header(), setcookie() and sessions are ignored there; use php-cgi for legacy apps (PSR-7 apps are fine)",
            php.binary.display()
        );
    }
    Ok(pool)
}

/// Starts a mixed site's php-fpm pool and says so.
async fn start_classic(mixed: &MixedSetup) -> anyhow::Result<Arc<crate::classic::Classic>> {
    let routing = hearth_classic::Options {
        fallback: Some(mixed.front.clone()),
        ..mixed.options.classic_options()
    };
    let classic = crate::classic::Classic::start(&mixed.options, &mixed.root, routing, &mixed.fpm)
        .await
        .context("mixed site")?;
    if let Some((pid, dir)) = classic.master().await {
        tracing::info!(
            "mixed site: {} runs in the workers, the other .php scripts of {} in php-fpm \
             (up to {} on demand; pid {pid}, {})",
            mixed.front,
            classic.site().real_root().display(),
            match classic.site().children() {
                1 => "1 child".to_owned(),
                n => format!("{n} children"),
            },
            dir.display(),
        );
    }
    Ok(Arc::new(classic))
}

/// Starts one pool of `[[serve.pool]]` and says so: its target, and its
/// php-fpm for a classic one.
async fn start_pool(
    own: &PoolSetup,
) -> anyhow::Result<(hearth_http::Target, Option<Arc<crate::classic::Classic>>)> {
    let route: Vec<String> = own
        .hosts
        .iter()
        .map(|h| format!("host {h}"))
        .chain(own.prefixes.iter().map(|p| format!("{p}*")))
        .collect();
    let route = match route.is_empty() {
        true => "every other request".to_owned(),
        false => route.join(", "),
    };
    match &own.kind {
        PoolKind::Workers(config) => {
            let started = Pool::start((**config).clone()).await?;
            tracing::info!(
                "pool {}: {} with {}, for {}",
                own.name,
                config.script.display(),
                if config.min_workers < config.workers {
                    format!("{} to {} workers", config.min_workers, config.workers)
                } else {
                    plural(config.workers, "worker")
                },
                route
            );
            Ok((hearth_http::Target::Workers(started), None))
        }
        PoolKind::Classic { root, fpm, options } => {
            let classic =
                crate::classic::Classic::start(options, root, options.classic_options(), fpm)
                    .await?;
            let classic = Arc::new(classic);
            if let Some((pid, dir)) = classic.master().await {
                tracing::info!(
                    "pool {}: classic site {} in php-fpm ({}, pid {pid}, {}), for {}",
                    own.name,
                    classic.site().real_root().display(),
                    match fpm.process_manager {
                        hearth_fpm::pool::ProcessManager::Dynamic {
                            start,
                            max_children,
                            ..
                        } => format!("{start} to {max_children} children"),
                        _ => match classic.site().children() {
                            1 => "1 child".to_owned(),
                            n => format!("{n} children"),
                        },
                    },
                    dir.display(),
                    route
                );
            }
            let report: Arc<dyn hearth_http::PoolReport> = classic.clone();
            Ok((
                hearth_http::Target::Classic(classic.site().clone(), report),
                Some(classic),
            ))
        }
    }
}

/// Stops worker pools and classic pools' php-fpm, at the same time.
async fn stop_pools(pools: &[Pool], classic: &crate::control::ClassicPools) {
    let fpm = futures_util::future::join_all(classic.iter().map(|(_, c)| c.stop(c.stop_timeout())));
    let workers = futures_util::future::join_all(pools.iter().map(Pool::shutdown));
    tokio::join!(workers, fpm);
}

/// Stops every pool's workers, the classic pools' php-fpm and, for a
/// mixed site, its php-fpm, at the same time.
async fn stop_both(
    pools: &[Pool],
    classic: Option<&crate::classic::Classic>,
    classic_pools: &crate::control::ClassicPools,
    setup: &Setup,
) {
    let fpm = async {
        if let (Some(classic), Some(mixed)) = (classic, &setup.mixed) {
            classic.stop(mixed.options.stop_timeout.0).await;
        }
    };
    tokio::join!(stop_pools(pools, classic_pools), fpm);
}

/// At start, how many boots in a row may fail in every slot before
/// `hearth serve` gives up. A script that fails this often before any
/// worker ever booted (a syntax error, a missing `Worker::serve()` call, a
/// missing extension) fails every time; a restart by the service manager
/// covers what may pass (a database not up yet).
const START_ATTEMPTS: u32 = 3;

/// Logs how many of the workers wanted are ready: once all are (`2 of 2
/// workers ready`), and whenever some fail to boot (`0 of 2 workers
/// ready; 2 failing to boot`) until all are again. A worker replaced
/// without trouble logs nothing here.
async fn report_readiness(pools: Vec<Pool>) {
    // Each pool's workers always running, and all pools' together.
    let wants: Vec<usize> = pools
        .iter()
        .map(|p| p.config().min_workers.min(p.config().workers))
        .collect();
    let wanted = wants.iter().sum();
    let mut said = None;
    loop {
        let changed = futures_util::future::select_all(pools.iter().map(|p| Box::pin(p.changed())));
        if pools.iter().any(Pool::is_stopping) {
            return;
        }
        let mut now = (0, 0);
        for (pool, want) in pools.iter().zip(&wants) {
            let status = pool.status();
            now.0 += status.live.min(*want);
            now.1 += status.failing;
        }
        if said != Some(now) {
            let (ready, failing) = now;
            if failing > 0 {
                tracing::warn!(
                    "{ready} of {} ready; {failing} failing to boot",
                    plural(wanted, "worker")
                );
                said = Some(now);
            } else if ready == wanted {
                tracing::info!("{ready} of {} ready", plural(wanted, "worker"));
                crate::systemd::ready(&format!("{ready} of {} ready", plural(wanted, "worker")));
                said = Some(now);
            }
        }
        changed.await;
    }
}

/// Debug mode's readiness: once the trial worker has booted (no worker
/// waits for requests; each boots for its own), and whenever the script
/// fails to boot until it boots again.
async fn report_debug_readiness(pool: Pool) {
    let mut said = None;
    loop {
        let changed = pool.changed();
        if pool.is_stopping() {
            return;
        }
        let failing = pool.status().failing > 0;
        let booted = pool.settings().is_some();
        if failing && said != Some(false) {
            tracing::warn!("debug mode: the worker script fails to boot");
            said = Some(false);
        } else if booted && !failing && said != Some(true) {
            tracing::info!("debug mode: ready; each request boots its own worker");
            crate::systemd::ready("debug mode: ready");
            said = Some(true);
        }
        changed.await;
    }
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// The user workers run as. As root, one must be named: PHP apps are not
/// run as root by accident. As anyone else, workers run as Hearth does.
pub(crate) fn worker_user(spec: Option<&str>) -> anyhow::Result<Option<hearth_pool::WorkerUser>> {
    let root = rustix::process::geteuid().is_root();
    let Some(spec) = spec else {
        if root {
            bail!(
                "hearth serve is running as root, and would run PHP as root: name the workers' \
                 user with --user (e.g. --user www-data), or --user root to really run PHP as root"
            );
        }
        return Ok(None);
    };
    let user = hearth_pool::WorkerUser::lookup(spec).map_err(|e| anyhow::anyhow!("--user {e}"))?;
    if !root {
        if user.uid == rustix::process::geteuid().as_raw() {
            return Ok(None);
        }
        bail!("--user {spec}: only root can run workers as another user");
    }
    if user.is_root() {
        tracing::warn!("workers run as root (--user {spec})");
        return Ok(None);
    }
    Ok(Some(user))
}

/// Reloads the workers (then a mixed site's php-fpm) on SIGHUP and, with
/// `--watch`, when a PHP file under the watched directory changes. Triggers that arrive together
/// (an editor saving several files) make one reload.
///
/// The watched directory is the one the script (or `--watch-dir`) leads
/// to now: after any reload, also one asked for over the control socket,
/// the watcher moves to where a switched symlink points. Switching such a
/// symlink is itself a change that reloads.
async fn reloader(
    pool: Option<Pool>,
    watch: Option<Option<PathBuf>>,
    classic: Option<Arc<crate::classic::Classic>>,
    others: Vec<(String, Pool)>,
    classic_pools: Arc<crate::control::ClassicPools>,
) {
    use tokio::signal::unix::{signal, SignalKind};
    let (tx, mut rx) = tokio::sync::mpsc::channel::<String>(8);
    match signal(SignalKind::hangup()) {
        Ok(mut hup) => {
            let tx = tx.clone();
            tokio::spawn(async move {
                while hup.recv().await.is_some() {
                    let _ = tx.try_send("SIGHUP received".to_owned());
                }
            });
        }
        Err(e) => tracing::warn!("cannot listen for SIGHUP, reloads need a restart: {e}"),
    }
    let Some(pool) = pool else {
        // The default pool is a classic site: the other pools only.
        while let Some(why) = rx.recv().await {
            tokio::time::sleep(Duration::from_millis(200)).await;
            while rx.try_recv().is_ok() {}
            let _reloading = crate::systemd::Reloading::begin();
            reload_others(&why, &others, &classic_pools).await;
        }
        return;
    };
    let mut watching = watch.map(|dir| Watching {
        dir,
        targets: None,
        _watcher: None,
    });
    if let Some(w) = &mut watching {
        w.follow(&pool, &tx);
    }
    let (mut seen, _) = pool.reloads();
    loop {
        let (count, reloaded) = pool.reloads();
        if count != seen {
            seen = count;
            if let Some(w) = &mut watching {
                w.follow(&pool, &tx);
            }
        }
        let why = tokio::select! {
            why = rx.recv() => why,
            () = reloaded => continue,
        };
        let Some(why) = why else { break };
        tokio::time::sleep(Duration::from_millis(200)).await;
        while rx.try_recv().is_ok() {}
        // A mixed site's root and php-fpm follow the workers (a switched
        // `current` link moves both).
        let classic = classic.as_ref();
        if classic.is_some() {
            tracing::info!("{why}: reloading the workers and php-fpm");
        } else {
            tracing::info!("{why}: reloading the workers");
        }
        let _reloading = crate::systemd::Reloading::begin();
        match pool.reload().await {
            Ok(paths) => {
                tracing::info!("reload done: every worker runs {}", paths.script.display());
                if let Some(classic) = classic {
                    // Logs its outcome itself.
                    let _ = classic.reload().await;
                }
            }
            Err(e) => tracing::error!(
                "reload failed, the old workers keep serving{}: {e}",
                if classic.is_some() {
                    " (and php-fpm the old root)"
                } else {
                    ""
                }
            ),
        }
        reload_others(&why, &others, &classic_pools).await;
    }
}

/// Reloads the pools other than the default worker pool, each on its
/// own: the other worker pools, then the classic ones' php-fpm.
async fn reload_others(
    why: &str,
    others: &[(String, Pool)],
    classic_pools: &crate::control::ClassicPools,
) {
    for (name, other) in others {
        match other.reload().await {
            Ok(paths) => tracing::info!(
                "reload done: every worker of pool {name} runs {}",
                paths.script.display()
            ),
            Err(e) => {
                tracing::error!("reload of pool {name} failed, its old workers keep serving: {e}")
            }
        }
    }
    for (name, classic) in classic_pools {
        tracing::info!("{why}: reloading pool {name}'s php-fpm");
        // Logs its outcome itself.
        let _ = classic.reload().await;
    }
}

/// `--watch`: what is watched, and the watcher, replaced when a reload
/// finds that the paths lead somewhere else.
struct Watching {
    /// `--watch-dir` as given; none: the script's directory.
    dir: Option<PathBuf>,
    targets: Option<WatchTargets>,
    _watcher: Option<notify::RecommendedWatcher>,
}

/// Where changes reload the workers (or, in classic mode, php-fpm).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WatchTargets {
    /// The real directory watched for changed PHP files, recursively.
    pub dir: PathBuf,
    /// Symlinks on the way to it (a `current` link to a release): a change
    /// to one of them (a deploy switching it) reloads too.
    pub links: Vec<PathBuf>,
}

impl Watching {
    /// Watches what the paths lead to now, if that changed.
    fn follow(&mut self, pool: &Pool, tx: &tokio::sync::mpsc::Sender<String>) {
        let given = match &self.dir {
            Some(dir) => dir.clone(),
            None => pool
                .config()
                .script
                .parent()
                .map_or_else(|| PathBuf::from("/"), Path::to_path_buf),
        };
        let dir = std::fs::canonicalize(&given).unwrap_or_else(|_| {
            pool.paths()
                .script
                .parent()
                .unwrap_or(Path::new("/"))
                .into()
        });
        // The script itself may be a link too.
        let through = match &self.dir {
            Some(dir) => dir.clone(),
            None => pool.config().script.clone(),
        };
        let targets = WatchTargets {
            dir,
            links: symlinks_on(&through),
        };
        if self.targets.as_ref() == Some(&targets) {
            return;
        }
        self._watcher = None;
        match watch_php_files(&targets, tx.clone()) {
            Ok(watcher) => {
                tracing::info!("watching {} for changed PHP files", targets.dir.display());
                self._watcher = Some(watcher);
            }
            Err(e) => tracing::error!("cannot watch {}: {e}", targets.dir.display()),
        }
        self.targets = Some(targets);
    }
}

/// The symlinks among `path` and its ancestors.
pub(crate) fn symlinks_on(path: &Path) -> Vec<PathBuf> {
    path.ancestors()
        .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink()))
        .map(Path::to_path_buf)
        .collect()
}

/// Sends a message on `tx` when a `.php` file under the target directory
/// is written, created, renamed or removed, or when one of the target
/// links is replaced.
pub(crate) fn watch_php_files(
    targets: &WatchTargets,
    tx: tokio::sync::mpsc::Sender<String>,
) -> notify::Result<notify::RecommendedWatcher> {
    use notify::{EventKind, RecursiveMode, Watcher as _};
    let root = targets.dir.clone();
    let links = targets.links.clone();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        if matches!(event.kind, EventKind::Access(_) | EventKind::Other) {
            return;
        }
        if let Some(link) = event.paths.iter().find(|p| links.contains(p)) {
            let _ = tx.try_send(format!("{} switched", link.display()));
            return;
        }
        // Hidden files and directories (.git, editors' swap files) under
        // the watched directory do not count.
        let changed = event.paths.iter().find(|p| {
            p.starts_with(&root)
                && p.extension().is_some_and(|e| e == "php")
                && !p
                    .strip_prefix(&root)
                    .unwrap_or(p)
                    .components()
                    .any(|c| c.as_os_str().to_string_lossy().starts_with('.'))
        });
        if let Some(path) = changed {
            let _ = tx.try_send(format!("{} changed", path.display()));
        }
    })?;
    watcher.watch(&targets.dir, RecursiveMode::Recursive)?;
    // A link's directory, watched for the link alone; one already under
    // the recursive watch needs nothing more.
    let mut parents: Vec<&Path> = targets
        .links
        .iter()
        .filter_map(|link| link.parent())
        .filter(|parent| !parent.starts_with(&targets.dir))
        .collect();
    parents.dedup();
    for parent in parents {
        watcher.watch(parent, RecursiveMode::NonRecursive)?;
    }
    Ok(watcher)
}

/// Completes on the first SIGTERM or SIGINT. A second one kills the
/// workers (and a mixed site's php-fpm) and exits at once.
pub(crate) async fn shutdown_signal(
    pools: Vec<Pool>,
    stop: std::sync::Arc<tokio::sync::Notify>,
    classic: Vec<Arc<crate::classic::Classic>>,
) {
    let what = if classic.is_empty() {
        "the workers"
    } else {
        "the workers and php-fpm"
    };
    shutdown_signal_then(stop, what, move || {
        for pool in &pools {
            pool.kill_all();
        }
        for classic in &classic {
            classic.kill_now();
        }
    })
    .await;
}

/// Completes on the first SIGTERM or SIGINT (or `hearth stop`). A second
/// signal runs `kill` (what kills `what`: the workers, php-fpm) and exits
/// at once.
pub(crate) async fn shutdown_signal_then(
    stop: std::sync::Arc<tokio::sync::Notify>,
    what: &'static str,
    kill: impl FnOnce() + Send + 'static,
) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::error!("cannot listen for signals; stop with SIGKILL");
        return std::future::pending().await;
    };
    let name = tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
        () = stop.notified() => "hearth stop",
    };
    tracing::info!("{name} received: shutting down gracefully (send it again to stop at once)");
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        tracing::warn!("second signal: killing {what} and stopping now");
        kill();
        std::process::exit(130);
    });
}

mod assets {
    pub use crate::assets::extract;

    pub fn extract_demo() -> std::io::Result<std::path::PathBuf> {
        Ok(extract()?.join("demo/worker.php"))
    }
}
