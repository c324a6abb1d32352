//! Finding out about the PHP binary and building worker command lines.

use std::ffi::OsString;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::{Error, Extension, Paths, PoolConfig, WorkerUser};

/// What Hearth needs to know about a PHP binary before it starts workers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhpInfo {
    pub binary: PathBuf,
    pub version: String,
    /// `cgi-fcgi` for `php-cgi`, `cli` for `php`.
    pub sapi: String,
    /// The `disable_functions` of the binary's php.ini, kept when Hearth
    /// adds its own entries.
    pub disable_functions: String,
    /// The Hearth extension the workers load, when they do: the file
    /// Hearth loads with `-d extension=`, or `None` with `native` when
    /// php.ini loads it.
    pub extension: Option<PathBuf>,
    /// Workers run PHP's own request startup (the Hearth extension).
    pub native: bool,
    /// php.ini's settings of [`REQUEST_OUTPUT`], which the extension gives
    /// each request (the worker process itself runs with Hearth's).
    pub request_output: Vec<(String, String)>,
}

/// The settings that shape a request's output. Workers run with their own
/// values of these, so that what the app prints while booting is caught
/// and logged; with the Hearth extension each request gets php.ini's.
pub const REQUEST_OUTPUT: [&str; 4] = [
    "output_buffering",
    "output_handler",
    "implicit_flush",
    "zlib.output_compression",
];

/// What one run of the probe script said.
struct Probed {
    version: String,
    sapi: String,
    disable_functions: String,
    /// The version of the Hearth extension, when it is loaded.
    extension: Option<String>,
    /// php.ini's [`REQUEST_OUTPUT`] settings.
    request_output: Vec<(String, String)>,
    /// What PHP said at startup (an extension it could not load).
    stderr: String,
}

impl PhpInfo {
    /// Runs the binary on a probe script: once as it is, and once more with
    /// the Hearth extension when `config.extension` (or, for
    /// [`Extension::Auto`], a file where Hearth looks) names one that
    /// php.ini does not load already.
    pub async fn probe(config: &PoolConfig) -> Result<PhpInfo, Error> {
        let binary = &config.php;
        let user = config.user.as_ref();
        let plain = probe_once(binary, None, user).await?;
        let mut info = PhpInfo {
            binary: binary.to_owned(),
            version: plain.version.clone(),
            sapi: plain.sapi.clone(),
            disable_functions: plain.disable_functions.clone(),
            extension: None,
            native: false,
            request_output: plain.request_output.clone(),
        };
        let candidate = match &config.extension {
            Extension::Off => return Ok(info),
            Extension::Path(path) => Some(path.clone()),
            Extension::Auto => extension_candidates(&info.version)
                .into_iter()
                .find(|p| p.is_file())
                .map(|p| std::fs::canonicalize(&p).unwrap_or(p)),
        };
        if plain.extension.is_some() {
            // php.ini loads it: loading it twice would only warn.
            info.native = true;
            return Ok(info);
        }
        let Some(path) = candidate else {
            return Ok(info);
        };
        let with = probe_once(binary, Some(&path), user).await;
        match with {
            Ok(p) if p.extension.is_some() => {
                info.extension = Some(path);
                info.native = true;
                info.disable_functions = p.disable_functions;
            }
            failed => {
                let why = match failed {
                    Ok(p) if p.stderr.is_empty() => "PHP did not load it".to_owned(),
                    Ok(p) => format!("PHP said: {}", p.stderr),
                    Err(e) => e.to_string(),
                };
                if matches!(config.extension, Extension::Path(_)) {
                    return Err(Error::boot(format!(
                        "the Hearth extension {} does not load into {} (PHP {}): {why}; build it for \
                         this PHP (`make ext`, package php-dev) or leave --php-extension out",
                        path.display(),
                        binary.display(),
                        info.version
                    )));
                }
                tracing::warn!(
                    "the Hearth extension {} does not load into {} (PHP {}): {why}; workers use \
                     the PHP library's own request startup",
                    path.display(),
                    binary.display(),
                    info.version
                );
            }
        }
        Ok(info)
    }

    /// Whether `header()` and friends work under this binary's SAPI.
    pub fn supports_headers(&self) -> bool {
        self.sapi != "cli"
    }
}

/// Runs the binary once on the probe script, with `extension` loaded, as
/// the workers' `user` when they run as another one: what it can load (an
/// extension in a directory only Hearth's user can enter cannot) is what
/// the workers can.
async fn probe_once(
    binary: &Path,
    extension: Option<&Path>,
    user: Option<&WorkerUser>,
) -> Result<Probed, Error> {
    let mut script = tempfile::Builder::new()
        .prefix("hearth-probe-")
        .suffix(".php")
        .tempfile()?;
    if user.is_some() {
        // The workers' user reads it; it says nothing secret.
        use std::os::unix::fs::PermissionsExt as _;
        script
            .as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644))?;
    }
    script.write_all(
        b"<?php echo 'version=', PHP_VERSION, \"\\n\", 'sapi=', PHP_SAPI, \"\\n\", \
          'disable_functions=', ini_get('disable_functions'), \"\\n\", \
          'hearth=', phpversion('hearth'), \"\\n\"; \
          foreach (['output_buffering', 'output_handler', 'implicit_flush', 'zlib.output_compression'] as $n) \
          { echo 'ini.', $n, '=', str_replace(\"\\n\", ' ', (string) ini_get($n)), \"\\n\"; }",
    )?;
    script.flush()?;
    let mut cmd = tokio::process::Command::new(binary);
    if let Some(path) = extension {
        cmd.arg("-d").arg(format!("extension={}", path.display()));
    }
    // Startup errors (an extension that does not load) on stderr, where
    // they are read, not in the output.
    cmd.arg("-d").arg("display_startup_errors=0");
    cmd.arg("-q").arg(script.path()).stdin(Stdio::null());
    for var in CGI_VARIABLES {
        cmd.env_remove(var);
    }
    if let Some(user) = user {
        let dir = script.path().parent().unwrap_or(Path::new("/")).to_owned();
        become_user(&mut cmd, user, &dir);
    }
    let output = cmd.output().await.map_err(|e| {
        Error::boot(format!(
            "cannot run PHP binary {}: {e}{}",
            binary.display(),
            if e.kind() == std::io::ErrorKind::NotFound {
                " (is PHP installed? e.g. `apt-get install php8.2-cgi php8.2-cli`; or pass --php)"
            } else {
                ""
            }
        ))
    })?;
    let text = String::from_utf8_lossy(&output.stdout);
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix('=')))
            .map(str::to_owned)
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    match (field("version"), field("sapi")) {
        (Some(version), Some(sapi)) if output.status.success() => Ok(Probed {
            version,
            sapi,
            disable_functions: field("disable_functions").unwrap_or_default(),
            extension: field("hearth").filter(|v| !v.is_empty()),
            request_output: REQUEST_OUTPUT
                .iter()
                .map(|name| {
                    let value = field(&format!("ini.{name}")).unwrap_or_default();
                    ((*name).to_owned(), value)
                })
                .collect(),
            stderr: stderr.trim().to_owned(),
        }),
        _ => Err(Error::boot(format!(
            "{} is not a working PHP binary ({}): {}{}",
            binary.display(),
            output.status,
            text.trim(),
            stderr.trim()
        ))),
    }
}

/// Where [`Extension::Auto`] looks for the Hearth extension built for PHP
/// `version` (`hearth-php8.2.so` for 8.2.x): beside the hearth binary, in
/// `../php-ext` from it (where `make` builds it, next to `target/debug`
/// and `target/release`), and in `../lib/hearth` from it (an install under
/// a prefix: `/usr/local/bin/hearth`, `/usr/local/lib/hearth`).
pub fn extension_candidates(version: &str) -> Vec<PathBuf> {
    let minor: Vec<&str> = version.split('.').take(2).collect();
    let name = format!("hearth-php{}.so", minor.join("."));
    let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf))
    else {
        return Vec::new();
    };
    vec![
        dir.join(&name),
        dir.join("../php-ext").join(&name),
        dir.join("../lib/hearth").join(&name),
    ]
}

/// The environment variables a CGI parent might leave behind that would
/// make `php-cgi` treat the worker script as a CGI request.
const CGI_VARIABLES: &[&str] = &[
    "REQUEST_METHOD",
    "CONTENT_TYPE",
    "CONTENT_LENGTH",
    "QUERY_STRING",
    "SCRIPT_FILENAME",
    "SCRIPT_NAME",
    "PATH_INFO",
    "PATH_TRANSLATED",
    "REDIRECT_STATUS",
    "GATEWAY_INTERFACE",
    "SERVER_SOFTWARE",
    "PHP_FCGI_CHILDREN",
    "PHP_FCGI_MAX_REQUESTS",
    "FCGI_WEB_SERVER_ADDRS",
];

/// Variables of the caller's login session, which describe the person who
/// started Hearth and not the workers' user: removed from the workers'
/// environment when they run as another user. Names that start with one
/// of [`SESSION_PREFIXES`] are removed too.
///
/// sudo sets `SUDO_*`; sshd `SSH_CLIENT`, `SSH_CONNECTION`, `SSH_TTY` and,
/// with agent forwarding, `SSH_AUTH_SOCK` (a key agent any process of the
/// workers' user could otherwise use); pam_systemd `XDG_SESSION_*`,
/// `XDG_RUNTIME_DIR`, `XDG_SEAT`, `XDG_VTNR`; login `MAIL`; a desktop
/// `DISPLAY`, `WAYLAND_DISPLAY`, `XAUTHORITY`, `DBUS_SESSION_BUS_ADDRESS`;
/// gpg-agent `GPG_AGENT_INFO`; Kerberos `KRB5CCNAME` (a ticket cache);
/// tmux and screen `TMUX`, `TMUX_PANE`, `STY`.
const SESSION_VARIABLES: &[&str] = &[
    "XDG_RUNTIME_DIR",
    "XDG_SEAT",
    "XDG_VTNR",
    "MAIL",
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "XAUTHORITY",
    "DBUS_SESSION_BUS_ADDRESS",
    "GPG_AGENT_INFO",
    "KRB5CCNAME",
    "TMUX",
    "TMUX_PANE",
    "STY",
];

/// See [`SESSION_VARIABLES`].
const SESSION_PREFIXES: &[&str] = &["SUDO_", "SSH_", "XDG_SESSION_"];

/// Whether `name` is a variable of the caller's login session.
fn is_session_variable(name: &str) -> bool {
    SESSION_VARIABLES.contains(&name) || SESSION_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// The variables that say who the user is, set to the workers' user's
/// when they run as another user.
const IDENTITY_VARIABLES: [&str; 4] = ["HOME", "USER", "LOGNAME", "SHELL"];

/// The worker's environment (see docs/configuration.md, "The workers'
/// environment"): Hearth's own, or none with `clear_env`; without the
/// caller's session and with the workers' user's identity when they run
/// as another user (as php-fpm sets `USER` and `HOME` for a pool's
/// `user`); then the configured variables; then Hearth's.
fn environment(
    cmd: &mut tokio::process::Command,
    config: &PoolConfig,
    extra: &[(OsString, OsString)],
) {
    if config.clear_env {
        cmd.env_clear();
    } else {
        for var in CGI_VARIABLES {
            cmd.env_remove(var);
        }
        for (name, _) in std::env::vars_os() {
            let text = name.to_string_lossy();
            // Hearth's own variables are set per worker, never inherited.
            if text.starts_with("HEARTH_") || (config.user.is_some() && is_session_variable(&text))
            {
                cmd.env_remove(name);
            }
        }
    }
    if let Some(user) = &config.user {
        match &user.account {
            Some(account) => {
                cmd.env("HOME", &account.home)
                    .env("USER", &user.name)
                    .env("LOGNAME", &user.name)
                    .env("SHELL", &account.shell);
            }
            // A numeric user without an entry: nothing to say of it, and
            // the caller's values would be wrong.
            None => {
                for var in IDENTITY_VARIABLES {
                    cmd.env_remove(var);
                }
            }
        }
    }
    for (k, v) in config.env.iter().chain(extra) {
        cmd.env(k, v);
    }
    // Last, so that no configured variable can change them.
    cmd.env("HEARTH_PROTOCOL", hearth_proto::VERSION.to_string())
        .env("HEARTH_MAX_PAYLOAD", config.max_payload.to_string())
        .env("HEARTH_REPORT", "1");
    if config.check_state {
        cmd.env("HEARTH_CHECK_STATE", "1");
    }
}

/// Makes every descriptor above standard error close-on-exec in the
/// worker, whatever Hearth inherited from whoever started it (a shell, a
/// supervisor, a parent that leaks descriptors): a worker gets its channel
/// on standard input, its output pipes and nothing else.
///
/// Marked close-on-exec rather than closed, in the child just before
/// `exec`: the standard library reports a failed `exec` through a pipe of
/// its own, which must stay open until then, and a later `pre_exec` step
/// may still `dup2` a descriptor into place, which clears the flag on the
/// copy. `close_range(2)` does it in one call (Linux 5.11); neither rustix
/// nor std wraps it, so it is called by number, and older kernels get a
/// loop up to the descriptor limit.
#[allow(unsafe_code)]
fn keep_only_standard_descriptors(cmd: &mut tokio::process::Command) {
    // SAFETY: the closure runs in the child between fork and exec, where
    // only async-signal-safe calls may be made: close_range, getrlimit and
    // fcntl are system calls, and nothing is allocated.
    unsafe {
        cmd.pre_exec(|| {
            let first: libc::c_uint = 3;
            let done = libc::syscall(
                libc::SYS_close_range,
                first,
                libc::c_uint::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            ) == 0;
            if done {
                return Ok(());
            }
            let mut limit = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
                limit.rlim_cur.min(1 << 20)
            } else {
                1024
            };
            for fd in 3..libc::c_int::try_from(max).unwrap_or(1024) {
                let flags = libc::fcntl(fd, libc::F_GETFD);
                if flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
                    libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
                }
            }
            Ok(())
        });
    }
}

/// The name under which the extension reads php.ini's `name` for requests:
/// `hearth.zlib_output_compression` for `zlib.output_compression`.
pub fn request_output_setting(name: &str) -> String {
    format!("hearth.{}", name.replace('.', "_"))
}

/// The command that starts one worker, running the app from `paths`, with
/// `env` after the configured variables (a debug-mode request's Xdebug
/// triggers). Its channel is attached by the caller (on standard input).
pub(crate) fn worker_command(
    config: &PoolConfig,
    info: &PhpInfo,
    paths: &Paths,
    env: &[(OsString, OsString)],
) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(&config.php);
    // The app's boot output is caught by the startup buffer and logged;
    // nothing may ever reach the SAPI's own output, which would mark the
    // headers as sent for the life of the process.
    // A configured disable_functions joins the list instead of replacing it.
    let mut disabled = info.disable_functions.clone();
    for (name, value) in &config.ini {
        if name == "disable_functions" {
            disabled = format!("{disabled},{value}");
        }
    }
    let mut ini = vec![
        ("output_buffering".to_owned(), "1".to_owned()),
        ("implicit_flush".to_owned(), "0".to_owned()),
        ("output_handler".to_owned(), String::new()),
        ("zlib.output_compression".to_owned(), "0".to_owned()),
        (
            "disable_functions".to_owned(),
            if info.native {
                // PHP's own uploads: its move_uploaded_file() knows them.
                disabled.trim_matches(',').to_owned()
            } else {
                disable_functions(&disabled)
            },
        ),
    ];
    if let Some(path) = &info.extension {
        ini.insert(0, ("extension".to_owned(), path.display().to_string()));
    }
    if !info.native && config.extension == Extension::Off {
        // php.ini may load it; the library leaves it unused.
        ini.push(("hearth.native".to_owned(), "0".to_owned()));
    }
    if info.native {
        // The request's own output settings, for the extension to start
        // each request with; a configured one counts over php.ini's.
        for (name, value) in &info.request_output {
            let value = config
                .ini
                .iter()
                .rev()
                .find(|(n, _)| n == name)
                .map_or(value, |(_, v)| v);
            ini.push((request_output_setting(name), value.clone()));
        }
    }
    ini.extend(
        config
            .ini
            .iter()
            .filter(|(name, _)| {
                name != "disable_functions"
                    && !(info.native && REQUEST_OUTPUT.contains(&name.as_str()))
            })
            .cloned(),
    );
    for (name, value) in &ini {
        cmd.arg("-d").arg(format!("{name}={value}"));
    }
    cmd.arg(&paths.script);
    environment(&mut cmd, config, env);
    // The worker script in $_SERVER['SCRIPT_FILENAME'] while it boots, as
    // PHP's CLI and php-fpm give it: front controllers that include
    // themselves through it (Symfony Runtime's autoload_runtime.php) run
    // as worker scripts. Not a CGI request for php-cgi, which takes the
    // script from its argument; the PHP library removes it from the
    // environment once the worker is ready (each request has its own).
    cmd.env("SCRIPT_FILENAME", &paths.script);
    match &config.user {
        Some(user) => become_user(&mut cmd, user, &paths.cwd),
        None => {
            cmd.current_dir(&paths.cwd);
        }
    }
    keep_only_standard_descriptors(&mut cmd);
    // Its own process group: a Ctrl-C in the terminal reaches Hearth, which
    // stops workers gracefully, instead of killing them mid-request.
    cmd.process_group(0);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd
}

/// Makes the worker run as `user` with its supplementary groups and none
/// of root's, as php-fpm's workers do (`initgroups()`, `setgid()`,
/// `setuid()`), and enter `cwd` as that user.
///
/// std's `uid()` and `gid()` drop every supplementary group, and the
/// stable API has no way to set them, so the switch is made by hand.
#[allow(unsafe_code)]
fn become_user(cmd: &mut tokio::process::Command, user: &WorkerUser, cwd: &Path) {
    use std::os::unix::ffi::OsStrExt as _;
    let Ok(dir) = std::ffi::CString::new(cwd.as_os_str().as_bytes()) else {
        // A path with a NUL byte cannot be entered anyway; let spawn say so.
        cmd.current_dir(cwd);
        return;
    };
    let mut groups: Vec<libc::gid_t> = vec![user.gid];
    groups.extend(user.groups.iter().filter(|&&g| g != user.gid));
    let (uid, gid) = (user.uid, user.gid);
    let fail = || Err(std::io::Error::last_os_error());
    // SAFETY: the closure runs in the child between fork and exec, where
    // only async-signal-safe calls may be made: it makes four system calls
    // on memory allocated before the fork, and allocates nothing (an
    // io::Error from errno holds the number alone).
    unsafe {
        cmd.pre_exec(move || {
            if libc::setgroups(groups.len(), groups.as_ptr()) != 0 {
                return fail();
            }
            if libc::setgid(gid) != 0 || libc::setuid(uid) != 0 {
                return fail();
            }
            if libc::chdir(dir.as_ptr()) != 0 {
                return fail();
            }
            Ok(())
        });
    }
}

/// The binary's own list plus the two functions the PHP library replaces.
fn disable_functions(existing: &str) -> String {
    let mut list: Vec<&str> = existing
        .split(',')
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .collect();
    for f in ["move_uploaded_file", "is_uploaded_file"] {
        if !list.contains(&f) {
            list.push(f);
        }
    }
    list.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disable_functions_keeps_the_existing_list() {
        assert_eq!(disable_functions(""), "move_uploaded_file,is_uploaded_file");
        assert_eq!(
            disable_functions("pcntl_fork, exec,"),
            "pcntl_fork,exec,move_uploaded_file,is_uploaded_file"
        );
        assert_eq!(
            disable_functions("is_uploaded_file"),
            "is_uploaded_file,move_uploaded_file"
        );
    }
}
