use std::fmt;

/// An error decoding a frame or a message.
///
/// Every decoding error means the peer is not speaking this protocol (or
/// this version of it): the connection to that worker cannot be trusted any
/// more and must be closed. Match on the predicates, not on the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    repr: Repr,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Repr {
    Version(u8),
    UnknownKind(u8),
    TooLarge { len: u32, max: u32 },
    Malformed(&'static str),
    Unexpected(&'static str),
}

impl Error {
    pub(crate) fn version(v: u8) -> Self {
        Error {
            repr: Repr::Version(v),
        }
    }

    pub(crate) fn unknown_kind(k: u8) -> Self {
        Error {
            repr: Repr::UnknownKind(k),
        }
    }

    pub(crate) fn too_large(len: u32, max: u32) -> Self {
        Error {
            repr: Repr::TooLarge { len, max },
        }
    }

    pub(crate) fn malformed(what: &'static str) -> Self {
        Error {
            repr: Repr::Malformed(what),
        }
    }

    /// A well-formed frame arrived where the protocol does not allow it
    /// (a response frame for another request, a kind sent the wrong way).
    pub fn unexpected(what: &'static str) -> Self {
        Error {
            repr: Repr::Unexpected(what),
        }
    }

    /// See [`Error::unexpected`].
    pub fn is_unexpected(&self) -> bool {
        matches!(self.repr, Repr::Unexpected(_))
    }

    /// The header carries a protocol version this side does not speak.
    pub fn is_version(&self) -> bool {
        matches!(self.repr, Repr::Version(_))
    }

    /// The header names a frame kind this version does not define.
    pub fn is_unknown_kind(&self) -> bool {
        matches!(self.repr, Repr::UnknownKind(_))
    }

    /// The header declares a payload larger than the configured maximum.
    /// Raised before anything is allocated for it.
    pub fn is_too_large(&self) -> bool {
        matches!(self.repr, Repr::TooLarge { .. })
    }

    /// A payload does not have the structure its kind requires.
    pub fn is_malformed(&self) -> bool {
        matches!(self.repr, Repr::Malformed(_))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Version(v) => write!(
                f,
                "unsupported protocol version {v} (this side speaks {})",
                crate::VERSION
            ),
            Repr::UnknownKind(k) => write!(f, "unknown frame kind {k}"),
            Repr::TooLarge { len, max } => {
                write!(f, "frame payload of {len} bytes exceeds the limit of {max}")
            }
            Repr::Malformed(what) => write!(f, "malformed payload: {what}"),
            Repr::Unexpected(what) => write!(f, "unexpected {what}"),
        }
    }
}

impl std::error::Error for Error {}
