//! Tasks as they come in: one JSON object per line (or, with `--lines`, one
//! command or argument per line), checked before anything runs.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use serde_json::value::RawValue;

/// One unit of work and how to run it.
#[derive(Debug, Clone)]
pub struct Task {
    /// Position in the input among tasks, from 1 (GNU parallel's `Seq`).
    pub seq: u64,
    /// The `id` to echo in the result, as JSON text.
    pub id: Box<RawValue>,
    pub work: Work,
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
    /// Bytes for the task's standard input (otherwise `/dev/null`).
    pub stdin: Option<Vec<u8>>,
    /// This task's own time limit, overriding `--timeout`.
    pub timeout: Option<Duration>,
    /// The queue job it came from (`hearth work`): a shell task gets its
    /// id and attempt in its environment, a PHP job in `$_SERVER`. `None`
    /// under `hearth run`, where there is no queue job.
    pub job: Option<QueueJob>,
    /// The job slot it runs in, from 1 (GNU parallel's `{%}` and
    /// `$PARALLEL_JOBSLOT`), set by `hearth run` when it starts; 0
    /// elsewhere.
    pub slot: u64,
    /// A COMMAND's task: its arguments, for `--tag` and for making its
    /// command again in another slot (`{%}`).
    pub args: Option<std::sync::Arc<[String]>>,
    /// A COMMAND's task: its command line as the shell reads it, which the
    /// job log and `--dry-run` show.
    pub shown: Option<String>,
    /// Where its output goes while it runs.
    pub stream: Stream,
    /// Its standard input, from a file (a `--pipe` block): read by the task
    /// itself, so `hearth run` holds none of it.
    pub stdin_file: Option<std::sync::Arc<std::fs::File>>,
}

/// Where a task's output goes while it runs.
#[derive(Debug, Clone, Default)]
pub enum Stream {
    /// Kept, for the result.
    #[default]
    Capture,
    /// Straight to `hearth run`'s own stdout and stderr (`-u`).
    Inherit,
    /// Line by line to the output, as lines come (`--line-buffer`).
    Lines(crate::runner::LineSink),
}

/// A queue job's id and attempt, for the task to make its effect
/// idempotent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueJob {
    pub id: u64,
    pub attempt: u32,
}

/// What a task runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Work {
    /// A shell command, for `/bin/sh -c`.
    Shell(String),
    /// A program and its arguments, without a shell.
    Argv(Vec<String>),
    /// A PHP function and its arguments (JSON), for a job worker.
    Call { function: String, args: String },
}

impl Task {
    /// A task with nothing but its work: no environment, no limit of its
    /// own, not from a queue.
    pub fn new(seq: u64, id: Box<RawValue>, work: Work) -> Task {
        Task {
            seq,
            id,
            work,
            env: Vec::new(),
            cwd: None,
            stdin: None,
            timeout: None,
            job: None,
            slot: 0,
            args: None,
            shown: None,
            stream: Stream::Capture,
            stdin_file: None,
        }
    }

    /// The command as the job log shows it.
    pub fn command_line(&self) -> String {
        if let Some(shown) = &self.shown {
            return shown.clone();
        }
        match &self.work {
            Work::Shell(cmd) => cmd.clone(),
            Work::Argv(argv) => argv
                .iter()
                .map(|a| shell_quote(a))
                .collect::<Vec<_>>()
                .join(" "),
            Work::Call { function, args } => format!("{function}({args})"),
        }
    }
}

impl Task {
    /// The task as one JSON input line (without a newline), as `hearth
    /// work` reads it from a queue job's payload: with its `id` always,
    /// and with `timeout` (its own, else `default_timeout`) in seconds.
    pub fn to_line(&self, default_timeout: Option<Duration>) -> String {
        use serde_json::{Map, Value};
        // `id` and a PHP job's `args` are JSON text already, and go in as
        // they are (a Value would round numbers past 2^53).
        let mut out = format!("{{\"id\":{}", self.id.get());
        let mut line = Map::new();
        match &self.work {
            Work::Shell(cmd) => {
                line.insert("cmd".into(), Value::String(cmd.clone()));
            }
            Work::Argv(argv) => {
                line.insert("argv".into(), argv.clone().into());
            }
            Work::Call { function, args } => {
                out.push_str(",\"args\":");
                out.push_str(args);
                line.insert("call".into(), Value::String(function.clone()));
            }
        }
        if !self.env.is_empty() {
            let env: Map<String, Value> = self
                .env
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect();
            line.insert("env".into(), Value::Object(env));
        }
        if let Some(cwd) = &self.cwd {
            line.insert("cwd".into(), cwd.to_string_lossy().into_owned().into());
        }
        let from_file = self.stdin_file.as_ref().map(|file| {
            use std::os::unix::fs::FileExt as _;
            let len = file.metadata().map_or(0, |m| m.len());
            let mut bytes = vec![0; usize::try_from(len).unwrap_or(0)];
            let read = file.read_at(&mut bytes, 0).unwrap_or(0);
            bytes.truncate(read);
            bytes
        });
        if let Some(stdin) = self.stdin.as_ref().or(from_file.as_ref()) {
            line.insert(
                "stdin".into(),
                Value::String(String::from_utf8_lossy(stdin).into_owned()),
            );
        }
        if let Some(limit) = self.timeout.or(default_timeout) {
            line.insert("timeout".into(), limit.as_secs_f64().into());
        }
        // The rest, as an object whose opening brace is dropped.
        let rest = Value::Object(line).to_string();
        out.push(',');
        out.push_str(&rest[1..]);
        out
    }
}

/// Quotes an argument for display as a shell word.
fn shell_quote(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b));
    if plain {
        arg.to_owned()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

/// How input lines become tasks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parser {
    /// JSON Lines of shell tasks (`cmd` or `argv`).
    Shell,
    /// JSON Lines of both: a line with `call` is a PHP job (`call`,
    /// `args`), one with `cmd` or `argv` a shell task. For an executor
    /// with PHP job workers (`hearth run --php-bootstrap`, `hearth work`).
    Mixed,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(default)]
    cmd: Option<String>,
    #[serde(default)]
    argv: Option<Vec<String>>,
    #[serde(default)]
    env: Option<BTreeMap<String, String>>,
    #[serde(default)]
    cwd: Option<PathBuf>,
    #[serde(default)]
    stdin: Option<String>,
    /// Seconds (a JSON number) or a duration string, as `--timeout` takes.
    #[serde(default)]
    timeout: Option<serde_json::Value>,
    #[serde(default)]
    call: Option<String>,
    #[serde(borrow, default)]
    args: Option<&'a RawValue>,
}

impl Parser {
    /// Turns one non-blank input line into the task with sequence number
    /// `seq`, or says what is wrong with it.
    pub fn parse(&self, line: &str, seq: u64) -> Result<Task, String> {
        self.parse_json(line, seq)
    }

    fn parse_json(&self, text: &str, seq: u64) -> Result<Task, String> {
        if !text.trim_start().starts_with('{') {
            return Err(format!(
                "expected a JSON object, like {}",
                if *self == Parser::Mixed {
                    r#"{"id": 1, "call": "App\\job", "args": [1, 2]} or {"id": 2, "cmd": "echo hello"}"#
                } else {
                    r#"{"id": 1, "cmd": "echo hello"}"#
                }
            ));
        }
        let line: Line<'_> =
            serde_json::from_str(text).map_err(|e| format!("invalid task: {e}"))?;
        let id = match line.id {
            None => default_id(seq),
            Some(raw) => {
                let first = raw.get().as_bytes().first().copied().unwrap_or(b'n');
                if !(first == b'"' || first == b'-' || first.is_ascii_digit()) {
                    return Err("\"id\" must be a string or a number".to_owned());
                }
                raw.to_owned()
            }
        };
        let timeout = line.timeout.as_ref().map(task_timeout).transpose()?;
        // A line with "call" (or "args") is a PHP job; where PHP jobs run,
        // one without is a shell task.
        let php_job = line.call.is_some() || line.args.is_some();
        let work = match self {
            Parser::Mixed if php_job => {
                if line.cmd.is_some() || line.argv.is_some() {
                    return Err("a line is a PHP job (\"call\" and \"args\") or a shell task (\"cmd\" or \"argv\"), not both".to_owned());
                }
                for (name, given) in [
                    ("env", line.env.is_some()),
                    ("cwd", line.cwd.is_some()),
                    ("stdin", line.stdin.is_some()),
                ] {
                    if given {
                        return Err(format!(
                            "\"{name}\" applies to shell tasks; a PHP job runs in a worker that is already started"
                        ));
                    }
                }
                let Some(function) = line.call else {
                    return Err("a PHP job needs \"call\": the name of a function (\"App\\\\resize\") or static method (\"App\\\\Image::resize\")".to_owned());
                };
                if function.trim().is_empty() {
                    return Err("\"call\" is empty".to_owned());
                }
                let args = match line.args {
                    None => "[]".to_owned(),
                    Some(raw) if raw.get().starts_with('[') || raw.get().starts_with('{') => {
                        raw.get().to_owned()
                    }
                    Some(_) => {
                        return Err(
                            "\"args\" must be a JSON array (positional arguments) or object (named arguments)"
                                .to_owned(),
                        )
                    }
                };
                Work::Call { function, args }
            }
            _ => {
                if line.call.is_some() || line.args.is_some() {
                    return Err(
                        "\"call\" and \"args\" describe a PHP job: run with --php-bootstrap FILE"
                            .to_owned(),
                    );
                }
                match (line.cmd, line.argv) {
                    (Some(_), Some(_)) => {
                        return Err("a task has \"cmd\" or \"argv\", not both".to_owned())
                    }
                    (None, None) => return Err(format!(
                        "a task needs \"cmd\" (a shell command) or \"argv\" (a program and its arguments){}",
                        if *self == Parser::Mixed { ", or \"call\" (a PHP function) for a PHP job" } else { "" }
                    )),
                    (Some(cmd), None) => Work::Shell(cmd),
                    (None, Some(argv)) if argv.is_empty() => {
                        return Err("\"argv\" is empty: it needs at least the program".to_owned())
                    }
                    (None, Some(argv)) => Work::Argv(argv),
                }
            }
        };
        let env = line
            .env
            .map(|m| m.into_iter().collect())
            .unwrap_or_default();
        Ok(Task {
            env,
            cwd: line.cwd,
            stdin: line.stdin.map(String::into_bytes),
            timeout,
            ..Task::new(seq, id, work)
        })
    }
}

/// Longest time limit a task may set (about 31 years): anything longer
/// is a mistake, and is refused rather than overflowing a deadline.
const MAX_TIMEOUT_SECS: f64 = 1e9;

/// A task's `timeout`: a number of seconds, or a string in the syntax of
/// `--timeout` (`"500ms"`, `"2m"`); more than 0 either way.
fn task_timeout(value: &serde_json::Value) -> Result<Duration, String> {
    let expected = "a positive number of seconds or a duration like \"500ms\"";
    let limit = match value {
        serde_json::Value::Number(n) => n
            .as_f64()
            .filter(|t| t.is_finite() && *t > 0.0 && *t < MAX_TIMEOUT_SECS)
            .map(Duration::from_secs_f64)
            .ok_or_else(|| format!("\"timeout\" must be {expected}, not {n}"))?,
        serde_json::Value::String(text) => {
            let limit =
                crate::duration::parse_duration(text).map_err(|e| format!("\"timeout\": {e}"))?;
            if limit.is_zero() || limit.as_secs_f64() >= MAX_TIMEOUT_SECS {
                return Err(format!("\"timeout\" must be {expected}, not {text:?}"));
            }
            limit
        }
        other => return Err(format!("\"timeout\" must be {expected}, not {other}")),
    };
    Ok(limit)
}

pub(crate) fn default_id(seq: u64) -> Box<RawValue> {
    RawValue::from_string(seq.to_string()).expect("a number is JSON")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shell(line: &str) -> Result<Task, String> {
        Parser::Shell.parse(line, 7)
    }

    #[test]
    fn shell_task_with_every_field() {
        let t = shell(
            r#"{"id":"a","cmd":"echo hi","env":{"A":"1"},"cwd":"/tmp","stdin":"x","timeout":1.5}"#,
        )
        .unwrap();
        assert_eq!(t.id.get(), r#""a""#);
        assert_eq!(t.work, Work::Shell("echo hi".into()));
        assert_eq!(t.env, vec![("A".to_owned(), "1".to_owned())]);
        assert_eq!(t.cwd, Some(PathBuf::from("/tmp")));
        assert_eq!(t.stdin.as_deref(), Some(&b"x"[..]));
        assert_eq!(t.timeout, Some(Duration::from_millis(1500)));
    }

    #[test]
    fn id_defaults_to_the_sequence_number() {
        let t = shell(r#"{"argv":["ls","-l"]}"#).unwrap();
        assert_eq!(t.id.get(), "7");
        assert_eq!(t.seq, 7);
        assert_eq!(t.work, Work::Argv(vec!["ls".into(), "-l".into()]));
    }

    #[test]
    fn unusable_lines_say_what_is_wrong() {
        for (line, expected) in [
            ("[1,2]", "expected a JSON object"),
            ("{\"cmd\": \"x\"", "invalid task"),
            (r#"{"comand":"x"}"#, "unknown field `comand`"),
            (r#"{"id":1}"#, "needs \"cmd\""),
            (r#"{"cmd":"a","argv":["b"]}"#, "not both"),
            (r#"{"argv":[]}"#, "\"argv\" is empty"),
            (r#"{"cmd":"a","timeout":0}"#, "positive number"),
            (r#"{"cmd":"a","timeout":-1}"#, "positive number"),
            (r#"{"cmd":"a","id":{"x":1}}"#, "string or a number"),
            (r#"{"cmd":"a","id":[1]}"#, "string or a number"),
            (r#"{"call":"f"}"#, "--php-bootstrap"),
            (r#"{"cmd":1}"#, "invalid type"),
        ] {
            let err = shell(line).unwrap_err();
            assert!(err.contains(expected), "{line}: {err}");
        }
    }

    /// Issue 8: `"timeout":"500ms"` was refused ("expected f64") although
    /// `--timeout 500ms` works.
    #[test]
    fn a_timeout_is_seconds_or_a_duration_as_for_the_flags() {
        for (given, expected) in [
            ("1.5", Duration::from_millis(1500)),
            ("2", Duration::from_secs(2)),
            ("\"500ms\"", Duration::from_millis(500)),
            ("\"2s\"", Duration::from_secs(2)),
            ("\"1m\"", Duration::from_secs(60)),
            ("\"1.5\"", Duration::from_millis(1500)),
        ] {
            let t = shell(&format!(r#"{{"cmd":"a","timeout":{given}}}"#)).unwrap();
            assert_eq!(t.timeout, Some(expected), "{given}");
            let job = Parser::Mixed
                .parse(&format!(r#"{{"call":"f","timeout":{given}}}"#), 1)
                .unwrap();
            assert_eq!(job.timeout, Some(expected), "{given}");
        }
        for given in [
            "0", "-1", "\"0s\"", "\"soon\"", "\"-1s\"", "\"\"", "true", "[1]",
        ] {
            let err = shell(&format!(r#"{{"cmd":"a","timeout":{given}}}"#)).unwrap_err();
            assert!(err.contains("\"timeout\""), "{given}: {err}");
        }
    }

    #[test]
    fn php_jobs() {
        let t = Parser::Mixed
            .parse(r#"{"id":3,"call":"App\\f","args":[1,"x"]}"#, 1)
            .unwrap();
        assert_eq!(
            t.work,
            Work::Call {
                function: "App\\f".into(),
                args: r#"[1,"x"]"#.into()
            }
        );
        assert_eq!(t.command_line(), r#"App\f([1,"x"])"#);
        let named = Parser::Mixed
            .parse(r#"{"call":"f","args":{"a":1}}"#, 1)
            .unwrap();
        assert!(matches!(named.work, Work::Call { ref args, .. } if args == r#"{"a":1}"#));
        for (line, expected) in [
            (r#"{"cmd":"x","call":"f"}"#, "not both"),
            (r#"{"argv":["x"],"args":[]}"#, "not both"),
            (r#"{"args":[]}"#, "needs \"call\""),
            (r#"{"call":"f","args":5}"#, "JSON array"),
            (
                r#"{"call":"f","cwd":"/"}"#,
                "\"cwd\" applies to shell tasks",
            ),
        ] {
            let err = Parser::Mixed.parse(line, 1).unwrap_err();
            assert!(err.contains(expected), "{line}: {err}");
        }
    }

    /// Issue 12: one host takes both kinds; the line says which it is.
    #[test]
    fn mixed_lines_are_php_jobs_or_shell_tasks() {
        let shell = Parser::Mixed
            .parse(r#"{"id":1,"cmd":"echo hi","env":{"A":"1"}}"#, 1)
            .unwrap();
        assert_eq!(shell.work, Work::Shell("echo hi".into()));
        let argv = Parser::Mixed.parse(r#"{"argv":["ls"]}"#, 2).unwrap();
        assert_eq!(argv.work, Work::Argv(vec!["ls".into()]));
        let php = Parser::Mixed
            .parse(r#"{"call":"f","args":[1]}"#, 3)
            .unwrap();
        assert!(matches!(php.work, Work::Call { .. }));
        let err = Parser::Mixed.parse(r#"{"id":4}"#, 4).unwrap_err();
        assert!(err.contains("needs \"cmd\""), "{err}");
        let err = Parser::Mixed.parse("[1]", 5).unwrap_err();
        assert!(err.contains("\"call\""), "{err}");
    }

    /// Issue 12: `hearth run --queue` sends each task as a line that
    /// parses back to the same task.
    #[test]
    fn a_task_as_a_line_parses_back_to_itself() {
        for (parser, line) in [
            (
                Parser::Mixed,
                r#"{"id":"a","cmd":"echo hi","env":{"A":"1"},"cwd":"/tmp","stdin":"x","timeout":1.5}"#,
            ),
            (Parser::Mixed, r#"{"argv":["ls","-l"]}"#),
            (
                Parser::Mixed,
                r#"{"id":3,"call":"App\f","args":{"a":[1,"x"]},"timeout":"2s"}"#,
            ),
        ] {
            let task = parser.parse(line, 9).unwrap();
            let again = Parser::Mixed.parse(&task.to_line(None), 1).unwrap();
            assert_eq!(again.id.get(), task.id.get(), "{line}");
            assert_eq!(again.work, task.work, "{line}");
            assert_eq!(
                (&again.env, &again.cwd, &again.stdin, again.timeout),
                (&task.env, &task.cwd, &task.stdin, task.timeout),
                "{line}"
            );
        }
        let t = Parser::Mixed.parse(r#"{"cmd":"x"}"#, 4).unwrap();
        let with_default = Parser::Mixed
            .parse(&t.to_line(Some(Duration::from_millis(250))), 1)
            .unwrap();
        assert_eq!(
            (with_default.id.get(), with_default.timeout),
            ("4", Some(Duration::from_millis(250)))
        );
    }
}
