//! Files built into the binary: the PHP library and the demo worker.
//!
//! `hearth serve` with no script runs the demo, which needs both on disk.
//! They are written once per version to a private directory.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

macro_rules! php_file {
    ($path:literal) => {
        ($path, include_str!(concat!("../../../", $path)))
    };
}

const FILES: &[(&str, &str)] = &[
    php_file!("php/autoload.php"),
    php_file!("php/src/functions.php"),
    php_file!("php/src/Worker.php"),
    php_file!("php/src/Psr7Worker.php"),
    php_file!("php/src/TaskRunner.php"),
    php_file!("php/src/TaskRunnerException.php"),
    php_file!("php/src/JobError.php"),
    php_file!("php/src/Internal/Baseline.php"),
    php_file!("php/src/Internal/Channel.php"),
    php_file!("php/src/Internal/FailureReport.php"),
    php_file!("php/src/Internal/Frame.php"),
    php_file!("php/src/Internal/Globals.php"),
    php_file!("php/src/Internal/IniQuantity.php"),
    php_file!("php/src/Internal/InputStream.php"),
    php_file!("php/src/Internal/JobRuntime.php"),
    php_file!("php/src/Internal/Log.php"),
    php_file!("php/src/Internal/ProtocolError.php"),
    php_file!("php/src/Internal/Request.php"),
    php_file!("php/src/Internal/ResponseHead.php"),
    php_file!("php/src/Internal/Runtime.php"),
    php_file!("php/src/Internal/TaskRunnerProcess.php"),
    php_file!("php/src/Internal/Uploads.php"),
    ("demo/worker.php", include_str!("../assets/demo-worker.php")),
];

/// Writes the built-in files (if not already there) and returns the
/// directory holding `php/` and `demo/`.
pub fn extract() -> io::Result<PathBuf> {
    let dir = base_dir();
    ensure_private_dir(&dir)?;
    write_files(&dir)?;
    Ok(dir)
}

/// A private copy of the built-in files owned by `uid`/`gid`, for workers
/// that run as another user than Hearth (`--user`). It is removed when the
/// returned directory is dropped.
pub fn extract_for(uid: u32, gid: u32) -> io::Result<tempfile::TempDir> {
    let dir = tempfile::Builder::new()
        .prefix("hearth-lib-")
        .permissions(fs::Permissions::from_mode(0o700))
        .tempdir()?;
    write_files(dir.path())?;
    let mut todo = vec![dir.path().to_path_buf()];
    while let Some(path) = todo.pop() {
        std::os::unix::fs::chown(&path, Some(uid), Some(gid))?;
        if path.is_dir() {
            for entry in fs::read_dir(&path)? {
                todo.push(entry?.path());
            }
        }
    }
    Ok(dir)
}

fn write_files(dir: &Path) -> io::Result<()> {
    for (relative, contents) in FILES {
        let path = dir.join(relative);
        if fs::read(&path).is_ok_and(|existing| existing == contents.as_bytes()) {
            continue;
        }
        if let Some(parent) = path.parent() {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)?;
        }
        // Write beside and rename, so a worker booting meanwhile never
        // reads half a file.
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        fs::write(&tmp, contents)?;
        fs::rename(&tmp, &path)?;
    }
    Ok(())
}

fn base_dir() -> PathBuf {
    let name = format!("hearth-{}", env!("CARGO_PKG_VERSION"));
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(runtime) if Path::new(&runtime).is_dir() => Path::new(&runtime).join(name),
        _ => std::env::temp_dir().join(format!("{name}-{}", rustix::process::getuid().as_raw())),
    }
}

/// Creates `dir` with mode 0700, or checks that an existing one is ours and
/// private: the files in it are executed, so nobody else may write there.
fn ensure_private_dir(dir: &Path) -> io::Result<()> {
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let meta = fs::symlink_metadata(dir)?;
    let uid = rustix::process::getuid().as_raw();
    if !meta.is_dir() || meta.uid() != uid || meta.permissions().mode() & 0o022 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} exists but is not a private directory owned by this user",
                dir.display()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::FILES;
    use std::fs;
    use std::path::Path;

    /// Every file of the PHP library is built in: one left out of FILES
    /// would be missing from `hearth run` and the demo, and found only
    /// when a worker needs its class.
    #[test]
    fn every_library_file_is_built_in() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut todo = vec![root.join("php/src")];
        let mut missing = Vec::new();
        while let Some(dir) = todo.pop() {
            for entry in fs::read_dir(&dir).expect("read php/src") {
                let path = entry.expect("entry").path();
                if path.is_dir() {
                    todo.push(path);
                } else if path.extension().is_some_and(|e| e == "php") {
                    let relative = path.strip_prefix(&root).expect("under the root");
                    let relative = relative.to_string_lossy();
                    if !FILES.iter().any(|(built_in, _)| *built_in == relative) {
                        missing.push(relative.into_owned());
                    }
                }
            }
        }
        assert!(missing.is_empty(), "not in assets::FILES: {missing:?}");
    }
}
