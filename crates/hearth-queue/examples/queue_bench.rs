//! Jobs per second through a queue with 1 and 4 consumers (tasks), and
//! push-to-reserve latency.
//!
//! `cargo run --release -p hearth-queue --example queue_bench -- URL [JOBS]`
//!
//! The queue should be empty and used by nothing else. Each job is a small
//! payload acked with a small result (no reply-to channel); latency is from
//! before `push` to `reserve` returning the job, with the consumer waiting,
//! through the same handle and through a second handle (on the file
//! engine, as another process would see it: by polling).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hearth_queue::{NewJob, Part, Queue, QueueConfig};

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() -> hearth_queue::Result<()> {
    let mut args = std::env::args().skip(1);
    let url = args.next().unwrap_or_else(|| {
        eprintln!("usage: queue_bench URL [JOBS]");
        std::process::exit(2)
    });
    let n: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(20_000);
    let q = Queue::open(&url, QueueConfig::default()).await?;
    q.purge(Part::Ready).await?;
    println!("queue {}", q.url());
    for consumers in [1usize, 4] {
        let started = Instant::now();
        for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
            let jobs = chunk
                .iter()
                .map(|i| NewJob::new(format!("{{\"n\":{i}}}")))
                .collect();
            q.push_many(jobs).await?;
        }
        let pushed = started.elapsed();
        let acked = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..consumers {
            let (q, acked) = (q.clone(), acked.clone());
            tasks.push(tokio::spawn(async move {
                let c = q.consumer()?;
                while acked.load(Ordering::Relaxed) < n {
                    for j in c.reserve(32, Duration::from_millis(50)).await? {
                        c.ack(&j, b"{\"ok\":true}").await?;
                        acked.fetch_add(1, Ordering::Relaxed);
                    }
                }
                hearth_queue::Result::Ok(())
            }));
        }
        for t in tasks {
            t.await.expect("consumer task")?;
        }
        let took = started.elapsed();
        println!(
            "{consumers} consumer(s): push {:.0} jobs/s (batches of 1000), consume {:.0} jobs/s ({n} jobs in {took:.2?})",
            n as f64 / pushed.as_secs_f64(),
            n as f64 / took.as_secs_f64()
        );
    }
    let other = Queue::open(&url, QueueConfig::default()).await?;
    for (label, producer) in [("same handle", &q), ("second handle", &other)] {
        let c = Arc::new(q.consumer()?);
        let mut samples = Vec::new();
        for i in 0..200 {
            let waiting = tokio::spawn({
                let c = c.clone();
                async move {
                    let jobs = c.reserve(1, Duration::from_secs(10)).await;
                    (jobs, Instant::now())
                }
            });
            // Let the consumer block first.
            tokio::time::sleep(Duration::from_millis(5)).await;
            let t0 = Instant::now();
            producer.push(NewJob::new(format!("{i}"))).await?;
            let (jobs, got) = waiting.await.expect("reserve task");
            for j in &jobs? {
                c.ack(j, b"").await?;
            }
            samples.push(got.duration_since(t0));
        }
        samples.sort();
        println!(
            "push-to-reserve latency ({label}): p50 {:?}, p90 {:?}, p99 {:?} ({} samples)",
            samples[samples.len() / 2],
            samples[samples.len() * 9 / 10],
            samples[samples.len() * 99 / 100],
            samples.len()
        );
    }
    Ok(())
}
