//! `hearth serve`: flags, config file and defaults resolved into one
//! setup, then the pool and the HTTP front wired together.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context as _};
use hearth_http::{Script, ServeConfig};
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
    /// Worker processes [default: one per CPU]
    #[arg(long, short)]
    workers: Option<usize>,
    /// PHP binary for workers; php-cgi gives header(), cookies and sessions [default: php-cgi]
    #[arg(long)]
    php: Option<PathBuf>,
    /// TOML file with the same options under [serve]
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// Largest request body; larger ones get 413 [default: 8M]
    #[arg(long, value_name = "SIZE")]
    max_body_size: Option<Size>,
    /// SERVER_NAME given to PHP [default: localhost]
    #[arg(long)]
    server_name: Option<String>,
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
}

fn resolve(args: ServeArgs) -> anyhow::Result<Setup> {
    let file = match &args.config {
        Some(path) => FileConfig::load(path)?.serve,
        None => ServeSection::default(),
    };
    let (script, demo) = match args.script.or(file.script) {
        Some(script) => (script, false),
        None => (assets::extract_demo()?, true),
    };
    let script = std::fs::canonicalize(&script)
        .with_context(|| format!("worker script {}", script.display()))?;
    if !script.is_file() {
        bail!("worker script {} is not a file", script.display());
    }
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

    let mut pool = PoolConfig::new(php, &script, workers);
    pool.queue_timeout = duration(args.queue_timeout, file.queue_timeout, 30);
    pool.boot_timeout = duration(args.boot_timeout, file.boot_timeout, 60);
    pool.stop_timeout = duration(args.stop_timeout, file.stop_timeout, 10);
    pool.ini = file.ini.into_iter().chain(args.ini).collect();
    pool.batch_scheduling = !args.no_batch_scheduling && file.batch_scheduling.unwrap_or(true);
    pool.pipelining = !args.no_pipelining && file.pipelining.unwrap_or(true);
    pool.env = file
        .env
        .into_iter()
        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        .collect();

    let mut http = ServeConfig::new(script_info(&script));
    if let Some(name) = args.server_name.or(file.server_name) {
        http.server_name = name;
    }
    if let Some(size) = args.max_body_size.or(file.max_body_size) {
        if size.0 == 0 {
            bail!("--max-body-size must be more than 0");
        }
        http.max_body_size = size.0;
    }
    http.grace_period = duration(args.grace_period, file.grace_period, 30);
    Ok(Setup {
        listen,
        threads,
        pool,
        http,
        demo,
    })
}

/// The script as a front controller at the top of its directory, as nginx's
/// `try_files $uri /index.php$is_args$args` presents it.
fn script_info(script: &Path) -> Script {
    let root = script.parent().unwrap_or(Path::new("/"));
    let name = script
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    Script {
        filename: script.to_string_lossy().into_owned(),
        name: format!("/{name}"),
        document_root: root.to_string_lossy().into_owned(),
    }
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
    let pool = Pool::start(setup.pool.clone()).await?;
    let php = pool.php();
    tracing::info!(
        "hearth {} serving {} on http://{addr} with {} ({} {}, {})",
        env!("CARGO_PKG_VERSION"),
        if setup.demo {
            "the built-in demo".to_owned()
        } else {
            setup.pool.script.display().to_string()
        },
        plural(setup.pool.workers, "worker"),
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
    let ready = pool.clone();
    let workers = setup.pool.workers;
    tokio::spawn(async move {
        if ready.wait_ready(Duration::from_secs(3600)).await {
            tracing::info!("{} ready", plural(workers, "worker"));
        }
    });

    hearth_http::serve(
        listener,
        pool.clone(),
        setup.http,
        shutdown_signal(pool.clone()),
    )
    .await?;
    pool.shutdown().await;
    tracing::info!("stopped");
    Ok(())
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// Completes on the first SIGTERM or SIGINT. A second one kills the
/// workers and exits at once.
async fn shutdown_signal(pool: Pool) {
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
