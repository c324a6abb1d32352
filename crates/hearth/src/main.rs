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
mod config;
mod control;
mod ctl;
mod observe;
mod run;
mod serve;

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
    /// [default: info for serve, warn for run]
    #[arg(long, global = true, env = "HEARTH_LOG")]
    log_level: Option<String>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve HTTP from warm PHP workers running SCRIPT (the built-in demo if none).
    Serve(Box<serve::ServeArgs>),
    /// Run tasks in parallel: shell commands, or PHP jobs in warm PHP workers.
    Run(Box<run::RunArgs>),
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
    let cli = Cli::parse();
    let default_level = match cli.command {
        Command::Run(_) => "warn",
        _ => "info",
    };
    init_logging(cli.log_level.as_deref().unwrap_or(default_level));
    let result = match cli.command {
        Command::Run(args) => {
            return match run::run(*args) {
                Ok(code) => ExitCode::from(code),
                Err(e) => {
                    crate::say!("hearth run: {e:#}");
                    ExitCode::from(2)
                }
            }
        }
        Command::Serve(args) => serve::run(*args),
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

fn init_logging(level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("RUST_LOG")
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(level))
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
        .init();
}
