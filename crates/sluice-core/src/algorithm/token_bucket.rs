//! Token bucket with discrete refill: a bucket of `capacity` tokens gains `refill_amount`
//! tokens every `refill_interval`; a request takes `cost` tokens or is rejected.
//!
//! ```text
//! capacity = 3, 1 token every 4 s
//! time (s)   0    0    0    0         4    5
//! tokens     2    1    0    0 (NO)    0    0 (NO, next token at 8 s)
//! ```
//!
//! Allows bursts up to `capacity` and a sustained rate of `refill_amount / refill_interval`
//! (Stripe: 500 with one token every 10 ms). The refill clock keeps its remainder, so the
//! rate never drifts; a full bucket has no refill phase.

use super::parameters::{PolicyError, Validation};
use super::source::{ParameterSource, ReadParameters};
use super::{Algorithm, Hold, Holds, Lease, LeaseTerms, MAX_HOLDS, Returned};
use crate::{Decision, Timestamp};
use std::time::Duration;

/// The token bucket: `capacity` tokens, `refill_amount` more every `refill_interval`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TokenBucket {
    capacity: u64,
    refill_amount: u64,
    refill_interval: u64,
}

/// The parameters of a [`TokenBucket`], named: `capacity` and `refill_amount` are both
/// counts, and a swap would still compile if they were positional.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TokenBucketSettings {
    /// The most tokens the bucket holds: the largest burst.
    pub capacity: u64,
    /// Tokens added at each refill.
    pub refill_amount: u64,
    /// Time between refills.
    pub refill_interval: Duration,
}

impl TokenBucket {
    /// A bucket of `capacity` tokens refilled by `refill_amount` every `refill_interval`.
    ///
    /// # Examples
    ///
    /// ```
    /// use sluice_core::{TokenBucket, TokenBucketSettings};
    /// use std::time::Duration;
    ///
    /// // Stripe's API limit: bursts of 500, one more token every 10 ms.
    /// let bucket = TokenBucket::new(TokenBucketSettings {
    ///     capacity: 500,
    ///     refill_amount: 1,
    ///     refill_interval: Duration::from_millis(10),
    /// })?;
    /// assert_eq!(bucket.capacity(), 500);
    /// # Ok::<(), sluice_core::PolicyError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// When a parameter is zero or too large to compute exactly (2^53), including the time to
    /// refill from empty.
    pub fn new(settings: TokenBucketSettings) -> Result<Self, PolicyError> {
        let TokenBucketSettings { capacity, refill_amount, refill_interval } = settings;
        let mut checks = Validation::default();
        checks.positive("capacity", capacity);
        checks.positive("refill_amount", refill_amount);
        let refill_interval = checks.micros("refill_interval", refill_interval);
        if !checks.failed("capacity") && !checks.failed("refill_amount") && !checks.failed("refill_interval") {
            // The time to refill from empty is a `reset_after`: it must be exact too.
            let refill_ticks = u128::from(capacity.div_ceil(refill_amount));
            let message = "capacity / refill_amount × refill_interval (µs to refill from empty) must be below 2^53";
            checks.exact_with("refill_interval", refill_ticks * u128::from(refill_interval), message);
        }
        checks.finish(|| TokenBucket { capacity, refill_amount, refill_interval })
    }

    /// The capacity `C`.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Tokens added per refill.
    pub fn refill_amount(&self) -> u64 {
        self.refill_amount
    }

    /// Time between refills.
    pub fn refill_interval(&self) -> Duration {
        Duration::from_micros(self.refill_interval)
    }

    /// The bucket refilled up to `now` (never before its last refill): `(tokens, last, now)`.
    #[inline(always)]
    fn refilled(&self, state: &Tokens, now: u64) -> (u64, u64, u64) {
        if !state.holds.is_clear() {
            return self.refilled_holding(state, now);
        }
        if state.taken == 0 {
            // A full bucket has no refill phase: it starts at the request that empties it.
            return (self.capacity, now, now);
        }
        let now = now.max(state.last);
        let ticks = (now - state.last) / self.refill_interval;
        let gained = u128::from(ticks) * u128::from(self.refill_amount);
        let tokens = (u128::from(self.capacity - state.taken) + gained).min(u128::from(self.capacity));
        let tokens = tokens as u64;
        let last = if tokens == self.capacity { now } else { state.last + ticks * self.refill_interval };
        (tokens, last, now)
    }

    /// [`refilled`](Self::refilled) for a bucket with units leased out, or ended since it was
    /// last full with nothing held (docs/leases.md): it never refills above the capacity
    /// less the units still held (each lease ended by `now` raises that cap at its
    /// deadline, in turn), and its refill clock restarts whenever it comes within one refill
    /// of the cap, as a full bucket's does, so that the real bucket, whenever the held units
    /// are spent, is never behind the store's.
    #[inline(never)]
    fn refilled_holding(&self, state: &Tokens, now: u64) -> (u64, u64, u64) {
        let now = now.max(state.last);
        let mut held = state.holds.live_units(state.last);
        let mut bucket = (self.capacity - state.taken, state.last);
        for ended in state.holds.ended_by(now).filter(|hold| hold.deadline > state.last) {
            bucket = self.refill_capped(bucket, ended.deadline, self.capacity.saturating_sub(held));
            held = held.saturating_sub(ended.units);
        }
        let (tokens, last) = self.refill_capped(bucket, now, self.capacity.saturating_sub(held));
        (tokens, last, now)
    }

    /// `(tokens, last)` refilled up to `until`, never above `cap`; the refill clock restarts
    /// at `until` when the bucket ends within one refill of the cap.
    fn refill_capped(&self, (tokens, last): (u64, u64), until: u64, cap: u64) -> (u64, u64) {
        let ticks = (until - last) / self.refill_interval;
        let gained = u128::from(ticks) * u128::from(self.refill_amount);
        let tokens = (u128::from(tokens) + gained).min(u128::from(cap)) as u64;
        let near_cap = tokens.saturating_add(self.refill_amount) > cap;
        (tokens, if near_cap { until } else { last + ticks * self.refill_interval })
    }

    /// The decision for `cost` (and `lease`, when it asks units) at `now`.
    #[inline(always)]
    fn judge(&self, state: &Tokens, now: Timestamp, cost: u64, lease: Lease) -> (Decision, Option<TokensPlan>) {
        let c = self.capacity;
        let (tokens, last, now) = self.refilled(state, now.as_micros());
        let reset_after = self.wait_for(tokens, last, now, c);
        if cost == 0 {
            let decision = if tokens >= 1 {
                Decision::allow(c, tokens, reset_after)
            } else {
                Decision::reject(c, 0, reset_after, self.wait_for(tokens, last, now, 1))
            };
            return (decision, None);
        }
        if cost > c {
            return (Decision::never(c, tokens, reset_after), None);
        }
        let taken = cost.saturating_add(lease.units);
        if taken > tokens {
            let retry = self.wait_for(tokens, last, now, cost);
            return (Decision::reject(c, tokens, reset_after, retry), None);
        }
        let left = tokens - taken;
        let hold = (lease.units > 0).then_some(Hold { deadline: lease.deadline.as_micros(), units: lease.units });
        let plan = TokensPlan { taken: c - left, last, now, hold };
        (Decision::allow(c, left, self.wait_for(left, last, now, c)), Some(plan))
    }

    /// µs from `now` until the bucket holds `wanted` tokens.
    fn wait_for(&self, tokens: u64, last: u64, now: u64, wanted: u64) -> u64 {
        let missing = wanted.saturating_sub(tokens);
        if missing == 0 {
            return 0;
        }
        let ticks = missing.div_ceil(self.refill_amount);
        let at = u128::from(last) + u128::from(ticks) * u128::from(self.refill_interval);
        u64::try_from(at - u128::from(now)).unwrap_or(u64::MAX)
    }
}

impl Algorithm for TokenBucket {
    type State = Tokens;
    type Plan = Option<TokensPlan>;

    fn name(&self) -> &'static str {
        "token_bucket"
    }

    fn limit(&self) -> u64 {
        self.capacity
    }

    /// The time to refill a whole bucket from empty.
    fn quota_window(&self) -> Duration {
        let refills = self.capacity().div_ceil(self.refill_amount());
        super::micros_product(refills, self.refill_interval())
    }

    /// The time to refill a whole bucket from empty.
    fn look_ahead(&self) -> Duration {
        self.quota_window()
    }

    fn parameters(&self) -> Vec<(&'static str, String)> {
        vec![
            ("capacity", self.capacity.to_string()),
            ("refill_amount", self.refill_amount.to_string()),
            ("refill_interval_us", self.refill_interval.to_string()),
        ]
    }

    #[inline(always)]
    fn decide(&self, state: &Tokens, now: Timestamp, cost: u64) -> (Decision, Self::Plan) {
        self.judge(state, now, cost, Lease::default())
    }

    #[inline(always)]
    fn record(&self, state: &mut Tokens, plan: Self::Plan, admitted: bool) {
        let (true, Some(plan)) = (admitted, plan) else { return };
        (state.taken, state.last) = (plan.taken, plan.last);
        if !state.holds.is_clear() || plan.hold.is_some() {
            state.holds.drop_ended(plan.now);
            state.holds.add(plan.hold.unwrap_or_default());
            if state.taken == 0 && state.holds.is_empty() {
                state.holds.clear_ended();
            }
        }
    }

    fn records_rejections(&self) -> bool {
        false
    }

    /// The store holds leased units apart (docs/leases.md): the bucket never refills above
    /// the capacity less the units held out.
    fn lease_terms(&self) -> LeaseTerms {
        LeaseTerms::Held
    }

    fn decide_leased(&self, state: &Tokens, now: Timestamp, cost: u64, lease: Lease) -> (Decision, Self::Plan) {
        if lease.units > 0 && !state.holds.has_room(now.as_micros()) {
            return (Decision::reject(self.capacity, 0, 0, 0), None);
        }
        self.judge(state, now, cost, lease)
    }

    /// The unspent units return to the bucket (never above the capacity less the units
    /// still held); the lease is no longer held.
    fn give_back(&self, state: &mut Tokens, back: Returned) {
        let (tokens, last, now) = self.refilled(state, back.now.as_micros());
        (state.taken, state.last) = (self.capacity - tokens, last);
        state.holds.drop_ended(now);
        if state.holds.take(back.debited_in, back.leased, back.leased) {
            let cap = self.capacity - state.holds.live_units(now).min(self.capacity);
            state.taken = self.capacity - tokens.saturating_add(back.unspent).min(cap);
        }
        if state.taken == 0 && state.holds.is_empty() {
            state.holds.clear_ended();
        }
    }

    /// Once the bucket is full again and every lease held has ended and refilled.
    fn expires_at(&self, state: &Tokens) -> Timestamp {
        let unheld = Tokens { taken: state.taken, last: state.last, holds: Holds::default() };
        let (tokens, last, now) = self.refilled(&unheld, state.last);
        let full = now.saturating_add(self.wait_for(tokens, last, now, self.capacity));
        let held = state.holds.last_deadline().map_or(0, |deadline| {
            deadline.saturating_add(u64::try_from(self.quota_window().as_micros()).unwrap_or(u64::MAX))
        });
        Timestamp::from_micros(full.max(held))
    }

    fn impossible(&self, state: &Tokens) -> Option<String> {
        super::over("a token bucket missing", state.taken, self.capacity)
            .or_else(|| super::over("leases held", state.holds.len() as u64, MAX_HOLDS as u64))
    }
}

impl ReadParameters for TokenBucket {
    fn read(source: &mut dyn ParameterSource) -> Option<Result<Self, PolicyError>> {
        let capacity = source.count("capacity", 1, None);
        let refill_amount = source.count("refill_amount", 1, Some(1));
        let refill_interval = source.duration("refill_interval");
        let (capacity, refill_amount, refill_interval) = (capacity?, refill_amount?, refill_interval?);
        Some(TokenBucket::new(TokenBucketSettings { capacity, refill_amount, refill_interval }))
    }
}

/// A key's bucket: tokens taken out of a full bucket, the time of the last refill, and the
/// units leased out of it.
///
/// Counting tokens *taken* makes the default state (`taken = 0`) a full bucket.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tokens {
    /// `capacity − tokens`: tokens spent and tokens leased out.
    pub taken: u64,
    /// When the bucket was last refilled, µs since the epoch.
    pub last: u64,
    /// Units leased out, until their deadlines.
    pub holds: Holds,
}

impl Tokens {
    /// A bucket missing `taken` tokens, last refilled at `last`, with nothing leased out.
    pub fn new(taken: u64, last: u64) -> Self {
        Tokens { taken, last, holds: Holds::default() }
    }
}

/// What [`TokenBucket::record`](Algorithm::record) applies to an admitted request's state.
#[derive(Clone, Copy, Debug)]
pub struct TokensPlan {
    taken: u64,
    last: u64,
    /// The time of the decision: leases ended by then no longer cap the bucket.
    now: u64,
    /// The lease granted with the request.
    hold: Option<Hold>,
}

impl TokensPlan {
    /// True when the request takes a lease.
    pub(crate) fn leases(&self) -> bool {
        self.hold.is_some()
    }
}
