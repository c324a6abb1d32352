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
        "--workers".into(),
        "2".into(),
    ];
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

/// The pids of the php-fpm processes whose parent is `parent` (or that
/// are in its process group), from /proc.
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
    let log = hearth.log();
    let master: u32 = log
        .split("php-fpm children (pid ")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("no php-fpm pid in the log:\n{log}"));
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
