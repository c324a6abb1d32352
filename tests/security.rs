//! Security defaults: PHP never runs as root unless told to, and workers
//! running as another user get what they need (their pipes, uploads, the
//! built-in demo) and nothing more.

#[path = "support/mod.rs"]
mod support;

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use support::{fixture, Req, Server};

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// The real uid of a process, from /proc.
fn uid_of(pid: u64) -> u32 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|u| u.parse().ok())
        .expect("Uid line")
}

const NEEDS_ROOT: &str = "needs root: run with --ignored as root";

/// For the tests that need root: they are `#[ignore]`d, so that a run as
/// another user shows them as ignored instead of passing them silently;
/// `make test` runs them with `--ignored` as root.
fn needs_root() {
    assert!(is_root(), "{NEEDS_ROOT}");
}

/// The supplementary groups of a process, from /proc, sorted.
fn groups_of(pid: u64) -> Vec<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let mut groups: Vec<u32> = status
        .lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .expect("Groups line")
        .split_whitespace()
        .map(|g| g.parse().expect("gid"))
        .collect();
    groups.sort_unstable();
    groups
}

#[test]
#[ignore = "needs root: run with --ignored as root"]
fn as_root_hearth_refuses_to_run_php_as_root_unless_told_to() {
    needs_root();
    let out = Command::new(env!("CARGO_BIN_EXE_hearth"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .arg(fixture("app.php"))
        .env("NO_COLOR", "1")
        .output()
        .expect("hearth runs");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--user"), "the error says what to do: {err}");
    // Told to, it does.
    let server = Server::start(&fixture("app.php"), &["--user", "root"]);
    let pid = server.get("/pid").json()["pid"].as_u64().expect("pid");
    assert_eq!(uid_of(pid), 0);
    assert!(server.log().contains("workers run as root"));
}

#[test]
fn as_another_user_than_root_user_names_only_that_user() {
    // As root, the same binary is run as www-data, from a link (or, on
    // another file system, a copy) that user can reach. A link, because
    // a copy's file is open for writing for a moment, and a process that
    // another test forks in that moment keeps it open until it execs:
    // running the copy then fails with "Text file busy".
    let copy = support::reachable_tempdir();
    let mut cmd = if is_root() {
        let bin = copy.path().join("hearth");
        if std::fs::hard_link(env!("CARGO_BIN_EXE_hearth"), &bin).is_err() {
            std::fs::copy(env!("CARGO_BIN_EXE_hearth"), &bin).expect("copy hearth");
        }
        let mut cmd = Command::new(bin);
        cmd.uid(33).gid(33);
        cmd
    } else {
        Command::new(env!("CARGO_BIN_EXE_hearth"))
    };
    let script = copy.path().join("worker.php");
    std::fs::write(&script, "<?php\n").expect("write");
    let refused = support::output_within(
        cmd.args(["serve", "--user", "0", "--listen", "127.0.0.1:0"])
            .arg(&script)
            .env("XDG_RUNTIME_DIR", copy.path()),
        Duration::from_secs(30),
    );
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("only root"));
}

/// A copy of the test app (tests/fixtures/app.php and the PHP library it
/// requires) in a directory that other users can reach, wherever this
/// checkout is (a clone in a 0700 home directory included).
fn reachable_app() -> (tempfile::TempDir, PathBuf) {
    let dir = support::reachable_tempdir();
    support::copy_tree(&support::root().join("php"), &dir.path().join("php"));
    let fixtures = dir.path().join("tests/fixtures");
    for d in [dir.path().join("tests"), fixtures.clone()] {
        std::fs::create_dir(&d).expect("mkdir");
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let script = fixtures.join("app.php");
    support::copy_tree(&fixture("app.php"), &script);
    (dir, script)
}

#[test]
#[ignore = "needs root: run with --ignored as root"]
fn workers_run_as_the_user_given_and_still_get_uploads() {
    needs_root();
    let (_app, script) = reachable_app();
    let server = Server::start(&script, &["--user", "www-data"]);
    let pid = server.get("/pid").json()["pid"].as_u64().expect("pid");
    assert_eq!(uid_of(pid), 33, "www-data's uid on Debian");
    // Its group and supplementary groups, as initgroups() gives them;
    // none of Hearth's.
    let mut expected: Vec<u32> = vec![33];
    for line in std::fs::read_to_string("/etc/group")
        .expect("/etc/group")
        .lines()
    {
        let fields: Vec<&str> = line.split(':').collect();
        if fields.len() > 3 && fields[3].split(',').any(|m| m == "www-data") {
            expected.push(fields[2].parse().expect("gid"));
        }
    }
    expected.sort_unstable();
    expected.dedup();
    assert_eq!(groups_of(pid), expected);
    let content = b"uploaded to a worker that is not root".to_vec();
    let moved = Req::new("POST", "/upload")
        .multipart(&[("doc", Some("r.txt"), Some("text/plain"), &content)])
        .send(server.addr)
        .json();
    assert_eq!(moved["doc"]["is_uploaded"], true, "{moved}");
    assert_eq!(
        moved["doc"]["moved"], true,
        "the worker can read and move it: {moved}"
    );
}

/// Issue 21: Hearth probes PHP as the workers' user. An extension beside
/// the binary in a directory only root can enter does not load into
/// www-data's workers: Hearth says so and they use the PHP library's
/// request startup, uploads included (Hearth probed as root before, took
/// the extension for loaded, and PHP's own move_uploaded_file() refused
/// every upload).
#[test]
#[ignore = "needs root: run with --ignored as root"]
fn an_extension_the_workers_user_cannot_read_is_not_counted_on() {
    needs_root();
    let (_app, script) = reachable_app();
    let private = support::tempdir();
    std::fs::set_permissions(private.path(), std::fs::Permissions::from_mode(0o700))
        .expect("chmod 0700");
    let bin = private.path().join("hearth");
    std::fs::copy(support::hearth_bin(), &bin).expect("copy hearth");
    let built = std::fs::read_dir(support::root().join("target/php-ext"))
        .ok()
        .and_then(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .find(|p| p.extension().is_some_and(|x| x == "so"))
        })
        .expect("the extension built in target/php-ext (make ext)");
    let ext = private.path().join(built.file_name().expect("name"));
    std::fs::copy(&built, &ext).expect("copy the extension");
    let mut cmd = std::process::Command::new(&bin);
    cmd.arg("serve").arg(&script).args([
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "1",
        "--user",
        "www-data",
    ]);
    let server = Server::spawn_command(cmd);
    server.wait_until_ready();
    let log = server.log();
    assert!(
        log.contains(&format!(
            "the Hearth extension {} does not load",
            ext.display()
        )) && log.contains("no Hearth extension"),
        "{log}"
    );
    let content = b"uploaded past an unreadable extension".to_vec();
    let moved = Req::new("POST", "/upload")
        .multipart(&[("doc", Some("r.txt"), Some("text/plain"), &content)])
        .send(server.addr)
        .json();
    assert_eq!(moved["doc"]["is_uploaded"], true, "{moved}");
    assert_eq!(moved["doc"]["moved"], true, "{moved}");
}

/// Issue 8 (9): a raw body spooled to a file is handed to the workers'
/// user, who can read it; nobody else can.
#[test]
#[ignore = "needs root: run with --ignored as root"]
fn a_spooled_request_body_reaches_a_worker_running_as_another_user() {
    needs_root();
    let (_app, app_script) = reachable_app();
    let script = app_script.with_file_name("bodies.php");
    support::copy_tree(&fixture("bodies.php"), &script);
    let tmp = support::tempdir();
    let flag = format!("upload_tmp_dir={}", tmp.path().display());
    // The workers' user must reach the directory, as PHP's own would.
    std::fs::set_permissions(
        tmp.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o1777),
    )
    .expect("chmod");
    let server = Server::start(
        &script,
        &["--user", "www-data", "-d", &flag, "--workers", "1"],
    );
    let body: Vec<u8> = (0..1_000_000u32).map(|i| (i % 253) as u8).collect();
    let r = Req::new("PUT", "/digest")
        .body(body.clone())
        .send(server.addr);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["length"], body.len());
    assert_eq!(r.json()["md5"], format!("{:x}", md5::compute(&body)));
    let r = Req::new("PUT", "/spooled")
        .body(vec![b'x'; 100_000])
        .send(server.addr);
    assert_eq!(r.json()["files"], 1, "{}", r.text());
}

/// `hearth serve ARGS --user www-data`, to its end; it must refuse to
/// start, and its error is returned.
fn refused(args: &[&Path]) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hearth"));
    cmd.args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--user",
        "www-data",
        "-w",
        "1",
    ])
    .args(args)
    .env("NO_COLOR", "1");
    let out = support::output_within(&mut cmd, Duration::from_secs(30));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "refused at start: {err}");
    err
}

#[test]
#[ignore = "needs root: run with --ignored as root"]
fn serve_refuses_a_worker_user_who_cannot_reach_the_app_naming_what_stops_it() {
    needs_root();
    let (app, script) = reachable_app();
    let fixtures = script.parent().expect("fixtures dir").to_path_buf();
    let mode = |path: &Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod")
    };
    // A directory on the way that www-data cannot enter (a 0700 home).
    mode(&fixtures, 0o700);
    let err = refused(&[&script]);
    assert!(
        err.contains(&format!(
            "cannot enter the directory {}",
            fixtures.display()
        )),
        "{err}"
    );
    assert!(
        err.contains("www-data") && err.contains("mode 0700"),
        "{err}"
    );
    // The script itself unreadable.
    mode(&fixtures, 0o755);
    mode(&script, 0o600);
    let err = refused(&[&script]);
    assert!(
        err.contains(&format!("cannot read {}", script.display())),
        "{err}"
    );
    mode(&script, 0o644);
    // The document root closed.
    let public = app.path().join("public");
    std::fs::create_dir(&public).expect("mkdir");
    mode(&public, 0o700);
    let err = refused(&[&script, Path::new("--root"), &public]);
    assert!(
        err.contains(&format!("enter the document root {}", public.display())),
        "{err}"
    );
    // Reachable, it serves.
    mode(&public, 0o755);
    let socket = app
        .path()
        .join("control.sock")
        .to_string_lossy()
        .into_owned();
    let server = Server::start(
        &script,
        &[
            "--user",
            "www-data",
            "--root",
            &public.to_string_lossy(),
            "--control-socket",
            &socket,
        ],
    );
    assert_eq!(server.get("/pid").status, 200);
    // A reload checks again, and leaves the workers serving.
    mode(&fixtures, 0o700);
    let out = support::ctl(&["reload", "--control-socket", &socket]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "cannot enter the directory {}",
            fixtures.display()
        )),
        "{err}"
    );
    assert_eq!(server.get("/pid").status, 200);
}

/// Runs PHP code with the CLI as www-data (uid and gid 33, no other
/// group): a process of the workers' user that is not a worker.
fn php_as_www_data(code: &str, args: &[String]) -> String {
    let mut cmd = Command::new("php");
    cmd.arg("-r")
        .arg(code)
        .args(args)
        .uid(33)
        .gid(33)
        .current_dir("/");
    let out = support::output_within(&mut cmd, Duration::from_secs(30));
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    said
}

/// A whole response (HEAD, BODY, END) to request `id`, in frames.
fn forged_response(id: u32) -> Vec<u8> {
    let frame = |kind: u8, payload: &[u8]| {
        let mut f = vec![1, kind, 0, 0];
        f.extend_from_slice(&id.to_be_bytes());
        f.extend_from_slice(&u32::try_from(payload.len()).expect("len").to_be_bytes());
        f.extend_from_slice(payload);
        f
    };
    let mut head = 200u16.to_be_bytes().to_vec();
    head.extend_from_slice(b"X-Forged: yes");
    [frame(5, &head), frame(3, b"forged"), frame(4, b"")].concat()
}

/// Tries, as www-data, to open each pipe, FIFO and socket that process
/// `pid` holds through `/proc/PID/fd/N`, as a shell redirection does (the
/// kernel follows the link), and to write `bytes` into it. One line per
/// descriptor: `fd N (what): written` or why not.
fn write_through_proc_as_www_data(pid: u64, bytes: &[u8], scratch: &Path) -> String {
    use std::os::unix::fs::FileTypeExt as _;
    let payload = scratch.join("forged");
    std::fs::write(&payload, bytes).expect("write");
    std::fs::set_permissions(&payload, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let mut report = String::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd")).expect("fds") {
        let path = entry.expect("fd").path();
        let Ok(kind) = std::fs::metadata(&path).map(|m| m.file_type()) else {
            continue;
        };
        if !kind.is_fifo() && !kind.is_socket() {
            continue;
        }
        let link = std::fs::read_link(&path).unwrap_or_default();
        let mut sh = Command::new("sh");
        sh.arg("-c")
            .arg(r#"cat "$1" > "$2""#)
            .arg("sh")
            .arg(&payload)
            .arg(&path)
            .uid(33)
            .gid(33)
            .current_dir("/");
        let out = support::output_within(&mut sh, Duration::from_secs(10));
        let how = if out.status.success() {
            "written".to_owned()
        } else {
            String::from_utf8_lossy(&out.stderr).trim().to_owned()
        };
        report.push_str(&format!(
            "fd {} ({}): {how}\n",
            path.file_name().expect("fd").to_string_lossy(),
            link.display()
        ));
    }
    report
}

/// Issue 16 (6): a process of the workers' user cannot reopen a
/// worker's channel through /proc and answer a request in its place.
#[test]
#[ignore = "needs root: run with --ignored as root"]
fn a_process_of_the_workers_user_cannot_forge_a_response_through_proc() {
    needs_root();
    let (app, script) = reachable_app();
    let marks = app.path().join("marks");
    std::fs::create_dir(&marks).expect("mkdir");
    std::fs::set_permissions(&marks, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let server = Server::start(&script, &["--user", "www-data", "--workers", "2"]);
    // The worker that answers this is on top of the idle stack, so it
    // gets the next request too, whose id is one more than its count.
    let first = server.get("/pid").json();
    let pid = first["pid"].as_u64().expect("pid");
    let next_id = first["served"].as_u64().expect("served") + 1;
    let started = marks.join("started");
    let addr = server.addr;
    let path = format!("/slow?ms=3000&mark={}", started.display());
    let victim = std::thread::spawn(move || {
        support::request(
            addr,
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
    });
    support::eventually(Duration::from_secs(10), "the request to start", || {
        started.exists().then_some(())
    });
    let id = u32::try_from(next_id).expect("id");
    let attempts = write_through_proc_as_www_data(pid, &forged_response(id), &marks);
    let answer = victim.join().expect("client");
    assert!(
        !attempts.contains("written"),
        "a channel of worker {pid} was opened again:\n{attempts}"
    );
    assert_eq!(answer.header("x-forged"), None, "{attempts}");
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.json()["pid"], pid, "the worker's own answer");
}

/// Issue 16 (5): the front, as root, operates on no directory that the
/// workers' user can write for its workers' channels, so a link planted
/// by that user is never followed and cannot keep workers from booting.
#[test]
#[ignore = "needs root: run with --ignored as root"]
fn the_workers_user_cannot_plant_links_where_the_front_makes_channels() {
    needs_root();
    let (_app, script) = reachable_app();
    // Where Hearth may put runtime files: a runtime directory, and a
    // temporary directory every user can write (as /tmp).
    let runtime = support::reachable_tempdir();
    let tmp = support::tempdir();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o1777)).expect("chmod");
    let private = support::tempdir();
    std::fs::set_permissions(private.path(), std::fs::Permissions::from_mode(0o700))
        .expect("chmod 0700");
    let target = private.path().join("target");
    std::fs::write(&target, "root's").expect("write");
    let socket = private.path().join("control.sock");
    let args: Vec<String> = [
        "serve",
        &script.to_string_lossy(),
        "--listen",
        "127.0.0.1:0",
        "--php",
        &support::php_binary(),
        "--workers",
        "2",
        "--user",
        "www-data",
        "--control-socket",
        &socket.to_string_lossy(),
    ]
    .map(String::from)
    .to_vec();
    let mut cmd = Command::new(support::hearth_bin());
    cmd.args(&args)
        .env("XDG_RUNTIME_DIR", runtime.path())
        .env("TMPDIR", tmp.path());
    let server = Server::spawn_command(cmd);
    server.wait_until_ready();
    // As www-data: a link to root's file under every name a worker's
    // channel ever had, in every directory there that www-data can write.
    let planted = php_as_www_data(
        r#"
        [, $target, $runtime, $tmp] = $argv;
        $dirs = [$runtime, $tmp];
        foreach ([$runtime, $tmp] as $top) {
            foreach (glob("$top/*", GLOB_ONLYDIR) ?: [] as $dir) {
                $dirs[] = $dir;
            }
        }
        foreach ($dirs as $dir) {
            if (!is_writable($dir)) {
                continue;
            }
            for ($n = 0; $n < 64; $n++) {
                @symlink($target, "$dir/worker-$n.fifo");
            }
            echo "$dir\n";
        }
        "#,
        &[
            target.to_string_lossy().into_owned(),
            runtime.path().to_string_lossy().into_owned(),
            tmp.path().to_string_lossy().into_owned(),
        ],
    );
    let writable: Vec<&str> = planted
        .lines()
        .filter(|d| *d != tmp.path().to_string_lossy())
        .collect();
    // Workers boot as before: a reload replaces every one.
    let out = support::ctl(&["reload", "--control-socket", &socket.to_string_lossy()]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "reload after links were planted in {planted}: {said}\n{}",
        server.log()
    );
    assert_eq!(server.get("/pid").status, 200);
    let meta = std::fs::metadata(&target).expect("target");
    assert_eq!((meta.uid(), meta.gid()), (0, 0), "root's file stays root's");
    assert_eq!(
        writable,
        Vec::<&str>::new(),
        "directories made by Hearth that www-data can write"
    );
}

#[test]
#[ignore = "needs root: run with --ignored as root"]
fn the_built_in_demo_runs_as_another_user() {
    needs_root();
    let server = Server::spawn_args(&[
        "serve".into(),
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--user".into(),
        "www-data".into(),
    ]);
    server.wait_until_ready();
    let r = server.get("/");
    assert_eq!(r.status, 200, "{}", server.log());
}

#[test]
fn x_forwarded_headers_count_only_from_trusted_proxies() {
    let forwarded = |server: &Server| {
        Req::new("GET", "/env")
            .header("X-Forwarded-For", "198.51.100.1, 203.0.113.5")
            .header("X-Forwarded-Proto", "https")
            .send(server.addr)
            .json()["server"]
            .clone()
    };
    // Not configured: the socket's peer, and the headers passed on as is.
    let server = Server::start(&fixture("app.php"), &[]);
    let vars = forwarded(&server);
    assert_eq!(vars["REMOTE_ADDR"], "127.0.0.1");
    assert!(vars.get("HTTPS").is_none(), "{vars}");
    assert_eq!(vars["HTTP_X_FORWARDED_FOR"], "198.51.100.1, 203.0.113.5");
    drop(server);
    // Trusted: the client as the proxy reports it (the right-most entry).
    let server = Server::start(&fixture("app.php"), &["--trusted-proxy", "127.0.0.0/8"]);
    let vars = forwarded(&server);
    assert_eq!(vars["REMOTE_ADDR"], "203.0.113.5");
    assert_eq!(vars["HTTPS"], "on");
    assert_eq!(vars["REQUEST_SCHEME"], "https");
    // A bad network is refused at startup, naming the flag.
    let out = Command::new(env!("CARGO_BIN_EXE_hearth"))
        .args(["serve", "--trusted-proxy", "10.0.0.0/99"])
        .output()
        .expect("hearth runs");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--trusted-proxy"));
}
