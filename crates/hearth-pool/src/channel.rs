//! Hearth's end of a worker's channel: non-blocking reads and writes on
//! the descriptors the worker was started with.

use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;

use bytes::{BufMut, BytesMut};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// Hearth's end of a worker's channel: what it reads responses from and
/// what it writes requests to. Either two pipes (requests on a pipe that is
/// the worker's stdin, responses on a FIFO the worker opens by path) or, when
/// the worker cannot open that path, one socketpair for both.
///
/// Pipes cost less per request than a unix socket: no buffer objects to
/// allocate, and reading a response does not wake the worker (freeing a
/// socket's buffer signals "writable" to its sleeping owner; draining a pipe
/// that was not full signals nothing). The read side is registered for
/// readability only; writability is only waited for when a write would
/// block, through a short-lived second registration.
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
    /// A channel over one socket, both ways.
    pub fn socket(socket: UnixStream) -> std::io::Result<Channel> {
        let fd = OwnedFd::from(socket);
        set_nonblocking(&fd)?;
        let write = fd.try_clone()?;
        Ok(Channel {
            read: register(fd, Interest::READABLE)?,
            write,
        })
    }

    /// A channel over the read end of the worker's response FIFO and the
    /// write end of its request pipe.
    pub fn pipes(responses: OwnedFd, requests: OwnedFd) -> std::io::Result<Channel> {
        set_nonblocking(&responses)?;
        set_nonblocking(&requests)?;
        Ok(Channel {
            read: register(responses, Interest::READABLE)?,
            write: requests,
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
