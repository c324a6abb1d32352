//! A file's bytes as a response body (a whole file, or one range of it):
//! sent by the kernel with sendfile(2) where the connection allows it,
//! else read 64 KiB at a time.
//!
//! sendfile is used on plain HTTP/1.x connections (TCP or unix socket)
//! unless `--no-sendfile` is given: the kernel moves the file's pages from
//! the page cache onto the socket, and Hearth neither reads nor copies a
//! byte (see [`guard`](crate::guard), "Files sent by the kernel", for how
//! that fits under hyper). Over TLS the bytes must be encrypted, and over
//! HTTP/2 they go in frames of hyper's, so there, as for compressed
//! bodies and multipart ranges, the file is read.
//!
//! Either way the body has the length announced in `Content-Length`, or
//! fails: a file that shrinks while it is sent ends the body with an
//! error (hyper then closes the connection, and the client sees a short
//! body), never with bytes from elsewhere. A filesystem sendfile cannot
//! read from (`EINVAL`, `ENOSYS`) sends the rest by reading.

use std::io::{Seek as _, SeekFrom};
use std::os::fd::AsFd as _;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::Stream as _;
use hyper::body::{Body, Frame, SizeHint};
use tokio::io::{AsyncReadExt as _, Take};
use tokio_util::io::ReaderStream;

use crate::guard::ZeroCopy;
use crate::throttle::{self, Throttle};
use crate::zero_copy::{self, MAX_CHUNK};

/// What the file is read by, when it is read.
const READ_CHUNK: usize = 64 << 10;

/// A filesystem without sendfile is one line in the log every so often,
/// not one per file.
const LOG_EVERY: Duration = Duration::from_secs(600);
static FELL_BACK: Throttle = Throttle::new(LOG_EVERY);

/// The bytes `len` bytes from `start` of an open file.
pub struct FileBody {
    how: How,
}

enum How {
    /// sendfile(2) onto the socket.
    Kernel {
        file: std::fs::File,
        offset: u64,
        left: u64,
        socket: ZeroCopy,
    },
    /// Read into memory, 64 KiB at a time, and handed to hyper.
    Read {
        chunks: ReaderStream<Take<tokio::fs::File>>,
        left: u64,
    },
}

impl std::fmt::Debug for FileBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.how {
            How::Kernel { offset, left, .. } => f
                .debug_struct("FileBody::Kernel")
                .field("offset", offset)
                .field("left", left)
                .finish(),
            How::Read { left, .. } => f
                .debug_struct("FileBody::Read")
                .field("left", left)
                .finish(),
        }
    }
}

impl FileBody {
    /// `len` bytes of `file` from `start`; with `socket`, sent with
    /// sendfile(2).
    pub(crate) fn new(
        mut file: std::fs::File,
        start: u64,
        len: u64,
        socket: Option<ZeroCopy>,
    ) -> std::io::Result<FileBody> {
        let how = match socket {
            Some(socket) => How::Kernel {
                file,
                offset: start,
                left: len,
                socket,
            },
            None => {
                if start > 0 {
                    // A seek touches no data: it cannot block on the disk.
                    file.seek(SeekFrom::Start(start))?;
                }
                reading(tokio::fs::File::from_std(file), len)
            }
        };
        Ok(FileBody { how })
    }

    /// The rest of the file, read instead (sendfile cannot read it).
    fn fall_back(&mut self, e: &std::io::Error) -> std::io::Result<()> {
        let How::Kernel {
            file, offset, left, ..
        } = &mut self.how
        else {
            return Ok(());
        };
        if let Some(left_out) = FELL_BACK.allow() {
            tracing::info!(
                "sendfile(2) cannot send a file from its filesystem ({e}): it is read instead; \
                 --no-sendfile reads every file{}",
                throttle::left_out(left_out, LOG_EVERY)
            );
        }
        let mut file = file.try_clone()?;
        // A seek touches no data: it cannot block on the disk.
        file.seek(SeekFrom::Start(*offset))?;
        self.how = reading(tokio::fs::File::from_std(file), *left);
        Ok(())
    }
}

fn reading(file: tokio::fs::File, len: u64) -> How {
    How::Read {
        chunks: ReaderStream::with_capacity(file.take(len), READ_CHUNK),
        left: len,
    }
}

fn failed(why: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(format!("file body cut: {why}"))
}

impl Body for FileBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let this = self.get_mut();
        loop {
            let (file, offset, left, socket) = match &mut this.how {
                How::Read { chunks, left } => {
                    return match std::task::ready!(Pin::new(chunks).poll_next(cx)) {
                        Some(Ok(chunk)) => {
                            *left -= chunk.len() as u64;
                            Poll::Ready(Some(Ok(Frame::data(chunk))))
                        }
                        Some(Err(e)) => Poll::Ready(Some(Err(failed(e)))),
                        None if *left > 0 => Poll::Ready(Some(Err(failed(format!(
                            "the file shrank while it was sent ({left} bytes short)"
                        ))))),
                        None => Poll::Ready(None),
                    };
                }
                How::Kernel {
                    file,
                    offset,
                    left,
                    socket,
                } => (file, offset, left, socket),
            };
            if *left == 0 {
                return Poll::Ready(None);
            }
            let count = (*left).min(MAX_CHUNK as u64) as usize;
            match std::task::ready!(socket.poll_send(cx, file.as_fd(), offset, count)) {
                Ok(placeholder) if placeholder.is_empty() => {
                    return Poll::Ready(Some(Err(failed(format!(
                        "the file shrank while it was sent ({left} bytes short)"
                    )))));
                }
                Ok(placeholder) => {
                    *left -= placeholder.len() as u64;
                    return Poll::Ready(Some(Ok(Frame::data(placeholder))));
                }
                Err(e) if zero_copy::is_unsupported(&e) => {
                    if let Err(e) = this.fall_back(&e) {
                        return Poll::Ready(Some(Err(failed(e))));
                    }
                }
                Err(e) => return Poll::Ready(Some(Err(failed(e)))),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.how {
            How::Kernel { left, .. } => *left == 0,
            How::Read { left, .. } => *left == 0,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.how {
            How::Kernel { left, .. } => SizeHint::with_exact(*left),
            How::Read { left, .. } => SizeHint::with_exact(*left),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;
    use std::os::fd::BorrowedFd;
    use std::sync::Arc;

    use http::{Request, Response};
    use http_body_util::{Either, Full};
    use hyper::body::Incoming;
    use hyper_util::rt::TokioIo;
    use prometheus_client::metrics::counter::Counter;
    use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, ReadBuf};

    use super::*;
    use crate::framing::Limits;
    use crate::guard::{GuardedIo, Shared, Timeouts, Tracked};
    use crate::listener::{Peer, Socket};
    use crate::zero_copy::SendFile;

    type TestBody = Tracked<Either<FileBody, Full<Bytes>>>;

    /// A socket whose sendfile(2) works `works` times, then fails as on a
    /// filesystem without it.
    struct Refusing<T> {
        inner: T,
        works: usize,
    }

    impl<T: SendFile> SendFile for Refusing<T> {
        fn poll_send_file(
            &mut self,
            cx: &mut Context<'_>,
            file: BorrowedFd<'_>,
            offset: &mut u64,
            count: usize,
        ) -> Poll<std::io::Result<usize>> {
            if self.works == 0 {
                let einval = rustix::io::Errno::INVAL.raw_os_error();
                return Poll::Ready(Err(std::io::Error::from_raw_os_error(einval)));
            }
            let sent = std::task::ready!(self.inner.poll_send_file(cx, file, offset, count));
            self.works -= 1;
            Poll::Ready(sent)
        }
    }

    impl<T: AsyncRead + Unpin> AsyncRead for Refusing<T> {
        fn poll_read(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            out: &mut ReadBuf<'_>,
        ) -> Poll<std::io::Result<()>> {
            Pin::new(&mut self.get_mut().inner).poll_read(cx, out)
        }
    }

    impl<T: AsyncWrite + Unpin> AsyncWrite for Refusing<T> {
        fn poll_write(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            data: &[u8],
        ) -> Poll<std::io::Result<usize>> {
            Pin::new(&mut self.get_mut().inner).poll_write(cx, data)
        }

        fn poll_write_vectored(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            bufs: &[std::io::IoSlice<'_>],
        ) -> Poll<std::io::Result<usize>> {
            Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
        }

        fn is_write_vectored(&self) -> bool {
            self.inner.is_write_vectored()
        }

        fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Pin::new(&mut self.get_mut().inner).poll_flush(cx)
        }

        fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
        }
    }

    /// Bytes that differ at every offset, with no run of zeros a
    /// placeholder could hide in.
    fn data(len: usize) -> Vec<u8> {
        (0..len as u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8 | 1)
            .collect()
    }

    const RANGE: (u64, u64) = (1000, 5 << 20);

    /// How the test server answers: `/whole` the file, `/range` RANGE of
    /// it, `/short` more than the file holds, anything else a small body.
    async fn answer(
        req: Request<Incoming>,
        path: Arc<std::path::PathBuf>,
        len: u64,
        shared: Arc<Shared>,
    ) -> Response<TestBody> {
        let in_flight = shared.begin().in_flight;
        let (start, n) = match req.uri().path() {
            "/whole" => (0, len),
            "/range" => RANGE,
            "/short" => (0, len + 10),
            _ => {
                let body = Either::Right(Full::new(Bytes::from_static(b"from php")));
                return Response::new(Tracked::new(body, in_flight));
            }
        };
        let file = std::fs::File::open(&*path).unwrap();
        let body = FileBody::new(file, start, n, shared.zero_copy()).unwrap();
        let mut response = Response::new(Tracked::new(Either::Left(body), in_flight));
        response
            .headers_mut()
            .insert(http::header::CONTENT_LENGTH, n.into());
        response
    }

    /// Serves one connection for `file` (sendfile working `works` times,
    /// or off), sends it `requests` at once, and returns all it read
    /// until the server closed, with the bytes sent by sendfile.
    async fn exchange(file: &[u8], works: Option<usize>, requests: &[&str]) -> (Vec<u8>, u64) {
        let mut on_disk = tempfile::NamedTempFile::new().unwrap();
        on_disk.write_all(file).unwrap();
        let path = Arc::new(on_disk.path().to_path_buf());
        let len = file.len() as u64;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let sent = Counter::default();
        let counted = sent.clone();
        let server = tokio::spawn(async move {
            let (tcp, remote) = listener.accept().await.unwrap();
            let peer = Peer::Tcp(remote);
            let socket = Refusing {
                inner: Socket::Tcp(tcp),
                works: works.unwrap_or(0),
            };
            let limits = Limits {
                request_line: 8 << 10,
                header_size: 32 << 10,
                headers: 100,
            };
            let timeouts = Timeouts {
                header: Duration::from_secs(30),
                body: Duration::from_secs(30),
                keep_alive: Duration::from_secs(30),
            };
            let shared = Arc::new(Shared::default());
            let io = GuardedIo::http1(socket, limits, timeouts, shared.clone(), peer);
            let io = match works {
                Some(_) => io.with_zero_copy(Some(counted)),
                None => io,
            };
            let service = hyper::service::service_fn(move |req| {
                let (path, shared) = (path.clone(), shared.clone());
                async move { Ok::<_, std::convert::Infallible>(answer(req, path, len, shared).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(io), service)
                .await;
        });
        let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let pipelined: String = requests
            .iter()
            .map(|path| format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n"))
            .collect();
        client.write_all(pipelined.as_bytes()).await.unwrap();
        client
            .write_all(b"GET /end HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        // Let the socket buffer fill: sendfile then waits on the client.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut got = Vec::new();
        let _ = client.read_to_end(&mut got).await;
        server.await.unwrap();
        (got, sent.get())
    }

    /// The responses in `bytes`: each one's status line and body.
    fn responses(mut bytes: &[u8]) -> Vec<(String, Vec<u8>)> {
        let mut out = Vec::new();
        while !bytes.is_empty() {
            let end = bytes
                .windows(4)
                .position(|w| w == b"\r\n\r\n")
                .expect("a whole head")
                + 4;
            let head = String::from_utf8_lossy(&bytes[..end]).into_owned();
            let len: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")
                        .map(str::to_owned)
                })
                .expect("content-length")
                .trim()
                .parse()
                .unwrap();
            let body_end = (end + len).min(bytes.len());
            let status = head.lines().next().unwrap().to_owned();
            out.push((status, bytes[end..body_end].to_vec()));
            bytes = &bytes[body_end..];
        }
        out
    }

    fn assert_answers(file: &[u8], got: &[u8]) {
        let (first, n) = RANGE;
        let range = &file[first as usize..(first + n) as usize];
        let expected: [&[u8]; 5] = [file, range, b"from php", file, b"from php"];
        let got = responses(got);
        assert_eq!(
            got.len(),
            expected.len(),
            "{:?}",
            got.iter().map(|r| &r.0).collect::<Vec<_>>()
        );
        for (i, ((status, body), want)) in got.iter().zip(expected).enumerate() {
            assert_eq!(status, "HTTP/1.1 200 OK", "response {i}");
            assert!(
                body == want,
                "response {i}: {} bytes, {} expected, differ",
                body.len(),
                want.len()
            );
        }
    }

    const PIPELINED: [&str; 4] = ["/whole", "/range", "/php", "/whole"];

    /// Pipelined file responses sent by the kernel, around one from PHP,
    /// come back whole, in order, each byte in its place.
    #[tokio::test]
    async fn pipelined_files_sent_by_the_kernel_are_the_files() {
        let file = data(6 << 20);
        let (got, sent) = exchange(&file, Some(usize::MAX), &PIPELINED).await;
        assert_answers(&file, &got);
        assert_eq!(
            sent,
            2 * file.len() as u64 + RANGE.1,
            "every file byte by sendfile"
        );
    }

    /// sendfile refused at once, or after a few pieces (the rest is then
    /// read, behind placeholders hyper still holds): the same bytes.
    #[tokio::test]
    async fn a_file_sendfile_cannot_send_is_read_instead() {
        let file = data(6 << 20);
        for works in [0, 1, 3] {
            let (got, sent) = exchange(&file, Some(works), &PIPELINED).await;
            assert_answers(&file, &got);
            assert!(sent <= works as u64 * MAX_CHUNK as u64, "{works}: {sent}");
        }
        let (got, sent) = exchange(&file, None, &PIPELINED).await;
        assert_answers(&file, &got);
        assert_eq!(sent, 0);
    }

    /// A file shorter than its Content-Length (it shrank): the body is
    /// cut and the connection closed; what came is the file's bytes, and
    /// nothing after it is answered.
    #[tokio::test]
    async fn a_file_that_shrank_cuts_the_connection() {
        let file = data(3 << 20);
        for works in [Some(usize::MAX), Some(1), None] {
            let (got, _) = exchange(&file, works, &["/short", "/php"]).await;
            let got = responses(&got);
            assert_eq!(got.len(), 1, "{works:?}: nothing after the cut");
            // Not always all of it: the connection may be reset, as the
            // requests after it are left unread.
            let body = &got[0].1;
            assert!(
                body[..] == file[..body.len()],
                "{works:?}: the file's bytes, then the end"
            );
        }
    }
}
