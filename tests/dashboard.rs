//! The dashboard on the admin listener (`--admin`), against the real
//! binary: its page and data compared with `hearth status` and
//! `/metrics`, its actions and their refusals (no token, a wrong one,
//! another site's page, a public address without a token), what it never
//! shows, and a real headless Chromium (Debian's `chromium` and
//! `chromium-driver`) reading it under load and retrying a dead job.
#![allow(clippy::unwrap_used)]

mod browser;
mod queue_support;
mod support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};
use support::{fixture, Server};

/// The admin token of these tests.
const TOKEN: &str = "test-token-0123456789abcdef";

/// A token file, mode 0600, in `dir`.
fn token_file(dir: &Path, token: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.join("admin-token");
    std::fs::write(&path, format!("{token}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

fn get(addr: SocketAddr, path: &str) -> support::Response {
    support::request(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
}

/// `POST /api/PATH` with `headers` (each `Name: value\r\n`).
fn post(addr: SocketAddr, path: &str, headers: &str) -> support::Response {
    support::request(
        addr,
        format!(
            "POST {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}Content-Length: 0\r\n\
             Connection: close\r\n\r\n"
        )
        .as_bytes(),
    )
}

fn bearer(token: &str) -> String {
    format!("Authorization: Bearer {token}\r\n")
}

/// A server of tests/fixtures/app.php with a control socket in `dir`
/// and an admin listener, with `extra` flags.
fn server(dir: &Path, extra: &[&str]) -> (Server, PathBuf, SocketAddr) {
    let socket = dir.join("control.sock");
    let socket_arg = socket.to_string_lossy().into_owned();
    let mut args = vec!["--admin", "127.0.0.1:0", "--control-socket", &socket_arg];
    args.extend_from_slice(extra);
    let server = Server::start(&fixture("app.php"), &args);
    let admin = support::admin_addr(&server);
    (server, socket, admin)
}

fn pids(workers: &Value) -> Vec<u64> {
    let mut pids: Vec<u64> = workers
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["pid"].as_u64().unwrap())
        .collect();
    pids.sort_unstable();
    pids
}

#[test]
fn the_page_and_its_data_agree_with_hearth_status() {
    let dir = support::tempdir();
    let (server, socket, admin) = server(dir.path(), &[]);

    let page = get(admin, "/");
    assert_eq!(page.status, 200);
    assert!(page
        .header("content-type")
        .unwrap()
        .starts_with("text/html"));
    let csp = page.header("content-security-policy").unwrap();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("frame-ancestors 'none'"),
        "{csp}"
    );
    assert_eq!(page.header("x-frame-options"), Some("DENY"));
    assert!(page.text().contains("dashboard.js"), "{}", page.text());
    for (path, kind) in [
        ("/dashboard.js", "text/javascript"),
        ("/dashboard.css", "text/css"),
    ] {
        let asset = get(admin, path);
        assert_eq!(asset.status, 200, "{path}");
        assert!(
            asset.header("content-type").unwrap().starts_with(kind),
            "{path}"
        );
        assert!(
            asset.body.len() > 1000,
            "{path} is {} bytes",
            asset.body.len()
        );
    }
    // Nothing is fetched from elsewhere: the page works offline.
    for path in ["/", "/dashboard.js", "/dashboard.css"] {
        let text = get(admin, path).text();
        for outside in ["http://", "https://", "//cdn", "@import"] {
            assert!(
                !text.contains(outside) || text.contains("http://www.w3.org/2000/svg"),
                "{path} refers to {outside}"
            );
        }
    }

    for i in 0..30 {
        assert_eq!(server.get(&format!("/slow?ms=1&n={i}")).status, 200);
    }
    let mut data = Value::Null;
    support::eventually(
        Duration::from_secs(10),
        "the 30 requests in the samples",
        || {
            data = get(admin, "/api/status").json();
            let counted: u64 = data["history"]
                .as_array()?
                .iter()
                .map(|s| s["classes"]["2xx"].as_u64().unwrap_or(0))
                .sum();
            (counted >= 30).then_some(())
        },
    );
    assert_eq!(data["command"], "serve");
    assert_eq!(data["actions"], false, "no token: actions are off");
    let status = support::status_json(&socket);
    assert_eq!(pids(&data["status"]["workers"]), pids(&status["workers"]));
    assert_eq!(data["status"]["pool"]["workers"], status["pool"]["workers"]);
    let sample = data["history"].as_array().unwrap().last().unwrap().clone();
    for key in [
        "t", "requests", "p50", "p95", "p99", "classes", "waiting", "busy", "live",
    ] {
        assert!(sample.get(key).is_some(), "{key} in {sample}");
    }
    let busiest = data["history"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["requests"].as_u64() > Some(0))
        .unwrap()
        .clone();
    assert!(busiest["p50"].as_f64().unwrap() > 0.0, "{busiest}");
    assert!(busiest["wait_p95"].as_f64().is_some(), "{busiest}");
    let slow = data["slow"].as_array().unwrap();
    assert!(!slow.is_empty());
    for s in slow {
        assert_eq!(s["path"], "/slow", "no query string: {s}");
        assert!(pids(&status["workers"]).contains(&s["worker"].as_u64().unwrap()));
    }
    // Asked again since the last sample: only newer samples.
    let last = sample["t"].as_f64().unwrap();
    let later = get(admin, &format!("/api/status?since={last}")).json();
    assert!(later["history"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["t"].as_f64().unwrap() > last));
    // The same counts as /metrics.
    let metrics = get(admin, "/metrics").text();
    let served = metrics
        .lines()
        .find(|l| l.starts_with("hearth_http_requests_total{method=\"GET\",code=\"200\"}"))
        .unwrap();
    let served: u64 = served.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(served >= 30, "{served}");
}

#[test]
fn actions_need_the_token_and_the_dashboards_own_origin() {
    let dir = support::tempdir();
    let (_open, _, open_admin) = server(dir.path(), &[]);
    let refused = post(open_admin, "/api/reload", &bearer(TOKEN));
    assert_eq!(
        refused.status,
        409,
        "no token configured: {}",
        refused.text()
    );
    assert!(
        refused.text().contains("actions are off"),
        "{}",
        refused.text()
    );

    let locked = support::tempdir();
    let file = token_file(locked.path(), TOKEN);
    let file_arg = file.to_string_lossy().into_owned();
    let (_server, socket, admin) = server(locked.path(), &["--admin-token-file", &file_arg]);
    let before = pids(&support::status_json(&socket)["workers"]);
    let origin = format!("Origin: http://{admin}\r\n");

    let cases: Vec<(&str, String, u16)> = vec![
        ("no token", String::new(), 401),
        ("a wrong token", bearer("test-token-0123456789abcdeX"), 401),
        ("a shorter token", bearer("test-token"), 401),
        (
            "the token as Basic",
            format!("Authorization: Basic {TOKEN}\r\n"),
            401,
        ),
        (
            "another site's page",
            format!("{}Origin: http://evil.example\r\n", bearer(TOKEN)),
            403,
        ),
        (
            "Sec-Fetch-Site cross-site",
            format!("{}Sec-Fetch-Site: cross-site\r\n", bearer(TOKEN)),
            403,
        ),
        (
            "an Origin of null",
            format!("{}Origin: null\r\n", bearer(TOKEN)),
            403,
        ),
    ];
    for (what, headers, status) in &cases {
        let r = post(admin, "/api/reload", headers);
        assert_eq!(r.status, *status, "{what}: {}", r.text());
        assert_eq!(r.json()["ok"], false, "{what}");
        if *status == 401 {
            assert!(r.header("www-authenticate").unwrap().starts_with("Bearer"));
        }
    }
    // A form another site posts cannot carry the token at all.
    let form = post(
        admin,
        "/api/reload",
        "Content-Type: application/x-www-form-urlencoded\r\nOrigin: http://evil.example\r\n",
    );
    assert_eq!(form.status, 403);
    assert_eq!(get(admin, "/api/reload").status, 405, "GET never acts");
    let unknown = post(admin, "/api/stop", &bearer(TOKEN));
    assert_eq!(unknown.status, 404);
    let queue = post(admin, "/api/queues/0/purge/dead", &bearer(TOKEN));
    assert_eq!(
        queue.status,
        404,
        "hearth serve has no queue: {}",
        queue.text()
    );
    assert_eq!(
        pids(&support::status_json(&socket)["workers"]),
        before,
        "no refused action reloaded"
    );

    let check = post(admin, "/api/check", &format!("{}{origin}", bearer(TOKEN)));
    assert_eq!(check.status, 200, "{}", check.text());
    let data = get(admin, "/api/status").json();
    assert_eq!(data["actions"], true);

    let reload = post(
        admin,
        "/api/reload",
        &format!("{}{origin}Sec-Fetch-Site: same-origin\r\n", bearer(TOKEN)),
    );
    assert_eq!(reload.status, 200, "{}", reload.text());
    assert!(reload.json()["message"]
        .as_str()
        .unwrap()
        .starts_with("reloaded"));
    let after = pids(&support::status_json(&socket)["workers"]);
    assert!(
        after.iter().all(|p| !before.contains(p)),
        "{before:?} -> {after:?}"
    );
    let data = get(admin, "/api/status").json();
    let past = data["past_workers"].as_array().unwrap();
    let reloaded: Vec<u64> = past
        .iter()
        .filter(|w| w["reason"] == "reload")
        .map(|w| w["pid"].as_u64().unwrap())
        .collect();
    for pid in &before {
        assert!(
            reloaded.contains(pid),
            "{pid} replaced by the reload: {past:?}"
        );
    }
}

#[test]
fn a_public_admin_address_needs_a_token() {
    let dir = support::tempdir();
    let out = support::output_within(
        std::process::Command::new(env!("CARGO_BIN_EXE_hearth"))
            .args(["serve", "--listen", "127.0.0.1:0", "--admin", "0.0.0.0:0"])
            .args(support::as_root()),
        Duration::from_secs(30),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--admin 0.0.0.0:0: this address can be reached from other networks"),
        "{stderr}"
    );
    let work = support::output_within(
        std::process::Command::new(env!("CARGO_BIN_EXE_hearth"))
            .args(["work", "--queue", "file:jobs.db", "--admin", "[::]:0"])
            .current_dir(dir.path()),
        Duration::from_secs(30),
    );
    let stderr = String::from_utf8_lossy(&work.stderr);
    assert_eq!(work.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("can be reached from other networks"),
        "{stderr}"
    );

    let short = token_file(dir.path(), "short");
    let out = support::output_within(
        std::process::Command::new(env!("CARGO_BIN_EXE_hearth"))
            .args(["serve", "--listen", "127.0.0.1:0", "--admin", "0.0.0.0:0"])
            .arg("--admin-token-file")
            .arg(&short)
            .args(support::as_root()),
        Duration::from_secs(30),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("admin token file {}", short.display())),
        "{stderr}"
    );
    assert!(stderr.contains("at least 16"), "{stderr}");

    // With a token, it listens, and reading needs none.
    let file = token_file(dir.path(), TOKEN);
    let file_arg = file.to_string_lossy().into_owned();
    let server = Server::start(
        &fixture("app.php"),
        &["--admin", "0.0.0.0:0", "--admin-token-file", &file_arg],
    );
    let admin = support::admin_addr(&server);
    let local: SocketAddr = ([127, 0, 0, 1], admin.port()).into();
    assert_eq!(get(local, "/healthz").status, 200);
    assert_eq!(get(local, "/api/status").json()["actions"], true);
}

#[test]
fn the_dashboard_never_shows_bodies_cookies_or_authorization() {
    let dir = support::tempdir();
    let (server, _, admin) = server(dir.path(), &[]);
    let secrets = [
        "BODYSECRET1",
        "COOKIESECRET2",
        "AUTHSECRET3",
        "QUERYSECRET4",
        "HEADERSECRET5",
    ];
    let addr = server.addr;
    let slow = std::thread::spawn(move || {
        support::request(
            addr,
            b"POST /slow?ms=1500&key=QUERYSECRET4 HTTP/1.1\r\nHost: x\r\n\
              Cookie: session=COOKIESECRET2\r\nAuthorization: Bearer AUTHSECRET3\r\n\
              X-Api-Key: HEADERSECRET5\r\nContent-Length: 11\r\nConnection: close\r\n\r\nBODYSECRET1",
        )
    });
    // While it runs, the worker table shows it; after, the slow list does.
    let mut seen = Vec::new();
    support::eventually(
        Duration::from_secs(10),
        "the running request in the status",
        || {
            let text = get(admin, "/api/status").text();
            seen.push(text.clone());
            text.contains("\"uri\":\"/slow\"").then_some(())
        },
    );
    assert_eq!(slow.join().unwrap().status, 200);
    support::eventually(
        Duration::from_secs(10),
        "the slow request in the list",
        || {
            let text = get(admin, "/api/status").text();
            seen.push(text.clone());
            text.contains("\"path\":\"/slow\"").then_some(())
        },
    );
    for path in ["/", "/dashboard.js", "/dashboard.css", "/metrics"] {
        seen.push(get(admin, path).text());
    }
    for text in &seen {
        for secret in secrets {
            assert!(!text.contains(secret), "{secret} shown: {text}");
        }
    }
}

#[test]
fn queue_actions_retry_delete_and_purge_dead_jobs() {
    use queue_support::{Engine, Producer, Work};
    let engine = Engine::file();
    let dir = tempfile::tempdir().unwrap();
    let q = Producer::open(&engine);
    let first = q.push(&json!({"cmd": "exit 3"}), 1, "r");
    let second = q.push(&json!({"cmd": "echo oops >&2; exit 4"}), 1, "r");
    let third = q.push(&json!({"cmd": "exit 5"}), 1, "r");
    let file = token_file(dir.path(), TOKEN);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let admin: SocketAddr = ([127, 0, 0, 1], port).into();
    let admin_arg = admin.to_string();
    let file_arg = file.to_string_lossy().into_owned();
    let _work = Work::start(
        &engine,
        dir.path(),
        &[
            "-j",
            "1",
            "--admin",
            &admin_arg,
            "--admin-token-file",
            &file_arg,
        ],
    );
    let mut data = Value::Null;
    support::eventually(
        Duration::from_secs(30),
        "three dead jobs on the dashboard",
        || {
            data = get(admin, "/api/status").json();
            (data["queues"][0]["dead"].as_array()?.len() == 3).then_some(())
        },
    );
    assert_eq!(data["command"], "work");
    let queue = &data["queues"][0];
    assert_eq!(queue["stats"]["dead"], 3);
    let dead = queue["dead"].as_array().unwrap();
    let ids: Vec<u64> = dead.iter().map(|j| j["id"].as_u64().unwrap()).collect();
    assert_eq!(ids, vec![first.0, second.0, third.0]);
    assert_eq!(dead[0]["attempts"], 1);
    assert!(
        dead[1]["error"].as_str().unwrap().contains("4"),
        "{}",
        dead[1]
    );

    let refused = post(admin, &format!("/api/queues/0/dead/{}/delete", first.0), "");
    assert_eq!(refused.status, 401);
    let gone = post(admin, "/api/queues/0/dead/999999/retry", &bearer(TOKEN));
    assert_eq!(gone.status, 404, "{}", gone.text());
    let delete = post(
        admin,
        &format!("/api/queues/0/dead/{}/delete", first.0),
        &bearer(TOKEN),
    );
    assert_eq!(delete.status, 200, "{}", delete.text());
    let again = post(
        admin,
        &format!("/api/queues/0/dead/{}/delete", first.0),
        &bearer(TOKEN),
    );
    assert_eq!(again.status, 404, "{}", again.text());
    let purge = post(admin, "/api/queues/0/purge/dead", &bearer(TOKEN));
    assert_eq!(purge.status, 200, "{}", purge.text());
    assert_eq!(purge.json()["message"], "2 dead jobs removed");
    let data = get(admin, "/api/status").json();
    assert_eq!(data["queues"][0]["dead"], json!([]));
    assert_eq!(q.stats().dead, 0);
    support::eventually(Duration::from_secs(10), "job counts in the samples", || {
        let data = get(admin, "/api/status").json();
        let last = data["history"].as_array()?.last()?.clone();
        (last["jobs"]["failed"].as_u64() == Some(3)).then_some(())
    });
}

/// The dashboard in a real browser while load runs: the worker table, the
/// charts and the slow requests with the numbers `hearth status` and
/// `/metrics` give; a screenshot with something on it.
#[test]
fn a_browser_shows_the_workers_and_the_traffic_under_load() {
    let dir = support::tempdir();
    let (server, socket, admin) = server(dir.path(), &["--workers", "3"]);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load: Vec<_> = (0..2)
        .map(|i| {
            let (addr, stop) = (server.addr, stop.clone());
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) && n < 20_000 {
                    let path = if n % 50 == i { "/slow?ms=40" } else { "/pid" };
                    support::request(
                        addr,
                        format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                            .as_bytes(),
                    );
                    n += 1;
                }
                n
            })
        })
        .collect();

    let browser = browser::Browser::start(1280, 2200);
    browser.open(&format!("http://{admin}/"));
    browser.wait_for(
        "the first status drawn",
        Duration::from_secs(20),
        "return document.body.dataset.loaded === '1';",
    );
    // A few seconds of samples under load.
    browser.wait_for(
        "requests per second on the chart",
        Duration::from_secs(20),
        "const f = document.querySelector('#chart-rps'); \
         return f && Number(f.dataset.latest) > 0 && [...f.querySelectorAll('svg path')] \
         .some(p => (p.getAttribute('d') || '').length > 0);",
    );
    let shown = browser.wait_for(
        "the worker table",
        Duration::from_secs(10),
        "const rows = [...document.querySelectorAll('#workers tbody tr[data-pid]')]; \
         return rows.length === 3 ? rows.map(r => Number(r.dataset.pid)).sort((a, b) => a - b) : null;",
    );
    let status = support::status_json(&socket);
    assert_eq!(
        shown,
        json!(pids(&status["workers"])),
        "the same workers as hearth status"
    );
    // One pool: its figures untitled, with the sizing ones, and no Pool
    // column.
    let figures = browser.run(
        "const s = document.querySelectorAll('#pools section[data-pool]'); \
         const f = (k) => s[0].querySelector('dd[data-field=' + k + ']').textContent; \
         return [s.length, s[0].querySelector('h3').hidden, f('state'), f('max_workers'), \
         f('max_pool_memory'), f('started_by_reason'), \
         document.querySelector('#workers thead th:nth-child(2)').textContent];",
        &[],
    );
    assert_eq!(
        figures,
        json!([1, true, "serving", "3", "none", "min 3", "Slot"]),
        "{figures}"
    );
    // Requests served per worker: what the page shows is at most what
    // hearth status says a moment later, and adds up to no more than
    // /metrics' count. (An idle worker may have served none: the pool
    // hands requests to the worker that ran last.)
    let requests = browser.run(
        "return [...document.querySelectorAll('#workers tbody tr[data-pid]')].map(r => \
         [Number(r.dataset.pid), Number(r.querySelector('td[data-field=requests]').dataset.value \
         ?? r.querySelector('td[data-field=requests]').textContent.replace(/[^0-9]/g, ''))]);",
        &[],
    );
    let status = support::status_json(&socket);
    let metrics = get(admin, "/metrics").text();
    let total: u64 = metrics
        .lines()
        .filter(|l| l.starts_with("hearth_http_requests_total{"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    let mut sum = 0;
    for pair in requests.as_array().unwrap() {
        let (pid, shown) = (pair[0].as_u64().unwrap(), pair[1].as_u64().unwrap());
        let now = status["workers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["pid"] == pid)
            .unwrap()["requests"]
            .as_u64()
            .unwrap();
        assert!(shown <= now, "worker {pid}: page {shown}, status {now}");
        sum += shown;
    }
    assert!(
        sum > 0 && sum <= total,
        "{sum} on the page, {total} in /metrics"
    );
    for chart in [
        "#chart-rps",
        "#chart-latency",
        "#chart-classes",
        "#chart-queue",
    ] {
        let drawn = browser.run(
            &format!(
                "const f = document.querySelector('{chart}'); \
                 return f ? [...f.querySelectorAll('svg path')] \
                 .filter(p => (p.getAttribute('d') || '').length > 0).length : -1;"
            ),
            &[],
        );
        assert!(drawn.as_i64().unwrap() > 0, "{chart}: {drawn}");
    }
    let p99 = browser.run(
        "return Number(document.querySelector('#chart-latency').dataset.latest);",
        &[],
    );
    assert!(p99.as_f64().unwrap() > 0.0, "p99 {p99}");
    browser.wait_for(
        "a slow request listed",
        Duration::from_secs(10),
        "return [...document.querySelectorAll('#slow tbody tr')].some(r => r.textContent.includes('/slow'));",
    );
    let slow_text = browser.run("return document.querySelector('#slow').textContent;", &[]);
    assert!(
        !slow_text.as_str().unwrap().contains("ms=40"),
        "no query strings"
    );
    let png = browser.screenshot();
    let colours = browser::check_not_blank(&png, 1000);
    save_screenshot("dashboard-serve.png", &png);
    // On a phone: nothing wider than the screen but the tables and charts'
    // own scrolling boxes.
    browser.resize(375, 812);
    let overflow = browser.wait_for(
        "the page at a phone's width",
        Duration::from_secs(10),
        "return window.innerWidth <= 400 ? [document.documentElement.scrollWidth, window.innerWidth] : null;",
    );
    assert!(
        overflow[0].as_u64() <= overflow[1].as_u64(),
        "the page scrolls sideways on a phone: {overflow}"
    );
    // Every control can be reached with the keyboard.
    let unreachable = browser.run(
        "return [...document.querySelectorAll('button, input, a[href]')]\
         .filter(e => e.offsetParent !== null && e.tabIndex < 0).map(e => e.outerHTML);",
        &[],
    );
    assert_eq!(unreachable, json!([]), "controls out of the tab order");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for l in load {
        assert!(l.join().unwrap() > 0);
    }
    eprintln!("screenshot: {colours} colours");
}

/// Keeps a screenshot under target/ for a person to look at.
fn save_screenshot(name: &str, png: &[u8]) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(name), png).unwrap();
    eprintln!("saved {}", dir.join(name).display());
}

/// A dead job in a real browser: listed with its error, retried with a
/// click once the token is given, and gone from the list.
#[test]
fn a_browser_retries_a_dead_job() {
    use queue_support::{Engine, Producer, Work};
    let engine = Engine::file();
    let dir = tempfile::tempdir().unwrap();
    let mark = dir.path().join("second-time");
    let q = Producer::open(&engine);
    // Fails the first time, succeeds when retried.
    let cmd = format!(
        "test -e {m} || {{ touch {m}; echo 'no mail server' >&2; exit 7; }}",
        m = mark.display()
    );
    let id = q.push(&json!({"cmd": cmd}), 1, "r");
    q.push(&json!({"cmd": "true"}), 1, "r");
    let file = token_file(dir.path(), TOKEN);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let admin: SocketAddr = ([127, 0, 0, 1], port).into();
    let (admin_arg, file_arg) = (admin.to_string(), file.to_string_lossy().into_owned());
    let _work = Work::start(
        &engine,
        dir.path(),
        &[
            "-j",
            "2",
            "--admin",
            &admin_arg,
            "--admin-token-file",
            &file_arg,
        ],
    );
    support::eventually(Duration::from_secs(30), "the job dead", || {
        (q.stats().dead == 1).then_some(())
    });

    let browser = browser::Browser::start(1280, 1800);
    browser.open(&format!("http://{admin}/"));
    let row = format!("#dead tbody tr[data-id=\"{}\"]", id.0);
    let text = browser.wait_for(
        "the dead job listed",
        Duration::from_secs(20),
        &format!("const r = document.querySelector('{row}'); return r && r.textContent;"),
    );
    assert!(text.as_str().unwrap().contains("no mail server"), "{text}");
    let shown_dead = browser.run(
        "return document.querySelector('#queue-stats [data-field=dead]').textContent;",
        &[],
    );
    assert!(shown_dead.as_str().unwrap().contains('1'), "{shown_dead}");
    let metrics = get(admin, "/metrics").text();
    assert!(metrics.contains("state=\"dead\"} 1\n"), "{metrics}");
    // Locked: the retry button does nothing.
    let disabled = browser.run(
        &format!("return document.querySelector('{row} button[data-action=retry]').disabled;"),
        &[],
    );
    assert_eq!(disabled, json!(true));
    browser.type_into("#token", TOKEN);
    browser.click("#unlock button[type=submit]");
    browser.wait_for(
        "the actions unlocked",
        Duration::from_secs(10),
        &format!("return !document.querySelector('{row} button[data-action=retry]').disabled;"),
    );
    browser.click(&format!("{row} button[data-action=retry]"));
    browser.wait_for(
        "the job gone from the dead list",
        Duration::from_secs(20),
        &format!("return document.querySelector('{row}') === null;"),
    );
    let message = browser.run(
        "return document.querySelector('#message').textContent;",
        &[],
    );
    assert!(
        message.as_str().unwrap().contains("ready again"),
        "{message}"
    );
    support::eventually(Duration::from_secs(30), "the retried job done", || {
        let s = q.stats();
        (s.dead == 0 && s.done == 2).then_some(())
    });
    let png = browser.screenshot();
    browser::check_not_blank(&png, 1000);
    save_screenshot("dashboard-work.png", &png);
}

/// Classic mode in a real browser: php-fpm's children in the worker table,
/// as `hearth status` lists them, and php-fpm's state.
#[test]
fn a_browser_shows_classic_modes_php_fpm() {
    let dir = support::reachable_tempdir();
    let root = dir.path().join("site");
    std::fs::create_dir(&root).unwrap();
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::write(root.join("index.php"), "<?php echo 'classic';\n").unwrap();
    let socket = dir.path().join("control.sock");
    let mut args: Vec<String> = [
        "serve",
        "--root",
        &root.to_string_lossy(),
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "2",
        "--admin",
        "127.0.0.1:0",
        "--control-socket",
        &socket.to_string_lossy(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(support::as_root());
    let server = Server::spawn_args(&args);
    let admin = support::admin_addr(&server);
    support::eventually(Duration::from_secs(30), "php-fpm answering", || {
        let r = get(server.addr, "/index.php");
        (r.status == 200 && r.text() == "classic").then_some(())
    });
    for _ in 0..20 {
        assert_eq!(get(server.addr, "/index.php?x=1").status, 200);
    }
    let status = support::status_json(&socket);
    assert_eq!(status["mode"], "classic");
    let browser = browser::Browser::start(1280, 1600);
    browser.open(&format!("http://{admin}/"));
    let shown = browser.wait_for(
        "php-fpm's children in the worker table",
        Duration::from_secs(20),
        "const rows = [...document.querySelectorAll('#workers tbody tr[data-pid]')]; \
         return rows.length ? rows.map(r => Number(r.dataset.pid)).sort((a, b) => a - b) : null;",
    );
    assert_eq!(shown, json!(pids(&status["workers"])));
    let classic = browser.wait_for(
        "the classic section",
        Duration::from_secs(10),
        "const s = document.querySelector('#classic'); return s && !s.hidden && s.textContent;",
    );
    assert!(classic.as_str().unwrap().contains("running"), "{classic}");
    browser.wait_for(
        "the requests on the chart",
        Duration::from_secs(20),
        "return [...document.querySelectorAll('#chart-classes svg path')] \
         .some(p => (p.getAttribute('d') || '').length > 0);",
    );
    let png = browser.screenshot();
    browser::check_not_blank(&png, 1000);
    save_screenshot("dashboard-classic.png", &png);
}

/// Memory growth by route in a real browser: after mixed requests to
/// tests/fixtures/growth, the routes table lists the leaking route first,
/// with the figures `hearth status` gives.
#[test]
fn a_browser_shows_the_leaking_route_first() {
    let dir = support::tempdir();
    let socket = dir.path().join("control.sock");
    let server = Server::start(
        &fixture("growth/worker.php"),
        &[
            "--workers",
            "2",
            "--admin",
            "127.0.0.1:0",
            "--control-socket",
            &socket.to_string_lossy(),
        ],
    );
    let admin = support::admin_addr(&server);
    let mut conn = support::Connection::open(server.addr);
    for i in 0..200 {
        let path = match i % 4 {
            0 => format!("/leak/{i}"),
            1 => format!("/users/{i}"),
            2 => "/about".to_owned(),
            _ => format!("/search?q={i}"),
        };
        assert_eq!(conn.get(&path, "").status, 200);
    }
    let status = support::status_json(&socket);
    let top = status["routes"]["top"].as_array().unwrap();
    assert_eq!(top[0]["route"], "GET /leak/{id}", "{}", status["routes"]);

    let browser = browser::Browser::start(1280, 2200);
    browser.open(&format!("http://{admin}/"));
    let shown = browser.wait_for(
        "the routes table",
        Duration::from_secs(20),
        "const rows = [...document.querySelectorAll('#routes tbody tr[data-route]')]; \
         return rows.length === 4 ? rows.map(r => [...r.cells].map(c => c.textContent)) : null;",
    );
    let rows = shown.as_array().unwrap();
    let first: Vec<&str> = rows[0]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(first[0], "GET /leak/{id}", "{shown}");
    assert_eq!(first[1], top[0]["requests"].to_string(), "{shown}");
    assert!(
        first[3].starts_with('+') && first[3].ends_with("KiB"),
        "{shown}"
    );
    assert!(first[4].ends_with("KiB"), "the mean, in KiB: {shown}");
    let names: Vec<&str> = rows.iter().map(|r| r[0].as_str().unwrap()).collect();
    for clean in ["GET /users/{id}", "GET /about", "GET /search"] {
        assert!(names.contains(&clean), "{clean} in {names:?}");
    }
    let caption = browser.run(
        "return document.querySelector('#cap-routes').textContent;",
        &[],
    );
    assert!(
        caption.as_str().unwrap().contains("(4 of 4 routes)"),
        "{caption}"
    );
    let png = browser.screenshot();
    browser::check_not_blank(&png, 1000);
    save_screenshot("dashboard-routes.png", &png);
}

/// Several pools in a real browser: a section per pool with its route,
/// its figures (the sizing ones too) and, while it fails, why; the
/// workers table with each worker's pool; all as `hearth status` says.
#[test]
fn a_browser_shows_each_pool_and_its_sizing() {
    let dir = support::tempdir();
    let socket = dir.path().join("control.sock");
    let worker = fixture("pools/worker.php").display().to_string();
    let toml = dir.path().join("hearth.toml");
    std::fs::write(
        &toml,
        format!(
            r#"
[serve]
script = "{worker}"
workers = 3
min_workers = 1
max_pool_memory = "1G"
admin = "127.0.0.1:0"
control_socket = "{socket}"

[[serve.pool]]
name = "api"
path = ["/api/", "/v2/"]
script = "{worker}"
workers = 2
ini = {{ "hearth_test.pool" = "api" }}
"#,
            socket = socket.display(),
        ),
    )
    .unwrap();
    let args: Vec<String> = [
        "serve",
        "--config",
        &toml.to_string_lossy(),
        "--listen",
        "127.0.0.1:0",
        "--php",
        &support::php_binary(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let server = Server::spawn_args(&args);
    server.wait_until_ready();
    let admin = support::admin_addr(&server);
    for _ in 0..5 {
        assert_eq!(get(server.addr, "/").status, 200);
    }
    // The api pool in a crash loop: its workers die on /api/crash.
    support::eventually(Duration::from_secs(60), "the api pool failing", || {
        (get(server.addr, "/api/crash").status == 503).then_some(())
    });

    let browser = browser::Browser::start(1280, 2400);
    browser.open(&format!("http://{admin}/"));
    // Each pool: [name, title, failing banner, {field: text}].
    let read_pools = "return [...document.querySelectorAll('#pools section[data-pool]')].map(s => { \
         const t = s.querySelector('h3'); const f = s.querySelector('p.failing'); \
         return [s.dataset.pool, t.hidden ? null : t.textContent, f.hidden ? null : f.textContent, \
         Object.fromEntries([...s.querySelectorAll('dd[data-field]')].map(d => [d.dataset.field, d.textContent]))]; });";
    let shown = browser.wait_for(
        "both pools, the api one failing",
        Duration::from_secs(20),
        &format!(
            "const p = (() => {{ {read_pools} }})(); \
             return p.length === 2 && p[1][2] ? p : null;"
        ),
    );
    let status = support::status_json(&socket);
    let pools = shown.as_array().unwrap();
    let names: Vec<&str> = pools.iter().map(|p| p[0].as_str().unwrap()).collect();
    assert_eq!(names, ["default", "api"]);
    let title = |i: usize| pools[i][1].as_str().unwrap();
    assert!(
        title(0).starts_with("Pool default: every other request"),
        "{shown}"
    );
    assert!(
        title(1).starts_with("Pool api: /api/*, /v2/*") && title(1).ends_with("worker.php"),
        "{shown}"
    );
    assert!(pools[0][2].is_null(), "the default pool is not failing");
    let banner = pools[1][2].as_str().unwrap();
    assert!(
        banner.starts_with("Failing: workers die on requests (since ")
            && banner.contains("exit status 1"),
        "{banner}"
    );
    let fields = |i: usize| pools[i][3].as_object().unwrap();
    let want = |i: usize| &status["pools"][i]["pool"];
    // The default pool, idle meanwhile: the same figures as hearth status.
    let (page, json) = (fields(0), want(0));
    for key in [
        "live",
        "busy",
        "idle",
        "queue",
        "min_workers",
        "max_workers",
        "failing",
        "started",
        "request_crashes",
    ] {
        assert_eq!(page[key], json[key].to_string(), "{key}: {shown} / {json}");
    }
    assert_eq!(page["state"], "serving");
    assert_eq!(page["min_workers"], "1");
    assert_eq!(page["max_workers"], "3");
    assert_eq!(
        page["booting"],
        format!("{} (at most {})", json["booting"], json["max_booting"]),
        "{shown}"
    );
    assert_eq!(page["max_pool_memory"], "1024.0", "1 GiB in MiB");
    let memory: f64 = page["memory"].as_str().unwrap().parse().unwrap();
    let json_memory = json["memory"].as_f64().unwrap() / 1048576.0;
    assert!(
        memory > 1.0 && (memory - json_memory).abs() < 4.0,
        "page {memory} MiB, status {json_memory} MiB"
    );
    assert_eq!(page["refused"], json["refused"]["memory"].to_string());
    assert!(
        page["started_by_reason"]
            .as_str()
            .unwrap()
            .contains(&format!("min {}", json["started_by_reason"]["min"])),
        "{shown}"
    );
    assert_eq!(page["retired_by_reason"], "none", "{shown}");
    // The api pool, failing: its cause, its deaths, its replacements.
    let page = fields(1);
    assert_eq!(page["state"], "FAILING (requests)", "{shown}");
    assert!(
        page["request_crashes"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
            >= 3
    );
    assert_eq!(page["max_workers"], "2");
    assert!(
        page["retired_by_reason"]
            .as_str()
            .unwrap()
            .contains("exited")
            || page["retired_by_reason"]
                .as_str()
                .unwrap()
                .contains("crashed"),
        "{shown}"
    );
    assert!(
        page["started_by_reason"]
            .as_str()
            .unwrap()
            .contains("replace"),
        "{shown}"
    );
    let summary = browser.run(
        "return document.querySelector('#summary').textContent;",
        &[],
    );
    assert!(summary.as_str().unwrap().contains("2 pools"), "{summary}");

    // The workers table: every pool's workers, each with its pool's name.
    let header = browser.run(
        "return [...document.querySelectorAll('#workers thead th')].map(t => t.textContent);",
        &[],
    );
    assert_eq!(header[1], "Pool", "{header}");
    support::eventually(
        Duration::from_secs(30),
        "the workers table as hearth status has it",
        || {
            let mut page: Vec<(u64, String)> = browser
                .run(
                    "return [...document.querySelectorAll('#workers tbody tr[data-pid]')].map(r => \
                     [Number(r.dataset.pid), r.querySelector('td[data-field=pool]').textContent]);",
                    &[],
                )
                .as_array()
                .unwrap()
                .iter()
                .map(|r| (r[0].as_u64().unwrap(), r[1].as_str().unwrap().to_owned()))
                .collect();
            page.sort();
            let status = support::status_json(&socket);
            let mut want: Vec<(u64, String)> = status["pools"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|p| {
                    let name = p["name"].as_str().unwrap().to_owned();
                    pids(&p["workers"])
                        .into_iter()
                        .map(move |pid| (pid, name.clone()))
                })
                .collect();
            want.sort();
            (page == want && page.iter().any(|(_, p)| p == "api")).then_some(())
        },
    );
    let png = browser.screenshot();
    browser::check_not_blank(&png, 1000);
    save_screenshot("dashboard-pools.png", &png);

    // The api pool serves again: the page says so.
    support::eventually(Duration::from_secs(60), "the api pool serving", || {
        (get(server.addr, "/api/x").status == 200).then_some(())
    });
    browser.wait_for(
        "the api pool serving on the page",
        Duration::from_secs(20),
        "const s = document.querySelector('#pools section[data-pool=api]'); \
         return s.querySelector('dd[data-field=state]').textContent === 'serving' \
         && s.querySelector('p.failing').hidden;",
    );
}
