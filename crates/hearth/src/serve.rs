//! `hearth serve`: flags, config file and defaults resolved into one
//! setup, then the pool and the HTTP front wired together.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context as _};
use hearth_http::ServeConfig;
use hearth_pool::{Pool, PoolConfig};
use tokio::net::TcpListener;

use crate::config::{FileConfig, Seconds, ServeSection, Size};

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Worker script: boots the app and calls Hearth\Worker::serve().
    /// Without one, Hearth serves its built-in demo.
    script: Option<PathBuf>,
    /// Address to listen on [default: 127.0.0.1:8080]
    #[arg(long, short)]
    listen: Option<SocketAddr>,
    /// PEM certificate chain: serve HTTPS (HTTP/2 and HTTP/1.1, by ALPN) instead
    /// of plain HTTP; needs --tls-key
    #[arg(long, value_name = "PATH")]
    tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert
    #[arg(long, value_name = "PATH")]
    tls_key: Option<PathBuf>,
    /// Without TLS, also serve HTTP/2 to clients that start with its preface
    /// (h2c, prior knowledge)
    #[arg(long)]
    h2c: bool,
    /// Worker processes (at most, with --min-workers) [default: one per CPU]
    #[arg(long, short, visible_alias = "max-workers")]
    workers: Option<usize>,
    /// Requests that may wait for a worker at once; more get 503 at once;
    /// 0: no limit but --queue-timeout [default: 1024]
    #[arg(long, value_name = "N")]
    max_queue: Option<usize>,
    /// Workers always running; up to --workers, extra ones start when requests
    /// wait and stop after --scale-down-after idle [default: --workers]
    #[arg(long, value_name = "N")]
    min_workers: Option<usize>,
    /// How long an extra worker may stay idle before it stops [default: 10s]
    #[arg(long, value_name = "DURATION")]
    scale_down_after: Option<Seconds>,
    /// PHP binary for workers; php-cgi gives header(), cookies and sessions [default: php-cgi]
    #[arg(long)]
    php: Option<PathBuf>,
    /// TOML file with the same options under [serve]
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// Largest request body; larger ones get 413 [default: 8M]
    #[arg(long, value_name = "SIZE")]
    max_body_size: Option<Size>,
    /// Raw request bodies up to SIZE stay in memory; larger ones are spooled to a
    /// temporary file the worker reads; 0: every body goes to a file [default: 64K]
    #[arg(long, value_name = "SIZE")]
    body_buffer_size: Option<Size>,
    /// Longest request line; longer ones get 414 [default: 8K]
    #[arg(long, value_name = "SIZE")]
    max_request_line: Option<Size>,
    /// Largest header section; larger ones get 431 [default: 32K]
    #[arg(long, value_name = "SIZE")]
    max_header_size: Option<Size>,
    /// Most header lines in a request; more get 431 [default: 100]
    #[arg(long, value_name = "N")]
    max_headers: Option<usize>,
    /// How long a client has to send a request head; 408 after it [default: 60s]
    #[arg(long, value_name = "DURATION")]
    header_timeout: Option<Seconds>,
    /// Longest pause while a request body arrives; 408 after it [default: 60s]
    #[arg(long, value_name = "DURATION")]
    body_timeout: Option<Seconds>,
    /// How long an idle connection is kept open between requests; 0: no keep-alive [default: 75s]
    #[arg(long, value_name = "DURATION")]
    keep_alive_timeout: Option<Seconds>,
    /// Most connections open at once; more wait in the listen backlog [default: 10000]
    #[arg(long, value_name = "N")]
    max_connections: Option<usize>,
    /// SERVER_NAME given to PHP [default: localhost]
    #[arg(long)]
    server_name: Option<String>,
    /// Document root: GET and HEAD for files in it are served from disk, everything else goes to PHP [default: none]
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// Do not gzip or brotli-compress responses on the fly (precompressed .br/.gz files are still served)
    #[arg(long)]
    no_compression: bool,
    /// How long a request waits for a free worker before a 503 [default: 30s]
    #[arg(long, value_name = "DURATION")]
    queue_timeout: Option<Seconds>,
    /// How long a worker may take to boot [default: 60s]
    #[arg(long, value_name = "DURATION")]
    boot_timeout: Option<Seconds>,
    /// On SIGTERM/SIGINT, how long in-flight requests have to finish [default: 30s]
    #[arg(long, value_name = "DURATION")]
    grace_period: Option<Seconds>,
    /// On stop, how long workers have to finish and exit before SIGTERM [default: 10s]
    #[arg(long, value_name = "DURATION")]
    stop_timeout: Option<Seconds>,
    /// Hard limit on a request once a worker has it: the client gets 504 and the
    /// worker is stopped (SIGTERM, then SIGKILL) and replaced; 0: none [default: 60s]
    #[arg(long, value_name = "DURATION")]
    request_timeout: Option<Seconds>,
    /// Replace a worker after it served N requests (up to 10% more, so workers do
    /// not all restart together); 0: never [default: 0]
    #[arg(long, value_name = "N")]
    max_requests: Option<u64>,
    /// Replace a worker, between requests, once its resident memory passes SIZE;
    /// 0: never [default: 0]
    #[arg(long, value_name = "SIZE")]
    max_memory: Option<Size>,
    /// Replace a worker, between requests, once it is this old [default: never]
    #[arg(long, value_name = "DURATION")]
    ttl: Option<Seconds>,
    /// Replace a worker that stayed idle this long [default: never]
    #[arg(long, value_name = "DURATION")]
    idle_ttl: Option<Seconds>,
    /// Reload the workers when a .php file under the script's directory changes
    /// (for development)
    #[arg(long)]
    watch: bool,
    /// With --watch, the directory to watch instead of the script's
    #[arg(long, value_name = "DIR", requires = "watch")]
    watch_dir: Option<PathBuf>,
    /// A proxy (address or network) whose X-Forwarded-For and X-Forwarded-Proto
    /// are believed: REMOTE_ADDR and HTTPS then describe the client (repeatable)
    #[arg(long = "trusted-proxy", value_name = "CIDR", value_parser = hearth_http::parse_trusted_proxy)]
    trusted_proxies: Vec<ipnet::IpNet>,
    /// Run workers as this user (name, UID or UID:GID). Required when Hearth runs
    /// as root: PHP never runs as root unless `--user root` says so
    #[arg(long, value_name = "USER")]
    user: Option<String>,
    /// Extra php.ini setting for workers (repeatable)
    #[arg(short = 'd', long = "ini", value_name = "NAME=VALUE", value_parser = parse_ini)]
    ini: Vec<(String, String)>,
    /// Threads for HTTP and worker I/O [default: one per two CPUs]
    #[arg(long)]
    threads: Option<usize>,
    /// Leave workers under the normal scheduler instead of SCHED_BATCH
    #[arg(long)]
    no_batch_scheduling: bool,
    /// Never queue a request on a busy worker, even when others wait
    #[arg(long)]
    no_pipelining: bool,
    /// Control socket for `hearth status`, `reload` and `stop`
    /// [default: $XDG_RUNTIME_DIR/hearth/ADDR.sock, else /tmp/hearth-UID/ADDR.sock]
    #[arg(long, value_name = "PATH")]
    control_socket: Option<PathBuf>,
    /// Serve /metrics, /healthz and /readyz on this address, never on the public port [default: off]
    #[arg(long, value_name = "IP:PORT")]
    admin: Option<SocketAddr>,
    /// Access log: off, common or json [default: off]
    #[arg(long, value_name = "FORMAT")]
    access_log: Option<crate::observe::AccessLogChoice>,
    /// Write the access log to this file (appending) instead of standard output
    #[arg(long, value_name = "PATH")]
    access_log_file: Option<PathBuf>,
}

pub(crate) fn parse_ini(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((name, value)) if !name.trim().is_empty() => {
            Ok((name.trim().to_owned(), value.to_owned()))
        }
        _ => Err(format!("{s:?} is not NAME=VALUE")),
    }
}

/// Everything `hearth serve` needs, resolved.
#[derive(Debug)]
struct Setup {
    listen: SocketAddr,
    threads: usize,
    pool: PoolConfig,
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
}

fn resolve(args: ServeArgs) -> anyhow::Result<Setup> {
    let file = match &args.config {
        Some(path) => FileConfig::load(path)?.serve,
        None => ServeSection::default(),
    };
    let observe = crate::observe::ObserveSetup::resolve(
        args.control_socket,
        args.admin,
        args.access_log,
        args.access_log_file,
        &file,
    )?;
    let (script, demo) = match args.script.or(file.script) {
        Some(script) => (script, false),
        None => (assets::extract_demo()?, true),
    };
    // Kept as given (made absolute): the pool resolves symlinks at start
    // and again at every reload, so that a deploy that switches a
    // `current` link is picked up by the next reload.
    let script = std::path::absolute(&script)
        .with_context(|| format!("worker script {}", script.display()))?;
    let real = std::fs::canonicalize(&script)
        .with_context(|| format!("worker script {}", script.display()))?;
    if !real.is_file() {
        bail!("worker script {} is not a file", script.display());
    }
    let watch = match (args.watch, args.watch_dir) {
        (false, _) => None,
        (true, None) => Some(None),
        (true, Some(dir)) => {
            let dir = std::path::absolute(&dir)
                .with_context(|| format!("--watch-dir {}", dir.display()))?;
            std::fs::canonicalize(&dir)
                .with_context(|| format!("--watch-dir {}", dir.display()))?;
            Some(Some(dir))
        }
    };
    let listen = match (args.listen, file.listen) {
        (Some(addr), _) => addr,
        (None, Some(text)) => text
            .parse()
            .with_context(|| format!("listen address {text:?}"))?,
        (None, None) => SocketAddr::from(([127, 0, 0, 1], 8080)),
    };
    let workers = args
        .workers
        .or(file.workers)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    if workers == 0 {
        bail!("--workers must be at least 1");
    }
    let min_workers = args.min_workers.or(file.min_workers).unwrap_or(workers);
    if min_workers == 0 || min_workers > workers {
        bail!("--min-workers must be between 1 and --workers ({workers}), not {min_workers}");
    }
    let php = args
        .php
        .or(file.php)
        .unwrap_or_else(|| PathBuf::from("php-cgi"));
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    // One thread does HTTP and worker I/O for two CPUs' worth of PHP: on
    // the 2-core machine of the benchmark one thread beat two by a third,
    // because the workers need the other core.
    let threads = args.threads.or(file.threads).unwrap_or((cpus / 2).max(1));
    if threads == 0 {
        bail!("--threads must be at least 1");
    }
    let duration = |flag: Option<Seconds>, file: Option<Seconds>, default: u64| {
        flag.or(file).map_or(Duration::from_secs(default), |s| s.0)
    };

    let user = worker_user(args.user.as_deref().or(file.user.as_deref()))?;
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
    let mut pool = PoolConfig::new(php, &script, workers);
    pool.queue_timeout = duration(args.queue_timeout, file.queue_timeout, 30);
    pool.max_queue = args.max_queue.or(file.max_queue).unwrap_or(1024);
    pool.boot_timeout = duration(args.boot_timeout, file.boot_timeout, 60);
    pool.stop_timeout = duration(args.stop_timeout, file.stop_timeout, 10);
    pool.min_workers = min_workers;
    pool.user = user;
    pool.scale_down_after = duration(args.scale_down_after, file.scale_down_after, 10);
    pool.max_requests = args.max_requests.or(file.max_requests).unwrap_or(0);
    pool.max_memory = args.max_memory.or(file.max_memory).map_or(0, |s| s.0);
    let nonzero = |d: Option<Seconds>| d.map(|s| s.0).filter(|d| !d.is_zero());
    pool.ttl = nonzero(args.ttl.or(file.ttl));
    pool.idle_ttl = nonzero(args.idle_ttl.or(file.idle_ttl));
    pool.ini = file.ini.into_iter().chain(args.ini).collect();
    pool.batch_scheduling = !args.no_batch_scheduling && file.batch_scheduling.unwrap_or(true);
    pool.pipelining = !args.no_pipelining && file.pipelining.unwrap_or(true);
    pool.env = file
        .env
        .into_iter()
        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        .collect();

    // As the script: resolved by the pool, at start and at every reload.
    pool.document_root = match args.root.or(file.root) {
        Some(root) => {
            let real = std::fs::canonicalize(&root)
                .with_context(|| format!("document root {}", root.display()))?;
            if !real.is_dir() {
                bail!("document root {} is not a directory", root.display());
            }
            Some(std::path::absolute(&root)?)
        }
        None => None,
    };
    let mut http = ServeConfig::new();
    http.compression = !args.no_compression && file.compression.unwrap_or(true);
    http.trusted_proxies = args.trusted_proxies.clone();
    for text in &file.trusted_proxies {
        http.trusted_proxies.push(
            hearth_http::parse_trusted_proxy(text)
                .map_err(|e| anyhow::anyhow!("trusted_proxies in the config file: {e}"))?,
        );
    }
    if let Some(name) = args.server_name.or(file.server_name) {
        http.server_name = name;
    }
    if let Some(size) = args.max_body_size.or(file.max_body_size) {
        if size.0 == 0 {
            bail!("--max-body-size must be more than 0");
        }
        http.max_body_size = size.0;
    }
    if let Some(size) = args.body_buffer_size.or(file.body_buffer_size) {
        http.body_buffer_size = usize::try_from(size.0).unwrap_or(usize::MAX);
    }
    let positive = |value: Option<u64>, flag: &str| match value {
        Some(0) => bail!("--{flag} must be more than 0"),
        Some(n) => Ok(Some(usize::try_from(n).unwrap_or(usize::MAX))),
        None => Ok(None),
    };
    let size = |flag: Option<Size>, file: Option<Size>| flag.or(file).map(|s| s.0);
    let count = |flag: Option<usize>, file: Option<usize>| flag.or(file).map(|n| n as u64);
    if let Some(n) = positive(
        size(args.max_request_line, file.max_request_line),
        "max-request-line",
    )? {
        http.max_request_line = n;
    }
    if let Some(n) = positive(
        size(args.max_header_size, file.max_header_size),
        "max-header-size",
    )? {
        http.max_header_size = n;
    }
    if let Some(n) = positive(count(args.max_headers, file.max_headers), "max-headers")? {
        http.max_headers = n;
    }
    if let Some(n) = positive(
        count(args.max_connections, file.max_connections),
        "max-connections",
    )? {
        http.max_connections = n;
    }
    http.header_timeout = duration(args.header_timeout, file.header_timeout, 60);
    http.body_timeout = duration(args.body_timeout, file.body_timeout, 60);
    http.keep_alive_timeout = duration(args.keep_alive_timeout, file.keep_alive_timeout, 75);
    if http.header_timeout.is_zero() || http.body_timeout.is_zero() {
        bail!("--header-timeout and --body-timeout must be more than 0");
    }
    http.grace_period = duration(args.grace_period, file.grace_period, 30);
    http.request_timeout =
        Some(duration(args.request_timeout, file.request_timeout, 60)).filter(|d| !d.is_zero());
    http.tls = match (
        args.tls_cert.or(file.tls_cert),
        args.tls_key.or(file.tls_key),
    ) {
        (Some(cert), Some(key)) => Some(hearth_http::TlsConfig::from_pem_files(&cert, &key)?),
        (Some(_), None) => bail!("--tls-cert needs --tls-key (tls_key in the config file)"),
        (None, Some(_)) => bail!("--tls-key needs --tls-cert (tls_cert in the config file)"),
        (None, None) => None,
    };
    http.h2c = args.h2c || file.h2c.unwrap_or(false);
    if http.h2c && http.tls.is_some() {
        bail!("--h2c is for plain HTTP: over TLS, clients choose HTTP/2 by ALPN");
    }
    Ok(Setup {
        observe,
        watch,
        listen,
        threads,
        pool,
        http,
        demo,
        _private_assets: private_assets,
    })
}

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let setup = resolve(args)?;
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

async fn serve(setup: Setup) -> anyhow::Result<()> {
    let listener = TcpListener::bind(setup.listen)
        .await
        .with_context(|| format!("cannot listen on {}", setup.listen))?;
    let addr = listener.local_addr()?;
    let control = crate::observe::bind_control(&setup.observe, addr)?;
    let pool = Pool::start(setup.pool.clone()).await?;
    let php = pool.php();
    tracing::info!(
        "hearth {} starting {} on {}://{addr} with {} ({} {}, {})",
        env!("CARGO_PKG_VERSION"),
        if setup.demo {
            "the built-in demo".to_owned()
        } else if pool.paths().script == setup.pool.script {
            setup.pool.script.display().to_string()
        } else {
            format!(
                "{} ({})",
                setup.pool.script.display(),
                pool.paths().script.display()
            )
        },
        if setup.http.tls.is_some() {
            "https"
        } else {
            "http"
        },
        if setup.pool.min_workers < setup.pool.workers {
            format!(
                "{} to {} workers",
                setup.pool.min_workers, setup.pool.workers
            )
        } else {
            plural(setup.pool.workers, "worker")
        },
        php.binary.display(),
        php.version,
        php.sapi,
    );
    if !php.supports_headers() {
        tracing::warn!(
            "{} is the CLI SAPI: header(), setcookie() and sessions are ignored there; use php-cgi for legacy apps (PSR-7 apps are fine)",
            php.binary.display()
        );
    }
    let observing = match crate::observe::start(&setup.observe, control, addr, &pool).await {
        Ok(observing) => observing,
        Err(e) => {
            pool.shutdown().await;
            return Err(e);
        }
    };
    tokio::spawn(reloader(pool.clone(), setup.watch.clone()));
    tokio::spawn(report_readiness(
        pool.clone(),
        setup.pool.min_workers.min(setup.pool.workers),
    ));
    // A script that cannot boot at start ends `hearth serve` with the
    // reason, instead of leaving a server that answers 503 forever. Once a
    // worker has booted, failures are retried with a backoff instead.
    let (gave_up_tx, gave_up) = tokio::sync::oneshot::channel();
    let starting = pool.clone();
    tokio::spawn(async move {
        if let Err(e) = starting.wait_started(START_ATTEMPTS).await {
            let _ = gave_up_tx.send(e);
        }
    });
    let failed_start = std::sync::Arc::new(std::sync::Mutex::new(None));

    let stopping = observing.stopping.clone();
    let (pool_for_signals, observing_stop) = (pool.clone(), observing.stop.clone());
    let failure = failed_start.clone();
    let shutdown = async move {
        tokio::select! {
            () = shutdown_signal(pool_for_signals, observing_stop) => {}
            Ok(e) = gave_up => {
                tracing::error!("stopping: the worker script cannot boot");
                *failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
            }
        }
        stopping.store(true, std::sync::atomic::Ordering::Release);
    };
    hearth_http::serve(
        listener,
        pool.clone(),
        ServeConfig {
            observer: observing.observer.clone(),
            ..setup.http
        },
        shutdown,
    )
    .await?;
    pool.shutdown().await;
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
async fn report_readiness(pool: Pool, wanted: usize) {
    let mut said = None;
    loop {
        let changed = pool.changed();
        if pool.is_stopping() {
            return;
        }
        let status = pool.status();
        let now = (status.live.min(wanted), status.failing);
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
                said = Some(now);
            }
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
fn worker_user(spec: Option<&str>) -> anyhow::Result<Option<hearth_pool::WorkerUser>> {
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

/// Reloads the workers on SIGHUP and, with `--watch`, when a PHP file
/// under the watched directory changes. Triggers that arrive together
/// (an editor saving several files) make one reload.
///
/// The watched directory is the one the script (or `--watch-dir`) leads
/// to now: after any reload, also one asked for over the control socket,
/// the watcher moves to where a switched symlink points. Switching such a
/// symlink is itself a change that reloads.
async fn reloader(pool: Pool, watch: Option<Option<PathBuf>>) {
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
        tracing::info!("{why}: reloading the workers");
        match pool.reload().await {
            Ok(paths) => {
                tracing::info!("reload done: every worker runs {}", paths.script.display())
            }
            Err(e) => tracing::error!("reload failed, the old workers keep serving: {e}"),
        }
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

/// Where changes reload the workers.
#[derive(Debug, Clone, PartialEq, Eq)]
struct WatchTargets {
    /// The real directory watched for changed PHP files, recursively.
    dir: PathBuf,
    /// Symlinks on the way to it (a `current` link to a release): a change
    /// to one of them (a deploy switching it) reloads too.
    links: Vec<PathBuf>,
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
fn symlinks_on(path: &Path) -> Vec<PathBuf> {
    path.ancestors()
        .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink()))
        .map(Path::to_path_buf)
        .collect()
}

/// Sends a message on `tx` when a `.php` file under the target directory
/// is written, created, renamed or removed, or when one of the target
/// links is replaced.
fn watch_php_files(
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
/// workers and exits at once.
async fn shutdown_signal(pool: Pool, stop: std::sync::Arc<tokio::sync::Notify>) {
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
        tracing::warn!("second signal: killing the workers and stopping now");
        pool.kill_all();
        std::process::exit(130);
    });
}

mod assets {
    pub use crate::assets::extract;

    pub fn extract_demo() -> std::io::Result<std::path::PathBuf> {
        Ok(extract()?.join("demo/worker.php"))
    }
}
