//! Starting a worker process and waiting for its handshake.

use std::ffi::OsString;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hearth_proto::message::Ready;
use hearth_proto::Kind;
use tokio::process::Child;

use crate::process::{self, Spawned};
use crate::shared::{lock, Shared};
use crate::worker::{Worker, WorkerShared};
use crate::{Error, Paths};

/// Clears a slot's booting mark when dropped.
struct Booting<'a>(Option<&'a std::sync::Mutex<Option<(u32, Instant)>>>);

impl Drop for Booting<'_> {
    fn drop(&mut self) {
        if let Some(mark) = self.0 {
            *lock(mark) = None;
        }
    }
}

/// Starts a worker running the app from `paths` and waits for its
/// handshake, or for it to exit. With a slot, status reports show the
/// worker as booting in it meanwhile.
pub(crate) async fn boot(
    shared: &Shared,
    slot: Option<usize>,
    paths: Arc<Paths>,
) -> Result<(Worker, Child), Error> {
    boot_with(shared, slot, paths, &[], Some(shared.config.boot_timeout)).await
}

/// [`boot`] with `env` added to the worker's environment, waiting up to
/// `timeout` for its handshake (`None`: as long as it takes, for a worker
/// a debugger may hold in the app's boot code).
pub(crate) async fn boot_with(
    shared: &Shared,
    slot: Option<usize>,
    paths: Arc<Paths>,
    env: &[(OsString, OsString)],
    timeout: Option<Duration>,
) -> Result<(Worker, Child), Error> {
    let config = &shared.config;
    let Spawned {
        mut child,
        pid,
        channel,
        output,
        forwarders,
    } = process::spawn(config, &shared.php, &paths, env)?;
    let _booting = Booting(slot.map(|slot| {
        let mark = &shared.booting[slot];
        *lock(mark) = Some((pid, Instant::now()));
        mark
    }));
    let script = paths.script.clone();
    let mut worker = Worker::new(WorkerShared::new(pid, channel, paths), config.max_payload);
    // Registered before the check, so a stop between the two is not missed.
    let stop = shared.stop.notified();
    tokio::pin!(stop);
    stop.as_mut().enable();
    if shared.stopping.load(Ordering::Acquire) {
        let _ = child.start_kill();
        let _ = child.wait().await;
        return Err(Error::boot("stopped while booting"));
    }
    // A year stands for no limit.
    let limit = timeout.unwrap_or(Duration::from_secs(365 * 24 * 3600));
    let handshake = tokio::time::timeout(limit, worker.read_frame());
    let failure = tokio::select! {
        result = handshake => match result {
            Ok(Ok(frame)) if frame.kind == Kind::Ready => match Ready::decode(&frame.payload) {
                Ok(ready) if ready.protocol == u32::from(hearth_proto::VERSION) => {
                    worker.ready = Arc::new(ready);
                    tracing::debug!(
                        pid,
                        "worker booted in {} ms",
                        worker.started.elapsed().as_millis()
                    );
                    worker.started = tokio::time::Instant::now();
                    output.release();
                    return Ok((worker, child));
                }
                Ok(ready) => format!(
                    "the worker's PHP library speaks protocol {} but this hearth speaks {}; \
                     use the PHP library that came with this hearth",
                    ready.protocol,
                    hearth_proto::VERSION
                ),
                Err(e) => format!("bad handshake: {e}"),
            },
            Ok(Ok(frame)) => format!("expected a ready handshake, got a {:?} frame", frame.kind),
            Ok(Err(e)) if e.is_worker_lost() => String::new(),
            Ok(Err(e)) => format!("handshake failed: {e}"),
            Err(_) => format!(
                "no ready handshake within {:?} ({})",
                limit,
                config.boot_hint
            ),
        },
        _ = child.wait() => String::new(),
        _ = &mut stop => "stopped while booting".to_owned(),
    };
    let exited = failure.is_empty();
    let status = if exited {
        // The worker exited (or closed its end) before the handshake.
        child.wait().await
    } else {
        let _ = child.start_kill();
        child.wait().await
    };
    // What it printed, all of it: the pipes close when it is gone.
    for f in forwarders {
        let _ = tokio::time::timeout(Duration::from_secs(1), f).await;
    }
    let stopped = failure == "stopped while booting";
    if stopped {
        // Not a failure of the script: what it printed goes to the log.
        output.release();
        return Err(Error::boot(format!("{}: {failure}", script.display())));
    }
    let printed = output.take_for_error().join("\n");
    let said = |text: &str| {
        if printed.is_empty() {
            format!("{text}; it printed nothing")
        } else {
            format!("{text}:\n{printed}")
        }
    };
    Err(Error::boot(match &status {
        Ok(status) if exited && status.success() => format!(
            "{} exited without calling {}. {}{}",
            script.display(),
            config.entry_point,
            config.entry_help,
            if printed.is_empty() {
                " It printed nothing.".to_owned()
            } else if !printed.contains('\n') && printed.len() <= 200 {
                format!(" It printed {printed:?}.")
            } else {
                format!("\nIt printed:\n{printed}")
            }
        ),
        _ if exited => said(&format!(
            "{} exited while booting ({})",
            script.display(),
            describe(&status)
        )),
        _ => said(&format!("{}: {failure}", script.display())),
    }))
}

/// How a worker's process ended, for the log.
pub(crate) fn describe(status: &std::io::Result<std::process::ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Ok(s) => match (s.code(), s.signal()) {
            (Some(code), _) => format!("exit status {code}"),
            (None, Some(sig)) => format!("killed by signal {sig}"),
            _ => s.to_string(),
        },
        Err(e) => format!("status unknown: {e}"),
    }
}
