//! The settings of a queue handle.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::job::NewJob;
use crate::url::check_name;

/// How a queue handle behaves. Every consumer of one queue should use the
/// same `visibility_timeout`: it is the reclaiming consumer's that decides
/// when another's hold has expired.
#[derive(Debug, Clone)]
pub struct QueueConfig {
    /// How long a reserved job stays invisible to other consumers before it
    /// is delivered again (attempt + 1). A consumer with a long job renews
    /// it with [`Consumer::extend`](crate::Consumer::extend).
    pub visibility_timeout: Duration,
    /// The largest payload `push` accepts (refused beyond, nothing stored).
    pub max_payload: usize,
    /// The largest result `ack` accepts.
    pub max_result: usize,
    /// Errors longer than this are cut (they are stored with the job and
    /// in the dead-letter store).
    pub max_error: usize,
    /// Results kept per channel: older ones are trimmed (approximately, on
    /// Redis) so a channel nobody reads stays bounded.
    pub max_results: u64,
    /// A results channel nobody writes to for this long is removed.
    pub results_ttl: Duration,
    /// Jobs kept in the dead-letter store; the oldest go beyond it.
    pub max_dead: u64,
    /// The longest a blocked `reserve` waits between looks at delayed jobs
    /// and expired holds: a delayed job pushed while consumers wait is
    /// delivered at most about this late (on Redis, plus up to 100 ms of
    /// Redis's own timer).
    pub poll_interval: Duration,
    /// How long a call keeps retrying while the engine is unreachable
    /// (Redis restarting, the file locked) before it returns an
    /// unavailable error. Acks and fails are retried, not dropped.
    pub retry_for: Duration,
    /// SQLite's busy timeout: how long one statement waits for another
    /// process's write lock.
    pub busy_timeout: Duration,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            visibility_timeout: Duration::from_secs(60),
            max_payload: 1 << 20,
            max_result: 1 << 20,
            max_error: 4096,
            max_results: 100_000,
            results_ttl: Duration::from_secs(24 * 3600),
            max_dead: 100_000,
            poll_interval: Duration::from_millis(100),
            retry_for: Duration::from_secs(60),
            busy_timeout: Duration::from_secs(5),
        }
    }
}

/// The most jobs one `reserve` or `peek` returns.
pub const MAX_BATCH: usize = 1000;

impl QueueConfig {
    /// Refuses settings that cannot work, naming the field.
    pub fn validate(&self) -> Result<()> {
        let positive = [
            ("visibility_timeout", self.visibility_timeout),
            ("results_ttl", self.results_ttl),
            ("poll_interval", self.poll_interval),
            ("busy_timeout", self.busy_timeout),
        ];
        for (field, d) in positive {
            if d.as_millis() == 0 {
                return Err(Error::invalid(format!("{field} must be at least 1 ms")));
            }
        }
        let counts = [
            ("max_payload", self.max_payload as u64),
            ("max_result", self.max_result as u64),
            ("max_error", self.max_error as u64),
            ("max_results", self.max_results),
            ("max_dead", self.max_dead),
        ];
        for (field, n) in counts {
            if n == 0 {
                return Err(Error::invalid(format!("{field} must be at least 1")));
            }
        }
        if self.poll_interval > self.visibility_timeout {
            return Err(Error::invalid(
                "poll_interval must not be longer than visibility_timeout",
            ));
        }
        Ok(())
    }

    pub(crate) fn check_job(&self, job: &NewJob) -> Result<()> {
        if job.payload.len() > self.max_payload {
            return Err(Error::too_large(
                "payload",
                job.payload.len(),
                self.max_payload,
            ));
        }
        if let Some(c) = &job.reply_to {
            check_name("reply-to channel", c)?;
        }
        Ok(())
    }

    pub(crate) fn check_result(&self, result: &[u8]) -> Result<()> {
        if result.len() > self.max_result {
            return Err(Error::too_large("result", result.len(), self.max_result));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_zeros_are_refused_by_name() {
        QueueConfig::default().validate().expect("defaults");
        let c = QueueConfig {
            max_payload: 0,
            ..QueueConfig::default()
        };
        let e = c.validate().expect_err("zero");
        assert!(e.is_invalid() && e.to_string().contains("max_payload"));
        let c = QueueConfig {
            poll_interval: Duration::from_secs(120),
            ..QueueConfig::default()
        };
        assert!(c.validate().is_err_and(|e| e.is_invalid()));
    }
}
