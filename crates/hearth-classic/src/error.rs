//! The one error of this crate: a classic site that cannot be set up.

use std::fmt;
use std::path::{Path, PathBuf};

/// Why a [`Router`](crate::Router) could not be built, naming the path or
/// option at fault.
#[derive(Debug)]
pub struct Error {
    kind: Kind,
    path: PathBuf,
    source: Option<std::io::Error>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// The document root (or a directory symlinks may lead to) is missing.
    Missing,
    /// It exists but is not a directory.
    NotDirectory,
    /// An option is not usable (an index name with a slash, a fallback that
    /// is not an absolute, normalized path).
    BadOption,
}

impl Error {
    pub(crate) fn missing(path: &Path, source: std::io::Error) -> Error {
        Error {
            kind: Kind::Missing,
            path: path.to_path_buf(),
            source: Some(source),
        }
    }

    pub(crate) fn not_directory(path: &Path) -> Error {
        Error {
            kind: Kind::NotDirectory,
            path: path.to_path_buf(),
            source: None,
        }
    }

    pub(crate) fn bad_option(what: &str) -> Error {
        Error {
            kind: Kind::BadOption,
            path: PathBuf::from(what),
            source: None,
        }
    }

    /// The directory does not exist (or cannot be resolved).
    pub fn is_missing(&self) -> bool {
        self.kind == Kind::Missing
    }

    /// The path exists and is not a directory.
    pub fn is_not_directory(&self) -> bool {
        self.kind == Kind::NotDirectory
    }

    /// An option was refused.
    pub fn is_bad_option(&self) -> bool {
        self.kind == Kind::BadOption
    }

    /// The path (or, for a bad option, the option) this error is about.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path.display();
        match (self.kind, &self.source) {
            (Kind::Missing, Some(e)) => write!(f, "document root {path} cannot be used: {e}"),
            (Kind::Missing, None) => write!(f, "document root {path} does not exist"),
            (Kind::NotDirectory, _) => write!(f, "document root {path} is not a directory"),
            (Kind::BadOption, _) => write!(f, "classic routing option refused: {path}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_ref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}
