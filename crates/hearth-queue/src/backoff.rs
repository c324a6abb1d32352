//! How long a failed job waits before its next attempt.

use std::time::Duration;

/// Exponential backoff from a base, capped: the wait after the `n`th failed
/// attempt is `base * 2^(n-1)`, at most `max`.
///
/// There is no jitter: a job's retries are spread by its own failures, and
/// a deterministic wait is what an operator reading `peek` expects to see.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The wait after the first failure.
    pub base: Duration,
    /// The longest wait, whatever the number of failures.
    pub max: Duration,
}

impl Backoff {
    /// Exponential from `base`, capped at `max`.
    pub fn exponential(base: Duration, max: Duration) -> Self {
        Backoff { base, max }
    }

    /// No wait between attempts.
    pub fn none() -> Self {
        Backoff {
            base: Duration::ZERO,
            max: Duration::ZERO,
        }
    }

    /// The wait before the attempt after failed attempt `attempt` (1 for
    /// the first).
    pub fn delay(&self, attempt: u32) -> Duration {
        let base = self.base.as_millis();
        let max = self.max.as_millis();
        let shift = attempt.saturating_sub(1).min(63);
        let ms = base.saturating_mul(1u128 << shift).min(max);
        Duration::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
    }

    pub(crate) fn base_ms(&self) -> u64 {
        u64::try_from(self.base.as_millis()).unwrap_or(u64::MAX)
    }

    pub(crate) fn max_ms(&self) -> u64 {
        u64::try_from(self.max.as_millis()).unwrap_or(u64::MAX)
    }

    pub(crate) fn from_ms(base: u64, max: u64) -> Self {
        Backoff {
            base: Duration::from_millis(base),
            max: Duration::from_millis(max),
        }
    }
}

impl Default for Backoff {
    /// One second, doubling, at most five minutes.
    fn default() -> Self {
        Backoff::exponential(Duration::from_secs(1), Duration::from_secs(300))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn doubles_from_the_base_then_stops_at_the_cap() {
        let b = Backoff::exponential(Duration::from_millis(100), Duration::from_millis(1000));
        let waits: Vec<u128> = (1..=6).map(|n| b.delay(n).as_millis()).collect();
        assert_eq!(waits, vec![100, 200, 400, 800, 1000, 1000]);
        assert_eq!(b.delay(0), Duration::from_millis(100));
        assert_eq!(Backoff::none().delay(9), Duration::ZERO);
    }

    proptest! {
        #[test]
        fn never_over_the_cap_and_never_shrinks(base in 0u64..100_000, max in 0u64..10_000_000, n in 1u32..200) {
            let b = Backoff::exponential(Duration::from_millis(base), Duration::from_millis(max));
            prop_assert!(b.delay(n) <= b.max);
            prop_assert!(b.delay(n + 1) >= b.delay(n));
            if base <= max && n == 1 {
                prop_assert_eq!(b.delay(n), b.base);
            }
            let r = Backoff::from_ms(b.base_ms(), b.max_ms());
            prop_assert_eq!(r, b);
        }
    }
}
