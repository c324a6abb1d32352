//! Finding out about the PHP binary and building worker command lines.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::{Error, Paths, PoolConfig, WorkerUser};

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
}

impl PhpInfo {
    /// Runs the binary once on a probe script.
    pub async fn probe(binary: &Path) -> Result<PhpInfo, Error> {
        let mut script = tempfile::Builder::new()
            .prefix("hearth-probe-")
            .suffix(".php")
            .tempfile()?;
        script.write_all(
            b"<?php echo 'version=', PHP_VERSION, \"\\n\", 'sapi=', PHP_SAPI, \"\\n\", \
              'disable_functions=', ini_get('disable_functions'), \"\\n\";",
        )?;
        script.flush()?;
        let mut cmd = tokio::process::Command::new(binary);
        cmd.arg("-q").arg(script.path()).stdin(Stdio::null());
        for var in CGI_VARIABLES {
            cmd.env_remove(var);
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
        match (field("version"), field("sapi")) {
            (Some(version), Some(sapi)) if output.status.success() => Ok(PhpInfo {
                binary: binary.to_owned(),
                version,
                sapi,
                disable_functions: field("disable_functions").unwrap_or_default(),
            }),
            _ => Err(Error::boot(format!(
                "{} is not a working PHP binary ({}): {}{}",
                binary.display(),
                output.status,
                text.trim(),
                String::from_utf8_lossy(&output.stderr).trim()
            ))),
        }
    }

    /// Whether `header()` and friends work under this binary's SAPI.
    pub fn supports_headers(&self) -> bool {
        self.sapi != "cli"
    }
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

/// The command that starts one worker, running the app from `paths`. Its
/// channel is attached by the caller (on standard input).
pub(crate) fn worker_command(
    config: &PoolConfig,
    info: &PhpInfo,
    paths: &Paths,
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
        ("disable_functions".to_owned(), disable_functions(&disabled)),
    ];
    ini.extend(
        config
            .ini
            .iter()
            .filter(|(name, _)| name != "disable_functions")
            .cloned(),
    );
    for (name, value) in &ini {
        cmd.arg("-d").arg(format!("{name}={value}"));
    }
    cmd.arg(&paths.script);
    for var in CGI_VARIABLES {
        cmd.env_remove(var);
    }
    // Hearth's own variables are set per worker, never inherited.
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("HEARTH_") {
            cmd.env_remove(name);
        }
    }
    for (k, v) in &config.env {
        cmd.env(k, v);
    }
    // Last, so that no configured variable can change them.
    cmd.env("HEARTH_PROTOCOL", hearth_proto::VERSION.to_string())
        .env("HEARTH_MAX_PAYLOAD", config.max_payload.to_string());
    match &config.user {
        Some(user) => become_user(&mut cmd, user, &paths.cwd),
        None => {
            cmd.current_dir(&paths.cwd);
        }
    }
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
