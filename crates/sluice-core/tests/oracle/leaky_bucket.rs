//! Leaky bucket as GCRA, exactly as docs/semantics.md writes it.

use super::{Oracle, Retry, decision, peek, to_u64};
use sluice_core::Decision;

/// One request every `I` µs, `burst` more may queue; `delay` mode shapes.
#[derive(Clone, Debug)]
pub(crate) struct LeakyBucketOracle {
    interval: i128,
    burst: u64,
    delay_mode: bool,
    /// The theoretical arrival time; `None` for a new key (it starts at `now`).
    tat: Option<i128>,
}

impl LeakyBucketOracle {
    pub(crate) fn new(interval: u64, burst: u64, delay_mode: bool) -> Self {
        LeakyBucketOracle { interval: i128::from(interval), burst, delay_mode, tat: None }
    }

    fn tolerance(&self) -> i128 {
        i128::from(self.burst + 1) * self.interval
    }

    /// `floor(((burst + 1)·I − (max(tat, now) − now)) / I)`, at least 0.
    fn remaining(&self, tat: i128, now: i128) -> u64 {
        to_u64((self.tolerance() - (tat.max(now) - now)).div_euclid(self.interval).max(0))
    }

    /// `max(0, tat − now)`.
    fn reset_after(tat: i128, now: i128) -> u64 {
        to_u64((tat - now).max(0))
    }

    /// The decision of a request of `cost ≥ 1` and the `tat` it leaves when admitted.
    fn judge(&self, now: u64, cost: u64) -> (Decision, i128) {
        let limit = self.burst + 1;
        let now = i128::from(now);
        let tat = self.tat.unwrap_or(now);
        let start = tat.max(now);
        let end = start + i128::from(cost) * self.interval;
        let allowed = end - now <= self.tolerance();
        let after = if allowed { end } else { tat };
        let retry = if allowed {
            Retry::None
        } else if cost > limit {
            Retry::Never
        } else {
            Retry::After(to_u64(tat + i128::from(cost) * self.interval - self.tolerance() - now))
        };
        let delay = if allowed && self.delay_mode { to_u64(start - now) } else { 0 };
        let remaining = self.remaining(after, now);
        (decision(allowed, limit, remaining, Self::reset_after(after, now), retry, delay), end)
    }
}

impl Oracle for LeakyBucketOracle {
    fn decide(&self, now: u64, cost: u64) -> Decision {
        if cost == 0 {
            let (one, _) = self.judge(now, 1);
            let now = i128::from(now);
            let tat = self.tat.unwrap_or(now);
            return peek(&one, self.remaining(tat, now), Self::reset_after(tat, now));
        }
        self.judge(now, cost).0
    }

    fn commit(&mut self, now: u64, cost: u64, admitted: bool) {
        if cost > 0 && admitted {
            self.tat = Some(self.judge(now, cost).1);
        }
    }
}
