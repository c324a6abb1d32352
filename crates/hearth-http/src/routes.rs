//! Several pools behind one server: each request goes to the pool whose
//! route matches its host and path, or to the default pool. A pool is
//! warm workers running a worker script, or a classic site (its scripts
//! run by php-fpm, as `hearth serve --root` runs one).
//!
//! A route names hosts (`api.example.com`, or `*.example.com` for every
//! name under it), path prefixes (`/api/`), or both. The path is the one
//! nginx matches its locations against (`$uri`: percent-decoded, `.` and
//! `..` resolved, `//` merged), so `/app/../api/x` goes where `/api/x`
//! goes, and a prefix matches as nginx's `location /prefix` does: as the
//! start of the path, whatever follows it. Of the routes that match, the
//! one with the longest prefix wins; of those, one that names the host
//! wins over one that does not; then the first listed.
//!
//! Each pool keeps its own workers, queue and limits: one pool's requests
//! waiting for a worker, or its workers failing to boot, are that pool's
//! alone; the other pools' requests never wait on them.

use std::sync::Arc;
use std::time::Duration;

use hearth_pool::Pool;
use http::request::Parts;
use http::StatusCode;

use crate::classic::{self, ClassicSite};
use crate::metrics::{PoolReport, PoolSnapshot};
use crate::mixed::MixedSite;

/// What runs a pool's requests.
#[derive(Debug, Clone)]
pub enum Target {
    /// Warm workers running the pool's worker script.
    Workers(Pool),
    /// A classic site: its scripts run by a php-fpm pool, whose state
    /// `report` reads for the metrics and `/readyz`.
    Classic(Arc<ClassicSite>, Arc<dyn PoolReport>),
    /// A mixed site: its front controller in the workers, its other
    /// scripts in php-fpm (the default pool only).
    Mixed(Pool, Arc<MixedSite>),
}

/// One pool and the requests it takes.
#[derive(Debug, Clone)]
pub struct PoolRoute {
    /// The pool's name, in logs, status and metrics.
    pub name: String,
    /// Host names (lowercase, no port); `*.example.com` matches every name
    /// ending in `.example.com`. Empty: any host.
    pub hosts: Vec<String>,
    /// Path prefixes, each a normalized path starting with `/`. Empty: any
    /// path.
    pub prefixes: Vec<String>,
    pub target: Target,
    /// Hard limit on one of its requests once a worker has it (none: no
    /// limit).
    pub request_timeout: Option<Duration>,
}

impl PoolRoute {
    /// The pool's workers, when it runs a worker script.
    pub fn workers(&self) -> Option<&Pool> {
        match &self.target {
            Target::Workers(pool) | Target::Mixed(pool, _) => Some(pool),
            Target::Classic(..) => None,
        }
    }

    /// The most processes the pool runs PHP in at once.
    fn most(&self) -> usize {
        match &self.target {
            Target::Workers(pool) => pool.config().workers,
            Target::Classic(site, _) => site.children(),
            Target::Mixed(pool, mixed) => pool.config().workers.max(mixed.site().children()),
        }
    }

    fn report(&self) -> PoolSnapshot {
        match &self.target {
            Target::Workers(pool) | Target::Mixed(pool, _) => pool.report(),
            Target::Classic(_, report) => report.report(),
        }
    }
}

/// The pools of one server: routed ones, and the default one that takes
/// every request no route matches.
#[derive(Debug)]
pub struct Pools {
    default: PoolRoute,
    routes: Vec<PoolRoute>,
}

impl Pools {
    pub fn new(default: PoolRoute, routes: Vec<PoolRoute>) -> Pools {
        Pools { default, routes }
    }

    /// The default pool first, then the routed ones in order.
    pub fn all(&self) -> impl Iterator<Item = &PoolRoute> {
        std::iter::once(&self.default).chain(&self.routes)
    }

    /// The most workers any pool may have.
    pub(crate) fn most_workers(&self) -> usize {
        self.all().map(PoolRoute::most).max().unwrap_or(1)
    }

    /// The pool for one request, or the status to refuse it with (a path
    /// nginx refuses, 400).
    pub(crate) fn pick(&self, parts: &Parts) -> Result<&PoolRoute, StatusCode> {
        if self.routes.is_empty() {
            return Ok(&self.default);
        }
        let host = host_of(parts);
        let path = if self.routes.iter().any(|r| !r.prefixes.is_empty()) {
            classic::request_uri(parts)?.0
        } else {
            Vec::new()
        };
        Ok(self.pick_for(host.as_deref(), &path))
    }

    fn pick_for(&self, host: Option<&str>, path: &[u8]) -> &PoolRoute {
        let keys = self.routes.iter().map(|r| (&r.hosts[..], &r.prefixes[..]));
        choose(keys, host, path).map_or(&self.default, |i| &self.routes[i])
    }
}

/// Which of the routes (their hosts and prefixes) takes a request for
/// `host` and `path`: the longest matching prefix, then one naming the
/// host, then the first.
fn choose<'a>(
    routes: impl Iterator<Item = (&'a [String], &'a [String])>,
    host: Option<&str>,
    path: &[u8],
) -> Option<usize> {
    let mut best: Option<(usize, bool, usize)> = None;
    for (at, (hosts, prefixes)) in routes.enumerate() {
        let host_named = !hosts.is_empty();
        if host_named && !host.is_some_and(|h| hosts.iter().any(|p| host_matches(p, h))) {
            continue;
        }
        let matched = if prefixes.is_empty() {
            Some(0)
        } else {
            prefixes
                .iter()
                .filter(|p| path.starts_with(p.as_bytes()))
                .map(String::len)
                .max()
        };
        let Some(len) = matched else { continue };
        if best.is_none_or(|(l, h, _)| (len, host_named) > (l, h)) {
            best = Some((len, host_named, at));
        }
    }
    best.map(|(_, _, at)| at)
}

impl PoolReport for Pools {
    /// All pools together (`/readyz` reads [`PoolReport::pools`]: the
    /// default pool decides, the others are named).
    fn report(&self) -> PoolSnapshot {
        let mut all = PoolSnapshot::default();
        for route in self.all() {
            let one = route.report();
            all.waiting += one.waiting;
            all.live += one.live;
            all.busy += one.busy;
            all.idle += one.idle;
            all.min_workers += one.min_workers;
            all.workers += one.workers;
            all.failing += one.failing;
            all.started = Some(all.started.unwrap_or(0) + one.started.unwrap_or(0));
            for (reason, n) in one.restarts_by_reason {
                match all
                    .restarts_by_reason
                    .iter_mut()
                    .find(|(r, _)| *r == reason)
                {
                    Some((_, total)) => *total += n,
                    None => all.restarts_by_reason.push((reason, n)),
                }
            }
            all.stopping |= one.stopping;
        }
        all
    }

    fn pools(&self) -> Vec<(String, PoolSnapshot)> {
        self.all()
            .map(|route| (route.name.clone(), route.report()))
            .collect()
    }
}

/// The request's host, lowercase and without its port: the URI's authority
/// (HTTP/2, or an absolute target), else the `Host` header.
fn host_of(parts: &Parts) -> Option<String> {
    let raw = match parts.uri.authority() {
        Some(authority) => authority.host().to_owned(),
        None => {
            let value = parts.headers.get(http::header::HOST)?.to_str().ok()?;
            match value.parse::<http::uri::Authority>() {
                Ok(authority) => authority.host().to_owned(),
                Err(_) => return None,
            }
        }
    };
    Some(raw.trim_end_matches('.').to_ascii_lowercase())
}

/// Whether `host` is matched by `pattern`: the same name, or, for
/// `*.example.com`, a name ending in `.example.com`.
fn host_matches(pattern: &str, host: &str) -> bool {
    match pattern.strip_prefix('*') {
        Some(suffix) => host.len() > suffix.len() && host.ends_with(suffix),
        None => pattern == host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_longest_prefix_wins_then_the_host_then_the_first() {
        let routes = [
            (strings(&[]), strings(&["/api/"])),
            (strings(&["api.example.com"]), strings(&[])),
            (strings(&[]), strings(&["/api/admin/", "/admin/"])),
            (strings(&["*.example.com"]), strings(&["/api/"])),
            (strings(&[]), strings(&["/api/"])),
        ];
        let pick = |host: Option<&str>, path: &str| {
            choose(
                routes.iter().map(|(h, p)| (&h[..], &p[..])),
                host,
                path.as_bytes(),
            )
        };
        assert_eq!(pick(None, "/"), None);
        assert_eq!(pick(None, "/api/x"), Some(0));
        assert_eq!(pick(None, "/api"), None);
        assert_eq!(pick(None, "/api/admin/x"), Some(2));
        assert_eq!(pick(None, "/admin/"), Some(2));
        assert_eq!(pick(Some("api.example.com"), "/"), Some(1));
        assert_eq!(pick(Some("api.example.com"), "/other"), Some(1));
        // A longer prefix beats a host; a host beats none at equal length.
        assert_eq!(pick(Some("api.example.com"), "/api/admin/x"), Some(2));
        assert_eq!(pick(Some("www.example.com"), "/api/x"), Some(3));
        assert_eq!(pick(Some("example.org"), "/api/x"), Some(0));
    }

    #[test]
    fn hosts_match_exactly_or_under_a_wildcard() {
        assert!(host_matches("api.example.com", "api.example.com"));
        assert!(!host_matches("api.example.com", "example.com"));
        assert!(host_matches("*.example.com", "a.example.com"));
        assert!(host_matches("*.example.com", "a.b.example.com"));
        assert!(!host_matches("*.example.com", "example.com"));
        assert!(!host_matches("*.example.com", "badexample.com"));
    }

    #[test]
    fn the_host_comes_without_port_and_in_lowercase() {
        let req = http::Request::get("/x")
            .header("host", "API.Example.com:8080")
            .body(())
            .expect("request");
        let (parts, ()) = req.into_parts();
        assert_eq!(host_of(&parts).as_deref(), Some("api.example.com"));
        let req = http::Request::get("http://h2.example.com/x")
            .header("host", "other")
            .body(())
            .expect("request");
        let (parts, ()) = req.into_parts();
        assert_eq!(host_of(&parts).as_deref(), Some("h2.example.com"));
    }
}
