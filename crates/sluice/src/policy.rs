//! The closed set of algorithms a limit can use, and the validation they share.

use crate::algorithm::fixed_window::FixedWindow;
use crate::algorithm::leaky_bucket::LeakyBucket;
use crate::algorithm::sliding_log::SlidingLog;
use crate::algorithm::sliding_window::SlidingWindow;
use crate::algorithm::token_bucket::TokenBucket;
use crate::store::memory::{Keyed, KeyedStates};
use crate::{Algorithm, Decision, Timestamp};
use std::borrow::Cow;
use std::time::Duration;

/// The algorithm and parameters of a limit. Built only through the validating
/// constructors of each algorithm, so a `Policy` value is always usable.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Policy {
    /// Exact sliding window log.
    SlidingLog(SlidingLog),
    /// Fixed window counter, aligned or anchored.
    FixedWindow(FixedWindow),
    /// Sliding window counter (approximated).
    SlidingWindow(SlidingWindow),
    /// Token bucket with discrete refill.
    TokenBucket(TokenBucket),
    /// Leaky bucket (GCRA), meter or shaper.
    LeakyBucket(LeakyBucket),
}

impl Policy {
    /// The name of the algorithm as written in configuration files.
    pub fn algorithm_name(&self) -> &'static str {
        match self {
            Policy::SlidingLog(_) => "sliding_log",
            Policy::FixedWindow(_) => "fixed_window",
            Policy::SlidingWindow(_) => "sliding_window",
            Policy::TokenBucket(_) => "token_bucket",
            Policy::LeakyBucket(_) => "leaky_bucket",
        }
    }

    /// The decision's `limit`: `N`, the capacity, or `burst + 1`; also the largest cost
    /// the policy can ever allow.
    pub fn limit(&self) -> u64 {
        match self {
            Policy::SlidingLog(p) => p.limit(),
            Policy::FixedWindow(p) => p.limit(),
            Policy::SlidingWindow(p) => p.limit(),
            Policy::TokenBucket(p) => p.capacity(),
            Policy::LeakyBucket(p) => p.burst() + 1,
        }
    }

    /// The decision for a key never seen before: what a store that lost every state would
    /// decide (used when a store fails open).
    pub fn decide_fresh(&self, now: Timestamp, cost: u64) -> Decision {
        fn fresh<A: Algorithm>(algorithm: &A, now: Timestamp, cost: u64) -> Decision {
            algorithm.decide(&A::State::default(), now, cost).0
        }
        match self {
            Policy::SlidingLog(p) => fresh(p, now, cost),
            Policy::FixedWindow(p) => fresh(p, now, cost),
            Policy::SlidingWindow(p) => fresh(p, now, cost),
            Policy::TokenBucket(p) => fresh(p, now, cost),
            Policy::LeakyBucket(p) => fresh(p, now, cost),
        }
    }

    /// True when a rejected request still changes the state (the sliding log's
    /// `attempts` variant), so a rejection cannot be answered from a cache.
    pub fn records_rejections(&self) -> bool {
        matches!(self, Policy::SlidingLog(p) if p.variant() == crate::SlidingLogVariant::Attempts)
    }

    /// An empty table of per-key states for this policy: the one place the memory store
    /// dispatches on the algorithm.
    pub(crate) fn new_table(&self) -> Box<dyn KeyedStates> {
        match self {
            Policy::SlidingLog(p) => Box::new(Keyed::new(p.clone())),
            Policy::FixedWindow(p) => Box::new(Keyed::new(p.clone())),
            Policy::SlidingWindow(p) => Box::new(Keyed::new(p.clone())),
            Policy::TokenBucket(p) => Box::new(Keyed::new(p.clone())),
            Policy::LeakyBucket(p) => Box::new(Keyed::new(p.clone())),
        }
    }
}

macro_rules! policy_from {
    ($($variant:ident),*) => {$(
        impl From<$variant> for Policy {
            fn from(policy: $variant) -> Self {
                Policy::$variant(policy)
            }
        }
    )*};
}
policy_from!(SlidingLog, FixedWindow, SlidingWindow, TokenBucket, LeakyBucket);

/// A parameter that a policy refuses, naming the field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct PolicyError {
    /// The configuration name of the field (`limit`, `window`, …).
    pub field: &'static str,
    /// What is wrong with it, lowercase.
    pub message: Cow<'static, str>,
}

impl PolicyError {
    pub(crate) fn new(field: &'static str, message: impl Into<Cow<'static, str>>) -> Self {
        PolicyError { field, message: message.into() }
    }
}

/// The bound below which every store computes exactly: Lua numbers are doubles.
pub const EXACT_LIMIT: u64 = 1 << 53;

/// Refuses `value` unless every store can compute it exactly.
pub(crate) fn check_exact(field: &'static str, value: u128) -> Result<(), PolicyError> {
    if value >= u128::from(EXACT_LIMIT) {
        return Err(PolicyError::new(field, "must be below 2^53 to be computed exactly"));
    }
    Ok(())
}

/// A duration in whole microseconds, at least one.
pub(crate) fn duration_micros(field: &'static str, duration: Duration) -> Result<u64, PolicyError> {
    if !duration.subsec_nanos().is_multiple_of(1_000) {
        return Err(PolicyError::new(field, "must be a whole number of microseconds"));
    }
    match u64::try_from(duration.as_micros()) {
        Ok(0) => Err(PolicyError::new(field, "must be at least 1us")),
        Ok(micros) => Ok(micros),
        Err(_) => Err(PolicyError::new(field, "is too long")),
    }
}
