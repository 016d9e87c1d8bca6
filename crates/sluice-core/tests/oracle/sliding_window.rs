//! Sliding window counter: docs/semantics.md's integer formula over every bucket ever counted, and a
//! per-µs scan for `retry_after`.

use super::{Oracle, Retry, decision, peek, to_u64};
use sluice_core::Decision;
use std::collections::BTreeMap;

/// `N` per window `B·w`, over `B` buckets of width `w`.
#[derive(Clone, Debug)]
pub(crate) struct SlidingWindowOracle {
    limit: u64,
    width: u64,
    buckets: u64,
    /// Admitted cost per bucket index `floor(t / w)`; never pruned.
    counts: BTreeMap<u64, u64>,
}

impl SlidingWindowOracle {
    pub(crate) fn new(limit: u64, width: u64, buckets: u64) -> Self {
        SlidingWindowOracle { limit, width, buckets, counts: BTreeMap::new() }
    }

    /// The newest non-empty bucket.
    fn newest(counts: &BTreeMap<u64, u64>) -> Option<u64> {
        counts.iter().rev().find(|(_, c)| **c > 0).map(|(j, _)| *j)
    }

    /// `now`, but never before the start of the newest non-empty bucket.
    fn effective_now(&self, now: u64) -> u64 {
        Self::newest(&self.counts).map_or(now, |n| now.max(n * self.width))
    }

    fn count(counts: &BTreeMap<u64, u64>, index: i128) -> u64 {
        u64::try_from(index).ok().and_then(|i| counts.get(&i).copied()).unwrap_or(0)
    }

    /// `(j, e, c[j−B], c[j−B+1] + … + c[j])` at `now`.
    fn terms(&self, counts: &BTreeMap<u64, u64>, now: u64) -> (u64, u64, u64, u64) {
        let j = now / self.width;
        let e = now - j * self.width;
        let (jj, b) = (i128::from(j), i128::from(self.buckets));
        let prev = Self::count(counts, jj - b);
        let sum = (jj - b + 1..=jj).map(|i| Self::count(counts, i)).sum();
        (j, e, prev, sum)
    }

    /// docs/semantics.md: `c[j−B]·(w − e) + (c[j−B+1] + … + c[j] + cost)·w ≤ N·w`.
    fn fits(&self, counts: &BTreeMap<u64, u64>, now: u64, cost: u64) -> bool {
        let (_, e, prev, sum) = self.terms(counts, now);
        let w = u128::from(self.width);
        u128::from(prev) * (w - u128::from(e)) + (u128::from(sum) + u128::from(cost)) * w <= u128::from(self.limit) * w
    }

    /// `max(0, floor((N·w − c[j−B]·(w − e)) / w) − sum)`.
    fn remaining(&self, counts: &BTreeMap<u64, u64>, now: u64) -> u64 {
        let (_, e, prev, sum) = self.terms(counts, now);
        let w = i128::from(self.width);
        let room = (i128::from(self.limit) * w - i128::from(prev) * (w - i128::from(e))).div_euclid(w);
        to_u64((room - i128::from(sum)).max(0))
    }

    /// `(n + B + 1)·w − now` for the newest non-empty bucket `n ≥ j − B`, else 0.
    fn reset_after(&self, counts: &BTreeMap<u64, u64>, now: u64) -> u64 {
        let j = i128::from(now / self.width);
        match Self::newest(counts) {
            Some(n) if i128::from(n) >= j - i128::from(self.buckets) => (n + self.buckets + 1) * self.width - now,
            _ => 0,
        }
    }

    /// The first µs `T ≥ now` at which `cost` fits if nothing else is admitted.
    fn retry_after(&self, now: u64, cost: u64) -> u64 {
        let mut t = now;
        while !self.fits(&self.counts, t, cost) {
            t += 1;
            assert!(t - now <= 10 * self.width * (self.buckets + 1), "oracle bug: retry scan runs away");
        }
        t - now
    }

    fn judge(&self, now: u64, cost: u64) -> Decision {
        let n = self.limit;
        let now = self.effective_now(now);
        let allowed = self.fits(&self.counts, now, cost);
        let mut after = self.counts.clone();
        if allowed {
            *after.entry(now / self.width).or_insert(0) += cost;
        }
        let retry = if allowed {
            Retry::None
        } else if cost > n {
            Retry::Never
        } else {
            Retry::After(self.retry_after(now, cost))
        };
        decision(allowed, n, self.remaining(&after, now), self.reset_after(&after, now), retry, 0)
    }
}

impl Oracle for SlidingWindowOracle {
    fn decide(&self, now: u64, cost: u64) -> Decision {
        if cost == 0 {
            let one = self.judge(now, 1);
            let now = self.effective_now(now);
            return peek(&one, self.remaining(&self.counts, now), self.reset_after(&self.counts, now));
        }
        self.judge(now, cost)
    }

    fn commit(&mut self, now: u64, cost: u64, admitted: bool) {
        if cost > 0 && admitted {
            let now = self.effective_now(now);
            *self.counts.entry(now / self.width).or_insert(0) += cost;
        }
    }
}
