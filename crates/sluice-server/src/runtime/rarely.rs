//! Something logged when it first happens, then at most once a minute with how often it
//! happened meanwhile: how every repeated event is logged (failed accepts, calls to
//! services Sluice does not serve, exhausted RLQS rules), so that none floods the log.

use std::time::{Duration, Instant};

/// How often a condition that persists is logged again.
pub(crate) const LOG_EVERY: Duration = Duration::from_secs(60);

/// Something logged when it first happens, then at most once per [`LOG_EVERY`].
#[derive(Debug, Default)]
pub(crate) struct Rarely {
    logged_at: Option<Instant>,
    unlogged: u64,
}

impl Rarely {
    /// Counts one occurrence at `now`; when it is time to log, how many occurred since the
    /// last log (this one included).
    pub(crate) fn occurred(&mut self, now: Instant) -> Option<u64> {
        self.unlogged += 1;
        if self.logged_at.is_some_and(|at| now.saturating_duration_since(at) < LOG_EVERY) {
            return None;
        }
        self.logged_at = Some(now);
        Some(std::mem::take(&mut self.unlogged))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lasting_condition_is_logged_once_a_minute_with_its_count() {
        let mut rarely = Rarely::default();
        let start = Instant::now();
        assert_eq!(rarely.occurred(start), Some(1));
        for second in 1..60 {
            assert_eq!(rarely.occurred(start + Duration::from_secs(second)), None);
        }
        assert_eq!(rarely.occurred(start + LOG_EVERY), Some(60));
    }
}
