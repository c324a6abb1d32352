//! Jobs as producers push them, as consumers receive them, and as
//! operators see them.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::backoff::Backoff;

/// A job's id, given by the queue when the job is pushed; unique within
/// the queue and kept across retries, reclaims and the dead-letter store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobId(pub u64);

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A job to push.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewJob {
    /// Opaque bytes for the consumer (JSON in practice), at most
    /// [`QueueConfig::max_payload`](crate::QueueConfig::max_payload).
    pub payload: Vec<u8>,
    /// How many attempts the job gets before the dead-letter store (at
    /// least 1).
    pub max_attempts: u32,
    /// The wait between a failed attempt and the next.
    pub backoff: Backoff,
    /// Not deliverable before this much time has passed.
    pub delay: Duration,
    /// The results channel the outcome is recorded to (see
    /// [`Queue::results`](crate::Queue::results)).
    pub reply_to: Option<String>,
}

impl NewJob {
    /// A job with 3 attempts, the default backoff, no delay and no reply.
    pub fn new(payload: impl Into<Vec<u8>>) -> Self {
        NewJob {
            payload: payload.into(),
            max_attempts: 3,
            backoff: Backoff::default(),
            delay: Duration::ZERO,
            reply_to: None,
        }
    }

    /// Sets the number of attempts (0 is taken as 1).
    pub fn attempts(mut self, n: u32) -> Self {
        self.max_attempts = n.max(1);
        self
    }

    /// Sets the backoff between attempts.
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// Makes the job deliverable only after `delay`.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Records the job's outcome to the results channel `channel`.
    pub fn reply_to(mut self, channel: impl Into<String>) -> Self {
        self.reply_to = Some(channel.into());
        self
    }
}

/// A job delivered to a consumer, held until it is acked, failed, or its
/// visibility timeout passes.
#[derive(Debug, Clone)]
pub struct Job {
    /// The job's id.
    pub id: JobId,
    /// The pushed payload.
    pub payload: Vec<u8>,
    /// Which attempt this delivery is: 1 for the first; a job delivered
    /// again after a failure or after its consumer was lost has a higher
    /// one, so a handler can tell a possible duplicate.
    pub attempt: u32,
    /// The attempts the job has in all.
    pub max_attempts: u32,
    /// The wait after a failed attempt.
    pub backoff: Backoff,
    /// Where the outcome is recorded.
    pub reply_to: Option<String>,
    /// When the job was first pushed.
    pub enqueued_at: SystemTime,
    /// The error of the previous attempt, if it failed.
    pub last_error: Option<String>,
    /// Where the engine keeps this delivery (a Redis stream entry id).
    pub(crate) entry: String,
}

/// What became of an ack, a fail or an extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Receipt {
    /// Done as asked.
    Applied,
    /// The job was no longer held: another consumer finished it first, or
    /// (for `fail` and `extend`) it was reclaimed by another consumer
    /// after its visibility timeout. Nothing was changed. An ack is applied
    /// whoever holds the job, as long as nobody has finished it: the first
    /// result recorded wins.
    Stale,
}

/// Why a job is in the dead-letter store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeadReason {
    /// Its last attempt failed (the error is the handler's).
    Failed,
    /// Its consumer was lost (visibility timeout passed) on its last
    /// attempt.
    Lost,
    /// The stored entry could not be read as a job (the error says what
    /// is wrong with it).
    Malformed,
    /// Its consumer refused it with [`Consumer::reject`](crate::Consumer::reject):
    /// a job that can never succeed (a payload the consumer cannot read as
    /// work), dead at once whatever attempts it had left; the error says
    /// why.
    Rejected,
}

impl DeadReason {
    /// The word stored with the job.
    pub fn as_str(&self) -> &'static str {
        match self {
            DeadReason::Failed => "failed",
            DeadReason::Lost => "lost",
            DeadReason::Malformed => "malformed",
            DeadReason::Rejected => "rejected",
        }
    }

    /// The reason a stored word names (an unknown word reads as
    /// `Malformed`).
    pub fn parse(word: &str) -> Self {
        match word {
            "failed" => DeadReason::Failed,
            "lost" => DeadReason::Lost,
            "rejected" => DeadReason::Rejected,
            _ => DeadReason::Malformed,
        }
    }
}

/// A job as `peek` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobInfo {
    /// The job's id.
    pub id: JobId,
    /// The payload (for a malformed entry, what could be read of it).
    pub payload: Vec<u8>,
    /// Attempts made so far.
    pub attempts: u32,
    /// Attempts allowed.
    pub max_attempts: u32,
    /// Where its outcome goes.
    pub reply_to: Option<String>,
    /// When it was first pushed.
    pub enqueued_at: SystemTime,
    /// The last attempt's error.
    pub last_error: Option<String>,
    /// Why it is dead, for a dead job.
    pub dead_reason: Option<DeadReason>,
}

/// A job's final outcome as recorded to its results channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Acked with this result.
    Done(Vec<u8>),
    /// Moved to the dead-letter store.
    Dead {
        /// Why.
        reason: DeadReason,
        /// The last error, or what was wrong with the entry.
        error: String,
    },
}

/// One record of a results channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobResult {
    /// The job's id.
    pub id: JobId,
    /// The attempt that settled it.
    pub attempt: u32,
    /// Its outcome.
    pub outcome: Outcome,
    /// For a job that died after failing: the result its consumer gave
    /// with the last failure (`Consumer::fail_with_result`), if any.
    pub last_result: Option<Vec<u8>>,
}

/// Counts for operators.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Deliverable now, waiting for a consumer.
    pub ready: u64,
    /// Waiting for their delay or backoff to pass.
    pub delayed: u64,
    /// Held by consumers (including holds whose visibility timeout has
    /// passed and that no consumer has reclaimed yet).
    pub reserved: u64,
    /// In the dead-letter store now.
    pub dead: u64,
    /// Pushed, since the queue was created.
    pub pushed: u64,
    /// Acked, since the queue was created.
    pub done: u64,
    /// Attempts failed by their consumer, since the queue was created.
    pub failed: u64,
    /// Deliveries after the first (failed, or reclaimed after a lost
    /// consumer), since the queue was created.
    pub retried: u64,
    /// Moved to the dead-letter store, since the queue was created.
    pub died: u64,
    /// How long the oldest ready job has been waiting.
    pub oldest_ready_age: Option<Duration>,
}

/// A part of a queue, for `peek` and `purge`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// Jobs deliverable now.
    Ready,
    /// Jobs waiting for their delay or backoff.
    Delayed,
    /// The dead-letter store.
    Dead,
}

pub(crate) fn now_ms() -> u64 {
    to_ms(SystemTime::now())
}

pub(crate) fn to_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

pub(crate) fn from_ms(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

pub(crate) fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// `error` cut to at most `max` bytes on a character boundary.
pub(crate) fn truncate(error: &str, max: usize) -> String {
    if error.len() <= max {
        return error.to_string();
    }
    let mut end = max;
    while end > 0 && !error.is_char_boundary(end) {
        end -= 1;
    }
    error[..end].to_string()
}
