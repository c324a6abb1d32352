//! Replacing every worker with one running the code as it is now.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::boot::{boot, boot_with};
use crate::observe::RestartReason;
use crate::shared::{lock, Shared};
use crate::worker::{NO_REPLACEMENT, REPLACEMENT_FAILED};
use crate::{Error, Paths};

/// Resolves the app's paths again, boots a trial worker from them, and
/// if it boots, has each slot's supervisor replace its worker, one slot at
/// a time (see [`crate::Pool::reload`]). Returns the paths the workers now
/// run from.
pub(crate) async fn reload(s: &Arc<Shared>) -> Result<Arc<Paths>, Error> {
    if s.stopping.load(Ordering::Acquire) {
        return Err(Error::unavailable("the pool is stopping"));
    }
    let resolved = Paths::resolve(&s.config)?;
    let paths = match s.paths() {
        same if *same == resolved => same,
        _ => Arc::new(resolved),
    };
    // In debug mode Xdebug stays off in the trial: no debugger session,
    // no profile for a worker that serves nothing.
    let (trial, mut child) = if s.config.debug {
        let off = [("XDEBUG_MODE".into(), "off".into())];
        boot_with(s, None, paths.clone(), &off, Some(s.config.boot_timeout)).await?
    } else {
        boot(s, None, paths.clone()).await?
    };
    trial.stop();
    if tokio::time::timeout(s.config.stop_timeout, child.wait())
        .await
        .is_err()
    {
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
    drop(trial);
    // Workers that died on requests may have been fixed: the next request
    // tries at once instead of after the backoff.
    s.health.retry_now();
    // Replacements booted from here on, by this reload or later, run
    // from the new paths.
    s.set_paths(paths.clone());
    if s.config.debug {
        // Each request boots its own worker, from these paths from now
        // on; a request running finishes in the worker it has.
        return Ok(paths);
    }
    for slot in &s.slots {
        let Some(old) = lock(slot).clone() else {
            // Booting or failing to: it gets the new code anyway.
            continue;
        };
        // The slot's supervisor boots the replacement while this
        // worker serves on, then retires it.
        old.set_reason(RestartReason::Reload);
        old.set_replacement_state(NO_REPLACEMENT);
        old.want_replacement();
        let deadline = tokio::time::Instant::now()
            + s.config.stop_timeout
            + s.config.kill_timeout
            + s.config.boot_timeout;
        loop {
            let notified = s.ready_notify.notified();
            let current = lock(slot).clone();
            if current
                .as_ref()
                .is_some_and(|w| w.pid != old.pid && !w.is_dead())
            {
                break;
            }
            if s.stopping.load(Ordering::Acquire) {
                return Err(Error::unavailable("the pool is stopping"));
            }
            let replacement_failed = old.replacement_state() == REPLACEMENT_FAILED;
            if replacement_failed || (current.is_none() && s.failing.load(Ordering::Acquire) > 0) {
                return Err(Error::boot(format!(
                    "a new worker failed to boot during the reload; the workers not yet replaced keep serving: {}",
                    lock(&s.last_boot_error).clone().unwrap_or_default()
                )));
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::boot(
                    "a worker was not replaced in time during the reload",
                ));
            }
            // Woken by the handover; the check for a failed boot polls.
            let _ = tokio::time::timeout(Duration::from_millis(50), notified).await;
        }
    }
    Ok(paths)
}
