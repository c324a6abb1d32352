//! `[[serve.pool]]`: further pools of one `hearth serve`, each for the
//! requests of some hosts or path prefixes, with its own worker script (or,
//! given a `root` and no `script`, a classic site run by php-fpm), workers,
//! limits and timeouts. What a pool does not set it takes from `[serve]`
//! (and the flags), whose own pool, the default one, takes every request no
//! pool's route matches.
//!
//! ```toml
//! [serve]
//! script = "app/worker.php"
//! workers = 4
//!
//! [[serve.pool]]
//! name = "api"
//! path = ["/api/"]
//! script = "api/worker.php"
//! workers = 8
//! request_timeout = "5s"
//!
//! [[serve.pool]]
//! name = "blog"
//! path = "/blog/"
//! root = "/var/www"              # /blog/x.php is /var/www/blog/x.php
//! ```

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::serve::ServeOptions;
use super::values::{self, EnvVar, Fallback, IndexFiles, Seconds, Size};

/// One `[[serve.pool]]` table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PoolSection {
    /// The pool's name, in logs, `hearth status` and metrics.
    pub name: String,
    /// Host names this pool takes (`api.example.com`, `*.example.com`).
    #[serde(with = "one_or_many")]
    pub host: Vec<String>,
    /// Path prefixes this pool takes (`/api/`), as nginx's `location`.
    #[serde(with = "one_or_many")]
    pub path: Vec<String>,
    /// The pool's worker script (relative to the file).
    pub script: Option<PathBuf>,
    /// The pool's document root, for its static files and `DOCUMENT_ROOT`
    /// (relative to the file) [default: none]. Without a script, the pool
    /// is a classic site: its scripts run in a php-fpm pool of its own.
    pub root: Option<PathBuf>,
    /// A classic pool's index files [default: `[serve]`'s].
    pub index: Option<IndexFiles>,
    /// A classic pool's front controller, or `off` [default: `index.php`
    /// under its first path prefix].
    pub fallback: Option<Fallback>,
    pub workers: Option<usize>,
    pub min_workers: Option<usize>,
    pub scale_down_after: Option<Seconds>,
    pub max_queue: Option<usize>,
    pub queue_timeout: Option<Seconds>,
    pub boot_timeout: Option<Seconds>,
    pub stop_timeout: Option<Seconds>,
    pub request_timeout: Option<Seconds>,
    pub max_requests: Option<u64>,
    pub max_memory: Option<Size>,
    pub ttl: Option<Seconds>,
    pub idle_ttl: Option<Seconds>,
    pub php: Option<PathBuf>,
    pub user: Option<String>,
    pub check_state: Option<bool>,
    /// php.ini settings added to `[serve.ini]`'s.
    #[serde(with = "values::ini_table")]
    pub ini: Vec<(String, String)>,
    /// Environment variables added to `[serve.env]`'s.
    #[serde(with = "values::env_table")]
    pub env: Vec<EnvVar>,
}

/// The keys of a `[[serve.pool]]` table, for the docs.
#[cfg(test)]
pub const KEYS: &[&str] = &[
    "name",
    "host",
    "path",
    "script",
    "root",
    "index",
    "fallback",
    "workers",
    "min_workers",
    "scale_down_after",
    "max_queue",
    "queue_timeout",
    "boot_timeout",
    "stop_timeout",
    "request_timeout",
    "max_requests",
    "max_memory",
    "ttl",
    "idle_ttl",
    "php",
    "user",
    "check_state",
    "ini",
    "env",
];

impl PoolSection {
    /// This pool's options: `base`'s (the `[serve]` section and the
    /// flags), with what the pool sets in their place.
    pub fn options(&self, base: &ServeOptions) -> ServeOptions {
        let mut options = base.clone();
        options.script.clone_from(&self.script);
        options.root.clone_from(&self.root);
        options.pool = Vec::new();
        macro_rules! take {
            ($($field:ident),*) => {
                $(if let Some(value) = &self.$field {
                    options.$field = value.clone().into();
                })*
            };
        }
        take!(
            scale_down_after,
            max_queue,
            queue_timeout,
            boot_timeout,
            stop_timeout,
            request_timeout,
            max_requests,
            max_memory,
            php,
            check_state
        );
        if self.workers.is_some() {
            options.workers = self.workers;
            // A pool that sets its size has its own lower bound too.
            options.min_workers = None;
        }
        if self.min_workers.is_some() {
            options.min_workers = self.min_workers;
        }
        if self.ttl.is_some() {
            options.ttl = self.ttl;
        }
        if self.idle_ttl.is_some() {
            options.idle_ttl = self.idle_ttl;
        }
        if self.user.is_some() {
            options.user.clone_from(&self.user);
        }
        options.ini.extend(self.ini.iter().cloned());
        options.env.extend(self.env.iter().cloned());
        if let Some(index) = &self.index {
            options.index = index.clone();
        }
        options.fallback = match &self.fallback {
            Some(fallback) => fallback.clone(),
            // nginx's `try_files $uri $uri/ /blog/index.php?$args` for a
            // site under /blog/: its own front controller.
            None => match self.path.first() {
                Some(prefix) if self.is_classic() => {
                    Fallback::Script(format!("{}/index.php", prefix.trim_end_matches('/')))
                }
                _ => options.fallback,
            },
        };
        options
    }

    /// Whether the pool is a classic site: a root and no worker script.
    pub fn is_classic(&self) -> bool {
        self.script.is_none() && self.root.is_some()
    }

    /// Makes the paths relative to the file's directory `dir` absolute.
    pub fn paths_from_file(&mut self, dir: &Path) {
        for path in [&mut self.script, &mut self.root].into_iter().flatten() {
            if path.is_relative() {
                *path = dir.join(&*path);
            }
        }
    }

    /// Host names as they are matched: lowercase, without a final dot.
    pub fn hosts(&self) -> Vec<String> {
        self.host
            .iter()
            .map(|h| h.trim_end_matches('.').to_ascii_lowercase())
            .collect()
    }
}

/// Why the pools cannot be used, if they cannot: each needs a name of its
/// own, a worker script (or a root) and a route, and `base` must have a
/// worker script of its own in worker mode, or a root without one (the
/// default pool is then a classic site), not a mixed site.
pub fn fault(pools: &[PoolSection], base: &ServeOptions) -> Option<String> {
    if pools.is_empty() {
        return None;
    }
    if base.script.is_none() && base.root.is_none() {
        return Some(
            "needs a worker script (script) or a document root (root, a classic site) in \
             [serve]: its pool takes the requests no [[serve.pool]] route matches"
                .to_owned(),
        );
    }
    let mut names = vec!["default"];
    for pool in pools {
        let name = &pool.name;
        let valid = !name.is_empty()
            && name.len() <= 64
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !valid {
            return Some(format!(
                "name {name:?}: a pool needs a name of 1 to 64 letters, digits, - or _"
            ));
        }
        if names.contains(&name.as_str()) {
            return Some(format!(
                "name {name:?} is taken{}",
                if name == "default" {
                    " (by the pool of [serve])"
                } else {
                    ""
                }
            ));
        }
        names.push(name);
        let why = pool_fault(pool, &pool.options(base));
        if let Some(why) = why {
            return Some(format!("{name}: {why}"));
        }
    }
    None
}

fn pool_fault(pool: &PoolSection, options: &ServeOptions) -> Option<String> {
    if pool.script.is_none() && pool.root.is_none() {
        return Some(
            "needs a worker script (script), or a document root (root) for a classic site"
                .to_owned(),
        );
    }
    if pool.is_classic() {
        let worker_only = [
            ("php", pool.php.is_some()),
            ("check_state", pool.check_state.is_some()),
            ("boot_timeout", pool.boot_timeout.is_some()),
            ("scale_down_after", pool.scale_down_after.is_some()),
            ("idle_ttl", pool.idle_ttl.is_some()),
        ];
        if let Some((key, _)) = worker_only.iter().find(|(_, set)| *set) {
            return Some(format!(
                "{key} is for worker pools: this pool has a root and no script, a classic \
                 site run by php-fpm (php_fpm in [serve] names its binary)"
            ));
        }
        if let Some(why) = options.fallback.fault() {
            return Some(format!("fallback {why}"));
        }
        if let Some(why) = options.index.fault() {
            return Some(format!("index: {why}"));
        }
    } else if pool.index.is_some() || pool.fallback.is_some() {
        return Some(
            "index and fallback are for a classic pool (a root and no script); a worker \
             script routes its own requests"
                .to_owned(),
        );
    }
    if pool.host.is_empty() && pool.path.is_empty() {
        return Some(
            "needs a route: the hosts (host) or path prefixes (path) whose requests it takes"
                .to_owned(),
        );
    }
    for prefix in &pool.path {
        let rule = values::RouteRule {
            prefix: prefix.clone(),
            to: values::RouteTo::Worker,
        };
        if let Some(why) = rule.fault() {
            return Some(format!("path {why}"));
        }
    }
    for host in pool.hosts() {
        let name = host.strip_prefix("*.").unwrap_or(&host);
        let valid = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
        if !valid {
            return Some(format!(
                "host {host:?} is not a host name (or *.name for every name under it); \
                 without a port"
            ));
        }
    }
    if options.workers == Some(0) {
        return Some("workers must be at least 1".to_owned());
    }
    let workers = options.workers();
    if let Some(min) = options.min_workers {
        if min == 0 || min > workers {
            return Some(format!(
                "min_workers must be between 1 and workers ({workers}), not {min}"
            ));
        }
    }
    for (name, _) in &pool.ini {
        if let Some(why) = values::bad_ini_name(name) {
            return Some(format!("ini: {why}"));
        }
    }
    pool.env
        .iter()
        .find_map(EnvVar::fault)
        .map(|why| format!("env: {why}"))
}

/// A key that takes one string or a list of them.
mod one_or_many {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
        Ok(match OneOrMany::deserialize(d)? {
            OneOrMany::One(one) => vec![one],
            OneOrMany::Many(many) => many,
        })
    }

    pub fn serialize<S: Serializer>(list: &[String], s: S) -> Result<S::Ok, S::Error> {
        list.serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Vec<PoolSection> {
        #[derive(Deserialize)]
        struct File {
            pool: Vec<PoolSection>,
        }
        toml::from_str::<File>(text).expect("parses").pool
    }

    fn base() -> ServeOptions {
        ServeOptions {
            script: Some("/app/worker.php".into()),
            workers: Some(4),
            min_workers: Some(2),
            ..ServeOptions::default()
        }
    }

    #[test]
    fn a_pool_takes_what_it_sets_and_the_rest_from_serve() {
        let pools = parse(
            r#"
            [[pool]]
            name = "api"
            path = "/api/"
            script = "/api/worker.php"
            request_timeout = "5s"
            ini = { memory_limit = "64M" }
            "#,
        );
        assert_eq!(pools[0].path, ["/api/"]);
        let options = pools[0].options(&base());
        assert_eq!(
            options.script.as_deref(),
            Some(Path::new("/api/worker.php"))
        );
        assert_eq!(options.workers, Some(4));
        assert_eq!(options.min_workers, Some(2));
        assert_eq!(options.request_timeout, Seconds::from_secs(5));
        assert_eq!(options.ini, [("memory_limit".to_owned(), "64M".to_owned())]);
        assert_eq!(fault(&pools, &base()), None);
        // Its own size: its own lower bound, all of it unless it says.
        let pools = parse(
            r#"
            [[pool]]
            name = "api"
            host = ["API.example.com", "*.api.example.com"]
            script = "/api/worker.php"
            workers = 8
            "#,
        );
        let options = pools[0].options(&base());
        assert_eq!((options.workers(), options.min_workers()), (8, 8));
        assert_eq!(pools[0].hosts(), ["api.example.com", "*.api.example.com"]);
    }

    #[test]
    fn a_pool_with_a_root_and_no_script_is_a_classic_site_with_its_own_front_controller() {
        let pools = parse(
            r#"
            [[pool]]
            name = "blog"
            path = ["/blog/", "/news/"]
            root = "/var/www"
            "#,
        );
        assert!(pools[0].is_classic());
        let options = pools[0].options(&base());
        assert_eq!(options.fallback, Fallback::Script("/blog/index.php".into()));
        assert_eq!(fault(&pools, &base()), None);
        // Its own, when it names one; a host-only pool's is /index.php.
        let pools = parse(
            r#"
            [[pool]]
            name = "blog"
            host = "blog.example.com"
            root = "/var/www"
            index = "index.html"
            "#,
        );
        let options = pools[0].options(&base());
        assert_eq!(options.fallback, Fallback::default());
        assert_eq!(options.index.0, ["index.html"]);
        let pools = parse(
            r#"
            [[pool]]
            name = "blog"
            path = "/blog/"
            root = "/var/www"
            fallback = "off"
            "#,
        );
        assert_eq!(pools[0].options(&base()).fallback, Fallback::Off);
        // A worker pool keeps [serve]'s.
        let pools = parse(
            r#"
            [[pool]]
            name = "api"
            path = "/api/"
            script = "/api/worker.php"
            root = "/api/public"
            "#,
        );
        assert!(!pools[0].is_classic());
        assert_eq!(pools[0].options(&base()).fallback, Fallback::default());
    }

    /// Every key of a pool is one the docs' table of pool keys names.
    #[test]
    fn the_docs_name_every_key_of_a_pool() {
        let value = serde_json::to_value(PoolSection::default()).expect("serializes");
        let mut keys: Vec<&str> = value
            .as_object()
            .expect("a table")
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        let mut listed = KEYS.to_vec();
        listed.sort_unstable();
        assert_eq!(keys, listed);
        let docs = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/configuration.md"),
        )
        .expect("docs/configuration.md");
        let start = docs.find("## Several pools").expect("the section");
        let end = start + docs[start..].find("\n## ").expect("its end");
        let table: Vec<&str> = docs[start..end]
            .lines()
            .filter(|l| l.starts_with("| `"))
            .collect();
        for key in KEYS {
            assert!(
                table.iter().any(|l| l
                    .split('|')
                    .nth(1)
                    .is_some_and(|c| c.contains(&format!("`{key}`")))),
                "docs/configuration.md's pool keys lack `{key}`"
            );
        }
    }

    #[test]
    fn pools_that_cannot_work_are_refused_with_their_reason() {
        let cases = [
            (
                "name = \"\"\nscript = \"/w.php\"\npath = \"/a/\"",
                "needs a name",
            ),
            (
                "name = \"default\"\nscript = \"/w.php\"\npath = \"/a/\"",
                "taken (by the pool of [serve])",
            ),
            ("name = \"a\"\npath = \"/a/\"", "a: needs a worker script"),
            ("name = \"a\"\nscript = \"/w.php\"", "a: needs a route"),
            (
                "name = \"a\"\nscript = \"/w.php\"\npath = \"a/\"",
                "must start with /",
            ),
            (
                "name = \"a\"\nscript = \"/w.php\"\npath = \"/a/../b\"",
                "normalized",
            ),
            (
                "name = \"a\"\nscript = \"/w.php\"\nhost = \"a.com:80\"",
                "is not a host name",
            ),
            (
                "name = \"a\"\nscript = \"/w.php\"\npath = \"/a/\"\nworkers = 0",
                "at least 1",
            ),
            (
                "name = \"a\"\nscript = \"/w.php\"\npath = \"/a/\"\nmin_workers = 9",
                "between 1 and workers (4)",
            ),
        ];
        for (table, expected) in cases {
            let pools = parse(&format!("[[pool]]\n{table}\n"));
            let why = fault(&pools, &base()).unwrap_or_default();
            assert!(why.contains(expected), "{table:?}: {why:?}");
        }
        let twice = parse(
            "[[pool]]\nname = \"a\"\nscript = \"/w.php\"\npath = \"/a/\"\n\
             [[pool]]\nname = \"a\"\nscript = \"/w.php\"\npath = \"/b/\"\n",
        );
        assert!(fault(&twice, &base()).is_some_and(|w| w.contains("taken")));
        let one = parse("[[pool]]\nname = \"a\"\nscript = \"/w.php\"\npath = \"/a/\"\n");
        let no_script = ServeOptions {
            script: None,
            ..base()
        };
        assert!(fault(&one, &no_script)
            .is_some_and(|w| w.contains("needs a worker script (script) or a document root")));
        // A root without a script: the default pool is a classic site.
        let classic_default = ServeOptions {
            script: None,
            root: Some("/var/www".into()),
            ..base()
        };
        assert_eq!(fault(&one, &classic_default), None);
        // A mixed site as the default pool.
        let mixed = ServeOptions {
            root: Some("/var/www".into()),
            ..base()
        };
        assert_eq!(fault(&one, &mixed), None);
    }
}
