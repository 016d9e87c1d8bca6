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
use super::{Algorithm, Replacement, replace_if_admitted};
use crate::{Decision, Timestamp};
use std::fmt;
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
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct LeakyBucket {
    interval: u64,
    burst: u64,
    mode: LeakMode,
    /// Division by `interval` (for `remaining`, on every decision) as a multiply and shifts.
    per_interval: Reciprocal,
}

impl fmt::Debug for LeakyBucket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeakyBucket")
            .field("interval", &self.interval)
            .field("burst", &self.burst)
            .field("mode", &self.mode)
            .finish()
    }
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
        checks.finish(|| LeakyBucket { interval, burst, mode, per_interval: Reciprocal::new(interval) })
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
        self.per_interval.divide(self.tolerance().saturating_sub(tat.saturating_sub(now)))
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

    fn expires_at(&self, state: &Tat) -> Timestamp {
        Timestamp::from_micros(state.0)
    }
}

/// A key's theoretical arrival time, µs since the epoch (0 for a fresh key).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tat(pub u64);

/// Exact division of any `u64` by a divisor fixed in advance, as a multiply and shifts
/// (Granlund and Montgomery's method, as libdivide writes it): a 64-bit `div` takes tens of
/// cycles, and the leaky bucket divides by its interval on every decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Reciprocal {
    /// The multiplier; 0 for a power of two (a shift alone).
    magic: u64,
    shift: u32,
    /// The multiplier has a 65th bit, made up for by an add after the multiply.
    add: bool,
}

impl Reciprocal {
    /// Division by `divisor`, which is not zero.
    fn new(divisor: u64) -> Self {
        let divisor = divisor.max(1);
        let floor_log2 = divisor.ilog2();
        if divisor.is_power_of_two() {
            return Reciprocal { magic: 0, shift: floor_log2, add: false };
        }
        // 2^(64 + floor_log2) / divisor fits in 64 bits, as divisor > 2^floor_log2.
        let power = 1_u128 << (64 + floor_log2);
        let (magic, remainder) = ((power / u128::from(divisor)) as u64, (power % u128::from(divisor)) as u64);
        if divisor - remainder < 1_u64 << floor_log2 {
            return Reciprocal { magic: magic + 1, shift: floor_log2, add: false };
        }
        // The 65-bit multiplier 2^(65 + floor_log2) / divisor + 1, without its top bit.
        let twice_remainder = remainder.wrapping_add(remainder);
        let carry = u64::from(twice_remainder >= divisor || twice_remainder < remainder);
        Reciprocal { magic: magic.wrapping_add(magic).wrapping_add(carry).wrapping_add(1), shift: floor_log2, add: true }
    }

    #[inline(always)]
    fn divide(self, numerator: u64) -> u64 {
        if self.magic == 0 {
            return numerator >> self.shift;
        }
        let high = ((u128::from(self.magic) * u128::from(numerator)) >> 64) as u64;
        if self.add { (((numerator - high) >> 1) + high) >> self.shift } else { high >> self.shift }
    }
}

#[cfg(test)]
mod reciprocal_tests {
    use super::Reciprocal;

    #[test]
    fn divides_exactly_like_div() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut random = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut divisors: Vec<u64> = (1..=1_000).collect();
        for bits in 1..64 {
            let power = 1_u64 << bits;
            divisors.extend([power - 1, power, power + 1, power.wrapping_mul(3) / 2]);
        }
        divisors.extend([u64::MAX, u64::MAX - 1, 1_000_000, 60_000_000, 86_400_000_000]);
        divisors.extend((0..200).map(|_| random() >> (random() % 64)).filter(|d| *d > 0));
        for divisor in divisors {
            let reciprocal = Reciprocal::new(divisor);
            let mut numerators: Vec<u64> = (0..64).collect();
            numerators.extend([u64::MAX, u64::MAX - 1, (1 << 53) - 1, 1 << 53]);
            for multiple in [1, 2, 3, 7, 1_000, 1 << 20, u64::MAX / divisor, u64::MAX / divisor - 1] {
                let product = divisor.saturating_mul(multiple);
                numerators.extend([product.saturating_sub(1), product, product.saturating_add(1)]);
            }
            numerators.extend((0..50).map(|_| random() >> (random() % 64)));
            for numerator in numerators {
                assert_eq!(reciprocal.divide(numerator), numerator / divisor, "{numerator} / {divisor}");
            }
        }
    }
}
