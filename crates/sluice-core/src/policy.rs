//! The closed set of algorithms a limit can use, and the one dispatch over them.

#[cfg(test)]
mod arbitrary;
pub(crate) mod wire;

use crate::algorithm::fixed_window::FixedWindow;
use crate::algorithm::leaky_bucket::LeakyBucket;
use crate::algorithm::sliding_log::SlidingLog;
use crate::algorithm::sliding_window::SlidingWindow;
use crate::algorithm::source::{FieldNames, ParameterSource, ReadParameters};
use crate::algorithm::token_bucket::TokenBucket;
use crate::algorithm::{Lease, LeaseTerms};
use crate::{Algorithm, Decision, PolicyError, Timestamp};
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

/// Evaluates `$body` with `$algorithm` bound to the algorithm inside `$policy`: the one
/// `match` over the variants. Each arm is compiled for its own type, so `$body` may call
/// anything every algorithm implements. What else a new algorithm needs is the checklist
/// in [`crate::algorithm`]'s docs.
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

    /// The window the quota is announced over (see [`Algorithm::quota_window`]).
    pub fn quota_window(&self) -> Duration {
        with_algorithm!(self, algorithm => algorithm.quota_window())
    }

    /// How far past a check's time the algorithm computes (see [`Algorithm::look_ahead`]).
    pub fn look_ahead(&self) -> Duration {
        with_algorithm!(self, algorithm => algorithm.look_ahead())
    }

    /// The decision for a key never seen before: what a store that lost every state would
    /// decide (used when a store fails open).
    pub fn decide_fresh(&self, now: Timestamp, cost: u64) -> Decision {
        self.decide_fresh_leased(now, cost, Lease::default())
    }

    /// [`decide_fresh`](Self::decide_fresh) for a request that also asks for `lease`
    /// ([`Algorithm::decide_leased`]).
    pub(crate) fn decide_fresh_leased(&self, now: Timestamp, cost: u64, lease: Lease) -> Decision {
        fn fresh<A: Algorithm>(algorithm: &A, now: Timestamp, cost: u64, lease: Lease) -> Decision {
            crate::algorithm::decide_with(algorithm, &A::State::default(), now, cost, lease).0
        }
        with_algorithm!(self, algorithm => fresh(algorithm, now, cost, lease))
    }

    /// True when a rejected request still changes the state (the `attempts` variants of
    /// the sliding log and the sliding window), so a rejection cannot be answered from a cache.
    pub fn records_rejections(&self) -> bool {
        with_algorithm!(self, algorithm => algorithm.records_rejections())
    }

    /// What a quota lease of this policy may do (docs/leases.md).
    pub fn lease_terms(&self) -> LeaseTerms {
        with_algorithm!(self, algorithm => algorithm.lease_terms())
    }
}

/// Reads one algorithm's parameters, as that algorithm.
type Reader = fn(&mut dyn ParameterSource) -> Option<Result<Policy, PolicyError>>;

fn read_as<A: ReadParameters + Into<Policy>>(source: &mut dyn ParameterSource) -> Option<Result<Policy, PolicyError>> {
    A::read(source).map(|built| built.map(Into::into))
}

/// Every algorithm by its configuration word, in the order messages list them. The
/// round-trip tests of definitions and configurations build every variant through it.
const READERS: [(&str, Reader); 5] = [
    ("sliding_log", read_as::<SlidingLog>),
    ("fixed_window", read_as::<FixedWindow>),
    ("sliding_window", read_as::<SlidingWindow>),
    ("token_bucket", read_as::<TokenBucket>),
    ("leaky_bucket", read_as::<LeakyBucket>),
];

impl Policy {
    /// Every algorithm's configuration word.
    pub(crate) const ALGORITHMS: [&str; 5] = [READERS[0].0, READERS[1].0, READERS[2].0, READERS[3].0, READERS[4].0];

    /// Reads the policy of the algorithm `Policy::ALGORITHMS[algorithm]` from `source`:
    /// `None` when a parameter could not be read, else what its constructor says.
    pub(crate) fn read(algorithm: usize, source: &mut dyn ParameterSource) -> Option<Result<Policy, PolicyError>> {
        READERS.get(algorithm).and_then(|(_, read)| read(source))
    }

    /// The fields the algorithm `Policy::ALGORITHMS[algorithm]` reads, in order (for the
    /// YAML reader's unknown-field check).
    #[cfg_attr(not(feature = "yaml"), allow(dead_code))]
    pub(crate) fn fields(algorithm: usize) -> Vec<&'static str> {
        let mut names = FieldNames::default();
        Policy::read(algorithm, &mut names);
        names.0
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
