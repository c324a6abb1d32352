//! The HTTP front of Hearth: HTTP/1.1, and over TLS (or as h2c) HTTP/2.
//!
//! Each request is read whole (bounded by the body limit; multipart forms
//! parsed and their uploads spooled to disk, other bodies past a small
//! buffer spooled to a file the worker reads), turned into the `$_SERVER`
//! that nginx and php-fpm would give it, handed to one warm worker from the
//! pool, and the worker's response is sent back: whole when the app
//! produced it at once, streamed when the app flushed along the way.
//!
//! Where the app lives (the worker script, the document root) is the
//! pool's to say, resolved again at every reload: a request's `SCRIPT_*`
//! and `DOCUMENT_ROOT` are those of the release its worker runs. With a
//! document root, GET and HEAD requests for files under it are answered
//! from disk first (`static_files`; sent by the kernel with sendfile(2) on
//! plain HTTP/1.x connections, `file_body`), and compressible responses are
//! gzip- or brotli-encoded for clients that accept it (`compress`).
//!
//! # Modules
//!
//! From the accept loop down; each imports only modules below it.
//!
//! - `server`: the accept loop, HTTP/1.1 connections, and the handler
//!   that wires a request to a static file or a worker.
//! - `h2`: HTTP/2 connections, closed when idle or on shutdown.
//! - `protocol`: what a new connection speaks (TLS, ALPN, h2c preface).
//! - `routes`: several pools behind one server (workers, a classic
//!   site, a mixed site), each request to the pool its host and path
//!   pick.
//! - `mixed`: mixed sites' requests: to the workers (the front
//!   controller) or answered as classic mode answers them.
//! - `classic`: classic mode's requests: routed as nginx would, then a
//!   static file, a redirect, an error page or a php-fpm child.
//! - `request`: a request as a worker receives it: body, `$_SERVER` (with
//!   the script of the worker's release), frames.
//! - `xdebug`: debug mode's Xdebug triggers, found in a request.
//! - `form`: multipart forms parsed as PHP would, within PHP's limits.
//! - `body`: request bodies received whole, in memory within a budget or
//!   in files, whatever frames they came in; the HTTP/2 body timeout.
//! - `offload`: `X-Sendfile` and `X-Accel-Redirect` responses, answered
//!   with a file under the configured roots once the worker is free.
//! - `static_files`: files from the document root, served as nginx would.
//! - `compress`: gzip and brotli for clients that accept them.
//! - `response`: the worker's response frames turned into an HTTP response.
//! - `file_body`: a file (or a range of it) as a response body: sent by
//!   the kernel (sendfile) on plain HTTP/1.x connections, else read.
//! - `stall`: the send timeout: stalled writes and stalled HTTP/2 streams.
//! - `sendbuf`: what a response holds while its client takes it: memory,
//!   then a temporary file, within budgets shared by all responses.
//! - `config`: [`ServeConfig`], the settings and their defaults.
//! - `observe`: a response body wrapper that records each request.
//! - `admin`: `/metrics`, `/healthz`, `/readyz` and the dashboard on an
//!   address of their own.
//! - `metrics`: Prometheus counters and histograms, and the pool's state.
//! - `dashboard`: what the dashboard keeps of the last ten minutes (the
//!   second's latencies and status classes, the slowest requests).
//! - `access_log`: one line per request, written by a thread of its own.
//! - `cgi`: the `$_SERVER` variables, as nginx and php-fpm would set them.
//! - `guard`: the HTTP/1.1 socket as hyper sees it: strict framing,
//!   timeouts, file bodies the kernel sends past hyper.
//! - `fuzzing`: the framer opened to the fuzz target (feature `fuzzing`).
//! - `framing`: where each HTTP/1.1 request begins and ends, without I/O.
//! - `target`: the request target as nginx takes it.
//! - `listener`: the listening socket, TCP or unix, and the connections
//!   it accepts.
//! - `zero_copy`: sendfile(2) onto a plain socket.
//! - `tls`: the certificate and the rustls settings.
//! - `throttle`: log lines a client can cause, at most one per interval.

mod access_log;
pub mod admin;
mod body;
mod cgi;
mod classic;
mod compress;
mod config;
pub mod dashboard;
mod file_body;
mod form;
mod framing;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod guard;
mod h2;
mod listener;
mod metrics;
mod mixed;
mod observe;
mod offload;
mod protocol;
mod request;
mod response;
mod routes;
mod sendbuf;
mod server;
mod stall;
mod static_files;
mod target;
mod throttle;
mod tls;
mod xdebug;
mod zero_copy;

pub use access_log::{AccessLog, AccessLogFormat};
pub use cgi::{parse_trusted_proxy, Script};
pub use classic::ClassicSite;
pub use config::{SendfileRoot, ServeConfig};
pub use listener::{ListenAddr, Listener};
pub use metrics::{counter as encode_counter, gauge as encode_gauge};
pub use metrics::{Metrics, PoolReport, PoolSnapshot, Sizing, POOL_NAME};
pub use mixed::{Area, MixedSite};
pub use observe::{Observed, Observer};
pub use response::{ReaderBody, ResponseBody, StreamError};
pub use routes::{PoolRoute, Pools, Target};
pub use server::{serve, serve_classic, serve_mixed, serve_pools};
pub use tls::{TlsConfig, TlsError};

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    /// The module map in the crate doc is in order: a module imports only
    /// modules listed below it, so no two modules depend on each other.
    #[test]
    fn modules_import_only_modules_below_them_in_the_map() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let lib = std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs");
        let map: Vec<&str> = lib
            .lines()
            .filter_map(|l| l.strip_prefix("//! - `"))
            .filter_map(|l| l.split('`').next())
            .collect();
        let mut files = BTreeSet::new();
        for entry in std::fs::read_dir(&src).expect("src") {
            let name = entry.expect("entry").file_name();
            let name = name.to_str().expect("file name");
            if let Some(module) = name.strip_suffix(".rs").filter(|m| *m != "lib") {
                files.insert(module.to_owned());
            }
        }
        let listed: BTreeSet<String> = map.iter().map(|m| m.to_string()).collect();
        assert_eq!(listed, files, "the module map lists every module once");
        for (at, module) in map.iter().enumerate() {
            let text = std::fs::read_to_string(src.join(format!("{module}.rs"))).expect("module");
            let code: String = text
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join("\n");
            for used in imported_modules(&code) {
                if let Some(to) = map.iter().position(|m| *m == used) {
                    assert!(to >= at, "{module} imports {used}, listed above it");
                }
            }
        }
    }

    /// The first path segment after each `crate::`, inside braces too.
    fn imported_modules(code: &str) -> Vec<String> {
        let ident = |s: &str| -> String {
            s.trim_start()
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect()
        };
        let mut found = Vec::new();
        for (i, _) in code.match_indices("crate::") {
            let rest = &code[i + "crate::".len()..];
            let Some(list) = rest.strip_prefix('{') else {
                found.push(ident(rest));
                continue;
            };
            // Top-level items of the brace list.
            let (mut depth, mut start) = (0usize, 0);
            for (j, c) in list.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        found.push(ident(&list[start..j]));
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        found.push(ident(&list[start..j]));
                        start = j + 1;
                    }
                    _ => {}
                }
            }
        }
        found
    }
}
