//! Security defaults: PHP never runs as root unless told to, and workers
//! running as another user get what they need (their pipes, uploads, the
//! built-in demo) and nothing more.

#[path = "support/mod.rs"]
mod support;

use std::process::Command;

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

#[test]
fn as_root_hearth_refuses_to_run_php_as_root_unless_told_to() {
    if is_root() {
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
    } else {
        // Not root: --user for someone else is refused.
        let refused = Command::new(env!("CARGO_BIN_EXE_hearth"))
            .args(["serve", "--user", "0", "--listen", "127.0.0.1:0"])
            .arg(fixture("app.php"))
            .output()
            .expect("hearth runs");
        assert_eq!(refused.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&refused.stderr).contains("only root"));
    }
}

#[test]
fn workers_run_as_the_user_given_and_still_get_uploads() {
    if !is_root() {
        // Only root can switch users; the refusal is tested above.
        return;
    }
    let server = Server::start(&fixture("app.php"), &["--user", "www-data"]);
    let pid = server.get("/pid").json()["pid"].as_u64().expect("pid");
    assert_eq!(uid_of(pid), 33, "www-data's uid on Debian");
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

/// Issue 8 (9): a raw body spooled to a file is handed to the workers'
/// user, who can read it; nobody else can.
#[test]
fn a_spooled_request_body_reaches_a_worker_running_as_another_user() {
    if !is_root() {
        return;
    }
    let tmp = support::tempdir();
    let flag = format!("upload_tmp_dir={}", tmp.path().display());
    // The workers' user must reach the directory, as PHP's own would.
    std::fs::set_permissions(
        tmp.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o1777),
    )
    .expect("chmod");
    let server = Server::start(
        &fixture("bodies.php"),
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

#[test]
fn the_built_in_demo_runs_as_another_user() {
    if !is_root() {
        return;
    }
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
