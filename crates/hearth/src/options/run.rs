//! `hearth run`'s options: its flags and the `[run]` section of
//! `hearth.toml`, with their defaults and checks, and the task runner's
//! configuration built from them.
//!
//! `[run]` holds how tasks run (how many at once, their limits, retries,
//! the PHP job workers); what a batch is and what is done with its results
//! (the input, a COMMAND, `--lines`, the job log and resuming, `--halt`,
//! `--keep-order`, the progress bar) are decided per run, on the command
//! line only.

use std::path::{Path, PathBuf};
use std::time::Duration;

use std::sync::Arc;

use hearth_pool::PoolConfig;
use hearth_run::args::{ArgsConfig, Grouping, Source, SourceSpec, Trim};
use hearth_run::template::{Template, TemplateOptions};
use hearth_run::{
    ArgsInput, Halt, Input, InputFormat, OutputConfig, OutputMode, PipeInput, Results, Resume,
    RunConfig, Tag,
};
use serde::{Deserialize, Serialize};

use super::values::{self, Seconds, Size};
use super::{Fault, Origins, Section};

/// Everything `hearth run` can be told. A field's doc comment is its
/// `--help`; its name is its key under `[run]`; [`Default`] holds its
/// default. Fields without a key (`#[serde(skip)]`) are flags only.
#[derive(Debug, Clone, clap::Args, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RunOptions {
    /// JSON Lines of tasks: FILE ("-" or nothing: standard input). Or, as GNU
    /// parallel: COMMAND [ARGS...], run once per argument, the arguments from
    /// `::: A B C`, `:::: FILE` or standard input, one per line. A COMMAND that
    /// uses shell syntax (|, >, ;, $, quotes) or a builtin runs through /bin/sh
    /// -c with each argument quoted; a plain one runs directly, without a shell
    #[arg(value_name = "FILE | COMMAND", trailing_var_arg = true)]
    #[serde(skip)]
    pub words: Vec<String>,

    /// TOML file with these options under [run]
    #[arg(long, short, value_name = "FILE")]
    #[serde(skip)]
    pub config: Option<PathBuf>,

    /// Tasks to run at once: N, N% of the CPUs, +N or -N CPUs, 0 for as many as
    /// possible [default: the number of CPUs]
    #[arg(
        short,
        long,
        value_name = "N",
        allow_hyphen_values = true,
        short_alias = 'P',
        visible_alias = "max-procs"
    )]
    pub jobs: Option<values::Jobs>,

    /// Write results in input order, not completion order
    #[arg(short = 'k', long)]
    #[serde(skip)]
    pub keep_order: bool,

    /// Stop a task after this long (SIGTERM to its process group, then
    /// SIGKILL): seconds, or a number with ms, s, m or h; 0: no limit
    /// [default: none]
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<Seconds>,

    /// Time between SIGTERM and SIGKILL when a task is stopped
    #[arg(long, value_name = "DURATION")]
    pub kill_after: Seconds,

    /// Run a failing task up to N times in all, as GNU parallel (0 or 1: once)
    #[arg(long, value_name = "N")]
    pub retries: u32,

    /// Stop when tasks fail: "now" stops running tasks too, "soon" lets them
    /// finish; "now,fail=N", "soon,success=N", "now,done=N%" as GNU parallel
    #[arg(
        long,
        visible_alias = "halt-on-error",
        value_name = "WHEN",
        allow_hyphen_values = true
    )]
    #[serde(skip)]
    pub halt: Option<Halt>,

    /// Write a line per finished task to FILE (GNU parallel's joblog format);
    /// without --resume, a FILE that already lists tasks is refused; +FILE
    /// appends to it
    #[arg(long, visible_alias = "jl", value_name = "FILE")]
    #[serde(skip)]
    pub joblog: Option<PathBuf>,

    /// Skip the tasks the --joblog lists as finished
    #[arg(long, requires = "joblog")]
    #[serde(skip)]
    pub resume: bool,

    /// Skip the tasks the --joblog lists as succeeded; run failed ones again
    #[arg(long, requires = "joblog", conflicts_with = "resume")]
    #[serde(skip)]
    pub resume_failed: bool,

    /// Keep at most this much of each task's stdout and of its stderr, and say on
    /// stderr when it cuts [default: all of it, past 1 MiB in a temporary file]
    #[arg(long, value_name = "SIZE")]
    pub max_output: Option<Size>,

    /// Never show the progress bar (shown on stderr only when it is a terminal)
    #[arg(long)]
    #[serde(skip)]
    pub no_progress: bool,

    /// Show progress on stderr: a bar on a terminal, else a line a second (GNU
    /// parallel's --bar, --eta and --progress)
    #[arg(long, visible_aliases = ["eta", "progress"])]
    #[serde(skip)]
    pub bar: bool,

    /// Start a task only while this much memory is available (MemAvailable)
    #[arg(long, value_name = "SIZE")]
    #[serde(skip)]
    pub memfree: Option<String>,

    /// Start a task only while the 1-minute load average is below N (or N% of
    /// the CPUs)
    #[arg(long, value_name = "N")]
    #[serde(skip)]
    pub load: Option<String>,

    /// Each input line is a command, run through /bin/sh -c (as GNU parallel
    /// without a COMMAND)
    #[arg(long)]
    #[serde(skip)]
    pub lines: bool,

    /// Write one JSON line per task (see docs/task-runner.md) instead of the
    /// tasks' own output; the default for JSON Lines input
    #[arg(long)]
    #[serde(skip)]
    pub json: bool,

    /// Read arguments from FILE, as `:::: FILE` (repeatable)
    #[arg(short = 'a', long, value_name = "FILE")]
    #[serde(skip)]
    pub arg_file: Vec<PathBuf>,

    /// Arguments end at NUL, not at a newline
    #[arg(short = '0', long)]
    #[serde(skip)]
    pub null: bool,

    /// Arguments end at DELIM, not at a newline (one byte; \n, \t, \0 and
    /// \\ as escapes)
    #[arg(short = 'd', long, value_name = "DELIM")]
    #[serde(skip)]
    pub delimiter: Option<String>,

    /// Use STR for the whole argument instead of {}
    #[arg(short = 'I', value_name = "STR", allow_hyphen_values = true)]
    #[serde(skip)]
    pub replace: Option<String>,

    /// N arguments per task, as {1} to {N} ({} is all of them)
    #[arg(short = 'N', long, value_name = "N")]
    #[serde(skip)]
    pub max_replace_args: Option<usize>,

    /// At most N arguments per task
    #[arg(short = 'n', long, value_name = "N")]
    #[serde(skip)]
    pub max_args: Option<usize>,

    /// As many arguments per task as fit, each in the word around {} (context
    /// replace)
    #[arg(short = 'X')]
    #[serde(skip)]
    pub context_replace: bool,

    /// As many arguments per task as fit, spread over the job slots
    #[arg(short = 'm')]
    #[serde(skip)]
    pub multiple: bool,

    /// As many arguments per task as fit a command line
    #[arg(long)]
    #[serde(skip)]
    pub xargs: bool,

    /// Split each argument into columns at REGEX, as {1}, {2}...
    #[arg(long, short = 'C', value_name = "REGEX")]
    #[serde(skip)]
    pub colsep: Option<String>,

    /// Pair the argument sources (the n-th of each) instead of combining them,
    /// the shorter ones starting over
    #[arg(long, visible_alias = "xapply")]
    #[serde(skip)]
    pub link: bool,

    /// Quote COMMAND's words: each is passed as it is, with no shell syntax
    #[arg(short = 'q', long)]
    #[serde(skip)]
    pub quote: bool,

    /// Also the replacement strings {..}, {...}, {/..}, {+.}, {+/}, {##}, {0#},
    /// {:-STR}, {:N:M}, {#STR}, {%STR}, {/A/B}, {^STR}
    #[arg(long)]
    #[serde(skip)]
    pub plus: bool,

    /// Print each task's output as whole lines as they come, not when it ends
    #[arg(long, visible_alias = "lb")]
    #[serde(skip)]
    pub line_buffer: bool,

    /// Print each task's output as it writes it, mixed with the others'
    #[arg(short = 'u', long)]
    #[serde(skip)]
    pub ungroup: bool,

    /// Print each task's output when it ends, all together (the default)
    #[arg(long)]
    #[serde(skip)]
    pub group: bool,

    /// Begin each line of output with the task's arguments and a tab
    #[arg(long)]
    #[serde(skip)]
    pub tag: bool,

    /// Begin each line of output with STR (replacement strings allowed) and a tab
    #[arg(long, value_name = "STR")]
    #[serde(skip)]
    pub tagstring: Option<String>,

    /// Also save each task's output: in DIR as GNU parallel lays it out
    /// (DIR/1/ARG/stdout, stderr, seq), or, for a PATH ending in .jsonl, as JSON
    /// result lines
    #[arg(long, visible_alias = "res", value_name = "DIR|FILE.jsonl")]
    #[serde(skip)]
    pub results: Option<PathBuf>,

    /// Use STR instead of {.}
    #[arg(long = "er", visible_alias = "extensionreplace", value_name = "STR")]
    #[serde(skip)]
    pub extension_replace: Option<String>,

    /// Use STR instead of {/}
    #[arg(long = "bnr", visible_alias = "basenamereplace", value_name = "STR")]
    #[serde(skip)]
    pub basename_replace: Option<String>,

    /// Use STR instead of {//}
    #[arg(long = "dnr", visible_alias = "dirnamereplace", value_name = "STR")]
    #[serde(skip)]
    pub dirname_replace: Option<String>,

    /// Use STR instead of {/.}
    #[arg(
        long = "bner",
        visible_alias = "basenameextensionreplace",
        value_name = "STR"
    )]
    #[serde(skip)]
    pub basename_extension_replace: Option<String>,

    /// Use STR instead of {#}
    #[arg(long, value_name = "STR")]
    #[serde(skip)]
    pub seqreplace: Option<String>,

    /// Use STR instead of {%}
    #[arg(long, value_name = "STR")]
    #[serde(skip)]
    pub slotreplace: Option<String>,

    /// Print each argument quoted for the shell, and run nothing
    #[arg(long, visible_alias = "shell-quote")]
    #[serde(skip)]
    pub shellquote: bool,

    /// Cut standard input into blocks, each the standard input of a task
    #[arg(long, visible_alias = "spreadstdin")]
    #[serde(skip)]
    pub pipe: bool,

    /// --pipe, reading the file of -a instead of standard input
    #[arg(long, visible_alias = "pipe-part")]
    #[serde(skip)]
    pub pipepart: bool,

    /// With --pipe: blocks of about this size, cut at record ends (k = 1000, K =
    /// 1024, M, G...) [default: 1M]
    #[arg(long, visible_alias = "block-size", value_name = "SIZE")]
    #[serde(skip)]
    pub block: Option<String>,

    /// With --pipe: a record is N lines; without: N input lines per task
    #[arg(short = 'L', long, short_alias = 'l', value_name = "N")]
    #[serde(skip)]
    pub max_lines: Option<usize>,

    /// With --pipe: records start with STR
    #[arg(long, value_name = "STR")]
    #[serde(skip)]
    pub recstart: Option<String>,

    /// With --pipe: records end with STR (default: a newline; empty: any byte)
    #[arg(long, value_name = "STR")]
    #[serde(skip)]
    pub recend: Option<String>,

    /// With --pipe: remove the record start and end at a block's edges
    #[arg(long, visible_aliases = ["remove-rec-sep", "removerecsep"])]
    #[serde(skip)]
    pub rrs: bool,

    /// With --pipe: the first N lines (or what the regular expression matches at
    /// the start) go before every block; without: the first argument of each
    /// source (the first line of each file) names it, as {name}
    #[arg(long, value_name = "N|REGEX")]
    #[serde(skip)]
    pub header: Option<String>,

    /// With --pipe: each block in a temporary file, named by {}, instead of on
    /// standard input
    #[arg(long)]
    #[serde(skip)]
    pub cat: bool,

    /// Run nothing for an argument that is empty or only white space
    #[arg(short = 'r', long)]
    #[serde(skip)]
    pub no_run_if_empty: bool,

    /// Stop reading arguments at a line that is STR
    #[arg(short = 'E', value_name = "STR")]
    #[serde(skip)]
    pub eof: Option<String>,

    /// Remove white space around arguments: l (left), r (right), lr, rl or n
    /// (none)
    #[arg(long, value_name = "WHERE")]
    #[serde(skip)]
    pub trim: Option<String>,

    /// Use STR instead of ::: to start arguments
    #[arg(long, value_name = "STR")]
    #[serde(skip)]
    pub arg_sep: Option<String>,

    /// Use STR instead of :::: to start argument files
    #[arg(long, value_name = "STR")]
    #[serde(skip)]
    pub arg_file_sep: Option<String>,

    /// Skip the first line of the argument files and standard input
    #[arg(long)]
    #[serde(skip)]
    pub skip_first_line: bool,

    /// With -X, -m and --xargs: command lines of at most N characters
    #[arg(short = 's', long, value_name = "N")]
    #[serde(skip)]
    pub max_chars: Option<usize>,

    /// Print each task's command line on stdout before its output
    #[arg(short = 'v')]
    #[serde(skip)]
    pub verbose: bool,

    /// Print each task's command line on stderr as it starts
    #[arg(short = 't', long = "verbose")]
    #[serde(skip)]
    pub trace: bool,

    /// Print the command each task would run, and run nothing
    #[arg(long)]
    #[serde(skip)]
    pub dry_run: bool,

    /// Wait at least this long between two task starts
    #[arg(long, value_name = "DURATION")]
    #[serde(skip)]
    pub delay: Option<Seconds>,

    /// Run the tasks in a random order (every argument is read first)
    #[arg(long)]
    #[serde(skip)]
    pub shuf: bool,

    /// Accepted for GNU parallel's command lines; Hearth asks for no citation
    #[arg(long, hide = true)]
    #[serde(skip)]
    pub will_cite: bool,

    /// Run the tasks on the hosts that consume this queue (`hearth work --queue
    /// URL`) instead of here: redis://HOST[:PORT][/DB]/NAME or file:PATH; results
    /// come back as JSON lines, as from a local run with --json
    #[arg(long, value_name = "URL")]
    #[serde(skip)]
    pub queue: Option<String>,

    /// Run PHP jobs in warm PHP workers that load FILE once
    #[arg(long, value_name = "FILE")]
    pub php_bootstrap: Option<PathBuf>,

    /// PHP binary for the job workers (with --php-bootstrap)
    #[arg(long, value_name = "PATH")]
    pub php: PathBuf,

    /// Extra php.ini setting for the job workers (repeatable; with --php-bootstrap)
    #[arg(long = "ini", value_name = "NAME=VALUE", value_parser = values::parse_ini)]
    #[serde(with = "values::ini_table")]
    pub ini: Vec<(String, String)>,

    /// Time a job worker has to load the bootstrap
    #[arg(long, value_name = "DURATION")]
    pub boot_timeout: Seconds,
}

impl Default for RunOptions {
    /// Every default of `hearth run`.
    fn default() -> RunOptions {
        RunOptions {
            words: Vec::new(),
            config: None,
            jobs: None,
            keep_order: false,
            timeout: None,
            kill_after: Seconds::from_secs(2),
            retries: 0,
            halt: None,
            joblog: None,
            resume: false,
            resume_failed: false,
            max_output: None,
            no_progress: false,
            bar: false,
            memfree: None,
            load: None,
            lines: false,
            json: false,
            arg_file: Vec::new(),
            null: false,
            delimiter: None,
            replace: None,
            max_replace_args: None,
            max_args: None,
            context_replace: false,
            multiple: false,
            colsep: None,
            link: false,
            quote: false,
            plus: false,
            line_buffer: false,
            ungroup: false,
            group: false,
            tag: false,
            tagstring: None,
            results: None,
            extension_replace: None,
            basename_replace: None,
            dirname_replace: None,
            basename_extension_replace: None,
            seqreplace: None,
            slotreplace: None,
            shellquote: false,
            pipe: false,
            pipepart: false,
            block: None,
            max_lines: None,
            recstart: None,
            recend: None,
            rrs: false,
            header: None,
            cat: false,
            no_run_if_empty: false,
            eof: None,
            trim: None,
            arg_sep: None,
            arg_file_sep: None,
            skip_first_line: false,
            max_chars: None,
            verbose: false,
            trace: false,
            xargs: false,
            dry_run: false,
            delay: None,
            shuf: false,
            will_cite: false,
            queue: None,
            php_bootstrap: None,
            // The CLI: jobs need no header() or sessions.
            php: PathBuf::from("php"),
            ini: Vec::new(),
            boot_timeout: Seconds::from_secs(60),
        }
    }
}

impl Section for RunOptions {
    const NAME: &'static str = "run";

    fn of(file: super::file::FileConfig) -> RunOptions {
        file.run
    }

    fn file_paths(&mut self) -> Vec<(&'static str, &mut Option<PathBuf>)> {
        vec![("php_bootstrap", &mut self.php_bootstrap)]
    }

    fn add_up(&mut self, file: RunOptions, given: &Origins<'_>) {
        // php.ini settings: the file's, then the flags' (PHP keeps the
        // last value given for a name).
        if given.on_command_line("ini") {
            self.ini.splice(0..0, file.ini);
        }
    }

    fn validate(&self, given: &Origins<'_>) -> Result<(), Fault> {
        if let Some(url) = &self.queue {
            hearth_queue::QueueUrl::parse(url).map_err(|e| Fault::new("queue", e.to_string()))?;
            // The consumers run the tasks: how is theirs to say.
            for (field, why) in [
                ("jobs", "the consumers run the tasks, each as many at once as its own -j"),
                ("kill_after", "the consumers stop tasks, with their own --kill-after"),
                ("max_output", "the consumers keep output, up to their own --max-output"),
                ("php_bootstrap", "PHP jobs run in the consumers' workers: start `hearth work` with --php-bootstrap"),
                ("php", "PHP jobs run in the consumers' workers"),
                ("ini", "PHP jobs run in the consumers' workers"),
                ("boot_timeout", "PHP jobs run in the consumers' workers"),
                ("halt", "jobs already queued cannot be stopped from here"),
                ("line_buffer", "results come back when each job ends"),
                ("ungroup", "results come back when each job ends"),
                ("tag", "results come back as JSON lines"),
                ("tagstring", "results come back as JSON lines"),
                ("results", "results come back as JSON lines on stdout"),
                ("delay", "the consumers start the jobs"),
                ("dry_run", "run it without {queue} to see the commands"),
            ] {
                if given.on_command_line(field) {
                    return Err(Fault::new(field, format!("does not combine with {{queue}}: {why}")));
                }
            }
            return Ok(());
        }
        if let Some(block) = &self.block {
            hearth_run::pipe::parse_block(block).map_err(|e| Fault::new("block", e))?;
        }
        if let Some(t) = &self.trim {
            if !["n", "l", "r", "lr", "rl"].contains(&t.as_str()) {
                return Err(Fault::new(
                    "trim",
                    format!("`{t}`: expected l, r, lr, rl or n"),
                ));
            }
        }
        if self.pipepart && self.arg_file.len() != 1 {
            return Err(Fault::new(
                "pipepart",
                "reads the one file -a names: give -a FILE once",
            ));
        }
        for (field, on) in [
            ("block", self.block.is_some()),
            ("recstart", self.recstart.is_some()),
            ("recend", self.recend.is_some()),
            ("rrs", self.rrs),
            ("cat", self.cat),
        ] {
            if on && !(self.pipe || self.pipepart) {
                return Err(Fault::new(field, "cuts input into blocks: it needs {pipe}"));
            }
        }
        if let Some(d) = &self.delimiter {
            values::delimiter(d).map_err(|e| Fault::new("delimiter", e))?;
        }
        if let Some(sep) = &self.colsep {
            regex::Regex::new(sep)
                .map_err(|e| Fault::new("colsep", format!("not a regular expression: {e}")))?;
        }
        let grouping = [
            ("max_replace_args", self.max_replace_args.is_some()),
            ("max_args", self.max_args.is_some()),
            ("context_replace", self.context_replace),
            ("multiple", self.multiple),
            ("xargs", self.xargs),
        ];
        if grouping.iter().filter(|(_, on)| *on).count() > 1 {
            let (first, _) = grouping.iter().find(|(_, on)| *on).expect("one is on");
            return Err(Fault::new(
                first,
                "takes one of -N, -n, -X and -m: each says how many arguments a task gets",
            ));
        }
        let modes = [
            ("line_buffer", self.line_buffer),
            ("ungroup", self.ungroup),
            ("group", self.group),
        ];
        if modes.iter().filter(|(_, on)| *on).count() > 1 {
            let (first, _) = modes.iter().find(|(_, on)| *on).expect("one is on");
            return Err(Fault::new(
                first,
                "takes one of --group, --line-buffer and -u",
            ));
        }
        if self.ungroup && (self.tag || self.tagstring.is_some()) {
            return Err(Fault::new(
                "ungroup",
                "cannot tag output it does not see: use --line-buffer with --tag",
            ));
        }
        if self.php_bootstrap.is_some()
            && (self.lines
                || self.words.len() > 1
                || !self.arg_file.is_empty()
                || self.words.iter().any(|w| w.starts_with(":::")))
        {
            return Err(Fault::new(
                "php_bootstrap",
                "reads JSON Lines of jobs; it does not combine with {lines}, a COMMAND or arguments (::: or -a)",
            ));
        }
        check_job_workers(self.php_bootstrap.is_some(), &self.ini, given, &[])
    }
}

/// What the words after the options say: a FILE of JSON Lines, or a
/// COMMAND and the sources of its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Words {
    /// JSON Lines of tasks (or, with `--lines` or a COMMAND, arguments).
    pub file: Option<PathBuf>,
    pub command: Vec<String>,
    /// `:::` and `::::` sources.
    pub sources: Vec<SourceSpec>,
    /// A COMMAND or a source was given: the input is arguments.
    pub arguments: bool,
}

/// Reads the words after the options, as GNU parallel and Hearth take
/// them. `dashdash`: they came after `--`.
///
/// - `::: A B`, `:::+ A B`, `:::: F G` and `::::+ F` start sources; the
///   words before the first are the COMMAND (none: the arguments are the
///   commands).
/// - Without sources: `FILE -- COMMAND` reads arguments from FILE; words
///   after `--` are a COMMAND; one word alone is a FILE of JSON Lines
///   unless no such file exists and it is a command (a program on `PATH`,
///   a shell builtin, or a line with white space or a `{`); two words or
///   more are a COMMAND.
#[cfg(test)]
pub fn read_words(words: &[String], dashdash: bool) -> Words {
    read_words_with(words, dashdash, ":::", "::::")
}

/// [`read_words`] with other separators (`--arg-sep`, `--arg-file-sep`).
pub fn read_words_with(words: &[String], dashdash: bool, args: &str, files: &str) -> Words {
    let linked_args = format!("{args}+");
    let linked_files = format!("{files}+");
    let kind = |w: &str| -> Option<(bool, bool)> {
        // (a file source, linked)
        if w == args {
            Some((false, false))
        } else if w == linked_args {
            Some((false, true))
        } else if w == files {
            Some((true, false))
        } else if w == linked_files {
            Some((true, true))
        } else {
            None
        }
    };
    let marker = |w: &str| kind(w).is_some();
    if let Some(first) = words.iter().position(|w| marker(w)) {
        let mut sources: Vec<SourceSpec> = Vec::new();
        // The kind of the last separator, and for files whether the next
        // one is linked.
        let mut current: Option<(bool, bool)> = None;
        for w in &words[first..] {
            if let Some((file, linked)) = kind(w) {
                current = Some((file, linked));
                if !file {
                    sources.push(SourceSpec {
                        source: Source::Values(Vec::new()),
                        linked,
                    });
                }
                continue;
            }
            match current {
                Some((false, _)) => {
                    if let Some(SourceSpec {
                        source: Source::Values(values),
                        ..
                    }) = sources.last_mut()
                    {
                        values.push(w.clone());
                    }
                }
                Some((true, linked)) => {
                    // Each file is a source; `::::+` links the first one.
                    sources.push(SourceSpec {
                        source: Source::File(PathBuf::from(w)),
                        linked,
                    });
                    current = Some((true, false));
                }
                None => {}
            }
        }
        return Words {
            file: None,
            command: words[..first].to_vec(),
            sources,
            arguments: true,
        };
    }
    let command_words = |command: &[String]| Words {
        file: None,
        command: command.to_vec(),
        sources: Vec::new(),
        arguments: true,
    };
    match words {
        [] => Words {
            file: None,
            command: Vec::new(),
            sources: Vec::new(),
            arguments: false,
        },
        // `FILE -- COMMAND`: when FILE is a file and no program (`gzip --`
        // is a COMMAND).
        [file, dd, command @ ..]
            if dd == "--"
                && !dashdash
                && (file == "-" || Path::new(file).is_file())
                && !hearth_run::template::is_program(file) =>
        {
            Words {
                file: Some(PathBuf::from(file)),
                ..command_words(command)
            }
        }
        _ if dashdash => command_words(words),
        [one] => {
            let looks_like_a_command = one.contains(char::is_whitespace)
                || one.contains('{')
                || hearth_run::template::is_program(one);
            if one != "-" && !Path::new(one).is_file() && looks_like_a_command {
                command_words(words)
            } else {
                Words {
                    file: Some(PathBuf::from(one)),
                    command: Vec::new(),
                    sources: Vec::new(),
                    arguments: false,
                }
            }
        }
        _ => command_words(words),
    }
}

/// `--header` without `--pipe`: takes the first argument of each `:::`
/// source, and reads the first line of each file source (split at
/// `colsep`), as the names of the values, in order. The file's first line
/// is then skipped (`skip_first_line`).
fn header_names(
    sources: &mut [SourceSpec],
    colsep: Option<&regex::Regex>,
) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    for spec in sources.iter_mut() {
        match &mut spec.source {
            Source::Values(values) if !values.is_empty() => names.push(values.remove(0)),
            Source::Values(_) => {}
            Source::File(path) if path.as_os_str() == "-" => {
                return Err("--header: names are read from ::: and :::: sources, not from standard input: give the file with :::: or -a".to_owned());
            }
            Source::File(path) => {
                use std::io::BufRead as _;
                let file = std::fs::File::open(&*path)
                    .map_err(|e| format!("cannot read arguments from {}: {e}", path.display()))?;
                let mut line = String::new();
                std::io::BufReader::new(file)
                    .read_line(&mut line)
                    .map_err(|e| format!("cannot read arguments from {}: {e}", path.display()))?;
                let line = line.trim_end_matches('\n');
                match colsep {
                    Some(sep) => names.extend(sep.split(line).map(str::to_owned)),
                    None => names.push(line.to_owned()),
                }
            }
        }
    }
    Ok(names)
}

/// `--load`: a load average, or a share of the CPUs (`80%`).
fn parse_load(s: &str) -> Result<f64, String> {
    let bad = || format!("--load: `{s}`: expected a load average (4) or a share of the CPUs (80%)");
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let value = match s.strip_suffix('%') {
        Some(p) => p.parse::<f64>().map_err(|_| bad())? * cpus / 100.0,
        None => s.parse::<f64>().map_err(|_| bad())?,
    };
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(bad())
    }
}

/// `\n`, `\t`, `\0` and `\\` in `--recstart` and `--recend`, as
/// parallel reads them.
fn unescape(s: &str) -> String {
    s.replace("\\n", "\n")
        .replace("\\t", "\t")
        .replace("\\0", "\0")
        .replace("\\\\", "\\")
}

impl RunOptions {
    /// `--er`, `--bnr`, `--dnr`, `--bner`, `--seqreplace`, `--slotreplace`:
    /// each string and the replacement string it stands for.
    fn renames(&self) -> Vec<(String, &'static str)> {
        [
            (&self.extension_replace, "."),
            (&self.basename_replace, "/"),
            (&self.dirname_replace, "//"),
            (&self.basename_extension_replace, "/."),
            (&self.seqreplace, "#"),
            (&self.slotreplace, "%"),
        ]
        .into_iter()
        .filter_map(|(given, inner)| given.clone().map(|s| (s, inner)))
        .collect()
    }

    /// Tasks at once: `jobs`, or one per CPU.
    pub fn jobs(&self) -> usize {
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        self.jobs.map_or(cpus, |j| j.resolve(cpus))
    }

    /// The task runner's configuration for `words` (see [`read_words`]),
    /// with `php` the job workers' pool (none for shell tasks); and where
    /// JSON Lines come from.
    pub fn run_config(
        &self,
        words: &Words,
        php: Option<PoolConfig>,
    ) -> Result<(RunConfig, Input), String> {
        if words
            .command
            .iter()
            .any(|w| w.contains("{=") && w.contains("=}"))
        {
            return Err(
                "{= ... =}: Perl expressions in replacement strings are not supported; \
                 use the shell in the COMMAND, or --plus's {:-STR}, {#STR}, {%STR}, {/A/B}"
                    .to_owned(),
            );
        }
        let piped = self.pipe || self.pipepart;
        // --header's names of the sources, without --pipe.
        let mut names: Vec<String> = Vec::new();
        let arguments =
            words.arguments || self.lines || self.shellquote || !self.arg_file.is_empty() || piped;
        let input = match &words.file {
            Some(p) if p.as_os_str() != "-" && !arguments => Input::File(p.clone()),
            _ => Input::Stdin,
        };
        let format = if piped {
            let template = Template::new(
                &words.command,
                &TemplateOptions {
                    replace: self.replace.clone(),
                    plus: self.plus,
                    quote: self.quote,
                    context: false,
                    no_append: !self.cat,
                    renames: self.renames(),
                    shellquote: self.shellquote,
                    names: Vec::new(),
                },
            );
            let mut pipe = hearth_run::pipe::PipeConfig::default();
            if let Some(block) = &self.block {
                pipe.block = hearth_run::pipe::parse_block(block)?;
                if hearth_run::pipe::parse_size(block)? > hearth_run::pipe::MAX_BLOCK as u64 {
                    // As parallel: a block is at most 2 GiB.
                    crate::say!(
                        "hearth run: --block {block}: a block is at most 2 GiB (less a byte); using that"
                    );
                }
            }
            pipe.records = self.max_replace_args.or(self.max_args);
            pipe.lines = self.max_lines.unwrap_or(1);
            pipe.recstart = self.recstart.as_ref().map(|s| unescape(s).into_bytes());
            match &self.recend {
                Some(end) => pipe.recend = unescape(end).into_bytes(),
                // As parallel: a record start alone splits before it.
                None if pipe.recstart.is_some() => pipe.recend = Vec::new(),
                None => {}
            }
            pipe.remove_separators = self.rrs;
            pipe.header = match &self.header {
                None => None,
                Some(h) => Some(match h.parse::<usize>() {
                    Ok(n) => hearth_run::pipe::Header::Lines(n),
                    Err(_) => hearth_run::pipe::Header::Regex(
                        regex::bytes::Regex::new(&format!("^(?:{h})"))
                            .map_err(|e| format!("--header: not a regular expression: {e}"))?,
                    ),
                }),
            };
            if words.file.is_some() || !words.sources.is_empty() {
                return Err(
                    "--pipe reads standard input (--pipepart: the file of -a): it takes no other arguments"
                        .to_owned(),
                );
            }
            InputFormat::Pipe(Box::new(PipeInput {
                pipe,
                template: Arc::new(template),
                cat: self.cat,
                file: if self.pipepart {
                    self.arg_file.first().cloned()
                } else {
                    None
                },
            }))
        } else if arguments {
            let mut sources: Vec<SourceSpec> = self
                .arg_file
                .iter()
                .map(|f| SourceSpec {
                    source: Source::File(f.clone()),
                    linked: false,
                })
                .collect();
            if let Some(file) = &words.file {
                sources.push(SourceSpec {
                    source: Source::File(file.clone()),
                    linked: false,
                });
            }
            sources.extend(words.sources.iter().cloned());
            // --header: the first argument of each source (its first line's
            // columns with --colsep) names it.
            let colsep = match &self.colsep {
                Some(sep) => Some(regex::Regex::new(sep).map_err(|e| format!("--colsep: {e}"))?),
                None => None,
            };
            if self.header.is_some() {
                names = header_names(&mut sources, colsep.as_ref())?;
            }
            let template = Template::new(
                &words.command,
                &TemplateOptions {
                    replace: self.replace.clone(),
                    plus: self.plus,
                    quote: self.quote,
                    // -N and -L put each argument in the word around {}, as -X.
                    context: self.context_replace
                        || self.max_replace_args.is_some()
                        || self.max_lines.is_some(),
                    no_append: false,
                    renames: self.renames(),
                    shellquote: self.shellquote,
                    names: names.clone(),
                },
            );
            let delimiter = match (&self.delimiter, self.null) {
                (_, true) => 0,
                (Some(d), false) => values::delimiter(d)?,
                (None, false) => b'\n',
            };
            let percent = matches!(self.halt, Some(h) if matches!(h.limit, hearth_run::HaltLimit::Percent(_)));
            let args = ArgsConfig {
                sources,
                link: self.link,
                delimiter,
                colsep,
                grouping: match (self.max_replace_args, self.max_args, self.max_lines) {
                    (Some(n), _, _) | (None, Some(n), _) | (None, None, Some(n)) => {
                        Grouping::Records(n)
                    }
                    _ if self.context_replace || self.multiple => Grouping::Fill,
                    _ if self.xargs => Grouping::FillLines,
                    _ => Grouping::One,
                },
                read_all: template.uses_total() || percent,
                shuffle: self.shuf,
                jobs: self.jobs(),
                skip_empty: self.no_run_if_empty,
                eof: self.eof.clone(),
                trim: match self.trim.as_deref() {
                    Some("l") => Trim::Left,
                    Some("r") => Trim::Right,
                    Some("lr") | Some("rl") => Trim::Both,
                    _ => Trim::None,
                },
                skip_first_line: self.skip_first_line || self.header.is_some(),
                max_line: self.max_chars.map_or(hearth_run::args::MAX_LINE, |n| {
                    n.saturating_sub(template.base_len())
                }),
            };
            InputFormat::Args(Box::new(ArgsInput {
                args,
                template: Arc::new(template),
            }))
        } else {
            if self.shuf {
                return Err(
                    "--shuf: shuffles arguments; JSON Lines tasks run in their order".to_owned(),
                );
            }
            InputFormat::Json
        };
        let results = self.results.as_ref().map(|p| {
            if p.extension().is_some_and(|e| e == "jsonl") {
                Results::Jsonl(p.clone())
            } else {
                Results::Dir(p.clone())
            }
        });
        let output = OutputConfig {
            json: self.json || !arguments || self.queue.is_some(),
            tag: match (&self.tagstring, self.tag) {
                (Some(s), _) => Some(Tag::Template(Arc::new(Template::new(
                    std::slice::from_ref(s),
                    &TemplateOptions {
                        replace: self.replace.clone(),
                        plus: self.plus,
                        quote: true,
                        context: false,
                        no_append: true,
                        renames: self.renames(),
                        shellquote: false,
                        names: names.clone(),
                    },
                )))),
                (None, true) => Some(Tag::Args),
                (None, false) => None,
            },
            // With -k, each task's lines wait for the tasks before it: the
            // whole of its output is printed in its turn.
            mode: if self.line_buffer && !self.keep_order {
                OutputMode::Lines
            } else if self.ungroup {
                OutputMode::Ungroup
            } else {
                OutputMode::Group
            },
            results,
            verbose: self.verbose,
            trace: self.trace,
            names,
        };
        let config = RunConfig {
            jobs: self.jobs(),
            keep_order: self.keep_order,
            timeout: self.timeout.and_then(Seconds::nonzero),
            kill_after: self.kill_after.0,
            retries: self.retries,
            halt: self.halt,
            joblog: self.joblog.as_ref().map(|p| {
                match p.to_str().and_then(|s| s.strip_prefix('+')) {
                    Some(rest) => PathBuf::from(rest),
                    None => p.clone(),
                }
            }),
            joblog_append: self
                .joblog
                .as_ref()
                .and_then(|p| p.to_str())
                .is_some_and(|s| s.starts_with('+')),
            resume: match (self.resume, self.resume_failed) {
                (true, _) => Resume::Finished,
                (_, true) => Resume::Succeeded,
                _ => Resume::No,
            },
            max_output: self.max_output.map_or(usize::MAX, |s| s.as_usize()),
            progress: !self.no_progress,
            progress_always: self.bar && !self.no_progress,
            memfree: match &self.memfree {
                Some(m) => {
                    Some(hearth_run::pipe::parse_size(m).map_err(|e| format!("--memfree: {e}"))?)
                }
                None => None,
            },
            load: match &self.load {
                Some(l) => Some(parse_load(l)?),
                None => None,
            },
            php,
            format,
            output,
            delay: self.delay.map(|d| d.0),
            dry_run: self.dry_run || self.shellquote,
        };
        Ok((config, input))
    }

    /// The queue of `--queue`, parsed.
    pub fn queue_url(&self) -> Option<hearth_queue::QueueUrl> {
        // Checked by `validate`.
        self.queue
            .as_deref()
            .and_then(|url| hearth_queue::QueueUrl::parse(url).ok())
    }

    /// The job workers' pool, running `script` (the job worker script
    /// `hearth run` writes for the bootstrap).
    pub fn job_pool_config(&self, script: &Path) -> PoolConfig {
        let mut pool = job_workers(
            &self.php,
            &self.ini,
            self.boot_timeout,
            self.kill_after,
            self.jobs(),
            script,
        );
        // A job waits as long as it takes for a worker: -j bounds the jobs
        // in flight to the workers there are.
        pool.queue_timeout = Duration::from_secs(365 * 24 * 3600);
        pool
    }
}

/// The PHP job workers' pool of `hearth run` and `hearth work`: `workers`
/// workers of `php` with the `ini` settings, running `script` (the job
/// worker script written for the bootstrap).
pub(super) fn job_workers(
    php: &Path,
    ini: &[(String, String)],
    boot_timeout: Seconds,
    kill_after: Seconds,
    workers: usize,
    script: &Path,
) -> PoolConfig {
    let mut pool = PoolConfig::new(php, script, workers);
    pool.ini = ini.to_vec();
    pool.boot_timeout = boot_timeout.0.max(Duration::from_millis(100));
    // A worker stopped for a job's time limit gets SIGKILL this long
    // after SIGTERM, as a shell task does.
    pool.kill_timeout = kill_after.0;
    pool.pipelining = false;
    // A job may fail on purpose, and every job runs: deaths on jobs are
    // counted, no job is refused for them.
    pool.crash_loops = false;
    pool.boot_hint =
        "the bootstrap file has not returned: does it wait for a service or for input?".to_owned();
    pool
}

/// The checks of the PHP job worker options `hearth run` and `hearth work`
/// share: `php`, `ini` and each of `more` (options of the workers) need
/// `php_bootstrap` when given on the command line, and `ini`'s names must
/// be php.ini names.
pub(super) fn check_job_workers(
    bootstrap: bool,
    ini: &[(String, String)],
    given: &Origins<'_>,
    more: &[&'static str],
) -> Result<(), Fault> {
    // A project's file may name a PHP binary for the runs that have a
    // bootstrap; on the command line, one without is a mistake.
    if !bootstrap {
        for field in ["php", "ini"].iter().chain(more) {
            if given.on_command_line(field) {
                return Err(Fault::new(field, "needs {php_bootstrap}"));
            }
        }
    }
    for (name, _) in ini {
        if let Some(why) = values::bad_ini_name(name) {
            return Err(Fault::new("ini", why));
        }
    }
    Ok(())
}
