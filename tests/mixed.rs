//! Mixed sites: a worker script and `--root` together
//! (tests/fixtures/mixed). The front controller runs in the warm workers
//! (its per-process counter grows); every other `.php` entry runs in a
//! php-fpm pool with PHP's own request lifecycle (a fresh process state
//! each time), with the FastCGI parameters nginx + php-fpm give it; prefix
//! routes move areas either way; `--classic off` keeps worker mode; status,
//! reload, stop, the access log and `/metrics` cover both pools.

#[path = "support/reference.rs"]
mod reference;
#[path = "support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use reference::Reference;
use serde_json::Value;
use support::{Req, Server};

/// The fixture site: index.php (the worker script), legacy.php,
/// admin/legacy.php, hello.txt.
fn site() -> PathBuf {
    support::fixture("mixed")
}

/// `hearth serve mixed/index.php --root mixed` with one worker (so that
/// its counter counts every request the workers ran) and `extra`.
fn hearth(extra: &[&str]) -> Server {
    let root = site().display().to_string();
    let mut args = vec!["--workers", "1", "--root", &root];
    args.extend_from_slice(extra);
    Server::start(&site().join("index.php"), &args)
}

fn get(server: &Server, path: &str) -> Value {
    let r = server.get(path);
    assert_eq!(r.status, 200, "GET {path}: {}", r.text());
    r.json()
}

/// The php-fpm master's pid, from the start line.
fn fpm_master(server: &Server) -> u32 {
    let log = server.log();
    log.split("in php-fpm (up to ")
        .nth(1)
        .and_then(|rest| rest.split("; pid ").nth(1))
        .and_then(|rest| rest.split(',').next())
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("no php-fpm pid in the log:\n{log}"))
}

/// The processes whose process group is `master`'s, the master included
/// (php-fpm and its children), from /proc.
fn process_group(master: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp ...
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let pgrp = stat[close + 2..]
            .split_whitespace()
            .nth(2)
            .and_then(|p| p.parse::<u32>().ok());
        if pid == master || pgrp == Some(master) {
            found.push(pid);
        }
    }
    found
}

fn control_socket(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("control.sock")
}

#[test]
fn the_front_controller_runs_in_the_workers_and_other_scripts_in_php_fpm() {
    let server = hearth(&[]);
    // The front controller: `/`, a miss through the fallback, the script by
    // name with a path after it; one warm worker counts them all.
    let mut served = Vec::new();
    for path in ["/", "/x/y?a=1", "/index.php/p"] {
        let answer = get(&server, path);
        assert_eq!(
            (answer["script"].as_str(), answer["runtime"].as_str()),
            (Some("index"), Some("worker")),
            "{path}: {answer}"
        );
        served.push(answer["served"].as_u64().expect("served"));
    }
    assert_eq!(served, [1, 2, 3], "one warm process served them in turn");

    // A classic script, twice: php-fpm, each time from a fresh state (its
    // function at file scope would be a fatal redeclaration in a warm
    // process, its global counter would be 2).
    for _ in 0..2 {
        let legacy = get(&server, "/legacy.php");
        assert_eq!(legacy["runtime"], "php-fpm", "{legacy}");
        assert_eq!(legacy["greeting"], "hello from legacy");
        assert_eq!(legacy["runs"], 1, "a fresh process state: {legacy}");
        assert_eq!(legacy["SCRIPT_NAME"], "/legacy.php");
        assert_eq!(legacy["PATH_INFO"], "");
    }
    let admin = get(&server, "/admin/legacy.php");
    assert_eq!(
        (&admin["runtime"], &admin["runs"], &admin["SCRIPT_NAME"]),
        (&"php-fpm".into(), &1.into(), &"/admin/legacy.php".into()),
        "{admin}"
    );

    // The workers ran none of them.
    assert_eq!(get(&server, "/")["served"], 4);

    // Static files, redirects and 404s as classic mode answers them.
    let text = server.get("/hello.txt");
    assert_eq!(
        (text.status, text.text().as_str()),
        (200, "hello, static\n")
    );
    let dir = server.get("/admin");
    assert_eq!(dir.status, 301);
    assert!(
        dir.header("location")
            .is_some_and(|l| l.ends_with("/admin/")),
        "{:?}",
        dir.headers
    );
    assert_eq!(server.get("/missing.php").status, 404);
    assert_eq!(server.get("/uploads/../../etc/passwd").status, 400);
}

/// The classic scripts get what nginx + php-fpm (Debian's
/// snippets/fastcgi-php.conf) give them: the reference runs the same site.
#[test]
fn classic_scripts_get_the_fastcgi_params_nginx_gives_them() {
    let server = hearth(&[]);
    let nginx = Reference::start_with(&site(), "index.php", &[("NGINX_SITE", "classic")]);
    let fields = [
        "script",
        "runtime",
        "SCRIPT_NAME",
        "SCRIPT_FILENAME",
        "PATH_INFO",
        "PHP_SELF",
        "DOCUMENT_ROOT",
        "QUERY_STRING",
    ];
    for path in [
        "/legacy.php",
        "/legacy.php/extra/path?q=1&r",
        "/admin/legacy.php?x",
    ] {
        let h = get(&server, path);
        let r = Req::new("GET", path).send(nginx.addr);
        assert_eq!(r.status, 200, "nginx {path}: {}", r.text());
        let n = r.json();
        for field in fields {
            assert_eq!(h[field], n[field], "{field} of {path}");
        }
    }
    let extra = get(&server, "/legacy.php/extra/path?q=1&r");
    assert_eq!(
        (&extra["PATH_INFO"], &extra["PHP_SELF"]),
        (&"/extra/path".into(), &"/legacy.php/extra/path".into())
    );
}

#[test]
fn prefix_routes_move_an_area_to_php_fpm_or_to_the_workers() {
    let dir = support::tempdir();
    let config = dir.path().join("hearth.toml");
    std::fs::write(
        &config,
        "[serve]\n\
         [[serve.route]]\nprefix = \"/reports/\"\nto = \"classic\"\n\
         [[serve.route]]\nprefix = \"/admin/\"\nto = \"worker\"\n\
         [[serve.route]]\nprefix = \"/admin/old/\"\nto = \"classic\"\n",
    )
    .expect("test setup");
    let server = hearth(&["--config", &config.display().to_string()]);
    // Under a classic prefix the front controller runs in php-fpm: a
    // fresh process, its counter at 1 every time.
    for _ in 0..2 {
        let report = get(&server, "/reports/q3?year=2024");
        assert_eq!(
            (&report["script"], &report["runtime"], &report["served"]),
            (&"index".into(), &"php-fpm".into(), &1.into()),
            "{report}"
        );
        assert_eq!(report["QUERY_STRING"], "year=2024");
    }
    // Under a worker prefix an existing .php goes to the worker script.
    let admin = get(&server, "/admin/legacy.php");
    assert_eq!(
        (&admin["script"], &admin["runtime"]),
        (&"index".into(), &"worker".into()),
        "{admin}"
    );
    // The longest prefix wins: /admin/old/ is classic again (a miss there
    // runs the front controller in php-fpm).
    let old = get(&server, "/admin/old/page");
    assert_eq!(old["runtime"], "php-fpm", "{old}");
    // Elsewhere, as without routes.
    assert_eq!(get(&server, "/")["runtime"], "worker");
    assert_eq!(get(&server, "/legacy.php")["runtime"], "php-fpm");

    // The same with the flag.
    let server = hearth(&["--route", "/legacy.php=worker"]);
    let legacy = get(&server, "/legacy.php");
    assert_eq!(legacy["script"], "index", "{legacy}");
    assert_eq!(get(&server, "/admin/legacy.php")["runtime"], "php-fpm");
}

#[test]
fn classic_off_keeps_worker_mode() {
    let server = hearth(&["--classic", "off"]);
    for path in ["/legacy.php", "/admin/legacy.php", "/missing.php", "/"] {
        let answer = get(&server, path);
        assert_eq!(
            (&answer["script"], &answer["runtime"]),
            (&"index".into(), &"worker".into()),
            "{path}: {answer}"
        );
    }
    assert_eq!(server.get("/hello.txt").text(), "hello, static\n");
    assert!(!server.log().contains("php-fpm"), "{}", server.log());
}

#[test]
fn without_php_fpm_classic_on_is_refused_and_auto_warns_once() {
    let root = site().display().to_string();
    let script = site().join("index.php").display().to_string();
    let mut args = vec![
        "serve",
        &script,
        "--root",
        &root,
        "--listen",
        "127.0.0.1:0",
        "--php-fpm",
        "/nonexistent/php-fpm",
        "--classic",
        "on",
    ];
    let as_root = support::as_root();
    args.extend(as_root.iter().map(String::as_str));
    let out = support::output_within(
        std::process::Command::new(support::hearth_bin()).args(&args),
        Duration::from_secs(30),
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--classic on: a mixed site needs php-fpm")
            && stderr.contains("/nonexistent/php-fpm")
            && stderr.contains("php8.2-fpm"),
        "{stderr}"
    );

    // auto: worker mode, one warning naming what is missing.
    let server = hearth(&["--php-fpm", "/nonexistent/php-fpm"]);
    assert_eq!(get(&server, "/legacy.php")["script"], "index");
    let log = server.log();
    let warnings: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("not a mixed site"))
        .collect();
    assert_eq!(warnings.len(), 1, "{log}");
    assert!(warnings[0].contains("php8.2-fpm"), "{}", warnings[0]);
}

#[test]
fn status_access_log_and_metrics_cover_both_pools_and_php_fpm_starts_no_child_before_use() {
    let dir = support::tempdir();
    let socket = control_socket(&dir);
    let access = dir.path().join("access.log");
    let server = hearth(&[
        "--classic-workers",
        "3",
        "--control-socket",
        &socket.display().to_string(),
        "--access-log",
        "json",
        "--access-log-file",
        &access.display().to_string(),
        "--admin",
        "127.0.0.1:0",
    ]);
    let master = fpm_master(&server);
    assert_eq!(
        process_group(master),
        [master],
        "php-fpm has no child before a classic script is asked for"
    );
    assert_eq!(get(&server, "/")["runtime"], "worker");
    assert_eq!(get(&server, "/legacy.php")["runtime"], "php-fpm");
    assert!(process_group(master).len() >= 2, "a child ran legacy.php");

    let status = support::status_json(&socket);
    assert_eq!(status["mode"], "mixed");
    assert_eq!(status["pool"]["workers"], 1);
    assert_eq!(status["workers"][0]["requests"], 1);
    let classic = &status["classic"];
    assert_eq!(classic["pool"]["max_workers"], 3, "{classic}");
    assert_eq!(classic["pool"]["min_workers"], 0, "{classic}");
    let children = classic["workers"].as_array().expect("children");
    assert!(
        children.iter().any(|c| c["requests"].as_u64() >= Some(1)),
        "{classic}"
    );
    let table = support::ctl(&["status", "--control-socket", &socket.display().to_string()]);
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(
        table.contains("classic scripts (php-fpm):") && table.contains("max 3"),
        "{table}"
    );

    // The access log has both requests; /metrics counts both.
    let lines = support::eventually(Duration::from_secs(10), "two access log lines", || {
        let text = std::fs::read_to_string(&access).unwrap_or_default();
        (text.lines().count() >= 2).then_some(text)
    });
    assert!(
        lines.contains("\"/legacy.php\"") && lines.contains("\"/\""),
        "{lines}"
    );
    let admin = support::admin_addr(&server);
    let metrics = support::request(
        admin,
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .text();
    let counted = metrics
        .lines()
        .find(|l| l.starts_with("hearth_http_requests_total{method=\"GET\",code=\"200\"}"))
        .unwrap_or_else(|| panic!("no request count in:\n{metrics}"));
    assert!(counted.ends_with(" 2"), "{counted}");
}

#[test]
fn reload_replaces_the_workers_and_php_fpms_children() {
    let dir = support::tempdir();
    let socket = control_socket(&dir);
    let server = hearth(&["--control-socket", &socket.display().to_string()]);
    let worker = get(&server, "/")["pid"].clone();
    let child = get(&server, "/legacy.php")["pid"].clone();
    let out = support::ctl(&["reload", "--control-socket", &socket.display().to_string()]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("every worker runs") && said.contains("php-fpm's children replaced"),
        "{said}"
    );
    let after = get(&server, "/");
    assert_ne!(after["pid"], worker, "a new worker");
    assert_eq!(after["served"], 1);
    assert_ne!(get(&server, "/legacy.php")["pid"], child, "a new child");

    // SIGHUP reloads both too.
    server.signal("HUP");
    server.wait_for_log(
        "SIGHUP received: reloading the workers and php-fpm",
        Duration::from_secs(10),
    );
    server.wait_for_log(
        "reloaded: php-fpm's children replaced",
        Duration::from_secs(30),
    );
    assert_eq!(get(&server, "/legacy.php")["runtime"], "php-fpm");
}

#[test]
fn stop_ends_the_workers_and_php_fpm() {
    let dir = support::tempdir();
    let socket = control_socket(&dir);
    let mut server = hearth(&["--control-socket", &socket.display().to_string()]);
    let worker = get(&server, "/")["pid"].as_u64().expect("pid") as u32;
    assert_eq!(get(&server, "/legacy.php")["runtime"], "php-fpm");
    let master = fpm_master(&server);
    assert!(process_group(master).len() >= 2, "master and a child");
    let out = support::ctl(&["stop", "--control-socket", &socket.display().to_string()]);
    assert!(out.status.success());
    assert_eq!(server.wait_exit(Duration::from_secs(30)), Some(0));
    let deadline = Instant::now() + Duration::from_secs(5);
    while !process_group(master).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        process_group(master),
        Vec::<u32>::new(),
        "php-fpm left running"
    );
    assert!(
        !Path::new(&format!("/proc/{worker}")).exists(),
        "worker {worker} left running"
    );
    let log = server.log();
    assert!(log.contains("php-fpm stopped"), "{log}");
}

/// The Slim example (examples/slim) as a mixed site: its worker.php
/// outside the root runs the app, its classic twin public/index.php is
/// the root's front controller and so goes to the workers too, and a
/// legacy script beside it runs in php-fpm.
#[test]
fn the_slim_example_with_a_legacy_script_beside_it() {
    let slim = support::root().join("examples/slim");
    let root = support::tempdir();
    std::fs::write(
        root.path().join("index.php"),
        format!(
            "<?php require {:?};\n",
            slim.join("public/index.php").display().to_string()
        ),
    )
    .expect("test setup");
    std::fs::copy(site().join("legacy.php"), root.path().join("legacy.php")).expect("test setup");
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755))
        .expect("test setup");
    let root_arg = root.path().display().to_string();
    let server = Server::start(
        &slim.join("worker.php"),
        &[
            "--workers",
            "1",
            "--root",
            &root_arg,
            "--route",
            "/hello/php-fpm=classic",
        ],
    );
    let first = get(&server, "/hello/ann");
    let second = get(&server, "/hello/bob");
    assert_eq!(first["hello"], "ann");
    assert_eq!(
        second["served_by_this_process"].as_u64(),
        first["served_by_this_process"].as_u64().map(|n| n + 1),
        "the warm Slim app served both"
    );
    let home = server.get("/");
    assert_eq!(home.text(), "Hello from Slim\n");
    let legacy = get(&server, "/legacy.php");
    assert_eq!(
        (&legacy["runtime"], &legacy["runs"]),
        (&"php-fpm".into(), &1.into())
    );
    // A classic area: the classic twin runs in php-fpm, booted for the
    // request.
    let cold = get(&server, "/hello/php-fpm");
    assert_eq!(cold["served_by_this_process"], 1, "{cold}");
}
