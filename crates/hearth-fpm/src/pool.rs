//! A php-fpm pool Hearth runs: its configuration written into a private
//! directory, the master started in the foreground and watched, stopped
//! politely then firmly, reloaded, and its children listed from the status
//! page.

mod config;

pub use config::{Config, IniSetting, ProcessManager};

use std::collections::{HashSet, VecDeque};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustix::process::{kill_process, kill_process_group, Pid, Signal};
use serde::Deserialize;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::Command;
use tokio::sync::watch;
use tokio::time::timeout;

use crate::fastcgi;
use crate::Error;

/// Log lines of the master kept for error messages.
const KEPT_LINES: usize = 40;
/// The line php-fpm logs (at `log_level = notice`) each time it is ready,
/// at start and after each reload.
const READY_LINE: &str = "ready to handle connections";
/// The longest status page read.
const MAX_STATUS_PAGE: usize = 4 * 1024 * 1024;

/// A running php-fpm pool. Dropping it kills the master and its children
/// (SIGKILL to the process group); [`Pool::stop`] stops them politely.
#[derive(Debug)]
pub struct Pool {
    dir: tempfile::TempDir,
    socket: PathBuf,
    pid: Pid,
    status_path: String,
    log: Arc<Log>,
    exit: watch::Receiver<Option<ExitStatus>>,
    ready: watch::Receiver<u64>,
    stopped: bool,
}

/// One child of the pool as the status page shows it.
#[derive(Debug, Clone, Deserialize)]
pub struct Child {
    /// The child's process id.
    pub pid: u32,
    /// "Idle", "Running", "Reading headers", "Finishing", ...
    pub state: String,
    /// Requests this child has served.
    pub requests: u64,
    /// The request being served (or the last one): its URI.
    #[serde(rename = "request uri")]
    pub request_uri: String,
    /// The script (`SCRIPT_FILENAME`), "-" when none.
    pub script: String,
    /// How long the current (or last) request has run, in microseconds.
    #[serde(rename = "request duration")]
    pub request_duration_us: u64,
    /// The peak memory of the last request, in bytes (0 while running).
    #[serde(rename = "last request memory")]
    pub last_request_memory: u64,
    /// When the child started, in seconds since the Unix epoch.
    #[serde(rename = "start time")]
    pub start_time: u64,
}

impl Child {
    /// Whether the child waits for a request.
    pub fn is_idle(&self) -> bool {
        self.state == "Idle"
    }

    /// How long the child has run, by the system clock; zero while
    /// php-fpm has not filled in its start time yet (a child that has just
    /// been forked shows 0 on the status page).
    pub fn age(&self) -> Duration {
        if self.start_time == 0 {
            return Duration::ZERO;
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        now.saturating_sub(Duration::from_secs(self.start_time))
    }

    /// The child's resident memory (RSS) in bytes, from
    /// `/proc/PID/statm`; none once it has gone.
    pub fn resident_memory(&self) -> Option<u64> {
        let statm = std::fs::read_to_string(format!("/proc/{}/statm", self.pid)).ok()?;
        let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
        Some(pages * rustix::param::page_size() as u64)
    }
}

#[derive(Deserialize)]
struct StatusPage {
    processes: Vec<Child>,
}

impl StatusPage {
    /// The children: php-fpm's status page also lists a slot whose child
    /// is being started (or restarted) with pid 0, which is no process.
    fn children(self) -> Vec<Child> {
        self.processes.into_iter().filter(|c| c.pid != 0).collect()
    }
}

#[derive(Debug, Default)]
struct Log {
    lines: Mutex<VecDeque<String>>,
}

impl Log {
    fn push(&self, line: String) {
        let mut lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        if lines.len() == KEPT_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    fn tail(&self) -> String {
        let lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        lines.iter().cloned().collect::<Vec<_>>().join("\n")
    }
}

impl Pool {
    /// Checks `config`, writes php-fpm.conf into a new private directory
    /// (0700), has php-fpm test it (`-t`), starts the master in the
    /// foreground and waits until it is ready to accept on its socket.
    pub async fn start(config: &Config) -> Result<Self, Error> {
        let root = rustix::process::geteuid().is_root();
        config.validate(root)?;
        let binary = config.find_binary()?;
        check_is_php_fpm(&binary, config).await?;
        check_ini_names(&binary, config).await?;

        let parent = config
            .runtime_parent
            .clone()
            .unwrap_or_else(std::env::temp_dir);
        let dir = tempfile::Builder::new()
            .prefix("hearth-fpm-")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(&parent)
            .map_err(|e| Error::io(format!("creating a directory in {}", parent.display()), e))?;
        let conf = dir.path().join("php-fpm.conf");
        std::fs::write(&conf, config.render(dir.path(), root))
            .map_err(|e| Error::io(format!("writing {}", conf.display()), e))?;
        let mut args: Vec<std::ffi::OsString> =
            vec!["-y".into(), conf.into(), "-p".into(), dir.path().into()];
        if root && config.user.as_deref() == Some("root") {
            args.push("--allow-to-run-as-root".into());
        }

        let test = timeout(
            config.start_timeout,
            Command::new(&binary)
                .arg("-t")
                .args(&args)
                .kill_on_drop(true)
                .output(),
        )
        .await
        .map_err(|_| {
            Error::start(format!(
                "{} -t took over {:?}",
                binary.display(),
                config.start_timeout
            ))
        })?
        .map_err(|e| Error::io(format!("running {}", binary.display()), e))?;
        if !test.status.success() {
            return Err(Error::start(format!(
                "{} -t rejected the configuration ({}):\n{}{}",
                binary.display(),
                test.status,
                String::from_utf8_lossy(&test.stderr),
                String::from_utf8_lossy(&test.stdout)
            )));
        }

        let mut child = Command::new(&binary)
            .arg("-F")
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(|e| Error::io(format!("starting {}", binary.display()), e))?;
        let raw_pid = child
            .id()
            .ok_or_else(|| Error::start("php-fpm exited at once"))?;
        let pid =
            Pid::from_raw(raw_pid as i32).ok_or_else(|| Error::start("php-fpm has no pid"))?;
        let log = Arc::new(Log::default());
        let (ready_tx, ready) = watch::channel(0u64);
        let ready_tx = Arc::new(ready_tx);
        let readers = [
            child
                .stdout
                .take()
                .map(|out| tokio::spawn(read_log(out, log.clone(), ready_tx.clone()))),
            child
                .stderr
                .take()
                .map(|err| tokio::spawn(read_log(err, log.clone(), ready_tx))),
        ];
        let (exit_tx, exit) = watch::channel(None);
        tokio::spawn(async move {
            let status = child.wait().await.ok();
            // The master's last words are read before its exit is told, so
            // an error quoting them is complete (bounded: a child left
            // behind may hold the pipe open).
            for reader in readers.into_iter().flatten() {
                let _ = timeout(Duration::from_secs(1), reader).await;
            }
            let _ = exit_tx.send(status);
        });

        let mut pool = Pool {
            socket: config::socket_path(dir.path()),
            dir,
            pid,
            status_path: config.status_path.clone(),
            log,
            exit,
            ready,
            stopped: false,
        };
        if let Err(err) = pool.wait_ready(0, config.start_timeout).await {
            pool.kill();
            return Err(err);
        }
        // With `pm = ondemand` a connection makes the master fork a child:
        // the ready line is the check there, so that no child starts
        // before a request does.
        let on_demand = matches!(config.process_manager, ProcessManager::OnDemand { .. });
        if on_demand {
            return Ok(pool);
        }
        if let Err(err) = tokio::net::UnixStream::connect(&pool.socket).await {
            pool.kill();
            return Err(Error::start(format!(
                "the pool's socket does not accept: {err}"
            )));
        }
        Ok(pool)
    }

    /// The unix socket the pool listens on; only Hearth's user can connect.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The private directory holding the configuration, pid file and
    /// socket.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The master's process id (the same after a reload: it re-executes
    /// itself).
    pub fn pid(&self) -> u32 {
        self.pid.as_raw_nonzero().get() as u32
    }

    /// The master's last log lines (its own and, with
    /// `catch_workers_output`, its children's stderr).
    pub fn log_tail(&self) -> String {
        self.log.tail()
    }

    /// Waits until the master exits, and returns that as an error with its
    /// exit status and last log lines.
    pub async fn exited(&self) -> Error {
        let mut exit = self.exit.clone();
        let status = match exit.wait_for(Option::is_some).await {
            Ok(status) => format!("{:?}", *status),
            Err(_) => "unknown status".to_owned(),
        };
        Error::exited(format!("{status}; last lines:\n{}", self.log.tail()))
    }

    /// Completes when the master has exited (a clone of the pool's exit
    /// watch, so the caller need not hold the pool meanwhile).
    pub fn on_exit(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut exit = self.exit.clone();
        async move {
            let _ = exit.wait_for(Option::is_some).await;
        }
    }

    /// Asks child `pid` to leave once it has finished its request
    /// (SIGQUIT: a php-fpm child stops accepting, ends its request and
    /// exits; the master starts another in its place). Returns false, and
    /// signals nothing, when `pid` is not a child of this pool (any more):
    /// its process group must be the master's.
    pub fn retire(&self, pid: u32) -> Result<bool, Error> {
        let Some(child) = Pid::from_raw(pid as i32) else {
            return Ok(false);
        };
        if child == self.pid || process_group(pid) != Some(self.pid()) {
            return Ok(false);
        }
        match kill_process(child, Signal::QUIT) {
            Ok(()) => Ok(true),
            Err(rustix::io::Errno::SRCH) => Ok(false),
            Err(e) => Err(Error::io(
                format!("signalling php-fpm child {pid}"),
                e.into(),
            )),
        }
    }

    /// Reloads the pool (SIGUSR2): the master re-executes itself with the
    /// same configuration, keeps its listening socket, and replaces its
    /// children; a child in a request gets `process_control_timeout` to
    /// finish it. Returns once the new master is ready.
    pub async fn reload(&self, wait: Duration) -> Result<(), Error> {
        let before = *self.ready.borrow();
        kill_process(self.pid, Signal::USR2)
            .map_err(|e| Error::io("signalling php-fpm", e.into()))?;
        self.wait_ready(before, wait).await
    }

    /// Stops the pool: SIGQUIT (children finish their requests), then after
    /// `grace` SIGTERM to the master, then after `grace` again SIGKILL to
    /// the whole process group. Returns the master's exit status.
    pub async fn stop(mut self, grace: Duration) -> Result<ExitStatus, Error> {
        self.stopped = true;
        for signal in [Signal::QUIT, Signal::TERM] {
            let _ = kill_process(self.pid, signal);
            if let Ok(status) = self.wait_exit(grace).await {
                self.kill_group();
                return Ok(status);
            }
            tracing::warn!(
                pid = self.pid(),
                ?signal,
                "php-fpm did not stop within {grace:?}"
            );
        }
        self.kill_group();
        self.wait_exit(grace).await
    }

    /// Lists the children from the status page (`?json&full`), asked for
    /// through the pool's socket like any request. The child serving this
    /// request is listed too, as "Running" the status path.
    pub async fn children(&self) -> Result<Vec<Child>, Error> {
        let path = self.status_path.as_str();
        let params = [
            ("GATEWAY_INTERFACE", "CGI/1.1"),
            ("REQUEST_METHOD", "GET"),
            ("SCRIPT_FILENAME", path),
            ("SCRIPT_NAME", path),
            ("REQUEST_URI", path),
            ("QUERY_STRING", "json&full"),
        ];
        let limits = fastcgi::Limits {
            head_timeout: Duration::from_secs(5),
            read_timeout: Duration::from_secs(5),
            ..Default::default()
        };
        let mut response =
            fastcgi::request(&self.socket, &params, tokio::io::empty(), &limits).await?;
        let mut page = Vec::new();
        while let Some(chunk) = response.chunk().await? {
            if page.len() + chunk.len() > MAX_STATUS_PAGE {
                return Err(Error::upstream("the status page is larger than 4 MiB"));
            }
            page.extend_from_slice(&chunk);
        }
        if response.status != 200 {
            return Err(Error::upstream(format!(
                "the status page answered {}",
                response.status
            )));
        }
        let page: StatusPage = serde_json::from_slice(&page).map_err(|e| {
            Error::upstream(format!("the status page is not the JSON expected: {e}"))
        })?;
        Ok(page.children())
    }

    async fn wait_ready(&self, before: u64, wait: Duration) -> Result<(), Error> {
        let mut exit = self.exit.clone();
        let mut ready = self.ready.clone();
        let ready = ready.wait_for(|&n| n > before);
        tokio::select! {
            ready = timeout(wait, ready) => match ready {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(_)) | Err(_) => Err(Error::start(format!(
                    "php-fpm was not ready within {wait:?}; last lines:\n{}", self.log.tail()
                ))),
            },
            status = exit.wait_for(Option::is_some) => {
                let status = status.map(|s| format!("{:?}", *s)).unwrap_or_default();
                Err(Error::start(format!("php-fpm exited ({status}); its output:\n{}", self.log.tail())))
            }
        }
    }

    async fn wait_exit(&self, wait: Duration) -> Result<ExitStatus, Error> {
        let mut exit = self.exit.clone();
        let result = match timeout(wait, exit.wait_for(Option::is_some)).await {
            Ok(Ok(status)) => status.ok_or_else(|| Error::exited("no status")),
            Ok(Err(_)) => Err(Error::exited("the master could not be waited for")),
            Err(_) => Err(Error::timed_out(format!(
                "php-fpm did not exit within {wait:?}"
            ))),
        };
        result
    }

    fn kill_group(&self) {
        // The children are in the master's process group; a child left
        // behind by a master that died is killed here too.
        let _ = kill_process_group(self.pid, Signal::KILL);
    }

    fn kill(&mut self) {
        self.stopped = true;
        self.kill_group();
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        if !self.stopped {
            self.kill_group();
        }
    }
}

/// The process group of `pid`, from `/proc/PID/stat`.
fn process_group(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(2)?.parse().ok()
}

async fn read_log<R: AsyncRead + Unpin>(out: R, log: Arc<Log>, ready: Arc<watch::Sender<u64>>) {
    let mut lines = BufReader::new(out).lines();
    // A line is bounded by php-fpm's own log line limit (`log_limit`,
    // 1024 bytes by default).
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::info!(target: "php-fpm", "{line}");
        if line.contains(READY_LINE) {
            ready.send_modify(|n| *n += 1);
        }
        log.push(line);
    }
}

/// That `binary` is php-fpm: its `-v` says `(fpm-fcgi)`. Another PHP
/// binary (the CLI, php-cgi) would take php-fpm's arguments for its own
/// and fail later with a message that does not say why.
async fn check_is_php_fpm(binary: &Path, config: &Config) -> Result<(), Error> {
    let output = timeout(
        config.start_timeout,
        Command::new(binary).arg("-v").kill_on_drop(true).output(),
    )
    .await
    .map_err(|_| {
        Error::start(format!(
            "{} -v took over {:?}",
            binary.display(),
            config.start_timeout
        ))
    })?
    .map_err(|e| Error::io(format!("running {} -v", binary.display()), e))?;
    let version = String::from_utf8_lossy(&output.stdout);
    if output.status.success() && version.contains("(fpm-fcgi)") {
        return Ok(());
    }
    if !output.status.success() {
        // It could not say what it is: a php-fpm that fails (or a
        // wrapper around one) is a start failure, with its own words.
        return Err(Error::start(format!(
            "{} -v failed ({}): {}{}",
            binary.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr),
            version
        )));
    }
    Err(Error::config(format!(
        "binary: {} is not php-fpm (its -v says {:?}); Debian's package {} installs \
         /usr/sbin/php-fpm8.2",
        binary.display(),
        version.lines().next().unwrap_or("nothing"),
        config::PACKAGE
    )))
}

/// Refuses ini names PHP does not know: php-fpm would only log "Unable to
/// set php_value" from each child and serve on without the setting. The
/// names are those `php-fpm -i` lists (with the pool's extensions loaded).
async fn check_ini_names(binary: &Path, config: &Config) -> Result<(), Error> {
    let is_ext = |name: &str| name == "extension" || name == "zend_extension";
    if config.ini.iter().all(|s| is_ext(&s.name)) {
        return Ok(());
    }
    let mut command = Command::new(binary);
    for setting in config.ini.iter().filter(|s| is_ext(&s.name)) {
        command
            .arg("-d")
            .arg(format!("{}={}", setting.name, setting.value));
    }
    let output = timeout(
        config.start_timeout,
        command.arg("-i").kill_on_drop(true).output(),
    )
    .await
    .map_err(|_| {
        Error::start(format!(
            "{} -i took over {:?}",
            binary.display(),
            config.start_timeout
        ))
    })?
    .map_err(|e| Error::io(format!("running {} -i", binary.display()), e))?;
    let info = String::from_utf8_lossy(&output.stdout);
    let known: HashSet<&str> = info
        .lines()
        .filter_map(|l| l.split(" => ").next())
        .collect();
    for setting in config.ini.iter().filter(|s| !is_ext(&s.name)) {
        if !known.contains(setting.name.as_str()) {
            return Err(Error::config(format!(
                "ini: {} is not a directive {} knows (see `{} -i`)",
                setting.name,
                binary.display(),
                binary.display()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A slot php-fpm is starting a child in is listed with pid 0 (seen
    /// during a reload): it is not a child.
    #[test]
    fn a_slot_without_a_process_is_not_a_child() {
        let page = r#"{"processes": [
            {"pid": 0, "state": "Idle", "start time": 0, "requests": 0, "request duration": 0,
             "request method": "-", "request uri": "-", "content length": 0, "user": "-",
             "script": "-", "last request cpu": 0.0, "last request memory": 0},
            {"pid": 4242, "state": "Idle", "start time": 1795658463, "requests": 3, "request duration": 120,
             "request method": "GET", "request uri": "/", "content length": 0, "user": "-",
             "script": "/srv/index.php", "last request cpu": 0.0, "last request memory": 2097152}
        ]}"#;
        let page: StatusPage = serde_json::from_str(page).expect("a status page");
        let pids: Vec<u32> = page.children().iter().map(|c| c.pid).collect();
        assert_eq!(pids, [4242]);
    }
}
