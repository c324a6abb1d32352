//! `hearth queue stats|peek|retry|delete|purge|push URL`: an operator's
//! (and a producer's) commands on a queue, through `hearth-queue`.

use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context as _};
use base64::Engine as _;
use hearth_queue::url::{valid_name, MAX_NAME_LEN};
use hearth_queue::{JobId, JobInfo, NewJob, Part, Queue, QueueConfig, QueueUrl, Stats, MAX_BATCH};
use serde_json::{json, Value};

use crate::options::values::Seconds;

/// How long a command keeps trying a queue that is away (Redis
/// restarting, the file locked by another process) before it gives up.
const RETRY_FOR: Duration = Duration::from_secs(10);

#[derive(Debug, clap::Args)]
pub struct QueueArgs {
    #[command(subcommand)]
    command: QueueCommand,
}

#[derive(Debug, clap::Subcommand)]
enum QueueCommand {
    /// Counts of jobs: ready, delayed, reserved (running), dead, and since
    /// the queue was created
    Stats {
        /// redis://HOST[:PORT][/DB]/NAME or file:PATH
        url: String,
        /// Print the counts as one JSON object
        #[arg(long)]
        json: bool,
    },
    /// Print the oldest ready (or dead) jobs without taking them, one JSON
    /// object a line
    Peek {
        /// redis://HOST[:PORT][/DB]/NAME or file:PATH
        url: String,
        /// Which jobs: ready (deliverable now) or dead (the dead-letter store)
        #[arg(value_enum, default_value = "ready")]
        part: PeekPart,
        /// At most this many (1 to 1000)
        #[arg(long, value_name = "N", default_value_t = 10,
              value_parser = clap::value_parser!(u64).range(1..=MAX_BATCH as u64))]
        limit: u64,
    },
    /// Put a dead job back, ready, with its attempts reset (or every dead
    /// job, with --all)
    Retry {
        /// redis://HOST[:PORT][/DB]/NAME or file:PATH
        url: String,
        /// The dead job's id
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        id: Option<u64>,
        /// Every job in the dead-letter store
        #[arg(long)]
        all: bool,
    },
    /// Remove one dead job for good (a ready, delayed or running job with
    /// that id is left alone)
    Delete {
        /// redis://HOST[:PORT][/DB]/NAME or file:PATH
        url: String,
        /// The dead job's id
        id: u64,
    },
    /// Remove the ready, delayed or dead jobs for good (never running ones)
    Purge {
        /// redis://HOST[:PORT][/DB]/NAME or file:PATH
        url: String,
        /// Which jobs
        #[arg(value_enum)]
        part: PurgePart,
        /// Yes, remove them: without it, nothing is removed
        #[arg(long)]
        yes: bool,
    },
    /// Push one job and print its id
    Push {
        /// redis://HOST[:PORT][/DB]/NAME or file:PATH
        url: String,
        /// The job's payload, JSON: for hearth work, a task line such as
        /// {"cmd": "gzip a.log"} or {"call": "App\\Jobs\\send", "args": [42]}
        #[arg(long, value_name = "JSON")]
        payload: String,
        /// Deliver it no sooner than this from now: seconds, or a number with ms,
        /// s, m or h
        #[arg(long, value_name = "DURATION")]
        delay: Option<Seconds>,
        /// Attempts before the dead-letter store (the wait after a failed one is
        /// 1s, doubling, at most 5m)
        #[arg(long, value_name = "N", default_value_t = 3,
              value_parser = clap::value_parser!(u32).range(1..))]
        attempts: u32,
        /// Record the job's outcome on this results channel
        #[arg(long, value_name = "CHANNEL")]
        reply_to: Option<String>,
    },
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum PeekPart {
    Ready,
    Dead,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum PurgePart {
    Ready,
    Delayed,
    Dead,
}

/// The end of `hearth queue --help`.
pub(crate) const AFTER_HELP: &str = "\
A URL is redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]/NAME (Redis 6.2 or
newer) or file:PATH (a queue file on this host). See docs/queues.md.";

pub fn run(args: QueueArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(command(args.command))
}

async fn command(command: QueueCommand) -> anyhow::Result<()> {
    match command {
        QueueCommand::Stats { url, json } => {
            let (queue, shown) = open(&url, true).await?;
            let stats = queue.stats().await?;
            if json {
                println!("{}", stats_json(&shown, &stats));
            } else {
                print!("{}", stats_table(&shown, &stats));
            }
        }
        QueueCommand::Peek { url, part, limit } => {
            let (queue, _) = open(&url, true).await?;
            let part = match part {
                PeekPart::Ready => Part::Ready,
                PeekPart::Dead => Part::Dead,
            };
            let limit = usize::try_from(limit).unwrap_or(MAX_BATCH);
            let mut out = String::new();
            for job in queue.peek(part, limit).await? {
                out.push_str(&job_json(&job).to_string());
                out.push('\n');
            }
            print!("{out}");
        }
        QueueCommand::Retry { url, id, all } => {
            let (queue, shown) = open(&url, true).await?;
            match id {
                Some(id) if !all => {
                    if !queue.retry_dead(JobId(id)).await? {
                        bail!("{shown} has no dead job {id}");
                    }
                    println!("job {id} is ready again");
                }
                _ => {
                    let n = queue.retry_all_dead().await?;
                    println!("{n} dead job(s) ready again");
                }
            }
        }
        QueueCommand::Delete { url, id } => {
            let (queue, shown) = open(&url, true).await?;
            if !queue.delete_dead(JobId(id)).await? {
                bail!("{shown} has no dead job {id}");
            }
            println!("job {id} deleted");
        }
        QueueCommand::Purge { url, part, yes } => {
            let (queue, shown) = open(&url, true).await?;
            let (part, word) = match part {
                PurgePart::Ready => (Part::Ready, "ready"),
                PurgePart::Delayed => (Part::Delayed, "delayed"),
                PurgePart::Dead => (Part::Dead, "dead"),
            };
            if !yes {
                let s = queue.stats().await?;
                let n = match part {
                    Part::Ready => s.ready,
                    Part::Delayed => s.delayed,
                    Part::Dead => s.dead,
                };
                bail!(
                    "this removes the {n} {word} job(s) of {shown} for good; to do it, run it again with --yes"
                );
            }
            let n = queue.purge(part).await?;
            println!("{n} {word} job(s) removed");
        }
        QueueCommand::Push {
            url,
            payload,
            delay,
            attempts,
            reply_to,
        } => {
            serde_json::from_str::<serde::de::IgnoredAny>(&payload)
                .context("--payload is not JSON")?;
            // Checked before the queue is opened: a refused push creates
            // no queue file.
            if let Some(channel) = reply_to.as_deref().filter(|c| !valid_name(c)) {
                bail!(
                    "--reply-to {channel:?}: a channel name is 1 to {MAX_NAME_LEN} of A-Z a-z 0-9 . _ -"
                );
            }
            let (queue, _) = open(&url, false).await?;
            let mut job = NewJob::new(payload.into_bytes()).attempts(attempts);
            if let Some(delay) = delay {
                job = job.delay(delay.0);
            }
            if let Some(channel) = reply_to {
                job = job.reply_to(channel);
            }
            let id = queue.push(job).await?;
            println!("{id}");
        }
    }
    Ok(())
}

/// Opens the queue at `url`; with `existing`, the queue must be there
/// already, and nothing is created when it is not (an operator's typo
/// does not leave an empty queue behind). Also returns the URL as shown
/// (without a password).
async fn open(url: &str, existing: bool) -> anyhow::Result<(Queue, String)> {
    let parsed = QueueUrl::parse(url)?;
    let shown = parsed.to_string();
    let config = QueueConfig {
        retry_for: RETRY_FOR,
        ..QueueConfig::default()
    };
    let opened = if existing {
        Queue::open_existing(parsed, config).await
    } else {
        Queue::open_url(parsed, config).await
    };
    let queue = match opened {
        Ok(queue) => queue,
        Err(e) if e.is_no_such_queue() => bail!("{e}"),
        Err(e) => return Err(e).with_context(|| format!("cannot open the queue {shown}")),
    };
    Ok((queue, shown))
}

fn stats_json(shown: &str, s: &Stats) -> Value {
    json!({
        "queue": shown,
        "ready": s.ready,
        "delayed": s.delayed,
        "reserved": s.reserved,
        "dead": s.dead,
        "pushed": s.pushed,
        "done": s.done,
        "failed": s.failed,
        "retried": s.retried,
        "died": s.died,
        "oldest_ready_age_ms": s.oldest_ready_age.map(|d| d.as_millis() as u64),
    })
}

fn stats_table(shown: &str, s: &Stats) -> String {
    let mut out = format!("queue {shown}\n");
    let oldest = s
        .oldest_ready_age
        .map(|d| format!(" (the oldest waiting {:.1}s)", d.as_secs_f64()))
        .unwrap_or_default();
    let rows: [(&str, u64, &str); 9] = [
        ("ready", s.ready, "deliverable now"),
        ("delayed", s.delayed, "waiting for their delay or backoff"),
        ("reserved", s.reserved, "held by consumers (running)"),
        ("dead", s.dead, "in the dead-letter store"),
        ("pushed", s.pushed, "since the queue was created"),
        ("done", s.done, "acked"),
        ("failed", s.failed, "attempts failed"),
        ("retried", s.retried, "deliveries after the first"),
        ("died", s.died, "moved to the dead-letter store"),
    ];
    for (name, n, what) in rows {
        let extra = if name == "ready" { oldest.as_str() } else { "" };
        let _ = writeln!(out, "  {name:<9}{n:>10}  {what}{extra}");
    }
    out
}

/// A job as `peek` prints it: the payload as JSON when it is JSON, else
/// as text, else in base64.
fn job_json(job: &JobInfo) -> Value {
    let enqueued = job
        .enqueued_at
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let mut v = json!({
        "id": job.id.0,
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "enqueued_at": (enqueued * 1000.0).round() / 1000.0,
        "reply_to": job.reply_to,
        "last_error": job.last_error,
        "dead_reason": job.dead_reason.map(|r| r.as_str()),
    });
    let payload = match std::str::from_utf8(&job.payload) {
        Ok(text) => match serde_json::from_str::<Value>(text) {
            Ok(value) => value,
            Err(_) => Value::String(text.to_owned()),
        },
        Err(_) => {
            v["payload_encoding"] = json!("base64");
            Value::String(base64::engine::general_purpose::STANDARD.encode(&job.payload))
        }
    };
    v["payload"] = payload;
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_is_shown_as_json_text_or_base64() {
        let mut job = JobInfo {
            id: JobId(7),
            payload: br#"{"cmd":"true"}"#.to_vec(),
            attempts: 1,
            max_attempts: 3,
            reply_to: None,
            enqueued_at: SystemTime::UNIX_EPOCH + Duration::from_millis(1500),
            last_error: Some("exit status 1".into()),
            dead_reason: Some(hearth_queue::DeadReason::Failed),
        };
        let v = job_json(&job);
        assert_eq!(v["payload"]["cmd"], "true");
        assert_eq!(v["enqueued_at"], 1.5);
        assert_eq!(v["dead_reason"], "failed");
        job.payload = b"plain".to_vec();
        assert_eq!(job_json(&job)["payload"], "plain");
        job.payload = vec![0xff];
        let v = job_json(&job);
        assert_eq!(
            (v["payload"].as_str(), v["payload_encoding"].as_str()),
            (Some("/w=="), Some("base64"))
        );
    }
}
