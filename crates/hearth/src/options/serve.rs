//! `hearth serve`'s options: its flags and the `[serve]` section of
//! `hearth.toml`, with their defaults and checks, and the pool's and the
//! HTTP front's configurations built from them.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use hearth_http::{ServeConfig, TlsConfig};
use hearth_pool::{PoolConfig, WorkerUser};
use serde::{Deserialize, Serialize};

use super::pools::{self, PoolSection};
use super::values::{
    self, AccessLogChoice, Address, ClassicChoice, EnvVar, ExtensionChoice, Fallback, IndexFiles,
    Listen, Proxy, RouteRule, Seconds, SendfileRoot, Size,
};
use super::{Fault, Origins, Section};

/// Everything `hearth serve` can be told. A field's doc comment is its
/// `--help`; its name is its key under `[serve]`; [`Default`] holds its
/// default. Fields without a key (`#[serde(skip)]`) are flags only; those
/// without a flag (`#[arg(skip)]`) are keys only.
#[derive(Debug, Clone, clap::Args, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServeOptions {
    /// Worker script: boots the app and calls Hearth\Worker::serve()
    /// [default: the built-in demo]
    #[arg(value_name = "SCRIPT")]
    pub script: Option<PathBuf>,
    /// Address to listen on: IP:PORT (an IP address, not a host name), or
    /// unix:PATH, a unix socket (mode 0666, as nginx makes its own) for a proxy on
    /// the same host
    #[arg(long, short, value_name = "ADDR")]
    pub listen: Listen,
    /// PEM certificate chain: serve HTTPS (HTTP/2 and HTTP/1.1, by ALPN) instead
    /// of plain HTTP; needs --tls-key
    #[arg(long, value_name = "PATH")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert
    #[arg(long, value_name = "PATH")]
    pub tls_key: Option<PathBuf>,
    /// Without TLS, also serve HTTP/2 to clients that start with its preface
    /// (h2c, prior knowledge)
    #[arg(long, action = clap::ArgAction::Set, num_args = 0, default_missing_value = "true")]
    pub h2c: bool,
    /// Worker processes (at most, with --min-workers) [default: one per CPU]
    #[arg(long, short, value_name = "N", visible_alias = "max-workers")]
    #[serde(alias = "max_workers")]
    pub workers: Option<usize>,
    /// Requests that may wait for a worker at once; more get 503 at once;
    /// 0: no limit but --queue-timeout
    #[arg(long, value_name = "N")]
    pub max_queue: usize,
    /// Workers always running; up to --workers, extra ones start when requests
    /// wait and stop after --scale-down-after idle [default: --workers]
    #[arg(long, value_name = "N")]
    pub min_workers: Option<usize>,
    /// How long an extra worker may stay idle before it stops
    #[arg(long, value_name = "DURATION")]
    pub scale_down_after: Seconds,
    /// Memory budget for all workers together (their resident memory, RSS): no
    /// extra worker starts when the workers' RSS plus one more (their mean) would
    /// pass SIZE, and requests wait for a busy worker instead; 0: no budget
    #[arg(long, value_name = "SIZE")]
    pub max_pool_memory: Size,
    /// Workers booting at once at most: a burst that wakes many extra workers
    /// boots them a few at a time, one per request still waiting as each boot
    /// ends [default: one per CPU, at least 2]
    #[arg(long, value_name = "N")]
    pub max_booting: Option<usize>,
    /// PHP binary for workers; php-cgi gives header(), cookies and sessions
    #[arg(long, value_name = "PATH")]
    pub php: PathBuf,
    /// The Hearth PHP extension (PHP's own request startup in the workers): auto
    /// loads it when php.ini does, or hearth-phpX.Y.so from hearth's directory,
    /// ../php-ext or ../lib/hearth; off keeps the PHP library's; or the extension's
    /// path (in the file, relative to it)
    #[arg(long, value_name = "auto/off/PATH")]
    pub php_extension: ExtensionChoice,
    /// TOML file with these options under [serve]
    #[arg(long, short, value_name = "FILE")]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// Largest request body; larger ones get 413
    #[arg(long, value_name = "SIZE")]
    pub max_body_size: Size,
    /// Raw request bodies up to SIZE stay in memory; larger ones are spooled to a
    /// temporary file the worker reads; 0: every body goes to a file
    #[arg(long, value_name = "SIZE")]
    pub body_buffer_size: Size,
    /// Longest request line; longer ones get 414
    #[arg(long, value_name = "SIZE")]
    pub max_request_line: Size,
    /// Largest header section; larger ones get 431
    #[arg(long, value_name = "SIZE")]
    pub max_header_size: Size,
    /// Most header lines in a request; more get 431
    #[arg(long, value_name = "N")]
    pub max_headers: usize,
    /// How long a client has to send a request head; 408 after it
    #[arg(long, value_name = "DURATION")]
    pub header_timeout: Seconds,
    /// Longest pause while a request body arrives; 408 after it
    #[arg(long, value_name = "DURATION")]
    pub body_timeout: Seconds,
    /// How long an idle connection is kept open between requests; 0: no keep-alive
    #[arg(long, value_name = "DURATION")]
    pub keep_alive_timeout: Seconds,
    /// Longest time a response may go without the client taking any of it; then it
    /// is cut (its HTTP/2 stream reset, or its connection closed)
    #[arg(long, value_name = "DURATION")]
    pub send_timeout: Seconds,
    /// Responses waiting for slow clients may fill temporary files up to SIZE in
    /// all; past it a worker waits for its client, within --request-timeout; 0: no
    /// temporary files
    #[arg(long, value_name = "SIZE")]
    pub max_response_spool: Size,
    /// Most connections open at once; more wait in the listen backlog
    #[arg(long, value_name = "N")]
    pub max_connections: usize,
    /// SERVER_NAME given to PHP
    #[arg(long, value_name = "NAME")]
    pub server_name: String,
    /// Document root: GET and HEAD for files in it are served from disk, everything
    /// else goes to PHP; without a worker script, classic mode: the site's .php
    /// files run in a php-fpm pool, routed as nginx would [default: none]
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// A directory the app's X-Sendfile and X-Accel-Redirect responses may send
    /// files from, sent by Hearth once the worker is free; PREFIX=DIR also maps
    /// X-Accel-Redirect URIs under PREFIX (/protected/=/srv/files) onto DIR; PHP
    /// is told with X-Sendfile-Type (repeatable) [default: none, such responses
    /// get 500]
    #[arg(long = "sendfile-root", value_name = "[PREFIX=]DIR")]
    pub sendfile_roots: Vec<SendfileRoot>,
    /// Classic mode: the files tried, in order, for a request ending in / (nginx's
    /// index)
    #[arg(long, value_name = "NAMES")]
    pub index: IndexFiles,
    /// Classic mode: the front controller a request for nothing on disk runs, with
    /// its query string (the last argument of nginx's try_files), a .php path; off:
    /// such requests get 404
    #[arg(long, value_name = "PATH")]
    pub fallback: Fallback,
    /// With a worker script and --root, a mixed site: the front controller runs in
    /// the workers and the other .php entries in a php-fpm pool, routed as classic
    /// mode routes them; auto when php-fpm is installed, on refuses to start
    /// without it, off sends every request that is not a static file to the workers
    #[arg(long, value_name = "auto/on/off")]
    pub classic: ClassicChoice,
    /// Most php-fpm children of a mixed site's pool (pm = ondemand: none until a
    /// classic script is asked for) [default: --workers]
    #[arg(long, value_name = "N")]
    pub classic_workers: Option<usize>,
    /// A mixed site's requests under PREFIX go to the workers (worker) or are
    /// routed as classic mode routes them, front controller included (classic);
    /// the longest prefix wins (repeatable; [[serve.route]] in the file)
    #[arg(long = "route", value_name = "PREFIX=worker/classic")]
    pub route: Vec<RouteRule>,
    /// php-fpm binary for classic mode and mixed sites [default: php-fpm8.2, else
    /// php-fpm, on PATH or in /usr/sbin]
    #[arg(long, value_name = "PATH")]
    pub php_fpm: Option<PathBuf>,
    /// Do not gzip or brotli-compress responses on the fly (precompressed .br/.gz
    /// files are still served)
    #[arg(long = "no-compression", action = clap::ArgAction::Set, num_args = 0, default_missing_value = "false")]
    pub compression: bool,
    /// Read files (--root's, X-Sendfile and X-Accel-Redirect ones) 64 KiB at a time
    /// instead of sending them with sendfile(2) on plain HTTP/1.x connections
    /// (nginx's sendfile off), and look them up on tokio's blocking threads: for
    /// files on network or FUSE filesystems, which sendfile would read, and lookups
    /// open, in the thread that serves connections
    #[arg(long = "no-sendfile", action = clap::ArgAction::Set, num_args = 0, default_missing_value = "false")]
    pub sendfile: bool,
    /// How long a request waits for a free worker before a 503
    #[arg(long, value_name = "DURATION")]
    pub queue_timeout: Seconds,
    /// How long a worker may take to boot
    #[arg(long, value_name = "DURATION")]
    pub boot_timeout: Seconds,
    /// On SIGTERM/SIGINT, how long in-flight requests have to finish
    #[arg(long, value_name = "DURATION")]
    pub grace_period: Seconds,
    /// On stop, how long workers have to finish and exit before SIGTERM
    #[arg(long, value_name = "DURATION")]
    pub stop_timeout: Seconds,
    /// Hard limit on a request once a worker has it: the client gets 504 and the
    /// worker is stopped (SIGTERM, then SIGKILL) and replaced; 0: none
    #[arg(long, value_name = "DURATION")]
    pub request_timeout: Seconds,
    /// Replace a worker after it served N requests (up to 10% more, so workers do
    /// not all restart together); 0: never
    #[arg(long, value_name = "N")]
    pub max_requests: u64,
    /// Replace a worker, between requests, once its resident memory passes SIZE;
    /// 0: never
    #[arg(long, value_name = "SIZE")]
    pub max_memory: Size,
    /// Replace a worker, between requests, once it is this old [default: never]
    #[arg(long, value_name = "DURATION")]
    pub ttl: Option<Seconds>,
    /// Replace a worker that stayed idle this long [default: never]
    #[arg(long, value_name = "DURATION")]
    pub idle_ttl: Option<Seconds>,
    /// Reload the workers when a .php file under the script's directory changes
    /// (for development)
    #[arg(long)]
    #[serde(skip)]
    pub watch: bool,
    /// With --watch, the directory to watch instead of the script's
    #[arg(long, value_name = "DIR", requires = "watch")]
    #[serde(skip)]
    pub watch_dir: Option<PathBuf>,
    /// A proxy (address or network, or unix: for any peer of a unix socket) whose
    /// X-Forwarded-For and X-Forwarded-Proto are believed: REMOTE_ADDR and HTTPS
    /// then describe the client (repeatable)
    #[arg(long = "trusted-proxy", value_name = "CIDR")]
    pub trusted_proxies: Vec<Proxy>,
    /// Run workers as this user (name, UID or UID:GID). Required when Hearth runs
    /// as root: PHP never runs as root unless `--user root` says so
    #[arg(long, value_name = "USER")]
    pub user: Option<String>,
    /// Extra php.ini setting for workers (repeatable)
    #[arg(short = 'd', long = "ini", value_name = "NAME=VALUE", value_parser = values::parse_ini)]
    #[serde(with = "values::ini_table")]
    pub ini: Vec<(String, String)>,
    /// Start workers from an empty environment (php-fpm's clear_env): they get the
    /// --env variables, and under --user that user's HOME, USER, LOGNAME and SHELL
    #[arg(long, action = clap::ArgAction::Set, num_args = 0, default_missing_value = "true")]
    pub clear_env: bool,
    /// After each request, log what the worker kept for the next one: changed
    /// statics, globals and properties of the app's objects, a request still held,
    /// open transactions, sessions and output buffers, changed settings, memory
    /// growth. For staging: it walks the app's objects after every request
    #[arg(long, action = clap::ArgAction::Set, num_args = 0, default_missing_value = "true")]
    pub check_state: bool,
    /// Debug mode, for Xdebug's step debugger and profiler: no warm workers; each
    /// request runs in a worker started for it (up to --workers at once), with the
    /// request's Xdebug triggers (XDEBUG_SESSION cookie, XDEBUG_SESSION_START,
    /// XDEBUG_TRIGGER) in its environment, so that debugging starts at the worker
    /// script's first line, as under php-fpm. A request a debugger may hold (one with
    /// such a trigger, or any with xdebug.start_with_request=yes in --ini) has no
    /// --request-timeout and no --boot-timeout. Not for production: every request
    /// boots the app
    #[arg(long, action = clap::ArgAction::Set, num_args = 0, default_missing_value = "true")]
    pub debug: bool,
    /// Environment variable for workers: NAME=VALUE sets it, NAME passes Hearth's
    /// own (repeatable; HEARTH_ names are Hearth's)
    #[arg(long = "env", value_name = "NAME[=VALUE]")]
    #[serde(with = "values::env_table")]
    pub env: Vec<EnvVar>,
    /// Threads for HTTP and worker I/O [default: one per two CPUs]
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Leave workers under the normal scheduler instead of SCHED_BATCH
    #[arg(long = "no-batch-scheduling", action = clap::ArgAction::Set, num_args = 0, default_missing_value = "false")]
    pub batch_scheduling: bool,
    /// Never queue a request on a busy worker, even when others wait
    #[arg(long = "no-pipelining", action = clap::ArgAction::Set, num_args = 0, default_missing_value = "false")]
    pub pipelining: bool,
    /// Control socket for `hearth status`, `reload` and `stop` [default: as root
    /// /run/hearth/ADDR.sock, else $XDG_RUNTIME_DIR/hearth/ADDR.sock, else
    /// /tmp/hearth-UID/ADDR.sock]
    #[arg(long, value_name = "PATH")]
    pub control_socket: Option<PathBuf>,
    /// Serve the dashboard, /metrics, /healthz and /readyz on this address, never
    /// on the public port; an address other networks reach needs an admin token
    /// [default: off]
    #[arg(long, value_name = "IP:PORT")]
    pub admin: Option<Address>,
    /// File holding the admin token: the dashboard's actions (reload, retry,
    /// delete or purge jobs) need it [default: actions off]
    #[arg(long, value_name = "PATH")]
    pub admin_token_file: Option<PathBuf>,
    /// The admin token itself (in the file only, never on a command line)
    #[arg(skip)]
    pub admin_token: Option<String>,
    /// Access log: off, common or json
    #[arg(long, value_name = "FORMAT")]
    pub access_log: AccessLogChoice,
    /// Write the access log to this file (appending) instead of standard output
    #[arg(long, value_name = "PATH")]
    pub access_log_file: Option<PathBuf>,
    /// Further worker pools, each taking the requests of its hosts or path
    /// prefixes, with its own script, workers, limits and timeouts (in the file
    /// only: [[serve.pool]])
    #[arg(skip)]
    pub pool: Vec<PoolSection>,
}

impl Default for ServeOptions {
    /// Every default of `hearth serve`. (The pool's and the HTTP front's
    /// constructors have the same ones, for their own users; a test keeps
    /// them in step.)
    fn default() -> ServeOptions {
        ServeOptions {
            script: None,
            listen: Listen::Tcp(([127, 0, 0, 1], 8080).into()),
            tls_cert: None,
            tls_key: None,
            h2c: false,
            workers: None,
            max_queue: 1024,
            min_workers: None,
            scale_down_after: Seconds::from_secs(10),
            max_pool_memory: Size(0),
            max_booting: None,
            php: PathBuf::from("php-cgi"),
            php_extension: ExtensionChoice::Auto,
            config: None,
            // Debian's post_max_size.
            max_body_size: Size(8 << 20),
            // nginx's limits.
            body_buffer_size: Size(64 << 10),
            max_request_line: Size(8 << 10),
            max_header_size: Size(32 << 10),
            max_headers: 100,
            header_timeout: Seconds::from_secs(60),
            body_timeout: Seconds::from_secs(60),
            keep_alive_timeout: Seconds::from_secs(75),
            // nginx's send_timeout.
            send_timeout: Seconds::from_secs(60),
            // nginx's fastcgi_max_temp_file_size, but for all responses.
            max_response_spool: Size(1 << 30),
            max_connections: 10_000,
            server_name: "localhost".to_owned(),
            root: None,
            sendfile_roots: Vec::new(),
            index: IndexFiles::default(),
            fallback: Fallback::default(),
            classic: ClassicChoice::Auto,
            classic_workers: None,
            route: Vec::new(),
            php_fpm: None,
            compression: true,
            sendfile: true,
            queue_timeout: Seconds::from_secs(30),
            boot_timeout: Seconds::from_secs(60),
            grace_period: Seconds::from_secs(30),
            stop_timeout: Seconds::from_secs(10),
            // nginx's fastcgi_read_timeout.
            request_timeout: Seconds::from_secs(60),
            max_requests: 0,
            max_memory: Size(0),
            ttl: None,
            idle_ttl: None,
            watch: false,
            watch_dir: None,
            trusted_proxies: Vec::new(),
            user: None,
            ini: Vec::new(),
            clear_env: false,
            check_state: false,
            debug: false,
            env: Vec::new(),
            threads: None,
            batch_scheduling: true,
            pipelining: true,
            control_socket: None,
            admin: None,
            admin_token_file: None,
            admin_token: None,
            access_log: AccessLogChoice::Off,
            access_log_file: None,
            pool: Vec::new(),
        }
    }
}

impl Section for ServeOptions {
    const NAME: &'static str = "serve";

    fn of(file: super::file::FileConfig) -> ServeOptions {
        file.serve
    }

    fn file_paths(&mut self) -> Vec<(&'static str, &mut Option<PathBuf>)> {
        vec![
            ("script", &mut self.script),
            ("tls_cert", &mut self.tls_cert),
            ("tls_key", &mut self.tls_key),
            ("root", &mut self.root),
            ("php_fpm", &mut self.php_fpm),
            ("control_socket", &mut self.control_socket),
            ("access_log_file", &mut self.access_log_file),
            ("admin_token_file", &mut self.admin_token_file),
        ]
    }

    fn paths_from_file(&mut self, dir: &Path) {
        if let Listen::Unix(path) = &mut self.listen {
            if path.is_relative() {
                *path = dir.join(&*path);
            }
        }
        if let ExtensionChoice::Path(path) = &mut self.php_extension {
            if path.is_relative() {
                *path = dir.join(&*path);
            }
        }
        for root in &mut self.sendfile_roots {
            if root.dir.is_relative() {
                root.dir = dir.join(&root.dir);
            }
        }
        for pool in &mut self.pool {
            pool.paths_from_file(dir);
        }
    }

    fn add_up(&mut self, file: ServeOptions, given: &Origins<'_>) {
        // php.ini settings: the file's, then the flags' (PHP keeps the
        // last value given for a name).
        if given.on_command_line("ini") {
            self.ini.splice(0..0, file.ini);
        }
        if given.on_command_line("trusted_proxies") {
            self.trusted_proxies.splice(0..0, file.trusted_proxies);
        }
        if given.on_command_line("sendfile_roots") {
            self.sendfile_roots.splice(0..0, file.sendfile_roots);
        }
        // Environment variables: the file's, then the flags' (the last
        // one given for a name wins).
        if given.on_command_line("env") {
            self.env.splice(0..0, file.env);
        }
        if given.on_command_line("route") {
            self.route.splice(0..0, file.route);
        }
    }

    fn validate(&self, _given: &Origins<'_>) -> Result<(), Fault> {
        let more_than_0 = |field, zero: bool| {
            if zero {
                Err(Fault::new(field, "must be more than 0"))
            } else {
                Ok(())
            }
        };
        if self.workers == Some(0) {
            return Err(Fault::new("workers", "must be at least 1"));
        }
        let workers = self.workers();
        if let Some(min) = self.min_workers {
            if min == 0 || min > workers {
                return Err(Fault::new(
                    "min_workers",
                    format!("must be between 1 and {{workers}} ({workers}), not {min}"),
                ));
            }
        }
        if self.threads == Some(0) {
            return Err(Fault::new("threads", "must be at least 1"));
        }
        if self.max_booting == Some(0) {
            return Err(Fault::new("max_booting", "must be at least 1"));
        }
        more_than_0("max_body_size", self.max_body_size.0 == 0)?;
        more_than_0("max_request_line", self.max_request_line.0 == 0)?;
        more_than_0("max_header_size", self.max_header_size.0 == 0)?;
        more_than_0("max_headers", self.max_headers == 0)?;
        more_than_0("max_connections", self.max_connections == 0)?;
        more_than_0("header_timeout", self.header_timeout.0.is_zero())?;
        more_than_0("body_timeout", self.body_timeout.0.is_zero())?;
        more_than_0("send_timeout", self.send_timeout.0.is_zero())?;
        match (&self.tls_cert, &self.tls_key) {
            (Some(_), None) => return Err(Fault::new("tls_cert", "needs {tls_key}")),
            (None, Some(_)) => return Err(Fault::new("tls_key", "needs {tls_cert}")),
            _ => {}
        }
        if self.h2c && self.tls_cert.is_some() {
            return Err(Fault::new(
                "h2c",
                "is for plain HTTP: over TLS, clients choose HTTP/2 by ALPN",
            ));
        }
        for (name, _) in &self.ini {
            if let Some(why) = values::bad_ini_name(name) {
                return Err(Fault::new("ini", why));
            }
        }
        if let Some(why) = self.env.iter().find_map(EnvVar::fault) {
            return Err(Fault::new("env", why));
        }
        if let Some(why) = self.sendfile_roots.iter().find_map(SendfileRoot::fault) {
            return Err(Fault::new("sendfile_roots", why));
        }
        for root in &self.sendfile_roots {
            match std::fs::metadata(&root.dir) {
                Ok(meta) if meta.is_dir() => {}
                Ok(_) => {
                    return Err(Fault::new(
                        "sendfile_roots",
                        format!("{} is not a directory", root.dir.display()),
                    ))
                }
                Err(e) => {
                    let hint = if root.dir.to_string_lossy().contains('=') {
                        " (in PREFIX=DIR, the prefix ends with /)"
                    } else {
                        ""
                    };
                    return Err(Fault::new(
                        "sendfile_roots",
                        format!("{}: {e}{hint}", root.dir.display()),
                    ));
                }
            }
        }
        if let Some(why) = self.index.fault() {
            return Err(Fault::new("index", why));
        }
        if let Some(why) = self.fallback.fault() {
            return Err(Fault::new("fallback", why));
        }
        if self.script.is_some() && self.fallback != Fallback::default() {
            return Err(Fault::new(
                "fallback",
                "is for classic mode: with a worker script, the front controller is the worker \
                 script (a mixed site's other .php entries run in php-fpm)",
            ));
        }
        if self.check_state && self.script.is_none() && self.root.is_some() {
            return Err(Fault::new(
                "check_state",
                "is for worker mode: in classic mode php-fpm starts every request afresh, \
                 with nothing kept to check",
            ));
        }
        if !self.sendfile_roots.is_empty() && self.script.is_none() && self.root.is_some() {
            return Err(Fault::new(
                "sendfile_roots",
                "is for worker mode: in classic mode php-fpm's X-Sendfile and \
                 X-Accel-Redirect responses are not offloaded",
            ));
        }
        if self.debug && self.script.is_none() && self.root.is_some() {
            return Err(Fault::new(
                "debug",
                "is for worker mode: in classic mode php-fpm starts every request afresh, \
                 where Xdebug works as it always does",
            ));
        }
        if self.root.is_none() && self.index != IndexFiles::default() {
            return Err(Fault::new("index", "needs a document root ({root})"));
        }
        if let Some(why) = pools::fault(&self.pool, self) {
            return Err(Fault::new("pool", why));
        }
        self.validate_mixed()
    }
}

impl ServeOptions {
    /// The options of mixed sites: meaningful with a worker script and a
    /// document root only, and prefix routes only in mixed mode.
    fn validate_mixed(&self) -> Result<(), Fault> {
        if self.classic_workers == Some(0) {
            return Err(Fault::new("classic_workers", "must be at least 1"));
        }
        if let Some(why) = self.route.iter().find_map(RouteRule::fault) {
            return Err(Fault::new("route", why));
        }
        let mixed = self.script.is_some() && self.root.is_some();
        if self.classic != ClassicChoice::Auto && !mixed {
            return Err(Fault::new(
                "classic",
                "is for mixed sites: it needs a worker script and {root}",
            ));
        }
        if !self.route.is_empty() && !mixed {
            return Err(Fault::new(
                "route",
                "is for mixed sites: it needs a worker script and {root}",
            ));
        }
        if !self.route.is_empty() && self.classic == ClassicChoice::Off {
            return Err(Fault::new(
                "route",
                "needs mixed mode, which {classic} off turns off",
            ));
        }
        if self.classic_workers.is_some() && !mixed {
            return Err(Fault::new(
                "classic_workers",
                "is for mixed sites: it needs a worker script and {root}",
            ));
        }
        Ok(())
    }
}

/// The number of CPUs (2 when it cannot be known).
fn cpus() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

impl ServeOptions {
    /// Most php-fpm children of a mixed site: `classic_workers`, or as
    /// many as workers.
    pub fn classic_workers(&self) -> usize {
        self.classic_workers.unwrap_or_else(|| self.workers())
    }

    /// Worker processes at most: `workers`, or one per CPU.
    pub fn workers(&self) -> usize {
        self.workers.unwrap_or_else(cpus)
    }

    /// Workers always running: `min_workers`, or all of them.
    pub fn min_workers(&self) -> usize {
        self.min_workers.unwrap_or_else(|| self.workers())
    }

    /// Threads for HTTP and worker I/O: `threads`, or one per two CPUs.
    /// One thread does HTTP and worker I/O for two CPUs' worth of PHP: on
    /// the 2-core machine of the benchmark one thread beat two by a third,
    /// because the workers need the other core.
    pub fn threads(&self) -> usize {
        self.threads.unwrap_or_else(|| {
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
            (cpus / 2).max(1)
        })
    }

    /// The worker pool's configuration, for `script` (resolved by the
    /// caller: the app's or the built-in demo) run as `user`.
    pub fn pool_config(&self, script: &Path, user: Option<WorkerUser>) -> PoolConfig {
        let mut pool = PoolConfig::new(&self.php, script, self.workers());
        pool.min_workers = self.min_workers();
        pool.queue_timeout = self.queue_timeout.0;
        pool.max_queue = self.max_queue;
        pool.boot_timeout = self.boot_timeout.0;
        pool.stop_timeout = self.stop_timeout.0;
        pool.scale_down_after = self.scale_down_after.0;
        pool.max_pool_memory = self.max_pool_memory.0;
        if let Some(n) = self.max_booting {
            pool.max_booting = n;
        }
        pool.max_requests = self.max_requests;
        pool.max_memory = self.max_memory.0;
        pool.ttl = self.ttl.and_then(Seconds::nonzero);
        pool.idle_ttl = self.idle_ttl.and_then(Seconds::nonzero);
        pool.user = user;
        pool.ini.clone_from(&self.ini);
        pool.extension = self.php_extension.for_pool();
        pool.batch_scheduling = self.batch_scheduling;
        pool.pipelining = self.pipelining;
        pool.clear_env = self.clear_env;
        pool.check_state = self.check_state;
        pool.debug = self.debug;
        pool.env = self
            .env
            .iter()
            .filter_map(|var| {
                let value = match &var.value {
                    Some(value) => OsString::from(value),
                    None => std::env::var_os(&var.name)?,
                };
                Some((OsString::from(&var.name), value))
            })
            .collect();
        pool
    }

    /// Classic mode's routing: the index files and the front controller.
    pub fn classic_options(&self) -> hearth_classic::Options {
        hearth_classic::Options {
            index: self.index.0.clone(),
            fallback: self.fallback.for_router(),
            ..hearth_classic::Options::default()
        }
    }

    /// The variables `env` passes from Hearth's environment that it does
    /// not have (workers do not get them).
    pub fn env_not_found(&self) -> Vec<&str> {
        self.env
            .iter()
            .filter(|var| var.value.is_none() && std::env::var_os(&var.name).is_none())
            .map(|var| var.name.as_str())
            .collect()
    }

    /// The HTTP front's configuration, with the TLS certificate (loaded by
    /// the caller). Where the app lives (script, document root) is the
    /// pool's: see [`ServeOptions::pool_config`].
    pub fn serve_config(&self, tls: Option<TlsConfig>) -> ServeConfig {
        let mut http = ServeConfig::new();
        http.server_name.clone_from(&self.server_name);
        http.trusted_proxies = self.trusted_proxies.iter().filter_map(|p| p.0).collect();
        http.trust_unix_peers = self.trusted_proxies.iter().any(|p| p.0.is_none());
        http.compression = self.compression;
        http.sendfile = self.sendfile;
        http.max_body_size = self.max_body_size.0;
        http.body_buffer_size = self.body_buffer_size.as_usize();
        http.max_request_line = self.max_request_line.as_usize();
        http.max_header_size = self.max_header_size.as_usize();
        http.max_headers = self.max_headers;
        http.max_connections = self.max_connections;
        http.header_timeout = self.header_timeout.0;
        http.body_timeout = self.body_timeout.0;
        http.keep_alive_timeout = self.keep_alive_timeout.0;
        http.send_timeout = self.send_timeout.0;
        http.max_response_spool = self.max_response_spool.0;
        http.grace_period = self.grace_period.0;
        http.request_timeout = self.request_timeout.nonzero();
        http.tls = tls;
        http.h2c = self.h2c;
        http.sendfile_roots = self
            .sendfile_roots
            .iter()
            .map(|root| hearth_http::SendfileRoot {
                prefix: root.prefix.clone(),
                dir: std::path::absolute(&root.dir).unwrap_or_else(|_| root.dir.clone()),
            })
            .collect();
        http
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The pool and the HTTP front have defaults of their own, for their
    /// other users; `hearth serve` sets every value from its options, and
    /// they agree.
    #[test]
    fn defaults_agree_with_the_pool_and_the_http_front() {
        let options = ServeOptions {
            workers: Some(3),
            ..ServeOptions::default()
        };
        let ours = options.pool_config(Path::new("/app/worker.php"), None);
        let theirs = PoolConfig::new("php-cgi", "/app/worker.php", 3);
        assert_eq!(format!("{ours:?}"), format!("{theirs:?}"));
        let ours = options.serve_config(None);
        let theirs = ServeConfig::new();
        assert_eq!(format!("{ours:?}"), format!("{theirs:?}"));
    }

    #[test]
    fn zero_means_no_limit() {
        let options = ServeOptions {
            request_timeout: Seconds::from_secs(0),
            ttl: Some(Seconds::from_secs(0)),
            idle_ttl: Some(Seconds(Duration::from_millis(1500))),
            ..ServeOptions::default()
        };
        assert_eq!(options.serve_config(None).request_timeout, None);
        let pool = options.pool_config(Path::new("/w.php"), None);
        assert_eq!(pool.ttl, None);
        assert_eq!(pool.idle_ttl, Some(Duration::from_millis(1500)));
    }
}
