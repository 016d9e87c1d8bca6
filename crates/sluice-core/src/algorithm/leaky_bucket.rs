//! Leaky bucket as GCRA (the generic cell rate algorithm): requests leak out at one per
//! `interval`, and up to `burst` extra requests may queue.
//!
//! ```text
//! interval = 1 s, burst = 1
//! time (s)   0     0     0          1
//! decision   ok    ok    NO (1 s)   ok      <- one slot leaked at 1 s
//! ```
//!
//! As a meter (`nodelay`, like nginx `limit_req … nodelay`) it admits or rejects; as a
//! shaper (`delay`, nginx `limit_req` without `nodelay`) an admitted request also learns how
//! long to wait for its turn. The state is a single timestamp: the theoretical arrival time.
//! A leaky bucket as a meter is a token bucket of `burst + 1` refilled one per `interval`.

use super::parameters::{PolicyError, Validation};
use super::source::{ParameterSource, ReadParameters, choice};
use super::{Algorithm, Hold, Holds, Lease, LeaseTerms, MAX_HOLDS, Returned};
use crate::{Decision, Timestamp};
use std::time::Duration;

/// What an admitted request does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum LeakMode {
    /// A meter: admitted requests proceed at once.
    #[default]
    NoDelay,
    /// A shaper: admitted requests wait `delay` for their turn.
    Delay,
}

impl LeakMode {
    /// Every choice, in the order configuration messages list them.
    pub const ALL: [LeakMode; 2] = [LeakMode::NoDelay, LeakMode::Delay];

    /// The word that names this choice in configuration files.
    pub fn name(self) -> &'static str {
        match self {
            LeakMode::NoDelay => "nodelay",
            LeakMode::Delay => "delay",
        }
    }
}

/// The leaky bucket (GCRA): one request per `interval`, `burst` more may queue.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LeakyBucket {
    interval: u64,
    burst: u64,
    mode: LeakMode,
}

impl LeakyBucket {
    /// A leaky bucket leaking one request per `interval` with `burst` extra places.
    ///
    /// # Errors
    ///
    /// When `interval` is zero, or `(burst + 1) × interval` is not below 2^53.
    pub fn new(interval: Duration, burst: u64, mode: LeakMode) -> Result<Self, PolicyError> {
        let mut checks = Validation::default();
        let interval = checks.micros("interval", interval);
        let span = (u128::from(burst) + 1) * u128::from(interval);
        checks.exact_with("burst", span, "(burst + 1) × interval (µs) must be below 2^53");
        checks.finish(|| LeakyBucket { interval, burst, mode })
    }

    /// Time between two leaks.
    pub fn interval(&self) -> Duration {
        Duration::from_micros(self.interval)
    }

    /// Extra requests that may queue.
    pub fn burst(&self) -> u64 {
        self.burst
    }

    /// Meter or shaper.
    pub fn mode(&self) -> LeakMode {
        self.mode
    }

    /// The tolerance `(burst + 1) × interval`.
    fn tolerance(&self) -> u64 {
        (self.burst + 1) * self.interval
    }

    /// Cost-1 requests that fit now, given the arrival time `tat`.
    fn room(&self, tat: u64, now: u64) -> u64 {
        self.tolerance().saturating_sub(tat.saturating_sub(now)) / self.interval
    }

    /// The arrival time with every lease ended by `now` folded in, each as spent at its
    /// deadline.
    fn folded(&self, state: &Tat, now: u64) -> u64 {
        state.holds.ended_by(now).fold(state.arrival, |arrival, hold| {
            arrival.max(hold.deadline).saturating_add(hold.units.saturating_mul(self.interval))
        })
    }

    /// The decision for `cost` (and `lease`, when it asks units) at `now`: as if every unit
    /// held out were spent just before the request.
    #[inline(always)]
    fn judge(&self, state: &Tat, now: u64, cost: u64, lease: Lease) -> (Decision, Option<ArrivalPlan>) {
        let limit = self.burst + 1;
        let arrival = self.folded(state, now);
        let held = state.holds.live_units(now).saturating_mul(self.interval);
        let tat = arrival.max(now).saturating_add(held);
        let reset_after = tat - now;
        let room = self.room(tat, now);
        if cost.max(1) > limit {
            return (Decision::never(limit, room, reset_after), None);
        }
        let judged = cost.max(1).saturating_add(lease.units);
        // Saturating: a time near the end of `u64` must not overflow (nor panic).
        let end = tat.saturating_add(judged.saturating_mul(self.interval));
        if end - now > self.tolerance() {
            let retry = end - self.tolerance() - now;
            return (Decision::reject(limit, room, reset_after, retry), None);
        }
        let wait = self.delay(tat - now);
        if cost == 0 {
            return (Decision::allow(limit, room, reset_after).with_delay(wait), None);
        }
        let hold = (lease.units > 0).then_some(Hold { deadline: lease.deadline.as_micros(), units: lease.units });
        let plan = ArrivalPlan { arrival: arrival.max(now).saturating_add(cost * self.interval), now, hold };
        (Decision::allow(limit, self.room(end, now), end - now).with_delay(wait), Some(plan))
    }

    fn delay(&self, wait: u64) -> u64 {
        if self.mode == LeakMode::Delay { wait } else { 0 }
    }
}

impl Algorithm for LeakyBucket {
    type State = Tat;
    type Plan = Option<ArrivalPlan>;

    fn name(&self) -> &'static str {
        "leaky_bucket"
    }

    fn limit(&self) -> u64 {
        self.burst + 1
    }

    /// The time a full bucket takes to drain: `burst + 1` intervals.
    fn quota_window(&self) -> Duration {
        super::micros_product(self.burst() + 1, self.interval())
    }

    /// Twice the drain time: the theoretical arrival time is at most one burst tolerance
    /// ahead, and a request's finish one more.
    fn look_ahead(&self) -> Duration {
        super::micros_product(2 * (self.burst() + 1), self.interval())
    }

    fn parameters(&self) -> Vec<(&'static str, String)> {
        vec![
            ("interval_us", self.interval.to_string()),
            ("burst", self.burst.to_string()),
            ("mode", self.mode.name().to_owned()),
        ]
    }

    #[inline(always)]
    fn decide(&self, state: &Tat, now: Timestamp, cost: u64) -> (Decision, Self::Plan) {
        self.judge(state, now.as_micros(), cost, Lease::default())
    }

    #[inline(always)]
    fn record(&self, state: &mut Tat, plan: Self::Plan, admitted: bool) {
        let (true, Some(plan)) = (admitted, plan) else { return };
        state.arrival = plan.arrival;
        if !state.holds.is_clear() || plan.hold.is_some() {
            state.holds.drop_ended(plan.now);
            state.holds.add(plan.hold.unwrap_or_default());
            state.holds.clear_ended();
        }
    }

    fn records_rejections(&self) -> bool {
        false
    }

    /// The store holds leased units apart (docs/leases.md): a decision counts them as spent
    /// just before it, and a lease that ends unreported as spent at its deadline.
    fn lease_terms(&self) -> LeaseTerms {
        LeaseTerms::Held
    }

    fn decide_leased(&self, state: &Tat, now: Timestamp, cost: u64, lease: Lease) -> (Decision, Self::Plan) {
        let now = now.as_micros();
        if lease.units > 0 && !state.holds.has_room(now) {
            return (Decision::reject(self.burst + 1, 0, 0, 0), None);
        }
        self.judge(state, now, cost, lease)
    }

    /// Folds the lease's spent units in as spent at the give-back (those never spent are
    /// simply no longer held).
    fn give_back(&self, state: &mut Tat, back: Returned) {
        let now = back.now.as_micros();
        state.arrival = self.folded(state, now);
        state.holds.drop_ended(now);
        if state.holds.take(back.debited_in, back.leased, back.leased) {
            let spent = back.leased.saturating_sub(back.unspent);
            state.arrival = state.arrival.max(now).saturating_add(spent.saturating_mul(self.interval));
        }
        state.holds.clear_ended();
    }

    /// Once every lease held has ended and been folded in.
    fn expires_at(&self, state: &Tat) -> Timestamp {
        Timestamp::from_micros(self.folded(state, u64::MAX))
    }

    /// Any arrival time is possible: one far ahead only blocks its key, as it did.
    fn impossible(&self, state: &Tat) -> Option<String> {
        super::over("leases held", state.holds.len() as u64, MAX_HOLDS as u64)
    }
}

impl ReadParameters for LeakyBucket {
    fn read(source: &mut dyn ParameterSource) -> Option<Result<Self, PolicyError>> {
        let interval = source.duration("interval");
        let burst = source.count("burst", 0, Some(0));
        let mode = choice(source, "mode", &LeakMode::ALL, LeakMode::name);
        Some(LeakyBucket::new(interval?, burst?, mode?))
    }
}

/// A key's theoretical arrival time, and the units leased out of it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tat {
    /// The theoretical arrival time, µs since the epoch (0 for a fresh key), not counting
    /// the units held out.
    pub arrival: u64,
    /// Units leased out: spent, at the latest, at their deadlines.
    pub holds: Holds,
}

impl Tat {
    /// The state of a key whose theoretical arrival time is `arrival`, with nothing leased.
    pub fn at(arrival: u64) -> Self {
        Tat { arrival, holds: Holds::default() }
    }
}

/// What [`LeakyBucket::record`](Algorithm::record) applies to an admitted request's state.
#[derive(Clone, Copy, Debug)]
pub struct ArrivalPlan {
    /// The new arrival time, without the units held out.
    arrival: u64,
    /// The time of the decision: leases ended by then were folded into `arrival`.
    now: u64,
    /// The lease granted with the request.
    hold: Option<Hold>,
}

impl ArrivalPlan {
    /// True when the request takes a lease.
    pub(crate) fn leases(&self) -> bool {
        self.hold.is_some()
    }
}
