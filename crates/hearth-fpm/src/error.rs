use std::fmt;
use std::io;

/// An error from the php-fpm pool or an exchange with it.
///
/// The kind decides what a client is told: [`is_unavailable`] is a 503
/// (nothing reached PHP, retrying is safe), [`is_timed_out`] a 504,
/// [`is_upstream`] a 502 (php-fpm broke the exchange or sent a head nginx
/// would refuse), [`is_body_source`] means the request body the caller
/// passed in failed (the client went away).
///
/// [`is_unavailable`]: Error::is_unavailable
/// [`is_timed_out`]: Error::is_timed_out
/// [`is_upstream`]: Error::is_upstream
/// [`is_body_source`]: Error::is_body_source
#[derive(Debug)]
pub struct Error {
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    /// The configuration cannot work: an invalid setting, no php-fpm binary.
    Config(String),
    /// php-fpm refused the configuration or did not start; the text holds
    /// its own output.
    Start(String),
    /// The php-fpm master exited; the text holds its status and last lines.
    Exited(String),
    /// The pool's socket did not accept the connection in time, or php-fpm
    /// answered that it is overloaded.
    Unavailable(String),
    /// No head within the head timeout, no body chunk within the read
    /// timeout, or the child was killed by `request_terminate_timeout`.
    TimedOut(String),
    /// php-fpm closed the exchange early or sent bytes that are not a valid
    /// FastCGI record or CGI head (including a head past its bound).
    Upstream(String),
    /// Reading the request body the caller passed in failed.
    BodySource(io::Error),
    /// An OS-level failure (files, sockets, signals).
    Io(String, io::Error),
}

impl Error {
    pub(crate) fn config(why: impl Into<String>) -> Self {
        Self {
            kind: Kind::Config(why.into()),
        }
    }
    pub(crate) fn start(why: impl Into<String>) -> Self {
        Self {
            kind: Kind::Start(why.into()),
        }
    }
    pub(crate) fn exited(why: impl Into<String>) -> Self {
        Self {
            kind: Kind::Exited(why.into()),
        }
    }
    pub(crate) fn unavailable(why: impl Into<String>) -> Self {
        Self {
            kind: Kind::Unavailable(why.into()),
        }
    }
    pub(crate) fn timed_out(why: impl Into<String>) -> Self {
        Self {
            kind: Kind::TimedOut(why.into()),
        }
    }
    pub(crate) fn upstream(why: impl Into<String>) -> Self {
        Self {
            kind: Kind::Upstream(why.into()),
        }
    }
    pub(crate) fn body_source(err: io::Error) -> Self {
        Self {
            kind: Kind::BodySource(err),
        }
    }
    pub(crate) fn io(context: impl Into<String>, err: io::Error) -> Self {
        Self {
            kind: Kind::Io(context.into(), err),
        }
    }

    /// The configuration is invalid or names a binary that is not there.
    pub fn is_config(&self) -> bool {
        matches!(self.kind, Kind::Config(_))
    }
    /// php-fpm rejected the configuration or did not become ready.
    pub fn is_start(&self) -> bool {
        matches!(self.kind, Kind::Start(_))
    }
    /// The php-fpm master exited.
    pub fn is_exited(&self) -> bool {
        matches!(self.kind, Kind::Exited(_))
    }
    /// Nothing reached PHP: retrying is safe (503).
    pub fn is_unavailable(&self) -> bool {
        matches!(self.kind, Kind::Unavailable(_))
    }
    /// The request ran out of time (504).
    pub fn is_timed_out(&self) -> bool {
        matches!(self.kind, Kind::TimedOut(_))
    }
    /// php-fpm broke the exchange or sent an invalid response (502).
    pub fn is_upstream(&self) -> bool {
        matches!(self.kind, Kind::Upstream(_))
    }
    /// The caller's request body failed while it was being sent.
    pub fn is_body_source(&self) -> bool {
        matches!(self.kind, Kind::BodySource(_))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Config(why) => write!(f, "php-fpm configuration: {why}"),
            Kind::Start(why) => write!(f, "php-fpm did not start: {why}"),
            Kind::Exited(why) => write!(f, "php-fpm exited: {why}"),
            Kind::Unavailable(why) => write!(f, "php-fpm unavailable: {why}"),
            Kind::TimedOut(why) => write!(f, "php-fpm timed out: {why}"),
            Kind::Upstream(why) => write!(f, "php-fpm sent an invalid response: {why}"),
            Kind::BodySource(err) => write!(f, "reading the request body: {err}"),
            Kind::Io(context, err) => write!(f, "{context}: {err}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            Kind::BodySource(err) | Kind::Io(_, err) => Some(err),
            _ => None,
        }
    }
}
