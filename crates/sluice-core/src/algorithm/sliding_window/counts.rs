//! A sliding window counter's per-key state: a ring of `B + 1` counters on the key's bucket
//! grid, and the view a decision reads them through.

use smallvec::SmallVec;

/// A key's bucket counts: a ring of `B + 1` counters ending at bucket `newest`, on the grid
/// that starts at `anchor` (0 for clock-aligned windows; the key's first request for
/// anchored ones).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BucketCounts {
    /// The grid's origin, µs: bucket `j` covers `[anchor + j·w, anchor + (j + 1)·w)`.
    pub(crate) anchor: u64,
    /// Index of the newest bucket with counted cost.
    pub(crate) newest: u64,
    /// Counters by `bucket % (B + 1)`; empty for a fresh key.
    pub(crate) counts: SmallVec<[u64; 2]>,
}

/// What [`SlidingWindow::record`](super::SlidingWindow) adds: the cost, in which bucket of
/// which grid.
#[derive(Clone, Copy, Debug)]
pub struct BucketAdd {
    pub(super) anchor: u64,
    pub(super) bucket: u64,
    pub(super) cost: u64,
}

impl BucketCounts {
    /// The state whose newest bucket is `newest`, with counters `counts` by
    /// `bucket % (B + 1)` (empty for a fresh key), on the clock-aligned grid: for stores
    /// that keep it in their own layout, such as the Redis module's packed string.
    pub fn from_parts(newest: u64, counts: &[u64]) -> Self {
        BucketCounts { anchor: 0, newest, counts: SmallVec::from_slice(counts) }
    }

    /// The same state on the grid that starts at `anchor` (µs), as anchored windows keep.
    pub fn with_anchor(self, anchor: u64) -> Self {
        BucketCounts { anchor, ..self }
    }

    /// The grid's origin, µs (0 on the clock-aligned grid).
    pub fn anchor(&self) -> u64 {
        self.anchor
    }

    /// Index of the newest bucket with counted cost (meaningless when fresh).
    pub fn newest(&self) -> u64 {
        self.newest
    }

    /// Counters by `bucket % (B + 1)`; empty for a fresh key.
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    /// Adds `add` to its bucket, each counter held at most `cap` (see
    /// [`SlidingWindow::counter_cap`](super::SlidingWindow)). A new grid starts the ring
    /// afresh: the old grid's counters are all outside the window.
    pub(super) fn add(&mut self, add: BucketAdd, slots: u64, cap: u64) {
        if self.counts.is_empty() || add.anchor != self.anchor {
            self.counts.clear();
            self.counts.resize(slots as usize, 0);
            self.anchor = add.anchor;
            self.newest = add.bucket;
        } else if add.bucket > self.newest {
            // Buckets skipped since the newest one hold nothing any more.
            let skipped = (add.bucket - self.newest).min(slots);
            for i in 1..=skipped {
                self.counts[((self.newest + i) % slots) as usize] = 0;
            }
            self.newest = add.bucket;
        }
        let slot = &mut self.counts[(add.bucket % slots) as usize];
        *slot = slot.saturating_add(add.cost).min(cap);
    }

    /// Takes `units` back from the bucket that starts at `start` on this grid, while the
    /// ring holds it, keeping at least one unit where any was counted.
    pub(super) fn take_back(&mut self, start: u64, units: u64, width: u64, slots: u64) {
        let Some(offset) = start.checked_sub(self.anchor) else { return };
        if self.counts.is_empty() || offset % width != 0 {
            return;
        }
        let bucket = offset / width;
        if bucket > self.newest || self.newest - bucket >= slots {
            return;
        }
        let slot = &mut self.counts[(bucket % slots) as usize];
        if *slot > 0 {
            *slot = slot.saturating_sub(units).max(1);
        }
    }

    /// Bytes this state holds on the heap (none for up to two counters).
    pub fn heap_bytes(&self) -> usize {
        if self.counts.spilled() { self.counts.capacity() * size_of::<u64>() } else { 0 }
    }
}

/// The counters as a decision reads them: the state's, plus the cost of the request being
/// judged where it is counted before the answer is computed (a rejected attempt).
#[derive(Clone, Copy, Debug)]
pub(super) struct Counts<'a> {
    state: &'a BucketCounts,
    buckets: u64,
    cap: u64,
    pending: Option<(u64, u64)>,
}

impl<'a> Counts<'a> {
    /// The counters of `state`, for `buckets` buckets, each at most `cap`.
    pub(super) fn new(state: &'a BucketCounts, buckets: u64, cap: u64) -> Self {
        Counts { state, buckets, cap, pending: None }
    }

    /// The same counters with `cost` more in bucket `bucket` (held at the cap).
    pub(super) fn with(self, bucket: u64, cost: u64) -> Self {
        Counts { pending: Some((bucket, cost)), ..self }
    }

    /// The newest bucket with counted cost, if any.
    pub(super) fn newest(&self) -> Option<u64> {
        let held = (!self.state.counts.is_empty()).then_some(self.state.newest);
        match (held, self.pending) {
            (Some(newest), Some((bucket, _))) => Some(newest.max(bucket)),
            (held, pending) => held.or(pending.map(|(bucket, _)| bucket)),
        }
    }

    /// Counted cost in bucket `index` (`None`: before the grid's start).
    pub(super) fn at(&self, index: Option<u64>) -> u64 {
        let Some(index) = index else { return 0 };
        let state = self.state;
        let stored = if !state.counts.is_empty() && index <= state.newest && state.newest - index <= self.buckets {
            state.counts[(index % (self.buckets + 1)) as usize]
        } else {
            0
        };
        match self.pending {
            Some((bucket, cost)) if bucket == index => stored.saturating_add(cost).min(self.cap),
            _ => stored,
        }
    }

    /// Sum of buckets `j − B + 1 ..= j` (saturating: a restored state's counters are each
    /// at most the cap, but their sum is not checked).
    pub(super) fn full_sum(&self, j: u64) -> u64 {
        let first = j.saturating_sub(self.buckets - 1);
        (first..=j).map(|i| self.at(Some(i))).fold(0, u64::saturating_add)
    }
}
