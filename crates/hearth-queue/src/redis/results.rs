//! Reading a results channel (a stream) from where the last read ended.

use std::time::Duration;

use ::redis::aio::ConnectionManager;
use ::redis::Value;
use tokio::time::Instant;

use super::entry::{decode_result, read_reply};
use super::{classify, LONGEST_BLOCK};
use crate::config::MAX_BATCH;
use crate::error::Result;
use crate::job::{duration_ms, JobResult};
use crate::retry::retry;

/// A reader of one results channel.
#[derive(Debug)]
pub(crate) struct RedisResults {
    pub(super) conn: ConnectionManager,
    pub(super) key: String,
    pub(super) last: String,
    pub(super) retry_for: Duration,
}

impl RedisResults {
    pub async fn next(&mut self, max: usize, wait: Duration) -> Result<Vec<JobResult>> {
        let max = max.clamp(1, MAX_BATCH);
        let deadline = Instant::now() + wait;
        loop {
            let block = deadline
                .saturating_duration_since(Instant::now())
                .min(LONGEST_BLOCK);
            let v = retry("results", self.retry_for, || {
                let mut c = self.conn.clone();
                let mut cmd = ::redis::cmd("XREAD");
                cmd.arg("COUNT").arg(max);
                if !block.is_zero() {
                    cmd.arg("BLOCK").arg(duration_ms(block).max(1));
                }
                cmd.arg("STREAMS").arg(&self.key).arg(&self.last);
                async move { cmd.query_async::<Value>(&mut c).await.map_err(classify) }
            })
            .await?;
            let entries = read_reply(&v);
            if let Some(last) = entries.last() {
                self.last = last.id.clone();
            }
            let out: Vec<JobResult> = entries.iter().filter_map(decode_result).collect();
            if !out.is_empty() || Instant::now() >= deadline {
                return Ok(out);
            }
        }
    }
}
