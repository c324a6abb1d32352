//! Classic mode's engine: a php-fpm pool Hearth configures, starts and
//! supervises, and one FastCGI request/response exchange with it.
//!
//! Each classic request runs with PHP's own request lifecycle inside a
//! php-fpm child (fresh globals, `.user.ini`, `fastcgi_finish_request()`,
//! OPcache shared by the pool's children). Modules, from the public face
//! down (each uses only those below it):
//!
//! - [`pool`]: the php-fpm master process: its generated configuration in
//!   a private directory, start, stop, reload, and the list of its children
//!   read from the status page.
//! - [`fastcgi`]: one exchange over the pool's unix socket: params and a
//!   streamed body in, the CGI head parsed as nginx parses it and the body
//!   streamed out, every wait bounded.
//! - `error`: the crate's one [`Error`], with a kind.

pub mod pool;

pub mod fastcgi;

mod error;

pub use error::Error;
