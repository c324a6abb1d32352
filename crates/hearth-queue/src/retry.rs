//! Retrying a call while its engine is unreachable.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::{Error, Result};

/// Why one try of a call failed.
#[derive(Debug)]
pub(crate) enum Fail {
    /// The engine could not be reached or was busy (connection refused or
    /// cut, Redis loading its data, SQLite locked): try again.
    Transient(String),
    /// Anything else: give up at once.
    Permanent(Error),
}

impl From<Error> for Fail {
    fn from(e: Error) -> Self {
        Fail::Permanent(e)
    }
}

const FIRST_WAIT: Duration = Duration::from_millis(20);
const LONGEST_WAIT: Duration = Duration::from_secs(1);

/// Runs `op` until it succeeds, fails for good, or has failed transiently
/// for `retry_for`; waits between tries grow from 20 ms to 1 s.
pub(crate) async fn retry<T, F, Fut>(what: &str, retry_for: Duration, mut op: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Fail>>,
{
    let give_up = Instant::now() + retry_for;
    let mut wait = FIRST_WAIT;
    let mut tries = 0u32;
    loop {
        match op().await {
            Ok(v) => {
                if tries > 0 {
                    tracing::info!(what, tries, "queue reachable again");
                }
                return Ok(v);
            }
            Err(Fail::Permanent(e)) => return Err(e),
            Err(Fail::Transient(why)) => {
                tries += 1;
                if tries == 1 {
                    tracing::warn!(what, error = %why, "queue unreachable, retrying");
                }
                let now = Instant::now();
                if now >= give_up {
                    return Err(Error::unavailable(format!(
                        "{what}: {why} (retried for {retry_for:?})"
                    )));
                }
                tokio::time::sleep(wait.min(give_up - now)).await;
                wait = (wait * 2).min(LONGEST_WAIT);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn transient_failures_are_retried_then_reported_as_unavailable() {
        let mut n = 0;
        let v = retry("t", Duration::from_secs(5), || {
            n += 1;
            let k = n;
            async move {
                if k < 3 {
                    Err(Fail::Transient("down".into()))
                } else {
                    Ok(k)
                }
            }
        })
        .await
        .expect("third try");
        assert_eq!(v, 3);

        let e = retry("t", Duration::from_millis(50), || async {
            Err::<(), _>(Fail::Transient("down".into()))
        })
        .await
        .expect_err("never up");
        assert!(e.is_unavailable());

        let e = retry("t", Duration::from_secs(5), || async {
            Err::<(), _>(Fail::Permanent(Error::engine("no")))
        })
        .await
        .expect_err("permanent");
        assert!(e.is_engine());
    }
}
