//! The `$_SERVER` a request gets: what nginx passes to php-fpm with
//! Debian's `snippets/fastcgi-php.conf` (and so `fastcgi.conf`), for a
//! front controller, plus what PHP itself adds.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::BytesMut;
use hearth_proto::php::PhpArrayWriter;
use http::request::Parts;
use http::Version;

use crate::target::{self, RawTarget};

/// Where the worker script sits, as a web server would describe it.
#[derive(Debug, Clone)]
pub struct Script {
    /// `SCRIPT_FILENAME`: the script's absolute path.
    pub filename: String,
    /// `SCRIPT_NAME`, `DOCUMENT_URI`, `PHP_SELF`: its path under the
    /// document root, starting with `/`.
    pub name: String,
    /// `DOCUMENT_ROOT`.
    pub document_root: String,
}

impl Script {
    /// The script as a front controller, as nginx's
    /// `try_files $uri /index.php$is_args$args` presents it: `DOCUMENT_ROOT`
    /// is the document root (without one, the script's directory), and
    /// `SCRIPT_NAME` the script's path under it. A script outside the
    /// document root (a worker script next to `public/`) keeps its real
    /// `SCRIPT_FILENAME` and is named `/` and its file name, so that
    /// frameworks that compare the two find the same base name.
    pub fn describe(script: &Path, document_root: Option<&Path>) -> Script {
        let root = document_root.unwrap_or(script.parent().unwrap_or(Path::new("/")));
        let name = match script.strip_prefix(root) {
            Ok(relative) => relative.to_string_lossy().into_owned(),
            Err(_) => script
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
        };
        Script {
            filename: script.to_string_lossy().into_owned(),
            name: format!("/{name}"),
            document_root: root.to_string_lossy().into_owned(),
        }
    }
}

/// Per-connection values, computed once when the connection is accepted.
#[derive(Debug)]
pub(crate) struct Connection {
    remote_addr: String,
    remote_port: String,
    server_addr: String,
    server_port: String,
    https: bool,
    /// The peer is a trusted proxy: its `X-Forwarded-*` headers count.
    pub trusted: bool,
}

impl Connection {
    pub fn new(remote: SocketAddr, local: SocketAddr, https: bool) -> Connection {
        Connection {
            remote_addr: ip_text(&remote),
            remote_port: remote.port().to_string(),
            server_addr: ip_text(&local),
            server_port: local.port().to_string(),
            https,
            trusted: false,
        }
    }

    /// A connection accepted on the unix socket at `path`: what nginx
    /// gives for a `listen unix:PATH` server, `REMOTE_ADDR=unix:`,
    /// `SERVER_ADDR=unix:PATH`, and no ports.
    pub fn unix(path: &std::path::Path, https: bool) -> Connection {
        Connection {
            remote_addr: "unix:".to_owned(),
            remote_port: String::new(),
            server_addr: format!("unix:{}", path.display()),
            server_port: String::new(),
            https,
            trusted: false,
        }
    }

    /// The scheme and the port the client connected to, as nginx puts
    /// them in a redirect it makes (`absolute_redirect on`); no port over
    /// a unix socket.
    pub fn scheme_and_port(&self) -> (&'static str, &str) {
        (if self.https { "https" } else { "http" }, &self.server_port)
    }

    /// The client's IP address and port, as `$_SERVER` has them.
    pub fn remote(&self) -> (&str, &str) {
        (&self.remote_addr, &self.remote_port)
    }
}

fn ip_text(addr: &SocketAddr) -> String {
    match addr {
        SocketAddr::V4(a) => a.ip().to_string(),
        SocketAddr::V6(a) => match a.ip().to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => a.ip().to_string(),
        },
    }
}

/// Server-wide values.
#[derive(Debug, Clone)]
pub(crate) struct ServerInfo {
    pub server_name: String,
    pub server_software: String,
    pub trusted_proxies: Vec<ipnet::IpNet>,
}

/// A trusted proxy as configured: a network (`10.0.0.0/8`, `fd00::/8`) or
/// one address; None for `unix:` (nginx's `set_real_ip_from unix:`),
/// which trusts every peer of a unix socket.
pub fn parse_trusted_proxy(text: &str) -> Result<Option<ipnet::IpNet>, String> {
    let text = text.trim();
    if text == "unix:" {
        return Ok(None);
    }
    text.parse::<ipnet::IpNet>()
        .or_else(|_| text.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
        .map(Some)
        .map_err(|_| format!("{text:?} is not an IP address, a network like 10.0.0.0/8, or unix:"))
}

/// Whether `ip` (an IPv4-mapped IPv6 address counts as IPv4) is in one of
/// the trusted networks.
pub(crate) fn is_trusted(trusted: &[ipnet::IpNet], ip: std::net::IpAddr) -> bool {
    let ip = match ip {
        std::net::IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map_or(std::net::IpAddr::V6(v6), std::net::IpAddr::V4),
        v4 => v4,
    };
    trusted.iter().any(|net| net.contains(&ip))
}

/// The client's address according to a trusted proxy: the right-most
/// `X-Forwarded-For` entry that is not itself a trusted proxy (as nginx's
/// `real_ip_recursive on`); the left-most one when all are trusted. None
/// without a usable header.
fn forwarded_client(parts: &Parts, trusted: &[ipnet::IpNet]) -> Option<String> {
    let mut leftmost = None;
    let hops = parts
        .headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect::<Vec<_>>();
    for hop in hops.iter().rev().flat_map(|v| v.rsplit(',')) {
        let hop = hop.trim();
        // "1.2.3.4", "1.2.3.4:5678", "::1", "[::1]:5678"
        let ip = hop
            .parse::<std::net::IpAddr>()
            .ok()
            .or_else(|| hop.parse::<SocketAddr>().ok().map(|a| a.ip()))?;
        if !is_trusted(trusted, ip) {
            return Some(ip.to_string());
        }
        leftmost = Some(ip.to_string());
    }
    leftmost
}

/// Whether a trusted proxy says the client used https (the last
/// `X-Forwarded-Proto` value, the one the nearest proxy set).
fn forwarded_https(parts: &Parts) -> Option<bool> {
    let value = parts
        .headers
        .get_all("x-forwarded-proto")
        .iter()
        .next_back()?;
    let proto = value.to_str().ok()?.rsplit(',').next()?.trim();
    Some(proto.eq_ignore_ascii_case("https"))
}

/// Entries `write_server_vars` writes besides the `HTTP_*` ones.
const FIXED_VARS: usize = NGINX_VARS + 3;

/// Entries [`nginx_vars`] writes besides `HTTPS`, `HTTP_HOST` from the
/// authority and the `HTTP_*` ones.
const NGINX_VARS: usize = 21;

/// Where the script of a request sits, as the FastCGI path parameters
/// say it (all bytes, as nginx's variables are).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ScriptVars<'a> {
    /// `PATH_INFO`.
    pub path_info: &'a [u8],
    /// `SCRIPT_FILENAME`.
    pub script_filename: &'a [u8],
    /// `SCRIPT_NAME`.
    pub script_name: &'a [u8],
    /// `DOCUMENT_URI`.
    pub document_uri: &'a [u8],
    /// `DOCUMENT_ROOT`.
    pub document_root: &'a [u8],
}

impl<'a> ScriptVars<'a> {
    /// A worker script as a front controller: no path info, the script's
    /// name as `DOCUMENT_URI`.
    fn of(script: &'a Script) -> ScriptVars<'a> {
        ScriptVars {
            path_info: b"",
            script_filename: script.filename.as_bytes(),
            script_name: script.name.as_bytes(),
            document_uri: script.name.as_bytes(),
            document_root: script.document_root.as_bytes(),
        }
    }
}

/// Where the variables nginx sends go: a worker's serialized
/// `$_SERVER`, or a FastCGI request's params.
pub(crate) trait VarSink {
    fn put(&mut self, name: &[u8], value: &[u8]);
}

impl VarSink for PhpArrayWriter<'_> {
    fn put(&mut self, name: &[u8], value: &[u8]) {
        self.str(name, value);
    }
}

impl VarSink for Vec<(Vec<u8>, Vec<u8>)> {
    fn put(&mut self, name: &[u8], value: &[u8]) {
        self.push((name.to_vec(), value.to_vec()));
    }
}

/// Whether the request counts as https: the connection's TLS, or what a
/// trusted proxy says.
fn is_https(parts: &Parts, conn: &Connection) -> bool {
    if conn.trusted {
        forwarded_https(parts).unwrap_or(conn.https)
    } else {
        conn.https
    }
}

/// Appends the request's `$_SERVER`, serialized, to `dst` (the worker's
/// write buffer: nothing is built elsewhere and copied).
///
/// `body_len` is the length of the body Hearth received (it is the
/// `CONTENT_LENGTH` PHP sees, also for chunked requests), `None` without one.
pub(crate) fn write_server_vars(
    dst: &mut BytesMut,
    parts: &Parts,
    conn: &Connection,
    server: &ServerInfo,
    script: &Script,
    body_len: Option<usize>,
    now: SystemTime,
) {
    let count = FIXED_VARS
        + usize::from(is_https(parts, conn))
        + usize::from(authority_as_host(parts).is_some())
        + parts.headers.keys().filter(|n| passes(n)).count();
    let mut vars = PhpArrayWriter::new(dst, count);
    nginx_vars(
        &mut vars,
        parts,
        conn,
        server,
        ScriptVars::of(script),
        None,
        body_len,
    );
    let since_epoch = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let micros = since_epoch.as_micros() as f64 / 1_000_000.0;
    vars.str(b"PHP_SELF", script.name.as_bytes())
        .float(b"REQUEST_TIME_FLOAT", micros)
        .int(b"REQUEST_TIME", since_epoch.as_secs() as i64);
    vars.finish();
}

/// The FastCGI params nginx sends to php-fpm for a classic request
/// (`snippets/fastcgi-php.conf`'s `PATH_INFO`, then `fastcgi.conf`, then
/// the request headers), with `script`'s path parameters and `query` as
/// `QUERY_STRING`. PHP adds `PHP_SELF` and `REQUEST_TIME*` itself.
pub(crate) fn fastcgi_params(
    parts: &Parts,
    conn: &Connection,
    server: &ServerInfo,
    script: ScriptVars<'_>,
    query: &[u8],
    body_len: Option<usize>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut params = Vec::with_capacity(NGINX_VARS + 2 + parts.headers.len());
    nginx_vars(
        &mut params,
        parts,
        conn,
        server,
        script,
        Some(query),
        body_len,
    );
    params
}

/// The variables nginx's `fastcgi.conf` and the request headers give, in
/// nginx's order, into `vars`. `query` replaces the request's query string
/// when given.
fn nginx_vars(
    vars: &mut impl VarSink,
    parts: &Parts,
    conn: &Connection,
    server: &ServerInfo,
    script: ScriptVars<'_>,
    query: Option<&[u8]>,
    body_len: Option<usize>,
) {
    // The target as sent when hyper got a re-encoded one, as nginx passes
    // it; otherwise hyper's, which is the same bytes.
    let (request_uri, own_query) = match parts.extensions.get::<RawTarget>() {
        Some(RawTarget(raw)) => (&raw[..], target::query(raw)),
        None => (
            parts
                .uri
                .path_and_query()
                .map_or(&b"/"[..], |pq| pq.as_str().as_bytes()),
            parts.uri.query().unwrap_or("").as_bytes(),
        ),
    };
    let query = query.unwrap_or(own_query);
    let content_type = parts
        .headers
        .get(http::header::CONTENT_TYPE)
        .map_or(&b""[..], |v| v.as_bytes());
    let mut digits = itoa_buffer();
    let content_length: &[u8] = match body_len {
        Some(n) => format_usize(&mut digits, n),
        None => parts
            .headers
            .get(http::header::CONTENT_LENGTH)
            .map_or(&b""[..], |v| v.as_bytes()),
    };
    let authority = authority_as_host(parts);
    let forwarded_addr = conn
        .trusted
        .then(|| forwarded_client(parts, &server.trusted_proxies))
        .flatten();
    let remote_addr = forwarded_addr.as_deref().unwrap_or(&conn.remote_addr);
    let https = is_https(parts, conn);
    vars.put(b"PATH_INFO", script.path_info);
    vars.put(b"SCRIPT_FILENAME", script.script_filename);
    vars.put(b"QUERY_STRING", query);
    vars.put(b"REQUEST_METHOD", parts.method.as_str().as_bytes());
    vars.put(b"CONTENT_TYPE", content_type);
    vars.put(b"CONTENT_LENGTH", content_length);
    vars.put(b"SCRIPT_NAME", script.script_name);
    vars.put(b"REQUEST_URI", request_uri);
    vars.put(b"DOCUMENT_URI", script.document_uri);
    vars.put(b"DOCUMENT_ROOT", script.document_root);
    vars.put(b"SERVER_PROTOCOL", protocol(parts.version));
    vars.put(b"REQUEST_SCHEME", if https { b"https" } else { b"http" });
    if https {
        vars.put(b"HTTPS", b"on");
    }
    vars.put(b"GATEWAY_INTERFACE", b"CGI/1.1");
    vars.put(b"SERVER_SOFTWARE", server.server_software.as_bytes());
    vars.put(b"REMOTE_ADDR", remote_addr.as_bytes());
    vars.put(b"REMOTE_PORT", conn.remote_port.as_bytes());
    vars.put(b"REMOTE_USER", &basic_auth_user(parts).unwrap_or_default());
    vars.put(b"SERVER_ADDR", conn.server_addr.as_bytes());
    vars.put(b"SERVER_PORT", conn.server_port.as_bytes());
    vars.put(b"SERVER_NAME", server.server_name.as_bytes());
    vars.put(b"REDIRECT_STATUS", b"200");
    headers(vars, parts);
    if let Some(authority) = authority {
        vars.put(b"HTTP_HOST", authority.as_bytes());
    }
}

fn itoa_buffer() -> [u8; 20] {
    [0; 20]
}

fn format_usize(buf: &mut [u8; 20], mut n: usize) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[i..];
        }
    }
}

/// nginx's `$remote_user`: the user name of `Authorization: Basic`.
fn basic_auth_user(parts: &Parts) -> Option<Vec<u8>> {
    use base64::Engine as _;
    let value = parts.headers.get(http::header::AUTHORIZATION)?.as_bytes();
    let credentials = value
        .get(..6)
        .filter(|p| p.eq_ignore_ascii_case(b"basic "))
        .map(|_| &value[6..])?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(credentials.trim_ascii())
        .ok()?;
    let user = decoded.split(|&b| b == b':').next()?;
    Some(user.to_vec())
}

fn protocol(version: Version) -> &'static [u8] {
    match version {
        Version::HTTP_10 => b"HTTP/1.0",
        Version::HTTP_2 => b"HTTP/2.0",
        Version::HTTP_09 => b"HTTP/0.9",
        _ => b"HTTP/1.1",
    }
}

/// An HTTP/2 request names its host in `:authority` and need not send a
/// `Host` header; nginx passes the authority as `HTTP_HOST` then.
fn authority_as_host(parts: &Parts) -> Option<&str> {
    if parts.version != Version::HTTP_2 || parts.headers.contains_key(http::header::HOST) {
        return None;
    }
    parts.uri.authority().map(|a| a.as_str())
}

/// Whether a request header becomes an `HTTP_*` variable (see [`headers`]).
fn passes(name: &http::HeaderName) -> bool {
    let name = name.as_str();
    name != "proxy" && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// `HTTP_*` for each request header, as nginx passes them: names upper-cased
/// with `-` turned into `_`; headers whose names hold anything but letters,
/// digits and `-` are dropped (nginx's `ignore_invalid_headers`), so
/// `X_Forwarded_For` cannot pose as `X-Forwarded-For`. `Proxy` is dropped
/// too (httpoxy: it would become `HTTP_PROXY`, which HTTP clients read as
/// their proxy setting). Repeated headers are joined, cookies with "; ".
fn headers(vars: &mut impl VarSink, parts: &Parts) {
    let mut key = Vec::with_capacity(64);
    let mut joined = Vec::new();
    for name in parts.headers.keys() {
        if !passes(name) {
            continue;
        }
        let name = name.as_str();
        key.clear();
        key.extend_from_slice(b"HTTP_");
        key.extend(name.bytes().map(|b| {
            if b == b'-' {
                b'_'
            } else {
                b.to_ascii_uppercase()
            }
        }));
        let mut values = parts.headers.get_all(name).iter();
        let Some(first) = values.next() else { continue };
        match values.next() {
            None => {
                vars.put(&key, first.as_bytes());
            }
            Some(second) => {
                let separator: &[u8] = if name == "cookie" { b"; " } else { b", " };
                joined.clear();
                joined.extend_from_slice(first.as_bytes());
                for v in std::iter::once(second).chain(values) {
                    joined.extend_from_slice(separator);
                    joined.extend_from_slice(v.as_bytes());
                }
                vars.put(&key, &joined);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(req: http::Request<()>) -> Parts {
        req.into_parts().0
    }

    /// The serialized $_SERVER as text. (PhpArrayWriter::finish panics if
    /// the announced entry count is wrong.)
    fn server_vars(
        parts: &Parts,
        conn: &Connection,
        server: &ServerInfo,
        body_len: Option<usize>,
        now: SystemTime,
    ) -> String {
        let mut out = BytesMut::new();
        let script = Script {
            filename: "/srv/app/public/index.php".into(),
            name: "/index.php".into(),
            document_root: "/srv/app/public".into(),
        };
        write_server_vars(&mut out, parts, conn, server, &script, body_len, now);
        String::from_utf8_lossy(&out).into_owned()
    }

    fn info() -> ServerInfo {
        ServerInfo {
            server_name: "localhost".into(),
            server_software: "hearth/0.1.0".into(),
            trusted_proxies: vec![
                "10.0.0.0/8".parse().unwrap(),
                "127.0.0.1/32".parse().unwrap(),
            ],
        }
    }

    #[test]
    fn a_script_is_named_under_its_document_root_or_by_its_file_name() {
        let inside = Script::describe(
            Path::new("/srv/r1/public/index.php"),
            Some(Path::new("/srv/r1/public")),
        );
        assert_eq!(inside.filename, "/srv/r1/public/index.php");
        assert_eq!(inside.name, "/index.php");
        assert_eq!(inside.document_root, "/srv/r1/public");
        let beside = Script::describe(
            Path::new("/srv/r1/worker.php"),
            Some(Path::new("/srv/r1/public")),
        );
        assert_eq!(beside.filename, "/srv/r1/worker.php");
        assert_eq!(beside.name, "/worker.php");
        let alone = Script::describe(Path::new("/srv/r1/worker.php"), None);
        assert_eq!(alone.name, "/worker.php");
        assert_eq!(alone.document_root, "/srv/r1");
    }

    /// Over a unix socket with its peer trusted (`--trusted-proxy unix:`),
    /// as nginx's realip with `set_real_ip_from unix:` and
    /// `real_ip_recursive on` (checked against nginx 1.22): the right-most
    /// untrusted hop; a last hop that is no address (`unix:`, what a proxy
    /// itself behind a unix socket appends) leaves `unix:`.
    #[test]
    fn a_trusted_unix_peer_forwards_as_nginx_realip_does() {
        let mut conn = Connection::unix(Path::new("/run/hearth/hearth.sock"), false);
        conn.trusted = true;
        let now = SystemTime::UNIX_EPOCH;
        for (forwarded, remote) in [
            (None, "unix:"),
            (Some("203.0.113.9"), "203.0.113.9"),
            (Some("203.0.113.9, 10.0.0.1"), "203.0.113.9"),
            (Some("203.0.113.9, unix:"), "unix:"),
        ] {
            let mut req = http::Request::get("/");
            if let Some(forwarded) = forwarded {
                req = req.header("X-Forwarded-For", forwarded);
            }
            let vars = server_vars(&parts(req.body(()).unwrap()), &conn, &info(), None, now);
            let expected = format!("s:11:\"REMOTE_ADDR\";s:{}:\"{remote}\";", remote.len());
            assert!(vars.contains(&expected), "{forwarded:?}: {vars}");
            assert!(vars.contains("s:11:\"REMOTE_PORT\";s:0:\"\";"), "{vars}");
            assert!(
                vars.contains("s:11:\"SERVER_ADDR\";s:28:\"unix:/run/hearth/hearth.sock\";"),
                "{vars}"
            );
            assert!(vars.contains("s:11:\"SERVER_PORT\";s:0:\"\";"), "{vars}");
        }
    }

    #[test]
    fn forwarded_headers_count_only_from_trusted_proxies() {
        let req = http::Request::get("/")
            .header("X-Forwarded-For", "203.0.113.9, 10.1.1.1")
            .header("X-Forwarded-Proto", "https")
            .body(())
            .unwrap();
        let (parts, ()) = req.into_parts();
        let now = SystemTime::UNIX_EPOCH;
        let remote: SocketAddr = "10.0.0.2:4000".parse().unwrap();
        let local: SocketAddr = "10.0.0.1:80".parse().unwrap();
        let mut conn = Connection::new(remote, local, false);
        // Untrusted peer: its claims are passed on as headers, nothing more.
        let vars = server_vars(&parts, &conn, &info(), None, now);
        assert!(
            vars.contains("s:11:\"REMOTE_ADDR\";s:8:\"10.0.0.2\";"),
            "{vars}"
        );
        assert!(!vars.contains("\"HTTPS\""), "{vars}");
        assert!(vars.contains("HTTP_X_FORWARDED_FOR"), "{vars}");
        // Trusted: the right-most address that is not a trusted proxy.
        conn.trusted = is_trusted(&info().trusted_proxies, remote.ip());
        assert!(conn.trusted);
        let vars = server_vars(&parts, &conn, &info(), None, now);
        assert!(
            vars.contains("s:11:\"REMOTE_ADDR\";s:11:\"203.0.113.9\";"),
            "{vars}"
        );
        assert!(vars.contains("s:5:\"HTTPS\";s:2:\"on\";"), "{vars}");
        assert!(
            vars.contains("s:14:\"REQUEST_SCHEME\";s:5:\"https\";"),
            "{vars}"
        );
        // A spoofed left-most entry does not win over the proxy's own.
        let req = http::Request::get("/")
            .header("X-Forwarded-For", "1.1.1.1, 198.51.100.7")
            .body(())
            .unwrap();
        let (parts, ()) = req.into_parts();
        let vars = server_vars(&parts, &conn, &info(), None, now);
        assert!(
            vars.contains("s:11:\"REMOTE_ADDR\";s:12:\"198.51.100.7\";"),
            "{vars}"
        );
        // Garbage is ignored: the peer's address stays.
        let req = http::Request::get("/")
            .header("X-Forwarded-For", "not-an-ip")
            .body(())
            .unwrap();
        let (parts, ()) = req.into_parts();
        let vars = server_vars(&parts, &conn, &info(), None, now);
        assert!(
            vars.contains("s:11:\"REMOTE_ADDR\";s:8:\"10.0.0.2\";"),
            "{vars}"
        );
        assert!(is_trusted(
            &info().trusted_proxies,
            "::ffff:127.0.0.1".parse().unwrap()
        ));
    }

    #[test]
    fn headers_become_http_variables_and_unsafe_ones_are_dropped() {
        let req = http::Request::get("/a/b?x=1&y=%20")
            .header("Host", "example.test")
            .header("X-Forwarded-For", "1.2.3.4")
            .header("X_Forwarded_For", "6.6.6.6")
            .header("Proxy", "http://evil:8080")
            .header("Cookie", "a=1")
            .header("Cookie", "b=2")
            .header("Accept", "text/html")
            .header("Accept", "*/*")
            .body(())
            .unwrap();
        let conn = Connection::new(
            "127.0.0.1:50000".parse().unwrap(),
            "[::ffff:127.0.0.1]:8080".parse().unwrap(),
            false,
        );
        let vars = server_vars(&parts(req), &conn, &info(), None, UNIX_EPOCH);
        assert!(
            vars.contains("s:9:\"HTTP_HOST\";s:12:\"example.test\";"),
            "{vars}"
        );
        assert!(
            vars.contains("s:20:\"HTTP_X_FORWARDED_FOR\";s:7:\"1.2.3.4\";"),
            "{vars}"
        );
        assert!(
            !vars.contains("6.6.6.6"),
            "underscore header must be dropped: {vars}"
        );
        assert!(!vars.contains("HTTP_PROXY"), "httpoxy: {vars}");
        assert!(
            vars.contains("s:11:\"HTTP_COOKIE\";s:8:\"a=1; b=2\";"),
            "{vars}"
        );
        assert!(
            vars.contains("s:11:\"HTTP_ACCEPT\";s:14:\"text/html, */*\";"),
            "{vars}"
        );
        assert!(
            vars.contains("s:12:\"QUERY_STRING\";s:9:\"x=1&y=%20\";"),
            "{vars}"
        );
        assert!(
            vars.contains("s:11:\"REQUEST_URI\";s:16:\"/a/b?x=1&y=%20\";")
                || vars.contains("s:11:\"REQUEST_URI\";s:14:\"/a/b?x=1&y=%20\";"),
            "{vars}"
        );
        assert!(
            vars.contains("s:11:\"SERVER_ADDR\";s:9:\"127.0.0.1\";"),
            "mapped v4: {vars}"
        );
        assert!(vars.contains("s:14:\"CONTENT_LENGTH\";s:0:\"\";"), "{vars}");
        assert!(!vars.contains("\"HTTPS\""), "{vars}");
    }

    #[test]
    fn an_http2_authority_is_the_host() {
        let conn = Connection::new(
            "127.0.0.1:50000".parse().unwrap(),
            "127.0.0.1:8443".parse().unwrap(),
            true,
        );
        let req = http::Request::get("https://example.test:8443/p?q=1")
            .version(Version::HTTP_2)
            .body(())
            .unwrap();
        let vars = server_vars(&parts(req), &conn, &info(), None, UNIX_EPOCH);
        assert!(
            vars.contains("s:9:\"HTTP_HOST\";s:17:\"example.test:8443\";"),
            "{vars}"
        );
        assert!(
            vars.contains("s:15:\"SERVER_PROTOCOL\";s:8:\"HTTP/2.0\";"),
            "{vars}"
        );
        assert!(
            vars.contains("s:11:\"REQUEST_URI\";s:6:\"/p?q=1\";"),
            "{vars}"
        );
        // A Host header wins, and is not doubled.
        let req = http::Request::get("https://example.test/")
            .version(Version::HTTP_2)
            .header("Host", "other.test")
            .body(())
            .unwrap();
        let vars = server_vars(&parts(req), &conn, &info(), None, UNIX_EPOCH);
        assert_eq!(vars.matches("HTTP_HOST").count(), 1, "{vars}");
        assert!(vars.contains("\"other.test\""), "{vars}");
    }

    #[test]
    fn body_length_and_https() {
        let req = http::Request::post("/")
            .header("Content-Type", "application/json")
            .body(())
            .unwrap();
        let conn = Connection::new(
            "10.0.0.1:1".parse().unwrap(),
            "10.0.0.2:443".parse().unwrap(),
            true,
        );
        let vars = server_vars(&parts(req), &conn, &info(), Some(42), UNIX_EPOCH);
        assert!(
            vars.contains("s:14:\"CONTENT_LENGTH\";s:2:\"42\";"),
            "{vars}"
        );
        assert!(
            vars.contains("s:12:\"CONTENT_TYPE\";s:16:\"application/json\";"),
            "{vars}"
        );
        assert!(vars.contains("s:5:\"HTTPS\";s:2:\"on\";"), "{vars}");
        assert!(
            vars.contains("s:14:\"REQUEST_SCHEME\";s:5:\"https\";"),
            "{vars}"
        );
        assert!(vars.contains("s:12:\"REQUEST_TIME\";i:0;"), "{vars}");
    }
}
