//! Interim responses from an HTTP/2 server's service (Hearth's patch).
//!
//! With `http2::Builder::informational_responses(true)`, each request
//! carries an [`InformationalSender`]. What the service sends through it
//! goes out on the request's stream as interim `HEADERS` frames, before
//! the response and in order; once the response is on its way, sending
//! fails. Upstream's version of this is hyperium/hyper#4114.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures_channel::mpsc;
use futures_core::Stream;
use http::{Response, StatusCode};

/// Interim responses one stream holds before they are sent; sending more
/// fails until the stream's task has sent the earlier ones.
const QUEUE: usize = 8;

/// Sends interim (1xx) responses, such as 103 Early Hints, on an HTTP/2
/// stream ahead of its response.
///
/// Found in a request's extensions when the server was built with
/// `http2::Builder::informational_responses(true)`.
#[derive(Clone, Debug)]
pub struct InformationalSender(mpsc::Sender<Response<()>>);

impl InformationalSender {
    /// Queues an interim response for the stream. It is given back if its
    /// status is not 1xx (or is 101, which HTTP/2 forbids), if the response
    /// has already been sent or the stream is gone, or if too many are
    /// already waiting to go out.
    pub fn send(&mut self, response: Response<()>) -> Result<(), Response<()>> {
        let status = response.status();
        if !status.is_informational() || status == StatusCode::SWITCHING_PROTOCOLS {
            return Err(response);
        }
        self.0.try_send(response).map_err(|e| e.into_inner())
    }
}

/// The stream's end of the channel.
#[derive(Debug)]
pub(crate) struct Receiver(mpsc::Receiver<Response<()>>);

impl Receiver {
    /// The next interim response waiting, if any; the task is woken when
    /// one is sent.
    pub(crate) fn poll_next(&mut self, cx: &mut Context<'_>) -> Option<Response<()>> {
        match Pin::new(&mut self.0).poll_next(cx) {
            Poll::Ready(Some(response)) => Some(response),
            _ => None,
        }
    }
}

pub(crate) fn channel() -> (InformationalSender, Receiver) {
    let (tx, rx) = mpsc::channel(QUEUE);
    (InformationalSender(tx), Receiver(rx))
}
