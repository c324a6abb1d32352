//! Log lines that a client can make the server write at will (one per
//! connection it opens) written at most once per interval, each saying how
//! many like it were left out since the last.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One kind of log line, rate-limited.
#[derive(Debug)]
pub(crate) struct Throttle {
    every: Duration,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// When a line of this kind was last written.
    last: Option<Instant>,
    /// Lines left out since.
    left_out: u64,
}

impl Throttle {
    pub(crate) const fn new(every: Duration) -> Throttle {
        Throttle {
            every,
            state: Mutex::new(State {
                last: None,
                left_out: 0,
            }),
        }
    }

    /// Whether a line may be written now; if so, how many were left out
    /// since the last one, for it to say.
    pub(crate) fn allow(&self) -> Option<u64> {
        self.allow_at(Instant::now())
    }

    fn allow_at(&self, now: Instant) -> Option<u64> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match state.last {
            Some(last) if now.saturating_duration_since(last) < self.every => {
                state.left_out += 1;
                None
            }
            _ => {
                state.last = Some(now);
                Some(std::mem::take(&mut state.left_out))
            }
        }
    }
}

/// What a line adds about those left out before it: nothing, or
/// ` (4999 more like it since the last, at most one every 10s, not
/// logged)`.
pub(crate) fn left_out(n: u64, every: Duration) -> String {
    if n == 0 {
        return String::new();
    }
    format!(
        " ({n} more like it since the last, at most one every {}s, not logged)",
        every.as_secs()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_interval_and_the_next_counts_those_left_out() {
        let throttle = Throttle::new(Duration::from_secs(10));
        let start = Instant::now();
        assert_eq!(throttle.allow_at(start), Some(0));
        for i in 1..=4999 {
            assert_eq!(throttle.allow_at(start + Duration::from_millis(i)), None);
        }
        let later = start + Duration::from_secs(10);
        assert_eq!(throttle.allow_at(later), Some(4999));
        assert_eq!(throttle.allow_at(later + Duration::from_secs(1)), None);
        assert_eq!(throttle.allow_at(later + Duration::from_secs(30)), Some(1));
        assert_eq!(left_out(0, Duration::from_secs(10)), "");
        assert!(left_out(4999, Duration::from_secs(10)).contains("4999 more"));
    }
}
