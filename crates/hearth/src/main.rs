//! `hearth`: run PHP apps in warm workers.

/// Writes a line to stderr, ignoring failure (`eprintln!` panics when
/// stderr is closed, and a runner must finish its tasks regardless).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}
pub(crate) use say;

mod assets;
mod classic;
mod control;
mod ctl;
mod dashboard;
mod listen;
#[cfg(test)]
mod man;
mod observe;
mod options;
mod queue;
mod run;
mod serve;
mod systemd;
mod work;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "hearth",
    version,
    about = "Run PHP apps in warm workers",
    propagate_version = true
)]
struct Cli {
    /// Log level: error, warn, info, debug or trace (or RUST_LOG syntax)
    /// [default: info for serve and work, warn for run]
    #[arg(long, global = true, env = "HEARTH_LOG", value_name = "LEVEL")]
    log_level: Option<String>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve HTTP from warm PHP workers running SCRIPT (the built-in demo if none).
    Serve(options::CommandLine<options::ServeOptions>),
    /// Run tasks in parallel: shell commands, or PHP jobs in warm PHP workers.
    #[command(after_help = run::AFTER_HELP)]
    Run(options::CommandLine<options::RunOptions>),
    /// Take jobs from a queue, or calls on a unix socket, and run them: shell tasks, or PHP jobs in warm PHP workers.
    #[command(after_help = work::AFTER_HELP)]
    Work(options::CommandLine<options::WorkOptions>),
    /// Look into a queue and act on it: stats, peek, retry, delete, purge, push.
    #[command(after_help = queue::AFTER_HELP)]
    Queue(queue::QueueArgs),
    /// Print the directory of the PHP library built into this binary.
    PhpLib,
    /// Show a running server's workers and pool totals (over its control socket).
    Status(ctl::StatusArgs),
    /// Reload a running server's workers, as SIGHUP does; exit status 1 if it fails.
    Reload(ctl::Target),
    /// Stop a running server gracefully, as SIGTERM does, and wait until it has exited.
    Stop(ctl::Target),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse_from(with_parallel_options(std::env::args_os().collect())) {
        Ok(cli) => cli,
        // `hearth run` exits with 255 for a command line it refuses, as GNU
        // parallel does: its 2 means "2 tasks failed".
        Err(e) if e.use_stderr() && subcommand_given().as_deref() == Some("run") => {
            let _ = e.print();
            return ExitCode::from(hearth_run::ERROR_STATUS);
        }
        Err(e) => e.exit(),
    };
    let default_level = match cli.command {
        Command::Run(_) => "warn",
        _ => "info",
    };
    init_logging(cli.log_level.as_deref().unwrap_or(default_level));
    let result = match cli.command {
        Command::Run(given) => {
            // A panic is an error like any other (255), not "101 failed",
            // the status Rust gives it. The panic hook has said what it was.
            let ran =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run::run(given.load()?)));
            return match ran {
                Ok(Ok(code)) => ExitCode::from(code),
                Ok(Err(e)) => {
                    crate::say!("hearth run: {e:#}");
                    ExitCode::from(hearth_run::ERROR_STATUS)
                }
                Err(_) => ExitCode::from(hearth_run::ERROR_STATUS),
            };
        }
        Command::Serve(given) => given.load().map_err(Into::into).and_then(serve::run),
        Command::Work(given) => given.load().map_err(Into::into).and_then(work::run),
        Command::Queue(args) => queue::run(args),
        Command::Status(args) => ctl::status(args),
        Command::Reload(target) => ctl::reload(target),
        Command::Stop(target) => ctl::stop(target),
        Command::PhpLib => assets::extract()
            .map(|dir: PathBuf| println!("{}", dir.join("php").display()))
            .map_err(Into::into),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            crate::say!("hearth: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `hearth run`'s arguments with the options of `$PARALLEL` first, as GNU
/// parallel reads that variable (words separated by white space).
fn with_parallel_options(mut args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let Some(options) = std::env::var_os("PARALLEL").filter(|o| !o.is_empty()) else {
        return args;
    };
    if subcommand_given().as_deref() != Some("run") {
        return args;
    }
    let Some(at) = args.iter().position(|a| a == "run") else {
        return args;
    };
    let words: Vec<std::ffi::OsString> = options
        .to_string_lossy()
        .split_whitespace()
        .map(Into::into)
        .collect();
    args.splice(at + 1..at + 1, words);
    args
}

/// The subcommand named on the command line, found without clap (for when
/// clap refused the command line): the first argument that is neither an
/// option nor the value of a top-level option.
fn subcommand_given() -> Option<String> {
    use clap::CommandFactory as _;
    let cli = Cli::command();
    let takes_value = |long: &str| {
        cli.get_arguments()
            .any(|a| a.get_long() == Some(long) && a.get_action().takes_values())
    };
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        let arg = arg.to_string_lossy();
        if arg == "--" {
            return None;
        }
        if let Some(long) = arg.strip_prefix("--") {
            if !long.contains('=') && takes_value(long) {
                args.next();
            }
            continue;
        }
        if !arg.starts_with('-') {
            return Some(arg.into_owned());
        }
    }
    None
}

fn init_logging(level: &str) {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    // The h2 crate warns once per connection a client abuses (rapid
    // reset), without the client's address: Hearth logs those itself, at
    // most one every few seconds (hearth-http's `throttle`).
    let level = if level.contains("h2") {
        level.to_owned()
    } else {
        format!("{level},h2=error")
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("RUST_LOG")
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(&level))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    use std::io::IsTerminal as _;
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr)
        // A closed stderr must not end the process (see `say!`).
        .log_internal_errors(false)
        .with_target(false)
        .compact()
        .finish()
        .with(tracing_subscriber::filter::filter_fn(run::shown))
        .init();
}
