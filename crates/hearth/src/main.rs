//! `hearth`: run PHP apps in warm workers.

mod assets;
mod config;
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
    /// Log level: error, warn, info, debug or trace (or RUST_LOG syntax).
    #[arg(long, global = true, env = "HEARTH_LOG", default_value = "info")]
    log_level: String,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve HTTP from warm PHP workers running SCRIPT (the built-in demo if none).
    Serve(Box<serve::ServeArgs>),
    /// Print the directory of the PHP library built into this binary.
    PhpLib,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(&cli.log_level);
    let result = match cli.command {
        Command::Serve(args) => serve::run(*args),
        Command::PhpLib => assets::extract()
            .map(|dir: PathBuf| println!("{}", dir.join("php").display()))
            .map_err(Into::into),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hearth: {e:#}");
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
        .with_target(false)
        .compact()
        .init();
}
