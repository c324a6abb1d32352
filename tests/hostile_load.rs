//! Every kind of hostile client of issue 16 at once, against two workers:
//! floods of one-byte chunks, bodies trickled over HTTP/1.1 and HTTP/2,
//! HTTP/1.1 clients that never read a large response, HTTP/2 clients
//! whose window stays shut, and one HTTP/2 connection with 128 slow
//! requests. Meanwhile a normal client fetches a small page, one request
//! after another. The front's peak memory stays under the bound that
//! docs/configuration.md states, and the normal client is served, every
//! time, within a bound of its latency with no load.
//!
//! HTTP/1.1 clients are raw sockets on threads, HTTP/2 clients the `h2`
//! crate's over h2c on a runtime of their own. The load lasts `LOAD`,
//! every read and write has a timeout, and everything is stopped, joined
//! and dropped before the assertions.

#[path = "support/mod.rs"]
mod support;

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use support::{eventually, fixture, Server};

/// Peak resident memory (`VmHWM`) the front may reach under the load,
/// idle memory included (docs/configuration.md, "Responses and slow
/// clients"). Measured for the debug build: 59 to 64 MiB, from 17 MiB
/// idle; the bound leaves twice that for the allocator's arenas on a
/// busier machine.
const PEAK_KIB: u64 = 128 << 10;
/// How long the hostile clients and the measured normal client run.
const LOAD: Duration = Duration::from_secs(12);
/// The requests of the 128-stream connection each take this long in PHP.
const SLOW_MS: u64 = 250;
/// A large response: written in 64 KiB `echo`s, or in one.
const BIG_STREAM: &str = "/big?n=25165824";
const BIG_ECHO: &str = "/big-echo?n=25165824";
/// Content-Length of the trickled HTTP/1.1 bodies (under `--max-body-size`
/// 8M: they are never refused, only slow).
const TRICKLE_LENGTH: usize = 8_000_000;

/// Requests the workers have finished, and requests they are running.
fn served_and_busy(socket: &std::path::Path) -> (u64, u64) {
    let status = support::status_json(socket);
    let served = status["workers"]
        .as_array()
        .expect("workers")
        .iter()
        .map(|w| w["requests"].as_u64().unwrap_or(0))
        .sum();
    (served, status["pool"]["busy"].as_u64().unwrap_or(0))
}

/// One GET of a small page on a new connection: its status and how long
/// the whole response took, or what went wrong.
fn normal_get(addr: SocketAddr) -> Result<(u16, Duration), String> {
    let started = Instant::now();
    let mut stream = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .and_then(|()| stream.set_write_timeout(Some(Duration::from_secs(10))))
        .map_err(|e| e.to_string())?;
    stream
        .write_all(b"GET /pid HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .map_err(|e| format!("send: {e}"))?;
    let mut response = Vec::new();
    stream
        .read_to_end(&mut response)
        .map_err(|e| format!("read after {:?}: {e}", started.elapsed()))?;
    let took = started.elapsed();
    let status = std::str::from_utf8(&response)
        .ok()
        .and_then(|r| r.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("no status line in {} bytes", response.len()))?;
    Ok((status, took))
}

/// `n` sequential normal requests (`until`: or until then), with a short
/// pause between them, as a browsing client would.
fn normal_client(
    addr: SocketAddr,
    n: usize,
    until: Option<Instant>,
) -> Vec<Result<(u16, Duration), String>> {
    let mut results = Vec::new();
    while results.len() < n && until.is_none_or(|t| Instant::now() < t) {
        results.push(normal_get(addr));
        std::thread::sleep(Duration::from_millis(50));
    }
    results
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// An HTTP/1.1 socket whose writes give up after a while.
fn h1(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_write_timeout(Some(Duration::from_secs(2)))
        .expect("timeout");
    stream
}

/// A chunked POST in one-byte chunks, 1,000 every 10 ms, until `stop`.
fn chunk_flood(addr: SocketAddr, stop: Arc<AtomicBool>) -> usize {
    let mut stream = h1(addr);
    let mut sent = 0;
    if stream
        .write_all(
            b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n\
              Transfer-Encoding: chunked\r\n\r\n",
        )
        .is_err()
    {
        return sent;
    }
    let batch = b"1\r\nx\r\n".repeat(1_000);
    while !stop.load(Ordering::Relaxed) {
        if stream.write_all(&batch).is_err() {
            break;
        }
        sent += 1_000;
        std::thread::sleep(Duration::from_millis(10));
    }
    sent
}

/// A POST announcing `TRICKLE_LENGTH` bytes, sent 16 KiB every 100 ms,
/// until `stop`.
fn trickle(addr: SocketAddr, stop: Arc<AtomicBool>) -> usize {
    let mut stream = h1(addr);
    let mut sent = 0;
    let head = format!(
        "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n\
         Content-Length: {TRICKLE_LENGTH}\r\n\r\n"
    );
    if stream.write_all(head.as_bytes()).is_err() {
        return sent;
    }
    let piece = vec![b'y'; 16 << 10];
    while !stop.load(Ordering::Relaxed) && sent + piece.len() < TRICKLE_LENGTH {
        if stream.write_all(&piece).is_err() {
            break;
        }
        sent += piece.len();
        std::thread::sleep(Duration::from_millis(100));
    }
    sent
}

/// A runtime for the HTTP/2 clients.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime")
}

/// An h2c connection (prior knowledge); `window`: the initial window the
/// client gives each stream of the server's.
async fn h2_connect(addr: SocketAddr, window: u32) -> h2::client::SendRequest<Bytes> {
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (send, connection) = h2::client::Builder::new()
        .initial_window_size(window)
        .handshake(tcp)
        .await
        .expect("h2 handshake");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    send.ready().await.expect("ready")
}

async fn h2_request(
    send: &h2::client::SendRequest<Bytes>,
    method: &str,
    path: &str,
    end: bool,
) -> Option<(h2::client::ResponseFuture, h2::SendStream<Bytes>)> {
    let request = http::Request::builder()
        .method(method)
        .uri(format!("http://localhost{path}"))
        .body(())
        .expect("request");
    let mut ready = tokio::time::timeout(Duration::from_secs(10), send.clone().ready())
        .await
        .ok()?
        .ok()?;
    ready.send_request(request, end).ok()
}

/// An HTTP/2 stream that POSTs a body 16 KiB every 100 ms, as the
/// server's window allows, until `stop`.
async fn h2_trickle(send: h2::client::SendRequest<Bytes>, stop: Arc<AtomicBool>) {
    let Some((_response, mut body)) = h2_request(&send, "POST", "/echo", false).await else {
        return;
    };
    let piece = Bytes::from(vec![b'z'; 16 << 10]);
    let mut sent = 0;
    while !stop.load(Ordering::Relaxed) && sent + piece.len() < TRICKLE_LENGTH {
        body.reserve_capacity(piece.len());
        let capacity = tokio::time::timeout(
            Duration::from_millis(500),
            std::future::poll_fn(|cx| body.poll_capacity(cx)),
        )
        .await;
        match capacity {
            Ok(Some(Ok(n))) => {
                if body.send_data(piece.slice(..n), false).is_err() {
                    return;
                }
                sent += n;
            }
            Ok(_) => return,
            Err(_) => {} // no window yet: try again
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
fn hostile_clients_of_every_kind_leave_memory_bounded_and_a_normal_client_served() {
    let control = support::tempdir();
    let socket = control.path().join("control.sock");
    let server = Server::start(
        &fixture("app.php"),
        &[
            "--workers",
            "2",
            "--h2c",
            "--control-socket",
            &socket.to_string_lossy(),
        ],
    );
    let addr = server.addr;
    let pid = server.pid();

    // The normal client's latency with no load (after a warm-up).
    let _ = normal_client(addr, 5, None);
    let baseline: Vec<Duration> = normal_client(addr, 40, None)
        .into_iter()
        .map(|r| {
            let (status, took) = r.expect("a normal request with no load");
            assert_eq!(status, 200);
            took
        })
        .collect();
    let baseline_median = median(baseline.clone());
    let idle_peak = support::vm_kib(pid, "VmHWM");
    let (served_before, _) = served_and_busy(&socket);

    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    // HTTP/1.1: chunk floods and trickled bodies.
    for _ in 0..4 {
        let stop = stop.clone();
        threads.push(std::thread::spawn(move || chunk_flood(addr, stop)));
    }
    for _ in 0..8 {
        let stop = stop.clone();
        threads.push(std::thread::spawn(move || trickle(addr, stop)));
    }
    // HTTP/1.1: large responses never read, held open until the end.
    let never_read: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut stream = h1(addr);
            write!(stream, "GET {BIG_STREAM} HTTP/1.1\r\nHost: x\r\n\r\n").expect("send");
            stream
        })
        .collect();

    // HTTP/2.
    let rt = runtime();
    let slow_done = Arc::new(AtomicUsize::new(0));
    let held = rt.block_on(async {
        let mut held = Vec::new();
        // Bodies trickled on 2 connections of 4 streams.
        for _ in 0..2 {
            let send = h2_connect(addr, 65_535).await;
            for _ in 0..4 {
                tokio::spawn(h2_trickle(send.clone(), stop.clone()));
            }
            held.push(send);
        }
        // Zero windows: 4 connections ask for a large response each and
        // never let a byte of it through.
        for _ in 0..4 {
            let send = h2_connect(addr, 0).await;
            if let Some((response, _)) = h2_request(&send, "GET", BIG_ECHO, true).await {
                let stop = stop.clone();
                tokio::spawn(async move {
                    let response = response.await;
                    while !stop.load(Ordering::Relaxed) {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    drop(response);
                });
            }
            held.push(send);
        }
        held
    });
    // The large responses come first in the pool's line: the measure
    // starts once the workers have written them all (to memory and the
    // spool, since their clients take none of them), when nothing but
    // the 128 slow requests stands between the normal client and a worker.
    eventually(
        Duration::from_secs(60),
        "the workers to have written every large response",
        || {
            let (served, busy) = served_and_busy(&socket);
            (served >= served_before + 8 && busy == 0).then_some(())
        },
    );
    let slow = rt.block_on(async {
        // One connection, 128 slow requests.
        let send = h2_connect(addr, 65_535).await;
        for _ in 0..128 {
            let Some((response, _)) =
                h2_request(&send, "GET", &format!("/slow?ms={SLOW_MS}"), true).await
            else {
                break;
            };
            let done = slow_done.clone();
            tokio::spawn(async move {
                if let Ok(response) = response.await {
                    let mut body = response.into_body();
                    while let Some(Ok(data)) = body.data().await {
                        let _ = body.flow_control().release_capacity(data.len());
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        send
    });
    eventually(Duration::from_secs(10), "both workers busy", || {
        (served_and_busy(&socket).1 == 2).then_some(())
    });

    // The normal client, under the load, for as long as it lasts.
    let load_started = Instant::now();
    let under_load = normal_client(addr, usize::MAX, Some(load_started + LOAD));
    let peak = support::vm_kib(pid, "VmHWM");
    let rss = support::vm_kib(pid, "VmRSS");

    // Tear down: the clients stop, threads are joined, connections closed.
    stop.store(true, Ordering::Relaxed);
    let sent: Vec<usize> = threads
        .into_iter()
        .map(|t| t.join().expect("a hostile client thread"))
        .collect();
    drop(never_read);
    drop(held);
    drop(slow);
    rt.shutdown_timeout(Duration::from_secs(5));
    let slow_done = slow_done.load(Ordering::Relaxed);

    let failures: Vec<String> = under_load
        .iter()
        .filter_map(|r| match r {
            Ok((200, _)) => None,
            Ok((status, took)) => Some(format!("{status} after {took:?}")),
            Err(e) => Some(e.clone()),
        })
        .collect();
    let latencies: Vec<Duration> = under_load
        .iter()
        .filter_map(|r| r.as_ref().ok().map(|(_, took)| *took))
        .collect();
    eprintln!(
        "normal latencies under load, in order (ms): {:?}",
        latencies
            .iter()
            .map(Duration::as_millis)
            .collect::<Vec<_>>()
    );
    let load_median = median(latencies.clone());
    let worst = latencies.iter().max().copied().unwrap_or_default();
    eprintln!(
        "normal client: baseline median {baseline_median:?} (worst {:?}) over {} requests; \
         under load median {load_median:?} (worst {worst:?}) over {} requests; \
         front VmHWM {peak} KiB (idle {idle_peak} KiB), VmRSS {rss} KiB at the end of the load; \
         sent by the HTTP/1.1 floods and trickles: {sent:?}; slow HTTP/2 requests done: {slow_done}",
        baseline.iter().max().copied().unwrap_or_default(),
        baseline.len(),
        latencies.len(),
    );

    assert!(
        failures.is_empty(),
        "{} of {} normal requests failed under load: {failures:?}",
        failures.len(),
        under_load.len()
    );
    assert!(
        latencies.len() >= 10,
        "only {} normal requests in {LOAD:?}",
        latencies.len()
    );
    assert!(
        peak < PEAK_KIB,
        "the front's peak memory reached {peak} KiB under the hostile load (bound {PEAK_KIB} KiB)"
    );
    // The bound on latency: both workers are kept busy by the 128-stream
    // connection, so a normal request waits for the next free worker, up to
    // one slow request (SLOW_MS), about half of it on average; the hostile
    // clients also take the front's CPU, on a machine of 2 cores shared
    // with the test's own clients. Measured (debug build): a median of 1 to
    // 4 ms with no load, 80 to 200 ms under it, none over 250 ms. Hence: no
    // request over 1 s, and a median
    // under 20 times the baseline plus one slow request and 50 ms (the
    // normal client waits at most for one slow request to end). Before issue 16,
    // the normal client waited behind the whole backlog (16 s of work) or
    // behind workers pinned by clients that never read (a 503 after the
    // queue timeout).
    assert!(
        worst < Duration::from_secs(1),
        "a normal request took {worst:?} under load"
    );
    let bound = baseline_median * 20 + Duration::from_millis(SLOW_MS + 50);
    assert!(
        load_median < bound,
        "the normal client's median latency went from {baseline_median:?} to \
         {load_median:?} under load (bound {bound:?})"
    );
}
