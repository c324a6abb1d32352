//! Reloads against real php-cgi workers: SIGHUP and `--watch` bring up
//! workers running the new code without failing a request; broken new code
//! leaves the old workers serving.

#[path = "support/mod.rs"]
mod support;

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use support::{eventually, Server};

/// A worker script answering with its version and pid.
fn app(version: &str) -> String {
    format!(
        r#"<?php
require {lib:?};
$version = {version:?};
Hearth\Worker::serve(function () use ($version) {{
    usleep(2000);
    echo json_encode(['version' => $version, 'pid' => getmypid()]);
}});
"#,
        lib = support::root()
            .join("php/autoload.php")
            .display()
            .to_string(),
    )
}

const BROKEN: &str = "<?php\nthrow new RuntimeException('the new code cannot boot');\n";

/// Requests in a loop from two threads until stopped; counts failures.
struct Load {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Load {
    fn start(server: &Server) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let ok = Arc::new(AtomicU64::new(0));
        let failed = Arc::new(AtomicU64::new(0));
        let threads = (0..2)
            .map(|_| {
                let (stop, ok, failed, addr) =
                    (stop.clone(), ok.clone(), failed.clone(), server.addr);
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let r = support::request(
                            addr,
                            b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                        );
                        if r.status == 200 {
                            ok.fetch_add(1, Ordering::Relaxed);
                        } else {
                            failed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        Load {
            stop,
            ok,
            failed,
            threads,
        }
    }

    /// Stops the load; returns (succeeded, failed).
    fn finish(self) -> (u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            t.join().expect("load thread");
        }
        (
            self.ok.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
        )
    }
}

fn write(path: &Path, text: &str) {
    // Beside and renamed, as a deploy does: a worker never reads half a file.
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).expect("write");
    std::fs::rename(&tmp, path).expect("rename");
}

fn versions(server: &Server, n: usize) -> HashSet<String> {
    (0..n)
        .map(|_| {
            server.get("/").json()["version"]
                .as_str()
                .expect("version")
                .to_owned()
        })
        .collect()
}

#[test]
fn sighup_reloads_under_load_without_failing_a_request() {
    let dir = support::tempdir();
    let script = dir.path().join("app.php");
    write(&script, &app("v1"));
    let server = Server::start(&script, &["--workers", "2"]);
    let load = Load::start(&server);
    for round in 2..=6 {
        write(&script, &app(&format!("v{round}")));
        server.signal("HUP");
        let want = format!("v{round}");
        eventually(Duration::from_secs(20), "the new code to serve", || {
            let seen = versions(&server, 4);
            (seen.len() == 1 && seen.contains(&want)).then_some(())
        });
    }
    let (ok, failed) = load.finish();
    assert_eq!(
        failed, 0,
        "{failed} requests failed during reloads ({ok} succeeded)"
    );
    assert!(ok > 0);
    assert!(server.log().contains("reload done"), "{}", server.log());
}

#[test]
fn a_reload_to_broken_code_keeps_the_old_workers_serving() {
    let dir = support::tempdir();
    let script = dir.path().join("app.php");
    write(&script, &app("v1"));
    let server = Server::start(&script, &["--workers", "2"]);
    let load = Load::start(&server);
    write(&script, BROKEN);
    server.signal("HUP");
    server.wait_for_log("reload failed", Duration::from_secs(20));
    let (ok, failed) = load.finish();
    assert_eq!(failed, 0, "{failed} requests failed ({ok} succeeded)");
    let log = server.log();
    assert!(
        log.contains("the new code cannot boot"),
        "the error is reported: {log}"
    );
    // Only old workers can answer v1: the new code never booted.
    assert_eq!(versions(&server, 6), HashSet::from(["v1".to_owned()]));
    // Fixed, the next reload goes through.
    write(&script, &app("v2"));
    server.signal("HUP");
    eventually(Duration::from_secs(20), "the fixed code to serve", || {
        (versions(&server, 4) == HashSet::from(["v2".to_owned()])).then_some(())
    });
}

#[test]
fn watch_reloads_when_a_php_file_changes() {
    let dir = support::tempdir();
    let script = dir.path().join("app.php");
    write(&script, &app("v1"));
    let server = Server::start(&script, &["--workers", "1", "--watch"]);
    server.wait_for_log("watching", Duration::from_secs(5));
    assert_eq!(versions(&server, 2), HashSet::from(["v1".to_owned()]));
    // A file that is not PHP changes nothing.
    std::fs::write(dir.path().join("notes.txt"), "x").expect("write");
    write(&script, &app("v2"));
    eventually(Duration::from_secs(20), "the watcher to reload", || {
        (versions(&server, 2) == HashSet::from(["v2".to_owned()])).then_some(())
    });
}
