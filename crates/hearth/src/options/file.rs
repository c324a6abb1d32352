//! `hearth.toml`: a `[serve]`, a `[run]` and a `[work]` section, each holding the
//! options of that command under their flags' names:
//!
//! ```toml
//! [serve]
//! script = "app/worker.php"     # relative to this file
//! listen = "127.0.0.1:8080"
//! max_body_size = "8M"
//! queue_timeout = "30s"
//!
//! [serve.ini]                    # extra php.ini settings for workers
//! memory_limit = "256M"
//!
//! [run]
//! jobs = 8
//! php_bootstrap = "app/bootstrap.php"
//!
//! [work]
//! queue = "redis://127.0.0.1:6379/jobs"
//! php_bootstrap = "app/bootstrap.php"
//! ```
//!
//! The whole file is read whichever command reads it, so a typo in any
//! section is found. An error names the file, the section and the key,
//! and the line when it is a type or syntax error.

use std::path::Path;

use serde::Deserialize;

use super::{Error, RunOptions, ServeOptions, WorkOptions};

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FileConfig {
    /// `hearth serve`'s options.
    pub serve: ServeOptions,
    /// `hearth run`'s options.
    pub run: RunOptions,
    /// `hearth work`'s options.
    pub work: WorkOptions,
    /// The keys each section sets.
    #[serde(skip)]
    set: toml::Table,
}

impl FileConfig {
    pub fn load(path: &Path) -> Result<FileConfig, Error> {
        let text = std::fs::read_to_string(path).map_err(|e| Error {
            message: format!("{}: cannot read: {e}", path.display()),
        })?;
        FileConfig::parse(&text, path)
    }

    pub fn parse(text: &str, path: &Path) -> Result<FileConfig, Error> {
        let mut file: FileConfig = serde_path_to_error::deserialize(toml::Deserializer::new(text))
            .map_err(|e| {
                let place = place(e.path());
                let top = e.path().iter().count() <= 1;
                let inner = e.into_inner();
                let line = inner
                    .span()
                    .map(|span| {
                        let line = text[..span.start].matches('\n').count() + 1;
                        format!(" (line {line})")
                    })
                    .unwrap_or_default();
                let message = plain(inner.message().trim(), top);
                let place = if place.is_empty() {
                    String::new()
                } else {
                    format!(" {place}:")
                };
                Error {
                    message: format!("{}:{place} {message}{line}", path.display()),
                }
            })?;
        file.set = text.parse().unwrap_or_default();
        Ok(file)
    }

    /// The keys the file sets in `section`.
    pub fn keys(&self, section: &str) -> Vec<String> {
        match self.set.get(section) {
            Some(toml::Value::Table(table)) => table.keys().cloned().collect(),
            _ => Vec::new(),
        }
    }
}

/// Where in the file: `[serve] max_queue`, `[serve] ini.memory_limit`,
/// `[serve] trusted_proxies[1]`, `[serve]`; empty for the file as a whole.
fn place(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut segments = path.iter();
    let section = match segments.next() {
        Some(Segment::Map { key }) => format!("[{key}]"),
        _ => return String::new(),
    };
    let mut key = String::new();
    for segment in segments {
        match segment {
            Segment::Seq { index } => key.push_str(&format!("[{index}]")),
            Segment::Map { key: name } | Segment::Enum { variant: name } => {
                if !key.is_empty() {
                    key.push('.');
                }
                key.push_str(name);
            }
            Segment::Unknown => {}
        }
    }
    if key.is_empty() {
        section
    } else {
        format!("{section} {key}")
    }
}

/// serde's message in the file's terms: sections, keys and tables rather
/// than fields and structs, numbers rather than Rust's integer types, on
/// one line. (The place already names an unknown key; `top`: it is at
/// the top of the file, where the keys are sections.)
fn plain(message: &str, top: bool) -> String {
    let mut text = message.replace('\n', ": ");
    if let Some(rest) = text.strip_prefix("unknown field `") {
        let expected = rest.split_once("`, ").map_or("", |(_, e)| e);
        text = if top {
            format!("unknown section, {expected}")
        } else {
            format!("unknown key, {expected}")
        };
    }
    for rust in ["usize", "u64", "u32"] {
        text = text.replace(
            &format!("expected {rust}"),
            "expected a whole number (0 or more)",
        );
    }
    for table in [
        "struct ServeOptions",
        "struct RunOptions",
        "struct WorkOptions",
        "a map",
    ] {
        text = text.replace(&format!("expected {table}"), "expected a table");
    }
    text
}
