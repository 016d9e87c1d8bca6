//! Fixed window counter, aligned (with an offset) or anchored at the first admitted request.

use super::{Oracle, Retry, decision, peek, to_u64};
use sluice_core::Decision;

/// `N` per window `W`. Times are `i128` so that an aligned window may start before the epoch.
#[derive(Clone, Debug)]
pub(crate) struct FixedWindowOracle {
    limit: u64,
    window: i128,
    anchored: bool,
    offset: i128,
    /// The stored window: its start and the cost admitted in it (written only on admission).
    stored: Option<(i128, u64)>,
}

impl FixedWindowOracle {
    pub(crate) fn new(limit: u64, window: u64, anchored: bool, offset: u64) -> Self {
        FixedWindowOracle { limit, window: i128::from(window), anchored, offset: i128::from(offset), stored: None }
    }

    /// The effective `now` and the current window `(start, count)` at it.
    fn current(&self, now: u64) -> (i128, i128, u64) {
        let mut now = i128::from(now);
        if let Some((start, count)) = self.stored
            && count > 0
            && start > now
        {
            now = start;
        }
        if self.anchored {
            match self.stored {
                Some((start, count)) if count > 0 && now < start + self.window => (now, start, count),
                // No active window: the window a request now would open.
                _ => (now, now, 0),
            }
        } else {
            let start = (now - self.offset).div_euclid(self.window) * self.window + self.offset;
            let count = match self.stored {
                Some((stored, count)) if stored == start => count,
                _ => 0,
            };
            (now, start, count)
        }
    }

    fn judge(&self, now: u64, cost: u64) -> Decision {
        let n = self.limit;
        let (now, start, count) = self.current(now);
        let reset_after = to_u64(start + self.window - now);
        let allowed = count + cost <= n;
        let remaining = if allowed { n - count - cost } else { n - count };
        let retry = if allowed {
            Retry::None
        } else if cost > n {
            Retry::Never
        } else {
            Retry::After(reset_after)
        };
        decision(allowed, n, remaining, reset_after, retry, 0)
    }
}

impl Oracle for FixedWindowOracle {
    fn decide(&self, now: u64, cost: u64) -> Decision {
        if cost == 0 {
            let one = self.judge(now, 1);
            let (effective, start, count) = self.current(now);
            return peek(&one, self.limit - count, to_u64(start + self.window - effective));
        }
        self.judge(now, cost)
    }

    fn commit(&mut self, now: u64, cost: u64, admitted: bool) {
        if cost > 0 && admitted {
            let (_, start, count) = self.current(now);
            self.stored = Some((start, count + cost));
        }
    }
}
