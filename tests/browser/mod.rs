//! A real headless Chromium, driven over the WebDriver protocol through
//! Debian's `chromedriver` (packages `chromium` and `chromium-driver`),
//! started on a free port and stopped when dropped.
//!
//! The protocol is JSON over HTTP; the few commands used here are written
//! out with the tests' own HTTP helper rather than a WebDriver crate (the
//! maintained ones, fantoccini and thirtyfour, bring a second HTTP stack
//! and an async runtime for five requests).
#![allow(dead_code)]

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support;

/// The key WebDriver names element references with.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A browser session.
pub struct Browser {
    driver: Child,
    addr: SocketAddr,
    session: String,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn call(addr: SocketAddr, method: &str, path: &str, body: Option<&Value>) -> Value {
    let body = body.map(Value::to_string).unwrap_or_default();
    let raw = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let response = support::request(addr, raw.as_bytes());
    let value: Value = serde_json::from_slice(&response.body).unwrap_or_else(|e| {
        panic!(
            "chromedriver answered {method} {path} with {}: {e}: {}",
            response.status,
            response.text()
        )
    });
    if response.status != 200 {
        panic!("chromedriver: {method} {path} failed: {value}");
    }
    value["value"].clone()
}

impl Browser {
    /// Starts chromedriver and a headless Chromium `width` pixels wide.
    pub fn start(width: u32, height: u32) -> Browser {
        let port = free_port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver (Debian's chromium-driver package; make test installs it)");
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let start = Instant::now();
        while std::net::TcpStream::connect(addr).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "chromedriver did not listen within 20 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut browser = Browser {
            driver,
            addr,
            session: String::new(),
        };
        let session = call(
            addr,
            "POST",
            "/session",
            Some(&json!({"capabilities": {"alwaysMatch": {
                "browserName": "chrome",
                "goog:chromeOptions": {
                    "binary": "/usr/bin/chromium",
                    "args": [
                        "--headless=new", "--no-sandbox", "--disable-gpu",
                        "--disable-dev-shm-usage", "--hide-scrollbars",
                        format!("--window-size={width},{height}"),
                    ],
                },
            }}})),
        );
        browser.session = session["sessionId"]
            .as_str()
            .expect("a session id")
            .to_owned();
        browser
    }

    fn path(&self, rest: &str) -> String {
        format!("/session/{}{rest}", self.session)
    }

    pub fn open(&self, url: &str) {
        call(
            self.addr,
            "POST",
            &self.path("/url"),
            Some(&json!({"url": url})),
        );
    }

    /// Runs `script` (a function body; `arguments` holds `args`) in the
    /// page and returns what it returns.
    pub fn run(&self, script: &str, args: &[Value]) -> Value {
        call(
            self.addr,
            "POST",
            &self.path("/execute/sync"),
            Some(&json!({"script": script, "args": args})),
        )
    }

    /// Waits up to `within` for `script` to return something other than
    /// null or false, and returns it.
    pub fn wait_for(&self, what: &str, within: Duration, script: &str) -> Value {
        let start = Instant::now();
        loop {
            let value = self.run(script, &[]);
            if !value.is_null() && value != Value::Bool(false) {
                return value;
            }
            assert!(start.elapsed() < within, "{what}: not within {within:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn element(&self, css: &str) -> String {
        let found = call(
            self.addr,
            "POST",
            &self.path("/element"),
            Some(&json!({"using": "css selector", "value": css})),
        );
        found[ELEMENT].as_str().expect("an element").to_owned()
    }

    /// Clicks the element `css` selects, as a user would.
    pub fn click(&self, css: &str) {
        let id = self.element(css);
        call(
            self.addr,
            "POST",
            &self.path(&format!("/element/{id}/click")),
            Some(&json!({})),
        );
    }

    /// Types `text` into the element `css` selects.
    pub fn type_into(&self, css: &str, text: &str) {
        let id = self.element(css);
        call(
            self.addr,
            "POST",
            &self.path(&format!("/element/{id}/value")),
            Some(&json!({"text": text})),
        );
    }

    /// Resizes the window (a phone's width, say).
    pub fn resize(&self, width: u32, height: u32) {
        call(
            self.addr,
            "POST",
            &self.path("/window/rect"),
            Some(&json!({"width": width, "height": height})),
        );
    }

    /// Accepts the `confirm()` dialog the page shows.
    pub fn accept_dialog(&self) {
        call(
            self.addr,
            "POST",
            &self.path("/alert/accept"),
            Some(&json!({})),
        );
    }

    /// A PNG of the whole window.
    pub fn screenshot(&self) -> Vec<u8> {
        use base64::Engine as _;
        let shot = call(self.addr, "GET", &self.path("/screenshot"), None);
        base64::engine::general_purpose::STANDARD
            .decode(shot.as_str().expect("base64"))
            .expect("a PNG")
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let raw = format!(
                "DELETE {} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
                self.path(""),
                self.addr
            );
            let _ = std::panic::catch_unwind(|| support::request(self.addr, raw.as_bytes()));
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Checks that `png` is a picture with something drawn on it: decoded,
/// of the size asked for, and with many colours (a blank or one-colour
/// page has few). Returns how many distinct colours it has.
pub fn check_not_blank(png: &[u8], min_width: u32) -> usize {
    let decoder = png::Decoder::new(std::io::Cursor::new(png));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut pixels = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut pixels).expect("a frame");
    assert!(info.width >= min_width, "{} px wide", info.width);
    let step = info.color_type.samples();
    let colours: std::collections::HashSet<&[u8]> =
        pixels[..info.buffer_size()].chunks(step).collect();
    assert!(
        colours.len() >= 16,
        "the screenshot has only {} colours: blank",
        colours.len()
    );
    colours.len()
}
