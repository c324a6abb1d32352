//! A supervised pool of warm PHP worker processes.
//!
//! Each worker is a PHP process (`php-cgi` by default) running the app's
//! worker script, which boots the app once and then serves requests through
//! `Hearth\Worker::serve()`. The pool keeps the configured number of them
//! alive, hands each request to exactly one idle worker ([`Pool::dispatch`]),
//! replaces workers that exit or crash at once, backs off while a broken
//! script fails to boot, and stops them politely, then firmly
//! ([`Pool::shutdown`]).

mod access;
mod config;
mod dispatch;
mod error;
mod observe;
mod paths;
mod php;
mod pool;
mod process;
mod supervisor;
mod worker;

pub use config::{Account, PoolConfig, WorkerUser};
pub use dispatch::Lease;
pub use error::Error;
pub use observe::{RestartReason, WorkerInfo, WorkerState};
pub use paths::Paths;
pub use php::PhpInfo;
pub use pool::{Pool, PoolStatus};
