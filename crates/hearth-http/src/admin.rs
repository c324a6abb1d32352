//! The admin listener: `/metrics`, `/healthz`, `/readyz` and the live
//! dashboard (`/`, `/api/status`, the actions under `/api/`) on an
//! address of their own (opt-in), so that they are never reachable on
//! the public port, where every path belongs to the app.
//!
//! Reading is open to whoever reaches the address. Actions (reload the
//! workers, retry, delete or purge jobs) are `POST`s that carry the admin
//! token as `Authorization: Bearer TOKEN`, and come from the dashboard's
//! own origin: a request another site's page makes the browser send
//! (`Origin` of another site, `Sec-Fetch-Site: cross-site`) is refused
//! whatever it carries. The page keeps the token in the tab's session
//! storage, never in a cookie, so a browser never adds it by itself.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::{json, Value};
use tokio::net::TcpListener;

use crate::dashboard::{self, Action, Dashboard, History, Recent, Refusal};
use crate::metrics::{Metrics, PoolReport, PoolSnapshot, POOL_NAME};

/// The dashboard's page, style and script, embedded in the binary.
const INDEX_HTML: &str = include_str!("dashboard/index.html");
const DASHBOARD_JS: &str = include_str!("dashboard/dashboard.js");
const DASHBOARD_CSS: &str = include_str!("dashboard/dashboard.css");

/// The page may load its own script, style and data, and nothing else; no
/// other site may frame it.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// How long a status answer waits for the command's report.
const STATUS_WAIT: Duration = Duration::from_secs(3);
/// How long an action may take before its answer says so (it goes on).
const ACTION_WAIT: Duration = Duration::from_secs(60);

/// What the admin endpoints report on.
#[derive(Debug, Clone)]
pub struct AdminState {
    pub pool: Arc<dyn PoolReport>,
    pub metrics: Arc<Metrics>,
    /// Set once the server begins to shut down: `/readyz` answers 503 from
    /// then on, so that a load balancer stops sending requests.
    pub stopping: Arc<AtomicBool>,
    /// The command's status and actions, for the dashboard.
    pub dashboard: Arc<dyn Dashboard>,
    /// The token actions need; none: actions are off.
    pub token: Option<AdminToken>,
}

/// The secret an operator gives to act from the dashboard.
#[derive(Clone)]
pub struct AdminToken(String);

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminToken(..)")
    }
}

/// The shortest token accepted, in bytes.
pub const MIN_TOKEN: usize = 16;

impl AdminToken {
    /// The token, trimmed of surrounding white space (a file's last
    /// newline); refused when shorter than [`MIN_TOKEN`] bytes or when it
    /// holds a character a header cannot carry.
    pub fn new(token: &str) -> Result<AdminToken, String> {
        let token = token.trim();
        if token.len() < MIN_TOKEN {
            return Err(format!(
                "the admin token is {} bytes long: it needs at least {MIN_TOKEN} (make one with \
                 `head -c 32 /dev/urandom | base64`)",
                token.len()
            ));
        }
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(
                "the admin token may hold only printable ASCII characters, without spaces"
                    .to_owned(),
            );
        }
        Ok(AdminToken(token.to_owned()))
    }

    /// Whether `given` is the token, in a time that does not depend on
    /// where they differ (written here: the comparison is three lines).
    fn matches(&self, given: &[u8]) -> bool {
        let want = self.0.as_bytes();
        let differ = want
            .iter()
            .zip(given)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        differ == 0 && want.len() == given.len()
    }
}

/// Whether an admin listener on `addr` can be reached from other networks:
/// the unspecified address (every interface) and public addresses are;
/// loopback, private (RFC 1918, unique local) and link-local ones are not.
/// Such a listener needs a token.
pub fn is_public(addr: SocketAddr) -> bool {
    match addr.ip() {
        IpAddr::V4(ip) => !(ip.is_loopback() || ip.is_private() || ip.is_link_local()),
        IpAddr::V6(ip) => {
            if let Some(v4) = ip.to_ipv4_mapped() {
                return is_public(SocketAddr::new(IpAddr::V4(v4), addr.port()));
            }
            let unique_local = (ip.segments()[0] & 0xfe00) == 0xfc00;
            let link_local = (ip.segments()[0] & 0xffc0) == 0xfe80;
            !(ip.is_loopback() || unique_local || link_local)
        }
    }
}

/// Serves the admin endpoints on `listener` until the task is dropped,
/// sampling the dashboard's history meanwhile.
pub async fn serve(listener: TcpListener, state: AdminState) {
    let history = Arc::new(History::default());
    let sampler = tokio::spawn(sample(
        state.metrics.recent().clone(),
        history.clone(),
        state.pool.clone(),
        state.dashboard.clone(),
    ));
    let _sampler = AbortOnDrop(sampler);
    let state = Arc::new((state, history));
    loop {
        let (stream, remote) = match listener.accept().await {
            Ok(pair) => pair,
            Err(e) => {
                tracing::error!("admin listener: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let state = state.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<Incoming>| {
                let state = state.clone();
                async move { Ok::<_, Infallible>(answer(&state.0, &state.1, req).await) }
            });
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(TokioIo::new(stream), service);
            if let Err(e) = connection.await {
                tracing::debug!(%remote, "admin connection ended: {e}");
            }
        });
    }
}

/// Takes one sample a second into `history` until the task is dropped.
async fn sample(
    recent: Arc<Recent>,
    history: Arc<History>,
    pool: Arc<dyn PoolReport>,
    dashboard: Arc<dyn Dashboard>,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let now = SystemTime::now();
        let second = recent.take();
        recent.prune(now);
        let report = pool.report();
        let t = dashboard::unix(now).floor();
        let mut sample = second.json();
        sample["t"] = json!(t);
        sample["waiting"] = json!(report.waiting);
        sample["busy"] = json!(report.busy);
        sample["live"] = json!(report.live);
        if let Some(jobs) = dashboard.jobs_sample() {
            sample["jobs"] = jobs;
        }
        history.push(t, sample);
    }
}

/// Stops the sampler with the listener.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

const PLAIN: &str = "text/plain; charset=utf-8";
const JSON: &str = "application/json";

fn reply(status: StatusCode, content_type: &'static str, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    reply(status, PLAIN, Bytes::from(body))
}

fn json_reply(status: StatusCode, body: &Value) -> Response<Full<Bytes>> {
    reply(status, JSON, Bytes::from(body.to_string()))
}

/// One of the dashboard's own files, which only this origin may frame or
/// script.
fn asset(content_type: &'static str, body: &'static str) -> Response<Full<Bytes>> {
    let mut response = reply(
        StatusCode::OK,
        content_type,
        Bytes::from_static(body.as_bytes()),
    );
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

fn refused(refusal: Refusal) -> Response<Full<Bytes>> {
    let mut response = json_reply(
        refusal.status,
        &json!({"ok": false, "error": refusal.message}),
    );
    if refusal.status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"hearth admin\""),
        );
    }
    response
}

fn method_not_allowed(allow: &'static str) -> Response<Full<Bytes>> {
    let mut response = text(
        StatusCode::METHOD_NOT_ALLOWED,
        "method not allowed\n".into(),
    );
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allow));
    response
}

async fn answer(
    state: &AdminState,
    history: &History,
    req: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let path = req.uri().path().to_owned();
    if let Some(action) = path.strip_prefix("/api/").filter(|p| *p != "status") {
        if req.method() != Method::POST {
            return method_not_allowed("POST");
        }
        return match act(state, action, req.headers()).await {
            Ok(message) => json_reply(StatusCode::OK, &json!({"ok": true, "message": message})),
            Err(refusal) => {
                tracing::info!(path, "dashboard action refused: {}", refusal.message);
                refused(refusal)
            }
        };
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return method_not_allowed("GET, HEAD");
    }
    match path.as_str() {
        "/" | "/index.html" => asset("text/html; charset=utf-8", INDEX_HTML),
        "/dashboard.js" => asset("text/javascript; charset=utf-8", DASHBOARD_JS),
        "/dashboard.css" => asset("text/css; charset=utf-8", DASHBOARD_CSS),
        "/api/status" => {
            let since = req.uri().query().and_then(|q| {
                q.split('&')
                    .find_map(|kv| kv.strip_prefix("since="))
                    .and_then(|v| v.parse::<f64>().ok())
            });
            json_reply(StatusCode::OK, &status(state, history, since).await)
        }
        "/metrics" => reply(
            StatusCode::OK,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Bytes::from(state.metrics.render()),
        ),
        "/healthz" => text(StatusCode::OK, "ok\n".into()),
        "/readyz" => readyz(state, req.uri().query()),
        _ => text(
            StatusCode::NOT_FOUND,
            "not found: try / (the dashboard), /metrics, /healthz or /readyz\n".into(),
        ),
    }
}

/// Why the processes of `snapshot` should get no request now, if they
/// should not.
fn not_ready(snapshot: &PoolSnapshot) -> Option<String> {
    if snapshot.stopping {
        return Some("shutting down".to_owned());
    }
    match &snapshot.sizing {
        Some(sizing) => sizing.not_ready.clone(),
        None => (snapshot.live == 0).then(|| "no live worker".to_owned()),
    }
}

/// `/readyz`: whether a load balancer should send this server requests.
/// With several pools the default one decides (it takes every request no
/// route claims: the site itself), and the other pools that are not
/// ready are named in the body; `?pool=NAME` asks about one pool, for a
/// load balancer that routes by path or host on its own side.
fn readyz(state: &AdminState, query: Option<&str>) -> Response<Full<Bytes>> {
    let unavailable = |body: String| text(StatusCode::SERVICE_UNAVAILABLE, body);
    if state.stopping.load(Ordering::Acquire) {
        return unavailable("not ready: shutting down\n".into());
    }
    let asked = query.and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("pool=")));
    let mut pools = state.pool.pools();
    if pools.is_empty() {
        pools.push((POOL_NAME.to_owned(), state.pool.report()));
    }
    if let Some(name) = asked {
        let Some((_, one)) = pools.iter().find(|(n, _)| n == name) else {
            let names: Vec<&str> = pools.iter().map(|(n, _)| n.as_str()).collect();
            return text(
                StatusCode::NOT_FOUND,
                format!("no pool named {name:?}: {}\n", names.join(", ")),
            );
        };
        return match not_ready(one) {
            Some(why) => unavailable(format!("not ready: pool {name}: {why}\n")),
            None => text(
                StatusCode::OK,
                format!("ready: pool {name}: {} live workers\n", one.live),
            ),
        };
    }
    let several = pools.len() > 1;
    let (default_name, default) = &pools[0];
    let mut body = match not_ready(default) {
        Some(why) if several => format!("not ready: pool {default_name}: {why}\n"),
        Some(why) => format!("not ready: {why}\n"),
        None => {
            let live: usize = pools.iter().map(|(_, p)| p.live).sum();
            format!("ready: {live} live workers\n")
        }
    };
    for (name, one) in &pools[1..] {
        if let Some(why) = not_ready(one) {
            body.push_str(&format!("pool {name}: not ready: {why}\n"));
        }
    }
    if not_ready(default).is_some() {
        unavailable(body)
    } else {
        text(StatusCode::OK, body)
    }
}

/// The dashboard's data: the command's status report, the samples after
/// `since`, the slowest recent requests, the workers replaced and the
/// queues.
async fn status(state: &AdminState, history: &History, since: Option<f64>) -> Value {
    let (mut report, queues) = tokio::join!(
        tokio::time::timeout(STATUS_WAIT, state.dashboard.status()),
        tokio::time::timeout(STATUS_WAIT, state.dashboard.queues()),
    );
    let mut report = match report.as_mut() {
        Ok(report) => std::mem::take(report),
        Err(_) => json!({"error": format!("no status within {STATUS_WAIT:?}")}),
    };
    let past = report
        .as_object_mut()
        .and_then(|o| o.remove("past_workers"))
        .unwrap_or_else(|| json!([]));
    without_queries(&mut report);
    json!({
        "now": dashboard::unix(SystemTime::now()),
        "command": state.dashboard.command(),
        "actions": state.token.is_some(),
        "status": report,
        "history": history.since(since),
        "slow": state.metrics.recent().slow_json(),
        "past_workers": past,
        "queues": queues.unwrap_or_else(|_| {
            vec![json!({"error": format!("no answer from the queue within {STATUS_WAIT:?}")})]
        }),
    })
}

/// Drops the query string of every running request's `uri` in a status
/// report (it may carry a secret; the path is enough to see what runs).
fn without_queries(report: &mut Value) {
    match report {
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                if key == "uri" {
                    if let Value::String(uri) = value {
                        if let Some(at) = uri.find('?') {
                            uri.truncate(at);
                        }
                    }
                } else {
                    without_queries(value);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(without_queries),
        _ => {}
    }
}

/// Checks that an action may be done, then does it.
async fn act(state: &AdminState, action: &str, headers: &HeaderMap) -> Result<String, Refusal> {
    same_origin(headers)?;
    let Some(token) = &state.token else {
        return Err(Refusal::new(
            StatusCode::CONFLICT,
            "actions are off: give the server an admin token (admin_token in hearth.toml, or \
             --admin-token-file)",
        ));
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "));
    match given {
        None => {
            return Err(Refusal::new(
                StatusCode::UNAUTHORIZED,
                "this action needs the admin token (Authorization: Bearer TOKEN)",
            ))
        }
        Some(given) if !token.matches(given) => {
            return Err(Refusal::new(StatusCode::UNAUTHORIZED, "wrong admin token"))
        }
        Some(_) => {}
    }
    let action = parse_action(action)?;
    if action.is_none() {
        return Ok("the token is right: actions are unlocked".to_owned());
    }
    let action = action.expect("checked");
    tracing::info!(?action, "dashboard action");
    match tokio::time::timeout(ACTION_WAIT, state.dashboard.act(action)).await {
        Ok(result) => result,
        Err(_) => Err(Refusal::new(
            StatusCode::GATEWAY_TIMEOUT,
            format!("no answer within {ACTION_WAIT:?}; the action goes on"),
        )),
    }
}

/// Refuses a request that a page of another origin made the browser send.
/// Browsers send `Origin` with every cross-origin `POST` and
/// `Sec-Fetch-Site` with every request; tools like curl send neither.
fn same_origin(headers: &HeaderMap) -> Result<(), Refusal> {
    let cross = |why: String| Err(Refusal::new(StatusCode::FORBIDDEN, why));
    if let Some(site) = headers.get("sec-fetch-site") {
        if site != "same-origin" && site != "none" {
            return cross(format!(
                "refused: the request came from another site (Sec-Fetch-Site: {})",
                String::from_utf8_lossy(site.as_bytes())
            ));
        }
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let host = headers.get(header::HOST).map(HeaderValue::as_bytes);
        let own = origin
            .as_bytes()
            .strip_prefix(b"http://")
            .is_some_and(|rest| Some(rest) == host);
        if !own {
            return cross(format!(
                "refused: the request came from another origin ({})",
                String::from_utf8_lossy(origin.as_bytes())
            ));
        }
    }
    Ok(())
}

/// The action a path names (`reload`, `queues/0/dead/17/retry`, ...);
/// none for `check`, which only checks the token.
fn parse_action(path: &str) -> Result<Option<Action>, Refusal> {
    let parts: Vec<&str> = path.split('/').collect();
    let number = |s: &str, what: &str| {
        s.parse::<u64>()
            .map_err(|_| Refusal::new(StatusCode::NOT_FOUND, format!("no such {what}: {s:?}")))
    };
    let action = match parts.as_slice() {
        ["check"] => return Ok(None),
        ["reload"] => Action::Reload,
        ["queues", q, "dead", id, verb @ ("retry" | "delete")] => {
            let queue = usize::try_from(number(q, "queue")?).unwrap_or(usize::MAX);
            let id = number(id, "job")?;
            if *verb == "retry" {
                Action::Retry { queue, id }
            } else {
                Action::Delete { queue, id }
            }
        }
        ["queues", q, "purge", part] => {
            let queue = usize::try_from(number(q, "queue")?).unwrap_or(usize::MAX);
            let part = match *part {
                "ready" => "ready",
                "delayed" => "delayed",
                "dead" => "dead",
                other => {
                    return Err(Refusal::new(
                        StatusCode::NOT_FOUND,
                        format!("cannot purge {other:?}: ready, delayed or dead"),
                    ))
                }
            };
            Action::Purge { queue, part }
        }
        _ => {
            return Err(Refusal::new(
                StatusCode::NOT_FOUND,
                format!("no such action: /api/{path}"),
            ))
        }
    };
    Ok(Some(action))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_addresses_are_told_apart() {
        for public in [
            "0.0.0.0:9090",
            "8.8.8.8:9090",
            "[::]:9090",
            "[2001:db8::1]:1",
        ] {
            assert!(is_public(public.parse().expect("addr")), "{public}");
        }
        for private in [
            "127.0.0.1:9090",
            "10.1.2.3:9090",
            "172.16.0.1:1",
            "192.168.1.1:1",
            "169.254.1.1:1",
            "[::1]:9090",
            "[fd00::1]:1",
            "[fe80::1]:1",
            "[::ffff:127.0.0.1]:1",
        ] {
            assert!(!is_public(private.parse().expect("addr")), "{private}");
        }
    }

    #[test]
    fn tokens_are_checked_whole() {
        assert!(AdminToken::new("short").is_err());
        assert!(AdminToken::new("sixteen bytes!!!x").is_err(), "a space");
        let token = AdminToken::new("0123456789abcdef\n").expect("token");
        assert!(token.matches(b"0123456789abcdef"));
        assert!(!token.matches(b"0123456789abcdeF"));
        assert!(!token.matches(b"0123456789abcde"));
        assert!(!token.matches(b"0123456789abcdef0"));
        assert!(!token.matches(b""));
    }

    #[test]
    fn actions_are_read_from_their_paths() {
        assert_eq!(parse_action("check"), Ok(None));
        assert_eq!(parse_action("reload"), Ok(Some(Action::Reload)));
        assert_eq!(
            parse_action("queues/0/dead/17/retry"),
            Ok(Some(Action::Retry { queue: 0, id: 17 }))
        );
        assert_eq!(
            parse_action("queues/0/dead/17/delete"),
            Ok(Some(Action::Delete { queue: 0, id: 17 }))
        );
        assert_eq!(
            parse_action("queues/0/purge/dead"),
            Ok(Some(Action::Purge {
                queue: 0,
                part: "dead"
            }))
        );
        for bad in [
            "",
            "queues/0/purge/all",
            "queues/x/dead/1/retry",
            "queues/0/dead/-1/retry",
            "stop",
        ] {
            assert_eq!(
                parse_action(bad).map_err(|r| r.status),
                Err(StatusCode::NOT_FOUND),
                "{bad}"
            );
        }
    }

    #[test]
    fn other_origins_are_refused() {
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.insert(*k, HeaderValue::from_static(v));
            }
            h
        };
        assert!(same_origin(&headers(&[])).is_ok(), "curl");
        assert!(same_origin(&headers(&[
            ("host", "127.0.0.1:9090"),
            ("origin", "http://127.0.0.1:9090"),
            ("sec-fetch-site", "same-origin"),
        ]))
        .is_ok());
        for bad in [
            &[
                ("host", "127.0.0.1:9090"),
                ("origin", "http://evil.example"),
            ][..],
            &[("host", "127.0.0.1:9090"), ("origin", "null")][..],
            &[("origin", "http://127.0.0.1:9090")][..],
            &[("sec-fetch-site", "cross-site")][..],
            &[("sec-fetch-site", "same-site")][..],
        ] {
            assert_eq!(
                same_origin(&headers(bad)).map_err(|r| r.status),
                Err(StatusCode::FORBIDDEN),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn queries_are_dropped_from_running_requests() {
        let mut report =
            json!({"workers": [{"request": {"uri": "/a?token=s3cret", "method": "GET"}}]});
        without_queries(&mut report);
        assert_eq!(report["workers"][0]["request"]["uri"], "/a");
    }
}
