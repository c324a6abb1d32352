//! Classic mode (`hearth serve --root DIR`, no worker script) against its
//! reference, nginx + php-fpm with Debian's snippets/fastcgi-php.conf
//! (`bench/reference/nginx-fpm.sh` with `NGINX_SITE=classic`), on the same
//! multi-script site: status, headers and body for a table of requests,
//! the hostile ones included; then what Hearth does on its own (stricter
//! than nginx, timeouts, shutdown, a bad root).

#[path = "support/reference.rs"]
mod reference;
#[path = "support/mod.rs"]
mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use reference::Reference;
use support::{Req, Response, Server};

/// Headers that describe the transport, not the app (as in
/// tests/differential.rs), and `vary`: Hearth names Accept-Encoding on
/// compressible static files, nginx only with `gzip_vary on`.
const TRANSPORT_HEADERS: &[&str] = &[
    "date",
    "server",
    "connection",
    "transfer-encoding",
    "content-length",
    "keep-alive",
    "vary",
];

/// Status, headers (grouped by name) and body; the session id, the
/// server's own port (in redirects) and its name in error pages are the
/// only things normalized.
fn comparable(r: &Response, port: u16) -> (u16, Vec<(String, String)>, String) {
    let normalize = |s: &str| {
        let s = s
            .replace(&format!(":{port}/"), ":PORT/")
            .replace("<center>nginx/1.22.1</center>", "<center>hearth</center>")
            .replace("<center>nginx</center>", "<center>hearth</center>");
        match s.find("PHPSESSID=") {
            Some(at) => {
                let end = s[at..].find(';').map_or(s.len(), |e| at + e);
                format!("{}PHPSESSID=ID{}", &s[..at], &s[end..])
            }
            None => s,
        }
    };
    let mut headers: Vec<(String, String)> = r
        .headers
        .iter()
        .filter(|(n, _)| !TRANSPORT_HEADERS.contains(&n.to_ascii_lowercase().as_str()))
        .map(|(n, v)| (n.to_ascii_lowercase(), normalize(v)))
        .collect();
    headers.sort_by(|a, b| a.0.cmp(&b.0));
    (r.status, headers, normalize(&r.text()))
}

/// The site: a front controller, other entry scripts, a static file, and
/// files that must never run or be served.
fn site() -> tempfile::TempDir {
    let dir = support::tempdir();
    let root = dir.path();
    let write = |name: &str, text: &str| {
        let path = root.join(name);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("test setup");
        std::fs::write(path, text).expect("test setup");
    };
    write(
        "index.php",
        r#"<?php
echo "marker: index\n";
foreach (['SCRIPT_FILENAME', 'SCRIPT_NAME', 'PATH_INFO', 'PHP_SELF', 'DOCUMENT_ROOT',
          'DOCUMENT_URI', 'REQUEST_URI', 'QUERY_STRING', 'REQUEST_METHOD', 'CONTENT_TYPE',
          'CONTENT_LENGTH', 'GATEWAY_INTERFACE', 'REDIRECT_STATUS'] as $k) {
    echo "$k=", $_SERVER[$k] ?? '(unset)', "\n";
}
echo 'POST=', json_encode($_POST), "\n";
echo 'GET=', json_encode($_GET), "\n";
"#,
    );
    write(
        "admin.php",
        "<?php header('X-Admin: 1'); echo \"marker: admin\\n\";\n",
    );
    write(
        "sub/index.php",
        "<?php echo \"marker: sub \", $_SERVER['SCRIPT_NAME'], \"\\n\";\n",
    );
    write("hello.txt", "hello, static\n");
    write(
        "cookie.php",
        "<?php setcookie('flavour', 'oat', ['path' => '/']); session_start(); \
         $_SESSION['n'] = ($_SESSION['n'] ?? 0) + 1; echo \"marker: cookie\\n\";\n",
    );
    write(
        "exit.php",
        "<?php echo \"before exit\\n\"; exit(0); echo \"after\\n\";\n",
    );
    write(
        "finish.php",
        "<?php echo \"finished\\n\"; fastcgi_finish_request(); echo \"never sent\\n\";\n",
    );
    write(
        "redirect.php",
        "<?php header('Location: /admin.php'); echo \"moved\\n\";\n",
    );
    write("slow.php", "<?php sleep(30); echo \"late\\n\";\n");
    write(
        "big.php",
        "<?php $piece = str_repeat('x', 1 << 20); for ($i = 0; $i < 24; $i++) { echo $piece; }\n\
         file_put_contents($_GET['done'] . '/' . uniqid('', true), '');\n",
    );
    write("uploads/evil.jpg", "<?php echo \"EVIL RAN\\n\";\n");
    write(".env", "SECRET=classic\n");
    // Readable by php-fpm's children (www-data) on both sides.
    for dir in [root.to_path_buf(), root.join("sub"), root.join("uploads")] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).expect("test setup");
    }
    dir
}

fn hearth(root: &Path, extra: &[&str]) -> Server {
    let mut args: Vec<String> = vec![
        "serve".into(),
        "--root".into(),
        root.to_string_lossy().into_owned(),
        "--listen".into(),
        "127.0.0.1:0".into(),
    ];
    if !extra.contains(&"--workers") {
        args.extend(["--workers".into(), "2".into()]);
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    Server::spawn_args(&args)
}

#[test]
fn classic_mode_answers_as_nginx_and_php_fpm_do() {
    let site = site();
    let fpm = Reference::start_with(site.path(), "index.php", &[("NGINX_SITE", "classic")]);
    let hearth = hearth(site.path(), &[]);
    let table: Vec<(&str, &str, Option<&str>, u16)> = vec![
        ("GET", "/", None, 200),
        ("GET", "/index.php", None, 200),
        ("GET", "/index.php/some/path?x=1", None, 200),
        ("GET", "/admin.php", None, 200),
        ("GET", "/sub/", None, 200),
        ("GET", "/sub", None, 301),
        ("GET", "/missing?a=b&c", None, 200),
        ("GET", "/deep/missing/page", None, 200),
        ("POST", "/index.php", Some("name=ada&lang=php"), 200),
        ("POST", "/missing-form", Some("x=1"), 200),
        ("GET", "/missing.php", None, 404),
        ("GET", "/hello.txt", None, 200),
        ("HEAD", "/hello.txt", None, 200),
        ("GET", "/cookie.php", None, 200),
        ("GET", "/exit.php", None, 200),
        ("GET", "/finish.php", None, 200),
        ("GET", "/redirect.php", None, 302),
        // Hostile: none of these may run uploads/evil.jpg.
        ("GET", "/uploads/evil.jpg/x.php", None, 404),
        ("GET", "/uploads/evil.jpg%00.php", None, 400),
        ("GET", "/x.php%00.jpg", None, 400),
        ("GET", "/admin.php%00.jpg", None, 400),
        ("GET", "/uploads/../../etc/passwd", None, 400),
    ];
    for (method, path, form, status) in &table {
        let what = format!("{method} {path}");
        let req = match form {
            Some(form) => Req::new(method, path).form(form),
            None => Req::new(method, path),
        };
        let f = req.send(fpm.addr);
        let h = req.send(hearth.addr);
        assert_eq!(
            f.status,
            *status,
            "nginx + php-fpm answered {what}: {}",
            f.text()
        );
        assert_eq!(
            comparable(&h, hearth.addr.port()),
            comparable(&f, fpm.addr.port()),
            "{what}"
        );
        assert!(
            !h.text().contains("EVIL RAN"),
            "{what} ran uploads/evil.jpg"
        );
    }
    // What the scripts printed, checked once here (the table compared it).
    let r = Req::new("GET", "/index.php/some/path?x=1").send(hearth.addr);
    let text = r.text();
    let root = std::fs::canonicalize(site.path()).expect("test setup");
    for line in [
        format!("SCRIPT_FILENAME={}/index.php", root.display()),
        "SCRIPT_NAME=/index.php".to_owned(),
        "PATH_INFO=/some/path".to_owned(),
        "PHP_SELF=/index.php/some/path".to_owned(),
        "DOCUMENT_URI=/index.php".to_owned(),
        "QUERY_STRING=x=1".to_owned(),
    ] {
        assert!(text.contains(&line), "{line} not in:\n{text}");
    }
    let finish = Req::new("GET", "/finish.php").send(hearth.addr);
    assert_eq!(finish.text(), "finished\n");
}

/// Where the router is stricter than nginx: dotfiles and symlinks out of
/// the root are refused (nginx serves them).
#[test]
fn dotfiles_and_symlinks_out_of_the_root_are_refused_where_nginx_serves_them() {
    let site = site();
    let outside = support::tempdir();
    std::fs::write(outside.path().join("secret.txt"), "outside\n").expect("test setup");
    std::fs::set_permissions(outside.path(), std::fs::Permissions::from_mode(0o755))
        .expect("test setup");
    std::os::unix::fs::symlink(
        outside.path().join("secret.txt"),
        site.path().join("link.txt"),
    )
    .expect("test setup");
    let fpm = Reference::start_with(site.path(), "index.php", &[("NGINX_SITE", "classic")]);
    let hearth = hearth(site.path(), &[]);
    for (path, nginx_body) in [("/.env", "SECRET=classic\n"), ("/link.txt", "outside\n")] {
        let f = Req::new("GET", path).send(fpm.addr);
        assert_eq!(
            (f.status, f.text().as_str()),
            (200, nginx_body),
            "nginx {path}"
        );
        let h = Req::new("GET", path).send(hearth.addr);
        assert_eq!(h.status, 403, "hearth {path}: {}", h.text());
        assert!(!h.text().contains(nginx_body.trim()), "{path} leaked");
    }
}

/// `--request-timeout` is php-fpm's request_terminate_timeout: the script
/// that runs past it gets 504, and the next request is served.
#[test]
fn a_script_past_the_request_timeout_gets_504_and_the_next_request_is_served() {
    let site = site();
    let hearth = hearth(site.path(), &["--request-timeout", "2"]);
    let r = Req::new("GET", "/slow.php").send(hearth.addr);
    assert_eq!(r.status, 504, "{}", r.text());
    hearth.wait_for_log("slow.php", Duration::from_secs(10));
    let next = Req::new("GET", "/admin.php").send(hearth.addr);
    assert_eq!(
        (next.status, next.text().as_str()),
        (200, "marker: admin\n")
    );
}

/// Clients that ask for 24 MiB each and never read: php-fpm's children
/// are not held (each script writes its whole response and ends) (their responses are taken at php-fpm's pace, into the
/// bounded memory shared by all responses and then a temporary file, as
/// for worker responses), the next client is served, and the front's
/// memory stays bounded: not six times 24 MiB.
#[test]
fn clients_that_never_read_hold_neither_php_fpm_nor_memory() {
    let site = site();
    let hearth = hearth(site.path(), &["--queue-timeout", "10"]);
    let pid = hearth.pid();
    let idle = support::vm_kib(pid, "VmRSS");
    // Each script marks its end here: it has written all 24 MiB.
    let done = support::reachable_tempdir();
    std::fs::set_permissions(done.path(), std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let request = format!(
        "GET /big.php?done={} HTTP/1.1\r\nHost: localhost\r\n\r\n",
        done.path().display()
    );
    let stalled: Vec<std::net::TcpStream> = (0..6)
        .map(|_| {
            let mut stream = std::net::TcpStream::connect(hearth.addr).expect("connect");
            use std::io::Write as _;
            stream.write_all(request.as_bytes()).expect("send");
            stream
        })
        .collect();
    support::eventually(
        Duration::from_secs(60),
        "the six scripts to write their whole response",
        || {
            let n = std::fs::read_dir(done.path()).map_or(0, |d| d.count());
            (n == 6).then_some(())
        },
    );
    let next = Req::new("GET", "/admin.php").send(hearth.addr);
    assert_eq!(
        (next.status, next.text().as_str()),
        (200, "marker: admin\n")
    );
    let peak = support::vm_kib(pid, "VmHWM");
    eprintln!("front: idle {idle} KiB, peak {peak} KiB with six 24 MiB responses unread");
    assert!(
        peak < idle + 128 * 1024,
        "the front grew from {idle} KiB to {peak} KiB"
    );
    drop(stalled);
}

/// The pids of the live (not zombie) php-fpm processes in the process
/// group of `master`, from /proc.
fn php_fpm_under(master: u32) -> Vec<u32> {
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
        let fields: Vec<&str> = stat[close + 2..].split_whitespace().collect();
        let comm = &stat[stat.find('(').unwrap_or(0) + 1..close];
        if !comm.starts_with("php-fpm") {
            continue;
        }
        // A zombie has exited: reaping it is its new parent's (init's) work.
        if fields.first() == Some(&"Z") {
            continue;
        }
        let pgrp = fields.get(2).and_then(|p| p.parse::<u32>().ok());
        if pid == master || pgrp == Some(master) {
            found.push(pid);
        }
    }
    found
}

#[test]
fn shutdown_leaves_no_php_fpm_process() {
    let site = site();
    let mut hearth = hearth(site.path(), &[]);
    assert_eq!(Req::new("GET", "/admin.php").send(hearth.addr).status, 200);
    let master = master_pid(&hearth);
    assert!(php_fpm_under(master).len() >= 3, "master and 2 children");
    hearth.signal("TERM");
    assert_eq!(hearth.wait_exit(Duration::from_secs(30)), Some(0));
    let deadline = Instant::now() + Duration::from_secs(5);
    while !php_fpm_under(master).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(php_fpm_under(master), Vec::<u32>::new(), "left running");
}

#[test]
fn a_root_that_does_not_exist_is_refused_with_its_name() {
    let dir = support::tempdir();
    let missing = dir.path().join("no-such-site");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hearth"))
        .args(["serve", "--listen", "127.0.0.1:0", "--root"])
        .arg(&missing)
        .args(support::as_root())
        .output()
        .expect("test setup");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&missing.display().to_string()),
        "the error names the root: {stderr}"
    );
}

/// `--index` is nginx's `index`, `--fallback` the last argument of its
/// `try_files`: another front controller, or none (`off`: a miss is a
/// 404, as `try_files $uri $uri/ =404`).
#[test]
fn index_files_and_the_front_controller_are_options() {
    let site = site();
    std::fs::write(
        site.path().join("front.php"),
        "<?php echo 'marker: front ', $_SERVER['SCRIPT_NAME'], ' ', $_SERVER['QUERY_STRING'], \"\\n\";\n",
    )
    .expect("test setup");
    std::fs::write(site.path().join("sub/home.html"), "home, static\n").expect("test setup");

    let server = hearth(
        site.path(),
        &["--fallback", "/front.php", "--index", "home.html index.php"],
    );
    let r = Req::new("GET", "/no/such/page?x=1").send(server.addr);
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "marker: front /front.php x=1\n")
    );
    let r = Req::new("GET", "/sub/").send(server.addr);
    assert_eq!((r.status, r.text().as_str()), (200, "home, static\n"));
    // The root has no home.html: its index.php runs.
    let r = Req::new("GET", "/").send(server.addr);
    assert!(r.text().starts_with("marker: index\n"), "{}", r.text());
    drop(server);

    let server = hearth_with_file(site.path(), "[serve]\nfallback = \"off\"\n");
    let r = Req::new("GET", "/no/such/page").send(server.addr);
    assert_eq!(r.status, 404, "{}", r.text());
    assert_eq!(Req::new("GET", "/admin.php").send(server.addr).status, 200);
    drop(server);

    // A front controller that is not there is said at start (its misses get 404).
    let server = hearth(site.path(), &["--fallback", "/missing.php"]);
    server.wait_for_log(
        "the front controller /missing.php is not in",
        Duration::from_secs(10),
    );
    assert_eq!(
        Req::new("GET", "/no/such/page").send(server.addr).status,
        404
    );
}

/// `hearth serve` with `--config` holding `toml` and `--root`.
fn hearth_with_file(root: &Path, toml: &str) -> Server {
    let dir = support::tempdir();
    let path = dir.path().join("hearth.toml");
    std::fs::write(&path, toml).expect("test setup");
    let server = hearth(root, &["--config", &path.to_string_lossy()]);
    // The file is read at start; it may go now.
    drop(dir);
    server
}

#[test]
fn a_fallback_that_is_not_a_php_path_is_refused_naming_the_key_and_file() {
    let site = site();
    let dir = support::tempdir();
    let path = dir.path().join("hearth.toml");
    std::fs::write(&path, "[serve]\nfallback = \"index.html\"\n").expect("test setup");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hearth"))
        .args(["serve", "--listen", "127.0.0.1:0", "--root"])
        .arg(site.path())
        .arg("--config")
        .arg(&path)
        .args(support::as_root())
        .output()
        .expect("test setup");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "{}: [serve] fallback: \"index.html\"",
            path.display()
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("must start with / and end in .php"),
        "{stderr}"
    );
}

/// The children php-fpm runs, from `hearth status --json`.
fn live_children(socket: &Path) -> usize {
    let status = support::status_json(socket);
    status["pool"]["live"].as_u64().expect("live") as usize
}

/// `--min-workers` below `--workers` is php-fpm's `pm = dynamic`: the
/// minimum runs at start and when idle, more start while requests keep
/// every child busy, never more than `--workers`, and the extra ones stop
/// once idle again.
#[test]
fn min_workers_below_workers_is_a_dynamic_pool() {
    let site = site();
    std::fs::write(
        site.path().join("nap.php"),
        "<?php usleep(1500000); echo \"rested\\n\";\n",
    )
    .expect("test setup");
    let control = support::tempdir();
    let socket = control.path().join("control.sock");
    let server = hearth(
        site.path(),
        &[
            "--workers",
            "4",
            "--min-workers",
            "1",
            "--control-socket",
            &socket.to_string_lossy(),
        ],
    );
    server.wait_for_log("with 1 to 4 php-fpm children", Duration::from_secs(10));
    let status = support::status_json(&socket);
    assert_eq!(status["pool"]["min_workers"], 1, "{status}");
    assert_eq!(status["pool"]["max_workers"], 4, "{status}");
    assert_eq!(live_children(&socket), 1);
    // Keep four requests running until php-fpm has grown the pool.
    let busy = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let load: Vec<_> = (0..4)
        .map(|_| {
            let (busy, addr) = (busy.clone(), server.addr);
            std::thread::spawn(move || {
                while busy.load(std::sync::atomic::Ordering::Relaxed) {
                    let r = Req::new("GET", "/nap.php").send(addr);
                    assert_eq!(r.status, 200, "{}", r.text());
                }
            })
        })
        .collect();
    let most = support::eventually(Duration::from_secs(30), "php-fpm to start children", || {
        let live = live_children(&socket);
        (live >= 3).then_some(live)
    });
    busy.store(false, std::sync::atomic::Ordering::Relaxed);
    for thread in load {
        thread.join().expect("load");
    }
    assert!(most <= 4, "{most} children, over --workers");
    support::eventually(
        Duration::from_secs(30),
        "the extra children to stop",
        || (live_children(&socket) == 1).then_some(()),
    );
}

/// php-fpm's master, as the log last named it (at start, or started again).
fn master_pid(server: &Server) -> u32 {
    let log = server.log();
    let last = log
        .rfind("php-fpm started again (pid ")
        .map(|at| &log[at..])
        .unwrap_or(&log);
    last.split("(pid ")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("no php-fpm pid in the log:\n{log}"))
}

/// The pids of php-fpm's children, from `hearth status --json`.
fn children_pids(socket: &Path) -> Vec<u64> {
    let status = support::status_json(socket);
    status["workers"]
        .as_array()
        .expect("workers")
        .iter()
        .map(|w| w["pid"].as_u64().expect("pid"))
        .collect()
}

/// `--max-memory` in classic mode: php-fpm has no such limit, so Hearth
/// reads each child's RSS once a second and asks an idle one over it to
/// leave (SIGQUIT); php-fpm starts another. Every request is still
/// answered; the retirement is logged and counted; the status shows each
/// child's memory and age.
#[test]
fn children_over_max_memory_are_retired_between_requests() {
    let site = site();
    let control = support::tempdir();
    let socket = control.path().join("control.sock");
    // Every php-fpm child uses more than 1 MiB: each is retired once idle.
    let server = hearth(
        site.path(),
        &[
            "--max-memory",
            "1M",
            "--control-socket",
            &socket.to_string_lossy(),
        ],
    );
    let first = children_pids(&socket);
    let status = support::status_json(&socket);
    let worker = &status["workers"][0];
    assert!(
        worker["memory"].as_u64().is_some_and(|m| m > 1 << 20),
        "{status}"
    );
    assert!(worker["age"].as_f64().is_some_and(|a| a < 60.0), "{status}");
    server.wait_for_log("(max_memory)", Duration::from_secs(20));
    assert!(
        server.log().contains("retiring php-fpm child"),
        "{}",
        server.log()
    );
    for _ in 0..20 {
        let r = Req::new("GET", "/admin.php").send(server.addr);
        assert_eq!((r.status, r.text().as_str()), (200, "marker: admin\n"));
    }
    support::eventually(Duration::from_secs(20), "new children", || {
        let now = children_pids(&socket);
        (!now.is_empty() && now.iter().all(|p| !first.contains(p))).then_some(())
    });
    let status = support::status_json(&socket);
    let retired = status["pool"]["restarts_by_reason"]["max_memory"].as_u64();
    assert!(retired.is_some_and(|n| n >= 2), "{status}");
    assert!(status["pool"]["restarts"].as_u64() >= retired, "{status}");
}

/// `--ttl` in classic mode: a child older than it is retired once idle.
#[test]
fn children_past_their_ttl_are_retired() {
    let site = site();
    let control = support::tempdir();
    let socket = control.path().join("control.sock");
    let server = hearth(
        site.path(),
        &["--ttl", "2s", "--control-socket", &socket.to_string_lossy()],
    );
    let first = children_pids(&socket);
    server.wait_for_log("(ttl)", Duration::from_secs(20));
    support::eventually(Duration::from_secs(20), "new children", || {
        let now = children_pids(&socket);
        (now.len() == 2 && now.iter().all(|p| !first.contains(p))).then_some(())
    });
    let r = Req::new("GET", "/admin.php").send(server.addr);
    assert_eq!(r.status, 200);
    let status = support::status_json(&socket);
    assert!(
        status["pool"]["restarts_by_reason"]["ttl"].as_u64() >= Some(2),
        "{status}"
    );
    assert!(
        status["workers"][0]["age"]
            .as_f64()
            .is_some_and(|a| a < 10.0),
        "{status}"
    );
}

/// php-fpm's master killed (kill -9) under light load: Hearth notices,
/// logs it, answers PHP requests 503 with Retry-After meanwhile (never a
/// hang), starts php-fpm again, and PHP requests succeed again.
#[test]
fn a_killed_php_fpm_master_is_started_again() {
    let site = site();
    let control = support::tempdir();
    let socket = control.path().join("control.sock");
    let server = hearth(
        site.path(),
        &["--control-socket", &socket.to_string_lossy()],
    );
    let master = master_pid(&server);
    let going = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let load = {
        let (going, addr) = (going.clone(), server.addr);
        std::thread::spawn(move || {
            let mut seen = Vec::new();
            while going.load(std::sync::atomic::Ordering::Relaxed) {
                let r = Req::new("GET", "/admin.php").send(addr);
                if r.status == 503 {
                    assert!(r.header("retry-after").is_some(), "503 without Retry-After");
                }
                seen.push(r.status);
                std::thread::sleep(Duration::from_millis(20));
            }
            seen
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &master.to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    server.wait_for_log(
        &format!("php-fpm's master (pid {master}) died"),
        Duration::from_secs(10),
    );
    server.wait_for_log("php-fpm started again (pid ", Duration::from_secs(20));
    let r = support::eventually(Duration::from_secs(10), "PHP served again", || {
        let r = Req::new("GET", "/admin.php").send(server.addr);
        (r.status == 200).then_some(r)
    });
    assert_eq!(r.text(), "marker: admin\n");
    going.store(false, std::sync::atomic::Ordering::Relaxed);
    let seen = load.join().expect("load");
    // 200 before and after; 503 while php-fpm was down; at most the
    // request in flight when the children left behind were killed is a 502.
    assert!(seen.iter().all(|s| [200, 503, 502].contains(s)), "{seen:?}");
    assert!(seen.iter().filter(|&&s| s == 502).count() <= 1, "{seen:?}");
    for _ in 0..10 {
        assert_eq!(Req::new("GET", "/admin.php").send(server.addr).status, 200);
    }
    let restarted = master_pid(&server);
    assert_ne!(restarted, master);
    let left: Vec<String> = php_fpm_under(master)
        .iter()
        .map(|p| std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default())
        .collect();
    assert!(left.is_empty(), "the old children are gone: {left:?}");
    let status = support::status_json(&socket);
    assert_eq!(
        status["pool"]["restarts_by_reason"]["php_fpm_exited"], 1,
        "{status}"
    );
    assert_eq!(status["php_fpm"], "running", "{status}");
    assert_eq!(status["pool"]["live"], 2, "{status}");
}

/// A php-fpm that will not start again: after a bounded backoff Hearth
/// gives up, says so, and exits non-zero (for its supervisor to act on)
/// rather than answer 503 for ever.
#[test]
fn php_fpm_that_will_not_start_again_makes_hearth_give_up_and_exit_non_zero() {
    let site = site();
    let (bin, ok) = failing_php_fpm();
    let mut server = with_php_fpm_from(&bin, site.path(), &["--workers", "1"]);
    assert_eq!(Req::new("GET", "/admin.php").send(server.addr).status, 200);
    std::fs::remove_file(&ok).expect("test setup");
    let master = master_pid(&server);
    std::process::Command::new("kill")
        .args(["-KILL", &master.to_string()])
        .status()
        .expect("kill");
    server.wait_for_log("starting php-fpm again in", Duration::from_secs(20));
    let r = Req::new("GET", "/admin.php").send(server.addr);
    assert_eq!(r.status, 503, "{}", r.text());
    assert!(r.header("retry-after").is_some());
    assert_eq!(server.wait_exit(Duration::from_secs(60)), Some(1));
    let log = server.log();
    assert!(log.contains("told to fail"), "{log}");
    assert!(log.contains("giving up"), "{log}");
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Read as _;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut out)
        .expect("gzip");
    out
}

/// PHP responses are compressed as worker mode compresses them (as
/// nginx's `gzip on` does): a compressible type, the client's
/// Accept-Encoding, whole or spooled as php-fpm sends it; responses PHP
/// encoded itself, other types, `no-transform` and clients that do not
/// ask are left alone.
#[test]
fn php_responses_are_compressed_as_in_worker_mode() {
    let site = site();
    let write = |name: &str, text: &str| {
        std::fs::write(site.path().join(name), text).expect("test setup");
    };
    // 2 KiB, in the records that bring the head; and 300 KiB, spooled.
    write(
        "small.php",
        "<?php echo str_repeat(\"<p>small</p>\\n\", 160);\n",
    );
    write(
        "large.php",
        "<?php for ($i = 0; $i < 3000; $i++) { echo str_pad(\"<p>line $i</p>\", 99), \"\\n\"; }\n",
    );
    write(
        "encoded.php",
        "<?php header('Content-Encoding: gzip'); echo gzencode(str_repeat('own ', 2000));\n",
    );
    write(
        "png.php",
        "<?php header('Content-Type: image/png'); echo str_repeat('x', 5000);\n",
    );
    write(
        "notransform.php",
        "<?php header('Cache-Control: no-transform'); echo str_repeat('y', 5000);\n",
    );
    let server = hearth(site.path(), &[]);
    let gzip = |path: &str| {
        Req::new("GET", path)
            .header("Accept-Encoding", "gzip")
            .send(server.addr)
    };
    for (path, expected) in [
        ("/small.php", "<p>small</p>\n".repeat(160)),
        (
            "/large.php",
            (0..3000)
                .map(|i| format!("{:<99}\n", format!("<p>line {i}</p>")))
                .collect(),
        ),
    ] {
        let r = gzip(path);
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-encoding"), Some("gzip"), "{path}");
        assert!(
            r.body.len() < expected.len() / 4,
            "{path}: {} bytes",
            r.body.len()
        );
        assert_eq!(String::from_utf8(gunzip(&r.body)).expect("utf-8"), expected);
        let plain = Req::new("GET", path).send(server.addr);
        assert_eq!(plain.header("content-encoding"), None, "{path} not asked");
        assert_eq!(plain.text(), expected);
    }
    let own = gzip("/encoded.php");
    assert_eq!(own.header("content-encoding"), Some("gzip"));
    assert_eq!(gunzip(&own.body), "own ".repeat(2000).into_bytes(), "once");
    for path in ["/png.php", "/notransform.php"] {
        let r = gzip(path);
        assert_eq!(r.header("content-encoding"), None, "{path}");
        assert_eq!(r.body.len(), 5000, "{path}");
    }
}

/// A directory holding a `php-fpm8.2` that runs the real one while the
/// returned file exists, and fails with a message otherwise.
fn failing_php_fpm() -> (tempfile::TempDir, std::path::PathBuf) {
    let bin = support::tempdir();
    let ok = bin.path().join("ok");
    std::fs::write(&ok, "").expect("test setup");
    let wrapper = bin.path().join("php-fpm8.2");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\n[ -e {} ] || {{ echo 'php-fpm: told to fail' >&2; exit 78; }}\n\
             exec /usr/sbin/php-fpm8.2 \"$@\"\n",
            ok.display()
        ),
    )
    .expect("test setup");
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    (bin, ok)
}

/// `hearth serve --root ROOT EXTRA` finding php-fpm in `bin` first.
fn with_php_fpm_from(bin: &tempfile::TempDir, root: &Path, extra: &[&str]) -> Server {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_hearth"));
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--root"])
        .arg(root)
        .args(extra)
        .args(support::as_root())
        .env(
            "PATH",
            format!(
                "{}:{}",
                bin.path().display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        );
    Server::spawn_command(cmd)
}

fn admin_get(server: &Server, path: &str) -> Response {
    Req::new("GET", path).send(support::admin_addr(server))
}

/// `--admin` in classic mode: `/metrics` with php-fpm's children and the
/// requests, `/healthz`, and `/readyz`, which is 503 while php-fpm is down
/// and 200 again once it is back.
#[test]
fn admin_endpoints_follow_php_fpm() {
    let site = site();
    let (bin, ok) = failing_php_fpm();
    let server = with_php_fpm_from(
        &bin,
        site.path(),
        &["--workers", "2", "--admin", "127.0.0.1:0"],
    );
    assert_eq!(admin_get(&server, "/healthz").status, 200);
    support::eventually(Duration::from_secs(10), "ready", || {
        (admin_get(&server, "/readyz").status == 200).then_some(())
    });
    assert_eq!(Req::new("GET", "/admin.php").send(server.addr).status, 200);
    // Ready means php-fpm answers; its second child may still be starting
    // on a busy machine.
    support::eventually(Duration::from_secs(10), "both php-fpm children", || {
        admin_get(&server, "/metrics")
            .text()
            .contains("hearth_pool_workers_live 2")
            .then_some(())
    });
    let metrics = admin_get(&server, "/metrics").text();
    assert!(metrics.contains("hearth_pool_workers_live 2"), "{metrics}");
    assert!(metrics.contains("hearth_pool_workers_max 2"), "{metrics}");
    assert!(
        metrics.contains("hearth_http_requests_total{method=\"GET\",code=\"200\"} 1"),
        "{metrics}"
    );

    // php-fpm down, and failing to start for a while.
    std::fs::remove_file(&ok).expect("test setup");
    let master = master_pid(&server);
    std::process::Command::new("kill")
        .args(["-KILL", &master.to_string()])
        .status()
        .expect("kill");
    server.wait_for_log("php-fpm did not start again", Duration::from_secs(20));
    let r = admin_get(&server, "/readyz");
    assert_eq!(r.status, 503, "{}", r.text());
    std::fs::write(&ok, "").expect("test setup");
    server.wait_for_log("php-fpm started again", Duration::from_secs(20));
    support::eventually(Duration::from_secs(10), "ready again", || {
        (admin_get(&server, "/readyz").status == 200).then_some(())
    });
    let metrics = admin_get(&server, "/metrics").text();
    assert!(
        metrics.contains("hearth_pool_worker_restarts_total{reason=\"php_fpm_exited\"} 1"),
        "{metrics}"
    );
}

/// `--watch` in classic mode: a changed .php file under the root reloads
/// php-fpm (OPcache emptied), and the next request runs the new code.
#[test]
fn watch_reloads_php_fpm_when_a_script_changes() {
    let site = site();
    let server = hearth(site.path(), &["--watch"]);
    server.wait_for_log("for changed PHP files", Duration::from_secs(10));
    let r = Req::new("GET", "/admin.php").send(server.addr);
    assert_eq!(r.text(), "marker: admin\n");
    std::fs::write(
        site.path().join("admin.php"),
        "<?php echo \"marker: edited\\n\";\n",
    )
    .expect("test setup");
    server.wait_for_log(
        "admin.php changed: reloading php-fpm",
        Duration::from_secs(10),
    );
    server.wait_for_log(
        "reloaded: php-fpm's children replaced",
        Duration::from_secs(20),
    );
    let r = Req::new("GET", "/admin.php").send(server.addr);
    assert_eq!(r.text(), "marker: edited\n");
}

/// A script's own Content-Length is passed on, as nginx passes it on: a
/// download keeps its size. Past it, the body is cut to it; short of it,
/// the response is cut short: the connection is closed (nginx closes it
/// after the bytes that came; Hearth may send fewer of them).
#[test]
fn a_scripts_content_length_is_passed_on_as_nginx_passes_it() {
    let dir = support::reachable_tempdir();
    let write = |name: &str, text: &str| {
        std::fs::write(dir.path().join(name), text).expect("test setup");
    };
    write("index.php", "<?php echo \"index\\n\";\n");
    // These send "hello" before "world": ob_flush() and flush() pass
    // PHP's output buffer (output_buffering = 4096 in Debian's php.ini)
    // to php-fpm, which sends it on before the script goes on.
    let streamed = |length: u32| {
        format!(
            "<?php header('Content-Length: {length}'); echo 'hello'; ob_flush(); flush(); \
             usleep(100000); echo 'world';\n"
        )
    };
    write("streamed.php", &streamed(10));
    write("long.php", &streamed(4));
    write("short.php", &streamed(100));
    let whole =
        |length: u32| format!("<?php header('Content-Length: {length}'); echo 'helloworld';\n");
    write("whole.php", &whole(10));
    write("whole-long.php", &whole(4));
    write("whole-short.php", &whole(100));
    let fpm = Reference::start_with(dir.path(), "index.php", &[("NGINX_SITE", "classic")]);
    let hearth = hearth(dir.path(), &[]);
    for (path, length, body) in [
        ("/streamed.php", "10", "helloworld"),
        ("/whole.php", "10", "helloworld"),
        ("/long.php", "4", "hell"),
        ("/whole-long.php", "4", "hell"),
    ] {
        for (who, addr) in [("nginx + php-fpm", fpm.addr), ("hearth", hearth.addr)] {
            // Twice on one connection: the connection stays usable.
            let mut conn = support::Connection::open(addr);
            for _ in 0..2 {
                let r = conn.get(path, "");
                assert_eq!(
                    (r.status, r.header("content-length"), r.text().as_str()),
                    (200, Some(length), body),
                    "{who} {path}: {:?}",
                    r.headers
                );
                assert_eq!(r.header("transfer-encoding"), None, "{who} {path}");
            }
        }
    }
    // Short of its length: the head says 100, fewer bytes come, and the
    // connection is closed.
    let cut = |who: &str, addr, path: &str| -> (String, String) {
        use std::io::{Read as _, Write as _};
        let mut stream = std::net::TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .expect("timeout");
        stream
            .write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
            .expect("send");
        let mut all = Vec::new();
        stream
            .read_to_end(&mut all)
            .unwrap_or_else(|e| panic!("{who} {path}: the connection was not closed: {e}"));
        let all = String::from_utf8_lossy(&all).into_owned();
        let (head, body) = all.split_once("\r\n\r\n").expect("a head");
        (head.to_ascii_lowercase(), body.to_owned())
    };
    for path in ["/short.php", "/whole-short.php"] {
        for (who, addr) in [("nginx + php-fpm", fpm.addr), ("hearth", hearth.addr)] {
            let (head, body) = cut(who, addr, path);
            assert!(
                head.contains("\r\ncontent-length: 100\r\n"),
                "{who} {path}: {head}"
            );
            assert!(
                body.len() < 100 && "helloworld".starts_with(&body),
                "{who} {path}: {body:?}"
            );
        }
    }
    hearth.wait_for_log(
        "the script sent 10 of the 100 bytes its Content-Length announced",
        Duration::from_secs(10),
    );
}
