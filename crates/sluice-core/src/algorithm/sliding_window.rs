//! Sliding window counter ("floating window"): the approximation of the sliding log that
//! keeps one counter per bucket instead of one timestamp per request.
//!
//! The window of length `window` is cut into `buckets` epoch-aligned buckets of width
//! `w = window / buckets`. At `now`, `e` into bucket `j`, the estimate counts the buckets
//! `j − B + 1 ..= j` in full and the oldest bucket `j − B` in proportion to how much of it is
//! still inside the window:
//!
//! ```text
//! B = 1, limit = 10       |--- bucket j−1: 8 ---|--- bucket j: 3 ---|
//!                                     now = 25% into j ^
//! estimate = 8 × 75% + 3 = 9 → one more request fits
//! ```
//!
//! `B = 1` is the two-counter approximation Cloudflare and Upstash use; a larger `B` is the
//! multi-bucket counter and approaches the exact log as `B` grows. All arithmetic is on
//! integers (`c[j−B]·(w − e) + (sum + cost)·w ≤ N·w`), so every store agrees exactly.

use super::Algorithm;
use super::parameters::{PolicyError, Validation};
use super::source::{ParameterSource, ReadParameters};
use crate::{Decision, Timestamp};
use smallvec::SmallVec;
use std::time::Duration;

/// The sliding window counter: an estimated `limit` per `window`, over `buckets` buckets.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SlidingWindow {
    limit: u64,
    window: u64,
    buckets: u64,
    /// Bucket width `w`, µs.
    width: u64,
}

impl SlidingWindow {
    /// The largest number of buckets: state and work per decision grow with it.
    pub const MAX_BUCKETS: u64 = 10_000;

    /// A sliding window counter of `limit` per `window`, with `buckets` buckets.
    ///
    /// # Errors
    ///
    /// When a parameter is zero, `buckets` exceeds [`MAX_BUCKETS`](Self::MAX_BUCKETS),
    /// `window` is not divisible by `buckets`, or `limit × window / buckets` is not below 2^53.
    pub fn new(limit: u64, window: Duration, buckets: u64) -> Result<Self, PolicyError> {
        let mut checks = Validation::default();
        checks.require(limit >= 1, "limit", "must be at least 1");
        let window = checks.micros("window", window);
        let in_range = (1..=Self::MAX_BUCKETS).contains(&buckets);
        if !in_range {
            checks.fail("buckets", format!("must be between 1 and {}", Self::MAX_BUCKETS));
        }
        let width = if in_range { window / buckets } else { 0 };
        if in_range && !checks.failed("window") {
            if window % buckets != 0 {
                checks.fail("buckets", format!("must divide the window ({window} µs) exactly"));
            }
            let message = "limit × bucket width (µs) must be below 2^53";
            checks.exact_with("limit", u128::from(limit) * u128::from(width), message);
        }
        checks.finish(|| SlidingWindow { limit, window, buckets, width })
    }

    /// The limit `N`.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The window length.
    pub fn window(&self) -> Duration {
        Duration::from_micros(self.window)
    }

    /// The number of buckets `B`.
    pub fn buckets(&self) -> u64 {
        self.buckets
    }

    /// The bucket width `w`, µs.
    pub(crate) fn width(&self) -> u64 {
        self.width
    }

    /// Admitted cost in bucket `index`, given the key's state as of bucket `current`.
    fn count(&self, state: &BucketCounts, index: Option<u64>) -> u64 {
        match index {
            Some(index) if !state.counts.is_empty() && index <= state.newest => {
                if state.newest - index > self.buckets {
                    0
                } else {
                    state.counts[(index % (self.buckets + 1)) as usize]
                }
            }
            _ => 0,
        }
    }

    /// Sum of buckets `j − B + 1 ..= j` (saturating: a restored state's counters are each
    /// at most the limit, but their sum is not checked).
    fn full_sum(&self, state: &BucketCounts, j: u64) -> u64 {
        let first = j.saturating_sub(self.buckets - 1);
        (first..=j).map(|i| self.count(state, Some(i))).fold(0, u64::saturating_add)
    }

    /// Largest `k` with `prev·(w − e) + (sum + k)·w ≤ N·w`, or 0.
    fn room(&self, prev: u64, sum: u64, e: u64) -> u64 {
        let w = u128::from(self.width);
        let budget = u128::from(self.limit) * w;
        let weighted = u128::from(prev) * (w - u128::from(e));
        let fits = budget.saturating_sub(weighted) / w;
        u64::try_from(fits.saturating_sub(u128::from(sum))).unwrap_or(u64::MAX)
    }

    /// µs from `now` until the state is fresh, if bucket `newest` is the newest non-empty one.
    fn reset_after(&self, newest: Option<u64>, j: u64, now: u64) -> u64 {
        match newest {
            Some(n) if j - n <= self.buckets => {
                let end = (u128::from(n) + u128::from(self.buckets) + 1) * u128::from(self.width);
                u64::try_from(end).unwrap_or(u64::MAX).saturating_sub(now)
            }
            _ => 0,
        }
    }

    /// µs until a request of `cost ≤ limit` fits if nothing else is admitted meanwhile.
    fn retry_after(&self, state: &BucketCounts, j: u64, e: u64, cost: u64) -> u64 {
        let w = u128::from(self.width);
        let budget = u128::from(self.limit) * w;
        let mut prev = self.count(state, j.checked_sub(self.buckets));
        let mut sum = self.full_sum(state, j);
        // Saturating: a time near the end of `u64` must not overflow (nor panic).
        for k in j..=j.saturating_add(self.buckets + 1) {
            let earliest = if k == j { u128::from(e) } else { 0 };
            let needed = (u128::from(sum) + u128::from(cost)) * w;
            if let Some(slack) = budget.checked_sub(needed) {
                let offset = match slack.checked_div(u128::from(prev)) {
                    None => earliest,
                    Some(allowed_weight) => earliest.max(w.saturating_sub(allowed_weight)),
                };
                if offset < w {
                    let at = u128::from(k) * w + offset;
                    let now = u128::from(j) * w + u128::from(e);
                    return u64::try_from(at - now).unwrap_or(u64::MAX);
                }
            }
            // Move to bucket k + 1: bucket k − B + 1 becomes the partial one.
            prev = self.count(state, k.saturating_add(1).checked_sub(self.buckets));
            sum = sum.saturating_sub(prev);
        }
        self.window
    }
}

/// What [`SlidingWindow::record`] needs: the bucket and the cost to add to it.
#[derive(Clone, Copy, Debug)]
pub struct BucketAdd {
    bucket: u64,
    cost: u64,
}

impl Algorithm for SlidingWindow {
    type State = BucketCounts;
    type Plan = Option<BucketAdd>;

    fn name(&self) -> &'static str {
        "sliding_window"
    }

    fn limit(&self) -> u64 {
        self.limit
    }

    fn quota_window(&self) -> Duration {
        self.window()
    }

    /// The window and one bucket: the previous window's buckets are still weighed.
    fn look_ahead(&self) -> Duration {
        Duration::from_micros(self.window + self.window / self.buckets)
    }

    fn parameters(&self) -> Vec<(&'static str, String)> {
        vec![
            ("limit", self.limit.to_string()),
            ("window_us", self.window.to_string()),
            ("buckets", self.buckets.to_string()),
        ]
    }

    #[inline(always)]
    fn decide(&self, state: &BucketCounts, now: Timestamp, cost: u64) -> (Decision, Self::Plan) {
        let newest = (!state.counts.is_empty()).then_some(state.newest);
        // Time never runs backwards inside a state: not before its newest bucket's start.
        let floor = newest.map_or(0, |n| n.saturating_mul(self.width));
        let now = now.as_micros().max(floor);
        let j = now / self.width;
        let e = now - j * self.width;
        let prev = self.count(state, j.checked_sub(self.buckets));
        let sum = self.full_sum(state, j);
        let room = self.room(prev, sum, e);
        let n = self.limit;
        let reset_after = self.reset_after(newest, j, now);
        if cost == 0 {
            let decision = if room >= 1 {
                Decision::allow(n, room, reset_after)
            } else {
                Decision::reject(n, 0, reset_after, self.retry_after(state, j, e, 1))
            };
            return (decision, None);
        }
        if cost > n {
            return (Decision::never(n, room, reset_after), None);
        }
        if cost > room {
            let retry = self.retry_after(state, j, e, cost);
            return (Decision::reject(n, room, reset_after, retry), None);
        }
        let reset_after = self.reset_after(Some(j), j, now);
        let plan = BucketAdd { bucket: j, cost };
        (Decision::allow(n, room - cost, reset_after), Some(plan))
    }

    #[inline(always)]
    fn record(&self, state: &mut BucketCounts, plan: Self::Plan, admitted: bool) {
        if let (true, Some(add)) = (admitted, plan) {
            state.add(add, self.buckets + 1);
        }
    }

    fn expires_at(&self, state: &BucketCounts) -> Timestamp {
        if state.counts.is_empty() {
            return Timestamp::EPOCH;
        }
        let end = (u128::from(state.newest) + u128::from(self.buckets) + 1) * u128::from(self.width);
        Timestamp::from_micros(u64::try_from(end).unwrap_or(u64::MAX))
    }
}

impl ReadParameters for SlidingWindow {
    fn read(source: &mut dyn ParameterSource) -> Option<Result<Self, PolicyError>> {
        let limit = source.count("limit", 1, None);
        let window = source.duration("window");
        let buckets = source.count("buckets", 1, Some(1));
        Some(SlidingWindow::new(limit?, window?, buckets?))
    }
}

/// A key's bucket counts: a ring of `B + 1` counters ending at bucket `newest`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BucketCounts {
    /// Index of the newest bucket with admitted cost (`floor(t / w)`).
    pub(crate) newest: u64,
    /// Counters by `bucket % (B + 1)`; empty for a fresh key.
    pub(crate) counts: SmallVec<[u64; 2]>,
}

impl BucketCounts {
    /// The state whose newest bucket is `newest`, with counters `counts` by
    /// `bucket % (B + 1)` (empty for a fresh key): for stores that keep it in their own
    /// layout, such as the Redis module's packed string.
    pub fn from_parts(newest: u64, counts: &[u64]) -> Self {
        BucketCounts { newest, counts: SmallVec::from_slice(counts) }
    }

    /// Index of the newest bucket with admitted cost (meaningless when fresh).
    pub fn newest(&self) -> u64 {
        self.newest
    }

    /// Counters by `bucket % (B + 1)`; empty for a fresh key.
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    fn add(&mut self, add: BucketAdd, slots: u64) {
        if self.counts.is_empty() {
            self.counts.resize(slots as usize, 0);
        } else if add.bucket > self.newest {
            // Buckets skipped since the newest one hold nothing any more.
            let skipped = (add.bucket - self.newest).min(slots);
            for i in 1..=skipped {
                self.counts[((self.newest + i) % slots) as usize] = 0;
            }
        }
        self.newest = self.newest.max(add.bucket);
        let slot = &mut self.counts[(add.bucket % slots) as usize];
        *slot = slot.saturating_add(add.cost);
    }

    /// Bytes this state holds on the heap (none for up to two counters).
    pub fn heap_bytes(&self) -> usize {
        if self.counts.spilled() { self.counts.capacity() * size_of::<u64>() } else { 0 }
    }
}
