//! sendfile(2) onto a connection's socket: the kernel moves a file's bytes
//! from the page cache to the socket, and they never pass through Hearth.
//!
//! [`SendFile`] is what a socket (and each layer wrapped around it) offers
//! for that: a non-blocking sendfile(2) that waits on the socket's write
//! readiness as a write does. Only plain sockets offer it: TLS must see
//! the bytes to encrypt them. How a response body uses it under hyper is
//! [`guard`](crate::guard)'s business ([`ZeroCopy`](crate::guard::ZeroCopy)).

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::task::{Context, Poll};

/// Most bytes one sendfile(2) is asked for (nginx's `sendfile_max_chunk`
/// is 2 MiB): the call also reads the file, in the thread that serves
/// connections, so a file not in the page cache holds that thread for as
/// long as this much takes to read.
pub(crate) const MAX_CHUNK: usize = 1 << 20;

/// A socket the kernel can send a file onto.
pub(crate) trait SendFile {
    /// Sends up to `count` bytes of `file` from `offset` (advanced by what
    /// was sent) onto the socket, waiting, as a write does, for room in
    /// the socket's buffer. `Ok(0)`: `offset` is at or past the file's
    /// end. `Unsupported`: this socket cannot (TLS).
    fn poll_send_file(
        &mut self,
        cx: &mut Context<'_>,
        file: BorrowedFd<'_>,
        offset: &mut u64,
        count: usize,
    ) -> Poll<io::Result<usize>>;
}

/// One non-blocking sendfile(2).
fn send_once(
    socket: BorrowedFd<'_>,
    file: BorrowedFd<'_>,
    offset: &mut u64,
    count: usize,
) -> io::Result<usize> {
    rustix::fs::sendfile(socket, file, Some(offset), count).map_err(io::Error::from)
}

/// sendfile(2) on a tokio socket, by its write readiness: tokio's sockets
/// are non-blocking, and a full socket buffer is `WouldBlock`, after which
/// the readiness is cleared and waited for again.
macro_rules! send_file_on_tokio_socket {
    ($socket:ty) => {
        impl SendFile for $socket {
            fn poll_send_file(
                &mut self,
                cx: &mut Context<'_>,
                file: BorrowedFd<'_>,
                offset: &mut u64,
                count: usize,
            ) -> Poll<io::Result<usize>> {
                loop {
                    std::task::ready!(self.poll_write_ready(cx))?;
                    let fd = self.as_fd();
                    let sent = self.try_io(tokio::io::Interest::WRITABLE, || {
                        send_once(fd, file, offset, count)
                    });
                    match sent {
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        done => return Poll::Ready(done),
                    }
                }
            }
        }
    };
}

send_file_on_tokio_socket!(tokio::net::TcpStream);
send_file_on_tokio_socket!(tokio::net::UnixStream);

/// Whether sendfile(2) failing so means the file (its filesystem) or the
/// kernel cannot do it, rather than a broken connection or a bad disk:
/// the file is then read instead.
pub(crate) fn is_unsupported(e: &io::Error) -> bool {
    if e.kind() == io::ErrorKind::Unsupported {
        return true;
    }
    let errno = e.raw_os_error().map(rustix::io::Errno::from_raw_os_error);
    matches!(
        errno,
        Some(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS | rustix::io::Errno::OPNOTSUPP)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;
    use tokio::io::AsyncReadExt as _;

    async fn pair() -> (tokio::net::TcpStream, tokio::net::TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = tokio::net::TcpStream::connect(listener.local_addr().unwrap());
        let (client, server) = tokio::join!(client, listener.accept());
        (client.unwrap(), server.unwrap().0)
    }

    /// A file larger than the socket's buffer goes out whole, waiting on
    /// the reader as a write would; past the end, sendfile says 0.
    #[tokio::test]
    async fn a_file_is_sent_through_a_full_socket_and_ends_with_zero() {
        let data: Vec<u8> = (0..8u32 << 20).map(|i| (i * 31 % 251) as u8).collect();
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&data).unwrap();
        let (mut client, mut server) = pair().await;
        let len = data.len();
        let reader = tokio::spawn(async move {
            let mut got = vec![0; len];
            client.read_exact(&mut got).await.unwrap();
            got
        });
        let mut offset = 0u64;
        while offset < len as u64 {
            let count = MAX_CHUNK.min(len - offset as usize);
            let n = std::future::poll_fn(|cx| {
                server.poll_send_file(cx, file.as_fd(), &mut offset, count)
            })
            .await
            .unwrap();
            assert!(n > 0 && n <= count);
        }
        assert_eq!(offset, len as u64);
        assert!(reader.await.unwrap() == data, "bytes differ");
        let n = std::future::poll_fn(|cx| server.poll_send_file(cx, file.as_fd(), &mut offset, 10))
            .await
            .unwrap();
        assert_eq!(n, 0, "past the end");
    }

    #[test]
    fn unsupported_errors_are_told_from_the_others() {
        let os = |errno: rustix::io::Errno| io::Error::from_raw_os_error(errno.raw_os_error());
        assert!(is_unsupported(&os(rustix::io::Errno::INVAL)));
        assert!(is_unsupported(&os(rustix::io::Errno::NOSYS)));
        assert!(is_unsupported(&io::ErrorKind::Unsupported.into()));
        assert!(!is_unsupported(&os(rustix::io::Errno::PIPE)));
        assert!(!is_unsupported(&os(rustix::io::Errno::IO)));
    }
}
