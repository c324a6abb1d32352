//! How the HTTP front behaves: its limits, timeouts, protocols and
//! features, and their defaults.

use std::path::PathBuf;
use std::time::Duration;

use crate::observe::Observer;
use crate::tls::TlsConfig;

/// How the HTTP front behaves.
///
/// Where the app lives is the pool's to say ([`Pool::paths`]): static files
/// come from its document root, if it has one (a GET or HEAD for a file
/// under it is answered from disk, everything else goes to PHP), and a
/// request's `SCRIPT_*` and `DOCUMENT_ROOT` are those of the release its
/// worker runs. Both follow reloads.
///
/// [`Pool::paths`]: hearth_pool::Pool::paths
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// `SERVER_NAME`.
    pub server_name: String,
    /// Proxies whose `X-Forwarded-For` and `X-Forwarded-Proto` are believed:
    /// a request from one of them gets the client's address as
    /// `REMOTE_ADDR`, and `HTTPS=on` when the client used https.
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// Every peer of a unix socket is a trusted proxy (`--trusted-proxy
    /// unix:`, nginx's `set_real_ip_from unix:`).
    pub trust_unix_peers: bool,
    /// Compress responses on the fly (gzip, brotli) for clients that
    /// accept it: static files, and whole PHP responses.
    pub compression: bool,
    /// Send files (static files, `X-Sendfile` and `X-Accel-Redirect`
    /// responses) with sendfile(2) on plain HTTP/1.x connections, as
    /// nginx's `sendfile on`; off, they are read 64 KiB at a time.
    pub sendfile: bool,
    /// `SERVER_SOFTWARE`.
    pub server_software: String,
    /// Largest request body accepted; larger ones get 413 before any worker
    /// is involved.
    pub max_body_size: u64,
    /// Raw request bodies up to this size are kept in memory and sent to
    /// the worker in frames; larger ones are spooled to a temporary file
    /// that the worker reads (nginx's `client_body_buffer_size`).
    pub body_buffer_size: usize,
    /// Bytes of raw request bodies held in memory across all connections,
    /// at most; beyond it bodies are spooled to files however small. With
    /// `body_buffer_size`, what bounds the memory request bodies take.
    pub body_memory: usize,
    /// Longest request line (without its CRLF); a longer one gets 414.
    pub max_request_line: usize,
    /// Largest header section (all header lines, CRLFs included); a larger
    /// one gets 431.
    pub max_header_size: usize,
    /// Most header lines in a request; more get 431.
    pub max_headers: usize,
    /// How long a client has to send a whole request head, from its first
    /// byte (on a new connection, from the accept): 408 when a head has
    /// started, a quiet close when nothing came. A slowloris cannot hold a
    /// connection longer.
    pub header_timeout: Duration,
    /// Longest pause while a request body arrives: 408.
    pub body_timeout: Duration,
    /// How long a connection may stay idle between requests before it is
    /// closed. Zero turns keep-alive off.
    pub keep_alive_timeout: Duration,
    /// Most connections open at once. Beyond it Hearth stops accepting:
    /// new connections wait in the listen backlog until one closes.
    pub max_connections: usize,
    /// Request bodies travel to workers in frames of at most this size.
    pub body_chunk: usize,
    /// Seconds announced in `Retry-After` when no worker is available.
    pub retry_after: u32,
    /// After shutdown is triggered, how long in-flight requests have to
    /// complete before their connections are dropped.
    pub grace_period: Duration,
    /// A hard limit on how long a worker may take over a request, from the
    /// moment it has it to the end of the response (read into Hearth's
    /// buffers: a slow client is `send_timeout`'s business, unless the
    /// buffers are full): past it the worker is stopped (SIGTERM, then
    /// SIGKILL) and replaced, and the client gets 504 (or, mid-stream, a
    /// cut connection). None: no limit.
    pub request_timeout: Option<Duration>,
    /// Serve HTTPS with this certificate: HTTP/2 or HTTP/1.1, as the
    /// client chooses by ALPN. None: plain HTTP.
    pub tls: Option<TlsConfig>,
    /// On plain HTTP, also serve HTTP/2 to clients that open with its
    /// preface (h2c with prior knowledge).
    pub h2c: bool,
    /// Most requests an HTTP/2 connection may have in flight at once
    /// (nginx's `http2_max_concurrent_streams`).
    pub max_concurrent_streams: u32,
    /// Most requests of one connection that may wait for or hold a worker
    /// at once; the others wait their turn on the connection, so that one
    /// client's backlog never stands in the pool's line ahead of other
    /// clients. None: as many as the pool has workers.
    pub connection_workers: Option<usize>,
    /// Longest time a response may go without the client taking any of it
    /// (nginx's `send_timeout`): then the response is cut (its HTTP/2
    /// stream reset, or its connection closed).
    pub send_timeout: Duration,
    /// Bytes of a response each request may hold in memory while its
    /// client takes them (nginx's `fastcgi_buffers`); more goes to the
    /// shared `response_memory`, then to a temporary file.
    pub response_buffer_size: usize,
    /// Bytes of responses held in memory across all connections beyond
    /// each one's `response_buffer_size` (at most 4 MiB each).
    pub response_memory: u64,
    /// Bytes of responses held in temporary files across all connections
    /// (nginx's `fastcgi_max_temp_file_size`, which is per request). Past
    /// it, a worker waits for its client, within `request_timeout`. 0:
    /// responses never go to disk.
    pub max_response_spool: u64,
    /// Where a worker's `X-Sendfile` and `X-Accel-Redirect` responses may
    /// take files from (see docs/file-offload.md). Empty: offload is off,
    /// and such a response is answered with 500.
    pub sendfile_roots: Vec<SendfileRoot>,
    /// Metrics and the access log, when either is on.
    pub observer: Observer,
}

/// A directory the file offload serves from (`--sendfile-root`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendfileRoot {
    /// The URI prefix an `X-Accel-Redirect` names this directory by
    /// (starts and ends with `/`, as an nginx `location` with `alias`).
    /// None: only `X-Sendfile` paths under `dir`.
    pub prefix: Option<String>,
    /// The directory as configured (an absolute path): `X-Sendfile`
    /// paths may name it so, and `X-Accel-Redirect` URIs map onto it.
    /// Its symlinks are resolved again for each file sent, so that a
    /// deploy that switches one (`current -> releases/42`) is followed.
    pub dir: PathBuf,
}

impl Default for ServeConfig {
    fn default() -> ServeConfig {
        ServeConfig::new()
    }
}

impl ServeConfig {
    pub fn new() -> ServeConfig {
        ServeConfig {
            server_name: "localhost".into(),
            trusted_proxies: Vec::new(),
            trust_unix_peers: false,
            compression: true,
            sendfile: true,
            server_software: concat!("hearth/", env!("CARGO_PKG_VERSION")).into(),
            max_body_size: 8 << 20,
            body_buffer_size: 64 << 10,
            body_memory: 64 << 20,
            max_request_line: 8 << 10,
            max_header_size: 32 << 10,
            max_headers: 100,
            header_timeout: Duration::from_secs(60),
            body_timeout: Duration::from_secs(60),
            keep_alive_timeout: Duration::from_secs(75),
            max_connections: 10_000,
            body_chunk: 1 << 20,
            retry_after: 1,
            grace_period: Duration::from_secs(30),
            request_timeout: Some(Duration::from_secs(60)),
            tls: None,
            h2c: false,
            max_concurrent_streams: 128,
            connection_workers: None,
            send_timeout: Duration::from_secs(60),
            response_buffer_size: 32 << 10,
            response_memory: 64 << 20,
            max_response_spool: 1 << 30,
            sendfile_roots: Vec::new(),
            observer: Observer::default(),
        }
    }
}
