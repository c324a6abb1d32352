//! The HTTP front of Hearth: HTTP/1.1, and over TLS (or as h2c) HTTP/2.
//!
//! Each request is read whole (bounded by the body limit; multipart forms
//! parsed and their uploads spooled to disk, other bodies past a small
//! buffer spooled to a file the worker reads), turned into the `$_SERVER`
//! that nginx and php-fpm would give it, handed to one warm worker from the
//! pool, and the worker's response is sent back: whole when the app
//! produced it at once, streamed when the app flushed along the way.
//!
//! With a document root, GET and HEAD requests for files under it are
//! answered from disk first (`static_files`), and compressible responses
//! are gzip- or brotli-encoded for clients that accept it (`compress`).

mod access_log;
pub mod admin;
mod body;
mod cgi;
mod compress;
mod config;
mod framing;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod guard;
mod h2;
mod metrics;
mod observe;
mod protocol;
mod request;
mod response;
mod server;
mod static_files;
mod target;
mod tls;

pub use access_log::{AccessLog, AccessLogFormat};
pub use cgi::{parse_trusted_proxy, Script};
pub use config::ServeConfig;
pub use metrics::Metrics;
pub use observe::{Observed, Observer};
pub use response::{ReaderBody, ResponseBody, StreamError};
pub use server::serve;
pub use tls::{TlsConfig, TlsError};
