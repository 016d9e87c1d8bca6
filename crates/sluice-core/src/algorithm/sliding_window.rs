//! Sliding window counter ("floating window"): the approximation of the sliding log that
//! keeps one counter per bucket instead of one timestamp per request.
//!
//! The window of length `window` is cut into `buckets` buckets of width `w = window /
//! buckets`, on a grid that starts at the epoch (`aligned`) or at the key's first request
//! (`anchored`, started again whenever the key's estimate has fallen to 0). At `now`, `e`
//! into bucket `j`, the estimate counts the buckets `j − B + 1 ..= j` in full and the oldest
//! bucket `j − B` in proportion to how much of it is still inside the window:
//!
//! ```text
//! B = 1, limit = 10       |--- bucket j−1: 8 ---|--- bucket j: 3 ---|
//!                                     now = 25% into j ^
//! estimate = 8 × 75% + 3 = 9 → one more request fits
//! ```
//!
//! `B = 1` is the two-counter approximation Cloudflare and Upstash use; a larger `B` is the
//! multi-bucket counter and approaches the exact log as `B` grows. The `accepted` variant
//! counts allowed requests; `attempts` counts every request (HAProxy's `http_req_rate`),
//! so a client that keeps hammering stays limited. All arithmetic is on integers
//! (`c[j−B]·(w − e) + (sum + cost)·w ≤ N·w`), so every store agrees exactly.

mod counts;

use counts::Counts;
pub use counts::{BucketAdd, BucketCounts};

use super::fixed_window::Alignment;
use super::parameters::{PolicyError, Validation};
use super::sliding_log::SlidingLogVariant;
use super::source::{ParameterSource, ReadParameters, choice};
use super::{Algorithm, Lease, LeaseTerms, Returned};
use crate::{Decision, Timestamp};
use std::fmt;
use std::time::Duration;

/// Which requests a sliding window counts: the sliding log's two variants.
pub type SlidingWindowVariant = SlidingLogVariant;

/// Everything that defines a sliding window counter, for [`SlidingWindow::with_settings`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlidingWindowSettings {
    /// The limit `N` per window.
    pub limit: u64,
    /// The window `W`.
    pub window: Duration,
    /// The number of buckets `B`, which must divide the window.
    pub buckets: u64,
    /// Which requests are counted.
    pub variant: SlidingWindowVariant,
    /// Where the bucket grid starts.
    pub alignment: Alignment,
}

/// The sliding window counter: an estimated `limit` per `window`, over `buckets` buckets.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct SlidingWindow {
    limit: u64,
    /// Bucket width `w`, µs (the window is `w × B`).
    width: u64,
    /// [`counter_cap`](Self::counter_cap), computed once.
    cap: u64,
    /// `B`, at most [`MAX_BUCKETS`](Self::MAX_BUCKETS). (Narrow: the policy stays 32 bytes.)
    buckets: u32,
    variant: SlidingWindowVariant,
    alignment: Alignment,
}

/// Where a request falls on its key's bucket grid.
#[derive(Clone, Copy, Debug)]
struct Position {
    /// The grid's origin (µs).
    anchor: u64,
    /// The time judged at: `now`, or the start of the newest counted bucket if later.
    now: u64,
    /// The bucket `j`.
    bucket: u64,
    /// `e`, µs into bucket `j`.
    into: u64,
    /// True when the request starts a new grid (anchored windows on a fresh state).
    restarted: bool,
}

impl SlidingWindow {
    /// The largest number of buckets: state and work per decision grow with it.
    pub const MAX_BUCKETS: u64 = 10_000;

    /// A sliding window counter of `limit` per `window`, with `buckets` clock-aligned
    /// buckets, counting allowed requests.
    ///
    /// # Errors
    ///
    /// As [`with_settings`](Self::with_settings).
    pub fn new(limit: u64, window: Duration, buckets: u64) -> Result<Self, PolicyError> {
        let variant = SlidingWindowVariant::Accepted;
        Self::with_settings(SlidingWindowSettings { limit, window, buckets, variant, alignment: Alignment::Aligned })
    }

    /// The sliding window counter `settings` describe.
    ///
    /// # Errors
    ///
    /// When a parameter is zero, `buckets` exceeds [`MAX_BUCKETS`](Self::MAX_BUCKETS),
    /// `window` is not divisible by `buckets`, or `limit × window / buckets` is not below
    /// 2^53; under `attempts`, also when `limit × (window + window / buckets)` is not (the
    /// counters of a key that keeps hammering reach `limit × width` each).
    pub fn with_settings(settings: SlidingWindowSettings) -> Result<Self, PolicyError> {
        let SlidingWindowSettings { limit, window, buckets, variant, alignment } = settings;
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
            if variant == SlidingWindowVariant::Attempts && !checks.failed("limit") {
                let message = "with variant attempts, limit × (window + bucket width) (µs) must be below 2^53";
                checks.exact_with("limit", u128::from(limit) * (u128::from(window) + u128::from(width)), message);
            }
        }
        let buckets = u32::try_from(buckets).unwrap_or(u32::MAX);
        checks.finish(|| SlidingWindow { limit, width, cap: limit * width, buckets, variant, alignment })
    }

    /// The limit `N`.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The window length.
    pub fn window(&self) -> Duration {
        Duration::from_micros(self.window_us())
    }

    /// The window, µs.
    fn window_us(&self) -> u64 {
        self.width * u64::from(self.buckets)
    }

    /// The number of buckets `B`.
    pub fn buckets(&self) -> u64 {
        u64::from(self.buckets)
    }

    /// Which requests are counted.
    pub fn variant(&self) -> SlidingWindowVariant {
        self.variant
    }

    /// Where the bucket grid starts.
    pub fn alignment(&self) -> Alignment {
        self.alignment
    }

    /// The bucket width `w`, µs.
    pub fn width(&self) -> u64 {
        self.width
    }

    /// The most a counter holds: `limit × width`. A counter at least this large rejects
    /// every request, in full or weighted by as little as 1/w, so holding more changes no
    /// decision; under `attempts` it keeps a hammered key's counters (and their sum over
    /// `B + 1` buckets) below 2^53.
    pub fn counter_cap(&self) -> u64 {
        self.cap
    }

    /// The time a request at `now` is judged at: `now`, or the start of the state's newest
    /// counted bucket if that is later (time never runs backwards inside a state).
    pub fn judged_at(&self, state: &BucketCounts, now: Timestamp) -> Timestamp {
        Timestamp::from_micros(self.position(state, now.as_micros()).now)
    }

    /// The start (µs) of bucket `index` on the grid from `anchor`, saturating.
    fn start_of(&self, anchor: u64, index: u64) -> u64 {
        let start = u128::from(anchor) + u128::from(index) * u128::from(self.width);
        u64::try_from(start).unwrap_or(u64::MAX)
    }

    /// Where a request at `now` falls: on the state's grid, or at the start of a new one
    /// when an anchored key's state is fresh (no counted cost in buckets `j − B ..= j`).
    #[inline(always)]
    fn position(&self, state: &BucketCounts, now: u64) -> Position {
        let held = !state.counts.is_empty();
        if self.alignment == Alignment::Aligned {
            let now = if held { now.max(state.newest.saturating_mul(self.width)) } else { now };
            return Position { anchor: 0, now, bucket: now / self.width, into: now % self.width, restarted: false };
        }
        let anchor = state.anchor;
        let now = if held { now.max(self.start_of(anchor, state.newest)) } else { now };
        let fresh = !held || now >= self.start_of(anchor, state.newest.saturating_add(self.buckets() + 1));
        if fresh {
            return Position { anchor: now, now, bucket: 0, into: 0, restarted: true };
        }
        let since = now - anchor;
        Position { anchor, now, bucket: since / self.width, into: since % self.width, restarted: false }
    }

    /// Largest `k` with `prev·(w − e) + (sum + k)·w ≤ N·w`, or 0.
    fn room(&self, prev: u64, sum: u64, e: u64) -> u64 {
        let w = u128::from(self.width);
        let budget = u128::from(self.limit) * w;
        let weighted = u128::from(prev) * (w - u128::from(e));
        let fits = budget.saturating_sub(weighted) / w;
        u64::try_from(fits.saturating_sub(u128::from(sum))).unwrap_or(u64::MAX)
    }

    /// µs from `at` until the state is fresh, if bucket `newest` is the newest counted one.
    fn reset_after(&self, newest: Option<u64>, at: &Position) -> u64 {
        match newest {
            Some(n) if at.bucket - n <= self.buckets() => {
                self.start_of(at.anchor, n.saturating_add(self.buckets() + 1)).saturating_sub(at.now)
            }
            _ => 0,
        }
    }

    /// µs until a request of `cost ≤ limit` fits if nothing else is counted meanwhile.
    fn retry_after(&self, counts: &Counts<'_>, j: u64, e: u64, cost: u64) -> u64 {
        let w = u128::from(self.width);
        let budget = u128::from(self.limit) * w;
        let mut prev = counts.at(j.checked_sub(self.buckets()));
        let mut sum = counts.full_sum(j);
        // Saturating: a time near the end of `u64` must not overflow (nor panic).
        for k in j..=j.saturating_add(self.buckets() + 1) {
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
            prev = counts.at(k.saturating_add(1).checked_sub(self.buckets()));
            sum = sum.saturating_sub(prev);
        }
        self.window_us()
    }

    /// The answer to a rejected request of `cost ≥ 1` judged on `counts` (`room` < `cost`).
    /// Inlined: a `Decision` returned from a call goes through memory, and the memory store's
    /// check, which inlines every algorithm's arm, then moves every algorithm's decision so
    /// (14 more instructions per check of the token bucket when this was out of line).
    #[inline(always)]
    fn rejection(&self, counts: Counts<'_>, at: &Position, cost: u64, room: u64) -> Decision {
        let (n, j, e) = (self.limit, at.bucket, at.into);
        if self.variant == SlidingWindowVariant::Attempts {
            // The attempt is counted: every field is computed on the state that holds it.
            let counts = counts.with(j, cost);
            let reset_after = self.reset_after(counts.newest(), at);
            if cost > n {
                return Decision::never(n, 0, reset_after);
            }
            return Decision::reject(n, 0, reset_after, self.retry_after(&counts, j, e, cost));
        }
        let reset_after = self.reset_after(counts.newest(), at);
        if cost > n {
            return Decision::never(n, room, reset_after);
        }
        Decision::reject(n, room, reset_after, self.retry_after(&counts, j, e, cost))
    }
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
        Duration::from_micros(self.window_us() + self.width)
    }

    /// `limit`, `window_us`, `buckets`, then `variant` and `alignment` where they are not
    /// the defaults (so the limits written before these choices existed keep their ids).
    fn parameters(&self) -> Vec<(&'static str, String)> {
        let mut parameters = vec![
            ("limit", self.limit.to_string()),
            ("window_us", self.window_us().to_string()),
            ("buckets", self.buckets().to_string()),
        ];
        if self.variant != SlidingWindowVariant::default() {
            parameters.push(("variant", self.variant.name().to_owned()));
        }
        if self.alignment != Alignment::default() {
            parameters.push(("alignment", self.alignment.name().to_owned()));
        }
        parameters
    }

    fn give_back(&self, state: &mut BucketCounts, back: Returned) {
        state.take_back(back.debited_in, back.unspent, self.width, self.buckets() + 1);
    }

    /// The lease is debited with the request, in its bucket.
    fn decide_leased(&self, state: &BucketCounts, now: Timestamp, cost: u64, lease: Lease) -> (Decision, Self::Plan) {
        self.decide(state, now, cost.saturating_add(lease.units))
    }

    fn records_rejections(&self) -> bool {
        self.variant == SlidingWindowVariant::Attempts
    }

    /// Units are debited in the newest bucket, which an admitted request's `reset_after`
    /// ends `window` after; they are spendable until that bucket ends.
    fn lease_terms(&self) -> LeaseTerms {
        if self.variant == SlidingWindowVariant::Attempts {
            return LeaseTerms::Refused(
                "the attempts variant counts rejected requests, so a lease that does not fit would \
                 be counted as attempts nobody made",
            );
        }
        LeaseTerms::Debited { since_start: self.window() + Duration::from_micros(self.width), after_end: self.window() }
    }

    #[inline(always)]
    fn decide(&self, state: &BucketCounts, now: Timestamp, cost: u64) -> (Decision, Self::Plan) {
        let at = self.position(state, now.as_micros());
        let fresh = BucketCounts::default();
        let counts = Counts::new(if at.restarted { &fresh } else { state }, self.buckets(), self.counter_cap());
        let (n, j, e) = (self.limit, at.bucket, at.into);
        let prev = counts.at(j.checked_sub(self.buckets()));
        let room = self.room(prev, counts.full_sum(j), e);
        if cost == 0 {
            let reset_after = self.reset_after(counts.newest(), &at);
            let decision = if room >= 1 {
                Decision::allow(n, room, reset_after)
            } else {
                Decision::reject(n, 0, reset_after, self.retry_after(&counts, j, e, 1))
            };
            return (decision, None);
        }
        let plan = Some(BucketAdd { anchor: at.anchor, bucket: j, cost });
        if cost > room {
            return (self.rejection(counts, &at, cost, room), plan);
        }
        (Decision::allow(n, room - cost, self.reset_after(Some(j), &at)), plan)
    }

    #[inline(always)]
    fn record(&self, state: &mut BucketCounts, plan: Self::Plan, admitted: bool) {
        if let Some(add) = plan
            && (admitted || self.records_rejections())
        {
            state.add(add, self.buckets() + 1, self.counter_cap());
        }
    }

    fn expires_at(&self, state: &BucketCounts) -> Timestamp {
        if state.counts.is_empty() {
            return Timestamp::EPOCH;
        }
        let anchor = if self.alignment == Alignment::Anchored { state.anchor } else { 0 };
        Timestamp::from_micros(self.start_of(anchor, state.newest.saturating_add(self.buckets() + 1)))
    }

    fn impossible(&self, state: &BucketCounts) -> Option<String> {
        self.impossible_state(state)
    }
}

impl ReadParameters for SlidingWindow {
    fn read(source: &mut dyn ParameterSource) -> Option<Result<Self, PolicyError>> {
        let limit = source.count("limit", 1, None);
        let window = source.duration("window");
        let buckets = source.count("buckets", 1, Some(1));
        let variant = choice(source, "variant", &SlidingWindowVariant::ALL, SlidingWindowVariant::name);
        let alignment = choice(source, "alignment", &Alignment::ALL, Alignment::name);
        let settings = SlidingWindowSettings {
            limit: limit?,
            window: window?,
            buckets: buckets?,
            variant: variant?,
            alignment: alignment?,
        };
        Some(SlidingWindow::with_settings(settings))
    }
}

/// The fields in declaration order, the variant and the alignment only where they are not
/// the defaults: the text of policies made before those choices existed is unchanged, and
/// the first identity scheme hashed it ([`LimitId::legacy`](crate::LimitId)).
impl fmt::Debug for SlidingWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut fields = f.debug_struct("SlidingWindow");
        fields.field("limit", &self.limit).field("window", &self.window_us()).field("buckets", &self.buckets());
        fields.field("width", &self.width);
        if self.variant != SlidingWindowVariant::default() {
            fields.field("variant", &self.variant);
        }
        if self.alignment != Alignment::default() {
            fields.field("alignment", &self.alignment);
        }
        fields.finish()
    }
}

impl SlidingWindow {
    /// Why `state` cannot have been written by this policy, if it cannot: the wrong number
    /// of counters, a bucket past the end of time, a counter above
    /// [`counter_cap`](Self::counter_cap) (above the limit when only allowed requests are
    /// counted), or an anchor on a clock-aligned grid. Stores that read states from outside
    /// (snapshots, the Redis module) refuse these: the arithmetic relies on what it stores.
    pub fn impossible_state(&self, state: &BucketCounts) -> Option<String> {
        let slots = state.counts.len() as u64;
        if slots == 0 {
            return None;
        }
        if slots != self.buckets() + 1 {
            return Some(format!("a sliding window of {slots} counters for {} buckets", self.buckets()));
        }
        if self.alignment == Alignment::Aligned && state.anchor != 0 {
            return Some(format!("a clock-aligned sliding window anchored at {} µs", state.anchor));
        }
        // A bucket's start is a time: no time reaches further.
        if self.start_of(state.anchor, state.newest) == u64::MAX {
            let width = self.width;
            return Some(format!("a newest bucket {} past the end of time for a width of {width} µs", state.newest));
        }
        let most = if self.records_rejections() { self.counter_cap() } else { self.limit };
        let over = state.counts.iter().find(|&&count| count > most)?;
        Some(format!("a sliding window bucket counting {over}, more than the limit of {most}"))
    }
}
