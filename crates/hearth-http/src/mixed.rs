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
            Err(refused) => return Decision::Answer(refused),
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
