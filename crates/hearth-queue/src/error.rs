use std::fmt;

/// An error from a queue.
///
/// The kind tells a caller what to do: [`is_unavailable`] means the engine
/// could not be reached for the whole of
/// [`QueueConfig::retry_for`](crate::QueueConfig::retry_for) and the call
/// may be made again later; [`is_too_large`] and [`is_invalid`] are the
/// caller's to fix and retrying does not help; [`is_engine`] is an answer
/// from the engine that is not a lost connection (a Redis that refuses a
/// script, a SQLite file that is not a queue).
///
/// [`is_unavailable`]: Error::is_unavailable
/// [`is_too_large`]: Error::is_too_large
/// [`is_invalid`]: Error::is_invalid
/// [`is_engine`]: Error::is_engine
#[derive(Debug)]
pub struct Error {
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    /// A queue URL that cannot be used.
    Url(String),
    /// A configuration or an argument that cannot work (a zero limit, a
    /// channel name with a space).
    Invalid(String),
    /// A payload or a result over its limit.
    TooLarge {
        what: &'static str,
        size: usize,
        limit: usize,
    },
    /// The engine stayed unreachable for the whole retry period.
    Unavailable(String),
    /// The engine answered with an error.
    Engine(String),
    /// No queue at the URL (opened with [`Queue::open_existing`](crate::Queue::open_existing)).
    NoSuchQueue(String),
}

impl Error {
    pub(crate) fn url(why: impl Into<String>) -> Self {
        Error {
            kind: Kind::Url(why.into()),
        }
    }

    pub(crate) fn invalid(why: impl Into<String>) -> Self {
        Error {
            kind: Kind::Invalid(why.into()),
        }
    }

    pub(crate) fn too_large(what: &'static str, size: usize, limit: usize) -> Self {
        Error {
            kind: Kind::TooLarge { what, size, limit },
        }
    }

    pub(crate) fn unavailable(why: impl Into<String>) -> Self {
        Error {
            kind: Kind::Unavailable(why.into()),
        }
    }

    pub(crate) fn no_such_queue(why: impl Into<String>) -> Self {
        Error {
            kind: Kind::NoSuchQueue(why.into()),
        }
    }

    pub(crate) fn engine(why: impl Into<String>) -> Self {
        Error {
            kind: Kind::Engine(why.into()),
        }
    }

    /// The queue URL cannot be used (see [`QueueUrl`](crate::QueueUrl)).
    pub fn is_url(&self) -> bool {
        matches!(self.kind, Kind::Url(_))
    }

    /// A configuration value or an argument was refused.
    pub fn is_invalid(&self) -> bool {
        matches!(self.kind, Kind::Invalid(_))
    }

    /// A payload or a result is over its configured limit; nothing was
    /// stored.
    pub fn is_too_large(&self) -> bool {
        matches!(self.kind, Kind::TooLarge { .. })
    }

    /// The engine could not be reached for the whole retry period. Nothing
    /// is known to have changed; the call may be made again.
    pub fn is_unavailable(&self) -> bool {
        matches!(self.kind, Kind::Unavailable(_))
    }

    /// The engine answered with an error of its own.
    pub fn is_engine(&self) -> bool {
        matches!(self.kind, Kind::Engine(_))
    }

    /// There is no queue at the URL: nothing was created.
    pub fn is_no_such_queue(&self) -> bool {
        matches!(self.kind, Kind::NoSuchQueue(_))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Url(why) => write!(f, "queue URL: {why}"),
            Kind::Invalid(why) => write!(f, "{why}"),
            Kind::TooLarge { what, size, limit } => {
                write!(
                    f,
                    "{what} of {size} bytes is over the limit of {limit} bytes"
                )
            }
            Kind::Unavailable(why) => write!(f, "queue unavailable: {why}"),
            Kind::Engine(why) => write!(f, "queue engine: {why}"),
            Kind::NoSuchQueue(why) => write!(f, "no such queue: {why}"),
        }
    }
}

impl std::error::Error for Error {}

/// The result of a queue operation.
pub type Result<T, E = Error> = std::result::Result<T, E>;
