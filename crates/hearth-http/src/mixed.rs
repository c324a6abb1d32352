//! Mixed sites: a worker script and a document root together. The front
//! controller runs in the warm workers; every other `.php` entry of the
//! site (`/wp-login.php`, `/admin/legacy.php`) runs in a php-fpm pool,
//! with PHP's own request lifecycle, as classic mode runs it.
//!
//! Each request is routed by the classic router ([`ClassicSite`]) whose
//! front controller (`try_files ... /index.php?$query_string`) is the
//! worker script's path under the root. A route to that script (`/`,
//! `/index.php`, `/index.php/x`, a miss) goes to the workers, as worker
//! mode sends it; the rest (another `.php`, a static file, a redirect, a
//! 403 or 404) is answered as classic mode answers it. Prefix routes
//! ([`Area`]) override this for the paths under them: the longest prefix
//! wins.

use std::sync::Arc;

use hearth_classic::route::is_php_location;
use hearth_classic::Route;
use http::request::Parts;
use http::Response;

use crate::classic::{self, ClassicSite, Routed};
use crate::response::ResponseBody;

/// Where the requests under a prefix go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Area {
    /// To the workers, as worker mode sends them: a static file from the
    /// root, else the worker script.
    Worker,
    /// Routed as classic mode routes them: the front controller runs in
    /// php-fpm too.
    Classic,
}

/// A mixed site: the classic site (its router and php-fpm pool), its front
/// controller, and the prefix routes.
#[derive(Debug)]
pub struct MixedSite {
    site: Arc<ClassicSite>,
    /// The front controller's path under the root (`/index.php`): what
    /// routes to it goes to the workers.
    front: Vec<u8>,
    /// Prefix routes, longest prefix first.
    areas: Vec<(Vec<u8>, Area)>,
}

/// What to do with one request of a mixed site.
#[derive(Debug)]
pub(crate) enum Decision {
    /// Hand it to the workers; with `static_first`, a static file under the
    /// root is sent first, as worker mode does.
    Worker { static_first: bool },
    /// Answer it as classic mode does.
    Classic(Routed),
    /// Answered already (a path nginx refuses).
    Answer(Response<ResponseBody>),
}

impl MixedSite {
    /// A mixed site on `site`, whose router's front controller (its
    /// fallback) is `front`, with prefix routes `areas` (each prefix a
    /// normalized path starting with `/`).
    pub fn new(site: Arc<ClassicSite>, front: &str, areas: Vec<(String, Area)>) -> MixedSite {
        let mut areas: Vec<(Vec<u8>, Area)> = areas
            .into_iter()
            .map(|(prefix, area)| (prefix.into_bytes(), area))
            .collect();
        // Longest first; of two equal prefixes, the last given wins.
        areas.reverse();
        areas.sort_by_key(|(prefix, _)| std::cmp::Reverse(prefix.len()));
        MixedSite {
            site,
            front: front.as_bytes().to_vec(),
            areas,
        }
    }

    /// The classic site (php-fpm, the router).
    pub fn site(&self) -> &Arc<ClassicSite> {
        &self.site
    }

    /// Where one request goes.
    pub(crate) fn decide(&self, parts: &Parts) -> Decision {
        let (uri, query) = match classic::request_uri(parts) {
            Ok(target) => target,
            Err(status) => return Decision::Answer(crate::response::error_page(status)),
        };
        let area = self
            .areas
            .iter()
            .find(|(prefix, _)| uri.starts_with(prefix))
            .map(|(_, area)| *area);
        match area {
            Some(Area::Worker) => Decision::Worker { static_first: true },
            Some(Area::Classic) => Decision::Classic(self.site.route(uri, &query)),
            None => {
                let routed = self.site.route(uri, &query);
                if self.is_front(&routed) {
                    Decision::Worker {
                        static_first: false,
                    }
                } else {
                    Decision::Classic(routed)
                }
            }
        }
    }

    /// Whether a request routed so runs the front controller: its script
    /// is the front controller's, or it is a miss (or the front controller
    /// by name) while the front controller is no file under the root (the
    /// worker script lives outside it), or it is `/` and the root has no
    /// index file (nginx's 403 there).
    fn is_front(&self, routed: &Routed) -> bool {
        match &routed.route {
            Route::Php(target) => target.script_name == self.front,
            Route::Forbidden => routed.uri == b"/",
            Route::NotFound => {
                let by_name = routed.uri.strip_prefix(self.front.as_slice());
                !is_php_location(&routed.uri)
                    || by_name.is_some_and(|rest| rest.is_empty() || rest.starts_with(b"/"))
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use super::*;

    fn mixed(root: &Path, front: &str, areas: &[(&str, Area)]) -> MixedSite {
        let options = hearth_classic::Options {
            fallback: Some(front.to_owned()),
            ..hearth_classic::Options::default()
        };
        let classic = ClassicSite::new(
            root,
            options,
            "/nonexistent.sock".into(),
            hearth_fpm::fastcgi::Limits::default(),
            (1, Duration::from_secs(1)),
        )
        .expect("site");
        let areas = areas.iter().map(|(p, a)| ((*p).to_owned(), *a)).collect();
        MixedSite::new(Arc::new(classic), front, areas)
    }

    /// Where `path` goes: "worker", "worker+static", "php SCRIPT_NAME",
    /// or the classic route's kind.
    fn goes(site: &MixedSite, path: &str) -> String {
        let (parts, ()) = http::Request::builder()
            .uri(path)
            .body(())
            .expect("request")
            .into_parts();
        match site.decide(&parts) {
            Decision::Worker { static_first: true } => "worker+static".into(),
            Decision::Worker {
                static_first: false,
            } => "worker".into(),
            Decision::Answer(r) => format!("answer {}", r.status().as_u16()),
            Decision::Classic(routed) => match routed.route {
                Route::Php(t) => format!("php {}", String::from_utf8_lossy(&t.script_name)),
                Route::Static(_) => "static".into(),
                Route::Redirect(_) => "redirect".into(),
                Route::NotFound => "404".into(),
                Route::Forbidden => "403".into(),
                Route::BadRequest => "400".into(),
            },
        }
    }

    fn root_with(files: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        for file in files {
            let path = dir.path().join(file);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(path, "<?php\n").expect("write");
        }
        dir
    }

    #[test]
    fn the_front_controller_goes_to_the_workers_and_other_scripts_to_php_fpm() {
        let root = root_with(&["index.php", "legacy.php", "admin/old.php", "a.txt"]);
        let site = mixed(root.path(), "/index.php", &[]);
        for (path, expected) in [
            ("/", "worker"),
            ("/index.php", "worker"),
            ("/index.php/x/y", "worker"),
            ("/no/such/page?q=1", "worker"),
            ("/legacy.php", "php /legacy.php"),
            ("/legacy.php/more", "php /legacy.php"),
            ("/admin/old.php", "php /admin/old.php"),
            ("/admin", "redirect"),
            ("/a.txt", "static"),
            ("/missing.php", "404"),
            ("/%2e%2e/x", "answer 400"),
        ] {
            assert_eq!(goes(&site, path), expected, "{path}");
        }
    }

    #[test]
    fn the_longest_prefix_wins_and_matches_the_normalized_path() {
        let root = root_with(&["index.php", "legacy.php", "admin/old.php"]);
        let site = mixed(
            root.path(),
            "/index.php",
            &[
                ("/admin/", Area::Worker),
                ("/admin/old", Area::Classic),
                ("/reports/", Area::Classic),
            ],
        );
        for (path, expected) in [
            ("/admin/old.php", "php /admin/old.php"),
            ("/admin/new.php", "worker+static"),
            ("/admin/x/../old.php", "php /admin/old.php"),
            ("/reports/q3", "php /index.php"),
            ("/reports/../legacy.php", "php /legacy.php"),
            ("/", "worker"),
        ] {
            assert_eq!(goes(&site, path), expected, "{path}");
        }
    }

    #[test]
    fn with_the_worker_script_outside_the_root_index_php_is_its_stand_in() {
        // public/index.php, the app's classic twin: what routes to it, and
        // every miss, goes to the workers.
        let root = root_with(&["index.php", "legacy.php"]);
        let site = mixed(root.path(), "/index.php", &[]);
        assert_eq!(goes(&site, "/hello/ann"), "worker");
        assert_eq!(goes(&site, "/legacy.php"), "php /legacy.php");
        // No index.php at all: misses and the front controller by name
        // still go to the workers, `/` too (nginx's 403 without an index).
        let root = root_with(&["legacy.php"]);
        let site = mixed(root.path(), "/index.php", &[]);
        for path in ["/", "/hello/ann", "/index.php", "/index.php/x"] {
            assert_eq!(goes(&site, path), "worker", "{path}");
        }
        assert_eq!(goes(&site, "/missing.php"), "404");
        assert_eq!(goes(&site, "/legacy.php"), "php /legacy.php");
    }
}
