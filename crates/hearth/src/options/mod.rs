//! The options of `hearth serve`, `hearth run` and `hearth work`: one
//! struct per command ([`ServeOptions`], [`RunOptions`], [`WorkOptions`]),
//! read from the command line and from the command's section of
//! `hearth.toml`.
//!
//! Each option is one field: its doc comment is its `--help`, its `#[arg]`
//! its flag, its name its key in the file, and the struct's `Default` its
//! default. A value comes from the flag when one is given, else from the
//! file, else from the default; lists (php.ini settings, trusted proxies)
//! add up, the file's first. The result is checked once, by the section's
//! `validate()`, and an error names where the value came from: the flag,
//! or the file, the section and the key.
//!
//! This module reads the config file and nothing else: resolving paths on
//! disk, loading certificates and looking up users is the commands' work.

mod file;
pub mod pools;
pub mod run;
pub mod serve;
pub mod values;
pub mod work;

#[cfg(test)]
mod docs;
#[cfg(test)]
mod tests;

use std::fmt;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use clap::parser::ValueSource;
use clap::ArgMatches;
use serde::de::DeserializeOwned;
use serde::Serialize;

pub use run::RunOptions;
pub use serve::ServeOptions;
pub use work::WorkOptions;

use file::FileConfig;

/// A command's options: its flags (`clap::Args`) and its section of the
/// file (serde), with one field per option.
pub trait Section: clap::Args + DeserializeOwned + Serialize + Default + Clone {
    /// The section's name in the file.
    const NAME: &'static str;

    /// This command's section of the file.
    fn of(file: FileConfig) -> Self;

    /// The paths that, given in the file, are relative to its directory.
    fn file_paths(&mut self) -> Vec<(&'static str, &mut Option<PathBuf>)>;

    /// Makes the other relative paths given in the file (those not in
    /// [`Section::file_paths`]) relative to its directory, `dir`.
    fn paths_from_file(&mut self, _dir: &Path) {}

    /// Puts the file's entries of the lists given on the command line
    /// back, before the flags' (`self` has the flags' only).
    fn add_up(&mut self, file: Self, given: &Origins<'_>);

    /// Refuses a value out of range, or values that contradict each other.
    fn validate(&self, given: &Origins<'_>) -> Result<(), Fault>;
}

/// A value `validate()` refuses: the field's name (its key in the file)
/// and why. In `why`, `{name}` names another option, as the error names
/// the field: `--tls-key` when the field came from a flag, `tls_key` when
/// it came from the file.
#[derive(Debug)]
pub struct Fault {
    field: &'static str,
    why: String,
}

impl Fault {
    pub fn new(field: &'static str, why: impl Into<String>) -> Fault {
        Fault {
            field,
            why: why.into(),
        }
    }
}

/// Options that cannot be used, and why: the message names the flag, or
/// the file, the section and the key.
#[derive(Debug)]
pub struct Error {
    message: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// Where values came from: which flags were given, and the file.
#[derive(Debug)]
pub struct Origins<'a> {
    matches: &'a ArgMatches,
    /// The command's arguments, for flags' names.
    command: clap::Command,
    file: Option<&'a Path>,
    /// The keys the file sets in the section.
    file_keys: Vec<String>,
    section: &'static str,
}

impl Origins<'_> {
    /// Whether the option `field` was given on the command line.
    pub fn on_command_line(&self, field: &str) -> bool {
        self.command.get_arguments().any(|a| a.get_id() == field)
            && self.matches.value_source(field) == Some(ValueSource::CommandLine)
    }

    /// The flag of `field`: `--max-queue`, `SCRIPT`.
    fn flag(&self, field: &str) -> String {
        let arg = self.command.get_arguments().find(|a| a.get_id() == field);
        match arg {
            Some(arg) if arg.get_long().is_some() => {
                format!("--{}", arg.get_long().unwrap_or_default())
            }
            Some(arg) => arg
                .get_value_names()
                .and_then(|names| names.first())
                .map_or_else(|| field.to_uppercase(), ToString::to_string),
            None => field.to_owned(),
        }
    }

    /// The error for `fault`, naming the flag it came from, or else the
    /// file, section and key.
    fn refuse(&self, fault: Fault) -> Error {
        let from_flag = self.on_command_line(fault.field) || self.file.is_none();
        // Each `{other}` in the message: named as it was set (a flag, a
        // key in the file), or if it was not, as the field is.
        let mut why = String::new();
        let mut rest = fault.why.as_str();
        while let Some(start) = rest.find('{') {
            let Some(len) = rest[start..].find('}') else {
                break;
            };
            let other = &rest[start + 1..start + len];
            why.push_str(&rest[..start]);
            if !self.command.get_arguments().any(|a| a.get_id() == other) {
                why.push_str(&rest[start..=start + len]);
            } else if self.on_command_line(other)
                || (from_flag && !self.file_keys.iter().any(|k| k == other))
            {
                why.push_str(&self.flag(other));
            } else {
                why.push_str(other);
            }
            rest = &rest[start + len + 1..];
        }
        why.push_str(rest);
        match (from_flag, self.file) {
            (false, Some(file)) => Error {
                message: format!(
                    "{}: [{}] {}: {why}",
                    file.display(),
                    self.section,
                    fault.field
                ),
            },
            _ => Error {
                message: format!("{}: {why}", self.flag(fault.field)),
            },
        }
    }
}

/// A command's parsed command line, which [`CommandLine::load`] reads
/// into its options. (clap parses the flags; the values are laid over the
/// file's in `load`.)
#[derive(Debug, Clone)]
pub struct CommandLine<T> {
    matches: ArgMatches,
    options: PhantomData<T>,
}

impl<T: Section> CommandLine<T> {
    /// The options: the flags over the file (`--config`) over the
    /// defaults, checked.
    pub fn load(&self) -> Result<T, Error> {
        let config = self.matches.get_one::<PathBuf>("config").cloned();
        let mut file_keys = Vec::new();
        let mut options = match &config {
            Some(path) => {
                let file = FileConfig::load(path)?;
                file_keys = file.keys(T::NAME);
                let mut options = T::of(file);
                let dir = path.parent().unwrap_or(Path::new("."));
                for (_, value) in options.file_paths() {
                    if let Some(relative) = value.as_mut().filter(|p| p.is_relative()) {
                        *relative = dir.join(&*relative);
                    }
                }
                options.paths_from_file(dir);
                options
            }
            None => T::default(),
        };
        let from_file = options.clone();
        options
            .update_from_arg_matches(&self.matches)
            .map_err(|e| Error {
                message: e.to_string(),
            })?;
        let origins = Origins {
            matches: &self.matches,
            command: T::augment_args(clap::Command::new(T::NAME)),
            file: config.as_deref(),
            file_keys,
            section: T::NAME,
        };
        options.add_up(from_file, &origins);
        options.validate(&origins).map_err(|f| origins.refuse(f))?;
        Ok(options)
    }
}

impl<T: Section> clap::FromArgMatches for CommandLine<T> {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        Ok(CommandLine {
            matches: matches.clone(),
            options: PhantomData,
        })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        self.matches = matches.clone();
        Ok(())
    }
}

impl<T: Section> clap::Args for CommandLine<T> {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        with_defaults::<T>(T::augment_args(cmd))
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

/// No flag is required: every option has a default. `--help` shows it
/// (from `T::default()`) after the help of each option that takes a
/// value, unless the help says what it is itself (`[default: one per
/// CPU]`: a default that is not a value).
fn with_defaults<T: Section>(cmd: clap::Command) -> clap::Command {
    cmd.mut_args(|arg| {
        let arg = arg.required(false);
        let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
        if is_switch(&arg) || help.contains("[default: ") {
            return arg;
        }
        match default_of::<T>(arg.get_id().as_str()) {
            Some(value) => arg.help(format!("{help} [default: {value}]")),
            None => arg,
        }
    })
}

/// Whether `arg` is a switch (`--h2c`, `--no-compression`): it takes no
/// value.
fn is_switch(arg: &clap::Arg) -> bool {
    !arg.get_action().takes_values() || arg.get_num_args().is_some_and(|n| n.max_values() == 0)
}

/// `T::default()`'s value of `field` as text (`1024`, `8M`, `30s`,
/// `php-cgi`); none when it is not a value (none, empty, or a switch's).
fn default_of<T: Section>(field: &str) -> Option<String> {
    let defaults = serde_json::to_value(T::default()).ok()?;
    match defaults.get(field)? {
        serde_json::Value::String(s) if !s.is_empty() => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}
