//! The pool and the FastCGI exchange against a real php-fpm (Debian's
//! php8.2-fpm), each test with its own pool in temporary directories.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hearth_fpm::fastcgi::{self, Limits, Response};
use hearth_fpm::pool::{Config, IniSetting, Pool, ProcessManager};

const GATE_WAIT: &str = r#"<?php
function wait_gate(string $name): void {
    $deadline = microtime(true) + 20;
    while (!file_exists(__DIR__ . '/' . $name) && microtime(true) < $deadline) {
        usleep(5000);
        clearstatcache();
    }
}
"#;

/// A document root readable by the children (www-data), with the scripts
/// the tests run and a directory they may write markers into.
struct Site {
    dir: tempfile::TempDir,
}

impl Site {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777))
            .expect("chmod");
        let site = Site { dir };
        site.script("gate.inc", GATE_WAIT);
        site.script(
            "env.php",
            r#"<?php error_log('hello from env.php');
            echo json_encode(['method' => $_SERVER['REQUEST_METHOD'], 'uri' => $_SERVER['REQUEST_URI'],
                'script' => $_SERVER['SCRIPT_NAME'], 'custom' => $_SERVER['HEARTH_TEST'] ?? null,
                'query' => $_GET]);"#,
        );
        site.script(
            "values.php",
            r#"<?php echo json_encode(['env' => getenv('ODD'), 'ini' => ini_get('user_agent')]);"#,
        );
        site.script(
            "md5.php",
            r#"<?php $in = file_get_contents('php://input'); echo md5($in), ' ', strlen($in);"#,
        );
        site.script(
            "hold.php",
            r#"<?php require __DIR__ . '/gate.inc';
            // Debian's php.ini buffers 4 KiB (output_buffering): flush() alone
            // does not reach php-fpm, under nginx as here.
            while (ob_get_level()) { ob_end_flush(); }
            echo getmypid(), "\n"; flush();
            wait_gate($_GET['gate']); echo "released";"#,
        );
        site.script(
            "status404.php",
            r#"<?php header('Status: 404'); echo 'missing';"#,
        );
        site.script(
            "teapot.php",
            r#"<?php http_response_code(418); echo 'tea';"#,
        );
        site.script("location.php", r#"<?php header('Location: /x');"#);
        site.script(
            "bighead.php",
            r#"<?php header('X-Big: ' . str_repeat('a', 70000)); echo 'x';"#,
        );
        site.script(
            "finish.php",
            r#"<?php require __DIR__ . '/gate.inc'; echo 'answered'; fastcgi_finish_request();
            wait_gate($_GET['gate']); file_put_contents(__DIR__ . '/after-finish', 'ran on');"#,
        );
        site.script("slow.php", r#"<?php sleep(10); echo 'never';"#);
        site.script(
            "answer_first.php",
            r#"<?php echo str_repeat('x', 1 << 20); flush();
            $in = file_get_contents('php://input'); echo ' ', md5($in), ' ', strlen($in);"#,
        );
        site.script(
            "lib.php",
            r#"<?php function lib_loaded(): bool { return true; }"#,
        );
        site.script(
            "probe.php",
            r#"<?php $lib = __DIR__ . '/lib.php';
            $before = opcache_is_script_cached($lib);
            require $lib;
            $status = opcache_get_status(true);
            echo json_encode(['pid' => getmypid(), 'cached_before' => $before,
                'in_scripts' => isset($status['scripts'][$lib]),
                'num_cached' => $status['opcache_statistics']['num_cached_scripts']]);"#,
        );
        site
    }

    fn script(&self, name: &str, body: &str) {
        let path = self.dir.path().join(name);
        std::fs::write(&path, body).expect("write script");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn open_gate(&self, name: &str) {
        std::fs::write(self.path(name), "open").expect("gate");
    }

    fn params(&self, method: &str, script: &str, query: &str) -> Vec<(String, String)> {
        let filename = self.path(script).display().to_string();
        let uri = if query.is_empty() {
            format!("/{script}")
        } else {
            format!("/{script}?{query}")
        };
        vec![
            ("GATEWAY_INTERFACE".into(), "CGI/1.1".into()),
            ("SERVER_PROTOCOL".into(), "HTTP/1.1".into()),
            ("REQUEST_METHOD".into(), method.into()),
            ("SCRIPT_FILENAME".into(), filename),
            ("SCRIPT_NAME".into(), format!("/{script}")),
            ("REQUEST_URI".into(), uri),
            ("QUERY_STRING".into(), query.into()),
            (
                "DOCUMENT_ROOT".into(),
                self.dir.path().display().to_string(),
            ),
        ]
    }
}

fn running_as_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Children as www-data when the tests run as root (as Hearth would run
/// them), as the tests' own user otherwise.
fn config(children: u32) -> Config {
    let user = running_as_root().then(|| "www-data".to_owned());
    Config {
        process_manager: ProcessManager::Static { children },
        group: user.clone(),
        user,
        ..Config::default()
    }
}

fn limits() -> Limits {
    Limits {
        head_timeout: Duration::from_secs(30),
        read_timeout: Duration::from_secs(30),
        ..Limits::default()
    }
}

async fn get(
    pool: &Pool,
    site: &Site,
    script: &str,
    query: &str,
) -> Result<Response, hearth_fpm::Error> {
    fastcgi::request(
        pool.socket(),
        &site.params("GET", script, query),
        tokio::io::empty(),
        &limits(),
    )
    .await
}

async fn body(response: &mut Response) -> String {
    let mut out = Vec::new();
    while let Some(chunk) = response.chunk().await.expect("body") {
        out.extend_from_slice(&chunk);
    }
    String::from_utf8(out).expect("utf-8")
}

async fn stop(pool: Pool) {
    pool.stop(Duration::from_secs(10)).await.expect("stop");
}

/// Waits (bounded) for a state the test cannot be told about: a file a
/// script writes after its response ended, a log line.
async fn until(done: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

#[tokio::test]
async fn get_passes_params_to_server_and_stderr_comes_back_separately() {
    let site = Site::new();
    let pool = Pool::start(&config(2)).await.expect("start");
    let mut params = site.params("GET", "env.php", "a=1&b=two");
    params.push(("HEARTH_TEST".into(), "from-params".into()));
    let mut response = fastcgi::request(pool.socket(), &params, tokio::io::empty(), &limits())
        .await
        .expect("request");
    assert_eq!(response.status, 200);
    let text = body(&mut response).await;
    let value: serde_json::Value = serde_json::from_str(&text).expect("json");
    assert_eq!(value["method"], "GET");
    assert_eq!(value["uri"], "/env.php?a=1&b=two");
    assert_eq!(value["script"], "/env.php");
    assert_eq!(value["custom"], "from-params");
    assert_eq!(value["query"]["b"], "two");
    let stderr = response.take_stderr();
    assert!(
        stderr.iter().any(|l| l.contains("hello from env.php")),
        "{stderr:?}"
    );
    assert!(response
        .headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("content-type")));
    stop(pool).await;
}

#[tokio::test]
async fn a_5_mb_post_body_reaches_php_whole() {
    let site = Site::new();
    let pool = Pool::start(&config(1)).await.expect("start");
    let data: Vec<u8> = (0..5 * 1024 * 1024u32)
        .map(|i| (i * 7 % 251) as u8)
        .collect();
    let expected = format!("{:x} {}", md5(&data), data.len());
    let mut params = site.params("POST", "md5.php", "");
    params.push(("CONTENT_TYPE".into(), "application/octet-stream".into()));
    params.push(("CONTENT_LENGTH".into(), data.len().to_string()));
    let mut response = fastcgi::request(
        pool.socket(),
        &params,
        std::io::Cursor::new(data),
        &limits(),
    )
    .await
    .expect("request");
    assert_eq!(body(&mut response).await, expected);
    stop(pool).await;
}

#[tokio::test]
async fn flushed_output_arrives_before_the_script_ends() {
    let site = Site::new();
    let pool = Pool::start(&config(1)).await.expect("start");
    let mut response = get(&pool, &site, "hold.php", "gate=stream-gate")
        .await
        .expect("request");
    let first = response.chunk().await.expect("chunk").expect("first piece");
    assert!(
        String::from_utf8_lossy(&first)
            .trim()
            .parse::<u32>()
            .is_ok(),
        "{first:?}"
    );
    assert!(
        !site.path("stream-gate").exists(),
        "the script is still waiting"
    );
    site.open_gate("stream-gate");
    assert_eq!(body(&mut response).await, "released");
    stop(pool).await;
}

#[tokio::test]
async fn a_script_answering_without_reading_its_body_does_not_deadlock() {
    // PHP reads a POST body at request startup, unless it is larger than
    // post_max_size (8M in Debian's php.ini): then the script runs with
    // the body unread (php://input reads it when asked). Its 1 MiB answer
    // and the 9 MiB body both exceed the socket buffers, so the body must
    // be sent while the answer is read.
    let site = Site::new();
    let pool = Pool::start(&config(1)).await.expect("start");
    let data = vec![b'z'; 9 * 1024 * 1024];
    let mut params = site.params("POST", "answer_first.php", "");
    params.push(("CONTENT_TYPE".into(), "application/octet-stream".into()));
    params.push(("CONTENT_LENGTH".into(), data.len().to_string()));
    let expected = format!(" {:x} {}", md5(&data), data.len());
    let mut response = fastcgi::request(
        pool.socket(),
        &params,
        std::io::Cursor::new(data),
        &limits(),
    )
    .await
    .expect("request");
    let text = body(&mut response).await;
    assert!(
        text.ends_with(&expected),
        "{:?}",
        &text[text.len().saturating_sub(100)..]
    );
    assert_eq!(text.len(), (1 << 20) + expected.len());
    stop(pool).await;
}

#[tokio::test]
async fn statuses_follow_nginx() {
    let site = Site::new();
    let pool = Pool::start(&config(2)).await.expect("start");
    let r = get(&pool, &site, "status404.php", "").await.expect("404");
    // PHP sends "Status: 404" alone; nginx then writes its own reason.
    assert_eq!((r.status, r.reason.as_str()), (404, ""));
    let r = get(&pool, &site, "teapot.php", "").await.expect("418");
    assert_eq!(r.status, 418);
    let r = get(&pool, &site, "location.php", "").await.expect("302");
    assert_eq!(r.status, 302);
    assert!(r.headers.iter().any(|(n, v)| n == "Location" && v == b"/x"));
    let err = get(&pool, &site, "bighead.php", "")
        .await
        .expect_err("too large");
    assert!(err.is_upstream(), "{err}");
    stop(pool).await;
}

#[tokio::test]
async fn fastcgi_finish_request_ends_the_response_while_the_script_goes_on() {
    let site = Site::new();
    let pool = Pool::start(&config(1)).await.expect("start");
    let mut response = get(&pool, &site, "finish.php", "gate=finish-gate")
        .await
        .expect("request");
    assert_eq!(body(&mut response).await, "answered");
    assert!(response.is_complete());
    assert!(!site.path("after-finish").exists());
    site.open_gate("finish-gate");
    assert!(
        until(|| site.path("after-finish").exists()).await,
        "the script went on after finishing"
    );
    stop(pool).await;
}

#[tokio::test]
async fn request_terminate_timeout_kills_the_child_and_the_pool_serves_on() {
    let site = Site::new();
    let mut config = config(1);
    config.request_terminate_timeout = Some(Duration::from_secs(1));
    let pool = Pool::start(&config).await.expect("start");
    let limits = Limits {
        terminate_after: config.request_terminate_timeout,
        ..limits()
    };
    let params = site.params("GET", "slow.php", "");
    // The script sleeps 10 s, longer than the 1 s limit and shorter than the
    // exchange's own 30 s timeouts: only php-fpm's kill ends it early.
    let err = fastcgi::request(pool.socket(), &params, tokio::io::empty(), &limits)
        .await
        .expect_err("killed");
    assert!(err.is_timed_out(), "{err}");
    let logged = until(|| pool.log_tail().contains("execution timed out")).await;
    assert!(logged, "{}", pool.log_tail());
    let mut next = get(&pool, &site, "teapot.php", "")
        .await
        .expect("next request");
    assert_eq!(body(&mut next).await, "tea");
    stop(pool).await;
}

#[tokio::test]
async fn opcache_is_shared_by_the_children() {
    let site = Site::new();
    let mut config = config(2);
    config.ini.push(IniSetting {
        name: "opcache.enable".into(),
        value: "1".into(),
        admin: true,
    });
    // OPcache does not cache a file modified in the last 2 seconds
    // (opcache.file_update_protection), and lib.php was just written.
    config.ini.push(IniSetting {
        name: "opcache.file_update_protection".into(),
        value: "0".into(),
        admin: true,
    });
    let pool = Pool::start(&config).await.expect("start");
    // Child X is held busy, so the probe runs in child Y and compiles lib.php.
    let mut hold_x = get(&pool, &site, "hold.php", "gate=gate-x")
        .await
        .expect("hold x");
    let pid_x = first_line(&mut hold_x).await;
    let first = probe(&pool, &site).await;
    assert_ne!(first["pid"], pid_x);
    assert_eq!(first["cached_before"], false, "{first}");
    assert_eq!(first["in_scripts"], true, "{first}");
    // Child Y is held busy now (X still is), then X is let go: the second
    // probe runs in X, which never compiled lib.php.
    let mut hold_y = get(&pool, &site, "hold.php", "gate=gate-y")
        .await
        .expect("hold y");
    let pid_y = first_line(&mut hold_y).await;
    assert_eq!(serde_json::Value::from(pid_y), first["pid"]);
    site.open_gate("gate-x");
    assert_eq!(body(&mut hold_x).await, "released");
    let second = probe(&pool, &site).await;
    assert_eq!(second["pid"], pid_x);
    assert_eq!(
        second["cached_before"], true,
        "lib.php compiled in {} is cached in {pid_x}",
        first["pid"]
    );
    assert_eq!(second["in_scripts"], true);
    site.open_gate("gate-y");
    assert_eq!(body(&mut hold_y).await, "released");
    stop(pool).await;
}

async fn first_line(response: &mut Response) -> u64 {
    let chunk = response
        .chunk()
        .await
        .expect("chunk")
        .expect("a first piece");
    String::from_utf8_lossy(&chunk)
        .trim()
        .parse()
        .expect("a pid")
}

async fn probe(pool: &Pool, site: &Site) -> serde_json::Value {
    let mut response = get(pool, site, "probe.php", "").await.expect("probe");
    serde_json::from_str(&body(&mut response).await).expect("json")
}

#[tokio::test]
async fn children_are_listed_with_the_script_each_busy_one_runs() {
    let site = Site::new();
    let pool = Pool::start(&config(2)).await.expect("start");
    let mut hold = get(&pool, &site, "hold.php", "gate=list-gate")
        .await
        .expect("hold");
    let pid = first_line(&mut hold).await;
    let children = pool.children().await.expect("children");
    assert_eq!(children.len(), 2, "{children:?}");
    let busy = children
        .iter()
        .find(|c| u64::from(c.pid) == pid)
        .expect("the holding child");
    assert_eq!(busy.state, "Running");
    assert_eq!(Path::new(&busy.script), site.path("hold.php"));
    assert_eq!(busy.request_uri, "/hold.php?gate=list-gate");
    site.open_gate("list-gate");
    assert_eq!(body(&mut hold).await, "released");
    stop(pool).await;
}

#[tokio::test]
async fn stop_leaves_no_process_behind() {
    let pool = Pool::start(&config(3)).await.expect("start");
    let master = pool.pid();
    let mut pids: Vec<u32> = listed(&pool, 3).await.iter().map(|c| c.pid).collect();
    pids.push(master);
    assert_eq!(pids.len(), 4, "{pids:?}");
    let dir = pool.dir().to_path_buf();
    let status = pool.stop(Duration::from_secs(10)).await.expect("stop");
    assert!(status.success(), "{status:?}");
    for pid in pids {
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "process {pid} is left"
        );
    }
    assert!(!dir.exists(), "the private directory is removed");
}

#[tokio::test]
async fn the_private_directory_and_socket_are_hearths_alone() {
    let pool = Pool::start(&config(1)).await.expect("start");
    let dir = std::fs::metadata(pool.dir()).expect("dir");
    assert_eq!(dir.permissions().mode() & 0o777, 0o700);
    let socket = std::fs::metadata(pool.socket()).expect("socket");
    assert_eq!(socket.permissions().mode() & 0o777, 0o600);
    use std::os::unix::fs::MetadataExt;
    let me = rustix::process::geteuid().as_raw();
    assert_eq!((dir.uid(), socket.uid()), (me, me));
    stop(pool).await;
}

#[tokio::test]
async fn reload_lets_a_request_in_flight_finish_and_serves_after() {
    let site = Site::new();
    let pool = Pool::start(&config(2)).await.expect("start");
    let master = pool.pid();
    let before: Vec<u32> = pool
        .children()
        .await
        .expect("children")
        .iter()
        .map(|c| c.pid)
        .collect();
    let mut hold = get(&pool, &site, "hold.php", "gate=reload-gate")
        .await
        .expect("hold");
    first_line(&mut hold).await;
    // The master re-executes only once its children have exited, so the
    // request in flight is let go while the reload waits.
    let open_gate = async {
        let reloading = until(|| pool.log_tail().contains("Reloading in progress")).await;
        site.open_gate("reload-gate");
        reloading
    };
    let (reloaded, reloading) = tokio::join!(pool.reload(Duration::from_secs(20)), open_gate);
    assert!(reloading, "{}", pool.log_tail());
    reloaded.expect("reload");
    assert_eq!(
        body(&mut hold).await,
        "released",
        "the request in flight finished"
    );
    assert_eq!(pool.pid(), master);
    let after: Vec<u32> = pool
        .children()
        .await
        .expect("children")
        .iter()
        .map(|c| c.pid)
        .collect();
    assert!(
        after.iter().all(|p| !before.contains(p)),
        "{before:?} -> {after:?}"
    );
    let mut next = get(&pool, &site, "teapot.php", "")
        .await
        .expect("after reload");
    assert_eq!(body(&mut next).await, "tea");
    stop(pool).await;
}

#[tokio::test]
async fn reload_with_no_process_control_timeout_cuts_the_request_in_flight() {
    // php-fpm's own default, process_control_timeout = 0: on SIGUSR2 the
    // master does not wait for children in a request.
    let site = Site::new();
    let mut config = config(1);
    config.process_control_timeout = Duration::ZERO;
    let pool = Pool::start(&config).await.expect("start");
    let mut hold = get(&pool, &site, "hold.php", "gate=cut-gate")
        .await
        .expect("hold");
    first_line(&mut hold).await;
    pool.reload(Duration::from_secs(20)).await.expect("reload");
    let err = hold.chunk().await.expect_err("the request was cut");
    assert!(err.is_upstream(), "{err}");
    let mut next = get(&pool, &site, "teapot.php", "")
        .await
        .expect("after reload");
    assert_eq!(body(&mut next).await, "tea");
    stop(pool).await;
}

#[tokio::test]
async fn dynamic_pool_starts_its_start_servers() {
    let mut config = config(1);
    config.process_manager = ProcessManager::Dynamic {
        max_children: 4,
        start: 2,
        min_spare: 1,
        max_spare: 3,
    };
    let pool = Pool::start(&config).await.expect("start");
    assert_eq!(listed(&pool, 2).await.len(), 2);
    stop(pool).await;
}

/// The pool's children once `n` are listed (a child php-fpm has forked is
/// listed once it has taken its slot), or what is listed after 5 s.
async fn listed(pool: &Pool, n: usize) -> Vec<hearth_fpm::pool::Child> {
    let mut children = Vec::new();
    for _ in 0..500 {
        children = pool.children().await.expect("children");
        if children.len() == n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    children
}

/// The processes of the pool's process group other than the master: its
/// children, from /proc.
fn children_of(master: u32) -> Vec<u32> {
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
        if pid != master && pgrp == Some(master) {
            found.push(pid);
        }
    }
    found
}

#[tokio::test]
async fn ondemand_pool_has_no_child_until_a_request_and_none_once_idle() {
    let site = Site::new();
    let mut config = config(1);
    config.process_manager = ProcessManager::OnDemand {
        max_children: 2,
        idle_timeout: Duration::from_secs(1),
    };
    let pool = Pool::start(&config).await.expect("start");
    let master = pool.pid();
    assert_eq!(children_of(master), Vec::<u32>::new(), "no child at start");
    let mut response = get(&pool, &site, "teapot.php", "").await.expect("request");
    assert_eq!(
        (response.status, body(&mut response).await.as_str()),
        (418, "tea")
    );
    assert_eq!(children_of(master).len(), 1, "one child for the request");
    assert!(
        until(|| children_of(master).is_empty()).await,
        "the idle child stopped after process_idle_timeout: {:?}",
        children_of(master)
    );
    let mut again = get(&pool, &site, "teapot.php", "").await.expect("again");
    assert_eq!(
        body(&mut again).await,
        "tea",
        "a new child serves the next one"
    );
    stop(pool).await;
}

#[tokio::test]
async fn the_master_exiting_is_noticed_with_its_status_and_last_lines() {
    let pool = Pool::start(&config(1)).await.expect("start");
    std::process::Command::new("kill")
        .args(["-KILL", &pool.pid().to_string()])
        .status()
        .expect("kill");
    let err = tokio::time::timeout(Duration::from_secs(20), pool.exited())
        .await
        .expect("noticed");
    assert!(err.is_exited(), "{err}");
    assert!(
        err.to_string().contains("ready to handle connections"),
        "{err}"
    );
}

#[tokio::test]
async fn an_unknown_ini_name_is_a_config_error() {
    let mut config = config(1);
    config.ini.push(IniSetting {
        name: "no_such.directive".into(),
        value: "1".into(),
        admin: false,
    });
    let err = Pool::start(&config).await.expect_err("unknown name");
    assert!(err.is_config(), "{err}");
}

#[tokio::test]
async fn a_missing_user_is_a_start_error_with_php_fpms_words() {
    let mut config = config(1);
    config.user = Some("no-such-user-hearth".into());
    config.group = None;
    let err = Pool::start(&config).await.expect_err("missing user");
    assert!(err.to_string().contains("no-such-user-hearth"), "{err}");
    if running_as_root() {
        assert!(err.is_start(), "{err}");
    } else {
        // Without root no user can be switched to: refused before php-fpm.
        assert!(err.is_config(), "{err}");
    }
}

#[tokio::test]
async fn a_missing_binary_is_a_config_error() {
    let config = Config {
        binary: Some("/nonexistent/php-fpm8.2".into()),
        ..config(1)
    };
    let err = Pool::start(&config).await.expect_err("missing binary");
    assert!(err.is_config(), "{err}");
    assert!(err.to_string().contains("php8.2-fpm"), "{err}");
}

/// MD5 (RFC 1321), small and only for checking what PHP received.
fn md5(data: &[u8]) -> u128 {
    let s: [u32; 64] = [
        7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 5, 9, 14, 20, 5, 9, 14, 20, 5,
        9, 14, 20, 5, 9, 14, 20, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 6, 10,
        15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21,
    ];
    let k: Vec<u32> = (0..64)
        .map(|i| ((i as f64 + 1.0).sin().abs() * 4294967296.0) as u32)
        .collect();
    let mut msg = data.to_vec();
    let bits = (data.len() as u64).wrapping_mul(8);
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bits.to_le_bytes());
    let (mut a0, mut b0, mut c0, mut d0) =
        (0x67452301u32, 0xefcdab89u32, 0x98badcfeu32, 0x10325476u32);
    for block in msg.chunks(64) {
        let m: Vec<u32> = block
            .chunks(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect();
        let (mut a, mut b, mut c, mut d) = (a0, b0, c0, d0);
        for i in 0..64 {
            let (f, g) = match i / 16 {
                0 => ((b & c) | (!b & d), i),
                1 => ((d & b) | (!d & c), (5 * i + 1) % 16),
                2 => (b ^ c ^ d, (3 * i + 5) % 16),
                _ => (c ^ (b | !d), (7 * i) % 16),
            };
            let f = f.wrapping_add(a).wrapping_add(k[i]).wrapping_add(m[g]);
            a = d;
            d = c;
            c = b;
            b = b.wrapping_add(f.rotate_left(s[i]));
        }
        a0 = a0.wrapping_add(a);
        b0 = b0.wrapping_add(b);
        c0 = c0.wrapping_add(c);
        d0 = d0.wrapping_add(d);
    }
    let mut out = [0u8; 16];
    for (i, v) in [a0, b0, c0, d0].iter().enumerate() {
        out[i * 4..i * 4 + 4].copy_from_slice(&v.to_le_bytes());
    }
    u128::from_be_bytes(out)
}

/// `retire` (SIGQUIT) lets a busy child finish its request, then php-fpm
/// replaces it; an idle one leaves at once. A pid that is not one of the
/// pool's children (the master, another process) is not signalled.
#[tokio::test]
async fn a_retired_child_finishes_its_request_and_is_replaced() {
    let site = Site::new();
    let pool = Pool::start(&config(2)).await.expect("start");
    // A child php-fpm has just forked shows start time 0 for a moment.
    let mut children = Vec::new();
    for _ in 0..800 {
        children = pool.children().await.expect("children");
        if children.len() == 2 && children.iter().all(|c| c.start_time > 0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(
        children
            .iter()
            .all(|c| c.start_time > 0 && c.age() < Duration::from_secs(60)),
        "{children:?}"
    );
    assert!(children
        .iter()
        .all(|c| c.resident_memory().is_some_and(|m| m > 1 << 20)));

    let mut hold = get(&pool, &site, "hold.php", "gate=retire-gate")
        .await
        .expect("hold");
    let busy = first_line(&mut hold).await as u32;
    assert!(pool.retire(busy).expect("retire"), "signalled");
    // Still running its request: the gate is not open yet.
    assert!(Path::new(&format!("/proc/{busy}")).exists());
    site.open_gate("retire-gate");
    assert_eq!(body(&mut hold).await, "released");
    assert!(
        until(|| !Path::new(&format!("/proc/{busy}")).exists()).await,
        "the retired child left"
    );
    // php-fpm's master starts the replacement when it reaps the child;
    // on a loaded machine that can take a while (20 s at most, as `until`).
    let mut replaced = Vec::new();
    for _ in 0..800 {
        replaced = pool.children().await.expect("children");
        if replaced.len() == 2 && replaced.iter().all(|c| c.pid != busy) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(replaced.len(), 2, "{replaced:?}");
    assert!(replaced.iter().all(|c| c.pid != busy), "{replaced:?}");

    assert!(!pool.retire(pool.pid()).expect("master"), "not the master");
    assert!(
        !pool.retire(std::process::id()).expect("us"),
        "not a stranger"
    );
    let mut response = get(&pool, &site, "env.php", "").await.expect("served on");
    assert!(body(&mut response).await.contains("env.php"));
    stop(pool).await;
}

/// Values php-fpm.conf cannot hold unquoted (a class name's backslashes,
/// `;`, quotes, `$`, `=`) reach PHP as given, in the environment and in
/// php.ini settings.
#[tokio::test]
async fn env_and_ini_values_reach_php_as_given() {
    let site = Site::new();
    let odd = r#"Hearth\Symfony\Runtime; a=b "q" 'q' ${HOME} $x \\"#;
    let mut config = config(1);
    config.env.push(("ODD".into(), odd.into()));
    config.ini.push(IniSetting {
        name: "user_agent".into(),
        value: odd.into(),
        admin: false,
    });
    let pool = Pool::start(&config).await.expect("start");
    let mut response = get(&pool, &site, "values.php", "").await.expect("request");
    let text = body(&mut response).await;
    let value: serde_json::Value = serde_json::from_str(&text).expect(&text);
    assert_eq!(value["env"], odd);
    assert_eq!(value["ini"], odd);
    stop(pool).await;
}
