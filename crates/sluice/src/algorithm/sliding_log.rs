//! Sliding window log: the exact limit. A request is allowed while the window
//! `(now − window, now]` holds fewer than `limit` logged requests.
//!
//! ```text
//! limit = 2, window = 1000 ms, accepted
//! time (ms)   100   400   500          1100
//! decision    ok    ok    NO (600 ms)  ok      <- the 100 ms entry expired at 1100
//! ```
//!
//! Both variants depend only on the newest `limit` entries, so the log is a ring buffer of
//! at most `limit` timestamps that grows as it is used ([`SlidingLogState`]). Whether a request
//! fits is one look at the `(limit − cost + 1)`-th newest entry; the number still in the window
//! (for `remaining`) comes from a galloping search that starts where the last write left off,
//! so it costs O(1) when requests keep coming and O(log limit) after a long gap, never O(limit).
//! Memory: 8 bytes per logged request plus a 32-byte header.

use super::Algorithm;
use crate::policy::{PolicyError, check_exact, duration_micros};
use crate::{Decision, Timestamp};
use std::time::Duration;

/// Which requests the log records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SlidingLogVariant {
    /// Only allowed requests are logged (seed 001): a rejected request changes nothing.
    #[default]
    Accepted,
    /// Every attempt is logged, allowed or not (seeds 000 and 002, the book's variant):
    /// a client that keeps hammering stays blocked.
    Attempts,
}

/// The sliding window log: at most `limit` requests in any window of length `window`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SlidingLog {
    limit: u64,
    window: u64,
    variant: SlidingLogVariant,
}

impl SlidingLog {
    /// The largest limit: the ring buffer indexes its slots with `u32`.
    pub const MAX_LIMIT: u64 = u32::MAX as u64;

    /// A sliding log of `limit` requests per `window`.
    ///
    /// # Errors
    ///
    /// When `limit` is 0 or above [`MAX_LIMIT`](Self::MAX_LIMIT), or `window` is shorter than
    /// one microsecond or too long to compute exactly.
    pub fn new(limit: u64, window: Duration, variant: SlidingLogVariant) -> Result<Self, PolicyError> {
        if limit == 0 {
            return Err(PolicyError::new("limit", "must be at least 1"));
        }
        if limit > Self::MAX_LIMIT {
            return Err(PolicyError::new("limit", format!("must be at most {}", Self::MAX_LIMIT)));
        }
        let window = duration_micros("window", window)?;
        check_exact("window", u128::from(window))?;
        Ok(SlidingLog { limit, window, variant })
    }

    /// The limit `N`.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The window length.
    pub fn window(&self) -> Duration {
        Duration::from_micros(self.window)
    }

    /// Which requests are logged.
    pub fn variant(&self) -> SlidingLogVariant {
        self.variant
    }

    fn expired(&self, entry: u64, now: u64) -> bool {
        entry.saturating_add(self.window) <= now
    }

    /// Logical index of the oldest entry still in the window at `now` (`len` if none).
    fn first_live(&self, state: &SlidingLogState, now: u64) -> usize {
        let len = state.len();
        let mut lo = state.expired as usize;
        if lo >= len || !self.expired(state.entry(lo), now) {
            return lo.min(len);
        }
        // Gallop: `lo` is expired; double the step until an entry is live or the log ends.
        let mut step = 1;
        let mut hi = lo + 1;
        while hi < len && self.expired(state.entry(hi), now) {
            lo = hi;
            step *= 2;
            hi = lo + step;
        }
        let mut hi = hi.min(len);
        // Binary search: `lo` is expired, `hi` is live or the end.
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.expired(state.entry(mid), now) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        hi
    }

    /// `t + window − now` for the `rank`-th newest entry (1 = newest).
    fn wait_for_rank(&self, state: &SlidingLogState, rank: u64, now: u64) -> u64 {
        let index = state.len() - usize::try_from(rank).unwrap_or(usize::MAX).min(state.len());
        state.entry(index).saturating_add(self.window).saturating_sub(now)
    }

    fn reset_after(&self, state: &SlidingLogState, live: u64, now: u64) -> u64 {
        match state.newest() {
            Some(newest) if live > 0 => newest.saturating_add(self.window) - now,
            _ => 0,
        }
    }

    /// The decision for a request that cannot fit (`cost` does not fit now).
    fn rejection(&self, state: &SlidingLogState, live: u64, now: u64, cost: u64) -> Decision {
        let n = self.limit;
        match self.variant {
            SlidingLogVariant::Accepted if cost > n => Decision::never(n, n - live, self.reset_after(state, live, now)),
            SlidingLogVariant::Accepted => {
                let wait = self.wait_for_rank(state, n - cost + 1, now);
                Decision::reject(n, n - live, self.reset_after(state, live, now), wait)
            }
            SlidingLogVariant::Attempts if cost > n => Decision::never(n, 0, self.window),
            SlidingLogVariant::Attempts => {
                // The attempt itself is logged: the newest `cost` entries become `now`.
                let rank = n - cost + 1;
                let wait = if rank <= cost { self.window } else { self.wait_for_rank(state, rank - cost, now) };
                Decision::reject(n, 0, self.window, wait)
            }
        }
    }
}

/// What [`SlidingLog::record`] needs: the effective time, the cost and the live boundary.
#[derive(Clone, Copy, Debug)]
pub struct SlidingLogPlan {
    now: u64,
    cost: u64,
    first_live: usize,
}

impl Algorithm for SlidingLog {
    type State = SlidingLogState;
    type Plan = SlidingLogPlan;

    fn decide(&self, state: &SlidingLogState, now: Timestamp, cost: u64) -> (Decision, SlidingLogPlan) {
        // Time never runs backwards inside a state: decide at the newest entry at the earliest.
        let now = now.as_micros().max(state.newest().unwrap_or(0));
        let first_live = self.first_live(state, now);
        let live = (state.len() - first_live) as u64;
        let plan = SlidingLogPlan { now, cost, first_live };
        let n = self.limit;
        let decision = if cost == 0 {
            if live < n {
                Decision::allow(n, n - live, self.reset_after(state, live, now))
            } else {
                let wait = self.wait_for_rank(state, n, now);
                Decision::reject(n, 0, self.reset_after(state, live, now), wait)
            }
        } else if cost <= n && live + cost <= n {
            Decision::allow(n, n - live - cost, self.window)
        } else {
            self.rejection(state, live, now, cost)
        };
        (decision, plan)
    }

    fn record(&self, state: &mut SlidingLogState, plan: SlidingLogPlan, admitted: bool) {
        let logs_attempts = self.variant == SlidingLogVariant::Attempts;
        if admitted || logs_attempts {
            let count = plan.cost.min(self.limit) as usize;
            state.append(plan.now, count, plan.first_live, self.limit as usize);
        }
    }

    fn expires_at(&self, state: &SlidingLogState) -> Timestamp {
        let newest = state.newest().map_or(0, |newest| newest.saturating_add(self.window));
        Timestamp::from_micros(newest)
    }
}

/// A key's log: a ring buffer of at most `limit` timestamps, oldest first, that grows as
/// it is used (a key with 3 requests under a limit of 100 000 holds 3 slots, not 100 000).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlidingLogState {
    /// The timestamps. Until the log is full they are in order; then `head` is the oldest.
    slots: Vec<u64>,
    /// Physical index of the oldest entry (0 until the log has wrapped).
    head: u32,
    /// How many of the oldest entries had expired at the newest entry's time: they stay
    /// expired, since time never runs backwards inside a state, so searches start here.
    expired: u32,
}

impl SlidingLogState {
    /// Number of logged timestamps (live or expired).
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True when nothing was ever logged (or the log was cleared).
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Bytes this state holds on the heap.
    pub fn heap_bytes(&self) -> usize {
        self.slots.capacity() * size_of::<u64>()
    }

    /// The logical `index`-th entry, 0 being the oldest.
    fn entry(&self, index: usize) -> u64 {
        // `head + index < 2 × len`: one compare instead of a division.
        let physical = self.head as usize + index;
        let len = self.slots.len();
        self.slots[if physical >= len { physical - len } else { physical }]
    }

    fn newest(&self) -> Option<u64> {
        (!self.slots.is_empty()).then(|| self.entry(self.slots.len() - 1))
    }

    /// Logs `count` entries stamped `now`, keeping only the newest `capacity`.
    fn append(&mut self, now: u64, count: usize, first_live: usize, capacity: usize) {
        if count == 0 {
            return;
        }
        if first_live >= self.slots.len() || count >= capacity {
            // Nothing older matters any more: start again from an empty log.
            self.slots.clear();
            self.head = 0;
            self.expired = 0;
        } else {
            self.expired = first_live as u32;
        }
        let pushed = count.min(capacity - self.slots.len());
        if pushed > 0 {
            self.grow_for(pushed, capacity);
            self.slots.resize(self.slots.len() + pushed, now);
        }
        self.overwrite_oldest(now, count - pushed);
    }

    /// Grows the buffer by doubling, never past `capacity` slots.
    fn grow_for(&mut self, extra: usize, capacity: usize) {
        let needed = self.slots.len() + extra;
        if needed > self.slots.capacity() {
            let doubled = (self.slots.capacity() * 2).max(4);
            let target = doubled.min(capacity).max(needed);
            self.slots.reserve_exact(target - self.slots.len());
        }
    }

    /// Replaces the `count` oldest entries of a full ring with `now`.
    fn overwrite_oldest(&mut self, now: u64, count: usize) {
        let len = self.slots.len();
        let mut left = count;
        while left > 0 {
            let head = self.head as usize;
            let run = left.min(len - head);
            self.slots[head..head + run].fill(now);
            self.head = ((head + run) % len) as u32;
            left -= run;
        }
        self.expired = self.expired.saturating_sub(count as u32);
    }
}
