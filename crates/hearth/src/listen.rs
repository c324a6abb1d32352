//! The listening socket of `hearth serve`: a TCP port or a unix socket
//! bound here, or the one systemd passed (socket activation, see
//! [`crate::systemd`]), which stays systemd's: its file is never touched.
//!
//! A unix socket's file is made mode 0666, as nginx makes the sockets it
//! listens on: any local user may connect, as to a TCP port on 127.0.0.1
//! (who may reach it is the socket directory's permissions to say). A
//! socket file left by a server that is gone is replaced; a path that is
//! not a socket, or a socket a server answers on, is refused. The file is
//! removed when the server stops.

use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};
use hearth_http::{ListenAddr, Listener};

use crate::options::values::Listen;
use crate::systemd::Inherited;

/// The mode of a unix socket Hearth listens on: what nginx gives its own
/// (`listen unix:`), so that a proxy running as another user (nginx's
/// www-data) can connect.
const SOCKET_MODE: u32 = 0o666;

/// A listening socket, with what to clean up when the server stops.
#[derive(Debug)]
pub struct Bound {
    pub listener: Listener,
    /// The address as `hearth status`, the log and the default control
    /// socket name it.
    pub addr: ListenAddr,
    /// A unix socket's file, removed when this is dropped.
    pub file: Option<SocketFile>,
}

/// Binds `listen`, or takes the socket systemd passed instead.
pub async fn bind(listen: &Listen, inherited: Option<Inherited>) -> anyhow::Result<Bound> {
    if let Some(inherited) = inherited {
        let (listener, addr): (Listener, _) = match inherited {
            Inherited::Tcp(listener) => {
                listener.set_nonblocking(true)?;
                let addr = ListenAddr::Tcp(listener.local_addr()?);
                (tokio::net::TcpListener::from_std(listener)?.into(), addr)
            }
            Inherited::Unix(listener) => {
                listener.set_nonblocking(true)?;
                let path = listener.local_addr()?.as_pathname().map(Path::to_path_buf);
                let addr = ListenAddr::Unix(path.unwrap_or_default());
                (tokio::net::UnixListener::from_std(listener)?.into(), addr)
            }
        };
        if addr == listen.for_http() {
            tracing::info!("listening on {addr}, the socket systemd passed");
        } else {
            tracing::info!(
                "listening on {addr}, the socket systemd passed (socket activation), not on --listen {listen}"
            );
        }
        return Ok(Bound {
            listener,
            addr,
            file: None,
        });
    }
    match listen.for_http() {
        ListenAddr::Tcp(addr) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr}"))?;
            let addr = ListenAddr::Tcp(listener.local_addr()?);
            Ok(Bound {
                listener: listener.into(),
                addr,
                file: None,
            })
        }
        ListenAddr::Unix(path) => {
            let (listener, file) = bind_unix(&path, SOCKET_MODE)
                .with_context(|| format!("cannot listen on unix:{}", path.display()))?;
            Ok(Bound {
                listener: tokio::net::UnixListener::from_std(listener)?.into(),
                addr: ListenAddr::Unix(path),
                file: Some(file),
            })
        }
    }
}

/// Binds a unix socket at `path` (absolute), replacing a stale one.
/// Binds a unix socket at `path` with the permission bits `mode` (the same
/// rules as `--listen unix:PATH`: a stale socket is replaced, anything
/// else refused), for another listener than the HTTP front's.
pub fn bind_socket_file(
    path: &Path,
    mode: u32,
) -> anyhow::Result<(std::os::unix::net::UnixListener, SocketFile)> {
    bind_unix(path, mode).with_context(|| format!("cannot listen on unix:{}", path.display()))
}

fn bind_unix(
    path: &Path,
    mode: u32,
) -> anyhow::Result<(std::os::unix::net::UnixListener, SocketFile)> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if !meta.file_type().is_socket() => {
            bail!("the path exists and is not a socket (remove it, or choose another path)")
        }
        Ok(_) => match std::os::unix::net::UnixStream::connect(path) {
            Ok(_) => bail!("a server is listening there (stop it, or choose another path)"),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                tracing::info!(
                    "replacing the stale socket {} (nothing listens on it)",
                    path.display()
                );
                std::fs::remove_file(path).context("cannot remove the stale socket")?;
            }
            Err(e) => return Err(e).context("cannot tell whether a server is listening there"),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e.into()),
    }
    if let Some(dir) = path.parent() {
        if !dir.is_dir() {
            bail!("the directory {} does not exist", dir.display());
        }
    }
    let listener = std::os::unix::net::UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .context("cannot set the socket's mode")?;
    listener.set_nonblocking(true)?;
    let ino = std::fs::symlink_metadata(path)?.ino();
    Ok((
        listener,
        SocketFile {
            path: path.to_path_buf(),
            ino,
        },
    ))
}

/// A unix socket's file, removed when dropped: only that file (by its
/// inode), not one a later server put in its place.
#[derive(Debug)]
pub struct SocketFile {
    path: PathBuf,
    ino: u64,
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        if std::fs::symlink_metadata(&self.path).is_ok_and(|m| m.ino() == self.ino) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}
