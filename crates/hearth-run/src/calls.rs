//! Synchronous calls (`hearth work --listen unix:PATH`): a PHP process
//! (php-fpm, the CLI, a Hearth worker) hands a function call to a warm job
//! worker over a unix socket and waits for its value (`Hearth\Jobs::call`).
//!
//! The conversation is Hearth's frame protocol (`hearth-proto`,
//! docs/protocol.md), one call at a time per connection, as many
//! connections as `max_connections`:
//!
//! - the caller sends a `Call` frame whose fields are `function`, `args`
//!   (a JSON array or object) and, optionally, `timeout_ms`;
//! - Hearth answers with a `Result` frame of the same id whose field
//!   `json` is `{"status":0,"result":...}`, or, when the call failed,
//!   `{"status":1,"error":{class, message, code, file, line, trace}}`
//!   (`status` null, with `signal` and `timed_out`, when its worker died
//!   or it was stopped);
//! - a frame Hearth cannot take (not a call, too large, malformed) gets an
//!   `Error` frame with a `message` field, and the connection is closed;
//!   so does a connection past `max_connections`, before it is read.
//!
//! A call runs as a PHP job of `hearth run` runs (the same [`Executor`]):
//! on a free worker of the pool, or after waiting for one. Its time limit
//! (the caller's `timeout_ms`, at most `max_timeout`) counts from when the
//! call arrived, the wait for a worker included: a call still waiting
//! then is answered at once, and one still running gets its worker
//! stopped and replaced, as a job past its timeout does.
//!
//! Every wait has a bound: a connection with no call in progress is
//! closed after `idle_timeout`, a frame must arrive whole within
//! `read_timeout` of its first byte, and an answer the caller does not
//! read within `write_timeout` drops the connection.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use hearth_proto::fields::{self, Fields};
use hearth_proto::{begin_frame, end_frame, Frame, FrameDecoder, Kind};
use serde_json::value::RawValue;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::watch;

use crate::executor::Executor;
use crate::output::{signal_name, ErrorValue, Outcome};
use crate::task::{Task, Work};

/// How the listener runs; [`Default`] holds the documented defaults.
#[derive(Debug, Clone)]
pub struct CallConfig {
    /// Connections held at once; one more is told it is busy and closed.
    pub max_connections: usize,
    /// The largest call frame taken (its function name and arguments).
    pub max_call: u32,
    /// A call's time limit when the caller gives none.
    pub default_timeout: Duration,
    /// The longest time limit a caller may ask for (`--timeout`, when set).
    pub max_timeout: Option<Duration>,
    /// A connection with no call in progress is closed after this long.
    pub idle_timeout: Duration,
    /// A frame must arrive whole within this long of its first byte.
    pub read_timeout: Duration,
    /// An answer must be taken by the caller within this long.
    pub write_timeout: Duration,
    /// After the first stop request, how long running calls have to finish.
    pub grace_period: Duration,
    /// Where the listener counts what it does, for status and metrics.
    pub counters: Arc<CallCounters>,
}

impl Default for CallConfig {
    fn default() -> CallConfig {
        CallConfig {
            max_connections: 256,
            max_call: 1 << 20,
            default_timeout: Duration::from_secs(30),
            max_timeout: None,
            idle_timeout: Duration::from_secs(60),
            read_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(10),
            grace_period: Duration::from_secs(30),
            counters: Arc::default(),
        }
    }
}

/// How a call ended, from the listener's side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallEnd {
    /// The function returned a value.
    Ok,
    /// It threw, exited, or its worker died.
    Failed,
    /// Its time limit passed, waiting or running.
    TimedOut,
    /// No worker could take it: the pool's wait line was full, or no
    /// worker booted.
    Refused,
    /// Stopped by the shutdown.
    Interrupted,
}

impl CallEnd {
    /// `ok`, `failed`, `timed_out`, `refused`, `interrupted`.
    pub fn as_str(self) -> &'static str {
        match self {
            CallEnd::Ok => "ok",
            CallEnd::Failed => "failed",
            CallEnd::TimedOut => "timed_out",
            CallEnd::Refused => "refused",
            CallEnd::Interrupted => "interrupted",
        }
    }

    const ALL: [CallEnd; 5] = [
        CallEnd::Ok,
        CallEnd::Failed,
        CallEnd::TimedOut,
        CallEnd::Refused,
        CallEnd::Interrupted,
    ];
}

/// Told of each call that ends (for a latency histogram).
pub trait CallObserver: Send + Sync + std::fmt::Debug {
    /// A call ended `how`, `took` after it arrived.
    fn ended(&self, how: CallEnd, took: Duration);
}

/// What the listener has done so far, updated as it goes.
#[derive(Debug, Default)]
pub struct CallCounters {
    connections: AtomicU64,
    running: AtomicU64,
    ended: [AtomicU64; 5],
    /// Connections closed at once, past `max_connections`.
    turned_away: AtomicU64,
    /// Frames that were not a call Hearth could take.
    malformed: AtomicU64,
    observer: OnceLock<Arc<dyn CallObserver>>,
}

/// A copy of the counts, for status and metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallSummary {
    /// Connections open now.
    pub connections: u64,
    /// Calls running or waiting for a worker now.
    pub running: u64,
    pub ok: u64,
    pub failed: u64,
    pub timed_out: u64,
    pub refused: u64,
    pub interrupted: u64,
    pub turned_away: u64,
    pub malformed: u64,
}

impl CallSummary {
    /// The calls that ended `how`.
    pub fn ended(&self, how: CallEnd) -> u64 {
        match how {
            CallEnd::Ok => self.ok,
            CallEnd::Failed => self.failed,
            CallEnd::TimedOut => self.timed_out,
            CallEnd::Refused => self.refused,
            CallEnd::Interrupted => self.interrupted,
        }
    }

    /// Every outcome and its count.
    pub fn by_outcome(&self) -> impl Iterator<Item = (CallEnd, u64)> + '_ {
        CallEnd::ALL.iter().map(|&how| (how, self.ended(how)))
    }
}

impl CallCounters {
    /// Sets the observer told of each call's end (once).
    pub fn observe(&self, observer: Arc<dyn CallObserver>) {
        let _ = self.observer.set(observer);
    }

    /// The counts so far.
    pub fn summary(&self) -> CallSummary {
        let n = |i: usize| self.ended[i].load(Ordering::Relaxed);
        CallSummary {
            connections: self.connections.load(Ordering::Relaxed),
            running: self.running.load(Ordering::Relaxed),
            ok: n(0),
            failed: n(1),
            timed_out: n(2),
            refused: n(3),
            interrupted: n(4),
            turned_away: self.turned_away.load(Ordering::Relaxed),
            malformed: self.malformed.load(Ordering::Relaxed),
        }
    }

    fn ended(&self, how: CallEnd, took: Duration) {
        let i = CallEnd::ALL.iter().position(|&h| h == how).unwrap_or(0);
        self.ended[i].fetch_add(1, Ordering::Relaxed);
        if let Some(observer) = self.observer.get() {
            observer.ended(how, took);
        }
    }
}

/// Counts a connection while it lives.
struct Open(Arc<CallCounters>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Takes calls on `listener` and runs them with `executor` until `stop`
/// counts a stop request: it then takes no more connections, closes idle
/// ones, and lets running calls finish within the grace period; past it,
/// or at a second request, they are stopped (their worker gets SIGTERM,
/// then SIGKILL) and answered as interrupted. Returns once no connection
/// is left.
pub async fn serve(
    listener: UnixListener,
    executor: Executor,
    config: CallConfig,
    mut stop: watch::Receiver<u32>,
) {
    let config = Arc::new(config);
    let (abort_tx, abort) = watch::channel(false);
    // Each connection's task holds a clone; `closed` resolves once all are
    // gone.
    let (alive, mut closed) = tokio::sync::mpsc::channel::<()>(1);
    let counters = &config.counters;
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        // Out of file descriptors, most likely: wait a
                        // little rather than spin.
                        tracing::warn!(error = %e, "cannot accept a caller");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let count = counters.connections.fetch_add(1, Ordering::Relaxed) + 1;
                let open = Open(counters.clone());
                if count > config.max_connections as u64 {
                    counters.turned_away.fetch_add(1, Ordering::Relaxed);
                    let message = format!(
                        "busy: {} callers are connected, the most this listener holds",
                        config.max_connections
                    );
                    tokio::spawn(turn_away(stream, message, config.write_timeout, open));
                    continue;
                }
                let connection = Connection {
                    stream,
                    executor: executor.clone(),
                    config: config.clone(),
                    stop: stop.clone(),
                    abort: abort.clone(),
                    _open: open,
                    _alive: alive.clone(),
                };
                tokio::spawn(connection.serve());
            }
            changed = stop.changed() => {
                if changed.is_err() || *stop.borrow() > 0 {
                    break;
                }
            }
        }
    }
    drop(listener);
    drop(alive);
    let summary = counters.summary();
    tracing::info!(
        connections = summary.connections,
        running = summary.running,
        "calls: taking no more connections; running calls have the grace period to finish"
    );
    let grace_ends = tokio::time::Instant::now() + config.grace_period;
    let mut aborted = false;
    loop {
        tokio::select! {
            _ = closed.recv() => break,
            () = tokio::time::sleep_until(grace_ends), if !aborted => {
                aborted = true;
                tracing::warn!(running = counters.summary().running, "calls: the grace period is over: stopping the running calls");
                let _ = abort_tx.send(true);
            }
            changed = stop.changed(), if !aborted => {
                if changed.is_err() || *stop.borrow() > 1 {
                    aborted = true;
                    tracing::warn!(running = counters.summary().running, "calls: stopping the running calls now");
                    let _ = abort_tx.send(true);
                }
            }
        }
    }
}

/// Tells a caller past the connection limit why it is closed.
async fn turn_away(mut stream: UnixStream, message: String, wait: Duration, _open: Open) {
    let mut out = BytesMut::new();
    error_frame(&mut out, 0, &message);
    refuse(&mut stream, &out, wait).await;
}

/// Writes `refusal` (an Error frame), then closes the connection the way
/// HTTP servers do (a lingering close): the caller may have sent its call
/// already, and closing a unix socket with unread data resets the
/// connection, which can make the caller lose the refusal. So the write
/// side is shut first and what the caller sends is read and dropped until
/// it hangs up, for at most `wait` and `LINGER_BYTES`.
async fn refuse(stream: &mut UnixStream, refusal: &[u8], wait: Duration) {
    const LINGER_BYTES: usize = 8 << 20;
    let _ = tokio::time::timeout(wait, async {
        stream.write_all(refusal).await?;
        stream.shutdown().await?;
        let mut sink = [0u8; 16 << 10];
        let mut dropped = 0;
        while dropped < LINGER_BYTES {
            match stream.read(&mut sink).await? {
                0 => break,
                n => dropped += n,
            }
        }
        std::io::Result::Ok(())
    })
    .await;
}

fn error_frame(out: &mut BytesMut, id: u32, message: &str) {
    let at = begin_frame(out, Kind::Error, 0, id);
    fields::put(out, "message", message.as_bytes());
    end_frame(out, at);
}

/// One caller's connection.
struct Connection {
    stream: UnixStream,
    executor: Executor,
    config: Arc<CallConfig>,
    stop: watch::Receiver<u32>,
    abort: watch::Receiver<bool>,
    _open: Open,
    _alive: tokio::sync::mpsc::Sender<()>,
}

/// Why a connection's read ended without a frame.
enum Closed {
    /// The caller hung up, went idle too long, or the listener stops.
    Quietly,
    /// The caller sent something Hearth will not take: told, then closed.
    Refused(u32, String),
}

impl Connection {
    async fn serve(mut self) {
        let decoder = FrameDecoder::new(self.config.max_call);
        let mut buf = BytesMut::with_capacity(4096);
        let mut out = BytesMut::with_capacity(4096);
        loop {
            let frame = match self.read_frame(&decoder, &mut buf).await {
                Ok(frame) => frame,
                Err(Closed::Quietly) => return,
                Err(Closed::Refused(id, message)) => {
                    self.config
                        .counters
                        .malformed
                        .fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(error = %message, "calls: a caller's frame was refused");
                    out.clear();
                    error_frame(&mut out, id, &message);
                    refuse(&mut self.stream, &out, self.config.write_timeout).await;
                    return;
                }
            };
            let arrived = Instant::now();
            out.clear();
            let id = frame.request_id;
            let (how, json) = match self.call(&frame, arrived).await {
                Ok(answer) => answer,
                Err(message) => {
                    self.config
                        .counters
                        .malformed
                        .fetch_add(1, Ordering::Relaxed);
                    error_frame(&mut out, id, &message);
                    refuse(&mut self.stream, &out, self.config.write_timeout).await;
                    return;
                }
            };
            let at = begin_frame(&mut out, Kind::Result, 0, id);
            fields::put(&mut out, "json", json.as_bytes());
            end_frame(&mut out, at);
            let written =
                tokio::time::timeout(self.config.write_timeout, self.stream.write_all(&out)).await;
            self.config.counters.ended(how, arrived.elapsed());
            if !matches!(written, Ok(Ok(()))) {
                return;
            }
            if *self.stop.borrow() > 0 {
                return;
            }
            // A large call or answer leaves a large buffer: give it back,
            // so an idle connection holds a few KiB whatever it carried.
            if out.capacity() > 64 << 10 {
                out = BytesMut::with_capacity(4096);
            }
            if buf.is_empty() && buf.capacity() > 64 << 10 {
                buf = BytesMut::with_capacity(4096);
            }
        }
    }

    /// The next frame: its first byte within the idle timeout (none once
    /// the listener stops), the rest within the read timeout.
    async fn read_frame(
        &mut self,
        decoder: &FrameDecoder,
        buf: &mut BytesMut,
    ) -> Result<Frame, Closed> {
        let mut deadline = tokio::time::Instant::now() + self.config.idle_timeout;
        let mut started = !buf.is_empty();
        if started {
            deadline = tokio::time::Instant::now() + self.config.read_timeout;
        }
        loop {
            match decoder.decode(buf) {
                Ok(Some(frame)) => return Ok(frame),
                Ok(None) => {}
                Err(e) => {
                    return Err(Closed::Refused(
                        0,
                        format!("not a call Hearth can take: {e}"),
                    ))
                }
            }
            if !started && *self.stop.borrow() > 0 {
                return Err(Closed::Quietly);
            }
            let read = tokio::select! {
                read = self.stream.read_buf(buf) => read,
                () = tokio::time::sleep_until(deadline) => return Err(Closed::Quietly),
                _ = self.stop.changed(), if !started => continue,
            };
            match read {
                Ok(0) | Err(_) => return Err(Closed::Quietly),
                Ok(_) => {
                    if !started {
                        started = true;
                        deadline = tokio::time::Instant::now() + self.config.read_timeout;
                    }
                }
            }
        }
    }

    /// Runs the call in `frame`; `Err` is a frame that is not a call.
    async fn call(&mut self, frame: &Frame, arrived: Instant) -> Result<(CallEnd, String), String> {
        if frame.kind != Kind::Call {
            return Err(format!("expected a Call frame, got {:?}", frame.kind));
        }
        let fields = Fields::decode(&frame.payload).map_err(|e| format!("malformed call: {e}"))?;
        let function = fields
            .get("function")
            .and_then(|f| std::str::from_utf8(f).ok())
            .filter(|f| !f.is_empty())
            .ok_or("a call needs a function name (the field `function`, UTF-8)")?
            .to_owned();
        let args = match fields.get("args") {
            None => "[]".to_owned(),
            Some(args) => {
                let args =
                    std::str::from_utf8(args).map_err(|_| "the call's args are not UTF-8")?;
                let parsed: &RawValue = serde_json::from_str(args)
                    .map_err(|e| format!("the call's args are not JSON: {e}"))?;
                if !matches!(parsed.get().as_bytes().first(), Some(b'[' | b'{')) {
                    return Err("the call's args must be a JSON array or object".to_owned());
                }
                args.to_owned()
            }
        };
        let asked = match fields.get_str("timeout_ms") {
            None => self.config.default_timeout,
            Some(ms) => ms
                .parse::<u64>()
                .ok()
                .filter(|&ms| ms > 0)
                .map(Duration::from_millis)
                .ok_or_else(|| {
                    format!("timeout_ms must be a whole number of milliseconds above 0, not {ms:?}")
                })?,
        };
        let limit = self.config.max_timeout.map_or(asked, |max| asked.min(max));
        // A call is no queue job: no id or attempt to see.
        let task = Task {
            timeout: Some(limit),
            ..Task::new(
                u64::from(frame.request_id),
                RawValue::from_string("null".to_owned()).expect("JSON null"),
                Work::Call { function, args },
            )
        };
        let counters = &self.config.counters;
        counters.running.fetch_add(1, Ordering::Relaxed);
        let (stop_call, stopped) = watch::channel(false);
        let run = self.executor.run(&task, stopped);
        tokio::pin!(run);
        let deadline = tokio::time::Instant::from_std(arrived) + limit;
        let mut expired = false;
        let mut interrupted = false;
        let outcome = loop {
            tokio::select! {
                outcome = &mut run => break outcome,
                () = tokio::time::sleep_until(deadline), if !expired && !interrupted => {
                    expired = true;
                    let _ = stop_call.send(true);
                }
                () = crate::exec::aborted(&mut self.abort), if !expired && !interrupted => {
                    interrupted = true;
                    let _ = stop_call.send(true);
                }
            }
        };
        counters.running.fetch_sub(1, Ordering::Relaxed);
        Ok(answer(&outcome, limit, expired, interrupted, arrived))
    }
}

/// The JSON answer to a call that ran (or tried to), and how it ended.
fn answer(
    outcome: &Outcome,
    limit: Duration,
    expired: bool,
    interrupted: bool,
    arrived: Instant,
) -> (CallEnd, String) {
    if outcome.succeeded() {
        let result = outcome.result.as_deref().unwrap_or("null");
        return (CallEnd::Ok, format!("{{\"status\":0,\"result\":{result}}}"));
    }
    let ran = outcome.worker.is_some();
    let waited = arrived.elapsed().as_secs_f64();
    let (how, message) = if outcome.timed_out || (expired && ran) {
        (
            CallEnd::TimedOut,
            Some(format!(
                "the call ran past its time limit of {:.3}s; its PHP worker was stopped and is replaced",
                limit.as_secs_f64()
            )),
        )
    } else if expired {
        (
            CallEnd::TimedOut,
            Some(format!(
                "no PHP worker was free within the call's time limit of {:.3}s (waited {waited:.3}s)",
                limit.as_secs_f64()
            )),
        )
    } else if interrupted {
        (
            CallEnd::Interrupted,
            Some("hearth work stopped before the call ended".to_owned()),
        )
    } else if !ran {
        (CallEnd::Refused, None)
    } else {
        (CallEnd::Failed, None)
    };
    let error = match (message, &outcome.error) {
        (Some(message), _) => plain_error(&message),
        (None, Some(ErrorValue::Json(json))) => json.clone(),
        (None, Some(ErrorValue::Message(text))) => plain_error(text),
        (None, None) => plain_error("the call failed without saying why"),
    };
    let status = match (how, outcome.status) {
        (CallEnd::Failed, Some(status)) => status.to_string(),
        (CallEnd::Failed, None) => "null".to_owned(),
        _ => "null".to_owned(),
    };
    let signal = outcome.signal.map_or_else(
        || "null".to_owned(),
        |s| serde_json::to_string(&signal_name(s)).unwrap_or_default(),
    );
    let json = format!(
        "{{\"status\":{status},\"error\":{error},\"signal\":{signal},\"timed_out\":{}}}",
        how == CallEnd::TimedOut
    );
    (how, json)
}

/// An error described by Hearth, shaped like a PHP exception's.
fn plain_error(message: &str) -> String {
    serde_json::json!({
        "class": "",
        "message": message,
        "code": 0,
        "file": "",
        "line": 0,
        "trace": "",
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    //! The listener's bounds on tokio's paused clock, which jumps to the
    //! next timer whenever every task waits: idle and trickling callers,
    //! oversized frames, a stop. No call runs here (the executor has no
    //! PHP workers); tests/calls.rs runs real ones.

    use super::*;
    use crate::exec::ExecOptions;

    fn config() -> CallConfig {
        CallConfig {
            idle_timeout: Duration::from_secs(60),
            read_timeout: Duration::from_secs(10),
            max_call: 1024,
            ..CallConfig::default()
        }
    }

    /// A listener serving in the background, and a stop lever.
    async fn start(
        dir: &tempfile::TempDir,
    ) -> (
        std::path::PathBuf,
        watch::Sender<u32>,
        tokio::task::JoinHandle<()>,
    ) {
        let path = dir.path().join("calls.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let executor = Executor::new(
            None,
            ExecOptions {
                timeout: None,
                kill_after: Duration::from_secs(1),
                max_output: 1024,
            },
        );
        let (stop_tx, stop) = watch::channel(0);
        let served = tokio::spawn(serve(listener, executor, config(), stop));
        (path, stop_tx, served)
    }

    /// Everything the listener sends until it closes, and when it closed.
    async fn until_closed(stream: &mut UnixStream) -> (Vec<u8>, tokio::time::Instant) {
        let mut got = Vec::new();
        stream.read_to_end(&mut got).await.unwrap();
        (got, tokio::time::Instant::now())
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_caller_is_closed_after_the_idle_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _stop, _served) = start(&dir).await;
        let began = tokio::time::Instant::now();
        let mut caller = UnixStream::connect(&path).await.unwrap();
        let (got, at) = until_closed(&mut caller).await;
        assert!(got.is_empty());
        assert_eq!(at - began, Duration::from_secs(60));
    }

    #[tokio::test(start_paused = true)]
    async fn a_trickled_frame_is_dropped_after_the_read_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _stop, _served) = start(&dir).await;
        let mut caller = UnixStream::connect(&path).await.unwrap();
        let mut out = BytesMut::new();
        hearth_proto::encode_header(&mut out, Kind::Call, 0, 1, 100);
        caller.write_all(&out[..5]).await.unwrap();
        let began = tokio::time::Instant::now();
        let (got, at) = until_closed(&mut caller).await;
        assert!(got.is_empty());
        assert_eq!(at - began, Duration::from_secs(10));
    }

    #[tokio::test(start_paused = true)]
    async fn a_frame_over_the_call_limit_is_refused_before_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _stop, _served) = start(&dir).await;
        let mut caller = UnixStream::connect(&path).await.unwrap();
        let mut out = BytesMut::new();
        hearth_proto::encode_header(&mut out, Kind::Call, 0, 1, 1025);
        caller.write_all(&out).await.unwrap();
        let (got, _) = until_closed(&mut caller).await;
        let mut got = BytesMut::from(&got[..]);
        let frame = FrameDecoder::default().decode(&mut got).unwrap().unwrap();
        assert_eq!(frame.kind, Kind::Error);
        let message = Fields::decode(&frame.payload)
            .unwrap()
            .get_str("message")
            .unwrap();
        assert!(message.contains("1025"), "{message}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_stop_closes_idle_callers_and_takes_no_new_ones() {
        let dir = tempfile::tempdir().unwrap();
        let (path, stop, served) = start(&dir).await;
        let mut caller = UnixStream::connect(&path).await.unwrap();
        tokio::task::yield_now().await;
        let began = tokio::time::Instant::now();
        stop.send(1).unwrap();
        let (got, at) = until_closed(&mut caller).await;
        assert!(got.is_empty());
        assert_eq!(at, began, "closed at once, not after the idle timeout");
        served.await.unwrap();
        assert!(UnixStream::connect(&path).await.is_err());
    }
}
