//! Classic mode's setups, good and bad, end to end through `hearth serve`:
//! per-directory `.user.ini` files read by php-fpm as behind nginx (a good
//! one applies, a broken one is what php-fpm makes of it, compared with
//! nginx + php-fpm), a php-fpm that is missing or is not php-fpm, and a
//! reload under load that drops nothing.

#[path = "support/reference.rs"]
mod reference;
#[path = "support/mod.rs"]
mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use reference::Reference;
use support::{Req, Server};

fn hearth(root: &Path, extra: &[&str]) -> Server {
    let mut args: Vec<String> = [
        "serve",
        "--root",
        &root.to_string_lossy(),
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "2",
    ]
    .map(String::from)
    .into();
    args.extend(extra.iter().map(|s| s.to_string()));
    Server::spawn_args(&args)
}

/// Runs `hearth serve` that must refuse to start; its stderr.
fn refused(root: &Path, extra: &[&str]) -> String {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_hearth"));
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--root"])
        .arg(root)
        .args(extra)
        .args(support::as_root());
    let out = support::output_within(&mut cmd, Duration::from_secs(60));
    assert!(!out.status.success(), "hearth started");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn site() -> tempfile::TempDir {
    let dir = support::tempdir();
    let root = dir.path();
    let write = |name: &str, text: &str| {
        let path = root.join(name);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("test setup");
        std::fs::write(path, text).expect("test setup");
    };
    let show = "<?php echo json_encode(['charset' => ini_get('default_charset'), \
                'precision' => ini_get('precision'), 'memory' => ini_get('memory_limit')]), \"\\n\";\n";
    write("index.php", show);
    write("good/index.php", show);
    write(
        "good/.user.ini",
        "; read by php-fpm for scripts under good/\ndefault_charset = \"ISO-8859-1\"\nprecision = 7\n",
    );
    write("bad/index.php", show);
    // A value PHP cannot parse, and a line the ini parser rejects after a good one.
    write("bad/.user.ini", "memory_limit = abc\nprecision = 9\n");
    write("broken/index.php", show);
    write(
        "broken/.user.ini",
        "precision = 5\n[unterminated\nx = \"y\n",
    );
    write("slow.php", "<?php usleep(50000); echo \"ok\\n\";\n");
    for sub in ["", "good", "bad", "broken"] {
        std::fs::set_permissions(root.join(sub), std::fs::Permissions::from_mode(0o755))
            .expect("test setup");
    }
    dir
}

#[test]
fn user_ini_files_apply_as_php_fpm_reads_them_behind_nginx() {
    let site = site();
    let fpm = Reference::start_with(site.path(), "index.php", &[("NGINX_SITE", "classic")]);
    let hearth = hearth(site.path(), &[]);
    let mut answers = Vec::new();
    for path in ["/", "/good/", "/bad/", "/broken/"] {
        let f = Req::new("GET", path).send(fpm.addr);
        let h = Req::new("GET", path).send(hearth.addr);
        assert_eq!(
            (h.status, h.text()),
            (f.status, f.text()),
            "{path}: Hearth, then nginx + php-fpm"
        );
        answers.push((path, h.json()));
    }
    // What those answers were: the good file applies under good/ only; the
    // bad value is PHP's (memory_limit "abc" kept as written, the next
    // line read).
    let root = &answers[0].1;
    let good = &answers[1].1;
    assert_eq!(good["charset"], "ISO-8859-1", "{good}");
    assert_eq!(good["precision"], "7");
    assert_ne!(root["charset"], "ISO-8859-1", "{root}");
    let bad = &answers[2].1;
    assert_eq!(bad["precision"], "9", "{bad}");
    // php-fpm reads a broken file up to the line its parser rejects.
    let broken = &answers[3].1;
    assert_eq!(broken["precision"], "5", "{broken}");
}

#[test]
fn a_php_fpm_that_is_missing_or_is_not_php_fpm_is_refused_naming_it() {
    let site = site();
    let err = refused(site.path(), &["--php-fpm", "/nonexistent/php-fpm8.2"]);
    assert!(
        err.contains("/nonexistent/php-fpm8.2 does not exist") && err.contains("php8.2-fpm"),
        "{err}"
    );
    // PHP's CLI cannot run a FastCGI pool: its test run fails and says so.
    let cli = which("php");
    let err = refused(site.path(), &["--php-fpm", &cli]);
    assert!(
        err.contains(&format!("{cli} is not php-fpm")),
        "the binary is named: {err}"
    );
}

/// The absolute path of a program found on PATH.
fn which(name: &str) -> String {
    if name.contains('/') {
        return name.to_owned();
    }
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{name} is not on PATH"))
        .to_string_lossy()
        .into_owned()
}

#[test]
fn reloads_under_load_drop_no_request() {
    let site = site();
    let control = support::tempdir();
    let socket = control.path().join("control.sock");
    let server = hearth(
        site.path(),
        &["--control-socket", &socket.to_string_lossy()],
    );
    let going = Arc::new(AtomicBool::new(true));
    let load: Vec<_> = (0..4)
        .map(|_| {
            let (going, addr) = (going.clone(), server.addr);
            std::thread::spawn(move || {
                let mut statuses = Vec::new();
                while going.load(Ordering::Relaxed) {
                    let r = Req::new("GET", "/slow.php").send(addr);
                    statuses.push((r.status, r.text()));
                }
                statuses
            })
        })
        .collect();
    for round in 1..=3 {
        let out = support::ctl(&["reload", "--control-socket", &socket.to_string_lossy()]);
        assert!(
            out.status.success(),
            "reload {round}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    going.store(false, Ordering::Relaxed);
    let mut served = 0;
    for thread in load {
        for (status, text) in thread.join().expect("load") {
            assert_eq!((status, text.as_str()), (200, "ok\n"), "a request failed");
            served += 1;
        }
    }
    assert!(served > 0, "no request was sent during the reloads");
    assert_eq!(
        server
            .log()
            .matches("reloaded: php-fpm's children replaced")
            .count(),
        3
    );
}
