//! Hearth's end of a worker's channel: non-blocking reads and writes on
//! one end of a socketpair whose other end is the worker's standard input.

use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;

use bytes::{BufMut, BytesMut};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// Hearth's end of a worker's channel: what it reads responses from and
/// what it writes requests to, one Unix stream socket both ways.
///
/// A socket, not pipes, because a socket cannot be opened again through
/// `/proc/PID/fd/N`: no other process of the workers' user can reach the
/// channel that way to read a request or answer one in the worker's place
/// (a FIFO the worker opens by path is owned by that user, so any of its
/// processes could). It costs more per request than pipes, 4 to 5 µs of
/// CPU for a request and its response, measured on Linux 6.18: the kernel
/// allocates a buffer object per write (docs/protocol.md, "Transport").
///
/// The read side is registered for readability only, so that the
/// "writable" wake-up a socket sends when its peer drains it does not wake
/// the runtime; writability is only waited for when a write would block,
/// through a short-lived second registration of a duplicate descriptor.
#[derive(Debug)]
pub(crate) struct Channel {
    read: AsyncFd<OwnedFd>,
    write: OwnedFd,
}

/// Registers a descriptor with the runtime for `interest`.
#[allow(unsafe_code)]
fn register(fd: OwnedFd, interest: Interest) -> std::io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: an OwnedFd owns its descriptor until it is dropped and always
    // reports the same one, which is all register_with_interest requires.
    unsafe { AsyncFd::register_with_interest(fd, interest) }.map_err(|e| e.into_parts().1)
}

fn set_nonblocking(fd: &OwnedFd) -> std::io::Result<()> {
    use rustix::fs::{fcntl_getfl, fcntl_setfl, OFlags};
    let flags = fcntl_getfl(fd)?;
    fcntl_setfl(fd, flags | OFlags::NONBLOCK)?;
    Ok(())
}

impl Channel {
    /// A channel over Hearth's end of a socketpair.
    pub fn socket(socket: UnixStream) -> std::io::Result<Channel> {
        let fd = OwnedFd::from(socket);
        set_nonblocking(&fd)?;
        let write = fd.try_clone()?;
        Ok(Channel {
            read: register(fd, Interest::READABLE)?,
            write,
        })
    }

    /// Reads what is available into `buf`'s spare capacity; 0 at end of file.
    pub async fn read_buf(&self, buf: &mut BytesMut) -> std::io::Result<usize> {
        loop {
            let mut guard = self.read.readable().await?;
            let spare = buf.spare_capacity_mut();
            let wanted = spare.len();
            match guard.try_io(|fd| {
                Ok(rustix::io::read(fd.get_ref(), &mut *spare).map(|(done, _)| done.len())?)
            }) {
                Ok(Ok(n)) => {
                    // SAFETY: read() initialized the first n bytes of the
                    // spare capacity it was given.
                    #[allow(unsafe_code)]
                    unsafe {
                        buf.advance_mut(n);
                    }
                    if n < wanted {
                        // A short read drained the channel (edge-triggered
                        // epoll will report new data), so skip the read that
                        // would only return EAGAIN.
                        guard.clear_ready();
                    }
                    return Ok(n);
                }
                Ok(Err(e)) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => continue,
            }
        }
    }

    /// Writes all of `bytes`. On failure, also says how many were written:
    /// a worker that took none of a request has not seen it.
    pub async fn write_all(&self, mut bytes: &[u8]) -> Result<(), (std::io::Error, usize)> {
        let mut written = 0;
        while !bytes.is_empty() {
            match rustix::io::write(&self.write, bytes) {
                Ok(n) => {
                    bytes = &bytes[n..];
                    written += n;
                }
                Err(rustix::io::Errno::INTR) => {}
                Err(rustix::io::Errno::AGAIN) => {
                    let dup = self.write.try_clone().map_err(|e| (e, written))?;
                    let writable = register(dup, Interest::WRITABLE).map_err(|e| (e, written))?;
                    drop(writable.writable().await.map_err(|e| (e, written))?);
                }
                Err(e) => return Err((e.into(), written)),
            }
        }
        Ok(())
    }

    pub fn try_write(&self, bytes: &[u8]) -> std::io::Result<usize> {
        Ok(rustix::io::write(&self.write, bytes)?)
    }

    /// Whether the worker has nothing to say, as an idle worker must: no
    /// bytes waiting and no hang-up. A worker that died while idle shows a
    /// hang-up here as soon as its process is gone, before it is reaped.
    pub fn is_quiet(&self) -> bool {
        use rustix::event::{poll, PollFd, PollFlags, Timespec};
        let mut fds = [PollFd::new(self.read.get_ref(), PollFlags::IN)];
        let now = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        matches!(poll(&mut fds, Some(&now)), Ok(0))
    }
}
