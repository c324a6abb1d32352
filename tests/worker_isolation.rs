//! Issue 16: what a worker gets from whoever started Hearth, and where the
//! control socket lives. Workers running as another user get that user's
//! identity and none of the caller's login session (`--clear-env`: nothing
//! but what is named); no worker inherits a descriptor Hearth inherited;
//! no other user can keep `hearth serve` from starting by making its
//! control socket directory first.
//!
//! The tests marked `#[ignore]` need root, as those of tests/security.rs:
//! `make test` runs them with `--ignored` as root.

#[path = "support/mod.rs"]
mod support;

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use support::{fixture, Server};

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

fn needs_root() {
    assert!(is_root(), "needs root: run with --ignored as root");
}

/// A copy of tests/fixtures/process.php and the PHP library it requires,
/// in a directory every user can reach (and, with `bin`, of the hearth
/// binary too), under `base`.
fn reachable_copy(base: &Path, bin: bool) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix("hearth-isolation-")
        .tempdir_in(base)
        .expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    support::copy_tree(&support::root().join("php"), &dir.path().join("php"));
    let fixtures = dir.path().join("tests/fixtures");
    std::fs::create_dir_all(&fixtures).expect("mkdir");
    for d in [dir.path().join("tests"), fixtures.clone()] {
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    support::copy_tree(&fixture("process.php"), &fixtures.join("process.php"));
    if bin {
        let copy = dir.path().join("hearth");
        std::fs::copy(support::hearth_bin(), &copy).expect("copy hearth");
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let script = fixtures.join("process.php");
    (dir, script)
}

/// `hearth serve SCRIPT` on a free port with one worker and `extra`, as a
/// command to adjust before it starts.
fn serve_command(program: &Path, script: &Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new(program);
    cmd.arg("serve")
        .arg(script)
        .args(["--listen", "127.0.0.1:0", "--workers", "1", "--php"])
        .arg(support::php_binary())
        .args(extra);
    cmd
}

/// The environment a worker reports: getenv(), and the names in $_SERVER.
fn worker_environment(server: &Server) -> (serde_json::Map<String, Value>, Vec<String>) {
    let r = server.get("/env");
    assert_eq!(r.status, 200, "{}", r.text());
    let env = r.json();
    let getenv = env["getenv"].as_object().cloned().unwrap_or_default();
    let keys = env["server_keys"]
        .as_array()
        .expect("server_keys")
        .iter()
        .map(|k| k.as_str().unwrap_or_default().to_owned())
        .collect();
    (getenv, keys)
}

/// Issue 16 (8): started by root from a login session, with `--user
/// www-data`, workers see www-data's HOME, USER, LOGNAME and SHELL, not
/// root's, and none of the session's variables (sudo's, ssh's, logind's);
/// other variables still reach them, in getenv() and in $_SERVER.
#[test]
#[ignore = "needs root: run with --ignored as root"]
fn workers_of_another_user_get_its_identity_and_not_the_callers_session() {
    needs_root();
    let (_app, script) = reachable_copy(&std::env::temp_dir(), false);
    let session = [
        ("SSH_AUTH_SOCK", "/tmp/ssh-XXXX/agent.1234"),
        ("SSH_CONNECTION", "192.0.2.1 50000 192.0.2.2 22"),
        ("SUDO_USER", "alice"),
        ("SUDO_UID", "1000"),
        ("SUDO_COMMAND", "/usr/bin/hearth serve"),
        ("XDG_SESSION_ID", "42"),
        ("XDG_RUNTIME_DIR", "/run/user/0"),
        ("MAIL", "/var/mail/root"),
        ("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/0/bus"),
        ("KRB5CCNAME", "FILE:/tmp/krb5cc_0"),
    ];
    let mut cmd = serve_command(&support::hearth_bin(), &script, &["--user", "www-data"]);
    cmd.envs(session)
        .env("HOME", "/root")
        .env("USER", "root")
        .env("LOGNAME", "root")
        .env("SHELL", "/bin/bash")
        .env("APP_SETTING", "passed on");
    let server = Server::spawn_command(cmd);
    server.wait_until_ready();
    let (getenv, keys) = worker_environment(&server);
    let passwd = std::fs::read_to_string("/etc/passwd").expect("/etc/passwd");
    let entry: Vec<&str> = passwd
        .lines()
        .find(|l| l.starts_with("www-data:"))
        .expect("www-data in /etc/passwd")
        .split(':')
        .collect();
    assert_eq!(getenv["HOME"], entry[5], "{getenv:?}");
    assert_eq!(getenv["SHELL"], entry[6]);
    assert_eq!(getenv["USER"], "www-data");
    assert_eq!(getenv["LOGNAME"], "www-data");
    for (name, _) in session {
        assert!(!getenv.contains_key(name), "{name} reached PHP: {getenv:?}");
        assert!(!keys.iter().any(|k| k == name), "{name} in $_SERVER");
    }
    assert_eq!(getenv["APP_SETTING"], "passed on");
    assert!(keys.iter().any(|k| k == "APP_SETTING"));
    assert!(keys.iter().any(|k| k == "HOME"));
}

/// Issue 16 (8): `--clear-env` (php-fpm's clear_env) starts workers from
/// an empty environment: they get the `--env` variables, set or passed
/// from Hearth's, and nothing else (no USER and HOME either: the workers
/// run as Hearth's user here).
#[test]
fn clear_env_gives_workers_only_the_variables_named() {
    let root = support::as_root();
    let with = |args: &[&str]| -> Vec<String> {
        let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        args.extend(root.iter().cloned());
        args
    };
    let args = with(&["--clear-env", "--env", "APP_ENV=test", "--env", "PATH"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut cmd = serve_command(&support::hearth_bin(), &fixture("process.php"), &args);
    cmd.env("SECRET_TOKEN", "must not reach PHP")
        .env("PATH", "/usr/local/bin:/usr/bin:/bin");
    let server = Server::spawn_command(cmd);
    server.wait_until_ready();
    let (getenv, keys) = worker_environment(&server);
    let names: Vec<&str> = getenv.keys().map(String::as_str).collect();
    assert_eq!(names, ["APP_ENV", "PATH"], "{getenv:?}");
    assert_eq!(getenv["APP_ENV"], "test");
    assert_eq!(getenv["PATH"], "/usr/local/bin:/usr/bin:/bin");
    assert!(!keys.iter().any(|k| k == "SECRET_TOKEN" || k == "HOME"));
    // Without it, the environment is passed on (as RoadRunner, FrankenPHP
    // and php-fpm's default do), with the --env variables over it.
    let args = with(&["--env", "APP_ENV=test"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut cmd = serve_command(&support::hearth_bin(), &fixture("process.php"), &args);
    cmd.env("SECRET_TOKEN", "passed on").env("APP_ENV", "prod");
    let server = Server::spawn_command(cmd);
    server.wait_until_ready();
    let (getenv, _) = worker_environment(&server);
    assert_eq!(getenv["SECRET_TOKEN"], "passed on");
    assert_eq!(getenv["APP_ENV"], "test", "--env wins");
}

/// The shell command that opens `file` on descriptor 9 (not close-on-exec,
/// as a shell's redirection leaves it) and then runs its arguments.
fn with_descriptor_9(file: &Path) -> Command {
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(format!("exec 9<'{}'; exec \"$@\"", file.display()))
        .arg("bash");
    cmd
}

/// Issue 16: a descriptor Hearth inherited (a shell's `9<file`, a
/// supervisor's socket) does not reach its workers: they have their
/// channel and standard output and error, and what PHP opens itself.
#[test]
fn workers_do_not_inherit_the_descriptors_hearth_inherited() {
    let dir = support::tempdir();
    let secret = dir.path().join("inherited-secret");
    std::fs::write(&secret, "only for hearth").expect("write");
    let mut cmd = with_descriptor_9(&secret);
    cmd.arg(support::hearth_bin())
        .arg("serve")
        .arg(fixture("process.php"))
        .args(["--listen", "127.0.0.1:0", "--workers", "1", "--php"])
        .arg(support::php_binary())
        .args(support::as_root());
    let server = Server::spawn_command(cmd);
    server.wait_until_ready();
    let r = server.get("/fds");
    assert_eq!(r.status, 200, "{}", r.text());
    let fds = r.json()["fds"].clone();
    let fds = fds.as_object().expect("fds");
    let secret = secret.to_string_lossy();
    assert!(
        !fds.values().any(|target| target == secret.as_ref()),
        "the worker has {secret} open: {fds:?}"
    );
    assert!(!fds.contains_key("9"), "{fds:?}");
    // Hearth itself did inherit it (the test opens what it means to).
    let hearth_fd = std::fs::read_link(format!("/proc/{}/fd/9", server.pid())).ok();
    assert_eq!(hearth_fd.as_deref(), Some(Path::new(secret.as_ref())));
}

/// Issue 16: `hearth run` passes what it inherited to its shell tasks, as
/// GNU parallel does (`hearth run ... 3>log` lets tasks write to it), but
/// not to its PHP job workers, which are Hearth's own processes.
#[test]
fn run_tasks_inherit_descriptors_and_php_job_workers_do_not() {
    let dir = support::tempdir();
    let secret = dir.path().join("inherited");
    std::fs::write(&secret, "x").expect("write");
    let bootstrap = dir.path().join("bootstrap.php");
    std::fs::write(
        &bootstrap,
        "<?php\nfunction fd9(): string { return (string) @readlink('/proc/self/fd/9'); }\n",
    )
    .expect("write");
    let run = |input: &str, extra: &[&str]| -> Vec<Value> {
        let mut cmd = with_descriptor_9(&secret);
        cmd.arg(support::hearth_bin()).arg("run").args(extra);
        let mut child = cmd
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("hearth run");
        use std::io::Write as _;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("input");
        let out = child.wait_with_output().expect("wait");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).expect("JSON line"))
            .collect()
    };
    let tasks = run(r#"{"id": 1, "cmd": "readlink /proc/self/fd/9"}"#, &[]);
    assert_eq!(
        tasks[0]["stdout"].as_str().map(str::trim),
        Some(secret.to_string_lossy().as_ref()),
        "{tasks:?}"
    );
    let jobs = run(
        r#"{"id": 1, "call": "fd9", "args": []}"#,
        &["--php-bootstrap", &bootstrap.to_string_lossy(), "-j", "1"],
    );
    assert_eq!(jobs[0]["result"], "", "{jobs:?}");
}

/// Runs `script` (sh) as root in a mount namespace of its own, where /tmp
/// and /run are empty: what it makes there (a directory another user made
/// first) is seen by nothing else on the machine.
fn in_private_tmp_and_run(script: &str) -> Command {
    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(format!(
            "mount -t tmpfs tmpfs /tmp && mount -t tmpfs tmpfs /run && {script}"
        ))
        .arg("sh")
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("TMPDIR");
    cmd
}

/// Issue 16: any local user could make `/tmp/hearth-0` first and keep
/// Hearth, started by root, from starting. As root the default control
/// socket is in `/run/hearth`, which only root can make; and `hearth
/// status` finds it there.
#[test]
#[ignore = "needs root: run with --ignored as root"]
fn as_root_the_control_socket_is_not_in_a_directory_another_user_made() {
    needs_root();
    // The app lives outside /tmp, which the namespace hides.
    let (_app, script) = reachable_copy(Path::new(env!("CARGO_TARGET_TMPDIR")), false);
    let mut cmd = in_private_tmp_and_run(
        "mkdir -m 0777 /tmp/hearth-0 && chown 65534:65534 /tmp/hearth-0 && exec \"$@\"",
    );
    cmd.arg(support::hearth_bin())
        .arg("serve")
        .arg(&script)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--workers",
            "1",
            "--user",
            "root",
            "--php",
        ])
        .arg(support::php_binary());
    let server = Server::spawn_command(cmd);
    server.wait_until_ready();
    let socket = format!("/run/hearth/{}.sock", server.addr);
    assert!(
        server
            .log()
            .contains(&format!("control socket at {socket}")),
        "{}",
        server.log()
    );
    // `hearth status` as root finds it, in the server's mount namespace.
    let out = Command::new("nsenter")
        .arg("--mount")
        // The spawned unshare execs a shell, which execs hearth: the same
        // process.
        .arg(format!("--target={}", server.pid()))
        .arg(support::hearth_bin())
        .args(["status", "--json", "--listen", &server.addr.to_string()])
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .expect("nsenter hearth status");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status: Value = serde_json::from_slice(&out.stdout).expect("status JSON");
    assert_eq!(status["listen"], server.addr.to_string());
}

/// Runs `hearth serve` as `uid` in a private /tmp and /run where `setup`
/// (sh, as root) ran first, and returns what it printed; it must refuse
/// to start.
fn refusal(setup: &str, uid: u32, bin: &Path, script: &Path) -> String {
    let mut cmd = in_private_tmp_and_run(&format!(
        "{setup} && exec setpriv --reuid {uid} --regid {uid} --clear-groups \"$@\""
    ));
    cmd.arg(bin)
        .arg("serve")
        .arg(script)
        .args(["--listen", "127.0.0.1:0", "--workers", "1", "--php"])
        .arg(support::php_binary());
    if uid == 0 {
        cmd.args(["--user", "root"]);
    }
    let out = support::output_within(&mut cmd, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(1), "hearth refuses to start");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Issue 16: a control socket directory that another user owns, or that
/// others can write to, is refused with a message that says so and what
/// to do, as root (`/run/hearth`) and as another user (`/tmp/hearth-UID`,
/// without a runtime directory of that user's).
#[test]
#[ignore = "needs root: run with --ignored as root"]
fn a_control_socket_directory_another_user_owns_is_refused_with_its_owner() {
    needs_root();
    // Outside /tmp and /run, which the namespace hides, and reachable by
    // www-data wherever this checkout is (a clone in /root is not).
    let (app, script) = reachable_copy(Path::new("/var/tmp"), true);
    let bin = app.path().join("hearth");
    let err = refusal(
        "mkdir -m 0755 /run/hearth && chown 33:33 /run/hearth",
        0,
        &bin,
        &script,
    );
    assert!(
        err.contains("/run/hearth is owned by www-data (uid 33), not by root (uid 0)")
            && err.contains("--control-socket"),
        "{err}"
    );
    let err = refusal("mkdir -m 0777 /tmp/hearth-33", 33, &bin, &script);
    assert!(
        err.contains("/tmp/hearth-33 is owned by root (uid 0), not by www-data (uid 33)"),
        "{err}"
    );
    let err = refusal(
        "mkdir -m 0777 /tmp/hearth-33 && chown 33:33 /tmp/hearth-33",
        33,
        &bin,
        &script,
    );
    assert!(
        err.contains("/tmp/hearth-33 can be written by its group or by others (mode 0777)"),
        "{err}"
    );
}
