//! Brute-force oracles written directly from docs/semantics.md (its rules, and Sluice's
//! choices for the cases the textbooks leave open), independent of the implementation: no
//! ring buffers, no galloping, no closed forms where a scan will do.
//!
//! Every oracle answers in two steps, like the algorithms, so that several oracles can be
//! checked together all or nothing: [`Oracle::decide`] judges a request without changing
//! anything, [`Oracle::commit`] records it once the combined outcome is known.

pub(crate) mod fixed_window;
pub(crate) mod leaky_bucket;
pub(crate) mod sliding_log;
pub(crate) mod sliding_window;
pub(crate) mod token_bucket;

use sluice_core::{Decision, Quota, RetryAfter};
use std::fmt;
use std::time::Duration;

/// A rate limiter specified the obvious way.
pub(crate) trait Oracle: fmt::Debug {
    /// The decision for a request of `cost` at `now` (cost 0 is a peek). Changes nothing.
    fn decide(&self, now: u64, cost: u64) -> Decision;

    /// Records the request of `cost` at `now`: `admitted` is true when every policy checked
    /// together allowed it. Only the `attempts` variants record a rejection.
    fn commit(&mut self, now: u64, cost: u64, admitted: bool);

    /// Decides and commits a request checked alone.
    fn step(&mut self, now: u64, cost: u64) -> Decision {
        let decision = self.decide(now, cost);
        self.commit(now, cost, decision.allowed);
        decision
    }
}

/// What an oracle says about `retry_after`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Retry {
    /// The request was allowed.
    None,
    /// A request of the same cost passes after this many µs.
    After(u64),
    /// It never passes.
    Never,
}

/// Builds the decision an oracle expects (all durations in µs).
pub(crate) fn decision(
    allowed: bool,
    limit: u64,
    remaining: u64,
    reset_after: u64,
    retry: Retry,
    delay: u64,
) -> Decision {
    assert_eq!(allowed, retry == Retry::None, "oracle bug: retry_after must be set exactly when rejected");
    let fresh = Decision::allowed(Quota { limit, remaining }, Duration::from_micros(reset_after));
    let judged = match retry {
        Retry::None => fresh,
        Retry::After(us) => fresh.rejected(RetryAfter::After(Duration::from_micros(us))),
        Retry::Never => fresh.rejected(RetryAfter::Never),
    };
    judged.delayed(Duration::from_micros(delay))
}

/// A peek (cost 0) built from the unchanged state's `remaining` and `reset_after` and the
/// decision a cost-1 request would get (`allowed`, `retry_after`, `delay`).
pub(crate) fn peek(one: &Decision, remaining: u64, reset_after: u64) -> Decision {
    one.with_remaining(remaining).with_reset_after(Duration::from_micros(reset_after))
}

/// A non-negative `i128` as `u64`; panics (an oracle bug) otherwise.
pub(crate) fn to_u64(value: i128) -> u64 {
    u64::try_from(value).unwrap_or_else(|_| panic!("oracle bug: {value} is not a u64"))
}
