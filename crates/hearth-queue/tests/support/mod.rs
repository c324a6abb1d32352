//! A real redis-server for the tests: started on a free port in a
//! temporary directory, with AOF on and RDB snapshots off, killed on drop.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct RedisServer {
    pub port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().expect("local addr").port()
}

impl RedisServer {
    pub fn start() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut s = RedisServer {
            port: free_port(),
            dir,
            child: None,
        };
        s.spawn();
        s
    }

    pub fn dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    fn spawn(&mut self) {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .arg("--dir")
            .arg(self.dir.path())
            // `appendfsync always`: every write reaches the file before its
            // reply; with everysec, a write waiting for a slow fsync is lost
            // to the SIGKILL of a restart test.
            .args([
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--daemonize",
                "no",
            ])
            .arg("--logfile")
            .arg(self.dir.path().join("redis.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server is installed");
        self.child = Some(child);
        self.wait_ready();
    }

    /// Waits until the server answers PING with PONG (not LOADING).
    fn wait_ready(&self) {
        let give_up = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) {
                let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
                let mut buf = [0u8; 64];
                if s.write_all(b"PING\r\n").is_ok() {
                    if let Ok(n) = s.read(&mut buf) {
                        if buf[..n].starts_with(b"+PONG") {
                            return;
                        }
                    }
                }
            }
            assert!(
                Instant::now() < give_up,
                "redis-server on port {} did not start: {}",
                self.port,
                std::fs::read_to_string(self.dir.path().join("redis.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts again on the same port and directory (AOF reloaded).
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}
