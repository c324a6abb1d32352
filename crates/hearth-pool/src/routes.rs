//! Memory growth by route: which requests make workers grow.
//!
//! Each worker reports, in the final `End` of every request, its memory
//! once the previous request had been cleaned up (see
//! `hearth_proto::message::EndReport`); the difference between two
//! reports is what the request between them left behind. This module
//! names requests (the route the app gave, or the method and the path
//! with its ids folded) and keeps the counts by name in a table of
//! bounded size. A data structure; no I/O.

use std::collections::HashMap;
use std::sync::Arc;

/// Routes the table counts on their own; requests of further routes are
/// counted together under [`OTHER_ROUTE`]. A few hundred covers the
/// routes of an app; a client sending endless distinct paths fills it
/// once and then only `other` grows.
pub const ROUTE_LIMIT: usize = 256;

/// The entry for requests of routes past [`ROUTE_LIMIT`].
pub const OTHER_ROUTE: &str = "other";

/// Route keys longer than this many bytes are cut (at a character
/// boundary): what one hostile path or name costs is bounded.
pub const ROUTE_MAX_LEN: usize = 160;

/// What replaces an id in a path: a segment of digits, a UUID, or a long
/// token of hex or base64 characters.
pub const ID: &str = "{id}";

/// Writes into `out` the route of a request that the app did not name:
/// `METHOD /path`, with the query string dropped and each segment that is
/// an id replaced by [`ID`] (see [`is_id`]), cut to [`ROUTE_MAX_LEN`].
/// `out` is cleared first and reused, so a worker's route costs no
/// allocation once its buffer has grown.
pub fn fold(method: &str, target: &str, out: &mut String) {
    out.clear();
    out.push_str(&method[..floor(method, 16)]);
    out.push(' ');
    let path = target
        .split(['?', '#'])
        .next()
        .filter(|p| !p.is_empty())
        .unwrap_or("/");
    // An absolute-form target (a proxy request): only its path counts.
    let path = match path.find("://") {
        Some(at) => path[at + 3..]
            .find('/')
            .map_or("/", |slash| &path[at + 3 + slash..]),
        None => path,
    };
    for (i, segment) in path.split('/').enumerate() {
        if i > 0 {
            out.push('/');
        }
        if is_id(segment) {
            out.push_str(ID);
        } else {
            out.push_str(segment);
        }
        if out.len() >= ROUTE_MAX_LEN {
            break;
        }
    }
    out.truncate(floor(out, ROUTE_MAX_LEN));
}

/// Whether a path segment names one thing among many rather than a kind
/// of page: all digits (`42`); a UUID (`8-4-4-4-12` hex digits); 16 hex
/// digits or more (a hash, an object id); or a token of 20 characters or
/// more from the base64 and base64url alphabets with at least one digit
/// (a session or share token), which words and slugs seldom are.
pub fn is_id(segment: &str) -> bool {
    let b = segment.as_bytes();
    if b.is_empty() {
        return false;
    }
    if b.iter().all(u8::is_ascii_digit) {
        return true;
    }
    if b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
    {
        return true;
    }
    if b.len() >= 16 && b.iter().all(u8::is_ascii_hexdigit) {
        return true;
    }
    b.len() >= 20
        && b.iter().any(u8::is_ascii_digit)
        && b.iter().all(|c| {
            c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'+' | b'=' | b'.' | b'~')
        })
}

/// The largest index at most `max` that is a character boundary of `s`.
fn floor(s: &str, max: usize) -> usize {
    if s.len() <= max {
        return s.len();
    }
    (0..=max)
        .rev()
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(0)
}

/// The counts of one route.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Counts {
    /// Requests whose growth was measured.
    requests: u64,
    /// Those after which the worker had grown.
    grew: u64,
    /// Bytes the worker grew by over those requests (shrinking counts
    /// against it).
    growth: i64,
}

/// One route's line in a status report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteGrowth {
    /// The route name the app gave, `METHOD /folded/path`, or
    /// [`OTHER_ROUTE`].
    pub route: String,
    /// Requests whose growth was measured (a worker's last request before
    /// it exits is not: no report follows it).
    pub requests: u64,
    /// Requests after which the worker used more memory than before.
    pub grew: u64,
    /// What those requests grew their workers by in all, in bytes; memory
    /// given back counts against it.
    pub growth: i64,
}

impl RouteGrowth {
    /// Mean growth per request, in bytes.
    pub fn mean(&self) -> i64 {
        if self.requests == 0 {
            return 0;
        }
        self.growth / self.requests as i64
    }

    /// The share of requests after which the worker had grown, 0 to 1.
    pub fn grew_share(&self) -> f64 {
        if self.requests == 0 {
            return 0.0;
        }
        self.grew as f64 / self.requests as f64
    }
}

/// Memory growth by route, for at most [`ROUTE_LIMIT`] routes plus
/// [`OTHER_ROUTE`].
#[derive(Debug)]
pub(crate) struct RouteTable {
    routes: HashMap<Arc<str>, Counts>,
    other: Arc<str>,
    other_counts: Counts,
}

impl Default for RouteTable {
    fn default() -> RouteTable {
        RouteTable {
            routes: HashMap::new(),
            other: Arc::from(OTHER_ROUTE),
            other_counts: Counts::default(),
        }
    }
}

impl RouteTable {
    /// The key requests of `route` are counted under: its own while the
    /// table has room or it already has an entry, else [`OTHER_ROUTE`].
    /// Cut to [`ROUTE_MAX_LEN`], control characters replaced by `?`.
    pub fn key(&mut self, route: &str) -> Arc<str> {
        let route = &route[..floor(route, ROUTE_MAX_LEN)];
        if let Some((key, _)) = self.routes.get_key_value(route) {
            return key.clone();
        }
        if self.routes.len() >= ROUTE_LIMIT || route == OTHER_ROUTE {
            return self.other.clone();
        }
        let key: Arc<str> = if route.chars().any(char::is_control) {
            let clean: String = route
                .chars()
                .map(|c| if c.is_control() { '?' } else { c })
                .collect();
            if let Some((key, _)) = self.routes.get_key_value(clean.as_str()) {
                return key.clone();
            }
            Arc::from(clean)
        } else {
            Arc::from(route)
        };
        self.routes.insert(key.clone(), Counts::default());
        key
    }

    /// Counts one request of the route `key` (from [`RouteTable::key`])
    /// after which its worker had grown by `growth` bytes.
    pub fn record(&mut self, key: &str, growth: i64) {
        let counts = match self.routes.get_mut(key) {
            Some(counts) => counts,
            None => &mut self.other_counts,
        };
        counts.requests += 1;
        counts.grew += u64::from(growth > 0);
        counts.growth = counts.growth.saturating_add(growth);
    }

    /// Routes with an entry, [`OTHER_ROUTE`] not included.
    pub fn len(&self) -> usize {
        self.routes.len()
    }

    /// The `n` routes whose requests grew workers most, most first
    /// ([`OTHER_ROUTE`] among them, when it has requests); routes with no
    /// measured request are left out.
    pub fn top(&self, n: usize) -> Vec<RouteGrowth> {
        let mut all: Vec<(&Arc<str>, &Counts)> = self
            .routes
            .iter()
            .chain(std::iter::once((&self.other, &self.other_counts)))
            .filter(|(_, c)| c.requests > 0)
            .collect();
        all.sort_by(|a, b| {
            b.1.growth
                .cmp(&a.1.growth)
                .then(b.1.requests.cmp(&a.1.requests))
                .then(a.0.cmp(b.0))
        });
        all.into_iter()
            .take(n)
            .map(|(route, c)| RouteGrowth {
                route: route.to_string(),
                requests: c.requests,
                grew: c.grew,
                growth: c.growth,
            })
            .collect()
    }
}

/// `+12.0 KiB`, `-512 B`: a growth for the log.
pub fn format_growth(bytes: i64) -> String {
    let sign = if bytes < 0 { '-' } else { '+' };
    let abs = bytes.unsigned_abs();
    if abs < 1024 {
        return format!("{sign}{abs} B");
    }
    if abs < 1024 * 1024 {
        return format!("{sign}{:.1} KiB", abs as f64 / 1024.0);
    }
    format!("{sign}{:.1} MiB", abs as f64 / (1024.0 * 1024.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folded(method: &str, target: &str) -> String {
        let mut out = String::new();
        fold(method, target, &mut out);
        out
    }

    #[test]
    fn ids_fold_and_the_query_goes() {
        assert_eq!(folded("GET", "/users/42?tab=posts"), "GET /users/{id}");
        assert_eq!(
            folded("GET", "/users/42/posts/7"),
            "GET /users/{id}/posts/{id}"
        );
        assert_eq!(
            folded("DELETE", "/orders/123e4567-e89b-12d3-a456-426614174000"),
            "DELETE /orders/{id}"
        );
        assert_eq!(
            folded("GET", "/blobs/9f86d081884c7d659a2feaa0c55ad015"),
            "GET /blobs/{id}"
        );
        assert_eq!(
            folded("GET", "/share/dGhpcyBpcyBhIHRva2VuMTIz/view"),
            "GET /share/{id}/view"
        );
        assert_eq!(folded("GET", "/"), "GET /");
        assert_eq!(folded("GET", "?x=1"), "GET /");
        assert_eq!(folded("GET", "/a#frag"), "GET /a");
        assert_eq!(
            folded("GET", "http://example.test/items/5?q"),
            "GET /items/{id}"
        );
        assert_eq!(folded("OPTIONS", "*"), "OPTIONS *");
    }

    #[test]
    fn words_slugs_and_short_hex_stay() {
        for kept in [
            "/api/v2/status",
            "/admin/settings",
            "/blog/how-to-leak-memory",
            "/cafe",
            "/deadbeef",
            "/users/me",
            "/administration-settings-page",
            "/2fa",
            "/index.php",
        ] {
            assert_eq!(folded("GET", kept), format!("GET {kept}"), "{kept}");
        }
    }

    #[test]
    fn long_paths_and_methods_are_cut() {
        let path = format!("/{}", "é".repeat(500));
        let route = folded("GET", &path);
        assert!(route.len() <= ROUTE_MAX_LEN);
        let method = "X".repeat(100);
        assert!(folded(&method, "/").starts_with(&"X".repeat(16)));
        assert!(folded(&method, "/").len() <= 16 + 2);
    }

    #[test]
    fn the_table_is_bounded_and_the_rest_is_other() {
        let mut table = RouteTable::default();
        for i in 0..ROUTE_LIMIT * 4 {
            let key = table.key(&format!("GET /page-{i}"));
            table.record(&key, 10);
        }
        assert_eq!(table.len(), ROUTE_LIMIT);
        let all = table.top(usize::MAX);
        assert_eq!(all.len(), ROUTE_LIMIT + 1);
        let other = all
            .iter()
            .find(|r| r.route == OTHER_ROUTE)
            .expect("an other entry");
        assert_eq!(other.requests, (ROUTE_LIMIT * 3) as u64);
        assert_eq!(all[0].route, OTHER_ROUTE, "other grew most");
        // A route with an entry keeps it once the table is full.
        let key = table.key("GET /page-0");
        assert_eq!(&*key, "GET /page-0");
        // A name that is "other" is counted with other.
        assert_eq!(&*table.key(OTHER_ROUTE), OTHER_ROUTE);
    }

    #[test]
    fn top_routes_are_ordered_by_growth_with_means_and_shares() {
        let mut table = RouteTable::default();
        let leak = table.key("GET /leak");
        let clean = table.key("GET /clean");
        let unmeasured = table.key("GET /never");
        for i in 0..10 {
            table.record(&leak, 4096);
            table.record(&clean, if i % 2 == 0 { 64 } else { -64 });
        }
        let top = table.top(10);
        assert_eq!(top.len(), 2, "{unmeasured} had no measured request");
        assert_eq!(top[0].route, "GET /leak");
        assert_eq!(top[0].growth, 40960);
        assert_eq!(top[0].mean(), 4096);
        assert_eq!(top[0].grew_share(), 1.0);
        assert_eq!(top[1].route, "GET /clean");
        assert_eq!(top[1].mean(), 0);
        assert_eq!(top[1].grew_share(), 0.5);
        assert_eq!(table.top(1).len(), 1);
    }

    #[test]
    fn control_characters_in_names_are_replaced() {
        let mut table = RouteTable::default();
        assert_eq!(&*table.key("evil\nname"), "evil?name");
        assert_eq!(&*table.key("evil\rname"), "evil?name");
        assert_eq!(table.len(), 1);
    }

    #[test]
    fn growth_reads_for_people() {
        assert_eq!(format_growth(0), "+0 B");
        assert_eq!(format_growth(-512), "-512 B");
        assert_eq!(format_growth(12 * 1024), "+12.0 KiB");
        assert_eq!(format_growth(3 * 1024 * 1024 / 2), "+1.5 MiB");
    }
}
