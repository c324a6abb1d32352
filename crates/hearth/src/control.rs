//! The control socket of `hearth serve` (and of `hearth work`, with
//! `--control-socket`): a unix socket (mode 0600) that `hearth status`,
//! `hearth reload` and `hearth stop` talk to.
//!
//! The protocol is line-delimited JSON: the client sends one request
//! line, `{"command":"status"}` (or `"reload"`, `"stop"`), and the server
//! answers with one line, `{"ok":true,...}` or `{"ok":false,"error":"..."}`.
//! After answering `stop`, the server keeps the connection open until it
//! exits, so that a client can wait for the end of the shutdown by
//! reading to end of file.

use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use hearth_pool::Pool;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Notify;

/// The longest request line accepted.
const MAX_REQUEST: u64 = 4096;

/// The default control socket of a server listening on `listen`, in
/// [`default_dir`]: `ADDR.sock` (`127.0.0.1:8080.sock`), or for a unix
/// socket its path with `/` as `-` (`unix:run-hearth-hearth.sock.sock` for
/// `unix:/run/hearth/hearth.sock`). With `create`, makes the directory (mode 0700) if it
/// is missing. Either way, a directory that is there must be this user's
/// own, which nobody else can write to ([`check_private`]): in `/tmp`,
/// another user could have made it first, to keep the server from
/// starting or to put a socket of their own in its place.
pub fn default_path(listen: &hearth_http::ListenAddr, create: bool) -> anyhow::Result<PathBuf> {
    let dir = default_dir();
    if create {
        use std::os::unix::fs::DirBuilderExt as _;
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("control socket directory {}", dir.display()))
            }
        }
    }
    match std::fs::symlink_metadata(&dir) {
        Ok(meta) => check_private(&dir, &meta)?,
        // `hearth status` and friends say they cannot reach the socket.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !create => {}
        Err(e) => {
            return Err(e).with_context(|| format!("control socket directory {}", dir.display()))
        }
    }
    let name = match listen {
        hearth_http::ListenAddr::Tcp(addr) => format!("{addr}.sock"),
        hearth_http::ListenAddr::Unix(path) => format!(
            "unix:{}.sock",
            path.to_string_lossy()
                .trim_start_matches('/')
                .replace('/', "-")
        ),
    };
    Ok(dir.join(name))
}

/// The directory of default control sockets: `/run/hearth` for root (where
/// system services keep theirs; root's `XDG_RUNTIME_DIR`, when it has one,
/// is removed when root's last login session ends), else
/// `$XDG_RUNTIME_DIR/hearth` when `XDG_RUNTIME_DIR` is a directory of this
/// user's (a `su` may leave another user's), else `/tmp/hearth-UID`.
fn default_dir() -> PathBuf {
    let uid = rustix::process::geteuid().as_raw();
    if uid == 0 && Path::new("/run").is_dir() {
        return PathBuf::from("/run/hearth");
    }
    let runtime = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|d| d.is_absolute())
        .filter(|d| std::fs::metadata(d).is_ok_and(|m| m.is_dir() && m.uid() == uid));
    match runtime {
        Some(runtime) => runtime.join("hearth"),
        None => PathBuf::from(format!("/tmp/hearth-{uid}")),
    }
}

/// Refuses a control socket directory that is not a directory of this
/// user's (a link, another user's), or that its group or others can
/// write to, with a message that says which and what to do.
fn check_private(dir: &Path, meta: &std::fs::Metadata) -> anyhow::Result<()> {
    let uid = rustix::process::geteuid().as_raw();
    let what_to_do = "remove it, or choose a path with --control-socket";
    if !meta.is_dir() {
        bail!(
            "control socket directory {} is not a directory (a {}): {what_to_do}",
            dir.display(),
            if meta.file_type().is_symlink() {
                "symbolic link"
            } else {
                "file"
            }
        );
    }
    if meta.uid() != uid {
        bail!(
            "control socket directory {} is owned by {}, not by {} who runs hearth: another user may \
             have made it to keep this server from starting or to stand in for it; {what_to_do}",
            dir.display(),
            describe_user(meta.uid()),
            describe_user(uid),
        );
    }
    if meta.mode() & 0o022 != 0 {
        bail!(
            "control socket directory {} can be written by its group or by others (mode {:04o}): \
             make it mode 0700, or choose a path with --control-socket",
            dir.display(),
            meta.mode() & 0o7777
        );
    }
    Ok(())
}

/// `www-data (uid 33)`, or `uid 1234` for a user `/etc/passwd` does not
/// name.
fn describe_user(uid: u32) -> String {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let name = passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        (fields.nth(1)?.parse::<u32>().ok()? == uid).then(|| name.to_owned())
    });
    match name {
        Some(name) => format!("{name} (uid {uid})"),
        None => format!("uid {uid}"),
    }
}

/// A bound control socket; its file is removed when dropped.
#[derive(Debug)]
pub struct ControlSocket {
    listener: std::os::unix::net::UnixListener,
    path: PathBuf,
    /// The socket file's inode: only that file is removed at exit, not
    /// one a later server put in its place.
    ino: u64,
}

impl ControlSocket {
    /// Binds `path` with mode 0600. A socket left there by a server that
    /// is gone is replaced; one that a running server answers on is an
    /// error.
    pub fn bind(path: &Path) -> anyhow::Result<ControlSocket> {
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            if !meta.file_type().is_socket() {
                bail!(
                    "control socket {}: the path exists and is not a socket",
                    path.display()
                );
            }
            match std::os::unix::net::UnixStream::connect(path) {
                Ok(_) => bail!(
                    "control socket {}: another hearth serve is running there (stop it, or choose \
                     another path with --control-socket)",
                    path.display()
                ),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    tracing::info!("removing the stale control socket {}", path.display());
                    let _ = std::fs::remove_file(path);
                }
                Err(_) => {}
            }
        }
        // Bound under a temporary name and renamed once its mode is 0600,
        // so that the socket is never reachable with a looser mode.
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = path.with_file_name(format!(".{name}.{}", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        let listener = std::os::unix::net::UnixListener::bind(&tmp)
            .with_context(|| format!("cannot create the control socket {}", path.display()))?;
        let placed = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))
            .and_then(|()| std::fs::rename(&tmp, path));
        if let Err(e) = placed {
            let _ = std::fs::remove_file(&tmp);
            return Err(e)
                .with_context(|| format!("cannot create the control socket {}", path.display()));
        }
        listener.set_nonblocking(true)?;
        let ino = std::fs::symlink_metadata(path)?.ino();
        Ok(ControlSocket {
            listener,
            path: path.to_path_buf(),
            ino,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Answers requests on the socket until the runtime ends; the file
    /// stays until this is dropped.
    pub fn serve(&self, state: Arc<ControlState>) -> anyhow::Result<()> {
        let listener = UnixListener::from_std(self.listener.try_clone()?)?;
        tokio::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, _)) => {
                        tokio::spawn(connection(stream, state.clone()));
                    }
                    Err(e) => {
                        tracing::error!("control socket: accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
        });
        Ok(())
    }
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        if std::fs::symlink_metadata(&self.path).is_ok_and(|m| m.ino() == self.ino) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// What runs the PHP of the server.
#[derive(Debug, Clone)]
pub enum Engine {
    /// Worker mode: the worker pool.
    Workers(Pool),
    /// Classic mode: the php-fpm pool and the site.
    Classic(Arc<crate::classic::Classic>),
    /// A mixed site: the worker pool (the front controller) and the
    /// php-fpm pool (the other scripts).
    Mixed(Pool, Arc<crate::classic::Classic>),
    /// Several pools (`[[serve.pool]]`): the default one first; the
    /// php-fpm pools of the classic ones by pool name.
    Pools(Arc<hearth_http::Pools>, Arc<ClassicPools>),
    /// Something that reports and reloads itself: `hearth work`.
    Other(Arc<dyn Controlled>),
}

/// The classic pools of `[[serve.pool]]`: each one's name and php-fpm.
pub type ClassicPools = Vec<(String, Arc<crate::classic::Classic>)>;

/// A boxed future, for [`Controlled`]'s methods.
pub type Boxed<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// What the control socket of a command other than `hearth serve` reports
/// and reloads.
pub trait Controlled: Send + Sync + std::fmt::Debug {
    /// The status report.
    fn status<'a>(&'a self, state: &'a ControlState) -> Boxed<'a, Value>;
    /// Reloads; the message for the client, or the error.
    fn reload(&self) -> Boxed<'_, Result<String, String>>;
    /// The job queues, with their counts and dead jobs, for the
    /// dashboard; none by default.
    fn queues(&self) -> Boxed<'_, Vec<Value>> {
        Box::pin(async { Vec::new() })
    }
    /// Jobs counts for the dashboard's sample of this second (no I/O).
    fn jobs_sample(&self) -> Option<Value> {
        None
    }
    /// An operator's action on a queue, from the dashboard.
    fn queue_action(
        &self,
        _action: hearth_http::dashboard::Action,
    ) -> Boxed<'_, Result<String, hearth_http::dashboard::Refusal>> {
        Box::pin(async {
            Err(hearth_http::dashboard::Refusal::new(
                http::StatusCode::NOT_FOUND,
                "no such queue",
            ))
        })
    }
}

/// What the control socket reports on and acts upon.
#[derive(Debug)]
pub struct ControlState {
    pub engine: Engine,
    /// The address the server listens on (none for `hearth work`).
    pub listen: Option<hearth_http::ListenAddr>,
    pub started: Instant,
    /// Notified by `stop`: the same graceful shutdown as SIGTERM.
    pub stop: Arc<Notify>,
    /// Set once the shutdown has begun.
    pub stopping: Arc<AtomicBool>,
}

async fn connection(stream: UnixStream, state: Arc<ControlState>) {
    let (read, mut write) = stream.into_split();
    let mut line = String::new();
    let mut reader = BufReader::new(read).take(MAX_REQUEST);
    if reader.read_line(&mut line).await.is_err() {
        return;
    }
    let command = serde_json::from_str::<Value>(&line)
        .ok()
        .and_then(|v| v.get("command").and_then(Value::as_str).map(str::to_owned));
    let (answer, then_wait) = match command.as_deref() {
        Some("status") => (json!({"ok": true, "status": report(&state).await}), false),
        Some("reload") => match reload(&state).await {
            Ok(done) => {
                let mut answer = json!({"ok": true, "message": done.message});
                if let Some(script) = done.script {
                    answer["script"] = json!(script);
                }
                (answer, false)
            }
            Err(e) => (json!({"ok": false, "error": e}), false),
        },
        Some("stop") => {
            state.stop.notify_one();
            (
                json!({"ok": true, "message": "shutting down gracefully"}),
                true,
            )
        }
        Some(other) => (
            json!({"ok": false, "error": format!("unknown command {other:?}: expected status, reload or stop")}),
            false,
        ),
        None => (
            json!({"ok": false, "error": "expected a JSON line like {\"command\":\"status\"}"}),
            false,
        ),
    };
    let mut out = answer.to_string();
    out.push('\n');
    if write.write_all(out.as_bytes()).await.is_err() || !then_wait {
        return;
    }
    // Held open until the process exits: the client reads end of file
    // when the server is gone.
    std::future::pending::<()>().await;
}

/// The status report `hearth status` prints (and the dashboard shows).
pub async fn report(state: &ControlState) -> Value {
    match &state.engine {
        Engine::Classic(classic) => classic.status(state).await,
        Engine::Workers(pool) => status(state, pool),
        Engine::Mixed(pool, classic) => {
            let mut report = status(state, pool);
            let (fpm, children, _) = classic.children().await;
            report["mode"] = json!("mixed");
            report["root"] = json!(classic.site().real_root());
            report["classic"] = json!({"pool": fpm, "workers": children});
            report
        }
        Engine::Pools(pools, classic) => {
            let default = pools.all().next().and_then(|r| r.workers());
            let mut report = match (default, classic_of(classic, "default")) {
                (Some(pool), _) => status(state, pool),
                // The default pool is a classic site.
                (None, Some(site)) => site.status(state).await,
                (None, None) => json!({}),
            };
            let mut all = Vec::new();
            for route in pools.all() {
                let mut one = match (route.workers(), classic_of(classic, &route.name)) {
                    (Some(pool), None) => pool_status(pool),
                    // A mixed site: its workers, and php-fpm's children.
                    (Some(pool), Some(fpm)) => {
                        let mut one = pool_status(pool);
                        let (fpm_pool, children, _) = fpm.children().await;
                        one["mode"] = json!("mixed");
                        one["root"] = json!(fpm.site().real_root());
                        one["classic"] = json!({"pool": fpm_pool, "workers": children});
                        one
                    }
                    (None, Some(classic)) => {
                        let (fpm, children, _) = classic.children().await;
                        json!({
                            "mode": "classic",
                            "script": format!(
                                "classic mode: {} (php-fpm)",
                                classic.site().real_root().display()
                            ),
                            "root": classic.site().real_root(),
                            "pool": fpm,
                            "workers": children,
                        })
                    }
                    (None, None) => json!({}),
                };
                one["name"] = json!(route.name);
                one["host"] = json!(route.hosts);
                one["path"] = json!(route.prefixes);
                all.push(one);
            }
            report["pools"] = Value::Array(all);
            report
        }
        Engine::Other(other) => other.status(state).await,
    }
}

/// A reload done: the message for the client, and the worker script
/// every worker now runs (worker mode).
#[derive(Debug)]
pub struct Reloaded {
    pub message: String,
    pub script: Option<PathBuf>,
}

/// Reloads what runs the PHP (`hearth reload`, `SIGHUP`, the dashboard);
/// the error is the message for the client.
pub async fn reload(state: &ControlState) -> Result<Reloaded, String> {
    // systemd hears of a reload (RELOADING=1, then READY=1 when done).
    let _reloading = crate::systemd::Reloading::begin();
    match &state.engine {
        Engine::Classic(classic) => {
            tracing::info!("reload asked for: reloading php-fpm");
            classic
                .reload()
                .await
                .map(|message| Reloaded {
                    message,
                    script: None,
                })
                .map_err(|e| e.to_string())
        }
        Engine::Workers(pool) => {
            tracing::info!("reload asked for: reloading the workers");
            let paths = reload_workers(pool).await?;
            Ok(Reloaded {
                message: format!("reloaded: every worker runs {}", paths.script.display()),
                script: Some(paths.script.clone()),
            })
        }
        Engine::Mixed(pool, classic) => {
            tracing::info!("reload asked for: reloading the workers and php-fpm");
            // php-fpm (and the root static files come from) only after the
            // workers: a release whose worker script cannot boot leaves
            // the whole site on the old one.
            let workers = reload_workers(pool).await;
            let fpm = match &workers {
                Ok(_) => classic.reload().await.map_err(|e| e.to_string()),
                Err(_) => Err("php-fpm was not reloaded either".to_owned()),
            };
            match (workers, fpm) {
                (Ok(paths), Ok(message)) => Ok(Reloaded {
                    message: format!(
                        "reloaded: every worker runs {}; {}",
                        paths.script.display(),
                        message.trim_start_matches("reloaded: ")
                    ),
                    script: Some(paths.script.clone()),
                }),
                (workers, fpm) => {
                    let errors: Vec<String> =
                        [workers.err(), fpm.err()].into_iter().flatten().collect();
                    Err(errors.join("; "))
                }
            }
        }
        Engine::Pools(pools, classic) => {
            tracing::info!("reload asked for: reloading every pool");
            reload_pools(pools, classic).await
        }
        Engine::Other(other) => other.reload().await.map(|message| Reloaded {
            message,
            script: None,
        }),
    }
}

/// Reloads every pool, each on its own: a pool whose new code cannot boot
/// keeps its old workers, and the others are reloaded all the same. The
/// error names the pools that failed.
pub async fn reload_pools(
    pools: &hearth_http::Pools,
    classic: &ClassicPools,
) -> Result<Reloaded, String> {
    let mut done = Vec::new();
    let mut failed = Vec::new();
    for route in pools.all() {
        let Some(pool) = route.workers() else {
            let Some(classic) = classic_of(classic, &route.name) else {
                continue;
            };
            match classic.reload().await {
                Ok(message) => done.push(format!("{}: {message}", route.name)),
                Err(e) => failed.push(format!("pool {}: {e}", route.name)),
            }
            continue;
        };
        match pool.reload().await {
            Ok(paths) => {
                tracing::info!(
                    "reload done: every worker of pool {} runs {}",
                    route.name,
                    paths.script.display()
                );
                done.push(format!("{} runs {}", route.name, paths.script.display()));
                // A mixed site's php-fpm (and its root) follow its workers.
                if let Some(fpm) = classic_of(classic, &route.name) {
                    match fpm.reload().await {
                        Ok(message) => done.push(format!("{}: {message}", route.name)),
                        Err(e) => failed.push(format!("pool {}: {e}", route.name)),
                    }
                }
            }
            Err(e) => {
                tracing::error!(
                    "reload of pool {} failed, its old workers keep serving: {e}",
                    route.name
                );
                failed.push(format!(
                    "pool {}: reload failed, its old workers keep serving: {e}",
                    route.name
                ));
            }
        }
    }
    if failed.is_empty() {
        let script = pools
            .all()
            .next()
            .and_then(|r| r.workers())
            .map(|pool| pool.paths().script.clone());
        Ok(Reloaded {
            message: format!("reloaded: {}", done.join("; ")),
            script,
        })
    } else {
        Err(failed.join("; "))
    }
}

/// The php-fpm pool of the classic pool named `name`.
fn classic_of<'a>(classic: &'a ClassicPools, name: &str) -> Option<&'a crate::classic::Classic> {
    classic.iter().find(|(n, _)| n == name).map(|(_, c)| &**c)
}

/// Reloads the workers; the error is the message for the client (and
/// logged).
async fn reload_workers(pool: &Pool) -> Result<std::sync::Arc<hearth_pool::Paths>, String> {
    match pool.reload().await {
        Ok(paths) => {
            tracing::info!("reload done: every worker runs {}", paths.script.display());
            Ok(paths)
        }
        Err(e) => {
            tracing::error!("reload failed, the old workers keep serving: {e}");
            Err(format!("reload failed, the old workers keep serving: {e}"))
        }
    }
}

/// The status report: the pool's totals and each worker.
pub fn status(state: &ControlState, pool: &Pool) -> Value {
    let one = pool_status(pool);
    json!({
        "version": env!("CARGO_PKG_VERSION"),
        "pid": std::process::id(),
        "listen": state.listen.as_ref().map(ToString::to_string),
        "script": one["script"],
        "uptime": state.started.elapsed().as_secs_f64(),
        "stopping": state.stopping.load(Ordering::Acquire) || pool.is_stopping(),
        "pool": one["pool"],
        "workers": one["workers"],
        "past_workers": one["past_workers"],
        "routes": one["routes"],
    })
}

/// One pool's part of the status: its script, counts and workers.
pub fn pool_status(pool: &Pool) -> Value {
    let s = pool.status();
    let config = pool.config();
    let reasons: serde_json::Map<String, Value> = s
        .restarts_by_reason
        .iter()
        .map(|(reason, n)| (reason.as_str().to_owned(), json!(n)))
        .collect();
    let workers: Vec<Value> = pool
        .workers()
        .into_iter()
        .map(|w| {
            let request = w.request.map(|(label, running)| {
                let (method, uri) = label.split_once(' ').unwrap_or((label.as_str(), ""));
                json!({"method": method, "uri": uri, "seconds": running.as_secs_f64()})
            });
            json!({
                "slot": w.slot,
                "pid": w.pid,
                "state": w.state.as_str(),
                "requests": w.requests,
                "memory": w.memory,
                "age": w.age.as_secs_f64(),
                "request": request,
            })
        })
        .collect();
    json!({
        "script": pool.paths().script,
        "pool": {
            "workers": s.workers,
            // Debug mode keeps no worker waiting.
            "min_workers": if config.debug { 0 } else { config.min_workers.min(s.workers) },
            "max_workers": s.workers,
            "live": s.live,
            "busy": s.busy,
            "idle": s.idle,
            "failing": s.failing,
            "queue": s.waiting,
            "started": s.started,
            "restarts": s.restarts,
            "restarts_by_reason": reasons,
            "debug": config.debug,
            "name": config.name.as_deref().unwrap_or(hearth_http::POOL_NAME),
            "booting": s.booting,
            "max_booting": s.max_booting,
            "memory": pool.memory(),
            "max_pool_memory": (config.max_pool_memory > 0).then_some(config.max_pool_memory),
            "started_by_reason": s
                .started_by_reason
                .iter()
                .map(|(reason, n)| (reason.as_str().to_owned(), json!(n)))
                .collect::<serde_json::Map<String, Value>>(),
            "retired_by_reason": retired_by_reason(&s),
            "refused": {"memory": s.refused_memory},
            "request_crashes": s.request_crashes,
            "state": if s.failing_state.is_some() { "failing" } else { "serving" },
            "failing_state": s.failing_state.as_ref().map(|f| json!({
                "cause": f.cause.as_str(),
                "since": hearth_http::dashboard::unix(f.since),
                "attempts": f.attempts,
                "last_error": f.last_error,
                "next_attempt": f.next_attempt.as_secs_f64(),
            })),
        },
        "workers": workers,
        "past_workers": past_workers(pool),
        "routes": routes(pool),
    })
}

/// Routes in a status report: those whose requests grew workers most.
pub const STATUS_ROUTES: usize = 20;

/// Memory growth by route: the [`STATUS_ROUTES`] routes whose requests
/// grew workers most, most first, and how many routes are counted.
pub fn routes(pool: &Pool) -> Value {
    let one = |r: &hearth_pool::RouteGrowth| {
        json!({
            "route": r.route,
            "requests": r.requests,
            "grew": r.grew,
            "grew_share": r.grew_share(),
            "growth": r.growth,
            "mean": r.mean(),
        })
    };
    // Every route (at most ROUTE_LIMIT and other): what other holds is
    // shown whether or not it is among the top.
    let (all, counted) = pool.routes(usize::MAX);
    let other = all.iter().find(|r| r.route == hearth_pool::OTHER_ROUTE);
    json!({
        "counted": counted,
        "limit": hearth_pool::ROUTE_LIMIT,
        "top": all.iter().take(STATUS_ROUTES).map(one).collect::<Vec<_>>(),
        "other": other.map(one),
    })
}

/// Workers that went, by why: every restart reason, and `scale_down` for
/// extra workers stopped for being idle (which are not replaced).
pub fn retired_by_reason(s: &hearth_pool::PoolStatus) -> serde_json::Map<String, Value> {
    let mut map: serde_json::Map<String, Value> = s
        .restarts_by_reason
        .iter()
        .map(|(reason, n)| (reason.as_str().to_owned(), json!(n)))
        .collect();
    map.insert("scale_down".to_owned(), json!(s.scaled_down));
    map
}

/// The workers replaced lately, newest first, with why.
pub fn past_workers(pool: &Pool) -> Value {
    pool.past_workers()
        .into_iter()
        .map(|w| {
            json!({
                "slot": w.slot,
                "pid": w.pid,
                "reason": w.reason.as_str(),
                "ended": hearth_http::dashboard::unix(w.ended),
                "requests": w.requests,
                "age": w.age.as_secs_f64(),
            })
        })
        .collect()
}
