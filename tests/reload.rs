//! Reloads against real php-cgi workers: SIGHUP and `--watch` bring up
//! workers running the new code without failing a request; broken new code
//! leaves the old workers serving.

#[path = "support/mod.rs"]
mod support;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use support::{eventually, Server};

/// A worker script answering with its version and pid, and where it
/// runs from: its own file, `SCRIPT_FILENAME`, `DOCUMENT_ROOT` and its
/// working directory.
fn app(version: &str) -> String {
    format!(
        r#"<?php
require {lib:?};
$version = {version:?};
Hearth\Worker::serve(function () use ($version) {{
    usleep(2000);
    echo json_encode([
        'version' => $version,
        'pid' => getmypid(),
        'file' => __FILE__,
        'script' => $_SERVER['SCRIPT_FILENAME'],
        'root' => $_SERVER['DOCUMENT_ROOT'],
        'cwd' => getcwd(),
    ]);
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

/// A deploy as release tools lay it out: each release in `releases/NAME/`
/// (the worker script, and `public/` with a static file naming the
/// release), and `current` a symlink to the live one, switched atomically.
struct Deploy {
    _dir: tempfile::TempDir,
    /// The layout's directory, symlinks resolved.
    base: PathBuf,
}

impl Deploy {
    fn new(releases: &[&str]) -> Deploy {
        let dir = support::tempdir();
        let base = dir.path().canonicalize().expect("canonical temp dir");
        let deploy = Deploy { _dir: dir, base };
        for name in releases {
            deploy.write(name, &app(name));
        }
        deploy
    }

    /// Writes release `name` with `script` as its worker script.
    fn write(&self, name: &str, script: &str) {
        let public = self.release(name).join("public");
        std::fs::create_dir_all(&public).expect("release dir");
        std::fs::write(public.join("version.txt"), name).expect("static file");
        write(&self.release(name).join("worker.php"), script);
    }

    /// Points `current` at release `name`, as
    /// `ln -s releases/NAME current.tmp && mv -T current.tmp current` does.
    fn switch(&self, name: &str) {
        let tmp = self.base.join("current.tmp");
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(format!("releases/{name}"), &tmp).expect("symlink");
        std::fs::rename(&tmp, self.base.join("current")).expect("rename over current");
    }

    /// The real directory of release `name`.
    fn release(&self, name: &str) -> PathBuf {
        self.base.join("releases").join(name)
    }

    /// What the server is pointed at: paths through `current`.
    fn current(&self, path: &str) -> String {
        self.base
            .join("current")
            .join(path)
            .to_string_lossy()
            .into_owned()
    }

    fn socket(&self) -> String {
        self.base
            .join("control.sock")
            .to_string_lossy()
            .into_owned()
    }
}

/// Asserts that a response comes from release `name` of `deploy`, and
/// that the worker sees the release's real paths, as php-fpm does behind
/// nginx's `$realpath_root`.
fn assert_runs(deploy: &Deploy, facts: &serde_json::Value, name: &str) {
    let real = deploy.release(name);
    let path = |p: PathBuf| p.to_string_lossy().into_owned();
    assert_eq!(facts["version"], name, "{facts}");
    assert_eq!(facts["file"], path(real.join("worker.php")), "{facts}");
    assert_eq!(facts["script"], path(real.join("worker.php")), "{facts}");
    assert_eq!(facts["root"], path(real.join("public")), "{facts}");
    assert_eq!(facts["cwd"], path(real.clone()), "{facts}");
}

/// A symlinked deploy served with `--root`: starts on r1.
fn serve_deploy(deploy: &Deploy, extra: &[&str]) -> Server {
    deploy.switch("r1");
    let root = deploy.current("public");
    let socket = deploy.socket();
    let mut args = vec!["--root", &root, "--control-socket", &socket];
    args.extend_from_slice(extra);
    let server = Server::start(Path::new(&deploy.current("worker.php")), &args);
    assert_runs(deploy, &server.get("/").json(), "r1");
    assert_eq!(server.get("/version.txt").text(), "r1");
    server
}

#[test]
fn hearth_reload_after_a_symlink_switch_runs_the_new_release() {
    let deploy = Deploy::new(&["r1", "r2"]);
    let server = serve_deploy(&deploy, &["--workers", "2", "--max-requests", "3"]);
    deploy.switch("r2");
    let out = support::ctl(&["reload", "--control-socket", &deploy.socket()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Every worker, and every replacement booted after the reload (here
    // after --max-requests), runs r2; static files come from r2 too.
    let mut pids = HashSet::new();
    eventually(Duration::from_secs(20), "a worker to be replaced", || {
        let facts = server.get("/").json();
        assert_runs(&deploy, &facts, "r2");
        pids.insert(facts["pid"].as_u64().expect("pid"));
        (pids.len() > 2).then_some(())
    });
    assert_eq!(server.get("/version.txt").text(), "r2");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(
            &deploy
                .release("r2")
                .join("worker.php")
                .display()
                .to_string()
        ),
        "the reload names the script it now runs: {said}"
    );
}

#[test]
fn sighup_after_a_symlink_switch_runs_the_new_release_also_after_a_crash() {
    let deploy = Deploy::new(&["r1", "r2"]);
    let server = serve_deploy(&deploy, &["--workers", "1"]);
    deploy.switch("r2");
    server.signal("HUP");
    let facts = eventually(Duration::from_secs(20), "r2 to serve", || {
        let facts = server.get("/").json();
        (facts["version"] == "r2").then_some(facts)
    });
    assert_runs(&deploy, &facts, "r2");
    assert_eq!(server.get("/version.txt").text(), "r2");
    // A worker that crashes is replaced by one running r2.
    let pid = facts["pid"].as_u64().expect("pid");
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    let facts = eventually(Duration::from_secs(20), "a replacement", || {
        let r = server.get("/");
        (r.status == 200 && r.json()["pid"] != pid).then(|| r.json())
    });
    assert_runs(&deploy, &facts, "r2");
}

#[test]
fn a_switch_to_a_broken_release_keeps_the_old_release_serving() {
    let deploy = Deploy::new(&["r1"]);
    deploy.write("r2", BROKEN);
    let server = serve_deploy(&deploy, &["--workers", "1"]);
    deploy.switch("r2");
    let out = support::ctl(&["reload", "--control-socket", &deploy.socket()]);
    assert_eq!(out.status.code(), Some(1), "a failed reload exits 1");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("the new code cannot boot"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // PHP and static files both stay with r1.
    assert_runs(&deploy, &server.get("/").json(), "r1");
    assert_eq!(server.get("/version.txt").text(), "r1");
}

#[test]
fn watch_follows_a_symlink_switch_and_then_watches_the_new_release() {
    let deploy = Deploy::new(&["r1", "r2"]);
    let server = serve_deploy(&deploy, &["--workers", "1", "--watch"]);
    server.wait_for_log("watching", Duration::from_secs(5));
    // Switching the link is a change to the code being served.
    deploy.switch("r2");
    let facts = eventually(Duration::from_secs(20), "the watcher to reload r2", || {
        let facts = server.get("/").json();
        (facts["version"] == "r2").then_some(facts)
    });
    assert_runs(&deploy, &facts, "r2");
    server.wait_for_log(
        &format!("watching {}", deploy.release("r2").display()),
        Duration::from_secs(10),
    );
    // From now on, edits in r2 (not r1) reload.
    write(&deploy.release("r2").join("worker.php"), &app("r2-edited"));
    eventually(Duration::from_secs(20), "the edit in r2 to reload", || {
        (versions(&server, 2) == HashSet::from(["r2-edited".to_owned()])).then_some(())
    });
}
