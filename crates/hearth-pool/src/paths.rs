//! Where workers run the app from: the worker script, their working
//! directory and the document root, resolved to real paths.

use std::path::{Path, PathBuf};

use crate::access::{self, Need};
use crate::{Error, PoolConfig};

/// The real paths of the app for one generation of workers: symlinks
/// followed, as nginx's `$realpath_root` gives them to php-fpm.
///
/// A deploy that switches a `current` symlink to a new release changes
/// what the configured paths lead to, not the paths themselves. The pool
/// resolves them when it starts and again at every reload, and each worker
/// keeps the paths it was booted from: workers started between two
/// reloads (replacements after a crash or a lifecycle limit) run the same
/// release as the others, and a request sees the paths of the release its
/// worker runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    /// The worker script: what workers run, and `SCRIPT_FILENAME`.
    pub script: PathBuf,
    /// The workers' working directory.
    pub cwd: PathBuf,
    /// The document root, if the pool was given one.
    pub document_root: Option<PathBuf>,
}

impl Paths {
    /// Resolves the configured paths as they are now, and checks that the
    /// workers' user (if they run as another user than Hearth) can read
    /// the script and enter the working directory and the document root.
    pub(crate) fn resolve(config: &PoolConfig) -> Result<Paths, Error> {
        let script = real("worker script", &config.script)?;
        if !script.is_file() {
            return Err(Error::config(format!(
                "worker script {} is not a file",
                config.script.display()
            )));
        }
        let cwd = match &config.cwd {
            Some(dir) => directory("working directory", dir)?,
            None => script.parent().unwrap_or(Path::new("/")).to_path_buf(),
        };
        let document_root = match &config.document_root {
            Some(dir) => Some(directory("document root", dir)?),
            None => None,
        };
        if let Some(user) = &config.user {
            let check = |path: &Path, need: Need, what: &str| {
                access::check(user, path, need).map_err(|why| {
                    Error::config(format!(
                        "workers run as {}, who must be able to {what} {}: {why}",
                        user.name,
                        path.display()
                    ))
                })
            };
            check(&script, Need::Read, "read the worker script")?;
            check(&cwd, Need::Search, "enter their working directory")?;
            if let Some(root) = &document_root {
                check(root, Need::Search, "enter the document root")?;
            }
        }
        Ok(Paths {
            script,
            cwd,
            document_root,
        })
    }
}

fn real(what: &str, path: &Path) -> Result<PathBuf, Error> {
    std::fs::canonicalize(path)
        .map_err(|e| Error::config(format!("{what} {}: {e}", path.display())))
}

fn directory(what: &str, path: &Path) -> Result<PathBuf, Error> {
    let real = real(what, path)?;
    if !real.is_dir() {
        return Err(Error::config(format!(
            "{what} {} is not a directory",
            path.display()
        )));
    }
    Ok(real)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_symlinks_as_they_are_when_resolved() {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = dir.path().canonicalize().expect("canonical");
        for release in ["r1", "r2"] {
            std::fs::create_dir_all(base.join(release).join("public")).expect("mkdir");
            std::fs::write(base.join(release).join("worker.php"), "<?php").expect("write");
        }
        std::os::unix::fs::symlink("r1", base.join("current")).expect("symlink");
        let mut config = PoolConfig::new("php-cgi", base.join("current/worker.php"), 1);
        config.document_root = Some(base.join("current/public"));
        let first = Paths::resolve(&config).expect("resolves");
        assert_eq!(first.script, base.join("r1/worker.php"));
        assert_eq!(first.cwd, base.join("r1"));
        assert_eq!(first.document_root, Some(base.join("r1/public")));

        std::fs::remove_file(base.join("current")).expect("unlink");
        std::os::unix::fs::symlink("r2", base.join("current")).expect("symlink");
        let second = Paths::resolve(&config).expect("resolves");
        assert_eq!(second.script, base.join("r2/worker.php"));
        assert_eq!(second.cwd, base.join("r2"));
        assert_eq!(second.document_root, Some(base.join("r2/public")));
    }

    #[test]
    fn a_missing_script_or_root_is_a_configuration_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = PoolConfig::new("php-cgi", dir.path().join("nope.php"), 1);
        assert!(Paths::resolve(&config).expect_err("missing").is_config());
        std::fs::write(dir.path().join("worker.php"), "<?php").expect("write");
        let mut config = PoolConfig::new("php-cgi", dir.path().join("worker.php"), 1);
        config.document_root = Some(dir.path().join("worker.php"));
        assert!(Paths::resolve(&config).expect_err("not a dir").is_config());
        config.document_root = None;
        config.script = dir.path().to_path_buf();
        assert!(Paths::resolve(&config).expect_err("not a file").is_config());
    }
}
