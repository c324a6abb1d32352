//! `hearth run` against real processes: shell tasks through /bin/sh and
//! PHP jobs in real PHP workers.
// The helpers below are test code too: a failure is a test failure.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read as _, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use base64::Engine as _;
use serde_json::{json, Value};

const HEARTH: &str = env!("CARGO_BIN_EXE_hearth");

struct Ran {
    code: Option<i32>,
    results: Vec<Value>,
    stderr: String,
}

impl Ran {
    fn by_id(&self) -> HashMap<String, Value> {
        self.results
            .iter()
            .map(|r| (r["id"].to_string().trim_matches('"').to_owned(), r.clone()))
            .collect()
    }
}

/// Runs `hearth run ARGS` with `input` on stdin, to the end.
fn run(args: &[&str], input: &str) -> Ran {
    run_in(None, args, input)
}

fn run_in(dir: Option<&Path>, args: &[&str], input: &str) -> Ran {
    let mut cmd = Command::new(HEARTH);
    cmd.arg("run").args(args);
    if let Some(dir) = dir {
        cmd.current_dir(dir);
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_owned();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(input.as_bytes());
    });
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    Ran {
        code: out.status.code(),
        results: results(out.stdout),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The result lines `hearth run` wrote.
fn results(stdout: Vec<u8>) -> Vec<Value> {
    String::from_utf8(stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad result line {l:?}: {e}")))
        .collect()
}

/// `hearth run ARGS` in the background, for a test that acts while it
/// runs: task lines go in when the test sends them, and stderr is read as
/// it comes, so that the test can wait for what `hearth run` says.
struct Background {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    stderr: std::sync::mpsc::Receiver<String>,
    /// What `hearth run` has said on stderr so far.
    said: String,
    stdout: std::thread::JoinHandle<Vec<u8>>,
}

impl Background {
    fn start(args: &[&str]) -> Background {
        let mut child = Command::new(HEARTH)
            .arg("run")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let mut out = child.stdout.take().unwrap();
        let stdout = std::thread::spawn(move || {
            let mut bytes = Vec::new();
            out.read_to_end(&mut bytes).unwrap();
            bytes
        });
        let err = BufReader::new(child.stderr.take().unwrap());
        let (tx, stderr) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in err.lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Background {
            child,
            stdin,
            stderr,
            said: String::new(),
            stdout,
        }
    }

    fn send(&mut self, task: &Value) {
        let stdin = self.stdin.as_mut().expect("the input is still open");
        writeln!(stdin, "{task}").unwrap();
        stdin.flush().unwrap();
    }

    fn close_input(&mut self) {
        self.stdin = None;
    }

    fn signal(&self, signal: rustix::process::Signal) {
        rustix::process::kill_process(rustix::process::Pid::from_child(&self.child), signal)
            .unwrap();
    }

    /// Waits until `hearth run` has said `text` on stderr.
    fn wait_for_stderr(&mut self, text: &str) {
        while !self.said.contains(text) {
            let Ok(line) = self.stderr.recv() else {
                panic!("hearth run ended without saying {text:?}:\n{}", self.said);
            };
            self.said.push_str(&line);
            self.said.push('\n');
        }
    }

    /// Closes the input and waits for `hearth run` to end.
    fn finish(mut self) -> Ran {
        self.stdin = None;
        let status = self.child.wait().unwrap();
        let stdout = self.stdout.join().unwrap();
        for line in self.stderr.iter() {
            self.said.push_str(&line);
            self.said.push('\n');
        }
        Ran {
            code: status.code(),
            results: results(stdout),
            stderr: self.said,
        }
    }
}

/// Whether process `pid` is still running (not gone, not a zombie).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            // The state follows the command name, which is in parentheses.
            let after = &stat[stat.rfind(')')? + 1..];
            after.split_whitespace().next().map(|state| state != "Z")
        })
        .unwrap_or(false)
}

fn lines(tasks: &[Value]) -> String {
    tasks.iter().map(|t| format!("{t}\n")).collect()
}

fn output(result: &Value, stream: &str) -> Vec<u8> {
    let text = result[stream].as_str().unwrap();
    if result[format!("{stream}_encoding")] == "base64" {
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .unwrap()
    } else {
        text.as_bytes().to_vec()
    }
}

#[test]
fn outputs_of_every_size_come_back_whole() {
    let ran = run(
        &["-j", "4"],
        &lines(&[
            json!({"id": "empty", "cmd": "true"}),
            json!({"id": "pipe+1", "cmd": "head -c 65537 /dev/zero | tr '\\0' a; head -c 65537 /dev/zero | tr '\\0' e >&2"}),
            json!({"id": "10MiB", "cmd": "yes 0123456789abcde | head -c 10485760"}),
            json!({"id": "binary", "cmd": "printf '\\377\\376\\000abc'"}),
            json!({"id": "utf8", "cmd": "printf 'h\\303\\251llo \\342\\202\\254'"}),
        ]),
    );
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    let r = ran.by_id();
    assert_eq!(r.len(), 5);
    assert_eq!(r["empty"]["stdout"], "");
    assert_eq!(r["empty"]["stderr"], "");
    assert_eq!(output(&r["pipe+1"], "stdout"), vec![b'a'; 65537]);
    assert_eq!(output(&r["pipe+1"], "stderr"), vec![b'e'; 65537]);
    let big = output(&r["10MiB"], "stdout");
    assert_eq!(big.len(), 10 * 1024 * 1024);
    let expected: Vec<u8> = b"0123456789abcde\n"
        .iter()
        .copied()
        .cycle()
        .take(10 * 1024 * 1024)
        .collect();
    assert!(big == expected, "the 10 MiB output changed on the way");
    assert_eq!(r["binary"]["stdout_encoding"], "base64");
    assert_eq!(output(&r["binary"], "stdout"), b"\xff\xfe\x00abc");
    assert_eq!(r["utf8"]["stdout"], "héllo €");
    assert!(r["utf8"].get("stdout_encoding").is_none());
    for result in r.values() {
        assert_eq!(result["status"], 0);
        assert_eq!(result["signal"], Value::Null);
        assert_eq!(result["attempts"], 1);
        assert!(result["duration_ms"].as_f64().unwrap() >= 0.0);
    }
}

#[test]
fn max_output_keeps_the_start_and_says_it_truncated() {
    let ran = run(
        &["--max-output", "1K"],
        &lines(&[json!({"id": 1, "cmd": "head -c 100000 /dev/zero | tr '\\0' x; echo small >&2"})]),
    );
    let r = &ran.results[0];
    assert_eq!(r["stdout"].as_str().unwrap(), "x".repeat(1024));
    assert_eq!(r["stdout_truncated"], true);
    assert_eq!(r["stdout_bytes"], 100_000);
    assert_eq!(r["stderr"], "small\n");
    assert!(r.get("stderr_truncated").is_none());
    assert_eq!(r["status"], 0);
}

#[test]
fn tasks_get_their_argv_env_cwd_and_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let ran = run(
        &[],
        &lines(&[
            json!({"id": "argv", "argv": ["printf", "%s|", "a b", "$HOME", "it's"]}),
            json!({"id": "env", "cmd": "echo \"$GREETING $USER_SET\"", "env": {"GREETING": "hi", "USER_SET": "there"}}),
            json!({"id": "cwd", "cmd": "pwd", "cwd": dir.path()}),
            json!({"id": "stdin", "cmd": "tr a-z A-Z", "stdin": "shout\n"}),
            json!({"id": "no-stdin", "cmd": "cat"}),
            json!({"id": "missing", "argv": ["/nonexistent/program"]}),
            json!({"id": "bad-cwd", "cmd": "true", "cwd": "/nonexistent/dir"}),
        ]),
    );
    let r = ran.by_id();
    assert_eq!(r["argv"]["stdout"], "a b|$HOME|it's|");
    assert_eq!(r["env"]["stdout"], "hi there\n");
    assert_eq!(
        r["cwd"]["stdout"].as_str().unwrap().trim(),
        dir.path().canonicalize().unwrap().to_str().unwrap()
    );
    assert_eq!(r["stdin"]["stdout"], "SHOUT\n");
    assert_eq!(r["no-stdin"]["stdout"], "");
    assert_eq!(r["no-stdin"]["status"], 0);
    for id in ["missing", "bad-cwd"] {
        assert_eq!(r[id]["status"], Value::Null, "{id}");
        assert!(
            r[id]["error"].as_str().unwrap().contains("cannot start"),
            "{id}: {}",
            r[id]
        );
    }
    assert_eq!(ran.code, Some(2), "two tasks failed");
}

#[test]
fn a_timeout_sends_term_then_kill_to_the_whole_group() {
    let dir = tempfile::tempdir().unwrap();
    let grandchild = dir.path().join("grandchild.pid");
    let ran = run(
        &["--timeout", "0.3", "--kill-after", "0.3", "-j", "5"],
        &lines(&[
            json!({"id": "polite", "cmd": "sleep 30"}),
            json!({"id": "stubborn", "cmd": "trap '' TERM; sleep 30; echo too late"}),
            json!({"id": "own-limit", "cmd": "sleep 0.5; echo done", "timeout": 5}),
            // A grandchild in the task's group goes with it. (It leaves the
            // task's output alone, so as not to hold the task up.)
            json!({"id": "family", "cmd": format!(
                "sh -c 'echo $$ > {p}; exec sleep 30' >/dev/null 2>&1 & while [ ! -s {p} ]; do sleep 0.01; done; sleep 30",
                p = grandchild.display()
            )}),
            // Exiting 0 from its SIGTERM handler does not make it a success.
            json!({"id": "exits-zero", "cmd": "trap 'exit 0' TERM; sleep 30 & wait"}),
        ]),
    );
    let r = ran.by_id();
    assert_eq!(r["polite"]["timed_out"], true);
    assert_eq!(r["polite"]["signal"], "SIGTERM");
    assert_eq!(r["polite"]["status"], Value::Null);
    assert_eq!(r["stubborn"]["timed_out"], true);
    assert_eq!(r["stubborn"]["signal"], "SIGKILL");
    assert_eq!(r["stubborn"]["stdout"], "");
    assert_eq!(r["own-limit"]["stdout"], "done\n");
    assert!(r["own-limit"].get("timed_out").is_none());
    assert_eq!(r["family"]["timed_out"], true);
    assert_eq!(r["exits-zero"]["timed_out"], true);
    assert_eq!(r["exits-zero"]["status"], 0);
    let pid: u32 = std::fs::read_to_string(&grandchild)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // Signalled with the task, it is gone or going: never still sleeping.
    eventually(|| !running(pid));
    assert_eq!(ran.code, Some(4), "every timed-out task failed");
}

/// Issue 8: `"timeout": "500ms"` in a task line was refused ("expected
/// f64") while `--timeout 500ms` worked. Task lines and flags take the same
/// durations, and `--help` names every duration flag's value `<DURATION>`.
#[test]
fn task_timeouts_take_the_durations_the_flags_take() {
    let ran = run(
        &["--kill-after", "100ms", "-j", "3"],
        &lines(&[
            json!({"id": "string", "cmd": "sleep 30", "timeout": "300ms"}),
            json!({"id": "unit", "cmd": "echo in time", "timeout": "1m"}),
            json!({"id": "number", "cmd": "echo in time", "timeout": 60}),
        ]),
    );
    let r = ran.by_id();
    assert_eq!(r.len(), 3, "{}", ran.stderr);
    assert_eq!(r["string"]["timed_out"], true);
    for id in ["unit", "number"] {
        assert_eq!(r[id]["stdout"], "in time\n", "{id}");
        assert!(r[id].get("timed_out").is_none(), "{id}");
    }
    assert_eq!(ran.code, Some(1), "{}", ran.stderr);

    let ran = run(&[], &lines(&[json!({"cmd": "true", "timeout": "soon"})]));
    assert!(ran.stderr.contains("line 1: \"timeout\""), "{}", ran.stderr);

    let help = Command::new(HEARTH)
        .args(["run", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    for flag in ["--timeout", "--kill-after", "--boot-timeout"] {
        assert!(
            help.contains(&format!("{flag} <DURATION>")),
            "{flag} in:\n{help}"
        );
    }
}

/// Issue 8: `hearth run --config hearth.toml` reads `[run]`: a flag wins
/// over the file, the file over the default; a key that `[run]` does not
/// have is refused, naming the file, the section and the key.
#[test]
fn run_reads_its_options_from_the_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("hearth.toml");
    std::fs::write(
        &config,
        "[serve]\nworkers = 2\n\n[run]\ntimeout = \"300ms\"\nkill_after = \"100ms\"\nretries = 2\n",
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let tasks = lines(&[
        json!({"id": "slow", "cmd": "sleep 30"}),
        json!({"id": "fails", "cmd": "exit 3"}),
    ]);
    let ran = run(&["--config", config], &tasks);
    let r = ran.by_id();
    assert_eq!(r["slow"]["timed_out"], true, "{}", ran.stderr);
    assert_eq!(
        r["slow"]["attempts"], 2,
        "retries = 2: two attempts in all, as GNU parallel"
    );
    assert_eq!(r["fails"]["attempts"], 2);
    assert_eq!(ran.code, Some(2));

    let ran = run(&["-c", config, "--retries", "1"], &tasks);
    let r = ran.by_id();
    assert_eq!(r["fails"]["attempts"], 1, "the flag wins: {}", ran.stderr);
    assert_eq!(r["slow"]["timed_out"], true);

    std::fs::write(
        dir.path().join("hearth.toml"),
        "[run]\njobs = 2\nworkers = 2\n",
    )
    .unwrap();
    let ran = run(&["--config", config], &tasks);
    assert_eq!(ran.code, Some(255));
    assert!(ran.results.is_empty());
    assert!(
        ran.stderr
            .contains(&format!("hearth run: {config}: [run] workers: unknown key")),
        "{}",
        ran.stderr
    );
}

#[test]
fn a_task_killed_by_a_signal_is_reported_as_such() {
    let ran = run(
        &[],
        &lines(&[json!({"id": 1, "cmd": "echo partial; kill -SEGV $$"})]),
    );
    let r = &ran.results[0];
    assert_eq!(r["status"], Value::Null);
    assert_eq!(r["signal"], "SIGSEGV");
    assert_eq!(r["stdout"], "partial\n");
    assert!(r.get("timed_out").is_none());
    assert_eq!(ran.code, Some(1));
}

#[test]
fn retries_run_a_failed_task_again() {
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("n");
    let flaky = format!(
        "n=$(cat {c} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {c}; echo attempt $n; [ $n -ge 3 ]",
        c = counter.display()
    );
    // Three attempts in all, as GNU parallel's --retries 3.
    let ran = run(
        &["--retries", "3"],
        &lines(&[
            json!({"id": "flaky", "cmd": flaky}),
            json!({"id": "broken", "cmd": "echo no; exit 4"}),
            json!({"id": "fine", "cmd": "echo yes"}),
        ]),
    );
    let r = ran.by_id();
    assert_eq!(r["flaky"]["status"], 0);
    assert_eq!(r["flaky"]["attempts"], 3);
    assert_eq!(r["flaky"]["stdout"], "attempt 3\n");
    assert_eq!(r["broken"]["status"], 4);
    assert_eq!(r["broken"]["attempts"], 3);
    assert_eq!(r["fine"]["attempts"], 1);
    assert_eq!(
        ran.results.len(),
        3,
        "one result per task, whatever the attempts"
    );
    assert_eq!(ran.code, Some(1));
}

#[test]
fn halt_now_stops_everything_at_the_first_failure() {
    let dir = tempfile::tempdir().unwrap();
    let ran_file = dir.path().join("ran");
    let started = dir.path().join("started");
    let mut tasks = vec![
        json!({"id": "slow", "cmd": format!("touch {}; sleep 30; echo finished", started.display())}),
        // Fails once the other task runs, which halting must then stop.
        json!({"id": "fails", "cmd": format!("while [ ! -e {} ]; do sleep 0.01; done; exit 1", started.display())}),
    ];
    for i in 0..20 {
        tasks.push(json!({"id": i, "cmd": format!("echo {i} >> {}", ran_file.display())}));
    }
    let ran = run(&["-j", "2", "--halt", "now"], &lines(&tasks));
    let r = ran.by_id();
    assert_eq!(
        r.len(),
        1,
        "only the failure is a result: {:?}",
        ran.results
    );
    assert_eq!(r["fails"]["status"], 1);
    assert!(!ran_file.exists(), "no task started after the failure");
    assert!(
        ran.stderr
            .contains("halting after 1 failed task(s); stopping 1 running"),
        "{}",
        ran.stderr
    );
    assert_eq!(ran.code, Some(1));
}

#[test]
fn halt_soon_lets_running_tasks_finish() {
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    let mut hearth = Background::start(&["-j", "2", "--halt", "soon"]);
    // Runs until the test lets it finish, after the halt.
    hearth.send(&json!({"id": "slow", "cmd": format!("while [ ! -e {} ]; do sleep 0.01; done; echo finished", go.display())}));
    hearth.send(&json!({"id": "fails", "cmd": "exit 1"}));
    hearth.send(&json!({"id": "never", "cmd": "echo never"}));
    hearth.close_input();
    hearth.wait_for_stderr("halting after 1 failed task(s); waiting for 1 running");
    std::fs::write(&go, "").unwrap();
    let ran = hearth.finish();
    let r = ran.by_id();
    assert_eq!(r["slow"]["stdout"], "finished\n");
    assert_eq!(r["fails"]["status"], 1);
    assert!(!r.contains_key("never"));
    assert_eq!(ran.code, Some(1));
}

#[test]
fn keep_order_writes_results_in_input_order() {
    // Each task waits for the next one to finish: they finish in reverse.
    let dir = tempfile::tempdir().unwrap();
    let done = |i: i32| dir.path().join(format!("done-{i}"));
    let tasks: Vec<Value> = (0..8)
        .map(|i| {
            let wait = if i < 7 {
                format!(
                    "while [ ! -e {} ]; do sleep 0.01; done; ",
                    done(i + 1).display()
                )
            } else {
                String::new()
            };
            json!({"id": i, "cmd": format!("{wait}echo {i}; touch {}", done(i).display())})
        })
        .collect();
    let ran = run(&["-j", "8", "--keep-order"], &lines(&tasks));
    let ids: Vec<i64> = ran
        .results
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, (0..8).collect::<Vec<_>>());
    let seqs: Vec<i64> = ran
        .results
        .iter()
        .map(|r| r["seq"].as_i64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=8).collect::<Vec<_>>());
}

#[test]
fn unusable_input_names_the_line_and_runs_nothing_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let after = dir.path().join("after");
    let input = format!(
        "{}\n\n{}\n{{\"cmd\": \"echo broken\"\n{}\n",
        json!({"id": 1, "cmd": "echo one"}),
        json!({"id": 2, "cmd": "echo two"}),
        json!({"id": 4, "cmd": format!("touch {}", after.display())}),
    );
    let ran = run(&[], &input);
    assert_eq!(ran.code, Some(255));
    assert!(ran.stderr.contains("line 4:"), "{}", ran.stderr);
    assert_eq!(
        ran.results.len(),
        2,
        "tasks before the bad line finish and are reported"
    );
    assert!(!after.exists());

    for (bad, says) in [
        ("[1]\n", "line 1: expected a JSON object"),
        (
            "{\"cmd\": \"x\", \"tiemout\": 3}\n",
            "line 1: invalid task: unknown field `tiemout`",
        ),
        ("{\"id\": 1}\n", "line 1: a task needs \"cmd\""),
        ("\u{0}\n", "line 1: expected a JSON object"),
    ] {
        let ran = run(&[], bad);
        assert_eq!(ran.code, Some(255), "{bad}");
        assert!(ran.stderr.contains(says), "{bad}: {}", ran.stderr);
    }
    let ran = run(&["/nonexistent/tasks.jsonl"], "");
    assert_eq!(ran.code, Some(255));
    assert!(
        ran.stderr
            .contains("cannot read tasks from /nonexistent/tasks.jsonl"),
        "{}",
        ran.stderr
    );
}

/// Issue 8: exit status 2 meant both "unusable input" and "2 tasks
/// failed". As GNU parallel: 0 when all succeeded, 1-100 that many failed,
/// 101 more than 100 failed, and 255 for every other error (a refused
/// command line, unusable input, a file that cannot be read).
#[test]
fn exit_statuses_are_gnu_parallels() {
    let failing = |n: usize| {
        lines(
            &(0..n)
                .map(|i| json!({"id": i, "argv": ["false"]}))
                .collect::<Vec<_>>(),
        )
    };
    for (failed, code) in [(0, 0), (2, 2), (100, 100), (101, 101), (150, 101)] {
        let ran = run(&["-j", "8"], &failing(failed));
        assert_eq!(ran.results.len(), failed);
        assert_eq!(ran.code, Some(code), "{failed} failed: {}", ran.stderr);
    }
    // Unusable input after two failed tasks: an error, not "2 failed".
    let ran = run(&[], &(failing(2) + "{\"cmd\": \n"));
    assert_eq!(ran.results.len(), 2);
    assert_eq!(ran.code, Some(255), "{}", ran.stderr);
    for args in [
        &["--bogus"][..],
        &["--halt", "later"],
        &["--timeout", "soon"],
        &["--jobs", "some"],
        &["--resume"],
        &["/nonexistent/tasks.jsonl"],
    ] {
        let ran = run(args, "");
        assert_eq!(ran.code, Some(255), "{args:?}: {}", ran.stderr);
        assert!(!ran.stderr.is_empty(), "{args:?} says why");
    }
    let help = Command::new(HEARTH)
        .args(["run", "--help"])
        .output()
        .unwrap();
    assert_eq!(help.status.code(), Some(0));
    let help = String::from_utf8(help.stdout).unwrap();
    let table = &help[help.find("Exit status").expect("an exit status table")..];
    for row in ["0 ", "1-100", "101", "255", "128"] {
        assert!(table.contains(row), "{row} in:\n{table}");
    }
}

#[test]
fn lines_mode_runs_a_command_per_line() {
    // A blank line is a task with an empty argument, as in GNU parallel;
    // -q keeps `<` and `>` from being redirections.
    let ran = run(
        &["--json", "--keep-order", "-q", "--", "printf", "<%s>"],
        "a b\nc'd\n\n",
    );
    let out: Vec<&str> = ran
        .results
        .iter()
        .map(|r| r["stdout"].as_str().unwrap())
        .collect();
    assert_eq!(out, vec!["<a b>", "<c'd>", "<>"]);
    let ran = run(
        &["--json", "--lines", "--keep-order"],
        "echo 1\necho 2 | tr 2 3\n",
    );
    let out: Vec<&str> = ran
        .results
        .iter()
        .map(|r| r["stdout"].as_str().unwrap())
        .collect();
    assert_eq!(out, vec!["1\n", "3\n"]);
}

#[test]
fn joblog_and_resume_after_the_runner_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("joblog");
    let ran_file = dir.path().join("ran");
    // The first 40 tasks run; the others wait for `go`, which the test
    // creates once it has killed the runner.
    let go = dir.path().join("go");
    let tasks: Vec<Value> = (1..=150)
        .map(|i| {
            let wait = if i > 40 {
                format!("while [ ! -e {} ]; do sleep 0.01; done; ", go.display())
            } else {
                String::new()
            };
            json!({"id": i, "cmd": format!("{wait}echo {i} >> {}", ran_file.display())})
        })
        .collect();
    let input = dir.path().join("tasks.jsonl");
    std::fs::write(&input, lines(&tasks)).unwrap();
    let args = [
        "run",
        "-j",
        "4",
        "--joblog",
        log.to_str().unwrap(),
        input.to_str().unwrap(),
    ];

    let mut first = Command::new(HEARTH)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    eventually(|| joblog_seqs(&log).len() >= 40);
    first.kill().unwrap();
    first.wait().unwrap();
    let logged = joblog_seqs(&log);
    assert_eq!(logged.len(), 40, "the runner was killed before the end");
    // The tasks it left running finish now, unlogged: the resumed run
    // runs them again.
    std::fs::write(&go, "").unwrap();

    let resumed = run_in(
        None,
        // Options go before the FILE, as in GNU parallel.
        &["--resume"]
            .into_iter()
            .chain(args[1..].iter().copied())
            .collect::<Vec<_>>(),
        "",
    );
    assert_eq!(resumed.code, Some(0), "{}", resumed.stderr);
    let skipped = resumed
        .results
        .iter()
        .filter(|r| r["skipped"] == true)
        .count();
    assert_eq!(skipped, logged.len(), "each logged task is skipped");
    assert_eq!(resumed.results.len(), 150, "every task has a result line");

    let mut runs: HashMap<u64, usize> = HashMap::new();
    for line in std::fs::read_to_string(&ran_file).unwrap().lines() {
        *runs.entry(line.parse().unwrap()).or_default() += 1;
    }
    for i in 1..=150u64 {
        assert!(runs.contains_key(&i), "task {i} was lost");
    }
    for seq in &logged {
        assert_eq!(runs[seq], 1, "task {seq} had finished and ran again");
    }
    let all = joblog_seqs(&log);
    assert_eq!(all.len(), 150);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.starts_with(
        "Seq\tHost\tStarttime\tJobRuntime\tSend\tReceive\tExitval\tSignal\tCommand\n"
    ));
    assert_eq!(text.matches("Seq\t").count(), 1);
}

/// Issue 8: a `--resume` run exited with the failures of that run alone,
/// so a batch with failures looked like a success once resumed. Its exit
/// status counts the failures the job log lists for the tasks it skips too.
#[test]
fn a_resumed_run_exits_with_the_failures_of_the_whole_batch() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("joblog");
    let log = log.to_str().unwrap();
    let batch = |fixed: bool| {
        let mut tasks = vec![
            json!({"id": "fails", "cmd": if fixed { "true" } else { "exit 3" }}),
            json!({"id": "killed", "cmd": if fixed { "true" } else { "kill -9 $$" }}),
            json!({"id": "fine", "cmd": "true"}),
        ];
        tasks.push(json!({"id": "new", "cmd": if fixed { "true" } else { "exit 1" }}));
        lines(&tasks)
    };
    let first = run(
        &["--joblog", log],
        &lines(&[
            json!({"id": "fails", "cmd": "exit 3"}),
            json!({"id": "killed", "cmd": "kill -9 $$"}),
            json!({"id": "fine", "cmd": "true"}),
        ]),
    );
    assert_eq!(first.code, Some(2), "{}", first.stderr);

    // Two failures in the log, one more now.
    let resumed = run(&["--joblog", log, "--resume"], &batch(false));
    assert_eq!(
        resumed
            .results
            .iter()
            .filter(|r| r["skipped"] == true)
            .count(),
        3
    );
    assert_eq!(resumed.code, Some(3), "{}", resumed.stderr);
    // Nothing left to run: the batch still failed.
    let again = run(&["--joblog", log, "--resume"], &batch(false));
    assert_eq!(
        again
            .results
            .iter()
            .filter(|r| r["skipped"] == true)
            .count(),
        4
    );
    assert_eq!(again.code, Some(3), "{}", again.stderr);
    // --resume-failed runs the failures again: fixed, the batch succeeds.
    let retried = run(&["--joblog", log, "--resume-failed"], &batch(true));
    assert_eq!(
        retried
            .results
            .iter()
            .filter(|r| r["skipped"] == true)
            .count(),
        1
    );
    assert_eq!(retried.code, Some(0), "{}", retried.stderr);
    let done = run(&["--joblog", log, "--resume"], &batch(false));
    assert_eq!(done.code, Some(0), "{}", done.stderr);
}

/// Issue 8: `--joblog FILE` without `--resume` truncated the log of an
/// earlier run, losing what `--resume` needs to finish that batch. It
/// refuses, names the file and says what to do; an empty log, or one with
/// only its header line, is used as it is.
#[test]
fn joblog_refuses_to_overwrite_an_earlier_runs_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("joblog");
    let marker = dir.path().join("ran");
    let touch = lines(&[json!({"cmd": format!("touch {}", marker.display())})]);
    let first = run(&["--joblog", log.to_str().unwrap()], &touch);
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    std::fs::remove_file(&marker).unwrap();

    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "not a job log, and precious\n").unwrap();
    for path in [&log, &notes] {
        let before = std::fs::read(path).unwrap();
        let again = run(&["--joblog", path.to_str().unwrap()], &touch);
        assert_eq!(again.code, Some(255), "{}", again.stderr);
        for says in [path.to_str().unwrap(), "--resume", "remove"] {
            assert!(again.stderr.contains(says), "{says}: {}", again.stderr);
        }
        assert_eq!(
            std::fs::read(path).unwrap(),
            before,
            "the file is left as it was"
        );
        assert!(again.results.is_empty());
        assert!(!marker.exists(), "nothing ran");
    }

    let header = "Seq\tHost\tStarttime\tJobRuntime\tSend\tReceive\tExitval\tSignal\tCommand\n";
    for (name, content) in [("empty", ""), ("header", header)] {
        let path = dir.path().join(name);
        std::fs::write(&path, content).unwrap();
        let ran = run(&["--joblog", path.to_str().unwrap()], &touch);
        assert_eq!(ran.code, Some(0), "{name}: {}", ran.stderr);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with(header), "{name}: {text}");
        assert_eq!(text.matches("Seq\t").count(), 1, "{name}: {text}");
        assert_eq!(joblog_seqs(&path), vec![1], "{name}");
    }
}

fn joblog_seqs(path: &Path) -> Vec<u64> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    text.split_inclusive('\n')
        .filter(|l| l.ends_with('\n') && !l.starts_with("Seq"))
        .map(|l| l.split('\t').next().unwrap().parse().unwrap())
        .collect()
}

fn eventually(mut check: impl FnMut() -> bool) {
    for _ in 0..2000 {
        if check() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("condition never became true");
}

#[test]
fn sigterm_lets_running_tasks_finish_and_starts_no_more() {
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    let started = |i: usize| dir.path().join(format!("started-{i}"));
    let mut hearth = Background::start(&["-j", "2"]);
    for i in 0..2 {
        hearth.send(&json!({"id": i, "cmd": format!(
            "touch {}; while [ ! -e {} ]; do sleep 0.01; done; echo finished",
            started(i).display(),
            go.display()
        )}));
    }
    eventually(|| started(0).exists() && started(1).exists());
    hearth.signal(rustix::process::Signal::TERM);
    hearth.wait_for_stderr("SIGTERM: starting no more tasks; waiting for 2 running");
    hearth.send(&json!({"id": "late", "cmd": "echo late"}));
    hearth.close_input();
    std::fs::write(&go, "").unwrap();
    let ran = hearth.finish();
    assert_eq!(ran.results.len(), 2, "{:?}", ran.results);
    assert!(ran.results.iter().all(|r| r["stdout"] == "finished\n"));
    assert_eq!(ran.code, Some(143));
}

#[test]
fn a_hundred_thousand_tasks_in_flat_memory() {
    const TASKS: usize = 100_000;
    let mut child = Command::new(HEARTH)
        .args(["run", "-j", "4"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        let mut w = std::io::BufWriter::new(&mut stdin);
        for i in 0..TASKS {
            writeln!(w, "{{\"id\":{i},\"argv\":[\"true\"]}}").unwrap();
        }
    });
    let reader = BufReader::new(child.stdout.take().unwrap());
    let mut seen = 0usize;
    let mut rss_early = 0;
    let mut rss_peak_late = 0;
    let mut next_sample = TASKS / 2;
    for line in reader.lines() {
        let line = line.unwrap();
        assert!(line.contains("\"status\":0"), "{line}");
        seen += 1;
        if seen == TASKS / 10 {
            rss_early = rss_kib(pid);
        }
        if seen == next_sample {
            rss_peak_late = rss_peak_late.max(rss_kib(pid));
            next_sample += 5000;
        }
    }
    feeder.join().unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(seen, TASKS);
    assert!(rss_early > 0 && rss_peak_late > 0);
    // Flat: the second half of the run holds no more than the first tenth
    // did, give or take allocator noise.
    assert!(
        rss_peak_late <= rss_early + 2048,
        "memory grew from {rss_early} KiB at 10% to {rss_peak_late} KiB"
    );
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

const BOOTSTRAP: &str = r#"<?php
namespace App\Jobs;

$GLOBALS['boot_id'] = bin2hex(random_bytes(8));

final class Greeter
{
    public static function greet(string $name, string $greeting = 'Hello'): string
    {
        echo "greeting {$name}\n";
        return "{$greeting}, {$name}!";
    }
}

function add(int $a, int $b): int { return $a + $b; }
function pid(): int { return getmypid(); }
function boot_id(): string { return $GLOBALS['boot_id']; }
function fail(string $why): void { throw new \DomainException($why, 42); }
function leave(): void { echo "bye"; exit(3); }
function crash(): void { posix_kill(getmypid(), SIGSEGV); }
function killed(): void { posix_kill(getmypid(), SIGKILL); }
function nap(float $s): string { usleep((int) ($s * 1e6)); return 'awake'; }
function nothing(): void {}
function cwd(): string { return getcwd(); }
function flood(int $n): int { echo str_repeat('x', $n); return $n; }
function huge(int $n): string { return str_repeat('y', $n); }
function resource() { return fopen('php://memory', 'r'); }
function job_ids(): array { return [$_SERVER['HEARTH_JOB_ID'] ?? null, $_SERVER['HEARTH_JOB_ATTEMPT'] ?? null]; }
function polite(): string
{
    pcntl_async_signals(true);
    $stop = false;
    pcntl_signal(SIGTERM, function () use (&$stop) { $stop = true; });
    while (!$stop) { usleep(1000); }
    return 'cleaned up';
}
"#;

fn php_jobs(jobs: &[Value], extra: &[&str]) -> (Ran, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bootstrap.php"), BOOTSTRAP).unwrap();
    let mut args = vec!["--php-bootstrap", "bootstrap.php"];
    args.extend_from_slice(extra);
    let ran = run_in(Some(dir.path()), &args, &lines(jobs));
    (ran, dir)
}

/// Issue 12: with --php-bootstrap a batch may mix shell tasks and PHP
/// jobs; a PHP job under `hearth run` is no queue job, so it sees no
/// HEARTH_JOB_ID or HEARTH_JOB_ATTEMPT.
#[test]
fn php_bootstrap_runs_shell_tasks_too_and_no_job_ids() {
    let (ran, _dir) = php_jobs(
        &[
            json!({"id": "php", "call": "App\\Jobs\\job_ids"}),
            json!({"id": "sh", "cmd": "echo shell"}),
            json!({"id": "argv", "argv": ["echo", "argv"]}),
        ],
        &["-j", "2"],
    );
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    let r = ran.by_id();
    assert_eq!(r["php"]["result"], json!([null, null]));
    assert_eq!(r["sh"]["stdout"], "shell\n");
    assert!(r["sh"].get("worker").is_none());
    assert_eq!(r["argv"]["stdout"], "argv\n");
}

#[test]
fn php_jobs_return_values_output_and_errors() {
    let (ran, dir) = php_jobs(
        &[
            json!({"id": "add", "call": "App\\Jobs\\add", "args": [2, 3]}),
            json!({"id": "named", "call": "App\\Jobs\\Greeter::greet", "args": {"greeting": "Hi", "name": "Ann"}}),
            json!({"id": "void", "call": "App\\Jobs\\nothing"}),
            json!({"id": "throws", "call": "App\\Jobs\\fail", "args": ["no way"]}),
            json!({"id": "undefined", "call": "App\\Jobs\\missing"}),
            json!({"id": "type", "call": "App\\Jobs\\add", "args": ["x", 1]}),
            json!({"id": "unencodable", "call": "App\\Jobs\\resource"}),
            json!({"id": "cwd", "call": "App\\Jobs\\cwd"}),
        ],
        &["-j", "2"],
    );
    let r = ran.by_id();
    assert_eq!(r["add"]["status"], 0);
    assert_eq!(r["add"]["result"], 5);
    assert_eq!(r["named"]["result"], "Hi, Ann!");
    assert_eq!(r["named"]["stdout"], "greeting Ann\n");
    assert_eq!(r["void"]["status"], 0);
    assert_eq!(r["void"]["result"], Value::Null);
    let e = &r["throws"]["error"];
    assert_eq!(r["throws"]["status"], 1);
    assert_eq!(e["class"], "DomainException");
    assert_eq!(e["message"], "no way");
    assert_eq!(e["code"], 42);
    assert_eq!(
        e["file"].as_str().unwrap(),
        dir.path()
            .canonicalize()
            .unwrap()
            .join("bootstrap.php")
            .to_str()
            .unwrap()
    );
    assert_eq!(e["line"], 18);
    assert!(e["trace"].as_str().unwrap().starts_with("#0 "), "{e}");
    // The trace ends at the job's function: the runtime's frames below it
    // are the same for every job.
    assert!(
        e["trace"].as_str().unwrap().contains("App\\Jobs\\fail()"),
        "{e}"
    );
    assert!(!e["trace"].as_str().unwrap().contains("->handle"), "{e}");
    assert!(
        !e["trace"].as_str().unwrap().contains("job-worker.php"),
        "{e}"
    );
    assert!(r["undefined"]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("not callable"));
    assert_eq!(r["type"]["error"]["class"], "TypeError");
    assert!(r["unencodable"]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("JSON"));
    assert_eq!(
        r["cwd"]["result"].as_str().unwrap(),
        dir.path().canonicalize().unwrap().to_str().unwrap(),
        "jobs run in the directory hearth run was started in"
    );
    assert_eq!(ran.code, Some(4), "{}", ran.stderr);
}

#[test]
fn php_jobs_run_in_warm_workers_booted_once() {
    // Each boot draws a random id (not the boot time: two workers may boot
    // within one tick of a coarse clock), so a worker booted twice shows.
    let jobs: Vec<Value> = (0..200)
        .map(|i| json!({"id": i, "call": "App\\Jobs\\boot_id"}))
        .collect();
    let (ran, _dir) = php_jobs(&jobs, &["-j", "2"]);
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    let boots: std::collections::HashSet<String> = ran
        .results
        .iter()
        .map(|r| r["result"].to_string())
        .collect();
    let workers: std::collections::HashSet<String> = ran
        .results
        .iter()
        .map(|r| r["worker"].to_string())
        .collect();
    assert_eq!(ran.results.len(), 200);
    assert!(boots.len() <= 2, "each worker booted once: {boots:?}");
    assert_eq!(boots.len(), workers.len());
}

#[test]
fn a_php_job_that_ends_its_worker_fails_alone() {
    let mut jobs = vec![
        json!({"id": "exit", "call": "App\\Jobs\\leave"}),
        json!({"id": "segv", "call": "App\\Jobs\\crash"}),
        json!({"id": "kill", "call": "App\\Jobs\\killed"}),
    ];
    for i in 0..30 {
        jobs.push(json!({"id": i, "call": "App\\Jobs\\add", "args": [i, 1]}));
    }
    let (ran, _dir) = php_jobs(&jobs, &["-j", "2"]);
    let r = ran.by_id();
    assert_eq!(r["exit"]["status"], 1);
    assert_eq!(r["exit"]["error"]["class"], "exit");
    assert_eq!(r["exit"]["stdout"], "bye");
    assert_eq!(r["segv"]["status"], Value::Null);
    assert_eq!(r["segv"]["signal"], "SIGSEGV");
    assert!(r["segv"]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("died"));
    assert_eq!(r["kill"]["signal"], "SIGKILL");
    for i in 0..30 {
        assert_eq!(r[&i.to_string()]["result"], i + 1, "job {i}");
    }
    assert_eq!(ran.code, Some(3), "{}", ran.stderr);
    let workers: std::collections::HashSet<String> = ran
        .results
        .iter()
        .map(|r| r["worker"].to_string())
        .collect();
    assert!(
        workers.len() >= 3,
        "dead workers were replaced: {workers:?}"
    );
}

#[test]
fn php_job_results_larger_than_a_frame_are_cut_or_refused() {
    let (ran, _dir) = php_jobs(
        &[
            json!({"id": "prints", "call": "App\\Jobs\\flood", "args": [20_000_000]}),
            json!({"id": "returns", "call": "App\\Jobs\\huge", "args": [20_000_000]}),
            json!({"id": "fine", "call": "App\\Jobs\\add", "args": [1, 2]}),
        ],
        &["-j", "1", "--max-output", "10"],
    );
    let r = ran.by_id();
    assert_eq!(r["prints"]["status"], 0);
    assert_eq!(r["prints"]["result"], 20_000_000);
    assert_eq!(r["prints"]["stdout"], "xxxxxxxxxx");
    assert_eq!(r["prints"]["stdout_truncated"], true);
    assert_eq!(r["prints"]["stdout_bytes"], 20_000_000);
    assert_eq!(r["returns"]["status"], 1);
    assert_eq!(r["returns"]["error"]["class"], "LengthException");
    assert_eq!(r["fine"]["result"], 3);
    assert_eq!(
        r["prints"]["worker"], r["fine"]["worker"],
        "no worker was lost"
    );
}

/// Issue 8 too: the worker stopped for a job's time limit was logged as
/// "worker died (killed by signal 15)", as if the job had crashed it.
#[test]
fn a_php_job_past_its_timeout_loses_its_worker() {
    let (ran, _dir) = php_jobs(
        &[
            json!({"id": "slow", "call": "App\\Jobs\\nap", "args": [30], "timeout": 0.3}),
            json!({"id": "quick", "call": "App\\Jobs\\nap", "args": [0.01]}),
            // Handles SIGTERM and returns: reported, failed all the same,
            // and its worker is replaced at once.
            json!({"id": "polite", "call": "App\\Jobs\\polite", "timeout": "300ms"}),
            json!({"id": "after", "call": "App\\Jobs\\add", "args": [1, 1]}),
        ],
        &["-j", "1", "--kill-after", "30s"],
    );
    let r = ran.by_id();
    assert_eq!(r["slow"]["timed_out"], true);
    assert_eq!(r["slow"]["status"], Value::Null);
    assert_eq!(r["slow"]["signal"], "SIGTERM");
    assert_eq!(r["quick"]["result"], "awake");
    assert_eq!(r["after"]["result"], 2);
    assert_ne!(r["slow"]["worker"], r["quick"]["worker"]);
    assert_eq!(r["polite"]["status"], 0);
    assert_eq!(r["polite"]["result"], "cleaned up");
    assert_eq!(r["polite"]["timed_out"], true);
    assert_ne!(r["polite"]["worker"], r["after"]["worker"]);
    assert!(
        !ran.stderr.contains("ignored SIGTERM"),
        "a worker that answered is not left to --kill-after:\n{}",
        ran.stderr
    );
    let message = r["slow"]["error"]["message"].as_str().unwrap();
    assert!(message.contains("past its time limit"), "{message}");
    assert!(
        !ran.stderr.contains("died"),
        "a timeout is not a crash:\n{}",
        ran.stderr
    );
    assert!(
        ran.stderr.contains("ran past its time limit"),
        "the log says why the worker was stopped:\n{}",
        ran.stderr
    );
    assert_eq!(ran.code, Some(2));
}

/// Issue 8: a bootstrap that throws or does not parse had its error and
/// trace printed once per worker, by each worker's log, and once more in
/// hearth run's own message. It is printed once, however many workers.
#[test]
fn a_failing_bootstrap_is_reported_once() {
    let dir = tempfile::tempdir().unwrap();
    for (file, source, error) in [
        (
            "throws.php",
            "<?php\nthrow new RuntimeException('no database');\n",
            "Uncaught RuntimeException: no database",
        ),
        ("syntax.php", "<?php\nfunction (\n", "PHP Parse error"),
    ] {
        std::fs::write(dir.path().join(file), source).unwrap();
        let ran = run_in(
            Some(dir.path()),
            &["--php-bootstrap", file, "-j", "3"],
            &lines(&[json!({"call": "f"})]),
        );
        assert_eq!(ran.code, Some(255), "{}", ran.stderr);
        assert!(ran.stderr.contains("failed to boot"), "{}", ran.stderr);
        assert_eq!(ran.stderr.matches(error).count(), 1, "{}", ran.stderr);
        assert!(
            ran.stderr.matches("Stack trace:").count() <= 1,
            "{}",
            ran.stderr
        );
    }
}

/// Its failure reports held back while the workers start, a bootstrap that
/// fails in some workers only is still reported, once, and the jobs run on
/// the others.
#[test]
fn a_bootstrap_that_fails_in_some_workers_is_reported_and_jobs_run() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("first.php"),
        "<?php\nif (!@mkdir(__DIR__ . '/taken')) {\n    throw new RuntimeException('only one');\n}\n\
         function pid(): int { return getmypid(); }\n",
    )
    .unwrap();
    let jobs: Vec<Value> = (0..5).map(|i| json!({"id": i, "call": "pid"})).collect();
    let ran = run_in(
        Some(dir.path()),
        &["--php-bootstrap", "first.php", "-j", "2"],
        &lines(&jobs),
    );
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    assert_eq!(ran.results.len(), 5);
    assert!(
        ran.stderr.contains("1 of 2 PHP workers failed to boot"),
        "{}",
        ran.stderr
    );
    assert!(ran.stderr.contains("only one"), "{}", ran.stderr);
}

#[test]
fn a_bootstrap_that_fails_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("broken.php"),
        "<?php\nthrow new RuntimeException('no database');\n",
    )
    .unwrap();
    let ran = run_in(
        Some(dir.path()),
        &["--php-bootstrap", "broken.php", "--boot-timeout", "5"],
        &lines(&[json!({"call": "f"})]),
    );
    assert_eq!(ran.code, Some(255));
    assert!(ran.stderr.contains("failed to boot"), "{}", ran.stderr);
    assert!(ran.stderr.contains("no database"), "{}", ran.stderr);
    let ran = run(&["--php-bootstrap", "/nonexistent/boot.php"], "");
    assert_eq!(ran.code, Some(255));
    assert!(
        ran.stderr.contains("/nonexistent/boot.php"),
        "{}",
        ran.stderr
    );
}

/// Peak resident memory of `hearth run ARGS` (its VmHWM, read until it
/// exits), its stdout and its exit status.
fn peak_memory(args: &[&str]) -> (u64, Vec<u8>, Option<i32>) {
    peak_memory_with(args, Stdio::null())
}

/// [`peak_memory`] with `stdin` as the runner's standard input.
fn peak_memory_with(args: &[&str], stdin: Stdio) -> (u64, Vec<u8>, Option<i32>) {
    let mut child = Command::new(HEARTH)
        .arg("run")
        .args(args)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let status_file = format!("/proc/{}/status", child.id());
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut stdout, &mut out).unwrap();
        out
    });
    let mut peak_kb = 0;
    loop {
        if let Ok(status) = std::fs::read_to_string(&status_file) {
            for line in status.lines() {
                if let Some(v) = line.strip_prefix("VmHWM:") {
                    let kb: u64 = v.trim().trim_end_matches("kB").trim().parse().unwrap_or(0);
                    peak_kb = peak_kb.max(kb);
                }
            }
        }
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let out = reader.join().unwrap();
    let code = child.wait().unwrap().code();
    (peak_kb * 1024, out, code)
}

/// Issue 20: a 50 MB output is kept whole (it was cut to 16 MiB, and
/// holding it took 156 MB), in plain output and in a JSON result line,
/// while `hearth run` holds a few MiB of it: the rest waits in a
/// temporary file.
#[test]
fn a_50_mb_output_is_kept_whole_in_bounded_memory() {
    let task = "head -c 50000000 /dev/zero | tr '\\0' x; echo {}";
    let (peak, out, code) = peak_memory(&["-k", "--", task, ":::", "1"]);
    assert_eq!(code, Some(0));
    assert_eq!(out.len(), 50_000_002, "plain output, whole");
    assert!(out[..50_000_000].iter().all(|&b| b == b'x'));
    assert!(peak < 48 << 20, "peak {} MiB", peak >> 20);
    let (peak, out, code) = peak_memory(&["--json", "--", task, ":::", "1"]);
    assert_eq!(code, Some(0));
    let r: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(
        r["stdout"].as_str().unwrap().len(),
        50_000_002,
        "JSON, whole"
    );
    assert!(r.get("stdout_truncated").is_none());
    assert!(peak < 48 << 20, "peak {} MiB", peak >> 20);
}

/// Issue 20: with `-k` behind a slow first task, the outputs of the
/// tasks that finish meanwhile wait in temporary files past the
/// process's budget (64 MiB), not in memory: 200 MiB of waiting output.
#[test]
fn keep_order_behind_a_slow_task_keeps_memory_bounded() {
    let args: Vec<String> = (1..=200).map(|i| i.to_string()).collect();
    let mut argv = vec![
        "-k",
        "-j",
        "8",
        "--",
        "if [ {} = 1 ]; then sleep 2; fi; head -c 1000000 /dev/zero",
        ":::",
    ];
    argv.extend(args.iter().map(String::as_str));
    let (peak, out, code) = peak_memory(&argv);
    assert_eq!(code, Some(0));
    assert_eq!(out.len(), 200_000_000);
    assert!(peak < 120 << 20, "peak {} MiB", peak >> 20);
}

/// Issue 20: `--max-output` is an explicit cap, and a cut is said on
/// stderr.
#[test]
fn a_cut_output_is_said_on_stderr() {
    let ran = Command::new(HEARTH)
        .args([
            "run",
            "--max-output",
            "1K",
            "head -c 5000 /dev/zero; : {}",
            ":::",
            "x",
        ])
        .output()
        .unwrap();
    assert_eq!(ran.status.code(), Some(0));
    assert_eq!(ran.stdout.len(), 1024);
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert!(
        stderr.contains("cut to its first 1024 of 5000 bytes"),
        "{stderr}"
    );
}

/// Issue 20: `--memfree` and `--load` hold tasks back, and say why on
/// stderr; `--bar` shows progress on a stderr that is no terminal.
#[test]
fn memfree_load_and_bar() {
    // No machine has 1000 TiB available (a load average, on the other
    // hand, can be 0.00 on an idle machine: --load is checked below by a
    // limit that lets tasks run).
    {
        let args = ["--memfree", "1000T"];
        let mut child = Command::new(HEARTH)
            .arg("run")
            .args(args)
            .args(["echo", "ran", ":::", "x"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        stderr.read_line(&mut line).unwrap();
        assert!(
            line.contains("waiting to start more tasks"),
            "{args:?}: {line}"
        );
        // SIGTERM: nothing was started, nothing ran.
        rustix::process::kill_process(
            rustix::process::Pid::from_child(&child),
            rustix::process::Signal::TERM,
        )
        .unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(143), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing ran");
    }
    let ran = Command::new(HEARTH)
        .args([
            "run",
            "--load",
            "100000",
            "--memfree",
            "1k",
            "echo",
            ":::",
            "ran",
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&ran.stdout), "ran\n");
    let ran = Command::new(HEARTH)
        .args(["run", "--bar", "-j", "1", "sleep 1.2; : {}", ":::", "a"])
        .output()
        .unwrap();
    assert_eq!(ran.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert!(stderr.contains("hearth run: 0/1 done (0%)"), "{stderr}");
    assert!(stderr.contains("hearth run: 1/1 done (100%)"), "{stderr}");
}

/// Issue 20: `--pipe` over 100 MB in 10 MB blocks holds about one block:
/// the others wait in temporary files that the tasks read themselves, and
/// a retried task reads its block again from the start.
#[test]
fn pipe_blocks_cost_one_block_of_memory_and_retries_read_them_again() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input");
    let line = [b'x'; 99];
    let mut data = Vec::with_capacity(100_000_000);
    for _ in 0..1_000_000 {
        data.extend_from_slice(&line);
        data.push(b'\n');
    }
    std::fs::write(&input, &data).unwrap();
    let (peak, out, code) = peak_memory_with(
        &["-j", "2", "--pipe", "--block", "10M", "wc", "-l"],
        Stdio::from(std::fs::File::open(&input).unwrap()),
    );
    assert_eq!(code, Some(0));
    let lines: u64 = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| l.trim().parse::<u64>().unwrap())
        .sum();
    assert_eq!(lines, 1_000_000);
    assert!(peak < 40 << 20, "peak {} MiB", peak >> 20);

    // Each block's first attempt fails after reading it all.
    let marks = dir.path().join("marks");
    std::fs::create_dir(&marks).unwrap();
    let task = format!(
        "n=$(wc -l); if [ ! -e {m}/{{#}} ]; then touch {m}/{{#}}; exit 1; fi; echo $n",
        m = marks.display()
    );
    let (_, out, code) = peak_memory_with(
        &["-k", "--pipe", "--block", "1M", "--retries", "2", &task],
        Stdio::from(std::fs::File::open(&input).unwrap()),
    );
    assert_eq!(code, Some(0));
    let counts: Vec<u64> = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert_eq!(
        counts.iter().sum::<u64>(),
        1_000_000,
        "every block whole on its retry"
    );
    assert!(counts.len() > 50);
}
