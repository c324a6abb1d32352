//! `hearth serve`: its options resolved on disk (the script, the document
//! root, the certificate, the workers' user) into one setup, then the pool
//! and the HTTP front wired together.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context as _};
use hearth_http::{Script, ServeConfig};
use hearth_pool::{Pool, PoolConfig};
use tokio::net::TcpListener;

use crate::options::ServeOptions;

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
    /// Where `--watch` looks for changed PHP files.
    watch: Option<PathBuf>,
    /// Control socket, admin listener, access log.
    observe: crate::observe::ObserveSetup,
}

fn resolve(options: ServeOptions) -> anyhow::Result<Setup> {
    let observe = crate::observe::ObserveSetup::from_options(&options);
    let (script, demo) = match &options.script {
        Some(script) => (script.clone(), false),
        None => (assets::extract_demo()?, true),
    };
    let script = std::fs::canonicalize(&script)
        .with_context(|| format!("worker script {}", script.display()))?;
    if !script.is_file() {
        bail!("worker script {} is not a file", script.display());
    }
    let watch = match (options.watch, &options.watch_dir) {
        (false, _) => None,
        (true, None) => script.parent().map(Path::to_path_buf),
        (true, Some(dir)) => Some(
            std::fs::canonicalize(dir).with_context(|| format!("--watch-dir {}", dir.display()))?,
        ),
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
    let pool = options.pool_config(&script, user);

    let root = match &options.root {
        Some(root) => {
            let real = std::fs::canonicalize(root)
                .with_context(|| format!("document root {}", root.display()))?;
            if !real.is_dir() {
                bail!("document root {} is not a directory", root.display());
            }
            Some(real)
        }
        None => None,
    };
    let tls = match (&options.tls_cert, &options.tls_key) {
        (Some(cert), Some(key)) => Some(hearth_http::TlsConfig::from_pem_files(cert, key)?),
        // `validate()` has refused one without the other.
        _ => None,
    };
    let http = options.serve_config(script_info(&script, root.as_deref()), root, tls);
    Ok(Setup {
        observe,
        watch,
        listen: options.listen.0,
        threads: options.threads(),
        pool,
        http,
        demo,
        _private_assets: private_assets,
    })
}

/// The script as a front controller, as nginx's
/// `try_files $uri /index.php$is_args$args` presents it: `DOCUMENT_ROOT` is
/// the document root (without one, the script's directory), and
/// `SCRIPT_NAME` the script's path under it. A script outside the document
/// root (a worker script next to `public/`) keeps its real
/// `SCRIPT_FILENAME` and is named `/` and its file name, so that frameworks
/// that compare the two find the same base name.
fn script_info(script: &Path, document_root: Option<&Path>) -> Script {
    let root = document_root.unwrap_or(script.parent().unwrap_or(Path::new("/")));
    let name = match script.strip_prefix(root) {
        Ok(relative) => relative.to_string_lossy().into_owned(),
        Err(_) => script
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
    };
    Script {
        filename: script.to_string_lossy().into_owned(),
        name: format!("/{name}"),
        document_root: root.to_string_lossy().into_owned(),
    }
}

pub fn run(options: ServeOptions) -> anyhow::Result<()> {
    let setup = resolve(options)?;
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
        "hearth {} serving {} on {}://{addr} with {} ({} {}, {})",
        env!("CARGO_PKG_VERSION"),
        if setup.demo {
            "the built-in demo".to_owned()
        } else {
            setup.pool.script.display().to_string()
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
    let ready = pool.clone();
    let workers = setup.pool.min_workers.min(setup.pool.workers);
    tokio::spawn(async move {
        if ready.wait_ready(Duration::from_secs(3600)).await {
            tracing::info!("{} ready", plural(workers, "worker"));
        }
    });

    let stopping = observing.stopping.clone();
    let (pool_for_signals, observing_stop) = (pool.clone(), observing.stop.clone());
    let shutdown = async move {
        shutdown_signal(pool_for_signals, observing_stop).await;
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
    Ok(())
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
async fn reloader(pool: Pool, watch: Option<PathBuf>) {
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
    // Kept alive as long as the reloader runs.
    let _watcher = watch.and_then(|dir| match watch_php_files(&dir, tx.clone()) {
        Ok(watcher) => {
            tracing::info!("watching {} for changed PHP files", dir.display());
            Some(watcher)
        }
        Err(e) => {
            tracing::error!("cannot watch {}: {e}", dir.display());
            None
        }
    });
    drop(tx);
    while let Some(why) = rx.recv().await {
        tokio::time::sleep(Duration::from_millis(200)).await;
        while rx.try_recv().is_ok() {}
        tracing::info!("{why}: reloading the workers");
        match pool.reload().await {
            Ok(()) => tracing::info!("reload done: every worker runs the current code"),
            Err(e) => tracing::error!("reload failed, the old workers keep serving: {e}"),
        }
    }
}

/// Sends a message on `tx` when a `.php` file under `dir` is written,
/// created, renamed or removed.
fn watch_php_files(
    dir: &Path,
    tx: tokio::sync::mpsc::Sender<String>,
) -> notify::Result<notify::RecommendedWatcher> {
    use notify::{EventKind, RecursiveMode, Watcher as _};
    let root = dir.to_path_buf();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        if matches!(event.kind, EventKind::Access(_) | EventKind::Other) {
            return;
        }
        // Hidden files and directories (.git, editors' swap files) under
        // the watched directory do not count.
        let changed = event.paths.iter().find(|p| {
            p.extension().is_some_and(|e| e == "php")
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
    watcher.watch(dir, RecursiveMode::Recursive)?;
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
