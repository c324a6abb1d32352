//! A supervised pool of warm PHP worker processes.
//!
//! Each worker is a PHP process (`php-cgi` by default) running the app's
//! worker script, which boots the app once and then serves requests through
//! `Hearth\Worker::serve()`. The pool keeps the configured number of them
//! alive, hands each request to exactly one idle worker ([`Pool::dispatch`]),
//! replaces workers that exit or crash at once, backs off while a broken
//! script fails to boot or its workers die on the requests they are given
//! (`health`), grows between `min_workers` and `workers` a few boots at a
//! time within a memory budget (`max_booting`, `max_pool_memory`), and
//! stops them politely, then firmly ([`Pool::shutdown`]).
//!
//! # Modules
//!
//! From the public face down; each imports only modules below it (a test
//! checks it), so no two depend on each other.
//!
//! - `scripted`: unit tests of the pool against scripted fake workers
//!   (tests only).
//! - `pool`: [`Pool`], the public face: start, status, reload, shutdown.
//! - `reload`: replacing every worker with one running the code as it is now.
//! - `fresh`: debug mode: a worker booted for each request, with the
//!   request's Xdebug triggers in its environment, and stopped after it.
//! - `supervisor`: one slot's loop: boot a worker, install it, watch it,
//!   replace it when asked, back off while boots fail.
//! - `boot`: starting a worker process and waiting for its handshake.
//! - `sweep`: stopping idle workers past `idle_ttl`, `ttl` or
//!   `scale_down_after` without waiting for a request.
//! - `dispatch`: a request's way to a worker: an idle one, a place in
//!   line, or a place queued behind the request a worker runs.
//! - `lease`: [`Lease`], a worker lent to one request, and what becomes of
//!   the worker when the lease ends.
//! - `recycle`: workers into the line and out of the pool: installing a
//!   booted worker, releasing one after each request, replacing one worn
//!   out (`max_requests`, `ttl`, `max_memory`), reading out an abandoned
//!   response.
//! - `shared`: the state the pool's tasks share.
//! - `health`: crash loops on requests: workers that boot but die on the
//!   requests they are given, and the backoff that follows.
//! - `line`: the idle workers and the requests waiting for one (a data
//!   structure, no I/O).
//! - `process`: starting a PHP process and forwarding what it prints.
//! - `php`: [`PhpInfo`], the PHP binary's probe, and a worker's command line.
//! - `worker`: one worker as the pool sees it: its shared bookkeeping and
//!   the handle a request holds.
//! - `channel`: Hearth's end of a worker's channel.
//! - `observe`: why workers were replaced, and worker snapshots.
//! - `routes`: memory growth by route: naming requests (ids folded) and
//!   the bounded table of counts (a data structure, no I/O).
//! - `paths`: [`Paths`], where workers run the app from.
//! - `access`: whether the workers' user can reach the app's files.
//! - `config`: [`PoolConfig`] and [`WorkerUser`].
//! - `error`: [`Error`], with a kind that decides what a client is told.

mod access;
mod boot;
mod channel;
mod config;
mod dispatch;
mod error;
mod fresh;
mod health;
mod lease;
mod line;
mod observe;
mod paths;
mod php;
mod pool;
mod process;
mod recycle;
mod reload;
mod routes;
#[cfg(test)]
mod scripted;
mod shared;
mod supervisor;
mod sweep;
mod worker;

pub use config::{Account, Extension, PoolConfig, WorkerUser};
pub use error::Error;
pub use fresh::Fresh;
pub use health::{Failing, FailureCause, READY_AGAIN_AFTER};
pub use lease::Lease;
pub use observe::{PastWorker, RestartReason, StartReason, WorkerInfo, WorkerState, PAST_WORKERS};
pub use paths::Paths;
pub use php::PhpInfo;
pub use pool::{Pool, PoolStatus};
pub use routes::{
    fold, format_growth, is_id, RouteGrowth, ID, OTHER_ROUTE, ROUTE_LIMIT, ROUTE_MAX_LEN,
};

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    /// The module map in the crate doc is in order: a module imports only
    /// modules listed below it, so no two modules depend on each other.
    /// An item the crate root re-exports (`crate::Error`) counts as an
    /// import of the module it comes from.
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
        assert_eq!(
            listed.len(),
            map.len(),
            "the module map lists every module once"
        );
        let exported = reexports(&lib);
        assert!(exported.get("Lease").is_some_and(|m| m == "lease"));
        for (at, module) in map.iter().enumerate() {
            let text = std::fs::read_to_string(src.join(format!("{module}.rs"))).expect("module");
            let code: String = text
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join("\n");
            for used in imported_modules(&code) {
                let used = exported.get(&used).cloned().unwrap_or(used);
                if let Some(to) = map.iter().position(|m| *m == used) {
                    assert!(to >= at, "{module} imports {used}, listed above it");
                }
            }
        }
    }

    #[test]
    fn imports_are_found_in_paths_and_brace_lists() {
        let code = "use crate::a::X;\nuse crate::{b::{Y, Z}, c, Error};\nlet _ = crate::d::f();";
        assert_eq!(imported_modules(code), ["a", "b", "c", "Error", "d"]);
        let lib = "pub use error::Error;\npub use pool::{Pool, PoolStatus};
pub use routes::{fold, format_growth, is_id, RouteGrowth, ID, OTHER_ROUTE, ROUTE_LIMIT, ROUTE_MAX_LEN};\n";
        let exported = reexports(lib);
        assert_eq!(exported["Error"], "error");
        assert_eq!(exported["PoolStatus"], "pool");
    }

    /// Items the crate root re-exports, and the module each comes from.
    fn reexports(lib: &str) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for line in lib.lines() {
            let Some(rest) = line.strip_prefix("pub use ") else {
                continue;
            };
            let Some((module, items)) = rest.trim_end_matches(';').split_once("::") else {
                continue;
            };
            for item in items.trim_matches(|c| c == '{' || c == '}').split(',') {
                out.insert(item.trim().to_owned(), module.to_owned());
            }
        }
        out
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
