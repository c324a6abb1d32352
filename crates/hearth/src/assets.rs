//! Files built into the binary: the PHP library and the demo worker.
//!
//! `hearth serve` with no script runs the demo, which needs both on disk.
//! They are written to a private directory named after a hash of their
//! content, so that two builds with different files never share one.

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
    php_file!("php/src/Jobs.php"),
    php_file!("php/src/Queue.php"),
    php_file!("php/src/QueueError.php"),
    php_file!("php/src/QueueJob.php"),
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
    php_file!("php/src/Internal/Queue/Engine.php"),
    php_file!("php/src/Internal/Queue/FileEngine.php"),
    php_file!("php/src/Internal/Queue/FileSchema.php"),
    php_file!("php/src/Internal/Queue/QueueUrl.php"),
    php_file!("php/src/Internal/Queue/RedisConnection.php"),
    php_file!("php/src/Internal/Queue/RedisEngine.php"),
    php_file!("php/src/Internal/Queue/RedisErrorReply.php"),
    php_file!("php/src/Internal/Queue/RedisPushScript.php"),
    php_file!("php/src/Internal/Request.php"),
    php_file!("php/src/Internal/ResponseHead.php"),
    php_file!("php/src/Internal/Runtime.php"),
    php_file!("php/src/Internal/StateCheck.php"),
    php_file!("php/src/Internal/TaskRunnerProcess.php"),
    php_file!("php/src/Internal/Uploads.php"),
    php_file!("php/src/Laravel/RequestCycle.php"),
    php_file!("php/src/Laravel/Reset.php"),
    php_file!("php/src/Laravel/Worker.php"),
    php_file!("php/src/Symfony/KernelRunner.php"),
    php_file!("php/src/Symfony/Runtime.php"),
    ("demo/worker.php", include_str!("../assets/demo-worker.php")),
];

/// A set of files to extract, with the hash of their content.
struct Library<'a> {
    files: &'a [(&'a str, &'a str)],
    hash: u64,
}

/// The built-in files, hashed when Hearth is compiled.
const BUILT_IN: Library<'static> = Library::new(FILES);

impl<'a> Library<'a> {
    const fn new(files: &'a [(&'a str, &'a str)]) -> Library<'a> {
        Library {
            files,
            hash: content_hash(files),
        }
    }

    /// The directory under `parent` for these files. The version keeps it
    /// readable; the hash keeps apart two builds of the same version whose
    /// files differ (two checkouts, a change without a version bump, a CI
    /// build and a development build), which would otherwise overwrite each
    /// other's files under running workers.
    fn dir_in(&self, parent: &Path, suffix: &str) -> PathBuf {
        parent.join(format!(
            "hearth-{}-{:016x}{suffix}",
            env!("CARGO_PKG_VERSION"),
            self.hash
        ))
    }

    /// Writes the files (those not already there) to their directory under
    /// `parent` and returns it.
    fn extract_in(&self, parent: &Path, suffix: &str) -> io::Result<PathBuf> {
        let dir = self.dir_in(parent, suffix);
        ensure_private_dir(&dir)?;
        write_files(&dir, self.files)?;
        Ok(dir)
    }
}

/// FNV-1a (64 bits) of every file's path and content, each path ended by a
/// NUL and each content preceded by its length, so that no two different
/// sets of files are one byte stream. A `const fn`, evaluated at compile
/// time for the built-in files: it tells builds apart, it is no defence
/// against anyone (the directory is private to the user).
const fn content_hash(files: &[(&str, &str)]) -> u64 {
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    const fn feed(mut hash: u64, bytes: &[u8]) -> u64 {
        let mut i = 0;
        while i < bytes.len() {
            hash ^= bytes[i] as u64;
            hash = hash.wrapping_mul(PRIME);
            i += 1;
        }
        hash
    }
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < files.len() {
        let (path, content) = files[i];
        hash = feed(hash, path.as_bytes());
        hash = feed(hash, &[0]);
        hash = feed(hash, &(content.len() as u64).to_le_bytes());
        hash = feed(hash, content.as_bytes());
        i += 1;
    }
    hash
}

/// Writes the built-in files (if not already there) and returns the
/// directory holding `php/` and `demo/`.
pub fn extract() -> io::Result<PathBuf> {
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(runtime) if Path::new(&runtime).is_dir() => {
            BUILT_IN.extract_in(Path::new(&runtime), "")
        }
        _ => {
            let uid = rustix::process::getuid().as_raw();
            BUILT_IN.extract_in(&std::env::temp_dir(), &format!("-{uid}"))
        }
    }
}

/// A private copy of the built-in files owned by `uid`/`gid`, for workers
/// that run as another user than Hearth (`--user`). It is removed when the
/// returned directory is dropped.
pub fn extract_for(uid: u32, gid: u32) -> io::Result<tempfile::TempDir> {
    let dir = tempfile::Builder::new()
        .prefix("hearth-lib-")
        .permissions(fs::Permissions::from_mode(0o700))
        .tempdir()?;
    write_files(dir.path(), FILES)?;
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

fn write_files(dir: &Path, files: &[(&str, &str)]) -> io::Result<()> {
    for (relative, contents) in files {
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
    use super::{Library, FILES};
    use std::fs;
    use std::io;
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;

    const OLD: &[(&str, &str)] = &[
        ("php/autoload.php", "<?php // old\n"),
        ("php/src/Worker.php", "<?php // the same\n"),
    ];
    const NEW: &[(&str, &str)] = &[
        ("php/autoload.php", "<?php // new\n"),
        ("php/src/Worker.php", "<?php // the same\n"),
    ];

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).expect("metadata").permissions().mode() & 0o777
    }

    /// Two builds of the same version whose PHP library differs (two
    /// checkouts, a change without a version bump) extract to two
    /// directories: neither overwrites the files the other's workers load.
    /// The directory used to be named after the version alone.
    #[test]
    fn different_contents_extract_to_different_directories() {
        let parent = tempfile::tempdir().expect("tempdir");
        let old = Library::new(OLD)
            .extract_in(parent.path(), "-1")
            .expect("old");
        let new = Library::new(NEW)
            .extract_in(parent.path(), "-1")
            .expect("new");
        assert_ne!(old, new);
        let read = |dir: &Path| fs::read_to_string(dir.join("php/autoload.php")).expect("read");
        assert_eq!(read(&old), "<?php // old\n");
        assert_eq!(read(&new), "<?php // new\n");

        // The same files again: the same directory, as it was.
        let again = Library::new(OLD)
            .extract_in(parent.path(), "-1")
            .expect("again");
        assert_eq!(again, old);
        assert_eq!(read(&old), "<?php // old\n");
        assert_eq!(read(&new), "<?php // new\n");
    }

    /// The files are executed by PHP: only their user may read or write
    /// them.
    #[test]
    fn the_directory_is_private() {
        let parent = tempfile::tempdir().expect("tempdir");
        let dir = Library::new(OLD)
            .extract_in(parent.path(), "")
            .expect("extract");
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join("php/src")), 0o700);
    }

    #[test]
    fn a_directory_others_may_write_to_is_refused() {
        let parent = tempfile::tempdir().expect("tempdir");
        let library = Library::new(OLD);
        let dir = library.dir_in(parent.path(), "");
        fs::create_dir(&dir).expect("mkdir");
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).expect("chmod");
        let err = library.extract_in(parent.path(), "").expect_err("refused");
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
        assert!(!dir.join("php").exists(), "nothing was written");
    }

    #[test]
    fn a_directory_of_another_user_is_refused() {
        let parent = tempfile::tempdir().expect("tempdir");
        let library = Library::new(OLD);
        let dir = library.dir_in(parent.path(), "");
        fs::create_dir(&dir).expect("mkdir");
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).expect("chmod");
        let me = rustix::process::getuid().as_raw();
        let other = if me == 65534 { 65533 } else { 65534 };
        if std::os::unix::fs::chown(&dir, Some(other), None).is_err() {
            // Without root no directory can be given away; the root
            // directory, root's, stands in.
            assert_ne!(me, 0);
            let err = super::ensure_private_dir(Path::new("/")).expect_err("refused");
            assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
            return;
        }
        let err = library.extract_in(parent.path(), "").expect_err("refused");
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
    }

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
