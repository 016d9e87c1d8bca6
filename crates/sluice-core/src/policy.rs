//! The closed set of algorithms a limit can use, and the one dispatch over them.

use crate::algorithm::fixed_window::FixedWindow;
use crate::algorithm::leaky_bucket::LeakyBucket;
use crate::algorithm::sliding_log::SlidingLog;
use crate::algorithm::sliding_window::SlidingWindow;
use crate::algorithm::token_bucket::TokenBucket;
use crate::{Algorithm, Decision, Timestamp};

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

/// Evaluates `$body` with `$algorithm` bound to the algorithm inside `$policy`: the one
/// `match` over the variants. Each arm is compiled for its own type, so `$body` may call
/// anything every algorithm implements. A new algorithm is a module, a variant and an arm here.
macro_rules! with_algorithm {
    ($policy:expr, $algorithm:ident => $body:expr) => {
        match $policy {
            $crate::Policy::SlidingLog($algorithm) => $body,
            $crate::Policy::FixedWindow($algorithm) => $body,
            $crate::Policy::SlidingWindow($algorithm) => $body,
            $crate::Policy::TokenBucket($algorithm) => $body,
            $crate::Policy::LeakyBucket($algorithm) => $body,
        }
    };
}
pub(crate) use with_algorithm;

impl Policy {
    /// The name of the algorithm as written in configuration files.
    pub fn algorithm_name(&self) -> &'static str {
        with_algorithm!(self, algorithm => algorithm.name())
    }

    /// The decision's `limit`: `N`, the capacity, or `burst + 1`; also the largest cost
    /// the policy can ever allow.
    pub fn limit(&self) -> u64 {
        with_algorithm!(self, algorithm => Algorithm::limit(algorithm))
    }

    /// Every parameter of the algorithm, in a fixed order (see [`Algorithm::parameters`]).
    pub fn parameters(&self) -> Vec<(&'static str, String)> {
        with_algorithm!(self, algorithm => algorithm.parameters())
    }

    /// The decision for a key never seen before: what a store that lost every state would
    /// decide (used when a store fails open).
    pub fn decide_fresh(&self, now: Timestamp, cost: u64) -> Decision {
        fn fresh<A: Algorithm>(algorithm: &A, now: Timestamp, cost: u64) -> Decision {
            algorithm.decide(&A::State::default(), now, cost).0
        }
        with_algorithm!(self, algorithm => fresh(algorithm, now, cost))
    }

    /// True when a rejected request still changes the state (the sliding log's
    /// `attempts` variant), so a rejection cannot be answered from a cache.
    pub fn records_rejections(&self) -> bool {
        matches!(self, Policy::SlidingLog(p) if p.variant() == crate::SlidingLogVariant::Attempts)
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
