//! `hearth.toml`: the same options as the command-line flags.
//!
//! ```toml
//! [serve]
//! script = "app/worker.php"     # relative to this file
//! listen = "127.0.0.1:8080"
//! workers = 4
//! php = "php-cgi"
//! max_body_size = "8M"
//! queue_timeout = "30s"
//!
//! [serve.ini]                    # extra php.ini settings for workers
//! memory_limit = "256M"
//!
//! [serve.env]                    # extra environment for workers
//! APP_ENV = "prod"
//! ```
//!
//! A bad value is reported with the file, the field and its position.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    #[serde(default)]
    pub serve: ServeSection,
}

/// `[serve]`: every field is optional here; defaults and flags fill the rest.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServeSection {
    /// The worker script; a relative path is relative to the config file.
    pub script: Option<PathBuf>,
    /// Address and port to listen on.
    pub listen: Option<String>,
    /// PEM certificate chain for HTTPS; a relative path is relative to the
    /// config file. With `tls_key`, Hearth serves HTTPS only.
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of `tls_cert`; relative to the config file.
    pub tls_key: Option<PathBuf>,
    /// Without TLS, also serve HTTP/2 with prior knowledge (h2c).
    pub h2c: Option<bool>,
    /// Worker processes, at most (default: one per CPU).
    #[serde(alias = "max_workers")]
    pub workers: Option<usize>,
    /// Requests that may wait for a worker at once (default 1024; 0: no limit).
    pub max_queue: Option<usize>,
    /// Worker processes always running (default: `workers`).
    pub min_workers: Option<usize>,
    /// How long an extra worker may stay idle before it stops (default 10s).
    pub scale_down_after: Option<Seconds>,
    /// PHP binary for workers (default: php-cgi).
    pub php: Option<PathBuf>,
    /// Largest request body accepted (default 8M, Debian's post_max_size).
    pub max_body_size: Option<Size>,
    /// Raw request bodies up to this size stay in memory; larger ones are
    /// spooled to a temporary file the worker reads (default 64K; 0: every
    /// body goes to a file).
    pub body_buffer_size: Option<Size>,
    /// Longest request line; longer ones get 414 (default 8K).
    pub max_request_line: Option<Size>,
    /// Largest header section; larger ones get 431 (default 32K).
    pub max_header_size: Option<Size>,
    /// Most header lines in a request; more get 431 (default 100).
    pub max_headers: Option<usize>,
    /// How long a client has to send a request head, so that a slow one
    /// cannot hold a connection: 408 (default 60s).
    pub header_timeout: Option<Seconds>,
    /// Longest pause while a request body arrives: 408 (default 60s).
    pub body_timeout: Option<Seconds>,
    /// How long an idle connection is kept between requests (default 75s;
    /// 0 turns keep-alive off).
    pub keep_alive_timeout: Option<Seconds>,
    /// Most connections open at once; more wait in the listen backlog
    /// (default 10000).
    pub max_connections: Option<usize>,
    /// SERVER_NAME given to PHP.
    pub server_name: Option<String>,
    /// Document root for static files; a relative path is relative to the
    /// config file. Without one, every request goes to PHP.
    pub root: Option<PathBuf>,
    /// Compress responses on the fly for clients that accept gzip or
    /// brotli (default true).
    pub compression: Option<bool>,
    /// How long a request waits for a free worker before a 503.
    pub queue_timeout: Option<Seconds>,
    /// How long a worker may take to boot.
    pub boot_timeout: Option<Seconds>,
    /// On shutdown, how long in-flight requests have to finish.
    pub grace_period: Option<Seconds>,
    /// After the stop message, how long workers have to exit before SIGTERM.
    pub stop_timeout: Option<Seconds>,
    /// Hard limit on a request once a worker has it: 504, worker replaced
    /// (default 60s; 0: none).
    pub request_timeout: Option<Seconds>,
    /// Requests a worker serves before it is replaced (default 0: no limit).
    pub max_requests: Option<u64>,
    /// Resident memory past which a worker is replaced (default 0: no limit).
    pub max_memory: Option<Size>,
    /// Age past which a worker is replaced (default: none).
    pub ttl: Option<Seconds>,
    /// Idle time past which a worker is replaced (default: none).
    pub idle_ttl: Option<Seconds>,
    /// The user workers run as (required when Hearth runs as root).
    pub user: Option<String>,
    /// Proxies whose X-Forwarded-For and X-Forwarded-Proto are believed.
    pub trusted_proxies: Vec<String>,
    /// Threads for HTTP and worker I/O (default: one per two CPUs).
    pub threads: Option<usize>,
    /// Run workers under SCHED_BATCH (default true): a worker woken by a
    /// request does not preempt the server, saving a context switch.
    pub batch_scheduling: Option<bool>,
    /// Queue a waiting request on a worker that has just started another
    /// (default true), so workers go from one request to the next without
    /// sleeping in between.
    pub pipelining: Option<bool>,
    /// The control socket for `hearth status`, `reload` and `stop`; a
    /// relative path is relative to the config file (default: one per
    /// listen address under `$XDG_RUNTIME_DIR/hearth` or `/tmp/hearth-UID`).
    pub control_socket: Option<PathBuf>,
    /// Address for `/metrics`, `/healthz` and `/readyz`, apart from the
    /// public port (default: none, off).
    pub admin: Option<String>,
    /// Access log format: off, common or json (default off).
    pub access_log: Option<crate::observe::AccessLogChoice>,
    /// Access log file, appended to; a relative path is relative to the
    /// config file (default: standard output).
    pub access_log_file: Option<PathBuf>,
    /// Extra php.ini settings for workers, passed as `-d name=value`.
    pub ini: BTreeMap<String, String>,
    /// Extra environment variables for workers.
    pub env: BTreeMap<String, String>,
}

/// An error in a config file, naming the file and the field.
#[derive(Debug)]
pub struct ConfigError(String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

impl FileConfig {
    pub fn load(path: &Path) -> Result<FileConfig, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("{}: cannot read: {e}", path.display())))?;
        Self::parse(&text, path)
    }

    pub fn parse(text: &str, path: &Path) -> Result<FileConfig, ConfigError> {
        let de = toml::Deserializer::new(text);
        let mut config: FileConfig = serde_path_to_error::deserialize(de).map_err(|e| {
            let field = e.path().to_string();
            let inner = e.into_inner();
            let at = inner
                .span()
                .map(|span| {
                    let line = text[..span.start].matches('\n').count() + 1;
                    format!(" (line {line})")
                })
                .unwrap_or_default();
            let message = inner.message().trim().to_owned();
            if field == "." || field.is_empty() {
                ConfigError(format!("{}: {message}{at}", path.display()))
            } else {
                ConfigError(format!("{}: {field}: {message}{at}", path.display()))
            }
        })?;
        if let Some(script) = &config.serve.script {
            if script.is_relative() {
                let base = path.parent().unwrap_or(Path::new("."));
                config.serve.script = Some(base.join(script));
            }
        }
        for file in [&mut config.serve.tls_cert, &mut config.serve.tls_key]
            .into_iter()
            .flatten()
        {
            if file.is_relative() {
                *file = path.parent().unwrap_or(Path::new(".")).join(&*file);
            }
        }
        let base = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        for file in [
            &mut config.serve.control_socket,
            &mut config.serve.access_log_file,
        ]
        .into_iter()
        .flatten()
        {
            if file.is_relative() {
                *file = base.join(&*file);
            }
        }
        if let Some(root) = &config.serve.root {
            if root.is_relative() {
                let base = path.parent().unwrap_or(Path::new("."));
                config.serve.root = Some(base.join(root));
            }
        }
        config.validate(path)?;
        Ok(config)
    }

    fn validate(&self, path: &Path) -> Result<(), ConfigError> {
        let s = &self.serve;
        let bad = |field: &str, why: &str| {
            Err(ConfigError(format!(
                "{}: serve.{field}: {why}",
                path.display()
            )))
        };
        if s.workers == Some(0) {
            return bad("workers", "must be at least 1");
        }
        if s.threads == Some(0) {
            return bad("threads", "must be at least 1");
        }
        if let Some(admin) = &s.admin {
            if admin.parse::<std::net::SocketAddr>().is_err() {
                return bad(
                    "admin",
                    &format!("{admin:?} is not an address and port like 127.0.0.1:9090"),
                );
            }
        }
        if let Some(listen) = &s.listen {
            if listen.parse::<std::net::SocketAddr>().is_err() {
                return bad(
                    "listen",
                    &format!("{listen:?} is not an address and port like 127.0.0.1:8080"),
                );
            }
        }
        if s.max_body_size.is_some_and(|m| m.0 == 0) {
            return bad("max_body_size", "must be more than 0");
        }
        for (field, value) in [
            ("max_request_line", s.max_request_line.map(|m| m.0)),
            ("max_header_size", s.max_header_size.map(|m| m.0)),
            ("max_headers", s.max_headers.map(|n| n as u64)),
            ("max_connections", s.max_connections.map(|n| n as u64)),
        ] {
            if value == Some(0) {
                return bad(field, "must be more than 0");
            }
        }
        for (field, value) in [
            ("header_timeout", s.header_timeout),
            ("body_timeout", s.body_timeout),
        ] {
            if value.is_some_and(|d| d.0.is_zero()) {
                return bad(field, "must be more than 0");
            }
        }
        for name in s.env.keys() {
            if name.starts_with("HEARTH_") {
                return bad(
                    "env",
                    &format!("{name}: HEARTH_ variables are set by Hearth itself"),
                );
            }
        }
        for name in s.ini.keys() {
            if name.is_empty() || name.contains('=') || name.contains(char::is_whitespace) {
                return bad("ini", &format!("{name:?} is not a php.ini setting name"));
            }
        }
        Ok(())
    }
}

/// A byte size: a number of bytes, or a string like "512K", "8M", "1G".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size(pub u64);

impl std::str::FromStr for Size {
    type Err = String;

    fn from_str(s: &str) -> Result<Size, String> {
        let t = s.trim();
        let (digits, unit) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len()));
        let n: u64 = digits.parse().map_err(|_| {
            format!("invalid size {s:?}: expected bytes or a number with K, M or G")
        })?;
        let shift = match unit.trim().to_ascii_uppercase().as_str() {
            "" | "B" => 0,
            "K" | "KB" | "KIB" => 10,
            "M" | "MB" | "MIB" => 20,
            "G" | "GB" | "GIB" => 30,
            _ => {
                return Err(format!(
                    "invalid size {s:?}: expected bytes or a number with K, M or G"
                ))
            }
        };
        n.checked_mul(1 << shift)
            .map(Size)
            .ok_or_else(|| format!("size {s:?} is too large"))
    }
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Size, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Size;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size in bytes or a string like \"8M\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Size, E> {
                u64::try_from(v)
                    .map(Size)
                    .map_err(|_| E::custom("a size cannot be negative"))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Size, E> {
                v.parse().map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// A duration: a number of seconds, or a string like "500ms", "30s", "2m".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seconds(pub Duration);

impl std::str::FromStr for Seconds {
    type Err = String;

    fn from_str(s: &str) -> Result<Seconds, String> {
        // One grammar for every duration Hearth reads, task lines included.
        hearth_run::parse_duration(s).map(Seconds)
    }
}

impl<'de> Deserialize<'de> for Seconds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Seconds, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Seconds;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("seconds or a string like \"30s\" or \"500ms\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Seconds, E> {
                u64::try_from(v)
                    .map(|s| Seconds(Duration::from_secs(s)))
                    .map_err(|_| E::custom("a duration cannot be negative"))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Seconds, E> {
                Duration::try_from_secs_f64(v)
                    .map(Seconds)
                    .map_err(|_| E::custom("invalid duration"))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Seconds, E> {
                v.parse().map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<FileConfig, ConfigError> {
        FileConfig::parse(text, Path::new("/etc/app/hearth.toml"))
    }

    #[test]
    fn full_file() {
        let c = parse(
            "[serve]\nscript = \"app/worker.php\"\nlisten = \"0.0.0.0:9000\"\nworkers = 3\n\
             max_body_size = \"16M\"\nbody_buffer_size = \"16K\"\nqueue_timeout = \"500ms\"\nboot_timeout = 10\n\
             [serve.ini]\nmemory_limit = \"256M\"\n[serve.env]\nAPP_ENV = \"prod\"\n",
        )
        .unwrap();
        let s = c.serve;
        assert_eq!(s.script.unwrap(), PathBuf::from("/etc/app/app/worker.php"));
        assert_eq!(s.workers, Some(3));
        assert_eq!(s.max_body_size, Some(Size(16 << 20)));
        assert_eq!(s.body_buffer_size, Some(Size(16 << 10)));
        assert_eq!(s.queue_timeout, Some(Seconds(Duration::from_millis(500))));
        assert_eq!(s.boot_timeout, Some(Seconds(Duration::from_secs(10))));
        assert_eq!(s.ini.get("memory_limit").map(String::as_str), Some("256M"));
        assert_eq!(s.env.get("APP_ENV").map(String::as_str), Some("prod"));
    }

    #[test]
    fn bad_values_name_the_file_and_the_field() {
        let cases = [
            ("[serve]\nworkers = \"many\"\n", "serve.workers"),
            ("[serve]\nworkers = 0\n", "serve.workers"),
            (
                "[serve]\nmax_body_size = \"8 parsecs\"\n",
                "serve.max_body_size",
            ),
            ("[serve]\nqueue_timeout = \"soon\"\n", "serve.queue_timeout"),
            ("[serve]\nlisten = \"localhost\"\n", "serve.listen"),
            ("[serve]\nwokers = 2\n", "wokers"),
            ("[serve]\n[serve.ini]\n\"bad name\" = \"1\"\n", "serve.ini"),
            (
                "[serve]\n[serve.env]\nHEARTH_RESPONSES = \"/x\"\n",
                "serve.env",
            ),
        ];
        for (text, field) in cases {
            let err = parse(text).unwrap_err().to_string();
            assert!(err.starts_with("/etc/app/hearth.toml: "), "{err}");
            assert!(err.contains(field), "{field} not named in: {err}");
        }
    }

    #[test]
    fn tls_paths_are_relative_to_the_file() {
        let s = parse(
            "[serve]\ntls_cert = \"certs/site.pem\"\ntls_key = \"/k/site.key\"\nh2c = false\n",
        )
        .unwrap()
        .serve;
        assert_eq!(s.tls_cert, Some(PathBuf::from("/etc/app/certs/site.pem")));
        assert_eq!(s.tls_key, Some(PathBuf::from("/k/site.key")));
        assert_eq!(s.h2c, Some(false));
    }

    #[test]
    fn line_numbers_point_at_the_value() {
        let err = parse("[serve]\nlisten = \"127.0.0.1:1\"\nworkers = -2\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 3"), "{err}");
    }

    #[test]
    fn sizes_and_durations() {
        assert_eq!("1G".parse::<Size>().unwrap(), Size(1 << 30));
        assert_eq!("512".parse::<Size>().unwrap(), Size(512));
        assert!("x".parse::<Size>().is_err());
        assert_eq!(
            "2m".parse::<Seconds>().unwrap(),
            Seconds(Duration::from_secs(120))
        );
        assert_eq!(
            "1.5".parse::<Seconds>().unwrap(),
            Seconds(Duration::from_millis(1500))
        );
        assert!("-1s".parse::<Seconds>().is_err());
    }

    #[test]
    fn http_limits() {
        let s = parse(
            "[serve]\nmax_request_line = \"4K\"\nmax_header_size = 65536\nmax_headers = 50\n\
             header_timeout = \"10s\"\nbody_timeout = 5\nkeep_alive_timeout = 0\nmax_connections = 100\n",
        )
        .unwrap()
        .serve;
        assert_eq!(s.max_request_line, Some(Size(4 << 10)));
        assert_eq!(s.max_header_size, Some(Size(64 << 10)));
        assert_eq!(s.max_headers, Some(50));
        assert_eq!(s.header_timeout, Some(Seconds(Duration::from_secs(10))));
        assert_eq!(s.body_timeout, Some(Seconds(Duration::from_secs(5))));
        assert_eq!(s.keep_alive_timeout, Some(Seconds(Duration::ZERO)));
        assert_eq!(s.max_connections, Some(100));
        for (text, field) in [
            ("[serve]\nmax_headers = 0\n", "serve.max_headers"),
            ("[serve]\nmax_connections = 0\n", "serve.max_connections"),
            (
                "[serve]\nmax_request_line = \"lots\"\n",
                "serve.max_request_line",
            ),
            ("[serve]\nheader_timeout = 0\n", "serve.header_timeout"),
        ] {
            let err = parse(text).unwrap_err().to_string();
            assert!(err.contains(field), "{field} not named in: {err}");
        }
    }
}
