//! `hearth run` takes GNU parallel's command lines: each case below is a
//! shell command line in which the word `PAR` stands for the runner. It is
//! run once with `PAR` as Debian's `parallel --will-cite` and once as
//! `hearth run`, each in a fresh directory holding the same files, and the
//! two must agree byte for byte on the exit status, stdout (its sorted lines
//! when the order of the tasks' output is not determined) and the files left
//! in the directory. Messages on stderr may differ.
//!
//! With `PAR_UNDER_TEST='parallel --will-cite'` in the environment, parallel
//! is compared with itself: every case must then pass, which shows that the
//! cases are deterministic.
//!
//! Most cases come from `man parallel_tutorial` and `man parallel_examples`,
//! the ones that apply to a single host.
// The helpers below are test code too: a failure is a test failure.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Read;
use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

const HEARTH: &str = env!("CARGO_BIN_EXE_hearth");

/// How long one command line may run before it counts as hung.
const DEADLINE: Duration = Duration::from_secs(30);

/// Cases of one group run on this many threads at once.
const THREADS: usize = 3;

/// Cases of GNU parallel's features that `hearth run` does not have yet
/// (issue 20 goes on): each group leaves them out and names them on
/// stderr. `PAR_NOT_YET=1` runs these cases alone, to see what is left.
const NOT_YET: &[&str] = &[
    // {choose_k}, {uniq}.
    "plus_choose_k",
    "plus_uniq",
    // Without a COMMAND, standard input is JSON Lines of tasks unless
    // --lines is given.
    "lines_are_commands",
];

/// The files every case starts with.
const FIXTURES: &[(&str, &[u8])] = &[
    ("a.txt", b"alpha\n"),
    ("b.log", b"bravo\nbravo2\n"),
    ("c d.txt", b"charlie delta\n"),
    ("sub/e.txt", b"echo\n"),
    ("sub/f.tar.gz", b"foxtrot\n"),
    ("nums", b"1\n2\n3\n4\n5\n"),
    ("words", b"x\ny\nz\n"),
    ("blanks", b"one\n\nthree\n"),
    ("files", b"a.txt\nb.log\nc d.txt\n"),
    ("names0", b"a.txt\0c d.txt\0sub/e.txt\0"),
    ("table.csv", b"1,one,uno\n2,two,dos\n3,three,tres\n"),
    ("table.tsv", b"a\tb\tc\nd\te\tf\n"),
    ("records", b"/foo, bar/, /baz, qux/,\n"),
];

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Order {
    /// stdout must be equal byte for byte.
    Kept,
    /// The tasks' output may come in any order: stdout's lines are sorted
    /// before they are compared.
    Any,
}

#[derive(Clone, Copy, Debug)]
struct Case {
    name: &'static str,
    line: &'static str,
    order: Order,
    /// Both runners must write something to stderr.
    stderr: bool,
    /// Bad input only: hearth may instead refuse the line, with exit status
    /// 255 and a message on stderr.
    refusal_ok: bool,
}

const fn ordered(name: &'static str, line: &'static str) -> Case {
    Case {
        name,
        line,
        order: Order::Kept,
        stderr: false,
        refusal_ok: false,
    }
}

const fn unordered(name: &'static str, line: &'static str) -> Case {
    Case {
        order: Order::Any,
        ..ordered(name, line)
    }
}

impl Case {
    const fn with_stderr(self) -> Case {
        Case {
            stderr: true,
            ..self
        }
    }

    const fn or_refused(self) -> Case {
        Case {
            refusal_ok: true,
            ..self
        }
    }
}

/// What one run of a command line did.
#[derive(Debug)]
struct Outcome {
    /// `exit 3`, `signal 9` or `hung`.
    status: String,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    /// Every file and directory under the run's directory, by relative path
    /// (directories end in `/`).
    files: BTreeMap<String, Vec<u8>>,
}

/// `line` with the word `PAR` replaced by `runner`.
fn with_runner(line: &str, runner: &str) -> String {
    let word = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_');
    let bytes = line.as_bytes();
    let mut out = String::new();
    let mut from = 0;
    for (at, _) in line.match_indices("PAR") {
        let before = at.checked_sub(1).and_then(|i| bytes.get(i));
        if !word(before) && !word(bytes.get(at + 3)) {
            out.push_str(&line[from..at]);
            out.push_str(runner);
            from = at + 3;
        }
    }
    out.push_str(&line[from..]);
    out
}

/// Runs `line` with `/bin/sh -c` in a fresh directory of the fixtures.
fn run(line: &str, runner: &str) -> Outcome {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    for (name, content) in FIXTURES {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    let mut child = Command::new("/bin/sh")
        .arg("-c")
        .arg(with_runner(line, runner))
        .current_dir(dir.path())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("SHELL", "/bin/sh")
        .env("LC_ALL", "C")
        .env("HOME", home.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let drain = |mut pipe: Box<dyn Read + Send>| {
        thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break match (status.code(), status.signal()) {
                (Some(code), _) => format!("exit {code}"),
                (None, signal) => format!("signal {}", signal.unwrap_or(0)),
            };
        }
        if started.elapsed() > DEADLINE {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.wait();
            break "hung".to_owned();
        }
        thread::sleep(Duration::from_millis(5));
    };
    Outcome {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
        files: snapshot(dir.path()),
    }
}

/// The files under `root`, a job log's times masked: the Starttime and
/// JobRuntime columns of files named `*.joblog` read `*`.
fn snapshot(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                files.insert(format!("{name}/"), Vec::new());
                dirs.push(path);
            } else if meta.is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                files.insert(name, format!("-> {}", target.display()).into_bytes());
            } else {
                let content = std::fs::read(&path).unwrap();
                let content = if name.ends_with(".joblog") {
                    mask_joblog(&content)
                } else {
                    content
                };
                files.insert(name, content);
            }
        }
    }
    files
}

fn mask_joblog(content: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(content);
    let mut out = String::new();
    for line in text.split_inclusive('\n') {
        let mut fields: Vec<&str> = line.split('\t').collect();
        if fields.len() >= 9 && fields[0] != "Seq" {
            fields[2] = "*";
            fields[3] = "*";
        }
        out.push_str(&fields.join("\t"));
    }
    out.into_bytes()
}

fn sorted_lines(bytes: &[u8]) -> Vec<u8> {
    let mut lines: Vec<&[u8]> = bytes.split_inclusive(|&b| b == b'\n').collect();
    lines.sort();
    lines.concat()
}

/// `bytes` as a short quoted string for a report.
fn shorten(bytes: &[u8]) -> String {
    const MAX: usize = 200;
    let text = format!(
        "{:?}",
        String::from_utf8_lossy(&bytes[..bytes.len().min(MAX)])
    );
    if bytes.len() > MAX {
        format!("{text}... ({} bytes)", bytes.len())
    } else {
        text
    }
}

/// The ways `hearth` differs from `reference` in a case, one line each.
fn differences(case: &Case, reference: &Outcome, hearth: &Outcome) -> Vec<String> {
    let mut diffs = Vec::new();
    if reference.status != hearth.status {
        diffs.push("exit status differs".to_owned());
    }
    match case.order {
        Order::Kept if reference.stdout != hearth.stdout => {
            diffs.push("stdout differs".to_owned());
        }
        Order::Any if sorted_lines(&reference.stdout) != sorted_lines(&hearth.stdout) => {
            diffs.push("stdout differs, even sorted".to_owned());
        }
        _ => {}
    }
    let only = |a: &Outcome, b: &Outcome| -> Vec<String> {
        a.files
            .keys()
            .filter(|name| !b.files.contains_key(*name))
            .cloned()
            .collect()
    };
    for (runner, names) in [
        ("parallel", only(reference, hearth)),
        ("hearth", only(hearth, reference)),
    ] {
        if !names.is_empty() {
            let names = names.join(" ");
            diffs.push(format!(
                "files only {runner} writes: {}",
                shorten(names.as_bytes())
            ));
        }
    }
    for (name, want) in &reference.files {
        match hearth.files.get(name) {
            Some(got) if got != want => diffs.push(format!(
                "file {name:?}: parallel {}, hearth {}",
                shorten(want),
                shorten(got)
            )),
            _ => {}
        }
    }
    if case.stderr && hearth.stderr.is_empty() {
        diffs.push("hearth writes nothing to stderr".to_owned());
    }
    diffs
}

/// Runs `cases` a few at a time and fails with every case that differs.
fn check(group: &str, cases: &[Case], compare: fn(&Case, &Outcome, &Outcome) -> Vec<String>) {
    let not_yet = std::env::var("PAR_NOT_YET").is_ok_and(|v| v == "1");
    let (left_out, cases): (Vec<Case>, Vec<Case>) = cases
        .iter()
        .partition(|c| NOT_YET.contains(&c.name) != not_yet);
    if !left_out.is_empty() && !not_yet {
        let names: Vec<&str> = left_out.iter().map(|c| c.name).collect();
        eprintln!("{group}: not yet supported, left out: {}", names.join(", "));
    }
    let cases = &cases[..];
    let installed = Command::new("parallel").arg("--version").output();
    assert!(
        installed.is_ok_and(|out| out.status.success()),
        "GNU parallel is not installed (apt-get install parallel; see packaging/deps.txt)"
    );
    let under_test = std::env::var("PAR_UNDER_TEST").unwrap_or_else(|_| format!("'{HEARTH}' run"));
    let mut names: Vec<&str> = cases.iter().map(|case| case.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(
        names.len(),
        cases.len(),
        "{group}: two cases have the same name"
    );
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(BTreeMap::new());
    thread::scope(|scope| {
        for _ in 0..THREADS {
            scope.spawn(|| {
                while let Some(case) = cases.get(next.fetch_add(1, Ordering::SeqCst)) {
                    let reference = run(case.line, "parallel --will-cite");
                    let mut diffs = Vec::new();
                    if reference.status == "hung" {
                        diffs.push("parallel hangs: the case is wrong".to_owned());
                    }
                    if case.stderr && reference.stderr.is_empty() {
                        diffs.push(
                            "parallel writes nothing to stderr: the case is wrong".to_owned(),
                        );
                    }
                    let ours = run(case.line, &under_test);
                    diffs.extend(compare(case, &reference, &ours));
                    if !diffs.is_empty() {
                        let mut report = format!("{}: {}\n", case.name, case.line);
                        for diff in diffs {
                            let _ = writeln!(report, "    {diff}");
                        }
                        for (runner, out) in [("parallel", &reference), ("hearth", &ours)] {
                            let _ = writeln!(
                                report,
                                "    {runner}: {}, stdout {}, stderr {}",
                                out.status,
                                shorten(&out.stdout),
                                shorten(&out.stderr)
                            );
                        }
                        failures.lock().unwrap().insert(case.name, report);
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{group}: {} of {} cases differ from GNU parallel:\n{}",
        failures.len(),
        cases.len(),
        failures.into_values().collect::<String>()
    );
}

#[test]
fn sources_and_combinations() {
    check(
        "sources_and_combinations",
        &[
            unordered("one_source", "PAR echo ::: a b c"),
            unordered("two_sources_every_combination", "PAR echo ::: a b ::: 1 2"),
            ordered(
                "three_sources_kept_order",
                "PAR -k echo ::: a b ::: 1 2 ::: x y",
            ),
            ordered("file_source", "PAR -k cat :::: files"),
            ordered("two_file_sources", "PAR -k echo :::: nums :::: words"),
            ordered(
                "files_and_args_mixed",
                "PAR -k echo ::: a b :::: words ::: 1",
            ),
            ordered("linked_source", "PAR -k echo ::: a b :::+ 1 2 3"),
            ordered(
                "linked_after_combination",
                "PAR -k echo ::: a b ::: 1 2 :::+ x y",
            ),
            ordered(
                "link_option_wraps_shorter",
                "PAR -k --link echo ::: a b c ::: 1 2",
            ),
            ordered("arg_file_option", "PAR -k -a words echo"),
            ordered("two_arg_files", "PAR -k -a words -a nums echo"),
            ordered(
                "linked_file_sources",
                "PAR -k echo {1} - {2} :::: nums ::::+ words",
            ),
            ordered("link_arg_files", "PAR -k --link -a nums -a words echo"),
            ordered(
                "six_sources_64_jobs",
                "PAR -k echo ::: 0 1 ::: 0 1 ::: 0 1 ::: 0 1 ::: 0 1 ::: 0 1",
            ),
            ordered("n0_from_stdin", "seq 3 | PAR -k -n0 echo x"),
            ordered("stdin_lines", "printf 'x\\ny\\n' | PAR -k echo"),
            ordered(
                "stdin_as_dash_source",
                "printf 'x\\ny\\n' | PAR -k echo :::: - ::: 1 2",
            ),
            ordered(
                "blank_line_is_empty_argument",
                "PAR -k echo '[{}]' :::: blanks",
            ),
            ordered(
                "blank_stdin_line",
                "printf 'a\\n\\nb\\n' | PAR -k echo '<{}>'",
            ),
            ordered(
                "lines_are_commands",
                "printf 'echo one\\necho two\\n' | PAR -k",
            ),
            ordered("args_are_commands", "PAR -k ::: 'echo a' 'echo b | tr b B'"),
            ordered("null_separated_file", "PAR -k -0 echo :::: names0"),
            ordered("null_arg_file", "PAR -k -a names0 --null wc -c"),
            ordered("delimiter", "printf 'a:b:c' | PAR -k -d : echo"),
            ordered("arg_separator_renamed", "PAR --arg-sep ,, -k echo ,, a b"),
            ordered(
                "eof_string_ends_input",
                "printf 'a\\nstop\\nb\\n' | PAR -k -E stop echo",
            ),
            ordered(
                "no_run_if_empty",
                "printf '\\n \\nx\\n' | PAR -k -r echo '[{}]'",
            ),
            ordered(
                "skip_first_line",
                "PAR -k --skip-first-line echo :::: table.csv",
            ),
            ordered(
                "header_names_sources",
                "PAR -k --header : echo f1={f1} f2={f2} ::: f1 A B ::: f2 C D",
            ),
            ordered(
                "header_names_columns",
                "PAR -k --header : --colsep , echo {one}-{uno} :::: table.csv",
            ),
            unordered("shuffled", "PAR --shuf echo ::: a b c d"),
            ordered("thousand_stdin_lines", "seq 1000 | PAR -k echo"),
            ordered(
                "hundred_thousand_args_packed",
                "PAR -j1 -X echo ::: $(seq 100000) | wc -w",
            ),
        ],
        differences,
    );
}

#[test]
fn replacement_strings() {
    check(
        "replacement_strings",
        &[
            ordered("appended_when_absent", "PAR -k echo x ::: a b"),
            ordered(
                "path_forms",
                "PAR -k echo {} {.} {/} {//} {/.} ::: sub/f.tar.gz a.txt noext /abs/x.y",
            ),
            ordered("sequence_number", "PAR -k echo {#} {} ::: a b c"),
            ordered("job_slot_one_job", "PAR -j1 echo {%} {} ::: a b"),
            ordered("positional", "PAR -k echo {2} {1} ::: a b ::: 1 2"),
            ordered(
                "positional_path_forms",
                "PAR -k echo {1.} {2/} {1//} {2/.} ::: x/a.b y/c.d ::: p/q.r",
            ),
            ordered(
                "positional_from_the_end",
                "PAR -k echo {-1} {-2} ::: a ::: b ::: c",
            ),
            ordered("renamed_with_i", "PAR -k -I ,, echo ,, {} ::: a b"),
            ordered(
                "extension_replace",
                "PAR -k --er {ext} echo {ext} {} ::: a.txt",
            ),
            ordered(
                "plus_path_forms",
                "PAR -k --plus echo {..} {...} {+.} {+..} {/..} {+/} ::: sub/f.tar.gz a.b.c.d",
            ),
            ordered("plus_total_jobs", "PAR -k --plus echo {#}/{##} ::: a b c"),
            ordered(
                "plus_zero_padded_seq",
                "PAR -k --plus echo {0#} ::: $(seq 10)",
            ),
            ordered(
                "plus_trim_and_substring",
                "PAR -k --plus echo {%.txt} {#sub/} {:2} {:1:2} ::: sub/e.txt",
            ),
            ordered(
                "plus_trim_patterns",
                "PAR -k --plus echo {%_demo} {#demo_} {/demo_/} \
                 ::: mycode_demo demo_keep_demo_here",
            ),
            // The combinations skipped count as failed jobs: exit status 10.
            ordered(
                "plus_choose_k",
                "PAR -k --plus echo {choose_k} ::: A B C D ::: A B C D",
            ),
            ordered("plus_uniq", "PAR -k --plus echo {uniq} ::: A B C ::: A B C"),
            ordered(
                "colsep_csv",
                "PAR -k --colsep , echo {3} {1} :::: table.csv",
            ),
            ordered(
                "colsep_tsv",
                "PAR -k --colsep '\\t' echo {2} :::: table.tsv",
            ),
            ordered(
                "colsep_whole_line",
                "PAR -k --colsep , echo {} :::: table.csv",
            ),
            ordered(
                "colsep_trim",
                "PAR -k --colsep , --trim lr echo '[{2}]' ::: ' a , b '",
            ),
            ordered("n_args_per_job", "PAR -k -n 2 echo ::: a b c d e"),
            ordered("n_positional", "PAR -k -N 2 echo {1}+{2} ::: a b c d e"),
            ordered("no_args_per_job", "PAR -k -N0 echo x ::: 1 2 3"),
            ordered("x_one_job", "PAR -j1 -X echo ::: a b c d"),
            ordered("x_context", "PAR -j1 -X echo pre-{}-post ::: a b c"),
            // At the end of the input -X and -m spread the arguments over the job
            // slots, so a count of slots is given wherever the output shows it.
            ordered(
                "x_spread_over_two_slots",
                "PAR -k -j2 -X echo ::: a b c d e",
            ),
            ordered("m_one_job", "PAR -j1 -m echo {} ::: a b c d"),
            ordered("m_file_names", "PAR -j1 -m wc -c :::: files"),
            ordered("x_max_chars", "PAR -k -j1 -X -s 10 echo ::: a b c d e f"),
            ordered(
                "xargs_max_chars_30000",
                "seq 30000 | PAR -k --xargs -s 10000 echo | wc -l",
            ),
            ordered(
                "m_spread_over_four_slots",
                "PAR -k -j4 -m echo ::: $(seq 10)",
            ),
            ordered(
                "m_context_not_repeated",
                "PAR -k -j4 -m echo pre-{}-post ::: A B C D E F G",
            ),
            ordered("dry_run_x", "PAR -k --dry-run -j1 -X echo ::: a 'b c'"),
            ordered(
                "special_characters",
                r#"PAR -k echo ::: "a b" "it's" '$HOME' 'x\y' '*' 'a;b' '`x`'"#,
            ),
            // Arguments are shell-quoted wherever they stand, here inside double
            // quotes: the output shows the quotes.
            ordered(
                "quoted_inside_template",
                r#"PAR -k 'echo "<{}>"' ::: "a b""#,
            ),
            ordered("space_in_file_name", "PAR -k wc -c ::: 'c d.txt'"),
            ordered("glob_is_not_expanded", "PAR -k ls ::: '*.txt'"),
            ordered(
                "q_quotes_command",
                r#"PAR -q -k printf '[%s]\n' ::: "a b" c"#,
            ),
            ordered("q_shell_characters", "PAR -q -k echo 'a|b' ::: x"),
            // The words of the command are joined with spaces and run by the
            // shell, which takes the perl program apart.
            ordered(
                "unquoted_perl_prints_nothing",
                r#"PAR -k perl -e 'print "@ARGV\n"' ::: This wont work"#,
            ),
            ordered(
                "q_perl",
                r#"PAR -k -q perl -e 'print "@ARGV\n"' ::: This works"#,
            ),
            ordered("q_variable", r#"VAR='x  y'; PAR -k -q echo "$VAR" ::: '!'"#),
            ordered(
                "variable_in_template",
                r#"export VAR='x  y'; PAR -k echo '"$VAR"' ::: '!'"#,
            ),
            ordered("shellquote", r#"printf '%s\n' "a b'c" | PAR --shellquote"#),
            ordered("command_is_shell_line", "PAR -k echo 'a;echo' ::: x"),
        ],
        differences,
    );
}

#[test]
fn shell_templates() {
    check(
        "shell_templates",
        &[
            ordered("pipe_in_template", "PAR -k 'echo {} | tr a-z A-Z' ::: a b"),
            ordered(
                "test_in_template",
                "printf 'a.txt\\nnope\\n' | PAR -k 'if [ ! -e {} ]; then echo {}; fi'",
            ),
            ordered(
                "move_files_m",
                "mkdir dest; ls | grep -E '[.](log|txt)$' | PAR -j1 -m mv {} dest",
            ),
            ordered("verbose", "PAR -k -v echo ::: a 'b c'"),
            ordered("stdout_and_stderr", "PAR 'echo {}; echo {} >&2' ::: x").with_stderr(),
            ordered("redirect_to_files", "PAR 'echo {} > {}.out' ::: a b"),
            ordered(
                "append_one_at_a_time",
                "PAR -j1 'echo {} >> all.out' ::: a b c",
            ),
            ordered("seq_variable", "PAR -k 'echo $PARALLEL_SEQ {}' ::: a b c"),
            ordered(
                "seq_variable_two_slots",
                "PAR -j2 -k 'echo $PARALLEL_SEQ' ::: a b c d",
            ),
            ordered(
                "jobslot_variable",
                "PAR -j1 'echo $PARALLEL_JOBSLOT {}' ::: a b",
            ),
            ordered("environment_passed", "FOO=bar PAR -k 'echo $FOO {}' ::: a"),
            ordered(
                "cd_with_dirname",
                "PAR -k 'cd {//} && cat {/}' ::: sub/e.txt a.txt",
            ),
            ordered(
                "loop_in_template",
                "PAR -k 'for i in 1 2; do echo {}$i; done' ::: a b",
            ),
            ordered(
                "tasks_do_not_read_stdin",
                "echo hi | PAR -k 'cat; echo {}' ::: a",
            ),
            ordered("options_from_environment", "PARALLEL=-k PAR echo ::: a b c"),
            // The commands as they would run, arguments quoted for the shell.
            ordered(
                "dry_run_quoting",
                r#"PAR --dry-run -k echo {} ::: "a b" "it's" '$HOME'"#,
            ),
            ordered(
                "dry_run_writes_nothing",
                "PAR --dry-run 'echo {} > {.}.out' ::: a.txt",
            ),
            ordered("missing_command", "PAR -k nosuchcmd ::: 1 2").with_stderr(),
        ],
        differences,
    );
}

#[test]
fn output_modes() {
    check(
        "output_modes",
        &[
            ordered(
                "keep_order_slow_first",
                "PAR -k 'sleep 0.{}; echo {}' ::: 3 1 2",
            ),
            unordered("finish_order", "PAR 'sleep 0.{}; echo {}' ::: 2 1"),
            ordered(
                "keep_order_four_slots",
                "seq 30 | PAR -k -j4 'sleep 0.0$(({} % 3)); echo {}'",
            ),
            ordered(
                "grouped_lines_kept_together",
                "PAR -k 'echo {}; echo {}-2' ::: a b c",
            ),
            ordered("tag", "PAR -k --tag echo {} ::: a 'b c'"),
            ordered("tag_combinations", "PAR -k --tag echo ::: a b ::: 1 2"),
            ordered("tagstring", "PAR -k --tagstring '<{#}:{}>' echo {} ::: a b"),
            ordered(
                "line_buffer_kept",
                "PAR -k --line-buffer 'echo {}; echo {}-2' ::: a b",
            ),
            ordered(
                "line_buffer_tag_one_slot",
                "PAR -j1 --line-buffer --tag 'echo {}; echo {}-2' ::: a b",
            ),
            ordered(
                "ungrouped_one_slot",
                "PAR -j1 -u 'echo {}; echo {} >&2' ::: a b",
            )
            .with_stderr(),
            // With --results, the tasks' output goes to the files only.
            ordered("results_tree", "PAR -k --results out echo ::: a b ::: 1 2"),
            ordered(
                "results_trailing_slash",
                "PAR -k --results out/ echo ::: a b",
            ),
            ordered(
                "results_header_names",
                "PAR -k --header : --results out echo ::: f1 A B ::: f2 C",
            ),
            ordered(
                "results_stderr_and_status",
                "PAR -k --results out 'echo {}; echo err{} >&2; exit {}' ::: 0 1",
            ),
            ordered(
                "big_output_whole",
                "PAR -k 'yes {} | head -c 3000000' ::: x y",
            ),
            ordered(
                "joblog",
                "PAR -j1 --joblog run.joblog 'echo {}; exit {}' ::: 0 1 2",
            ),
            ordered(
                "joblog_resume_failed",
                "PAR -j1 --joblog run.joblog 'exit {}' ::: 0 1; \
                 PAR -j1 --joblog run.joblog --resume-failed 'echo {}' ::: 0 1",
            ),
            ordered(
                "joblog_quoted_commands",
                r#"PAR -j1 --joblog run.joblog echo ::: "a b" "it's""#,
            ),
        ],
        differences,
    );
}

#[test]
fn pipe_mode() {
    check(
        "pipe_mode",
        &[
            ordered("pipe_small", "printf 'a\\nb\\n' | PAR --pipe cat"),
            ordered("pipe_one_block", "seq 5 | PAR --pipe -k wc -l"),
            ordered(
                "pipe_blocks_of_100k",
                "seq 100000 | PAR --pipe -k --block 100k wc -l",
            ),
            ordered(
                "pipe_blocks_of_50k_bytes",
                "seq 100000 | PAR --pipe -k --block 50k 'wc -c'",
            ),
            ordered(
                "pipe_n_records",
                "seq 20 | PAR --pipe -k -N 6 'tr \"\\n\" \" \"; echo'",
            ),
            ordered("pipe_l_lines", "seq 10 | PAR --pipe -k -L 3 wc -l"),
            ordered(
                "pipe_recstart",
                "printf '>a\\n1\\n>b\\n2\\n' | PAR --pipe -k -N1 --recstart '>' 'wc -l'",
            ),
            ordered(
                "pipe_seq_number",
                "seq 10 | PAR --pipe -k -N 4 'echo {#}; wc -l'",
            ),
            ordered(
                "pipe_cat_to_file",
                "seq 3 | PAR --pipe --cat -k 'wc -l < {}'",
            ),
            ordered(
                "pipe_part_of_file",
                "PAR --pipepart -a nums -k --block 4 cat",
            ),
            ordered("pipe_n_records_wc", "seq 30000 | PAR --pipe -k -N 7000 wc"),
            ordered(
                "pipe_fixed_length",
                "printf HHHHAAABBBCCC \
                 | PAR --pipe -k --header '.{4}' --block 3 --recend '' 'echo start; cat; echo'",
            ),
            ordered(
                "pipe_recend",
                r"PAR -kN1 --recend ', ' --pipe echo JOB{#}\;cat\;echo END < records",
            ),
            ordered(
                "pipe_recstart_slash",
                r"PAR -kN1 --recstart / --pipe echo JOB{#}\;cat\;echo END < records",
            ),
            ordered(
                "pipe_remove_record_separator",
                "printf a,b,c, | PAR -k --recend , --rrs --pipe -N1 'cat; echo'",
            ),
            ordered(
                "pipe_header_line",
                "PAR --pipe -k --header 1 -N1 cat < table.csv",
            ),
        ],
        differences,
    );
}

#[test]
fn exit_statuses() {
    check(
        "exit_statuses",
        &[
            ordered("all_succeed", "PAR true ::: 1 2 3"),
            ordered(
                "timeout_kills",
                "PAR -k --timeout 0.5 'sleep {}; echo {}' ::: 0.1 2",
            )
            .with_stderr(),
            ordered(
                "halt_now_kills_running",
                "PAR -j2 --halt now,fail=1 'sleep {}; exit 1' ::: 0.1 5",
            ),
            ordered("all_fail", "PAR false ::: 1 2 3"),
            ordered("statuses_counted", "PAR 'exit {}' ::: 0 1 2"),
            ordered("status_255_counts_once", "PAR 'exit 255' ::: 1"),
            // The count of failed jobs stops at 101.
            ordered("more_than_100_failures", "seq 102 | PAR false"),
            ordered("killed_by_signal", "PAR 'kill -9 $$' ::: 1"),
            ordered(
                "halt_now_fail",
                "PAR -j1 --halt now,fail=1 'exit {}' ::: 0 3 4",
            )
            .with_stderr(),
            ordered(
                "halt_soon_fail_2",
                "PAR -j1 --halt soon,fail=2 'echo {}; exit {}' ::: 0 5 6 0 7",
            )
            .with_stderr(),
            // Exit status 50: the percentage, not a count of jobs.
            ordered(
                "halt_soon_fail_percent",
                "PAR -j1 --halt soon,fail=50% 'exit {}' ::: 0 1 1 0",
            ),
            ordered(
                "halt_now_success",
                "PAR -j1 --halt now,success=1 'echo {}; exit {}' ::: 1 0 2",
            ),
            ordered(
                "retries_until_success",
                "PAR -k --retries 3 'echo try >> log.{}; test $(wc -l < log.{}) -ge {}' ::: 1 2 4",
            ),
            ordered(
                "retries_keep_order",
                "PAR -k --retries 2 \
                 'echo {}; test -e seen.{} || { touch seen.{}; exit 1; }' ::: a b",
            ),
        ],
        differences,
    );
}

#[test]
fn job_slots_and_timing() {
    check(
        "job_slots_and_timing",
        &[
            ordered("slots_one_per_cpu", "PAR -k -j0 echo ::: 1 2 3"),
            ordered("slots_percent", "PAR -k -j 50% echo ::: 1 2 3"),
            ordered("slots_plus_zero", "PAR -k -j +0 echo ::: 1 2 3"),
            ordered("slots_two", "PAR -k -j2 'sleep 0.1; echo {}' ::: 1 2 3 4"),
            ordered("delay", "PAR -k --delay 0.01 echo ::: 1 2 3"),
        ],
        differences,
    );
}

/// Input hearth must refuse with an error as parallel does, or handle as
/// parallel does: the exit status must agree, and so must the number of
/// stdout lines unless parallel refuses the line (exit status 255, where it
/// may print its usage); where parallel writes an error, or refuses the line,
/// hearth must write one too. Some cases may instead be refused.
fn same_verdict(case: &Case, reference: &Outcome, hearth: &Outcome) -> Vec<String> {
    let mut diffs = Vec::new();
    if case.refusal_ok && hearth.status == "exit 255" && !hearth.stderr.is_empty() {
        return diffs;
    }
    if reference.status != hearth.status {
        diffs.push("exit status differs".to_owned());
    }
    let refused = reference.status == "exit 255";
    let lines = |out: &Outcome| out.stdout.split_inclusive(|&b| b == b'\n').count();
    if !refused && lines(reference) != lines(hearth) {
        diffs.push(format!(
            "stdout lines differ: parallel {}, hearth {}",
            lines(reference),
            lines(hearth)
        ));
    }
    if (refused || !reference.stderr.is_empty()) && hearth.stderr.is_empty() {
        diffs.push("hearth writes nothing to stderr".to_owned());
    }
    diffs
}

#[test]
fn bad_input() {
    let cases = [
        ordered("unknown_long_option", "PAR --no-such-option echo ::: a"),
        ordered("unknown_short_option", "PAR -y echo ::: a"),
        ordered("missing_arg_file", "PAR echo :::: no-such-file"),
        ordered("bad_job_count", "PAR -j abc echo ::: a"),
        ordered("bad_halt", "PAR --halt bogus echo ::: a"),
        ordered("bad_timeout", "PAR --timeout abc echo ::: a"),
        ordered("empty_source", "PAR echo :::"),
        // perl's own error and exit status 25.
        ordered("bad_colsep_regex", "PAR --colsep '(' echo ::: a").or_refused(),
        // parallel reads a directory as an empty file.
        ordered("directory_as_arg_file", "PAR echo :::: sub").or_refused(),
        ordered("n_zero", "PAR -N 0 echo x ::: a b"),
        // parallel passes a NUL as the two characters \0, with a warning,
        // and /bin/sh's echo prints that as a NUL byte.
        ordered(
            "nul_in_stdin_argument",
            "printf 'a\\0b\\nc\\n' | PAR -k echo",
        )
        .or_refused(),
        ordered("command_not_found", "PAR nosuchcmd ::: a"),
        ordered("perl_expression", "PAR -k echo '{= s/a/b/ =}' ::: a").or_refused(),
        ordered(
            "hundred_thousand_args",
            "PAR -k -N 10000 echo ::: $(seq 100000)",
        ),
        // A block larger than memory: both cap it at 2 GiB and say so; the
        // input is small, so nothing is held.
        ordered(
            "block_larger_than_memory",
            "seq 3 | PAR --pipe --block 100G cat",
        ),
        ordered("unbalanced_brace", "PAR -k echo '{' '{1' '{}}' ::: a"),
    ];
    check("bad_input", &cases, same_verdict);
}

#[test]
fn harness_replaces_the_word_par_only() {
    assert_eq!(
        with_runner("PARALLEL=-k PAR 'echo $PARALLEL_SEQ'|PAR", "parallel"),
        "PARALLEL=-k parallel 'echo $PARALLEL_SEQ'|parallel"
    );
}

#[test]
fn harness_masks_joblog_times() {
    let log = "Seq\tHost\tStarttime\tJobRuntime\tSend\tReceive\tExitval\tSignal\tCommand\n\
               1\t:\t1796153969.135\t     0.000\t0\t0\t0\t0\texit 0\n";
    assert_eq!(
        String::from_utf8(mask_joblog(log.as_bytes())).unwrap(),
        "Seq\tHost\tStarttime\tJobRuntime\tSend\tReceive\tExitval\tSignal\tCommand\n\
         1\t:\t*\t*\t0\t0\t0\t0\texit 0\n"
    );
}
