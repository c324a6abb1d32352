//! What a new connection speaks: TLS or plain, then HTTP/2 or HTTP/1.1.
//!
//! Over TLS the client's ALPN choice decides (`h2`, else HTTP/1.1). On a
//! plain connection with h2c on, a client that opens with HTTP/2's
//! connection preface (prior knowledge) gets HTTP/2; anything else is
//! HTTP/1.1. HTTP/1.1 connections then go through the framing guard
//! ([`GuardedIo`](crate::guard::GuardedIo)); HTTP/2 has its own framing,
//! which hyper's h2 enforces.

use std::io;
use std::os::fd::BorrowedFd;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, ReadBuf};
use tokio::time::Instant;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use crate::listener::{Peer, Socket};
use crate::tls::ALPN_H2;
use crate::zero_copy::SendFile;

/// The first bytes an HTTP/2 client sends (RFC 9113, 3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Every TLS connection starts with a handshake record.
const TLS_HANDSHAKE: u8 = 0x16;

/// What nginx answers when plain HTTP arrives on its HTTPS port.
const PLAIN_ON_TLS_PORT: &[u8] = b"HTTP/1.1 400 Bad Request\r\n\
Content-Type: text/html\r\n\
Content-Length: 220\r\n\
Connection: close\r\n\
\r\n\
<html>\r\n<head><title>400 The plain HTTP request was sent to HTTPS port</title></head>\r\n\
<body>\r\n<center><h1>400 Bad Request</h1></center>\r\n\
<center>The plain HTTP request was sent to HTTPS port</center>\r\n\
</body>\r\n</html>\r\n";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protocol {
    Http1,
    Http2,
}

/// How new connections are set up.
pub(crate) struct Negotiation {
    /// Serve TLS (and ALPN) with this; None: plain HTTP.
    pub tls: Option<TlsAcceptor>,
    /// On plain connections, HTTP/2 for clients that open with its preface.
    pub h2c: bool,
    /// How long the TLS handshake (or the preface) may take.
    pub timeout: Duration,
}

/// A connection's byte stream, once TLS (if any) is set up.
#[derive(Debug)]
pub(crate) enum Stream {
    Plain(Prefixed<Socket>),
    /// The TLS stream over the socket with the first byte read back in
    /// front (read to tell TLS from plain HTTP: a unix socket cannot peek).
    Tls(Box<TlsStream<Prefixed<Socket>>>),
}

/// Sets up a new connection: the TLS handshake, or the sniffing of an h2c
/// preface. None when the connection is over before a protocol is known
/// (closed, timed out, failed handshake, plain HTTP on the TLS port): it
/// has been dealt with and logged.
pub(crate) async fn negotiate(
    mut stream: Socket,
    how: &Negotiation,
    remote: Peer,
) -> Option<(Stream, Protocol)> {
    let Some(acceptor) = &how.tls else {
        if !how.h2c {
            return Some((
                Stream::Plain(Prefixed::new(stream, Bytes::new())),
                Protocol::Http1,
            ));
        }
        return match tokio::time::timeout(how.timeout, sniff_preface(stream)).await {
            Ok(Ok((stream, protocol))) => Some((Stream::Plain(stream), protocol)),
            Ok(Err(e)) => {
                tracing::debug!(%remote, "connection ended before its first request: {e}");
                None
            }
            Err(_) => {
                tracing::debug!(%remote, "closing a connection that sent no request in time");
                None
            }
        };
    };
    let handshake = async {
        let mut first = [0u8; 1];
        if stream.read(&mut first).await? == 0 {
            return Ok(None);
        }
        if first[0] != TLS_HANDSHAKE {
            tracing::debug!(%remote, "plain HTTP on the TLS port: 400");
            refuse_plain(stream).await;
            return Ok(None);
        }
        let stream = Prefixed::new(stream, Bytes::copy_from_slice(&first));
        let tls = acceptor.accept(stream).await?;
        let protocol = match tls.get_ref().1.alpn_protocol() {
            Some(ALPN_H2) => Protocol::Http2,
            _ => Protocol::Http1,
        };
        Ok::<_, io::Error>(Some((Stream::Tls(Box::new(tls)), protocol)))
    };
    match tokio::time::timeout(how.timeout, handshake).await {
        Ok(Ok(negotiated)) => negotiated,
        Ok(Err(e)) => {
            tracing::debug!(%remote, "TLS handshake failed: {e}");
            None
        }
        Err(_) => {
            tracing::debug!(%remote, "TLS handshake not done in time");
            None
        }
    }
}

/// Reads as much of the HTTP/2 preface as the client sends, stopping at
/// the first byte that differs; what was read is replayed to whichever
/// protocol takes the connection.
async fn sniff_preface<S: AsyncRead + Unpin>(mut stream: S) -> io::Result<(Prefixed<S>, Protocol)> {
    let mut buf = [0u8; PREFACE.len()];
    let mut len = 0;
    while len < PREFACE.len() {
        let n = stream.read(&mut buf[len..]).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        len += n;
        if buf[..len] != PREFACE[..len] {
            let prefix = Bytes::copy_from_slice(&buf[..len]);
            return Ok((Prefixed::new(stream, prefix), Protocol::Http1));
        }
    }
    let prefix = Bytes::copy_from_slice(&buf);
    Ok((Prefixed::new(stream, prefix), Protocol::Http2))
}

/// Answers plain HTTP on the TLS port with a 400, as nginx does, then
/// reads what the client still sends for a moment, so that closing does
/// not reset the connection before the client has read the answer.
async fn refuse_plain(mut stream: Socket) {
    if stream.write_all(PLAIN_ON_TLS_PORT).await.is_err() || stream.shutdown().await.is_err() {
        return;
    }
    let deadline = Instant::now() + Duration::from_secs(1);
    let mut scratch = [0u8; 4096];
    let mut drained = 0;
    while drained < 64 << 10 {
        match tokio::time::timeout_at(deadline, stream.read(&mut scratch)).await {
            Ok(Ok(n)) if n > 0 => drained += n,
            _ => return,
        }
    }
}

/// A stream with bytes already read from it put back in front.
#[derive(Debug)]
pub(crate) struct Prefixed<T> {
    prefix: Bytes,
    inner: T,
}

impl<T> Prefixed<T> {
    fn new(inner: T, prefix: Bytes) -> Prefixed<T> {
        Prefixed { prefix, inner }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Prefixed<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.prefix.is_empty() {
            let n = this.prefix.len().min(out.remaining());
            out.put_slice(&this.prefix[..n]);
            this.prefix.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, out)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Prefixed<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, data)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

impl<T: SendFile> SendFile for Prefixed<T> {
    fn poll_send_file(
        &mut self,
        cx: &mut Context<'_>,
        file: BorrowedFd<'_>,
        offset: &mut u64,
        count: usize,
    ) -> Poll<io::Result<usize>> {
        self.inner.poll_send_file(cx, file, offset, count)
    }
}

impl Stream {
    /// Whether the connection is plain, not TLS: the kernel may send
    /// files onto it ([`SendFile`]).
    pub(crate) fn is_plain(&self) -> bool {
        matches!(self, Stream::Plain(_))
    }
}

impl SendFile for Stream {
    fn poll_send_file(
        &mut self,
        cx: &mut Context<'_>,
        file: BorrowedFd<'_>,
        offset: &mut u64,
        count: usize,
    ) -> Poll<io::Result<usize>> {
        match self {
            Stream::Plain(s) => s.poll_send_file(cx, file, offset, count),
            // The bytes must go through rustls to be encrypted.
            Stream::Tls(_) => Poll::Ready(Err(io::ErrorKind::Unsupported.into())),
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, out),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, out),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, data),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, data),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpStream;

    #[test]
    fn the_plain_http_answer_announces_its_length() {
        let text = std::str::from_utf8(PLAIN_ON_TLS_PORT).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(
            head.contains(&format!("Content-Length: {}", body.len())),
            "{} vs {head}",
            body.len()
        );
    }

    async fn pair() -> (TcpStream, TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap());
        let (client, server) = tokio::join!(client, listener.accept());
        (client.unwrap(), server.unwrap().0)
    }

    /// The preface may arrive in pieces; HTTP/1.1 is told apart as soon
    /// as a byte differs, and every byte read is replayed.
    #[tokio::test]
    async fn the_h2c_preface_is_recognised_at_any_split_and_replayed() {
        for split in 1..PREFACE.len() {
            let (mut client, server) = pair().await;
            let sniff = tokio::spawn(sniff_preface(server));
            client.write_all(&PREFACE[..split]).await.unwrap();
            tokio::time::sleep(Duration::from_millis(2)).await;
            client.write_all(&PREFACE[split..]).await.unwrap();
            client.write_all(b"rest").await.unwrap();
            let (mut stream, protocol) = sniff.await.unwrap().unwrap();
            assert_eq!(protocol, Protocol::Http2, "split at {split}");
            let mut got = vec![0u8; PREFACE.len() + 4];
            stream.read_exact(&mut got).await.unwrap();
            assert_eq!(&got[..PREFACE.len()], PREFACE);
            assert_eq!(&got[PREFACE.len()..], b"rest");
        }
        for request in [
            &b"POST / HTTP/1.1\r\n"[..],
            b"PRI / HTTP/1.1\r\n",
            b"GET / HTTP/1.1\r\n",
        ] {
            let (mut client, server) = pair().await;
            client.write_all(request).await.unwrap();
            let (mut stream, protocol) = sniff_preface(server).await.unwrap();
            assert_eq!(protocol, Protocol::Http1);
            let mut got = vec![0u8; request.len()];
            stream.read_exact(&mut got).await.unwrap();
            assert_eq!(got, request);
        }
    }
}
