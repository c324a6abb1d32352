//! Classic mode's guard against running or leaking what is not a PHP entry
//! script (issue 10, item 5): a table of hostile requests, each sent to
//! Hearth and to nginx + php-fpm with Debian's snippets/fastcgi-php.conf
//! (`bench/reference/nginx-fpm.sh` with `NGINX_SITE=classic`) serving the
//! same site. Hearth must never execute a file that is not a `.php` file
//! inside the root, never send a PHP source or a dotfile, never leave the
//! root; where nginx + php-fpm does one of those, the table says so. Then
//! a symlink deploy: the root is resolved again on reload.

#[path = "support/reference.rs"]
mod reference;
#[path = "support/mod.rs"]
mod support;

use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use reference::Reference;
use support::{Req, Server};

/// What must never appear in a response body: the output of the uploaded
/// "image" run as PHP, a PHP source sent as text, a dotfile, a file from
/// outside the root. Each marker appears only where the leak would put it
/// (the sources hold the reversed run markers, so serving the image as an
/// image is not mistaken for running it).
const RAN_UPLOAD: &str = "UPLOAD RAN";
const SOURCE: &str = "SOURCE-LEAKED";
const DOTFILE: &str = "DOTENV-LEAKED";
const OUTSIDE: &str = "OUTSIDE-LEAKED";

fn site(outside: &Path) -> tempfile::TempDir {
    let dir = support::tempdir();
    let root = dir.path();
    let write = |name: &str, text: &str| {
        let path = root.join(name);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("test setup");
        std::fs::write(path, text).expect("test setup");
    };
    write(
        "index.php",
        "<?php echo 'index ran: ', $_SERVER['SCRIPT_NAME'], ' ', $_SERVER['PATH_INFO'] ?? '', \"\\n\";\n",
    );
    write(
        "secret.php",
        &format!("<?php /* {SOURCE} */ echo \"secret ran\\n\";\n"),
    );
    // An "image" a user uploaded with PHP inside; run, it prints RAN_UPLOAD.
    let evil = format!(
        "<?php echo strrev('{}');\n",
        RAN_UPLOAD.chars().rev().collect::<String>()
    );
    write("uploads/evil.jpg", &evil);
    write("uploads/evil.php.txt", &evil);
    write(".env", &format!("{DOTFILE}\n"));
    write(".git/config", &format!("{DOTFILE}\n"));
    // A PHP file in the root under a name nginx's PHP location misses.
    write("upper.PHP", &format!("<?php /* {SOURCE} */\n"));
    std::fs::write(outside.join("passwd"), format!("{OUTSIDE}\n")).expect("test setup");
    symlink(root.join("uploads/evil.jpg"), root.join("linked.php")).expect("test setup");
    symlink(outside, root.join("out")).expect("test setup");
    symlink(root.join("secret.php"), root.join("source.txt")).expect("test setup");
    for dir in [root.to_path_buf(), root.join("uploads"), root.join(".git")] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).expect("test setup");
    }
    std::fs::set_permissions(outside, std::fs::Permissions::from_mode(0o755)).expect("test setup");
    dir
}

fn hearth(root: &Path) -> Server {
    Server::spawn_args(&[
        "serve".into(),
        "--root".into(),
        root.to_string_lossy().into_owned(),
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--workers".into(),
        "2".into(),
    ])
}

/// Which of the markers a body carries.
fn leaks(body: &str) -> Vec<&'static str> {
    [RAN_UPLOAD, SOURCE, DOTFILE, OUTSIDE]
        .into_iter()
        .filter(|m| body.contains(m))
        .collect()
}

#[test]
fn hostile_paths_never_run_or_leak_anything() {
    let outside = support::tempdir();
    let site = site(outside.path());
    let fpm = Reference::start_with(site.path(), "index.php", &[("NGINX_SITE", "classic")]);
    let hearth = hearth(site.path());
    // (path, Hearth's status, nginx + php-fpm's status, what nginx + php-fpm
    // leaks). Where the two answer alike, Hearth's answer is nginx's.
    let table: &[(&str, u16, u16, &[&str])] = &[
        // The upload tricks: a .php path segment after a real file.
        ("/uploads/evil.jpg/x.php", 404, 404, &[]),
        // Not nginx's PHP location (no name before `.php`): the front
        // controller answers.
        ("/uploads/evil.jpg/.php", 200, 200, &[]),
        ("/uploads/evil.jpg%2fx.php", 404, 404, &[]),
        ("/uploads/evil.jpg/x.php/", 404, 404, &[]),
        ("/uploads/evil.php.txt", 200, 200, &[]),
        ("/uploads/evil.php.txt/x.php", 404, 404, &[]),
        // NUL bytes: refused before any lookup.
        ("/uploads/evil.jpg%00.php", 400, 400, &[]),
        ("/secret.php%00.txt", 400, 400, &[]),
        ("/x.php%00.jpg", 400, 400, &[]),
        // Trailing characters on a script name.
        ("/secret.php/", 200, 200, &[]),
        ("/secret.php.", 200, 200, &[]),
        ("/secret.php%20", 200, 200, &[]),
        ("/secret.php::$DATA", 200, 200, &[]),
        // CVE-2019-11043: a newline in PATH_INFO breaks
        // fastcgi_split_path_info; try_files then finds no such script.
        ("/index.php/PHP%0Ais_the_best.php", 404, 404, &[]),
        ("/index.php%0A.php", 404, 404, &[]),
        // Traversal, raw and encoded.
        ("/uploads/../secret.php", 200, 200, &[]),
        ("/%2e%2e/%2e%2e/etc/passwd", 400, 400, &[]),
        ("/uploads/%2e%2e/%2e%2e/etc/passwd", 400, 400, &[]),
        ("/out/passwd", 403, 200, &[OUTSIDE]),
        // Dotfiles and sources.
        ("/.env", 403, 200, &[DOTFILE]),
        ("/.git/config", 403, 200, &[DOTFILE]),
        ("/upper.PHP", 403, 200, &[SOURCE]),
        ("/source.txt", 403, 200, &[SOURCE]),
        // A symlink named .php to an upload: php-fpm's
        // security.limit_extensions checks the name, so php-fpm runs it.
        ("/linked.php", 403, 200, &[RAN_UPLOAD]),
    ];
    let mut report = String::new();
    let mut failures = String::new();
    for &(path, hearth_status, fpm_status, fpm_leaks) in table {
        let h = Req::new("GET", path).send(hearth.addr);
        let f = Req::new("GET", path).send(fpm.addr);
        report.push_str(&format!(
            "{path}: hearth {} {:?}, nginx + php-fpm {} {:?}\n",
            h.status,
            leaks(&h.text()),
            f.status,
            leaks(&f.text())
        ));
        let mut wrong = Vec::new();
        if !leaks(&h.text()).is_empty() {
            wrong.push(format!("Hearth leaked: {}", h.text()));
        }
        if h.status != hearth_status {
            wrong.push(format!("Hearth answered {}, not {hearth_status}", h.status));
        }
        if f.status != fpm_status || leaks(&f.text()) != fpm_leaks {
            wrong.push(format!(
                "nginx + php-fpm answered {} {:?}, not {fpm_status} {fpm_leaks:?}",
                f.status,
                leaks(&f.text())
            ));
        }
        // Error pages differ only in the server's name.
        let f_text = f
            .text()
            .replace("<center>nginx/1.22.1</center>", "<center>hearth</center>");
        if hearth_status == fpm_status && fpm_leaks.is_empty() && h.text() != f_text {
            wrong.push(format!("bodies differ: {:?} and {f_text:?}", h.text()));
        }
        for w in wrong {
            failures.push_str(&format!("{path}: {w}\n"));
        }
    }
    assert!(failures.is_empty(), "{failures}\nall answers:\n{report}");
}

#[test]
fn reload_follows_a_switched_current_symlink() {
    let dir = support::tempdir();
    let base = dir.path();
    for release in ["r1", "r2"] {
        let root = base.join(release);
        std::fs::create_dir(&root).expect("test setup");
        std::fs::write(
            root.join("index.php"),
            format!("<?php echo '{release} ', $_SERVER['DOCUMENT_ROOT'], \"\\n\";\n"),
        )
        .expect("test setup");
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755))
            .expect("test setup");
    }
    std::fs::set_permissions(base, std::fs::Permissions::from_mode(0o755)).expect("test setup");
    symlink("r1", base.join("current")).expect("test setup");
    let hearth = hearth(&base.join("current"));
    let real = std::fs::canonicalize(base).expect("test setup");
    assert_eq!(
        Req::new("GET", "/").send(hearth.addr).text(),
        format!("r1 {}/r1\n", real.display())
    );
    // The deploy: `current` now names r2, switched atomically.
    symlink("r2", base.join("next")).expect("test setup");
    std::fs::rename(base.join("next"), base.join("current")).expect("test setup");
    hearth.signal("HUP");
    hearth.wait_for_log("reloaded", Duration::from_secs(30));
    assert_eq!(
        Req::new("GET", "/").send(hearth.addr).text(),
        format!("r2 {}/r2\n", real.display())
    );
}
