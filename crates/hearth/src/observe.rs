//! `hearth serve`'s observability options resolved, and started: the
//! control socket, the admin listener (the dashboard, `/metrics`,
//! `/healthz`, `/readyz`) and the access log.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use hearth_http::{AccessLog, AccessLogFormat, Metrics, Observer, PoolReport};
use tokio::sync::Notify;

use crate::control::{ControlSocket, ControlState, Engine};
use crate::options::values::AccessLogChoice;
use crate::options::ServeOptions;

/// What the options ask for.
#[derive(Debug, Clone, Default)]
pub struct ObserveSetup {
    /// The control socket's path; none: the default for the address.
    pub control_socket: Option<PathBuf>,
    pub admin: Option<SocketAddr>,
    /// The token the dashboard's actions need.
    pub admin_token: Option<hearth_http::admin::AdminToken>,
    pub access_log: Option<AccessLogFormat>,
    /// Where the access log goes; none: standard output.
    pub access_log_file: Option<PathBuf>,
}

impl ObserveSetup {
    /// The setup the options ask for; fails on an unreadable or too short
    /// admin token, and on an admin address other networks reach without
    /// one.
    pub fn from_options(options: &ServeOptions) -> anyhow::Result<ObserveSetup> {
        let admin = options.admin.map(|a| a.0);
        let admin_token = crate::dashboard::token(
            options.admin_token.as_deref(),
            options.admin_token_file.as_deref(),
        )?;
        if let Some(addr) = admin {
            crate::dashboard::check_address(addr, admin_token.as_ref())?;
        }
        Ok(ObserveSetup {
            control_socket: options.control_socket.clone(),
            admin,
            admin_token,
            access_log: match options.access_log {
                AccessLogChoice::Off => None,
                AccessLogChoice::Common => Some(AccessLogFormat::Common),
                AccessLogChoice::Json => Some(AccessLogFormat::Json),
            },
            access_log_file: options.access_log_file.clone(),
        })
    }
}

/// What is running for observability, for the life of the server.
#[derive(Debug)]
pub struct Observing {
    /// Handed to the HTTP front.
    pub observer: Observer,
    /// Notified by `hearth stop`.
    pub stop: Arc<Notify>,
    /// Set when the shutdown begins (`/readyz` turns 503).
    pub stopping: Arc<AtomicBool>,
    /// Removed from disk when this is dropped.
    _control: ControlSocket,
}

/// Binds the control socket (before the pool starts, so that a second
/// server on the same address fails at once).
pub fn bind_control(
    setup: &ObserveSetup,
    listen: &hearth_http::ListenAddr,
) -> anyhow::Result<ControlSocket> {
    let path = match &setup.control_socket {
        Some(path) => path.clone(),
        None => crate::control::default_path(listen, true)?,
    };
    ControlSocket::bind(&path)
}

/// Starts the control socket's server, the admin listener and the access
/// log writer.
pub async fn start(
    setup: &ObserveSetup,
    control: ControlSocket,
    listen: hearth_http::ListenAddr,
    engine: Engine,
) -> anyhow::Result<Observing> {
    let stop = Arc::new(Notify::new());
    let stopping = Arc::new(AtomicBool::new(false));
    let pool: Arc<dyn PoolReport> = match &engine {
        Engine::Workers(pool) | Engine::Mixed(pool, _) => Arc::new(pool.clone()),
        Engine::Pools(pools, _) => pools.clone(),
        Engine::Classic(classic) => classic.clone(),
        Engine::Other(_) => anyhow::bail!("hearth serve runs workers or php-fpm"),
    };
    let state = Arc::new(ControlState {
        engine,
        listen: Some(listen),
        started: Instant::now(),
        stop: stop.clone(),
        stopping: stopping.clone(),
    });
    control.serve(state.clone())?;
    tracing::info!("control socket at {}", control.path().display());
    let access_log = match setup.access_log {
        Some(format) => Some(
            AccessLog::start(format, setup.access_log_file.as_deref()).with_context(
                || match &setup.access_log_file {
                    Some(path) => format!("access log {}", path.display()),
                    None => "access log".to_owned(),
                },
            )?,
        ),
        None => None,
    };
    let mut observer = Observer {
        metrics: None,
        access_log: access_log.clone(),
    };
    if let Some(addr) = setup.admin {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr} (--admin)"))?;
        let bound = listener.local_addr()?;
        let metrics = Arc::new(Metrics::new(pool.clone(), access_log));
        observer.metrics = Some(metrics.clone());
        tokio::spawn(hearth_http::admin::serve(
            listener,
            hearth_http::admin::AdminState {
                pool: pool.clone(),
                metrics,
                stopping: stopping.clone(),
                dashboard: crate::dashboard::Panel::new(state),
                token: setup.admin_token.clone(),
            },
        ));
        tracing::info!(
            "admin endpoints at http://{bound}/: the dashboard, /metrics, /healthz, /readyz; \
             dashboard actions {}",
            if setup.admin_token.is_some() {
                "need the admin token"
            } else {
                "off (no admin token)"
            }
        );
    }
    Ok(Observing {
        observer,
        stop,
        stopping,
        _control: control,
    })
}
