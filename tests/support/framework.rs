//! What the framework examples' tests (tests/symfony.rs, tests/laravel.rs)
//! share: a copy of an example app to serve, a browser that keeps its
//! cookies, and form encoding.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::support::{self, CookieJar, Req, Response, Server};

/// Headers that describe the transport, not the app (as in
/// tests/differential.rs): nginx sends chunked bodies with its `Server`,
/// Hearth a Content-Length.
pub const TRANSPORT_HEADERS: &[&str] = &[
    "date",
    "server",
    "connection",
    "transfer-encoding",
    "content-length",
    "keep-alive",
];

/// A copy of examples/NAME in a directory of its own (what the app writes,
/// its cache, its database, is new for each server), with Hearth's PHP
/// library where the example's vendor/autoload.php finds it (../../php
/// from the app).
pub struct ExampleCopy {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
}

impl ExampleCopy {
    pub fn new(name: &str) -> ExampleCopy {
        let dir = support::reachable_tempdir();
        let root = dir.path().join("examples").join(name);
        std::fs::create_dir_all(dir.path().join("examples")).expect("mkdir");
        support::copy_tree(&support::root().join("examples").join(name), &root);
        std::os::unix::fs::symlink(support::root().join("php"), dir.path().join("php"))
            .expect("symlink php/");
        ExampleCopy { _dir: dir, root }
    }

    /// `hearth serve --config hearth.toml` on a free port, with one worker
    /// (every request meets the state the previous ones left) and `extra`.
    pub fn hearth(&self, extra: &[&str]) -> Server {
        let mut args: Vec<String> = [
            "serve",
            "--config",
            self.root.join("hearth.toml").to_str().expect("path"),
            "--listen",
            "127.0.0.1:0",
            "--workers",
            "1",
            "--php",
            &support::php_binary(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if let Ok(choice) = std::env::var("HEARTH_TEST_PHP_EXTENSION") {
            args.extend(["--php-extension".to_owned(), choice]);
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        let server = Server::spawn_args(&args);
        server.wait_until_ready();
        server
    }
}

/// One browser: requests with its cookies, each response kept.
pub struct Browser {
    addr: SocketAddr,
    pub jar: CookieJar,
    pub seen: Vec<(String, Response)>,
}

impl Browser {
    pub fn new(addr: SocketAddr) -> Browser {
        Browser {
            addr,
            jar: CookieJar::default(),
            seen: Vec::new(),
        }
    }

    pub fn send(&mut self, what: &str, req: Req) -> Response {
        let mut req = req;
        if !self.jar.header().is_empty() {
            req = req.header("Cookie", &self.jar.header());
        }
        let response = req.send(self.addr);
        self.jar.store(&response);
        self.seen.push((what.to_owned(), response.clone()));
        response
    }

    pub fn get(&mut self, what: &str, path: &str) -> Response {
        self.send(what, Req::new("GET", path))
    }

    pub fn post(&mut self, what: &str, path: &str, form: &[(&str, &str)]) -> Response {
        self.send(what, Req::new("POST", path).form(&urlencode(form)))
    }
}

/// A form body, application/x-www-form-urlencoded.
pub fn urlencode(form: &[(&str, &str)]) -> String {
    form.iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            b' ' => "+".to_owned(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The value of the hidden field `name` in a page (a CSRF token).
pub fn hidden_value(page: &Response, name: &str) -> String {
    let text = page.text();
    let needle = format!("name=\"{name}\" value=\"");
    let start = text
        .find(&needle)
        .unwrap_or_else(|| panic!("no {name} in the page: {text}"))
        + needle.len();
    let end = start + text[start..].find('"').expect("end of the token");
    text[start..end].to_owned()
}
