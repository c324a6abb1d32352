//! What a pool is configured with, checked once, and the php-fpm.conf
//! written from it. No processes are started here.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::Error;

/// The Debian package that ships the default binary, named in errors.
pub(crate) const PACKAGE: &str = "php8.2-fpm";
/// Binaries looked for, in order, on PATH and in /usr/sbin.
const BINARY_NAMES: [&str; 2] = ["php-fpm8.2", "php-fpm"];

/// How php-fpm keeps its children (`pm`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessManager {
    /// `pm = static`, `pm.max_children = children`: a fixed number of
    /// children, all started with the pool.
    Static {
        /// `pm.max_children`.
        children: u32,
    },
    /// `pm = dynamic`: between `min_spare` and `max_spare` idle children,
    /// never more than `max_children` in all.
    Dynamic {
        /// `pm.max_children`.
        max_children: u32,
        /// `pm.start_servers`: children started with the pool.
        start: u32,
        /// `pm.min_spare_servers`.
        min_spare: u32,
        /// `pm.max_spare_servers`.
        max_spare: u32,
    },
    /// `pm = ondemand`: no child until a request comes, at most
    /// `max_children`, each stopped after `idle_timeout` without a
    /// request. A pool that is seldom used costs only its master.
    OnDemand {
        /// `pm.max_children`.
        max_children: u32,
        /// `pm.process_idle_timeout`, whole seconds (at least 1).
        idle_timeout: Duration,
    },
}

/// One ini setting for the pool's PHP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IniSetting {
    /// The directive, e.g. `opcache.enable`.
    pub name: String,
    /// Its value, written unquoted as in php.ini (so `E_ALL & ~E_NOTICE`
    /// works).
    pub value: String,
    /// `php_admin_value` (scripts cannot change it with `ini_set()`) rather
    /// than `php_value`.
    pub admin: bool,
}

/// A php-fpm pool as Hearth runs it. Every field maps to one php-fpm
/// directive, named in its comment.
#[derive(Debug, Clone)]
pub struct Config {
    /// The php-fpm binary; `None` looks for `php-fpm8.2`, then `php-fpm`,
    /// on PATH and in /usr/sbin.
    pub binary: Option<PathBuf>,
    /// `pm` and its `pm.*` counts.
    pub process_manager: ProcessManager,
    /// `pm.max_requests`: a child is replaced after this many requests
    /// (0: never), against slow leaks in long-lived children.
    pub max_requests: u32,
    /// `request_terminate_timeout`: the master kills a child whose request
    /// runs longer (`None`: never). Whole seconds.
    pub request_terminate_timeout: Option<Duration>,
    /// `process_control_timeout` (global): how long the master waits for
    /// children to finish their request on SIGQUIT or a reload (SIGUSR2)
    /// before it kills them. Whole seconds.
    pub process_control_timeout: Duration,
    /// `user`: the children's user, when Hearth runs as root (ignored
    /// otherwise: the children are Hearth's own user). Required as root.
    pub user: Option<String>,
    /// `group`: the children's group; `None` is the user's group.
    pub group: Option<String>,
    /// Children may run as root (php-fpm's `--allow-to-run-as-root`).
    /// Refused unless set, as php-fpm refuses it.
    pub allow_root_children: bool,
    /// `php_value[...]` and `php_admin_value[...]` lines.
    pub ini: Vec<IniSetting>,
    /// `clear_env`: start children with an empty environment (php-fpm's
    /// default) but for `env`.
    pub clear_env: bool,
    /// `env[NAME] = value`: variables the children get.
    pub env: Vec<(String, String)>,
    /// `catch_workers_output`: a child's own stderr (`fwrite(STDERR)`,
    /// crashes) reaches the master's log, and so Hearth's log.
    pub catch_workers_output: bool,
    /// `pm.status_path`: the status page, served through the pool's
    /// private socket only (what [`super::Pool::children`] reads).
    pub status_path: String,
    /// Where the pool's private directory is made (`None`: the system's
    /// temporary directory).
    pub runtime_parent: Option<PathBuf>,
    /// How long start may wait for php-fpm to be ready.
    pub start_timeout: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            binary: None,
            process_manager: ProcessManager::Static { children: 4 },
            max_requests: 0,
            request_terminate_timeout: None,
            process_control_timeout: Duration::from_secs(10),
            user: None,
            group: None,
            allow_root_children: false,
            ini: Vec::new(),
            clear_env: true,
            env: Vec::new(),
            catch_workers_output: true,
            status_path: "/hearth-fpm-status".to_owned(),
            runtime_parent: None,
            start_timeout: Duration::from_secs(10),
        }
    }
}

impl Config {
    /// Checks every setting (names, values, counts, who the children run
    /// as), with a message naming the field. `running_as_root` is whether
    /// Hearth itself is root.
    pub fn validate(&self, running_as_root: bool) -> Result<(), Error> {
        match self.process_manager {
            ProcessManager::Static { children: 0 } => {
                return Err(Error::config(
                    "process_manager: static needs at least one child",
                ));
            }
            ProcessManager::Dynamic {
                max_children,
                start,
                min_spare,
                max_spare,
            } => {
                if min_spare == 0
                    || !(min_spare <= start && start <= max_spare && max_spare <= max_children)
                {
                    return Err(Error::config(format!(
                        "process_manager: dynamic needs 1 <= min_spare ({min_spare}) <= start ({start}) \
                         <= max_spare ({max_spare}) <= max_children ({max_children})"
                    )));
                }
            }
            ProcessManager::OnDemand {
                max_children,
                idle_timeout,
            } => {
                if max_children == 0 {
                    return Err(Error::config(
                        "process_manager: ondemand needs max_children of at least 1",
                    ));
                }
                if idle_timeout.is_zero() || idle_timeout.subsec_nanos() != 0 {
                    return Err(Error::config(
                        "process_manager: ondemand's idle_timeout is whole seconds, at least 1",
                    ));
                }
            }
            ProcessManager::Static { .. } => {}
        }
        for (field, d) in [
            ("request_terminate_timeout", self.request_terminate_timeout),
            (
                "process_control_timeout",
                Some(self.process_control_timeout),
            ),
        ] {
            if d.is_some_and(|d| d.subsec_nanos() != 0) {
                return Err(Error::config(format!(
                    "{field}: php-fpm takes whole seconds"
                )));
            }
        }
        if self.request_terminate_timeout == Some(Duration::ZERO) {
            return Err(Error::config(
                "request_terminate_timeout: use None for no limit, not 0",
            ));
        }
        if running_as_root {
            match self.user.as_deref() {
                None => {
                    return Err(Error::config(
                        "user: Hearth runs as root, so the children need a user to run as (e.g. www-data)",
                    ))
                }
                Some("root") if !self.allow_root_children => {
                    return Err(Error::config(
                        "user: children running as root are refused unless allow_root_children is set",
                    ))
                }
                Some(_) => {}
            }
        } else if let Some(user) = &self.user {
            // php-fpm not running as root ignores `user` with a notice and
            // runs the children as itself: say so rather than pretend.
            return Err(Error::config(format!(
                "user: children can run as {user:?} only when Hearth runs as root;                  leave it out to run them as Hearth's own user"
            )));
        }
        for (field, name) in [("user", &self.user), ("group", &self.group)] {
            if let Some(name) = name {
                let ok = !name.is_empty()
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b));
                if !ok {
                    return Err(Error::config(format!(
                        "{field}: {name:?} is not a user or group name"
                    )));
                }
            }
        }
        for setting in &self.ini {
            check_name("ini", &setting.name, |b| {
                b.is_ascii_alphanumeric() || b"_.-".contains(&b)
            })?;
            check_value("ini", &setting.name, &setting.value)?;
        }
        for (name, value) in &self.env {
            check_name("env", name, |b| b.is_ascii_alphanumeric() || b == b'_')?;
            check_value("env", name, value)?;
        }
        let path_ok = self.status_path.starts_with('/')
            && self
                .status_path
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"/_-.".contains(&b));
        if !path_ok {
            return Err(Error::config(format!(
                "status_path: {:?} must start with / and hold only letters, digits, / _ - .",
                self.status_path
            )));
        }
        Ok(())
    }

    /// The php-fpm binary: the configured one, or the first of
    /// `php-fpm8.2`, `php-fpm` found on PATH or in /usr/sbin.
    pub fn find_binary(&self) -> Result<PathBuf, Error> {
        if let Some(binary) = &self.binary {
            return if binary.is_file() {
                Ok(binary.clone())
            } else {
                Err(Error::config(format!(
                    "binary: {} does not exist (Debian's package {PACKAGE} installs /usr/sbin/php-fpm8.2)",
                    binary.display()
                )))
            };
        }
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
        dirs.push(PathBuf::from("/usr/sbin"));
        for name in BINARY_NAMES {
            for dir in &dirs {
                let candidate = dir.join(name);
                if candidate.is_file() {
                    return Ok(candidate);
                }
            }
        }
        Err(Error::config(format!(
            "no php-fpm binary: looked for {} on PATH and in /usr/sbin; install Debian's package {PACKAGE}",
            BINARY_NAMES.join(" and ")
        )))
    }

    /// The php-fpm.conf for this pool, with everything in `dir` (Hearth's
    /// private directory): the pid file and the listen socket. The master
    /// logs to its stderr, which Hearth reads.
    pub(crate) fn render(&self, dir: &Path, running_as_root: bool) -> String {
        let mut out = String::new();
        let mut line = |text: String| {
            out.push_str(&text);
            out.push('\n');
        };
        line("[global]".into());
        line(format!("pid = {}", dir.join("php-fpm.pid").display()));
        line("error_log = /proc/self/fd/2".into());
        line("log_level = notice".into());
        line("daemonize = no".into());
        line(format!(
            "process_control_timeout = {}",
            self.process_control_timeout.as_secs()
        ));
        line(String::new());
        line("[hearth]".into());
        if running_as_root {
            if let Some(user) = &self.user {
                line(format!("user = {user}"));
            }
            if let Some(group) = &self.group {
                line(format!("group = {group}"));
            }
            // The socket belongs to Hearth (root) alone: the children never
            // need its path, they inherit the listening descriptor.
            line("listen.owner = root".into());
            line("listen.group = root".into());
        }
        line(format!("listen = {}", socket_path(dir).display()));
        line("listen.mode = 0600".into());
        match &self.process_manager {
            ProcessManager::Static { children } => {
                line("pm = static".into());
                line(format!("pm.max_children = {children}"));
            }
            ProcessManager::Dynamic {
                max_children,
                start,
                min_spare,
                max_spare,
            } => {
                line("pm = dynamic".into());
                line(format!("pm.max_children = {max_children}"));
                line(format!("pm.start_servers = {start}"));
                line(format!("pm.min_spare_servers = {min_spare}"));
                line(format!("pm.max_spare_servers = {max_spare}"));
            }
            ProcessManager::OnDemand {
                max_children,
                idle_timeout,
            } => {
                line("pm = ondemand".into());
                line(format!("pm.max_children = {max_children}"));
                line(format!(
                    "pm.process_idle_timeout = {}s",
                    idle_timeout.as_secs()
                ));
            }
        }
        line(format!("pm.max_requests = {}", self.max_requests));
        line(format!("pm.status_path = {}", self.status_path));
        if let Some(limit) = self.request_terminate_timeout {
            line(format!("request_terminate_timeout = {}", limit.as_secs()));
        }
        line(format!(
            "catch_workers_output = {}",
            yes_no(self.catch_workers_output)
        ));
        line("decorate_workers_output = no".into());
        line(format!("clear_env = {}", yes_no(self.clear_env)));
        // Only .php files run, as Debian's default (CVE-2019-11043 family).
        line("security.limit_extensions = .php".into());
        for (name, value) in &self.env {
            line(format!("env[{name}] = {}", quoted(value)));
        }
        for setting in &self.ini {
            let directive = if setting.admin {
                "php_admin_value"
            } else {
                "php_value"
            };
            line(format!(
                "{directive}[{}] = {}",
                setting.name,
                ini_value(&setting.value)
            ));
        }
        out
    }
}

/// The listen socket inside the pool's private directory.
pub(crate) fn socket_path(dir: &Path) -> PathBuf {
    dir.join("php-fpm.sock")
}

fn yes_no(on: bool) -> &'static str {
    if on {
        "yes"
    } else {
        "no"
    }
}

fn check_name(field: &str, name: &str, allowed: impl Fn(u8) -> bool) -> Result<(), Error> {
    if name.is_empty() || !name.bytes().all(allowed) {
        return Err(Error::config(format!(
            "{field}: {name:?} is not a valid name"
        )));
    }
    Ok(())
}

/// A value goes on one line of php-fpm.conf: a control character (a line
/// break) cannot be written there in any form.
fn check_value(field: &str, name: &str, value: &str) -> Result<(), Error> {
    if let Some(bad) = value.chars().find(|c| c.is_control()) {
        return Err(Error::config(format!(
            "{field}: the value of {name} holds {bad:?}, which php-fpm.conf cannot hold"
        )));
    }
    Ok(())
}

/// An ini value as `-d` gives it to PHP: unquoted, so that constants and
/// expressions (`E_ALL & ~E_NOTICE`) mean what they mean in php.ini,
/// unless it holds what would end it, start a comment or expand there;
/// then quoted.
fn ini_value(value: &str) -> std::borrow::Cow<'_, str> {
    let plain = !value.is_empty()
        && value.trim() == value
        && !value
            .chars()
            .any(|c| matches!(c, ';' | '"' | '\'' | '$' | '=' | '\\' | '#' | '{' | '}'));
    if plain {
        value.into()
    } else {
        quoted(value).into()
    }
}

/// A string in double quotes, as PHP's ini scanner (php-fpm.conf's)
/// reads it back: `\\`, `\"` and `\$` stand for themselves (a `${VAR}`
/// left as written would be expanded), everything else is literal.
fn quoted(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        if matches!(c, '\\' | '"' | '$') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_user() -> Config {
        Config {
            user: Some("www-data".into()),
            ..Config::default()
        }
    }

    #[test]
    fn newlines_in_values_are_refused() {
        for value in ["1\nphp_admin_value[open_basedir] = /", "1\r", "a\0b"] {
            let mut config = with_user();
            config.ini.push(IniSetting {
                name: "memory_limit".into(),
                value: value.into(),
                admin: false,
            });
            let err = config.validate(true).expect_err(value);
            assert!(err.is_config());
        }
        let mut config = with_user();
        config.ini.push(IniSetting {
            name: "x]=1\n[".into(),
            value: "1".into(),
            admin: true,
        });
        assert!(config.validate(true).is_err());
    }

    #[test]
    fn ordinary_values_pass_and_render_unquoted() {
        let mut config = with_user();
        config.ini.push(IniSetting {
            name: "error_reporting".into(),
            value: "E_ALL & ~E_NOTICE".into(),
            admin: true,
        });
        config.env.push(("APP_ENV".into(), "prod".into()));
        config.validate(true).expect("valid");
        let conf = config.render(Path::new("/run/x"), true);
        assert!(conf.contains("php_admin_value[error_reporting] = E_ALL & ~E_NOTICE\n"));
        assert!(conf.contains("env[APP_ENV] = \"prod\"\n"));
        assert!(conf.contains("listen = /run/x/php-fpm.sock\n"));
        assert!(conf.contains("user = www-data\n"));
    }

    #[test]
    fn values_that_would_end_comment_or_expand_are_quoted() {
        let mut config = with_user();
        for value in [
            "1 ; x",
            "\"x",
            "${HOME}",
            "a=b",
            "Hearth\\Symfony\\Runtime",
            "",
        ] {
            config.ini.push(IniSetting {
                name: "user_agent".into(),
                value: value.into(),
                admin: false,
            });
            config.env.push(("APP".into(), value.into()));
        }
        config.validate(true).expect("valid");
        let conf = config.render(Path::new("/run/x"), true);
        for line in [
            "php_value[user_agent] = \"1 ; x\"\n",
            "php_value[user_agent] = \"\\\"x\"\n",
            "php_value[user_agent] = \"\\${HOME}\"\n",
            "php_value[user_agent] = \"a=b\"\n",
            "env[APP] = \"Hearth\\\\Symfony\\\\Runtime\"\n",
            "env[APP] = \"\"\n",
        ] {
            assert!(conf.contains(line), "{line:?} not in:\n{conf}");
        }
    }

    #[test]
    fn root_children_need_consent_and_root_needs_a_user() {
        assert!(Config::default()
            .validate(true)
            .expect_err("no user")
            .is_config());
        let root = Config {
            user: Some("root".into()),
            ..Config::default()
        };
        assert!(root.validate(true).is_err());
        Config {
            allow_root_children: true,
            ..root
        }
        .validate(true)
        .expect("consented");
        Config::default()
            .validate(false)
            .expect("not root: children are our user");
    }

    #[test]
    fn dynamic_counts_must_be_ordered() {
        let pm = ProcessManager::Dynamic {
            max_children: 4,
            start: 5,
            min_spare: 1,
            max_spare: 3,
        };
        assert!(Config {
            process_manager: pm,
            ..with_user()
        }
        .validate(true)
        .is_err());
        let pm = ProcessManager::Dynamic {
            max_children: 4,
            start: 2,
            min_spare: 1,
            max_spare: 3,
        };
        let config = Config {
            process_manager: pm,
            ..with_user()
        };
        config.validate(true).expect("valid");
        assert!(config
            .render(Path::new("/d"), true)
            .contains("pm.start_servers = 2\n"));
    }

    #[test]
    fn ondemand_needs_a_child_and_a_whole_idle_timeout() {
        let ondemand = |max_children, idle_timeout| Config {
            process_manager: ProcessManager::OnDemand {
                max_children,
                idle_timeout,
            },
            ..with_user()
        };
        assert!(ondemand(0, Duration::from_secs(10)).validate(true).is_err());
        assert!(ondemand(2, Duration::ZERO).validate(true).is_err());
        assert!(ondemand(2, Duration::from_millis(1500))
            .validate(true)
            .is_err());
        let config = ondemand(3, Duration::from_secs(10));
        config.validate(true).expect("valid");
        let conf = config.render(Path::new("/d"), true);
        assert!(
            conf.contains("pm = ondemand\npm.max_children = 3\npm.process_idle_timeout = 10s\n"),
            "{conf}"
        );
    }

    #[test]
    fn a_missing_binary_names_what_was_looked_for_and_the_package() {
        let config = Config {
            binary: Some("/nonexistent/php-fpm".into()),
            ..Config::default()
        };
        let err = config.find_binary().expect_err("missing");
        assert!(err.is_config());
        assert!(err.to_string().contains("php8.2-fpm"), "{err}");
    }
}
