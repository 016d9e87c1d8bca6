//! Sliding window log, the obvious way: keep every timestamp ever logged.

use super::{Oracle, Retry, decision, peek};
use sluice_core::Decision;

/// `N` per window `W`, `accepted` or `attempts`, with an unbounded log.
#[derive(Clone, Debug)]
pub(crate) struct SlidingLogOracle {
    limit: u64,
    window: u64,
    attempts: bool,
    /// Every entry ever appended, in the order appended (so never decreasing).
    log: Vec<u64>,
}

impl SlidingLogOracle {
    pub(crate) fn new(limit: u64, window: u64, attempts: bool) -> Self {
        SlidingLogOracle { limit, window, attempts, log: Vec::new() }
    }

    /// `now`, but never before the newest entry ever appended.
    fn effective_now(&self, now: u64) -> u64 {
        self.log.iter().copied().fold(now, u64::max)
    }

    /// Entries `t` with `t + W > now`.
    fn count(&self, log: &[u64], now: u64) -> u64 {
        log.iter().filter(|&&t| t + self.window > now).count() as u64
    }

    /// `newest + W − now` if any entry is in the window, else 0.
    fn reset_after(&self, log: &[u64], now: u64) -> u64 {
        if self.count(log, now) == 0 {
            return 0;
        }
        let newest = log.iter().copied().max().unwrap_or(0);
        newest + self.window - now
    }

    /// The `k`-th newest entry (1 = newest).
    fn kth_newest(log: &[u64], k: u64) -> u64 {
        let mut sorted = log.to_vec();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        sorted[usize::try_from(k - 1).unwrap_or(usize::MAX)]
    }

    /// The decision of a request of `cost ≥ 1`, with the log it leaves.
    fn judge(&self, now: u64, cost: u64) -> (Decision, Vec<u64>) {
        let n = self.limit;
        let now = self.effective_now(now);
        let count = self.count(&self.log, now);
        let allowed = count + cost <= n;
        let mut after = self.log.clone();
        if allowed || self.attempts {
            after.extend(std::iter::repeat_n(now, usize::try_from(cost).unwrap_or(usize::MAX)));
        }
        let remaining = n.saturating_sub(self.count(&after, now));
        let reset_after = self.reset_after(&after, now);
        let retry = if allowed {
            Retry::None
        } else if cost > n {
            Retry::Never
        } else {
            // On the log after this request's own appends (attempts logs even a rejection).
            let t = Self::kth_newest(&after, n - cost + 1);
            Retry::After(t + self.window - now)
        };
        (decision(allowed, n, remaining, reset_after, retry, 0), after)
    }
}

impl Oracle for SlidingLogOracle {
    fn decide(&self, now: u64, cost: u64) -> Decision {
        if cost == 0 {
            // A peek logs nothing, in either variant: it reports when a cost-1 request would
            // pass if no other request came, i.e. judged on the unchanged log.
            let unchanged = SlidingLogOracle { attempts: false, ..self.clone() };
            let (one, _) = unchanged.judge(now, 1);
            let now = self.effective_now(now);
            let remaining = self.limit.saturating_sub(self.count(&self.log, now));
            return peek(&one, remaining, self.reset_after(&self.log, now));
        }
        self.judge(now, cost).0
    }

    fn commit(&mut self, now: u64, cost: u64, admitted: bool) {
        if cost > 0 && (admitted || self.attempts) {
            let now = self.effective_now(now);
            self.log.extend(std::iter::repeat_n(now, usize::try_from(cost).unwrap_or(usize::MAX)));
        }
    }
}
