//! A COMMAND with GNU parallel's replacement strings (`{}`, `{.}`, `{/}`,
//! `{1}`, `{#}`, `{%}`, the `--plus` forms...), made into the command of
//! each task from its arguments.
//!
//! As parallel does, the COMMAND's words are joined with spaces into one
//! command line, and every argument put into it is quoted for the shell.
//! That line is what the job log and `--dry-run` show. It runs through
//! `/bin/sh -c` (or `$PARALLEL_SHELL`) when its own text uses shell syntax
//! (`|`, `>`, `;`, `$`, quotes...), names a shell builtin, or is empty (the
//! arguments are then the commands); otherwise its words are executed
//! directly, without a shell, with the arguments as they are. Both give the
//! same result: the direct way only skips starting a shell.
//!
//! Written by hand: no crate implements parallel's replacement strings.

use std::path::Path;

use crate::task::Work;

/// What one replacement string does to one argument.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    /// `{}`
    Whole,
    /// `{.}`: without the extension.
    NoExt,
    /// `{/}`: the basename.
    Base,
    /// `{//}`: the dirname.
    Dir,
    /// `{/.}`: the basename without the extension.
    BaseNoExt,
    /// `{..}` and `{...}`: without the last two or three extensions.
    NoExts(usize),
    /// `{/..}` and `{/...}`.
    BaseNoExts(usize),
    /// `{+/}`: the directory part, empty when there is none.
    PlusDir,
    /// `{+.}`, `{+..}`, `{+...}`: the last one, two or three extensions.
    PlusExt(usize),
    /// `{:-text}`: the argument, or `text` when it is empty.
    Default(String),
    /// `{:N}` and `{:N:M}`: from character N, M characters.
    Substr(usize, Option<usize>),
    /// `{#text}`: without a leading `text`.
    StripPrefix(String),
    /// `{%text}`: without a trailing `text`.
    StripSuffix(String),
    /// `{/a/b}`: the first `a` replaced by `b`.
    Replace(String, String),
    /// `{^text}` and `{^^text}`: a leading (or every) `text` in capitals.
    Upper(String, bool),
}

/// A part of the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    /// An argument: all of them (`None`) or the Nth (from 1; negative from
    /// the end), through `op`.
    Arg(Option<i64>, Op),
    /// `{#}` (`{0#}`: zero-padded to the width of the total).
    Seq {
        padded: bool,
    },
    /// `{%}` (`{0%}`).
    Slot {
        padded: bool,
    },
    /// `{##}`: the number of jobs.
    Total,
}

/// One word of the command line: pieces with no white space between them.
type Word = Vec<Piece>;

/// How a COMMAND becomes tasks.
#[derive(Debug, Clone)]
pub struct Template {
    words: Vec<Word>,
    /// `-q`: the words' own text is quoted too.
    quoted: bool,
    /// `-X`: a word with `{}` is repeated for each argument.
    context: bool,
    /// Runs through the shell (see the module documentation).
    shell: bool,
    /// The program for [`Template::shell`].
    shell_program: String,
    /// Whether a replacement string appears (else `{}` was appended).
    slot: bool,
    total: bool,
    /// The COMMAND was empty: the arguments are the commands.
    empty: bool,
    shellquote: bool,
}

/// The options of parallel that change how a COMMAND is read.
#[derive(Debug, Clone, Default)]
pub struct TemplateOptions {
    /// `-I`: the string that stands for `{}`.
    pub replace: Option<String>,
    /// `--plus`: the extra replacement strings.
    pub plus: bool,
    /// `-q`
    pub quote: bool,
    /// `-X`
    pub context: bool,
    /// `--pipe`: the input goes to standard input, not to the end of the
    /// command.
    pub no_append: bool,
    /// `--er STR`, `--bnr STR`...: STR stands for a replacement string,
    /// given by what is inside its braces (`.`, `/`...).
    pub renames: Vec<(String, &'static str)>,
    /// `--shellquote`: the arguments are quoted even without a COMMAND.
    pub shellquote: bool,
    /// `--header`: the names of the sources (or columns), for `{name}`.
    pub names: Vec<String>,
}

/// Shell builtins and keywords: a command line starting with one needs a
/// shell.
const SHELL_WORDS: &[&str] = &[
    "!", ".", ":", "[[", "alias", "bg", "break", "case", "cd", "command", "continue", "do", "done",
    "elif", "else", "esac", "eval", "exec", "exit", "export", "fc", "fg", "fi", "for", "function",
    "getopts", "hash", "if", "jobs", "local", "read", "readonly", "return", "select", "set",
    "shift", "source", "then", "time", "times", "trap", "type", "ulimit", "umask", "unalias",
    "unset", "until", "wait", "while", "{", "}",
];

impl Template {
    /// Reads COMMAND's words.
    pub fn new(command: &[String], options: &TemplateOptions) -> Template {
        let mut words: Vec<Word> = Vec::new();
        let mut any = false;
        if options.quote {
            // Each word is one word, whatever it holds.
            for w in command {
                let word = parse_word(w, options);
                any |= word.iter().any(is_replacement);
                words.push(word);
            }
        } else {
            for w in command.join(" ").split([' ', '\t', '\n']) {
                if w.is_empty() {
                    continue;
                }
                let word = parse_word(w, options);
                any |= word.iter().any(is_replacement);
                words.push(word);
            }
        }
        let empty = words.is_empty();
        if !any && !options.no_append {
            // As parallel: the arguments go at the end.
            words.push(vec![Piece::Arg(None, Op::Whole)]);
        }
        let pieces = || words.iter().flatten();
        let slot = pieces().any(|p| matches!(p, Piece::Slot { .. }));
        let total = pieces().any(|p| matches!(p, Piece::Total | Piece::Seq { padded: true }));
        let shell = empty || (!options.quote && needs_shell(&words));
        Template {
            words,
            quoted: options.quote,
            context: options.context,
            shell,
            shell_program: std::env::var("PARALLEL_SHELL")
                .ok()
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "/bin/sh".to_owned()),
            slot,
            total,
            empty,
            shellquote: options.shellquote,
        }
    }

    /// The length of the command line without its arguments (for `-s`).
    pub fn base_len(&self) -> usize {
        self.line(&JobArgs {
            values: &[],
            seq: 1,
            slot: 1,
            total: None,
        })
        .len()
    }

    /// Whether the command uses `{%}`: it is made when the task starts.
    pub fn uses_slot(&self) -> bool {
        self.slot
    }

    /// Whether the command uses `{##}` (or `{0#}`): every argument is read
    /// before the first task starts.
    pub fn uses_total(&self) -> bool {
        self.total
    }

    /// Whether the arguments are themselves the commands (no COMMAND).
    pub fn is_empty(&self) -> bool {
        self.empty
    }

    /// The command line of one job, as the shell reads it (what the job
    /// log and `--dry-run` show).
    pub fn line(&self, job: &JobArgs<'_>) -> String {
        let mut words = Vec::new();
        for word in &self.words {
            for values in self.repetitions(word, job) {
                if vanishes(word, &values) {
                    continue;
                }
                let mut out = String::new();
                for piece in word {
                    match piece {
                        Piece::Text(t) if self.quoted => out.push_str(&quote(t)),
                        Piece::Text(t) => out.push_str(t),
                        Piece::Arg(None, op) => {
                            for (k, v) in values.iter().enumerate() {
                                if k > 0 {
                                    out.push(' ');
                                }
                                out.push_str(&self.shell_word(&apply(op, v)));
                            }
                        }
                        other => out.push_str(&self.shell_word(&single(other, job))),
                    }
                }
                words.push(out);
            }
        }
        words.join(" ")
    }

    /// A value as it goes into the command line: quoted, except when the
    /// values are the commands.
    fn shell_word(&self, value: &str) -> String {
        if self.empty && !self.shellquote {
            value.to_owned()
        } else {
            quote(value)
        }
    }

    /// The words for `--tagstring`: the replacement strings with the
    /// arguments as they are, not quoted.
    pub fn text(&self, job: &JobArgs<'_>) -> String {
        self.argv(job).join(" ")
    }

    /// What the task runs.
    pub fn work(&self, job: &JobArgs<'_>) -> Work {
        self.render(job).0
    }

    /// What the task runs, and its command line: made once when the shell
    /// runs that line.
    pub fn render(&self, job: &JobArgs<'_>) -> (Work, String) {
        let line = self.line(job);
        if self.shell {
            let argv = vec![self.shell_program.clone(), "-c".to_owned(), line.clone()];
            return (Work::Argv(argv), line);
        }
        (Work::Argv(self.argv(job)), line)
    }

    /// The words with the arguments put in as they are, each its own
    /// word, as the shell would split the command line.
    fn argv(&self, job: &JobArgs<'_>) -> Vec<String> {
        let mut argv = Vec::new();
        for word in &self.words {
            for values in self.repetitions(word, job) {
                if vanishes(word, &values) {
                    continue;
                }
                let mut current = String::new();
                for piece in word {
                    match piece {
                        Piece::Text(t) => current.push_str(t),
                        Piece::Arg(None, op) => {
                            for (k, v) in values.iter().enumerate() {
                                if k > 0 {
                                    argv.push(std::mem::take(&mut current));
                                }
                                current.push_str(&apply(op, v));
                            }
                        }
                        other => current.push_str(&single(other, job)),
                    }
                }
                argv.push(current);
            }
        }
        argv
    }

    /// The values each copy of `word` takes: one copy with them all, or
    /// with `-X`, a copy per argument for a word with `{}`.
    fn repetitions<'j>(&self, word: &Word, job: &'j JobArgs<'_>) -> Vec<Vec<&'j str>> {
        let all: Vec<&str> = job.values.iter().map(String::as_str).collect();
        let has_all = word.iter().any(|p| matches!(p, Piece::Arg(None, _)));
        if self.context && has_all && word.len() > 1 && all.len() > 1 {
            return all.into_iter().map(|v| vec![v]).collect();
        }
        vec![all]
    }
}

/// One job's arguments: every value (the columns of each input record,
/// the records of a `-N` group), its sequence number and job slot.
#[derive(Debug, Clone, Copy)]
pub struct JobArgs<'a> {
    pub values: &'a [String],
    pub seq: u64,
    pub slot: u64,
    /// The number of jobs, when it is known.
    pub total: Option<u64>,
}

/// A word that is only `{}` and has no values to take (`-N 0`) is no
/// word at all, as in the shell.
fn vanishes(word: &Word, values: &[&str]) -> bool {
    values.is_empty() && word.iter().all(|p| matches!(p, Piece::Arg(None, _)))
}

fn is_replacement(p: &Piece) -> bool {
    !matches!(p, Piece::Text(_))
}

/// The value of a replacement string that stands for one value.
fn single(piece: &Piece, job: &JobArgs<'_>) -> String {
    let width = job.total.map_or(1, |t| t.to_string().len());
    match piece {
        Piece::Text(t) => t.clone(),
        Piece::Arg(None, op) => job
            .values
            .iter()
            .map(|v| apply(op, v))
            .collect::<Vec<_>>()
            .join(" "),
        Piece::Arg(Some(n), op) => {
            let len = job.values.len() as i64;
            let index = if *n < 0 { len + n } else { n - 1 };
            usize::try_from(index)
                .ok()
                .and_then(|i| job.values.get(i))
                .map(|v| apply(op, v))
                .unwrap_or_default()
        }
        Piece::Seq { padded: false } => job.seq.to_string(),
        Piece::Seq { padded: true } => format!("{:0width$}", job.seq),
        Piece::Slot { padded: false } => job.slot.to_string(),
        Piece::Slot { padded: true } => format!("{:0width$}", job.slot),
        Piece::Total => job.total.map(|t| t.to_string()).unwrap_or_default(),
    }
}

/// Splits one word into text and replacement strings.
fn parse_word(word: &str, options: &TemplateOptions) -> Word {
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut rest = word;
    while !rest.is_empty() {
        if let Some(r) = options.replace.as_deref().filter(|r| !r.is_empty()) {
            if let Some(after) = rest.strip_prefix(r) {
                flush(&mut text, &mut pieces);
                pieces.push(Piece::Arg(None, Op::Whole));
                rest = after;
                continue;
            }
        }
        let renamed = options
            .renames
            .iter()
            .filter(|(from, _)| !from.is_empty())
            .find(|(from, _)| rest.starts_with(from.as_str()));
        if let Some((from, inner)) = renamed {
            if let Some(piece) = replacement(inner, options) {
                flush(&mut text, &mut pieces);
                pieces.push(piece);
                rest = &rest[from.len()..];
                continue;
            }
        }
        if rest.starts_with('{') {
            if let Some(end) = rest[1..].find('}') {
                let inner = &rest[1..=end];
                if let Some(piece) = replacement(inner, options) {
                    flush(&mut text, &mut pieces);
                    pieces.push(piece);
                    rest = &rest[end + 2..];
                    continue;
                }
            }
        }
        let c = rest.chars().next().expect("not empty");
        text.push(c);
        rest = &rest[c.len_utf8()..];
    }
    flush(&mut text, &mut pieces);
    pieces
}

fn flush(text: &mut String, pieces: &mut Word) {
    if !text.is_empty() {
        pieces.push(Piece::Text(std::mem::take(text)));
    }
}

/// The replacement string `{inner}`, if it is one.
fn replacement(inner: &str, options: &TemplateOptions) -> Option<Piece> {
    let arg = |op| Some(Piece::Arg(None, op));
    match inner {
        // With -I, `{}` is plain text.
        "" if options.replace.is_some() => return None,
        "" => return arg(Op::Whole),
        "." => return arg(Op::NoExt),
        "/" => return arg(Op::Base),
        "//" => return arg(Op::Dir),
        "/." => return arg(Op::BaseNoExt),
        "#" => return Some(Piece::Seq { padded: false }),
        "%" => return Some(Piece::Slot { padded: false }),
        _ => {}
    }
    // {name}, {name.}, {name/}... of `--header`.
    for (i, name) in options.names.iter().enumerate() {
        let Some(rest) = inner.strip_prefix(name.as_str()) else {
            continue;
        };
        let op = match rest {
            "" => Op::Whole,
            "." => Op::NoExt,
            "/" => Op::Base,
            "//" => Op::Dir,
            "/." => Op::BaseNoExt,
            _ => continue,
        };
        return Some(Piece::Arg(Some(i as i64 + 1), op));
    }
    // {N}, {N.}, {N/}, {N//}, {N/.}, {-N}...
    let digits = inner.strip_prefix('-').unwrap_or(inner);
    let len = digits.bytes().take_while(u8::is_ascii_digit).count();
    if len > 0 {
        let number = inner[..inner.len() - digits.len() + len]
            .parse::<i64>()
            .ok();
        let op = match &digits[len..] {
            "" => Some(Op::Whole),
            "." => Some(Op::NoExt),
            "/" => Some(Op::Base),
            "//" => Some(Op::Dir),
            "/." => Some(Op::BaseNoExt),
            _ => None,
        };
        if let (Some(number), Some(op)) = (number.filter(|n| *n != 0), op) {
            return Some(Piece::Arg(Some(number), op));
        }
    }
    if !options.plus {
        return None;
    }
    match inner {
        ".." => return arg(Op::NoExts(2)),
        "..." => return arg(Op::NoExts(3)),
        "/.." => return arg(Op::BaseNoExts(2)),
        "/..." => return arg(Op::BaseNoExts(3)),
        "+/" => return arg(Op::PlusDir),
        "+." => return arg(Op::PlusExt(1)),
        "+.." => return arg(Op::PlusExt(2)),
        "+..." => return arg(Op::PlusExt(3)),
        "##" => return Some(Piece::Total),
        "0#" => return Some(Piece::Seq { padded: true }),
        "0%" => return Some(Piece::Slot { padded: true }),
        _ => {}
    }
    if let Some(text) = inner.strip_prefix(":-") {
        return arg(Op::Default(text.to_owned()));
    }
    if let Some(range) = inner.strip_prefix(':') {
        let (start, count) = match range.split_once(':') {
            Some((s, c)) => (s.parse().ok()?, Some(c.parse().ok()?)),
            None => (range.parse().ok()?, None),
        };
        return arg(Op::Substr(start, count));
    }
    if let Some(text) = inner.strip_prefix("^^") {
        return arg(Op::Upper(text.to_owned(), true));
    }
    if let Some(text) = inner.strip_prefix('^') {
        return arg(Op::Upper(text.to_owned(), false));
    }
    if let Some(text) = inner.strip_prefix('#') {
        return arg(Op::StripPrefix(text.to_owned()));
    }
    if let Some(text) = inner.strip_prefix('%') {
        return arg(Op::StripSuffix(text.to_owned()));
    }
    if let Some(pair) = inner.strip_prefix('/') {
        let (from, to) = pair.split_once('/')?;
        if from.is_empty() {
            return None;
        }
        return arg(Op::Replace(from.to_owned(), to.to_owned()));
    }
    None
}

/// Whether a command line needs a shell to mean what it says.
fn needs_shell(words: &[Word]) -> bool {
    const SPECIAL: &[char] = &[
        '|', '&', ';', '<', '>', '(', ')', '$', '`', '\\', '"', '\'', '*', '?', '[', ']', '#', '~',
        '!',
    ];
    let texts = || {
        words.iter().flatten().filter_map(|p| match p {
            Piece::Text(t) => Some(t.as_str()),
            _ => None,
        })
    };
    if texts().any(|t| t.contains(SPECIAL)) {
        return true;
    }
    let Some(first) = words.first() else {
        return true;
    };
    // The program must be plain text, a program and not an assignment or
    // a builtin.
    let [Piece::Text(program)] = first.as_slice() else {
        return true;
    };
    if program.contains('=') || SHELL_WORDS.contains(&program.as_str()) {
        return true;
    }
    !executable_exists(program)
}

/// Whether `word` names a program on `PATH` (or by its path) or a shell
/// builtin: what a command line can start with.
pub fn is_program(word: &str) -> bool {
    SHELL_WORDS.contains(&word) || executable_exists(word)
}

/// Whether `program` names an executable, as the shell would find it: a
/// path, or a name on `PATH`. A command that cannot be found is left to
/// the shell, which says so and exits with 127, as under parallel.
fn executable_exists(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    let runnable = |p: &Path| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        return runnable(Path::new(program));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).any(|dir| runnable(&dir.join(program)))
}

/// Quotes a value for the shell, as parallel does: as it is when it holds
/// only `[-_.+a-zA-Z0-9/]`, else in single quotes.
pub fn quote(s: &str) -> String {
    if s.is_empty() {
        return "''".to_owned();
    }
    let safe = s
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-_.+/".contains(&b));
    if safe {
        return s.to_owned();
    }
    let mut q = format!("'{}'", s.replace('\'', "'\"'\"'"));
    if let Some(rest) = q.strip_prefix("''") {
        q = rest.to_owned();
    }
    if let Some(rest) = q.strip_suffix("''") {
        q = rest.to_owned();
    }
    q
}

/// Applies a replacement string to one argument.
fn apply(op: &Op, v: &str) -> String {
    match op {
        Op::Whole => v.to_owned(),
        Op::NoExt => strip_exts(v, 1),
        Op::Base => base(v).to_owned(),
        Op::Dir => dirname(v),
        Op::BaseNoExt => strip_exts(base(v), 1),
        Op::NoExts(n) => strip_exts(v, *n),
        Op::BaseNoExts(n) => strip_exts(base(v), *n),
        Op::PlusDir => match v.rfind('/') {
            Some(i) => v[..i].to_owned(),
            None => String::new(),
        },
        Op::PlusExt(n) => {
            let stripped = strip_exts(v, *n);
            if stripped.len() == v.len() {
                String::new()
            } else {
                v[stripped.len() + 1..].to_owned()
            }
        }
        Op::Default(text) if v.is_empty() => text.clone(),
        Op::Default(_) => v.to_owned(),
        Op::Substr(start, count) => {
            let chars = v.chars().skip(*start);
            match count {
                Some(n) => chars.take(*n).collect(),
                None => chars.collect(),
            }
        }
        Op::StripPrefix(p) => v.strip_prefix(p.as_str()).unwrap_or(v).to_owned(),
        Op::StripSuffix(s) => v.strip_suffix(s.as_str()).unwrap_or(v).to_owned(),
        Op::Replace(from, to) => v.replacen(from.as_str(), to, 1),
        Op::Upper(text, every) => {
            if *every {
                v.replace(text.as_str(), &text.to_uppercase())
            } else if let Some(rest) = v.strip_prefix(text.as_str()) {
                format!("{}{rest}", text.to_uppercase())
            } else {
                v.to_owned()
            }
        }
    }
}

/// `s:.*/::`
fn base(v: &str) -> &str {
    v.rsplit('/').next().unwrap_or(v)
}

/// `s:\.[^/.]*$::` with the pattern `n` times: the last `n` extensions
/// off, each a dot and what follows it with no `/` or `.` in it; the value
/// as it is when it has fewer.
fn strip_exts(v: &str, n: usize) -> String {
    let mut out = v;
    for _ in 0..n {
        match out.rfind(['.', '/']) {
            Some(i) if out.as_bytes()[i] == b'.' => out = &out[..i],
            _ => return v.to_owned(),
        }
    }
    out.to_owned()
}

/// Perl's `File::Basename::dirname`, which parallel's `{//}` is.
fn dirname(v: &str) -> String {
    let trimmed = v.trim_end_matches('/');
    if trimmed.is_empty() {
        return if v.is_empty() { ".".into() } else { "/".into() };
    }
    match trimmed.rfind('/') {
        None => ".".into(),
        Some(i) => {
            let dir = trimmed[..i].trim_end_matches('/');
            if dir.is_empty() {
                "/".into()
            } else {
                dir.to_owned()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(command: &[&str]) -> Template {
        t_with(command, TemplateOptions::default())
    }

    fn t_with(command: &[&str], options: TemplateOptions) -> Template {
        let words: Vec<String> = command.iter().map(|s| s.to_string()).collect();
        Template::new(&words, &options)
    }

    fn job(values: &[String]) -> JobArgs<'_> {
        JobArgs {
            values,
            seq: 3,
            slot: 2,
            total: Some(12),
        }
    }

    fn line(template: &Template, values: &[&str]) -> String {
        let values: Vec<String> = values.iter().map(|s| s.to_string()).collect();
        template.line(&job(&values))
    }

    fn argv(template: &Template, values: &[&str]) -> Vec<String> {
        let values: Vec<String> = values.iter().map(|s| s.to_string()).collect();
        template.argv(&job(&values))
    }

    #[test]
    fn quoting_is_parallels() {
        for (value, quoted) in [
            ("a", "a"),
            ("plain-_.+/x", "plain-_.+/x"),
            ("a b", "'a b'"),
            ("it's", r#"'it'"'"'s'"#),
            ("'x'", r#""'"'x'"'""#),
            ("", "''"),
            ("$HOME", "'$HOME'"),
            ("a=b", "'a=b'"),
        ] {
            assert_eq!(quote(value), quoted, "{value}");
        }
    }

    #[test]
    fn path_replacements_are_parallels() {
        let cmd = t(&["echo", "{.}", "{/}", "{//}", "{/.}"]);
        for (value, expected) in [
            ("a/b.c/d.tar.gz", "echo a/b.c/d.tar d.tar.gz a/b.c d.tar"),
            (".bashrc", "echo '' .bashrc . ''"),
            ("c", "echo c c . c"),
            ("/x", "echo /x x / x"),
            ("a/", "echo a/ '' . ''"),
        ] {
            assert_eq!(line(&cmd, &[value]), expected, "{value}");
        }
    }

    #[test]
    fn plus_replacements() {
        let plus = TemplateOptions {
            plus: true,
            ..Default::default()
        };
        let cmd = t_with(
            &[
                "echo", "{..}", "{+.}", "{+..}", "{+/}", "{/..}", "{##}", "{0#}",
            ],
            plus.clone(),
        );
        assert_eq!(line(&cmd, &["d/a.tar.gz"]), "echo d/a gz tar.gz d a 12 03");
        let cmd = t_with(
            &[
                "echo", "{:-none}", "{:1:2}", "{#ab}", "{%.gz}", "{/a/A}", "{^a}",
            ],
            plus,
        );
        assert_eq!(
            line(&cmd, &["abc.gz"]),
            "echo abc.gz bc c.gz abc Abc.gz Abc.gz"
        );
        assert_eq!(line(&cmd, &[""]), "echo none '' '' '' '' ''");
        // Without --plus they are text.
        assert_eq!(
            line(&t(&["echo", "{..}", "{}"]), &["a.b.c"]),
            "echo {..} a.b.c"
        );
    }

    #[test]
    fn positions_sequence_and_slot() {
        let cmd = t(&["echo", "{2}", "{1.}", "{-1}", "{3}", "{#}", "{%}"]);
        assert_eq!(line(&cmd, &["a.x", "b", "c"]), "echo b a c c 3 2");
        assert_eq!(line(&cmd, &["a.x"]), "echo '' a a.x '' 3 2");
        assert!(cmd.uses_slot());
        assert!(!cmd.uses_total());
    }

    #[test]
    fn without_a_replacement_string_the_arguments_go_last() {
        let cmd = t(&["wc", "-l"]);
        assert_eq!(line(&cmd, &["a b"]), "wc -l 'a b'");
        assert_eq!(argv(&cmd, &["a b"]), ["wc", "-l", "a b"]);
        assert_eq!(argv(&cmd, &["x", "y"]), ["wc", "-l", "x", "y"]);
    }

    #[test]
    fn shell_syntax_runs_through_the_shell() {
        for command in [
            &["echo {} | tr a-z A-Z"][..],
            &["echo", "{}", ">", "out"],
            &["exit", "{}"],
            &["cd", "/tmp;", "ls"],
            &["A=1", "env"],
            &["{}"],
            &["no-such-program-here", "{}"],
        ] {
            assert!(t(command).shell, "{command:?}");
        }
        for command in [
            &["echo", "{}"][..],
            &["printf", "%s,", "{}"],
            &["/bin/echo"],
        ] {
            assert!(!t(command).shell, "{command:?}");
        }
        let cmd = t(&["echo {} | tr a-z A-Z"]);
        let values = vec!["a b".to_owned()];
        let Work::Argv(argv) = cmd.work(&job(&values)) else {
            panic!()
        };
        assert_eq!(argv[1..], ["-c", "echo 'a b' | tr a-z A-Z"]);
    }

    #[test]
    fn without_a_command_the_arguments_are_the_commands() {
        let cmd = t(&[]);
        assert!(cmd.is_empty());
        assert_eq!(line(&cmd, &["echo a | wc -c"]), "echo a | wc -c");
    }

    #[test]
    fn quote_keeps_each_word_whole() {
        let q = TemplateOptions {
            quote: true,
            ..Default::default()
        };
        let cmd = t_with(&["printf", "%s\\n", "a {} b"], q);
        assert!(!cmd.shell);
        assert_eq!(argv(&cmd, &["x y"]), ["printf", "%s\\n", "a x y b"]);
        assert_eq!(line(&cmd, &["x"]), r"printf '%s\n' 'a 'x' b'");
    }

    #[test]
    fn context_replace_repeats_the_word() {
        let x = TemplateOptions {
            context: true,
            ..Default::default()
        };
        let cmd = t_with(&["echo", "pre{}post"], x);
        assert_eq!(line(&cmd, &["1", "2"]), "echo pre1post pre2post");
        assert_eq!(argv(&cmd, &["1", "2"]), ["echo", "pre1post", "pre2post"]);
        // Without -X the values are one list inside the word.
        let cmd = t(&["echo", "pre{}post"]);
        assert_eq!(line(&cmd, &["1", "2"]), "echo pre1 2post");
        assert_eq!(argv(&cmd, &["1", "2"]), ["echo", "pre1", "2post"]);
    }

    #[test]
    fn replace_renames_the_replacement_string() {
        let i = TemplateOptions {
            replace: Some(",,".into()),
            ..Default::default()
        };
        let cmd = t_with(&["echo", ",,", "{}", "{.}"], i);
        assert_eq!(line(&cmd, &["a.b"]), "echo a.b {} a");
    }

    #[test]
    fn unknown_braces_are_text() {
        let cmd = t(&["echo", "{a}", "{", "}{}"]);
        assert_eq!(argv(&cmd, &["x"]), ["echo", "{a}", "{", "}x"]);
        assert!(!cmd.shell);
    }

    #[test]
    fn dirnames() {
        for (v, d) in [
            ("a/b/c", "a/b"),
            ("c", "."),
            ("/c", "/"),
            ("a/b/", "a"),
            ("/", "/"),
            ("", "."),
            ("a//b", "a"),
        ] {
            assert_eq!(dirname(v), d, "{v}");
        }
    }
}
