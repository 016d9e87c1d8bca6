//! Allowed and rejected requests over time, in buckets that widen as the log grows, so a
//! chart has at most [`MAX_BUCKETS`] points whatever the log's length.

use serde::Serialize;
use sluice_core::Timestamp;

/// The most buckets a series keeps: past it, adjacent buckets merge in pairs.
pub(crate) const MAX_BUCKETS: usize = 1000;

/// The first bucket width: one second.
const FIRST_WIDTH_US: u64 = 1_000_000;

/// Counts per time bucket; bucket `i` covers `[start + i·width, start + (i+1)·width)`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Series {
    /// The first bucket's start, µs since the epoch (the first time, down to the second).
    start_us: u64,
    /// Every bucket's width in µs: one second, doubled each time the buckets merge.
    width_us: u64,
    allowed: Vec<u64>,
    rejected: Vec<u64>,
}

impl Series {
    /// A series with one-second buckets starting at its first request.
    pub(crate) fn new() -> Series {
        Series { start_us: u64::MAX, width_us: FIRST_WIDTH_US, allowed: Vec::new(), rejected: Vec::new() }
    }

    /// An empty series with the same buckets as `layout`, to chart alongside it.
    pub(crate) fn aligned_with(layout: &Series) -> Series {
        Series { start_us: layout.start_us, width_us: layout.width_us, allowed: Vec::new(), rejected: Vec::new() }
    }

    /// Counts one request at `now`; times never go backwards in a replay, and one before
    /// the start is counted in the first bucket.
    pub(crate) fn record(&mut self, now: Timestamp, allowed: bool) {
        let now = now.as_micros();
        if self.start_us == u64::MAX {
            self.start_us = now - now % FIRST_WIDTH_US;
        }
        let mut index = self.index_of(now);
        while index >= MAX_BUCKETS {
            self.merge_pairs();
            index = self.index_of(now);
        }
        if index >= self.allowed.len() {
            self.allowed.resize(index + 1, 0);
            self.rejected.resize(index + 1, 0);
        }
        let counts = if allowed { &mut self.allowed } else { &mut self.rejected };
        counts[index] += 1;
    }

    fn index_of(&self, now: u64) -> usize {
        usize::try_from(now.saturating_sub(self.start_us) / self.width_us).unwrap_or(usize::MAX)
    }

    /// Doubles the width: bucket `i` becomes the sum of buckets `2i` and `2i + 1`.
    fn merge_pairs(&mut self) {
        for counts in [&mut self.allowed, &mut self.rejected] {
            *counts = counts.chunks(2).map(|pair| pair.iter().sum()).collect();
        }
        self.width_us = self.width_us.saturating_mul(2);
    }

    /// How many buckets hold counts.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.allowed.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: u64) -> Timestamp {
        Timestamp::from_micros(seconds * 1_000_000 + 250_000)
    }

    #[test]
    fn counts_per_second_from_the_first_request() {
        let mut series = Series::new();
        for (second, allowed) in [(10, true), (10, false), (12, true)] {
            series.record(at(second), allowed);
        }
        assert_eq!(series.start_us, 10_000_000);
        assert_eq!(series.allowed, [1, 0, 1]);
        assert_eq!(series.rejected, [1, 0, 0]);
    }

    #[test]
    fn merges_buckets_past_the_cap_and_keeps_every_count() {
        let mut series = Series::new();
        for second in 0..2500 {
            series.record(at(second), second % 5 != 0);
        }
        assert!(series.len() <= MAX_BUCKETS);
        assert_eq!(series.width_us, 4_000_000);
        assert_eq!(series.allowed.iter().sum::<u64>(), 2000);
        assert_eq!(series.rejected.iter().sum::<u64>(), 500);
        let mut aligned = Series::aligned_with(&series);
        aligned.record(at(2499), true);
        assert_eq!((aligned.len(), aligned.width_us), (625, 4_000_000));
    }
}
