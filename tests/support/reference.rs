//! nginx + php-fpm with Debian's defaults, the reference for PHP behaviour,
//! started and stopped by bench/reference/nginx-fpm.sh on a free port.

#![allow(dead_code)]

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::Command;

use super::support;

/// A running nginx + php-fpm, stopped when dropped.
pub struct Reference {
    state: tempfile::TempDir,
    pub addr: SocketAddr,
}

impl Reference {
    /// Serves `docroot` with `script` (under it) as the front controller.
    pub fn start(docroot: &Path, script: &str) -> Reference {
        Reference::start_with(docroot, script, &[])
    }

    /// With `env` set for bench/reference/nginx-fpm.sh (its knobs).
    pub fn start_with(docroot: &Path, script: &str, env: &[(&str, &str)]) -> Reference {
        let state = support::tempdir();
        let port = TcpListener::bind("127.0.0.1:0")
            .expect("free port")
            .local_addr()
            .expect("addr")
            .port();
        let out = Command::new(support::root().join("bench/reference/nginx-fpm.sh"))
            .arg("start")
            .arg(state.path())
            .arg(docroot)
            .arg(script)
            .arg(port.to_string())
            .arg("2")
            .envs(env.iter().copied())
            .output()
            .expect("run bench/reference/nginx-fpm.sh (needs nginx and php8.2-fpm)");
        assert!(
            out.status.success(),
            "nginx + php-fpm did not start:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Reference {
            state,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
        }
    }
}

impl Drop for Reference {
    fn drop(&mut self) {
        let _ = Command::new(support::root().join("bench/reference/nginx-fpm.sh"))
            .arg("stop")
            .arg(self.state.path())
            .status();
    }
}
