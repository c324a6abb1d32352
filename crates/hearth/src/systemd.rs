//! systemd's side of `hearth serve`: socket activation (a listening socket
//! systemd passes, `sd_listen_fds(3)`) and readiness notification
//! (`sd_notify(3)`: `READY=1`, `RELOADING=1`, `STOPPING=1`) for
//! `Type=notify` and `Type=notify-reload` services.
//!
//! Both are taken from the environment once, at start, before any thread
//! or child process exists ([`take`]): the variables are then removed, so
//! that neither the PHP workers nor php-fpm see them (Debian's php-fpm,
//! built with systemd support, would otherwise send its own `READY=1` on
//! `NOTIFY_SOCKET`).

use std::os::unix::net::UnixDatagram;
use std::sync::OnceLock;

use anyhow::{bail, Context as _};

/// A listening socket systemd passed.
#[derive(Debug)]
pub enum Inherited {
    Tcp(std::net::TcpListener),
    Unix(std::os::unix::net::UnixListener),
}

/// Takes what systemd passed: the listening socket, if there is one
/// (`LISTEN_FDS=1`, and `LISTEN_PID` this process's), and the notification
/// socket (`NOTIFY_SOCKET`). Call it before any thread starts: it removes
/// the variables from the environment.
pub fn take() -> anyhow::Result<Option<Inherited>> {
    if let Some(target) = std::env::var_os("NOTIFY_SOCKET") {
        std::env::remove_var("NOTIFY_SOCKET");
        match Notifier::connect(&target) {
            Ok(notifier) => {
                let _ = NOTIFIER.set(notifier);
            }
            Err(e) => tracing::warn!(
                "NOTIFY_SOCKET={}: cannot reach it, systemd will not hear that hearth is ready: {e}",
                target.to_string_lossy()
            ),
        }
    }
    // listenfd checks LISTEN_PID, marks the descriptors close-on-exec,
    // checks each is a socket of the kind asked for, and removes
    // LISTEN_FDS and LISTEN_PID from the environment.
    let mut fds = listenfd::ListenFd::from_env();
    std::env::remove_var("LISTEN_FDNAMES");
    match fds.len() {
        0 => return Ok(None),
        1 => {}
        n => bail!(
            "systemd passed {n} sockets (LISTEN_FDS={n}); hearth serve listens on one: give its \
             .socket unit one ListenStream="
        ),
    }
    if let Ok(Some(listener)) = fds.take_tcp_listener(0) {
        return Ok(Some(Inherited::Tcp(listener)));
    }
    let listener = fds
        .take_unix_listener(0)
        .context("the socket systemd passed (LISTEN_FDS=1, fd 3)")?
        .context("the socket systemd passed (LISTEN_FDS=1, fd 3) is gone")?;
    Ok(Some(Inherited::Unix(listener)))
}

static NOTIFIER: OnceLock<Notifier> = OnceLock::new();

/// The datagram socket to systemd's `NOTIFY_SOCKET`.
///
/// Written here rather than with the `sd-notify` crate: the variable must
/// leave the environment before PHP starts, and that crate's functions
/// that remove it are `unsafe` (this crate denies unsafe code), while
/// reading and removing it here, before any thread exists, is not.
#[derive(Debug)]
struct Notifier {
    socket: UnixDatagram,
}

impl Notifier {
    fn connect(target: &std::ffi::OsStr) -> std::io::Result<Notifier> {
        use std::os::unix::ffi::OsStrExt as _;
        let socket = UnixDatagram::unbound()?;
        match target.as_bytes().strip_prefix(b"@") {
            // An abstract socket (the usual one of systemd's).
            Some(name) => {
                use std::os::linux::net::SocketAddrExt as _;
                let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
                socket.connect_addr(&addr)?;
            }
            None => socket.connect(target)?,
        }
        // A notification never holds the server up.
        socket.set_nonblocking(true)?;
        Ok(Notifier { socket })
    }
}

/// Sends `state` (lines such as `READY=1`) to systemd, when it listens.
pub fn notify(state: &str) {
    if let Some(notifier) = NOTIFIER.get() {
        if let Err(e) = notifier.socket.send(state.as_bytes()) {
            tracing::warn!("cannot tell systemd {:?}: {e}", state.trim_end());
        }
    }
}

/// Says that the server is ready (workers booted, or php-fpm started).
pub fn ready(status: &str) {
    notify(&format!("READY=1\nSTATUS={status}\n"));
}

/// Says that the server is stopping.
pub fn stopping() {
    notify("STOPPING=1\n");
}

/// A reload under way: `RELOADING=1` (with the `MONOTONIC_USEC` that
/// `Type=notify-reload` asks for) now, `READY=1` when dropped.
#[derive(Debug)]
pub struct Reloading(());

impl Reloading {
    pub fn begin() -> Reloading {
        if NOTIFIER.get().is_some() {
            let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
            let usec = u64::try_from(now.tv_sec).unwrap_or(0) * 1_000_000
                + u64::try_from(now.tv_nsec).unwrap_or(0) / 1_000;
            notify(&format!("RELOADING=1\nMONOTONIC_USEC={usec}\n"));
        }
        Reloading(())
    }
}

impl Drop for Reloading {
    fn drop(&mut self) {
        notify("READY=1\n");
    }
}
