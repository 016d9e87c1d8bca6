//! Token bucket with discrete refill, exactly as docs/semantics.md writes it.

use super::{Oracle, Retry, decision, peek};
use sluice_core::Decision;

/// `C` tokens, `A` more every `I` µs.
#[derive(Clone, Debug)]
pub(crate) struct TokenBucketOracle {
    capacity: u64,
    amount: u64,
    interval: u64,
    /// `(tokens, last)`, written only on admission; `None` for a new key (full).
    stored: Option<(u64, u64)>,
}

impl TokenBucketOracle {
    pub(crate) fn new(capacity: u64, amount: u64, interval: u64) -> Self {
        TokenBucketOracle { capacity, amount, interval, stored: None }
    }

    /// `(tokens, last, now)` after the refill docs/semantics.md describes, at the effective `now`.
    fn refilled(&self, now: u64) -> (u64, u64, u64) {
        let Some((tokens, last)) = self.stored else {
            // A new key starts full, its refill clock starting at its first request.
            return (self.capacity, now, now);
        };
        let now = now.max(last);
        let ticks = (now - last) / self.interval;
        let tokens = (u128::from(tokens) + u128::from(ticks) * u128::from(self.amount)).min(u128::from(self.capacity));
        let tokens = u64::try_from(tokens).unwrap_or(u64::MAX);
        let last = last + ticks * self.interval;
        if tokens == self.capacity { (tokens, now, now) } else { (tokens, last, now) }
    }

    /// µs until the bucket holds `wanted` tokens: tokens arrive at `last + k·I`.
    fn wait(&self, tokens: u64, last: u64, now: u64, wanted: u64) -> u64 {
        let mut k = 0u64;
        while u128::from(tokens) + u128::from(k) * u128::from(self.amount) < u128::from(wanted) {
            k += 1;
        }
        if k == 0 { 0 } else { last + k * self.interval - now }
    }

    fn judge(&self, now: u64, cost: u64) -> Decision {
        let c = self.capacity;
        let (tokens, last, now) = self.refilled(now);
        let allowed = tokens >= cost;
        let after = if allowed { tokens - cost } else { tokens };
        let retry = if allowed {
            Retry::None
        } else if cost > c {
            Retry::Never
        } else {
            Retry::After(self.wait(tokens, last, now, cost))
        };
        decision(allowed, c, after, self.wait(after, last, now, c), retry, 0)
    }
}

impl Oracle for TokenBucketOracle {
    fn decide(&self, now: u64, cost: u64) -> Decision {
        if cost == 0 {
            let one = self.judge(now, 1);
            let (tokens, last, now) = self.refilled(now);
            return peek(&one, tokens, self.wait(tokens, last, now, self.capacity));
        }
        self.judge(now, cost)
    }

    fn commit(&mut self, now: u64, cost: u64, admitted: bool) {
        if cost > 0 && admitted {
            let (tokens, last, _) = self.refilled(now);
            self.stored = Some((tokens - cost, last));
        }
    }
}
