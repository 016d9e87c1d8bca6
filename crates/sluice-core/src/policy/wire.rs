//! A policy's wire form: how the Redis scripts (`crates/sluice-redis/lua/`) and the Redis
//! module (`crates/sluice-redis-module`) receive it. Both Rust sides use this file, so the
//! encoding is written once; the Lua twin reads the same numbers (`lua/check.lua` lists the
//! algorithms in [`Policy::WIRE_ALGORITHMS`]'s order, which a test of sluice-redis holds).
//!
//! | id | algorithm | p1 | p2 | p3 | p4 |
//! |---|---|---|---|---|---|
//! | 1 | `sliding_log` | limit | window µs | 1 = attempts | 0 |
//! | 2 | `fixed_window` | limit | window µs | 1 = anchored | offset µs |
//! | 3 | `sliding_window` | limit | bucket width µs | buckets | 1 = attempts, + 2 = anchored |
//! | 4 | `token_bucket` | capacity | refill amount | refill interval µs | 0 |
//! | 5 | `leaky_bucket` | interval µs | burst | 1 = delay | 0 |
//!
//! Every number is an integer below 2^53, so the scripts' doubles hold it exactly.

use crate::algorithm::fixed_window::{Alignment, FixedWindow};
use crate::algorithm::leaky_bucket::{LeakMode, LeakyBucket};
use crate::algorithm::sliding_log::{SlidingLog, SlidingLogVariant};
use crate::algorithm::sliding_window::{SlidingWindow, SlidingWindowSettings};
use crate::algorithm::token_bucket::{TokenBucket, TokenBucketSettings};
use crate::policy::with_algorithm;
use crate::{Policy, PolicyError};
use std::time::Duration;

/// A policy as the Redis scripts and module receive it: its algorithm's number and four
/// integer parameters (see the table in this module's source).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WirePolicy {
    /// The algorithm's number, 1-based, in [`Policy::WIRE_ALGORITHMS`]'s order.
    pub algorithm: u8,
    /// The parameters `p1..p4`; unused ones are 0.
    pub params: [u64; 4],
}

/// A wire form that no valid policy has.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct WireError(String);

impl From<PolicyError> for WireError {
    fn from(error: PolicyError) -> Self {
        WireError(error.to_string())
    }
}

/// One algorithm's wire form: its number and how its parameters are written and read back.
trait Wire: Sized + Into<Policy> {
    /// The algorithm's number.
    const ID: u8;
    fn params(&self) -> [u64; 4];
    /// Reads `p`, through the algorithm's validating constructor.
    fn from_params(p: [u64; 4]) -> Result<Self, WireError>;
}

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

/// `value` as a flag: 0 or 1.
fn flag(value: u64) -> Result<bool, WireError> {
    match value {
        0 => Ok(false),
        1 => Ok(true),
        other => Err(WireError(format!("a flag is {other}, not 0 or 1"))),
    }
}

fn unused(value: u64) -> Result<(), WireError> {
    if value == 0 { Ok(()) } else { Err(WireError(format!("an unused parameter is {value}, not 0"))) }
}

impl Wire for SlidingLog {
    const ID: u8 = 1;
    fn params(&self) -> [u64; 4] {
        [self.limit(), micros(self.window()), u64::from(self.variant() == SlidingLogVariant::Attempts), 0]
    }
    fn from_params(p: [u64; 4]) -> Result<Self, WireError> {
        let variant = if flag(p[2])? { SlidingLogVariant::Attempts } else { SlidingLogVariant::Accepted };
        unused(p[3])?;
        Ok(SlidingLog::new(p[0], Duration::from_micros(p[1]), variant)?)
    }
}

impl Wire for FixedWindow {
    const ID: u8 = 2;
    fn params(&self) -> [u64; 4] {
        let anchored = u64::from(self.alignment() == Alignment::Anchored);
        [self.limit(), micros(self.window()), anchored, micros(self.offset())]
    }
    fn from_params(p: [u64; 4]) -> Result<Self, WireError> {
        let alignment = if flag(p[2])? { Alignment::Anchored } else { Alignment::Aligned };
        Ok(FixedWindow::new(p[0], Duration::from_micros(p[1]), alignment, Duration::from_micros(p[3]))?)
    }
}

/// p4's bits: counting attempts, and an anchored grid.
const ATTEMPTS: u64 = 1;
const ANCHORED: u64 = 2;

impl Wire for SlidingWindow {
    const ID: u8 = 3;
    fn params(&self) -> [u64; 4] {
        let attempts = if self.variant() == SlidingLogVariant::Attempts { ATTEMPTS } else { 0 };
        let anchored = if self.alignment() == Alignment::Anchored { ANCHORED } else { 0 };
        [self.limit(), self.width(), self.buckets(), attempts | anchored]
    }
    fn from_params(p: [u64; 4]) -> Result<Self, WireError> {
        if p[3] > (ATTEMPTS | ANCHORED) {
            return Err(WireError(format!("sliding window flags {}, not 0 to 3", p[3])));
        }
        let window =
            p[1].checked_mul(p[2]).ok_or_else(|| WireError("the window (width × buckets) overflows".into()))?;
        let variant = if p[3] & ATTEMPTS != 0 { SlidingLogVariant::Attempts } else { SlidingLogVariant::Accepted };
        let alignment = if p[3] & ANCHORED != 0 { Alignment::Anchored } else { Alignment::Aligned };
        let settings = SlidingWindowSettings {
            limit: p[0],
            window: Duration::from_micros(window),
            buckets: p[2],
            variant,
            alignment,
        };
        Ok(SlidingWindow::with_settings(settings)?)
    }
}

impl Wire for TokenBucket {
    const ID: u8 = 4;
    fn params(&self) -> [u64; 4] {
        [self.capacity(), self.refill_amount(), micros(self.refill_interval()), 0]
    }
    fn from_params(p: [u64; 4]) -> Result<Self, WireError> {
        unused(p[3])?;
        let settings =
            TokenBucketSettings { capacity: p[0], refill_amount: p[1], refill_interval: Duration::from_micros(p[2]) };
        Ok(TokenBucket::new(settings)?)
    }
}

impl Wire for LeakyBucket {
    const ID: u8 = 5;
    fn params(&self) -> [u64; 4] {
        [micros(self.interval()), self.burst(), u64::from(self.mode() == LeakMode::Delay), 0]
    }
    fn from_params(p: [u64; 4]) -> Result<Self, WireError> {
        let mode = if flag(p[2])? { LeakMode::Delay } else { LeakMode::NoDelay };
        unused(p[3])?;
        Ok(LeakyBucket::new(Duration::from_micros(p[0]), p[1], mode)?)
    }
}

/// Reads one algorithm's parameters, as that algorithm.
type Decoder = fn([u64; 4]) -> Result<Policy, WireError>;

fn decode_as<A: Wire>(p: [u64; 4]) -> Result<Policy, WireError> {
    A::from_params(p).map(Into::into)
}

/// By number, less one; each algorithm's `ID` is its place here (a test holds it).
const DECODERS: [(u8, Decoder); 5] = [
    (SlidingLog::ID, decode_as::<SlidingLog>),
    (FixedWindow::ID, decode_as::<FixedWindow>),
    (SlidingWindow::ID, decode_as::<SlidingWindow>),
    (TokenBucket::ID, decode_as::<TokenBucket>),
    (LeakyBucket::ID, decode_as::<LeakyBucket>),
];

impl Policy {
    /// Each wire number's algorithm, by its configuration word: number `i + 1` is
    /// `WIRE_ALGORITHMS[i]`.
    pub const WIRE_ALGORITHMS: [&'static str; 5] = Policy::ALGORITHMS;

    /// The policy's wire form, for the Redis scripts and module.
    pub fn wire(&self) -> WirePolicy {
        fn of<A: Wire>(algorithm: &A) -> WirePolicy {
            WirePolicy { algorithm: A::ID, params: algorithm.params() }
        }
        with_algorithm!(self, algorithm => of(algorithm))
    }

    /// The policy whose wire form is `wire`, built by the algorithm's validating
    /// constructor: what a configuration would refuse is refused, an unknown number, a
    /// flag other than 0 or 1, or an unused parameter other than 0 too.
    ///
    /// # Errors
    ///
    /// A message naming the first problem.
    pub fn from_wire(wire: WirePolicy) -> Result<Policy, WireError> {
        let index = usize::from(wire.algorithm).checked_sub(1);
        match index.and_then(|index| DECODERS.get(index)) {
            Some((_, decode)) => decode(wire.params),
            None => Err(WireError(format!("unknown algorithm number {}", wire.algorithm))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::arbitrary::every_kind;
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn numbers_follow_the_configuration_words() {
        for (index, (id, _)) in DECODERS.iter().enumerate() {
            assert_eq!(usize::from(*id), index + 1);
        }
        for policy in every_kind() {
            let number = usize::from(policy.wire().algorithm);
            assert_eq!(Policy::WIRE_ALGORITHMS[number - 1], policy.algorithm_name());
        }
    }

    #[test]
    fn malformed_wire_forms_are_refused() {
        let refused = |algorithm: u8, params: [u64; 4]| Policy::from_wire(WirePolicy { algorithm, params }).is_err();
        assert!(refused(0, [1, 1, 0, 0]));
        assert!(refused(6, [1, 1, 0, 0]));
        assert!(refused(1, [1, 10, 2, 0])); // flag 2
        assert!(refused(1, [1, 10, 0, 3])); // unused p4
        assert!(refused(2, [1, 0, 0, 0])); // window 0
        assert!(refused(3, [1, 10, 2, 4])); // flags beyond 3
        assert!(refused(3, [1, 4_000_000_000_000_000, 10, 0])); // width × buckets
        assert!(refused(4, [10, 1, 1, 3]));
        assert!(refused(5, [5, 1, 0, 1]));
    }

    proptest! {
        /// Every policy the constructors accept comes back from its wire form unchanged.
        #[test]
        fn every_policy_round_trips(policy in super::super::arbitrary::any_policy()) {
            let wire = policy.wire();
            prop_assert_eq!(Policy::from_wire(wire), Ok(policy));
        }
    }
}
