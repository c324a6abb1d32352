use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// How a pool starts and runs its PHP workers.
#[derive(Debug, Clone)]
pub struct PoolConfig {
    /// The pool's name, on its log lines: a server with several pools names
    /// them (none: the only pool, or the default one).
    pub name: Option<String>,
    /// The PHP binary. `php-cgi` gives full legacy support (`header()`,
    /// `setcookie()`, sessions); `php` (CLI) ignores headers set that way.
    pub php: PathBuf,
    /// The worker script, as an absolute path. It may lead through
    /// symlinks (a `current` link to the deployed release): the pool
    /// resolves it when it starts and again at every reload, and workers
    /// run its real path (see [`crate::Paths`]).
    pub script: PathBuf,
    /// Worker processes at most (`max_workers`).
    pub workers: usize,
    /// Worker processes always running; between this and `workers`, extra
    /// workers start when requests have to wait for one and stop after
    /// `scale_down_after` idle. Equal to `workers` (the default): a fixed
    /// pool.
    pub min_workers: usize,
    /// How long an extra worker (beyond `min_workers`) may stay idle
    /// before it is stopped.
    pub scale_down_after: Duration,
    /// Resident memory (bytes) the workers may use together (0: no
    /// limit): no extra worker starts when the live workers' RSS plus
    /// their mean RSS for it (and for each worker booting) would pass
    /// it; requests then wait for a busy worker. Workers `min_workers`
    /// always runs, and replacements, are not held back.
    pub max_pool_memory: u64,
    /// Whether workers dying on requests put the pool in a crash loop
    /// (see `health`): requests refused at once but for one per backoff,
    /// dead workers replaced after a pause. On (the default) for an HTTP
    /// server, whose clients can retry; off for a task runner, whose jobs
    /// may fail on purpose and must each run: their deaths are counted,
    /// nothing is refused.
    pub crash_loops: bool,
    /// Workers booting at once at most, so that a burst that wakes many
    /// extra slots does not boot them all together, each slowed by the
    /// others; by default the machine's CPUs, at least 2.
    pub max_booting: usize,
    /// Extra `-d name=value` settings for every worker.
    pub ini: Vec<(String, String)>,
    /// The Hearth PHP extension, which gives workers PHP's own request
    /// startup (see `ext/hearth`).
    pub extension: Extension,
    /// Start workers from an empty environment instead of Hearth's own
    /// (php-fpm's `clear_env = yes`): they get `env`, Hearth's own
    /// `HEARTH_` variables and, when they run as another user, that user's
    /// `HOME`, `USER`, `LOGNAME` and `SHELL`, and nothing else.
    pub clear_env: bool,
    /// The state check (`--check-state`): after each request, workers log
    /// what they kept for the next one (`HEARTH_CHECK_STATE=1`).
    pub check_state: bool,
    /// Extra environment variables for every worker, set in this order
    /// (a later entry for a name wins).
    pub env: Vec<(OsString, OsString)>,
    /// Workers' working directory; by default the script's real directory
    /// (as php-fpm does for the script it runs). Resolved with the script.
    pub cwd: Option<PathBuf>,
    /// The app's document root, for the HTTP front (static files,
    /// `DOCUMENT_ROOT`). Workers do not need it, but it belongs to the
    /// release the script is part of: it is resolved with the script, at
    /// start and at every reload, so that both always name the same one.
    pub document_root: Option<PathBuf>,
    /// What a worker script that never completes its handshake should be
    /// checked for, said in the boot error.
    pub boot_hint: String,
    /// The call that starts a worker's loop and its handshake, named in
    /// the boot error of a script that exits by itself (status 0) without
    /// making it: the usual first mistake, a plain script that runs once.
    pub entry_point: String,
    /// Said in that boot error after the entry point: how a worker script
    /// should look, and where to read more.
    pub entry_help: String,
    /// How long a worker may take from spawn to its ready handshake.
    pub boot_timeout: Duration,
    /// How long a request may wait for a free worker before it is refused.
    pub queue_timeout: Duration,
    /// Requests that may wait for a worker at once; more are refused at
    /// once (0: no limit but `queue_timeout`).
    pub max_queue: usize,
    /// After the stop message, how long workers get to exit by themselves.
    pub stop_timeout: Duration,
    /// After SIGTERM, how long before SIGKILL.
    pub kill_timeout: Duration,
    /// Largest frame payload accepted from a worker.
    pub max_payload: u32,
    /// The longest wait between attempts to boot a failing worker.
    pub max_backoff: Duration,
    /// When requests wait for a worker, queue the next one on a worker that
    /// has just started a request, so the worker goes straight from one to
    /// the next instead of sleeping until Hearth sends it more. Workers
    /// still run one request at a time; a queued request whose worker fails
    /// first is sent elsewhere, since it cannot have started.
    pub pipelining: bool,
    /// Run workers under SCHED_BATCH: a worker woken by a request does not
    /// preempt the server mid-work, which saves a context switch per request
    /// under load. Fairness and priority are unchanged.
    pub batch_scheduling: bool,
    /// Requests a worker serves before it is replaced (0: no limit). Each
    /// worker's own limit is up to 10% higher, so that workers started
    /// together are not all replaced together.
    pub max_requests: u64,
    /// Resident memory (bytes) past which a worker is replaced after its
    /// request (0: no limit). Read every few requests, not after each.
    pub max_memory: u64,
    /// Age past which a worker is replaced, between requests.
    pub ttl: Option<Duration>,
    /// Time idle past which a worker is replaced by a fresh one.
    pub idle_ttl: Option<Duration>,
    /// The user workers run as, when Hearth runs as root. None: Hearth's own.
    /// The pool checks, when it starts and at every reload, that this user
    /// can read the script and enter its directories, the working
    /// directory and the document root.
    pub user: Option<WorkerUser>,
    /// Debug mode (`--debug`): no warm workers. Each request runs in a
    /// worker booted for it, with the request's Xdebug triggers in its
    /// environment, and stopped after it (see [`crate::Pool::dispatch_fresh`]);
    /// up to `workers` at once. For step debuggers and profilers, which
    /// decide at the process's start; not for production.
    pub debug: bool,
}

/// A user and group for worker processes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerUser {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    /// Its supplementary groups, as `initgroups()` would set them (php-fpm
    /// gives its workers theirs): the groups of `/etc/group` that list the
    /// user. Workers get these and no other (root's are dropped).
    pub groups: Vec<u32>,
    /// The user's home directory and login shell, from its `/etc/passwd`
    /// entry (none for a numeric user without one): workers get them as
    /// `HOME` and `SHELL` instead of the caller's.
    pub account: Option<Account>,
}

/// What `/etc/passwd` says of a user besides its ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    pub home: PathBuf,
    pub shell: PathBuf,
}

impl WorkerUser {
    /// Looks up `spec`: a user name from `/etc/passwd` (its primary group,
    /// and its supplementary groups from `/etc/group`), or `UID` or
    /// `UID:GID`. (Users known only to NSS services such as LDAP need the
    /// numeric form, and get no supplementary groups.)
    pub fn lookup(spec: &str) -> Result<WorkerUser, String> {
        let numeric = |s: &str| s.parse::<u32>().ok();
        if let Some((uid, gid)) = spec.split_once(':') {
            return match (numeric(uid), numeric(gid)) {
                (Some(uid), Some(gid)) => Ok(WorkerUser {
                    name: spec.to_owned(),
                    uid,
                    gid,
                    groups: Vec::new(),
                    account: None,
                }),
                _ => Err(format!("{spec:?}: expected a user name, UID or UID:GID")),
            };
        }
        let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
        for line in passwd.lines() {
            let fields: Vec<&str> = line.split(':').collect();
            if fields.len() < 7 {
                continue;
            }
            if fields[0] == spec || numeric(spec).is_some_and(|u| Some(u) == numeric(fields[2])) {
                if let (Some(uid), Some(gid)) = (numeric(fields[2]), numeric(fields[3])) {
                    let group = std::fs::read_to_string("/etc/group").unwrap_or_default();
                    return Ok(WorkerUser {
                        name: fields[0].to_owned(),
                        uid,
                        gid,
                        groups: member_of(&group, fields[0], gid),
                        account: Some(Account {
                            home: PathBuf::from(fields[5]),
                            shell: PathBuf::from(fields[6]),
                        }),
                    });
                }
            }
        }
        match numeric(spec) {
            Some(uid) => Ok(WorkerUser {
                name: spec.to_owned(),
                uid,
                gid: uid,
                groups: Vec::new(),
                account: None,
            }),
            None => Err(format!("no user {spec:?} in /etc/passwd")),
        }
    }

    pub fn is_root(&self) -> bool {
        self.uid == 0
    }
}

/// The groups of an `/etc/group` text that list `user` as a member, other
/// than its primary group.
fn member_of(group_file: &str, user: &str, primary: u32) -> Vec<u32> {
    let mut groups = Vec::new();
    for line in group_file.lines() {
        let fields: Vec<&str> = line.split(':').collect();
        if fields.len() < 4 || !fields[3].split(',').any(|m| m.trim() == user) {
            continue;
        }
        if let Ok(gid) = fields[2].parse::<u32>() {
            if gid != primary && !groups.contains(&gid) {
                groups.push(gid);
            }
        }
    }
    groups
}

/// Whether workers load the Hearth PHP extension.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Extension {
    /// When php.ini loads it, or when one built for the PHP's version lies
    /// where Hearth looks ([`crate::php::extension_candidates`]); without
    /// it, the PHP library's own request startup.
    Auto,
    /// Never: the PHP library's request startup, even when php.ini loads
    /// the extension.
    Off,
    /// This file, which must load.
    Path(PathBuf),
}

impl PoolConfig {
    /// A configuration with defaults for everything but what must be given.
    pub fn new(php: impl Into<PathBuf>, script: impl Into<PathBuf>, workers: usize) -> PoolConfig {
        PoolConfig {
            name: None,
            php: php.into(),
            script: script.into(),
            workers,
            min_workers: workers,
            scale_down_after: Duration::from_secs(10),
            max_pool_memory: 0,
            crash_loops: true,
            max_booting: std::thread::available_parallelism()
                .map_or(2, std::num::NonZeroUsize::get)
                .max(2),
            ini: Vec::new(),
            extension: Extension::Auto,
            clear_env: false,
            check_state: false,
            env: Vec::new(),
            boot_timeout: Duration::from_secs(60),
            queue_timeout: Duration::from_secs(30),
            max_queue: 1024,
            stop_timeout: Duration::from_secs(10),
            kill_timeout: Duration::from_secs(5),
            max_payload: hearth_proto::DEFAULT_MAX_PAYLOAD,
            max_backoff: Duration::from_secs(5),
            batch_scheduling: true,
            pipelining: true,
            max_requests: 0,
            max_memory: 0,
            ttl: None,
            idle_ttl: None,
            user: None,
            debug: false,
            cwd: None,
            document_root: None,
            boot_hint: "does the script call Hearth\\Worker::serve()?".to_owned(),
            entry_point: "Hearth\\Worker::serve()".to_owned(),
            entry_help: "A worker script boots the app, then calls \
                         Hearth\\Worker::serve(fn () => ...) to handle requests; see \
                         docs/getting-started.md, \"Write a worker script\"."
                .to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn supplementary_groups_are_those_that_list_the_user() {
        let file = "root:x:0:\nadm:x:4:syslog,www-data\nwww-data:x:33:www-data\n\
                    deploy:x:1001: www-data ,alice\nother:x:1002:alice\n";
        assert_eq!(member_of(file, "www-data", 33), vec![4, 1001]);
        assert_eq!(member_of(file, "bob", 1000), Vec::<u32>::new());
    }
}
