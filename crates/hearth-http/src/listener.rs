//! What the server listens on, a TCP port or a unix socket, and the
//! connections it accepts from it.
//!
//! Over a unix socket the peer has no address: `$_SERVER` then says what
//! nginx says of a `listen unix:` server (`REMOTE_ADDR=unix:`, empty
//! `REMOTE_PORT` and `SERVER_PORT`, `SERVER_ADDR=unix:PATH`), see
//! [`Connection::unix`](crate::cgi::Connection::unix).

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::os::fd::BorrowedFd;
use std::path::PathBuf;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};

use crate::zero_copy::SendFile;

/// A listening socket the server accepts connections on.
#[derive(Debug)]
pub enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

impl From<TcpListener> for Listener {
    fn from(listener: TcpListener) -> Listener {
        Listener::Tcp(listener)
    }
}

impl From<UnixListener> for Listener {
    fn from(listener: UnixListener) -> Listener {
        Listener::Unix(listener)
    }
}

/// Where a server listens: an IP address and port, or a unix socket's
/// path. Written `127.0.0.1:8080` or `unix:/run/hearth/hearth.sock`, as
/// nginx writes its `listen` and `$server_addr`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenAddr {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListenAddr::Tcp(addr) => addr.fmt(f),
            ListenAddr::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

impl Listener {
    /// The address the listener is bound to (for a unix socket inherited
    /// unnamed, an empty path).
    pub fn local_addr(&self) -> io::Result<ListenAddr> {
        Ok(match self {
            Listener::Tcp(l) => ListenAddr::Tcp(l.local_addr()?),
            Listener::Unix(l) => ListenAddr::Unix(
                l.local_addr()?
                    .as_pathname()
                    .map(PathBuf::from)
                    .unwrap_or_default(),
            ),
        })
    }

    /// The next connection, with its peer (for the log).
    pub(crate) async fn accept(&self) -> io::Result<(Socket, Peer)> {
        match self {
            Listener::Tcp(l) => {
                let (stream, remote) = l.accept().await?;
                let _ = stream.set_nodelay(true);
                Ok((Socket::Tcp(stream), Peer::Tcp(remote)))
            }
            Listener::Unix(l) => {
                let (stream, _) = l.accept().await?;
                Ok((Socket::Unix(stream), Peer::Unix))
            }
        }
    }
}

/// A connection's peer as the log names it: its address, or `unix:` (as
/// nginx's `$remote_addr` on a unix socket).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Peer {
    Tcp(SocketAddr),
    Unix,
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Peer::Tcp(addr) => addr.fmt(f),
            Peer::Unix => f.write_str("unix:"),
        }
    }
}

/// An accepted connection's socket.
#[derive(Debug)]
pub(crate) enum Socket {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl SendFile for Socket {
    fn poll_send_file(
        &mut self,
        cx: &mut Context<'_>,
        file: BorrowedFd<'_>,
        offset: &mut u64,
        count: usize,
    ) -> Poll<io::Result<usize>> {
        match self {
            Socket::Tcp(s) => s.poll_send_file(cx, file, offset, count),
            Socket::Unix(s) => s.poll_send_file(cx, file, offset, count),
        }
    }
}

impl AsyncRead for Socket {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Socket::Tcp(s) => Pin::new(s).poll_read(cx, out),
            Socket::Unix(s) => Pin::new(s).poll_read(cx, out),
        }
    }
}

impl AsyncWrite for Socket {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Socket::Tcp(s) => Pin::new(s).poll_write(cx, data),
            Socket::Unix(s) => Pin::new(s).poll_write(cx, data),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Socket::Tcp(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Socket::Unix(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Socket::Tcp(s) => s.is_write_vectored(),
            Socket::Unix(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Socket::Tcp(s) => Pin::new(s).poll_flush(cx),
            Socket::Unix(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Socket::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Socket::Unix(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}
