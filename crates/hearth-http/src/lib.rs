//! The HTTP/1.1 front of Hearth.
//!
//! Each request is read whole (bounded by the body limit; multipart forms
//! parsed and their uploads spooled to disk), turned into the `$_SERVER`
//! that nginx and php-fpm would give it, handed to one warm worker from the
//! pool, and the worker's response is sent back: whole when the app
//! produced it at once, streamed when the app flushed along the way.

mod body;
mod cgi;
mod response;
mod server;

pub use cgi::Script;
pub use response::{ResponseBody, StreamError};
pub use server::{serve, ServeConfig};
