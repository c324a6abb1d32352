use std::fmt;
use std::io;

/// An error from the worker pool.
///
/// The kind decides what a client is told: [`is_unavailable`] is a 503
/// (nothing was sent to a worker, retrying is safe), [`is_worker_lost`] and
/// [`is_protocol`] are a 502 (a worker failed while it had the request).
///
/// [`is_unavailable`]: Error::is_unavailable
/// [`is_worker_lost`]: Error::is_worker_lost
/// [`is_protocol`]: Error::is_protocol
#[derive(Debug)]
pub struct Error {
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    /// No worker could take the request: none became free in time, none can
    /// boot, or the pool is stopping.
    Unavailable(String),
    /// The worker exited or closed its channel while it had the request.
    WorkerLost(String),
    /// The worker sent bytes that are not the protocol.
    Protocol(hearth_proto::Error),
    /// Starting PHP or talking to it failed at the OS level.
    Io(io::Error),
    /// A worker did not complete its handshake.
    Boot(String),
    /// The configuration cannot work: a worker script that does not
    /// exist, a user who cannot read it. Retrying does not help.
    Config(String),
    /// The worker did not finish the request within its time limit; it is
    /// being stopped and replaced.
    TimedOut(String),
}

impl Error {
    pub(crate) fn unavailable(why: impl Into<String>) -> Self {
        Error {
            kind: Kind::Unavailable(why.into()),
        }
    }

    pub(crate) fn worker_lost(why: impl Into<String>) -> Self {
        Error {
            kind: Kind::WorkerLost(why.into()),
        }
    }

    pub(crate) fn timed_out(why: impl Into<String>) -> Self {
        Error {
            kind: Kind::TimedOut(why.into()),
        }
    }

    pub(crate) fn boot(why: impl Into<String>) -> Self {
        Error {
            kind: Kind::Boot(why.into()),
        }
    }

    pub(crate) fn config(why: impl Into<String>) -> Self {
        Error {
            kind: Kind::Config(why.into()),
        }
    }

    /// No worker took the request; it was not started, so retrying is safe.
    pub fn is_unavailable(&self) -> bool {
        matches!(self.kind, Kind::Unavailable(_))
    }

    /// The worker died or hung up while handling the request.
    pub fn is_worker_lost(&self) -> bool {
        matches!(self.kind, Kind::WorkerLost(_))
    }

    /// The worker ran past the request's time limit (a 504).
    pub fn is_timed_out(&self) -> bool {
        matches!(self.kind, Kind::TimedOut(_))
    }

    /// The worker broke the protocol.
    pub fn is_protocol(&self) -> bool {
        matches!(self.kind, Kind::Protocol(_))
    }

    /// A worker failed to boot.
    pub fn is_boot(&self) -> bool {
        matches!(self.kind, Kind::Boot(_))
    }

    /// The configuration cannot work (see [`PoolConfig`](crate::PoolConfig)).
    pub fn is_config(&self) -> bool {
        matches!(self.kind, Kind::Config(_))
    }

    pub fn is_io(&self) -> bool {
        matches!(self.kind, Kind::Io(_))
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error { kind: Kind::Io(e) }
    }
}

impl From<hearth_proto::Error> for Error {
    fn from(e: hearth_proto::Error) -> Self {
        Error {
            kind: Kind::Protocol(e),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Unavailable(why) => write!(f, "no worker available: {why}"),
            Kind::WorkerLost(why) => write!(f, "worker lost: {why}"),
            Kind::Protocol(e) => write!(f, "worker protocol error: {e}"),
            Kind::Io(e) => write!(f, "{e}"),
            Kind::Boot(why) | Kind::Config(why) => write!(f, "{why}"),
            Kind::TimedOut(why) => write!(f, "request timed out: {why}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            Kind::Protocol(e) => Some(e),
            Kind::Io(e) => Some(e),
            _ => None,
        }
    }
}
