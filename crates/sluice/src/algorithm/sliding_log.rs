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
//! at most `limit` timestamps ([`SlidingLogState`]). Whether a request fits is one look at the
//! `(limit − cost + 1)`-th newest entry; the number still in the window (for `remaining`) comes
//! from a galloping search from the oldest entry held, and every write drops the entries that
//! expired, so it costs O(1) when requests keep coming and O(log limit) after a long gap, never
//! O(limit). Memory: 4 bytes per slot while the log spans at most about 71 minutes (8 bytes
//! beyond), with the ring's capacity following the entries in the window (doubling and
//! shrinking, amortized O(1)), plus a 32-byte header.

use super::Algorithm;
use super::parameters::{PolicyError, Validation};
use crate::{Decision, Timestamp};
use std::time::Duration;

/// Which requests the log records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SlidingLogVariant {
    /// Only allowed requests are logged: a rejected request changes nothing.
    #[default]
    Accepted,
    /// Every attempt is logged, allowed or not (the textbook variant):
    /// a client that keeps hammering stays blocked.
    Attempts,
}

impl SlidingLogVariant {
    /// Every choice, in the order configuration messages list them.
    pub const ALL: [SlidingLogVariant; 2] = [SlidingLogVariant::Accepted, SlidingLogVariant::Attempts];

    /// The word that names this choice in configuration files.
    pub fn name(self) -> &'static str {
        match self {
            SlidingLogVariant::Accepted => "accepted",
            SlidingLogVariant::Attempts => "attempts",
        }
    }
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
        let mut checks = Validation::default();
        checks.require(limit >= 1, "limit", "must be at least 1");
        checks.require(limit <= Self::MAX_LIMIT, "limit", format!("must be at most {}", Self::MAX_LIMIT));
        let window = checks.micros("window", window);
        checks.finish(|| SlidingLog { limit, window, variant })
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
    #[inline(always)]
    fn first_live(&self, state: &SlidingLogState, newest: u64, now: u64) -> usize {
        let len = state.len();
        if len == 0 {
            return 0;
        }
        // Every entry held was live at the last write, which dropped the expired ones, so
        // usually none or one has expired since: in a steady stream of requests, about one
        // per request. The two oldest are read without a branch on the first, which a
        // processor would mispredict about every other request.
        let oldest_expired = self.expired(state.entry_below(newest, 0), now);
        let second = usize::from(len > 1);
        let second_expired = (len > 1) & self.expired(state.entry_below(newest, second), now);
        if !second_expired {
            return usize::from(oldest_expired);
        }
        // Gallop: `lo` is expired; double the step until an entry is live or the log ends.
        let (mut lo, mut step) = (1, 1);
        let mut hi = lo + 1;
        while hi < len && self.expired(state.entry_below(newest, hi), now) {
            lo = hi;
            step *= 2;
            hi = lo + step;
        }
        let mut hi = hi.min(len);
        // Binary search: `lo` is expired, `hi` is live or the end.
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.expired(state.entry_below(newest, mid), now) {
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
    /// The log's newest entry when decided (0 when empty).
    newest: u64,
    now: u64,
    cost: u64,
    first_live: usize,
    /// Whether the window is short enough that the live entries always fit a narrow ring.
    narrow_window: bool,
}

impl Algorithm for SlidingLog {
    type State = SlidingLogState;
    type Plan = SlidingLogPlan;

    fn name(&self) -> &'static str {
        "sliding_log"
    }

    fn limit(&self) -> u64 {
        self.limit
    }

    fn parameters(&self) -> Vec<(&'static str, String)> {
        vec![
            ("limit", self.limit.to_string()),
            ("window_us", self.window.to_string()),
            ("variant", self.variant.name().to_owned()),
        ]
    }

    #[inline(always)]
    fn decide(&self, state: &SlidingLogState, now: Timestamp, cost: u64) -> (Decision, SlidingLogPlan) {
        // Time never runs backwards inside a state: decide at the newest entry at the earliest.
        let newest = state.newest().unwrap_or(0);
        let now = now.as_micros().max(newest);
        let first_live = self.first_live(state, newest, now);
        let live = (state.len() - first_live) as u64;
        let plan = SlidingLogPlan { newest, now, cost, first_live, narrow_window: self.window <= NARROW_SPAN };
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

    #[inline(always)]
    fn record(&self, state: &mut SlidingLogState, plan: SlidingLogPlan, admitted: bool) {
        let logs_attempts = self.variant == SlidingLogVariant::Attempts;
        if admitted || logs_attempts {
            state.append(&plan, self.limit as usize);
        }
    }

    fn expires_at(&self, state: &SlidingLogState) -> Timestamp {
        let newest = state.newest().map_or(0, |newest| newest.saturating_add(self.window));
        Timestamp::from_micros(newest)
    }
}

/// A key's log: a ring buffer of the timestamps still in the window at the last write,
/// oldest first. Its capacity follows what the log holds: it doubles when the entries need
/// room, shrinks to twice the entries when they fill an eighth of it or less (so a log
/// whose count wavers does not reallocate back and forth), and never exceeds `limit` (a key
/// with 3 requests in the window holds 8 slots, not `limit`, however many it made before).
///
/// A slot is 4 bytes while the log spans at most 2^32 − 1 µs (about 71 minutes: every window
/// up to that length), holding the low 32 bits of its timestamp; the high bits are those of
/// the newest entry, less one where the low bits wrapped. A log spanning more (a longer
/// window) holds each timestamp whole, in two words. Halving the slot halves the memory a
/// busy log streams through on every check.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlidingLogState {
    /// The ring's storage: one word per slot (narrow) or two (wide, low word first). A boxed
    /// slice, not a `Vec`: its length is the capacity, so the state is 8 bytes smaller.
    words: Box<[u32]>,
    /// Physical index (in slots) of the oldest entry.
    head: u32,
    /// Number of entries held.
    len: u32,
    /// High 32 bits of the newest entry's timestamp (narrow rings only).
    epoch: u32,
    /// Whether each slot holds a whole timestamp in two words.
    wide: bool,
}

/// The smallest capacity a log shrinks to: 32 bytes in a narrow ring.
const MIN_SLOTS: usize = 8;

/// The longest span (newest − oldest, µs) a narrow ring can hold.
const NARROW_SPAN: u64 = u32::MAX as u64;

impl SlidingLogState {
    /// Number of timestamps held.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes this state holds on the heap.
    pub fn heap_bytes(&self) -> usize {
        self.words.len() * size_of::<u32>()
    }

    /// Number of slots.
    #[inline(always)]
    fn capacity(&self) -> usize {
        self.words.len() >> usize::from(self.wide)
    }

    /// Physical index of the logical `index`-th entry (`head + index < 2 × capacity`).
    #[inline(always)]
    fn physical(&self, index: usize) -> usize {
        let physical = self.head as usize + index;
        let capacity = self.capacity();
        if physical >= capacity { physical - capacity } else { physical }
    }

    /// The timestamp in physical slot `slot`, in a log whose newest entry is `newest`.
    #[inline(always)]
    fn stamp(&self, slot: usize, newest: u64) -> u64 {
        if self.wide {
            u64::from(self.words[2 * slot]) | u64::from(self.words[2 * slot + 1]) << 32
        } else {
            newest - u64::from((newest as u32).wrapping_sub(self.words[slot]))
        }
    }

    /// The logical `index`-th entry, 0 being the oldest, in a log whose newest is `newest`.
    #[inline(always)]
    fn entry_below(&self, newest: u64, index: usize) -> u64 {
        self.stamp(self.physical(index), newest)
    }

    /// The logical `index`-th entry, 0 being the oldest (`index < len`).
    fn entry(&self, index: usize) -> u64 {
        self.entry_below(self.newest().unwrap_or(0), index)
    }

    /// The timestamps held, oldest first.
    pub(crate) fn entries(&self) -> impl Iterator<Item = u64> + '_ {
        let newest = self.newest().unwrap_or(0);
        (0..self.len()).map(move |index| self.entry_below(newest, index))
    }

    /// A log holding `entries` (oldest first, at most its limit, so fewer than 2^32) in a
    /// ring of exactly that many slots: the next write grows it as usual.
    pub(crate) fn from_entries(entries: &[u64]) -> Self {
        let mut state = SlidingLogState::default();
        state.fill(entries, entries.len(), entries.last().copied().unwrap_or(0));
        state
    }

    #[inline(always)]
    fn newest(&self) -> Option<u64> {
        if self.len == 0 {
            return None;
        }
        let slot = self.physical(self.len() - 1);
        if self.wide {
            Some(self.stamp(slot, 0))
        } else {
            Some(u64::from(self.epoch) << 32 | u64::from(self.words[slot]))
        }
    }

    /// Whether a narrow ring could not hold both its oldest entry and one stamped `now`.
    #[inline(always)]
    fn needs_wide(&self, newest: u64, now: u64) -> bool {
        self.len > 0 && now - self.entry_below(newest, 0) > NARROW_SPAN
    }

    /// Logs `plan.cost` entries stamped `plan.now`, after dropping the `plan.first_live`
    /// oldest ones, which have expired (they can never count again: every later decision is
    /// at `plan.now` or later), keeping only the newest `limit`.
    #[inline(always)]
    fn append(&mut self, plan: &SlidingLogPlan, limit: usize) {
        let SlidingLogPlan { newest, now, cost, first_live, narrow_window } = *plan;
        let count = cost.min(limit as u64) as usize;
        if count == 0 {
            return;
        }
        self.drop_oldest(first_live);
        let len = self.len();
        let capacity = self.capacity();
        let roomy = len < capacity && ((len + 1) * 8 > capacity || capacity <= MIN_SLOTS);
        // What is left is live at `now`, so it spans less than the window.
        let fits = self.wide || narrow_window || !self.needs_wide(newest, now);
        if count == 1 && roomy && fits {
            // The common case: one entry into a ring with room that need not shrink.
            let slot = self.physical(len);
            self.write(slot, now);
            self.len += 1;
            return;
        }
        let needed = len + count;
        let mut target = capacity;
        if needed > capacity && capacity < limit {
            target = needed.max(capacity * 2).max(MIN_SLOTS).min(limit);
        } else if needed * 8 <= capacity && capacity > MIN_SLOTS {
            target = (needed * 2).max(MIN_SLOTS);
        }
        if target != capacity || self.wide != self.needs_wide(newest, now) {
            let entries: Vec<u64> = (0..len).map(|index| self.entry_below(newest, index)).collect();
            self.fill(&entries, target, now);
        }
        self.push(now, count);
    }

    /// Stamps physical slot `slot` with `now`, the newest entry from here on.
    #[inline(always)]
    fn write(&mut self, slot: usize, now: u64) {
        if self.wide {
            self.words[2 * slot] = now as u32;
            self.words[2 * slot + 1] = (now >> 32) as u32;
        } else {
            self.words[slot] = now as u32;
            self.epoch = (now >> 32) as u32;
        }
    }

    fn drop_oldest(&mut self, count: usize) {
        if count >= self.len() {
            self.head = 0;
            self.len = 0;
        } else {
            self.head = self.physical(count) as u32;
            self.len -= count as u32;
        }
    }

    /// Rebuilds the ring with `capacity` slots (at least `entries.len()`) holding `entries`,
    /// oldest first, narrow unless they and an entry stamped `next` span more than 2^32 − 1 µs.
    fn fill(&mut self, entries: &[u64], capacity: usize, next: u64) {
        let newest = next.max(entries.last().copied().unwrap_or(0));
        self.wide = entries.first().is_some_and(|&oldest| newest - oldest > NARROW_SPAN);
        let width = if self.wide { 2 } else { 1 };
        self.words = vec![0; capacity * width].into_boxed_slice();
        self.head = 0;
        self.len = entries.len() as u32;
        for (slot, &entry) in entries.iter().enumerate() {
            self.write(slot, entry);
        }
    }

    /// Writes `count` entries after the newest; in a full ring they replace the oldest.
    fn push(&mut self, now: u64, count: usize) {
        let capacity = self.capacity();
        for _ in 0..count.min(capacity) {
            let slot = self.physical(self.len());
            self.write(slot, now);
            if self.len() < capacity {
                self.len += 1;
            } else {
                // Written over the oldest: the head moves past it.
                self.head = self.physical(1) as u32;
            }
        }
    }
}
