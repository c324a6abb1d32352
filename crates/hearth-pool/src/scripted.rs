//! The pool against scripted fake workers: no PHP, no processes.
//!
//! A fake worker is the far end of a socketpair, the same channel a real
//! worker gets, driven step by step by the test: it reads the frames
//! Hearth writes and answers with HEAD, BODY and END frames, or hangs up.
//! Fakes enter the pool through [`recycle::install`], the path booted
//! workers take; requests go through [`dispatch::dispatch`] and come back
//! as [`Lease`]s, as the HTTP front's do. Timeouts run on tokio's paused
//! clock, which jumps to the next timer whenever every task waits.
//!
//! Nothing here supervises the fakes: where a supervisor would act (kill
//! a worker, boot a replacement), the tests check that it was asked to,
//! and play its part through the same functions it calls.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use hearth_proto::{encode_frame, flags, Frame, FrameDecoder, Kind};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::channel::Channel;
use crate::dispatch::dispatch;
use crate::lease::Lease;
use crate::observe::RestartReason;
use crate::recycle;
use crate::shared::{lock, Shared};
use crate::sweep::sweep_idle;
use crate::worker::{Retire, Worker, WorkerShared, REPLACEMENT_WANTED};
use crate::{Error, Paths, PhpInfo, PoolConfig};

/// Fake pids start here, far above any pid the kernel hands out
/// (`pid_max` is at most 2^22), so no signal meant for one reaches a process.
const FAKE_PIDS: u32 = 1 << 30;

/// A pool with no supervisors, of `workers` slots, configured by `tune`.
fn pool(workers: usize, tune: impl FnOnce(&mut PoolConfig)) -> Arc<Shared> {
    let mut config = PoolConfig::new("/usr/bin/php-cgi", "/srv/app/worker.php", workers);
    config.batch_scheduling = false;
    tune(&mut config);
    let php = PhpInfo {
        binary: config.php.clone(),
        version: "8.2.0".to_owned(),
        sapi: "cgi-fcgi".to_owned(),
        disable_functions: String::new(),
        request_output: Vec::new(),
        extension: None,
        native: false,
    };
    let paths = Arc::new(Paths {
        script: config.script.clone(),
        cwd: "/srv/app".into(),
        document_root: None,
    });
    Arc::new(Shared::new(config, php, paths))
}

/// The worker's end of a fake worker's channel.
struct Fake {
    io: tokio::net::UnixStream,
    rbuf: BytesMut,
    decoder: FrameDecoder,
    ws: Arc<WorkerShared>,
}

/// A booted worker, as the pool holds it, and its fake far end.
fn booted(pool: &Shared) -> (Worker, Fake) {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let pid = FAKE_PIDS + NEXT.fetch_add(1, Ordering::Relaxed);
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().expect("socketpair");
    let channel = Channel::socket(ours).expect("channel");
    let ws = WorkerShared::new(pid, channel, pool.paths());
    let worker = Worker::new(ws.clone(), pool.config.max_payload);
    theirs.set_nonblocking(true).expect("nonblocking");
    let fake = Fake {
        io: tokio::net::UnixStream::from_std(theirs).expect("registered"),
        rbuf: BytesMut::new(),
        decoder: FrameDecoder::new(hearth_proto::DEFAULT_MAX_PAYLOAD),
        ws,
    };
    (worker, fake)
}

/// A fake worker booted into `slot`, installed as the supervisor installs one.
fn install(pool: &Arc<Shared>, slot: usize) -> Fake {
    let (worker, fake) = booted(pool);
    recycle::install(pool, slot, worker, false);
    fake
}

impl Fake {
    fn pid(&self) -> u32 {
        self.ws.pid
    }

    /// The next frame Hearth wrote; `None` once Hearth closed its end.
    async fn frame(&mut self) -> Option<Frame> {
        loop {
            if let Some(frame) = self.decoder.decode(&mut self.rbuf).expect("valid frames") {
                return Some(frame);
            }
            if self.io.read_buf(&mut self.rbuf).await.expect("read") == 0 {
                return None;
            }
        }
    }

    /// The next request: its id and what it carries.
    async fn request(&mut self) -> (u32, Bytes) {
        let frame = self.frame().await.expect("a request");
        assert_eq!(frame.kind, Kind::Request);
        (frame.request_id, frame.payload)
    }

    async fn send(&mut self, kind: Kind, flags: u16, id: u32, payload: &[u8]) {
        let mut buf = BytesMut::new();
        encode_frame(&mut buf, kind, flags, id, payload);
        self.io.write_all(&buf).await.expect("write");
    }

    /// Answers request `id` with a head, `body`, and the end.
    async fn answer(&mut self, id: u32, body: &[u8]) {
        self.send(Kind::Head, 0, id, b"200").await;
        self.send(Kind::Body, 0, id, body).await;
        self.send(Kind::End, 0, id, &[]).await;
    }

    /// Reads the next request and answers it with what it carried.
    async fn echo(&mut self) -> u32 {
        let (id, payload) = self.request().await;
        self.answer(id, &payload).await;
        id
    }
}

/// Sends a request carrying `body` (one REQUEST frame) to a worker.
async fn send(pool: &Arc<Shared>, body: &'static str) -> Result<Lease, Error> {
    dispatch(pool, body.len(), move |buf, id, _| {
        encode_frame(buf, Kind::Request, 0, id, body.as_bytes());
    })
    .await
}

/// The same, from a task of its own: for requests that wait.
fn spawn_send(
    pool: &Arc<Shared>,
    body: &'static str,
) -> tokio::task::JoinHandle<Result<Lease, Error>> {
    let pool = pool.clone();
    tokio::spawn(async move { send(&pool, body).await })
}

/// The body of the response a lease reads, up to its end.
async fn body(lease: &mut Lease) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    loop {
        let frame = lease.next().await?;
        match frame.kind {
            Kind::Head => {}
            Kind::Body => out.extend_from_slice(&frame.payload),
            Kind::End => return Ok(out),
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// Lets other tasks run until `ready` holds. Panics if it never does
/// (after many rounds of every task and the I/O driver).
async fn until(what: &str, ready: impl Fn() -> bool) {
    for _ in 0..100_000 {
        if ready() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("never reached: {what}");
}

#[tokio::test]
async fn a_request_gets_an_idle_worker_and_gives_it_back() {
    let pool = pool(1, |_| {});
    let mut fake = install(&pool, 0);
    assert_eq!(pool.line.lock().idle_len(), 1);
    let mut lease = send(&pool, "hello").await.expect("a worker");
    assert_eq!(lease.pid(), fake.pid());
    assert_eq!(lease.served(), 0, "requests completed before this one");
    assert_eq!(pool.line.lock().idle_len(), 0, "lent, not idle");
    fake.echo().await;
    assert_eq!(body(&mut lease).await.expect("response"), b"hello");
    drop(lease);
    assert_eq!(pool.line.lock().idle_len(), 1, "back once the lease ends");
    let mut again = send(&pool, "again").await.expect("a worker");
    assert_eq!(again.pid(), fake.pid());
    assert_eq!(again.served(), 1);
    fake.echo().await;
    assert_eq!(body(&mut again).await.expect("response"), b"again");
}

#[tokio::test]
async fn requests_wait_in_line_first_come_first_served() {
    let pool = pool(1, |c| c.pipelining = false);
    let mut fake = install(&pool, 0);
    let mut first = send(&pool, "first").await.expect("a worker");
    let second = spawn_send(&pool, "second");
    until("one request waits", || pool.line.waiting() == 1).await;
    let third = spawn_send(&pool, "third");
    until("two requests wait", || pool.line.waiting() == 2).await;

    fake.echo().await;
    assert_eq!(body(&mut first).await.expect("response"), b"first");
    drop(first);
    let mut second = second.await.expect("task").expect("a worker");
    assert_eq!(pool.line.waiting(), 1);
    fake.echo().await;
    assert_eq!(body(&mut second).await.expect("response"), b"second");
    drop(second);
    let mut third = third.await.expect("task").expect("a worker");
    fake.echo().await;
    assert_eq!(body(&mut third).await.expect("response"), b"third");
    assert_eq!(pool.line.waiting(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_request_waits_no_longer_than_the_queue_timeout() {
    let pool = pool(1, |c| c.queue_timeout = Duration::from_secs(30));
    let mut fake = install(&pool, 0);
    let mut busy = send(&pool, "busy").await.expect("a worker");
    let asked = tokio::time::Instant::now();
    let refused = send(&pool, "late").await.expect_err("no worker came free");
    assert!(refused.is_unavailable(), "{refused}");
    assert!(
        asked.elapsed() >= Duration::from_secs(30),
        "{:?}",
        asked.elapsed()
    );
    assert_eq!(pool.line.waiting(), 0, "it left the line");
    // The worker was not disturbed: its request still completes, and
    // nothing of the refused one reached it.
    fake.echo().await;
    assert_eq!(body(&mut busy).await.expect("response"), b"busy");
    drop(busy);
    let mut next = send(&pool, "next").await.expect("a worker");
    assert_eq!(fake.echo().await, 2, "the refused request used no id");
    assert_eq!(body(&mut next).await.expect("response"), b"next");
}

#[tokio::test(start_paused = true)]
async fn a_full_line_refuses_new_requests_at_once() {
    let pool = pool(1, |c| {
        c.max_queue = 1;
        c.pipelining = false;
    });
    let _fake = install(&pool, 0);
    let _busy = send(&pool, "busy").await.expect("a worker");
    let waiting = spawn_send(&pool, "waits");
    until("one request waits", || pool.line.waiting() == 1).await;
    let asked = tokio::time::Instant::now();
    let refused = send(&pool, "one too many")
        .await
        .expect_err("the line is full");
    assert!(refused.is_unavailable(), "{refused}");
    assert_eq!(asked.elapsed(), Duration::ZERO, "refused without waiting");
    assert_eq!(pool.line.waiting(), 1);
    waiting.abort();
}

#[tokio::test]
async fn a_small_request_is_queued_behind_the_running_one() {
    let pool = pool(1, |c| c.pipelining = true);
    let mut fake = install(&pool, 0);
    let mut first = send(&pool, "first").await.expect("a worker");
    let second = spawn_send(&pool, "second");
    let third = spawn_send(&pool, "third");
    until("two requests wait", || pool.line.waiting() == 2).await;
    let (id1, _) = fake.request().await;
    fake.answer(id1, b"first").await;
    assert_eq!(body(&mut first).await.expect("response"), b"first");
    // The first request's end hands the worker to the second, and the
    // third is written to the worker's channel behind it, before the
    // worker has answered the second.
    drop(first);
    let (id2, second_payload) = fake.request().await;
    let (id3, third_payload) = fake.request().await;
    assert_eq!(
        (&second_payload[..], &third_payload[..]),
        (&b"second"[..], &b"third"[..])
    );
    assert_eq!(pool.line.waiting(), 0);
    fake.answer(id2, b"2").await;
    fake.answer(id3, b"3").await;
    let mut second = second.await.expect("task").expect("a worker");
    assert_eq!(body(&mut second).await.expect("response"), b"2");
    // The third waits for the second's lease to end, then reads its own
    // response, already in the channel.
    drop(second);
    let mut third = third.await.expect("task").expect("a worker");
    assert_eq!(third.pid(), fake.pid());
    assert_eq!(body(&mut third).await.expect("response"), b"3");
}

#[tokio::test]
async fn a_large_request_is_never_queued_behind_another() {
    let pool = pool(1, |c| c.pipelining = true);
    let mut fake = install(&pool, 0);
    let large: &'static str = "x".repeat(crate::dispatch::QUEUE_MAX_BYTES + 1).leak();
    let mut first = send(&pool, "first").await.expect("a worker");
    let second = spawn_send(&pool, "second");
    let big = spawn_send(&pool, large);
    until("two requests wait", || pool.line.waiting() == 2).await;
    fake.echo().await;
    body(&mut first).await.expect("response");
    drop(first);
    let (id2, _) = fake.request().await;
    // Only the second request is in the channel: the large one still waits.
    assert_eq!(pool.line.waiting(), 1);
    fake.answer(id2, b"2").await;
    let mut second = second.await.expect("task").expect("a worker");
    body(&mut second).await.expect("response");
    drop(second);
    let mut big = big.await.expect("task").expect("a worker");
    let (id, payload) = fake.request().await;
    assert_eq!(payload.len(), large.len());
    fake.answer(id, b"big").await;
    assert_eq!(body(&mut big).await.expect("response"), b"big");
}

#[tokio::test]
async fn a_worker_dying_mid_request_fails_only_that_request() {
    let pool = pool(2, |c| c.pipelining = true);
    let mut dying = install(&pool, 0);
    let mut first = send(&pool, "first").await.expect("a worker");
    let second = spawn_send(&pool, "second");
    let third = spawn_send(&pool, "third");
    until("two requests wait", || pool.line.waiting() == 2).await;
    dying.echo().await;
    body(&mut first).await.expect("response");
    drop(first);
    // The second runs on the worker, the third is queued behind it.
    let (id2, _) = dying.request().await;
    let _third_in_channel = dying.request().await;
    dying.send(Kind::Head, 0, id2, b"200").await;
    let pid = dying.pid();
    let ws = dying.ws.clone();
    drop(dying);

    let mut second = second.await.expect("task").expect("a worker");
    let lost = body(&mut second).await.expect_err("the worker died");
    assert!(lost.is_worker_lost(), "{lost}");
    drop(second);
    assert_eq!(
        ws.retire_mode(),
        Retire::Now,
        "its supervisor is told to kill it"
    );

    // The third never started there: it goes to the next worker, first
    // in line.
    until("the third request waits again", || pool.line.waiting() == 1).await;
    let mut next = install(&pool, 1);
    let mut third = third.await.expect("task").expect("a worker");
    assert_ne!(third.pid(), pid);
    assert_eq!(third.pid(), next.pid());
    assert_eq!(next.echo().await, 1, "a fresh request on the new worker");
    assert_eq!(body(&mut third).await.expect("response"), b"third");
}

#[tokio::test]
async fn a_response_nobody_waits_for_is_read_out_before_the_next_request() {
    let pool = pool(1, |_| {});
    let mut fake = install(&pool, 0);
    let mut lease = send(&pool, "leaves").await.expect("a worker");
    let (id, _) = fake.request().await;
    fake.send(Kind::Head, 0, id, b"200").await;
    assert_eq!(lease.next().await.expect("head").kind, Kind::Head);
    // The client goes away mid-response; the worker finishes it anyway.
    drop(lease);
    assert_eq!(
        pool.line.lock().idle_len(),
        0,
        "not back before its response ends"
    );
    fake.send(Kind::Body, 0, id, b"for nobody").await;
    fake.send(Kind::End, 0, id, &[]).await;
    until("the worker is back", || pool.line.lock().idle_len() == 1).await;
    let mut next = send(&pool, "next").await.expect("a worker");
    fake.echo().await;
    assert_eq!(body(&mut next).await.expect("response"), b"next");
}

#[tokio::test]
async fn a_request_that_leaves_the_line_takes_no_worker_with_it() {
    let pool = pool(1, |c| c.pipelining = false);
    let mut fake = install(&pool, 0);
    let mut first = send(&pool, "first").await.expect("a worker");
    let gone = spawn_send(&pool, "gone");
    until("one request waits", || pool.line.waiting() == 1).await;
    gone.abort();
    assert!(gone.await.expect_err("aborted").is_cancelled());
    fake.echo().await;
    body(&mut first).await.expect("response");
    drop(first);
    assert_eq!(
        pool.line.lock().idle_len(),
        1,
        "the worker is idle, not lost"
    );
    assert_eq!(pool.line.waiting(), 0);
}

#[tokio::test]
async fn after_max_requests_a_worker_is_replaced_without_a_gap() {
    // Under 10 requests, a worker's limit is exactly max_requests.
    let pool = pool(1, |c| c.max_requests = 2);
    let mut old = install(&pool, 0);
    for _ in 0..2 {
        let mut lease = send(&pool, "r").await.expect("a worker");
        old.echo().await;
        body(&mut lease).await.expect("response");
    }
    // Past its limit the worker asks for a replacement, and serves on
    // while the replacement boots.
    assert_eq!(old.ws.replacement_state(), REPLACEMENT_WANTED);
    assert_eq!(old.ws.reason(), Some(RestartReason::MaxRequests));
    assert_eq!(old.ws.retire_mode(), Retire::No);
    let mut meanwhile = send(&pool, "meanwhile").await.expect("a worker");
    assert_eq!(meanwhile.pid(), old.pid());
    old.echo().await;
    body(&mut meanwhile).await.expect("response");
    drop(meanwhile);

    // The replacement has booted: the supervisor installs it in the slot
    // and retires the old worker, which gets the stop message.
    let (worker, mut new) = booted(&pool);
    let old_ws = old.ws.clone();
    recycle::replace(&pool, 0, &old_ws, worker, false);
    assert!(Arc::ptr_eq(
        lock(&pool.slots[0]).as_ref().expect("slot"),
        &new.ws
    ));
    let stop = old.frame().await.expect("the stop message");
    assert_eq!(stop.kind, Kind::Stop);
    assert_eq!(old.ws.retire_mode(), Retire::Graceful);
    assert_eq!(pool.restarts.load(Ordering::Relaxed), 1);
    let counted = pool.restart_reasons.snapshot();
    assert!(
        counted.contains(&(RestartReason::MaxRequests, 1)),
        "{counted:?}"
    );
    let past = pool.restart_reasons.past();
    assert_eq!(past.len(), 1, "{past:?}");
    assert_eq!(
        (past[0].pid, past[0].slot, past[0].reason),
        (old_ws.pid, 0, RestartReason::MaxRequests)
    );

    let mut lease = send(&pool, "new").await.expect("a worker");
    assert_eq!(lease.pid(), new.pid());
    new.echo().await;
    assert_eq!(body(&mut lease).await.expect("response"), b"new");
}

#[tokio::test]
async fn a_worker_that_exits_after_its_response_is_not_lent_again() {
    let pool = pool(1, |_| {});
    let mut fake = install(&pool, 0);
    let mut lease = send(&pool, "last").await.expect("a worker");
    let (id, _) = fake.request().await;
    fake.send(Kind::Head, 0, id, b"200").await;
    fake.send(Kind::End, flags::CLOSE, id, &[]).await;
    body(&mut lease).await.expect("response");
    drop(lease);
    assert_eq!(fake.ws.retire_mode(), Retire::Graceful);
    assert_eq!(pool.line.lock().idle_len(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_request_past_its_deadline_stops_the_worker() {
    let pool = pool(1, |_| {});
    let mut fake = install(&pool, 0);
    let mut lease = send(&pool, "slow").await.expect("a worker");
    fake.request().await;
    let started = tokio::time::Instant::now();
    lease.set_deadline(started + Duration::from_secs(5));
    let late = lease.next().await.expect_err("no answer in time");
    assert!(late.is_timed_out(), "{late}");
    assert!(started.elapsed() >= Duration::from_secs(5));
    drop(lease);
    assert_eq!(
        fake.ws.retire_mode(),
        Retire::Terminate,
        "its supervisor is told to SIGTERM it"
    );
    assert_eq!(pool.line.lock().idle_len(), 0);
}

#[tokio::test(start_paused = true)]
async fn an_idle_worker_that_hung_up_is_not_lent() {
    let pool = pool(2, |_| {});
    let mut alive = install(&pool, 0);
    let dead = install(&pool, 1);
    let dead_ws = dead.ws.clone();
    drop(dead);
    // Idle a moment: long enough to be checked before it is lent.
    tokio::time::advance(Duration::from_millis(5)).await;
    let mut lease = send(&pool, "r").await.expect("a worker");
    assert_eq!(lease.pid(), alive.pid());
    assert_eq!(dead_ws.retire_mode(), Retire::Now);
    alive.echo().await;
    body(&mut lease).await.expect("response");
}

#[tokio::test(start_paused = true)]
async fn an_idle_worker_past_idle_ttl_is_stopped() {
    let pool = pool(1, |c| c.idle_ttl = Some(Duration::from_secs(60)));
    let mut fake = install(&pool, 0);
    let installed = tokio::time::Instant::now();
    let sweeper = tokio::spawn(sweep_idle(pool.clone()));
    let stop = fake.frame().await.expect("the stop message");
    assert_eq!(stop.kind, Kind::Stop);
    assert!(installed.elapsed() >= Duration::from_secs(60));
    assert_eq!(fake.ws.reason(), Some(RestartReason::IdleTtl));
    assert_eq!(fake.ws.retire_mode(), Retire::Graceful);
    assert_eq!(pool.line.lock().idle_len(), 0);
    sweeper.abort();
}

#[tokio::test]
async fn a_closed_line_refuses_waiting_and_new_requests() {
    let pool = pool(1, |c| c.pipelining = false);
    let mut fake = install(&pool, 0);
    let _busy = send(&pool, "busy").await.expect("a worker");
    let waiting = spawn_send(&pool, "waits");
    until("one request waits", || pool.line.waiting() == 1).await;
    assert!(pool.line.lock().close().is_empty(), "no worker is idle");
    let refused = waiting.await.expect("task").expect_err("closed");
    assert!(refused.is_unavailable(), "{refused}");
    let refused = send(&pool, "later").await.expect_err("closed");
    assert!(refused.is_unavailable(), "{refused}");
    fake.request().await;
}

#[tokio::test]
async fn in_a_crash_loop_requests_are_refused_but_one_that_tries_again() {
    let pool = pool(1, |c| c.crash_loops = true);
    let mut fake = install(&pool, 0);
    let max = pool.config.max_backoff;
    for _ in 0..crate::health::CRASH_LOOP_AFTER {
        pool.health.crashed("exit status 1".to_owned(), max, true);
    }
    let refused = send(&pool, "refused").await.expect_err("in a crash loop");
    assert!(refused.is_unavailable(), "{refused}");
    assert!(refused.to_string().contains("exit status 1"), "{refused}");
    assert_eq!(
        fake.ws.served.load(Ordering::Relaxed),
        0,
        "no worker saw it"
    );
    // A reload: the next request tries at once, and its success ends the loop.
    pool.health.retry_now();
    let mut probe = send(&pool, "probe").await.expect("let through");
    fake.echo().await;
    assert_eq!(body(&mut probe).await.expect("response"), b"probe");
    drop(probe);
    assert!(pool.health.failing().is_none(), "served: no longer failing");
    let mut after = send(&pool, "after").await.expect("a worker");
    fake.echo().await;
    assert_eq!(body(&mut after).await.expect("response"), b"after");
}

/// A report for the final `End`: the memory after the previous request.
fn report(memory: u64, route: Option<&str>) -> Vec<u8> {
    let mut buf = BytesMut::new();
    hearth_proto::message::EndReport {
        memory: Some(memory),
        route: route.map(|r| Bytes::copy_from_slice(r.as_bytes())),
    }
    .encode(&mut buf);
    buf.to_vec()
}

/// One request for `target`, answered with an `End` carrying `end`.
async fn serve_one(pool: &Arc<Shared>, fake: &mut Fake, target: &str, end: (u16, Vec<u8>)) {
    let mut lease = send(pool, "r").await.expect("a worker");
    lease.set_current("GET", target);
    let (id, _) = fake.request().await;
    fake.send(Kind::Head, 0, id, b"200").await;
    fake.send(Kind::End, end.0, id, &end.1).await;
    body(&mut lease).await.expect("response");
}

#[tokio::test]
async fn each_report_measures_the_request_before_it_under_its_route() {
    let pool = pool(1, |_| {});
    let mut fake = install(&pool, 0);
    // Memory after boot 1000; /leak/1 leaves 4096 behind, /users/7 nothing,
    // the named route 100; the last request is never measured.
    let steps: [(&str, u64, Option<&str>); 5] = [
        ("/leak/1", 1000, None),
        ("/users/7?x=1", 5096, None),
        ("/leak/2", 5096, None),
        ("/users/8", 9192, Some("users.show")),
        ("/last", 9292, None),
    ];
    for (target, memory, name) in steps {
        serve_one(
            &pool,
            &mut fake,
            target,
            (flags::REPORT, report(memory, name)),
        )
        .await;
    }
    let (top, counted) =
        lock(&pool.routes)
            .top(10)
            .into_iter()
            .fold((Vec::new(), 0), |(mut v, n), r| {
                v.push((r.route, r.requests, r.growth));
                (v, n + 1)
            });
    assert_eq!(
        top,
        [
            ("GET /leak/{id}".to_owned(), 2, 8192),
            ("users.show".to_owned(), 1, 100),
            ("GET /users/{id}".to_owned(), 1, 0),
        ],
        "the name the app gave overrides the path"
    );
    assert_eq!(counted, 3, "/last was not measured");
}

#[tokio::test]
async fn ends_without_a_report_measure_nothing_and_break_no_request() {
    let pool = pool(1, |_| {});
    let mut fake = install(&pool, 0);
    serve_one(&pool, &mut fake, "/a", (flags::REPORT, report(100, None))).await;
    // An older library's End, then a report: nothing to compare with.
    serve_one(&pool, &mut fake, "/b", (0, Vec::new())).await;
    serve_one(&pool, &mut fake, "/c", (flags::REPORT, report(900, None))).await;
    // A report that cannot be read counts as none.
    serve_one(&pool, &mut fake, "/d", (flags::REPORT, vec![0, 9, b'x'])).await;
    serve_one(&pool, &mut fake, "/e", (flags::REPORT, report(950, None))).await;
    assert!(lock(&pool.routes).top(10).is_empty());
    assert_eq!(fake.ws.served.load(Ordering::Relaxed), 5);
}

#[tokio::test]
async fn a_response_read_out_after_its_client_left_is_measured_too() {
    let pool = pool(1, |_| {});
    let mut fake = install(&pool, 0);
    serve_one(
        &pool,
        &mut fake,
        "/gone/5",
        (flags::REPORT, report(100, None)),
    )
    .await;
    let mut lease = send(&pool, "r").await.expect("a worker");
    lease.set_current("GET", "/next");
    let (id, _) = fake.request().await;
    drop(lease);
    fake.send(Kind::Head, 0, id, b"200").await;
    fake.send(Kind::End, flags::REPORT, id, &report(612, None))
        .await;
    until("the worker is back", || pool.line.lock().idle_len() == 1).await;
    let top = lock(&pool.routes).top(10);
    assert_eq!(top.len(), 1);
    assert_eq!(
        (top[0].route.as_str(), top[0].growth),
        ("GET /gone/{id}", 512)
    );
}
