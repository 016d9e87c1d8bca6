//! Sliding window counter: docs/semantics.md's integer formula over every bucket ever counted, and a
//! per-µs scan for `retry_after`. Both variants (`accepted`, `attempts`) and both alignments
//! (`aligned`: the grid starts at 0; `anchored`: at the key's first request, and again at a
//! request that finds the estimate fallen to 0).

use super::{Oracle, Retry, decision, peek, to_u64};
use sluice_core::Decision;
use std::collections::BTreeMap;

/// A key's grid: its origin and the cost counted per bucket index `floor((t − anchor) / w)`.
#[derive(Clone, Debug, Default)]
struct Grid {
    anchor: u64,
    /// Never pruned.
    counts: BTreeMap<u64, u64>,
}

/// `N` per window `B·w`, over `B` buckets of width `w`.
#[derive(Clone, Debug)]
pub(crate) struct SlidingWindowOracle {
    limit: u64,
    width: u64,
    buckets: u64,
    attempts: bool,
    anchored: bool,
    grid: Grid,
}

impl SlidingWindowOracle {
    pub(crate) fn new(limit: u64, width: u64, buckets: u64, attempts: bool, anchored: bool) -> Self {
        SlidingWindowOracle { limit, width, buckets, attempts, anchored, grid: Grid::default() }
    }

    /// The newest non-empty bucket.
    fn newest(grid: &Grid) -> Option<u64> {
        grid.counts.iter().rev().find(|(_, c)| **c > 0).map(|(j, _)| *j)
    }

    /// The grid a request at `now` is judged on, and the time it is judged at: `now`, but
    /// never before the start of the newest non-empty bucket; for anchored windows, a new
    /// grid from `now` when no bucket `j − B ..= j` of the old one has a count.
    fn judged(&self, now: u64) -> (Grid, u64) {
        let grid = &self.grid;
        let now = Self::newest(grid).map_or(now, |n| now.max(grid.anchor + n * self.width));
        let j = (now - grid.anchor) / self.width;
        let fresh = Self::newest(grid).is_none_or(|n| n + self.buckets < j);
        if self.anchored && fresh {
            return (Grid { anchor: now, counts: BTreeMap::new() }, now);
        }
        (grid.clone(), now)
    }

    fn count(grid: &Grid, index: i128) -> u64 {
        u64::try_from(index).ok().and_then(|i| grid.counts.get(&i).copied()).unwrap_or(0)
    }

    /// `(j, e, c[j−B], c[j−B+1] + … + c[j])` at `now`.
    fn terms(&self, grid: &Grid, now: u64) -> (u64, u64, u64, u64) {
        let since = now - grid.anchor;
        let j = since / self.width;
        let e = since - j * self.width;
        let (jj, b) = (i128::from(j), i128::from(self.buckets));
        let prev = Self::count(grid, jj - b);
        let sum = (jj - b + 1..=jj).map(|i| Self::count(grid, i)).sum();
        (j, e, prev, sum)
    }

    /// docs/semantics.md: `c[j−B]·(w − e) + (c[j−B+1] + … + c[j] + cost)·w ≤ N·w`.
    fn fits(&self, grid: &Grid, now: u64, cost: u64) -> bool {
        let (_, e, prev, sum) = self.terms(grid, now);
        let w = u128::from(self.width);
        u128::from(prev) * (w - u128::from(e)) + (u128::from(sum) + u128::from(cost)) * w <= u128::from(self.limit) * w
    }

    /// `max(0, floor((N·w − c[j−B]·(w − e)) / w) − sum)`.
    fn remaining(&self, grid: &Grid, now: u64) -> u64 {
        let (_, e, prev, sum) = self.terms(grid, now);
        let w = i128::from(self.width);
        let room = (i128::from(self.limit) * w - i128::from(prev) * (w - i128::from(e))).div_euclid(w);
        to_u64((room - i128::from(sum)).max(0))
    }

    /// `anchor + (n + B + 1)·w − now` for the newest non-empty bucket `n ≥ j − B`, else 0.
    fn reset_after(&self, grid: &Grid, now: u64) -> u64 {
        let j = i128::from((now - grid.anchor) / self.width);
        match Self::newest(grid) {
            Some(n) if i128::from(n) >= j - i128::from(self.buckets) => {
                grid.anchor + (n + self.buckets + 1) * self.width - now
            }
            _ => 0,
        }
    }

    /// The first µs `T ≥ now` at which `cost` fits on `grid` if nothing else is counted.
    fn retry_after(&self, grid: &Grid, now: u64, cost: u64) -> u64 {
        let mut t = now;
        while !self.fits(grid, t, cost) {
            t += 1;
            assert!(t - now <= 10 * self.width * (self.buckets + 1), "oracle bug: retry scan runs away");
        }
        t - now
    }

    fn add(&self, grid: &mut Grid, now: u64, cost: u64) {
        *grid.counts.entry((now - grid.anchor) / self.width).or_insert(0) += cost;
    }

    fn judge(&self, now: u64, cost: u64) -> Decision {
        let n = self.limit;
        let (grid, now) = self.judged(now);
        let allowed = self.fits(&grid, now, cost);
        let mut after = grid.clone();
        if allowed || self.attempts {
            self.add(&mut after, now, cost);
        }
        // Under `attempts` a rejected request is counted first: its answer is the state's.
        let retry = if allowed {
            Retry::None
        } else if cost > n {
            Retry::Never
        } else if self.attempts {
            Retry::After(self.retry_after(&after, now, cost))
        } else {
            Retry::After(self.retry_after(&grid, now, cost))
        };
        decision(allowed, n, self.remaining(&after, now), self.reset_after(&after, now), retry, 0)
    }
}

impl Oracle for SlidingWindowOracle {
    fn decide(&self, now: u64, cost: u64) -> Decision {
        if cost == 0 {
            let one = if self.attempts {
                // A peek's retry_after logs nothing: the wait of an accepted-style cost-1 request.
                let (grid, at) = self.judged(now);
                let fits = self.fits(&grid, at, 1);
                let retry = if fits { Retry::None } else { Retry::After(self.retry_after(&grid, at, 1)) };
                decision(fits, self.limit, 0, 0, retry, 0)
            } else {
                self.judge(now, 1)
            };
            let (grid, now) = self.judged(now);
            return peek(&one, self.remaining(&grid, now), self.reset_after(&grid, now));
        }
        self.judge(now, cost)
    }

    fn commit(&mut self, now: u64, cost: u64, admitted: bool) {
        if cost > 0 && (admitted || self.attempts) {
            let (mut grid, now) = self.judged(now);
            self.add(&mut grid, now, cost);
            self.grid = grid;
        }
    }
}
