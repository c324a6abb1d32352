//! The option tables of the docs, rendered from the options themselves
//! (their flags and help, their keys and defaults), and the test that
//! keeps the docs' copies current.
//!
//! A generated block in a doc sits between `<!-- generated: NAME -->` and
//! `<!-- end generated -->`. `HEARTH_BLESS=1 cargo test -p hearth docs`
//! rewrites every block from the code.

use std::any::TypeId;
use std::path::{Path, PathBuf};

use clap::{Arg, Args as _, CommandFactory as _};
use serde_json::Value;

use super::values::{Address, EnvVar, Listen, Proxy, RouteRule, Seconds, Size};
use super::{default_of, is_switch, CommandLine, RunOptions, Section, ServeOptions, WorkOptions};

/// Every generated block: the doc it is in, its name, its text.
fn blocks() -> Vec<(&'static str, &'static str, String)> {
    vec![
        (
            "docs/configuration.md",
            "serve-options",
            options_table::<ServeOptions>(),
        ),
        (
            "docs/configuration.md",
            "serve-keys",
            keys_table::<ServeOptions>(),
        ),
        (
            "docs/configuration.md",
            "run-keys",
            keys_table::<RunOptions>(),
        ),
        (
            "docs/task-runner.md",
            "run-options",
            options_table::<RunOptions>(),
        ),
        (
            "docs/configuration.md",
            "work-keys",
            keys_table::<WorkOptions>(),
        ),
        (
            "docs/queues.md",
            "work-options",
            options_table::<WorkOptions>(),
        ),
    ]
}

/// The command's arguments, as `--help` shows them, then the global ones
/// (`--log-level`); not `--help` and `--version`.
fn arguments<T: Section>() -> Vec<Arg> {
    let own = CommandLine::<T>::augment_args(clap::Command::new(T::NAME));
    let global = crate::Cli::command();
    own.get_arguments()
        .chain(global.get_arguments().filter(|a| a.is_global_set()))
        .filter(|a| !a.is_hide_set() && !matches!(a.get_id().as_str(), "help" | "version"))
        .cloned()
        .collect()
}

/// The table of flags: flag, key, default, meaning.
fn options_table<T: Section>() -> String {
    let mut out = String::from("| Flag | Key | Default | What it is for |\n|---|---|---|---|\n");
    for arg in arguments::<T>() {
        let id = arg.get_id().as_str();
        // A switch sets its key to the other value than the default.
        let key = match (key_of::<T>(id), switch_value::<T>(&arg)) {
            (Some(key), Some(value)) => format!("`{key} = {value}`"),
            (Some(key), None) => format!("`{key}`"),
            (None, _) => "—".to_owned(),
        };
        let (help, stated) = help_and_default(&arg);
        let default = match (default_of::<T>(id), stated) {
            (Some(value), _) => format!("`{value}`"),
            (None, Some(text)) => text,
            (None, None) if is_switch(&arg) => "off".to_owned(),
            (None, None) => "none".to_owned(),
        };
        let help = match arg.get_env() {
            Some(env) => format!("{help}; also `{}`", env.to_string_lossy()),
            None => help,
        };
        out.push_str(&format!(
            "| {} | {key} | {default} | {} |\n",
            flag_of(&arg),
            cell(&help)
        ));
    }
    out
}

/// The table of keys of the command's section: key, type, default, flag.
fn keys_table<T: Section>() -> String {
    let defaults = serde_json::to_value(T::default()).expect("options serialize");
    let Value::Object(defaults) = defaults else {
        panic!("options serialize as a table");
    };
    let relative: Vec<&str> = T::default().file_paths().iter().map(|(k, _)| *k).collect();
    let args = arguments::<T>();
    let mut out = String::from("| Key | Type | Default | Flag |\n|---|---|---|---|\n");
    for (key, default) in &defaults {
        let arg = args.iter().find(|a| a.get_id() == key.as_str());
        if key == "pool" && T::NAME == "serve" {
            out.push_str(
                "| `[[serve.pool]]` | array of tables: see [Several pools](#several-pools) | \
                 none | none: in the file only |\n",
            );
            continue;
        }
        let name = match default {
            Value::Object(_) => format!("`[{}.{key}]`", T::NAME),
            _ if arg.is_some_and(is_table_list) => format!("`[[{}.{key}]]`", T::NAME),
            _ => format!("`{key}`"),
        };
        let mut kind = type_of(arg, default);
        if relative.contains(&key.as_str()) {
            kind.push_str(", relative to the file");
        }
        let stated = arg.and_then(|a| help_and_default(a).1);
        let shown = match default {
            Value::String(s) => format!("`{s:?}`"),
            Value::Number(n) => format!("`{n}`"),
            Value::Bool(b) => format!("`{b}`"),
            Value::Array(a) if a.is_empty() => "empty".to_owned(),
            Value::Object(o) if o.is_empty() => "empty".to_owned(),
            _ => stated.unwrap_or_else(|| "none".to_owned()),
        };
        let flag = match arg {
            Some(arg) => match switch_value::<T>(arg) {
                Some(value) => format!("{} sets `{value}`", flag_of(arg)),
                None => flag_of(arg),
            },
            None => "none: in the file only".to_owned(),
        };
        out.push_str(&format!("| {name} | {kind} | {shown} | {flag} |\n"));
    }
    out
}

/// The key of option `id` in the file, if it has one.
fn key_of<T: Section>(id: &str) -> Option<String> {
    let defaults = serde_json::to_value(T::default()).ok()?;
    match defaults.get(id)? {
        Value::Object(_) => Some(format!("[{}.{id}]", T::NAME)),
        _ if arguments::<T>()
            .iter()
            .any(|a| a.get_id() == id && is_table_list(a)) =>
        {
            Some(format!("[[{}.{id}]]", T::NAME))
        }
        _ => Some(id.to_owned()),
    }
}

/// Whether `arg` is a list of tables in the file (`[[serve.route]]`).
fn is_table_list(arg: &Arg) -> bool {
    arg.get_value_parser().type_id() == TypeId::of::<RouteRule>()
}

/// What switch `arg` sets its key to: the other value than the default
/// (`--no-compression`: `false`); none for an option with a value, or
/// without a key.
fn switch_value<T: Section>(arg: &Arg) -> Option<bool> {
    let defaults = serde_json::to_value(T::default()).ok()?;
    match defaults.get(arg.get_id().as_str())? {
        Value::Bool(b) if is_switch(arg) => Some(!b),
        _ => None,
    }
}

/// `-w`, `--workers`, `--max-workers` `<N>`; `SCRIPT`; `-- COMMAND...`.
fn flag_of(arg: &Arg) -> String {
    let value = arg
        .get_value_names()
        .and_then(|names| names.first())
        .map_or_else(|| arg.get_id().as_str().to_uppercase(), ToString::to_string);
    if arg.is_positional() {
        return if arg.is_last_set() {
            format!("`-- {value}...`")
        } else {
            format!("`{value}`")
        };
    }
    let mut names: Vec<String> = Vec::new();
    names.extend(arg.get_short().map(|s| format!("`-{s}`")));
    names.extend(arg.get_long().map(|l| format!("`--{l}`")));
    for alias in arg.get_visible_aliases().unwrap_or_default() {
        names.push(format!("`--{alias}`"));
    }
    let names = names.join(", ");
    if is_switch(arg) {
        names
    } else {
        format!("{names} `{value}`")
    }
}

/// The help of `arg` without its `[default: ...]`, and that default.
fn help_and_default(arg: &Arg) -> (String, Option<String>) {
    let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
    match help.find(" [default: ") {
        Some(at) => {
            let stated = help[at + " [default: ".len()..].trim_end_matches(']');
            (help[..at].to_owned(), Some(stated.to_owned()))
        }
        None => (help, None),
    }
}

/// What a key holds, in TOML's terms.
fn type_of(arg: Option<&Arg>, default: &Value) -> String {
    if let Value::Object(_) = default {
        let env = arg.is_some_and(|a| a.get_value_parser().type_id() == TypeId::of::<EnvVar>());
        return if env {
            "table of strings, or `true` to pass Hearth's own".to_owned()
        } else {
            "table of strings".to_owned()
        };
    }
    let Some(arg) = arg else {
        return "string".to_owned();
    };
    if is_table_list(arg) {
        return "array of tables: `prefix` (string), `to` (`\"worker\"`, `\"classic\"`)".to_owned();
    }
    let parser = arg.get_value_parser().type_id();
    let one = if parser == TypeId::of::<Size>() {
        "size".to_owned()
    } else if parser == TypeId::of::<Seconds>() {
        "duration".to_owned()
    } else if parser == TypeId::of::<Address>() {
        "string `\"IP:PORT\"`".to_owned()
    } else if parser == TypeId::of::<Listen>() {
        "string `\"IP:PORT\"` or `\"unix:PATH\"`".to_owned()
    } else if parser == TypeId::of::<Proxy>() {
        "string (address, network or `unix:`)".to_owned()
    } else if parser == TypeId::of::<super::values::Jobs>() {
        "integer, or string (`\"50%\"`, `\"+1\"`)".to_owned()
    } else if parser == TypeId::of::<bool>() {
        "boolean".to_owned()
    } else if parser == TypeId::of::<PathBuf>() {
        "string (a path)".to_owned()
    } else if !arg.get_possible_values().is_empty() {
        let values: Vec<String> = arg
            .get_possible_values()
            .iter()
            .map(|v| format!("`\"{}\"`", v.get_name()))
            .collect();
        values.join(", ")
    } else if [
        TypeId::of::<usize>(),
        TypeId::of::<u64>(),
        TypeId::of::<u32>(),
    ]
    .iter()
    .any(|t| parser == *t)
    {
        "integer".to_owned()
    } else {
        "string".to_owned()
    };
    match default {
        Value::Array(_) => format!("array of {one}").replacen("string", "strings", 1),
        _ => one,
    }
}

/// Text for a table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// The repository root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

const END: &str = "<!-- end generated -->";

/// `text` with block `name` replaced by `block`; none when it has no such
/// block.
fn with_block(text: &str, name: &str, block: &str) -> Option<String> {
    let start_marker = format!("<!-- generated: {name} -->\n");
    let start = text.find(&start_marker)? + start_marker.len();
    let end = start + text[start..].find(END)?;
    Some(format!("{}{block}{}", &text[..start], &text[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The docs' option tables are the code's: regenerate them with
    /// `HEARTH_BLESS=1 cargo test -p hearth docs`.
    #[test]
    fn docs_option_tables_match_the_code() {
        let bless = std::env::var_os("HEARTH_BLESS").is_some();
        let mut stale = Vec::new();
        for (doc, name, block) in blocks() {
            let path = root().join(doc);
            let text = std::fs::read_to_string(&path).expect("read the doc");
            let Some(current) = with_block(&text, name, &block) else {
                stale.push(format!(
                    "{doc} has no block `<!-- generated: {name} -->` ... `{END}`"
                ));
                continue;
            };
            if current == text {
                continue;
            }
            if bless {
                std::fs::write(&path, current).expect("write the doc");
            } else {
                stale.push(format!("{doc}: the block {name} differs from the code"));
            }
        }
        assert!(
            stale.is_empty(),
            "{}\nRegenerate with: HEARTH_BLESS=1 cargo test -p hearth docs",
            stale.join("\n")
        );
    }

    #[test]
    fn a_block_is_replaced_between_its_markers() {
        let text = "a\n<!-- generated: x -->\nold\n<!-- end generated -->\nb\n";
        assert_eq!(
            with_block(text, "x", "new\n").as_deref(),
            Some("a\n<!-- generated: x -->\nnew\n<!-- end generated -->\nb\n")
        );
        assert_eq!(with_block(text, "y", "new\n"), None);
    }

    #[test]
    fn tables_have_a_row_per_option() {
        let table = options_table::<ServeOptions>();
        for row in [
            "| `-l`, `--listen` `ADDR` | `listen` | `127.0.0.1:8080` |",
            "| `--max-queue` `N` | `max_queue` | `1024` |",
            "| `--no-compression` | `compression = false` | off |",
            "| `-w`, `--workers`, `--max-workers` `N` | `workers` | one per CPU |",
            "| `--log-level` `LEVEL` | — |",
        ] {
            assert!(table.contains(row), "{row} in:\n{table}");
        }
        let keys = keys_table::<ServeOptions>();
        for row in [
            "| `max_queue` | integer | `1024` | `--max-queue` `N` |",
            "| `queue_timeout` | duration | `\"30s\"` |",
            "| `[serve.env]` | table of strings, or `true` to pass Hearth's own | empty | `--env` `NAME[=VALUE]` |",
            "| `compression` | boolean | `true` | `--no-compression` sets `false` |",
            "| `root` | string (a path), relative to the file | none |",
        ] {
            assert!(keys.contains(row), "{row} in:\n{keys}");
        }
        assert!(!keys.contains("`config`"), "{keys}");
    }
}
