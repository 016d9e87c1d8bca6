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
use super::{Algorithm, LeaseTerms, Replacement, replace_if_admitted};
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

    fn delay(&self, wait: u64) -> u64 {
        if self.mode == LeakMode::Delay { wait } else { 0 }
    }
}

impl Algorithm for LeakyBucket {
    type State = Tat;
    type Plan = Replacement<Tat>;

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
        let now = now.as_micros();
        let limit = self.burst + 1;
        let start = state.0.max(now);
        let reset_after = state.0.saturating_sub(now);
        let room = self.room(state.0, now);
        let judged = cost.max(1);
        if judged > limit {
            return (Decision::never(limit, room, reset_after), None);
        }
        // Saturating: a time near the end of `u64` must not overflow (nor panic).
        let end = start.saturating_add(judged * self.interval);
        if end - now > self.tolerance() {
            let retry = end - self.tolerance() - now;
            return (Decision::reject(limit, room, reset_after, retry), None);
        }
        let wait = self.delay(start - now);
        if cost == 0 {
            return (Decision::allow(limit, room, reset_after).with_delay(wait), None);
        }
        let decision = Decision::allow(limit, self.room(end, now), end - now);
        (decision.with_delay(wait), Some(Tat(end)))
    }

    #[inline(always)]
    fn record(&self, state: &mut Tat, plan: Self::Plan, admitted: bool) {
        replace_if_admitted(state, plan, admitted);
    }

    fn records_rejections(&self) -> bool {
        false
    }

    fn lease_terms(&self) -> LeaseTerms {
        LeaseTerms::Refused(
            "a unit spent later than it was leased must keep its place at the latest time it may \
             be spent, which one check of the store cannot reserve without taking the lease's \
             whole life from the rate (more than the lease gives)",
        )
    }

    /// Not leased ([`lease_terms`](Algorithm::lease_terms)): nothing to take back.
    fn give_back(&self, _: &mut Tat, _: u64, _: u64) {}

    fn expires_at(&self, state: &Tat) -> Timestamp {
        Timestamp::from_micros(state.0)
    }

    /// Any arrival time is possible: one far ahead only blocks its key, as it did.
    fn impossible(&self, _: &Tat) -> Option<String> {
        None
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

/// A key's theoretical arrival time, µs since the epoch (0 for a fresh key).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tat(pub u64);
