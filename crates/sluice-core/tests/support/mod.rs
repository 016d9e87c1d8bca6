//! Helpers shared by the integration tests.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly
#![allow(dead_code, unreachable_pub)]

use sluice_core::{Decision, Limit, ManualClock, Policy, RateLimiter, Timestamp};
use std::time::Duration;

/// A limiter on a fresh memory store with a manual clock at the epoch.
pub fn limiter(policy: impl Into<Policy>) -> (RateLimiter<sluice_core::MemoryStore, ManualClock>, ManualClock) {
    let clock = ManualClock::default();
    let limiter = RateLimiter::builder().limit(Limit::new("test", policy)).clock(clock.clone()).build().unwrap();
    (limiter, clock)
}

/// Checks `key` at `at_us` µs with `cost`.
pub fn check_at(
    limiter: &RateLimiter<sluice_core::MemoryStore, ManualClock>,
    clock: &ManualClock,
    at_us: u64,
    cost: u64,
) -> Decision {
    clock.set(Timestamp::from_micros(at_us));
    limiter.check_n("key", cost).expect("the memory store always decides")
}

pub fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

pub fn us(micros: u64) -> Duration {
    Duration::from_micros(micros)
}

/// One policy of each algorithm and variant (the conformance suite's).
#[allow(unused_imports)] // not every test uses it
pub use sluice_core::conformance::policies;
