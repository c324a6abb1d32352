//! `hearth run`: many shell tasks, or many calls of a PHP function in warm
//! PHP workers, run in parallel from one small process.
//!
//! Tasks come in as JSON Lines ([`task`]), each runs as a process of its
//! own ([`exec`]) or as a call in a pooled PHP worker ([`jobs`]), and each
//! finished task becomes one JSON result line ([`output`]) and, if asked,
//! one line of a GNU-parallel-style job log ([`joblog`]). [`runner`] ties
//! them together: concurrency, retries, halting, ordering, signals.
//! [`submit`] runs a batch on the consumers of a queue instead
//! (`hearth run --queue`). [`executor`] is the one way a task runs, shared with [`work`], the loop
//! of `hearth work`, which takes its tasks from a queue.

pub mod args;
pub mod calls;
pub mod duration;
pub mod exec;
pub mod executor;
pub mod joblog;
pub mod jobs;
pub mod output;
pub mod pipe;
pub mod runner;
pub mod submit;
pub mod task;
pub mod template;
pub mod work;

pub use duration::parse_duration;
pub use executor::{start_pool, Executor, Started};
pub use runner::{
    prepare, run, ArgsInput, Halt, HaltLimit, HaltMode, HaltOn, Input, InputFormat, OutputConfig,
    OutputMode, PipeInput, Prepared, Results, Resume, RunConfig, Summary, Tag, ERROR_STATUS,
};

/// Writes a line to stderr, ignoring failure: a runner whose stderr is
/// gone still finishes its tasks.
pub(crate) fn say_stderr(line: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{line}");
}
