//! `hearth queue stats|peek|retry|delete|purge|push` against real queues (a
//! redis-server started by the test, and a queue file), with real
//! `hearth work` consumers where a job must run.
#![allow(clippy::unwrap_used)]

mod queue_support;

use std::process::Command;

use hearth_queue::{DeadReason, JobId};
use queue_support::*;
use serde_json::Value;

/// `hearth queue ARGS`: its exit code, stdout and stderr.
fn queue(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(HEARTH)
        .arg("queue")
        .args(args)
        .env("NO_COLOR", "1")
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// `hearth queue ARGS`, which must succeed: its stdout.
fn ok(args: &[&str]) -> String {
    let (code, stdout, stderr) = queue(args);
    assert_eq!(code, Some(0), "hearth queue {args:?}: {stderr}");
    stdout
}

/// The queue's URL as `hearth queue` shows it (the Redis database named).
fn shown(url: &str) -> String {
    hearth_queue::QueueUrl::parse(url).unwrap().to_string()
}

fn stats_json(url: &str) -> Value {
    serde_json::from_str(&ok(&["stats", url, "--json"])).unwrap()
}

/// `hearth queue push` prints the new job's id; `hearth work` runs it and
/// its result comes on the channel it names; `--delay` holds a job back.
#[test]
fn push_prints_the_id_of_a_job_hearth_work_runs() {
    for engine in [Engine::redis(), Engine::file()] {
        let url = engine.url();
        let dir = tempfile::tempdir().unwrap();
        let mut q = Producer::open(&engine);
        let id: u64 = ok(&[
            "push",
            &url,
            "--payload",
            r#"{"id": "hello", "cmd": "echo hello"}"#,
            "--attempts",
            "2",
            "--reply-to",
            "replies",
        ])
        .trim()
        .parse()
        .unwrap();
        let later: u64 = ok(&[
            "push",
            &url,
            "--payload",
            r#"{"cmd": "true"}"#,
            "--delay",
            "1h",
        ])
        .trim()
        .parse()
        .unwrap();
        assert_ne!(id, later);
        let ready = q.ready();
        assert_eq!(ready.len(), 1, "{}", engine.name());
        assert_eq!((ready[0].id, ready[0].max_attempts), (JobId(id), 2));
        assert_eq!(ready[0].reply_to.as_deref(), Some("replies"));
        let s = stats_json(&url);
        assert_eq!(
            (s["ready"].as_u64(), s["delayed"].as_u64()),
            (Some(1), Some(1))
        );
        let _work = Work::start(&engine, dir.path(), &["-j", "1"]);
        let r = q.results("replies", 1);
        assert_eq!(r[0].id, JobId(id));
        let line = done(&r[0]);
        assert_eq!(
            (line["id"].as_str(), line["stdout"].as_str()),
            (Some("hello"), Some("hello\n"))
        );
        assert_eq!(stats_json(&url)["delayed"], 1, "the delayed job waits");
    }
}

/// Stats as a table and as JSON, and peek of ready jobs, bounded.
#[test]
fn stats_and_peek_show_the_queue() {
    for engine in [Engine::redis(), Engine::file()] {
        let url = engine.url();
        for i in 0..5 {
            ok(&[
                "push",
                &url,
                "--payload",
                &format!(r#"{{"cmd": "echo {i}"}}"#),
            ]);
        }
        ok(&[
            "push",
            &url,
            "--payload",
            r#""not an object""#,
            "--delay",
            "10m",
        ]);
        let table = ok(&["stats", &url]);
        let row = |name: &str| {
            table
                .lines()
                .find(|l| l.split_whitespace().next() == Some(name))
                .unwrap_or_else(|| panic!("no {name} row in:\n{table}"))
                .split_whitespace()
                .nth(1)
                .unwrap()
                .to_owned()
        };
        assert!(
            table.starts_with(&format!("queue {}\n", shown(&url))),
            "{table}"
        );
        assert_eq!(
            (row("ready"), row("delayed"), row("pushed")),
            ("5".into(), "1".into(), "6".into())
        );
        assert_eq!(
            (row("reserved"), row("dead"), row("done")),
            ("0".into(), "0".into(), "0".into())
        );
        assert!(table.contains("(the oldest waiting "), "{table}");
        let s = stats_json(&url);
        assert_eq!(s["queue"], shown(&url));
        assert_eq!(
            (
                s["ready"].as_u64(),
                s["pushed"].as_u64(),
                s["died"].as_u64()
            ),
            (Some(5), Some(6), Some(0))
        );
        assert!(s["oldest_ready_age_ms"].as_u64().is_some(), "{s}");

        let peeked: Vec<Value> = ok(&["peek", &url, "--limit", "2"])
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(peeked.len(), 2, "{}", engine.name());
        assert_eq!(peeked[0]["payload"]["cmd"], "echo 0");
        assert_eq!(peeked[1]["payload"]["cmd"], "echo 1");
        assert_eq!(
            (
                peeked[0]["attempts"].as_u64(),
                peeked[0]["max_attempts"].as_u64()
            ),
            (Some(0), Some(3))
        );
        assert!(peeked[0]["id"].as_u64() < peeked[1]["id"].as_u64());
        assert_eq!(
            ok(&["peek", &url]).lines().count(),
            5,
            "10 at most by default, 5 there"
        );
        assert_eq!(ok(&["peek", &url, "dead"]), "");
        let (code, _, stderr) = queue(&["peek", &url, "--limit", "1001"]);
        assert_eq!(code, Some(2), "{stderr}");
    }
}

/// A job that always throws is dead after its attempts; `hearth queue
/// peek ... dead` shows it with its error, and `hearth queue retry` puts
/// it back with its attempts reset, to succeed once its cause is fixed.
#[test]
fn a_dead_job_that_retry_brings_back_runs_again_and_succeeds() {
    const FLAKY: &str = "<?php\nnamespace App;\n\nfunction flaky(int $n): string\n{\n    if (!file_exists('fixed')) {\n        throw new \\RuntimeException(\"not yet: {$n}\");\n    }\n    return \"fixed {$n}\";\n}\n";
    for engine in [Engine::redis(), Engine::file()] {
        let url = engine.url();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("bootstrap.php"), FLAKY).unwrap();
        let mut q = Producer::open(&engine);
        let id: u64 = ok(&[
            "push",
            &url,
            "--payload",
            r#"{"call": "App\\flaky", "args": [7]}"#,
            "--attempts",
            "2",
            "--reply-to",
            "r",
        ])
        .trim()
        .parse()
        .unwrap();
        let _work = Work::start(
            &engine,
            dir.path(),
            &["-j", "1", "--php-bootstrap", "bootstrap.php"],
        );
        // Two attempts, a second apart (the default backoff).
        let r = q.results("r", 1);
        assert_eq!((r[0].id, r[0].attempt), (JobId(id), 2));
        let (reason, error) = dead(&r[0]);
        assert_eq!(reason, DeadReason::Failed);
        assert!(
            error.starts_with("RuntimeException: not yet: 7 at "),
            "{error}"
        );

        let dead_jobs: Vec<Value> = ok(&["peek", &url, "dead"])
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(dead_jobs.len(), 1, "{}", engine.name());
        assert_eq!(dead_jobs[0]["id"], id);
        assert_eq!(dead_jobs[0]["dead_reason"], "failed");
        assert_eq!(dead_jobs[0]["last_error"], error.as_str());
        assert_eq!(dead_jobs[0]["attempts"], 2);
        assert_eq!(dead_jobs[0]["payload"]["args"][0], 7);

        let (code, _, stderr) = queue(&["retry", &url, "999999"]);
        assert_eq!(code, Some(1));
        assert!(stderr.contains("has no dead job 999999"), "{stderr}");

        std::fs::write(dir.path().join("fixed"), "").unwrap();
        assert_eq!(
            ok(&["retry", &url, &id.to_string()]),
            format!("job {id} is ready again\n")
        );
        let r = q.results("r", 1);
        assert_eq!((r[0].id, r[0].attempt), (JobId(id), 1), "attempts reset");
        assert_eq!(done(&r[0])["result"], "fixed 7");
        assert_eq!(ok(&["retry", &url, "--all"]), "0 dead job(s) ready again\n");
        let s = stats_json(&url);
        assert_eq!(
            (s["dead"].as_u64(), s["done"].as_u64(), s["died"].as_u64()),
            (Some(0), Some(1), Some(1))
        );
    }
}

/// `retry --all` puts every dead job back.
#[test]
fn retry_all_brings_back_every_dead_job() {
    let engine = Engine::file();
    let url = engine.url();
    let q = Producer::open(&engine);
    for _ in 0..3 {
        ok(&[
            "push",
            &url,
            "--payload",
            r#"{"cmd": "exit 1"}"#,
            "--attempts",
            "1",
        ]);
    }
    q.fail_all();
    assert_eq!(stats_json(&url)["dead"], 3);
    assert_eq!(ok(&["retry", &url, "--all"]), "3 dead job(s) ready again\n");
    let s = stats_json(&url);
    assert_eq!(
        (s["dead"].as_u64(), s["ready"].as_u64()),
        (Some(0), Some(3))
    );
}

/// `hearth queue delete URL ID` removes that one dead job for good: the
/// other dead jobs stay, an id that is not a dead job's (unknown, or a
/// ready job's, which stays) is an error with exit status 1, and the
/// deleted job does not come back with `retry --all`.
#[test]
fn delete_removes_one_dead_job_for_good() {
    for engine in [Engine::redis(), Engine::file()] {
        let url = engine.url();
        let q = Producer::open(&engine);
        let push = |payload: &str, attempts: &str| -> u64 {
            ok(&["push", &url, "--payload", payload, "--attempts", attempts])
                .trim()
                .parse()
                .unwrap()
        };
        let gone = push(r#"{"cmd": "exit 1"}"#, "1");
        let kept = push(r#"{"cmd": "exit 2"}"#, "1");
        q.fail_all();
        let ready = push(r#"{"cmd": "true"}"#, "3");
        let s = stats_json(&url);
        assert_eq!(
            (s["dead"].as_u64(), s["ready"].as_u64()),
            (Some(2), Some(1)),
            "{}",
            engine.name()
        );

        for id in [999_999, ready] {
            let (code, stdout, stderr) = queue(&["delete", &url, &id.to_string()]);
            assert_eq!((code, stdout.as_str()), (Some(1), ""), "{stderr}");
            assert!(
                stderr.contains(&format!("hearth: {} has no dead job {id}", shown(&url))),
                "{stderr}"
            );
        }
        assert_eq!(
            ok(&["delete", &url, &gone.to_string()]),
            format!("job {gone} deleted\n")
        );
        let (code, _, stderr) = queue(&["delete", &url, &gone.to_string()]);
        assert_eq!(code, Some(1), "a second delete finds nothing: {stderr}");
        assert!(
            stderr.contains(&format!("has no dead job {gone}")),
            "{stderr}"
        );

        let dead: Vec<Value> = ok(&["peek", &url, "dead"])
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(dead.len(), 1, "{}", engine.name());
        assert_eq!(dead[0]["id"], kept);
        let s = stats_json(&url);
        assert_eq!(
            (s["dead"].as_u64(), s["ready"].as_u64(), s["died"].as_u64()),
            (Some(1), Some(1), Some(2)),
            "the ready job stays; died counts both deaths"
        );
        assert_eq!(ok(&["retry", &url, "--all"]), "1 dead job(s) ready again\n");
        let mut back: Vec<u64> = q.ready().iter().map(|j| j.id.0).collect();
        back.sort();
        assert_eq!(
            back,
            vec![kept, ready],
            "the deleted job does not come back"
        );
    }
    let (code, stdout, stderr) = queue(&["delete", "--help"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains("Remove one dead job for good") && stdout.contains("<ID>"),
        "{stdout}"
    );
}

/// Purge removes nothing without --yes, then only the part it is given.
#[test]
fn purge_needs_yes_and_removes_only_that_part() {
    for engine in [Engine::redis(), Engine::file()] {
        let url = engine.url();
        let q = Producer::open(&engine);
        ok(&[
            "push",
            &url,
            "--payload",
            r#"{"cmd": "exit 1"}"#,
            "--attempts",
            "1",
        ]);
        q.fail_all();
        for _ in 0..2 {
            ok(&["push", &url, "--payload", r#"{"cmd": "true"}"#]);
        }
        ok(&[
            "push",
            &url,
            "--payload",
            r#"{"cmd": "true"}"#,
            "--delay",
            "1h",
        ]);
        let counts = || {
            let s = stats_json(&url);
            (
                s["ready"].as_u64().unwrap(),
                s["delayed"].as_u64().unwrap(),
                s["dead"].as_u64().unwrap(),
            )
        };
        assert_eq!(counts(), (2, 1, 1), "{}", engine.name());
        let (code, stdout, stderr) = queue(&["purge", &url, "dead"]);
        assert_eq!((code, stdout.as_str()), (Some(1), ""));
        assert!(
            stderr.contains(&format!(
                "this removes the 1 dead job(s) of {} for good; to do it, run it again with --yes",
                shown(&url)
            )),
            "{stderr}"
        );
        assert_eq!(counts(), (2, 1, 1), "nothing removed");
        assert_eq!(
            ok(&["purge", &url, "dead", "--yes"]),
            "1 dead job(s) removed\n"
        );
        assert_eq!(counts(), (2, 1, 0));
        assert_eq!(
            ok(&["purge", &url, "delayed", "--yes"]),
            "1 delayed job(s) removed\n"
        );
        assert_eq!(counts(), (2, 0, 0));
        assert_eq!(
            ok(&["purge", &url, "ready", "--yes"]),
            "2 ready job(s) removed\n"
        );
        assert_eq!(counts(), (0, 0, 0));
        assert!(q.dead().is_empty());
    }
}

/// Issue 12: `hearth queue stats` (and peek, retry, delete, purge) on a
/// mistyped Redis queue name created its stream and group; now they say
/// there is no such queue and leave Redis empty.
#[test]
fn a_redis_queue_that_is_not_there_is_not_created_by_looking_at_it() {
    let engine = Engine::redis();
    let Engine::Redis(server) = &engine else {
        unreachable!()
    };
    let typo = format!("redis://127.0.0.1:{}/jbos", server.port);
    for args in [
        vec!["stats", &typo],
        vec!["stats", &typo, "--json"],
        vec!["peek", &typo],
        vec!["peek", &typo, "dead"],
        vec!["retry", &typo, "--all"],
        vec!["delete", &typo, "1"],
        vec!["purge", &typo, "ready", "--yes"],
    ] {
        let (code, out, stderr) = queue(&args);
        assert_eq!(code, Some(1), "{args:?}: {out}");
        assert!(
            stderr.contains(&format!(
                "hearth: no such queue: redis://127.0.0.1:{}/0/jbos has no keys hearth:{{jbos}}:* in database 0",
                server.port
            )),
            "{args:?}: {stderr}"
        );
    }
    let keys = Command::new("redis-cli")
        .args(["-p", &server.port.to_string(), "DBSIZE"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&keys.stdout).trim(), "0");
    // A queue that is there, even with only dead jobs or counters, is.
    let (code, _, stderr) = queue(&["push", &engine.url(), "--payload", "{}"]);
    assert_eq!(code, Some(0), "{stderr}");
    let (code, out, stderr) = queue(&["stats", &engine.url(), "--json"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(out.contains("\"ready\":1"), "{out}");
}

/// What cannot be done is refused, saying why; a queue file that is not
/// there is not created by looking at it.
#[test]
fn bad_input_is_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.db");
    let url = format!("file:{}", missing.display());
    for args in [
        vec!["stats", &url],
        vec!["peek", &url],
        vec!["retry", &url, "--all"],
        vec!["delete", &url, "1"],
        vec!["purge", &url, "ready", "--yes"],
    ] {
        let (code, _, stderr) = queue(&args);
        assert_eq!(code, Some(1), "{args:?}");
        assert!(
            stderr.contains(&format!(
                "hearth: no such queue: no queue file at {}",
                missing.display()
            )),
            "{stderr}"
        );
    }
    assert!(!missing.exists());
    for (args, expected) in [
        (vec!["push", &url, "--payload", "{nope"], "hearth: --payload is not JSON: "),
        (vec!["push", &url, "--payload", "{}", "--reply-to", "a b"], "hearth: --reply-to \"a b\": a channel name is 1 to 128 of A-Z a-z 0-9 . _ -"),
        (vec!["stats", "memcached://h/q"], "hearth: queue URL: memcached://h/q: expected redis://HOST[:PORT][/DB]/NAME or file:PATH"),
    ] {
        let (code, _, stderr) = queue(&args);
        assert_eq!(code, Some(1), "{args:?}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    assert!(!missing.exists(), "a refused push stores nothing");
    for args in [
        vec!["push", &url, "--payload", "{}", "--attempts", "0"],
        vec!["push", &url, "--payload", "{}", "--delay", "soon"],
        vec!["retry", &url],
        vec!["delete", &url],
        vec!["delete", &url, "two"],
        vec!["purge", &url, "everything", "--yes"],
    ] {
        let (code, _, stderr) = queue(&args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: "), "{stderr}");
    }
    // A push creates the queue file.
    assert_eq!(ok(&["push", &url, "--payload", "{}"]), "1\n");
    assert!(missing.exists());
}
