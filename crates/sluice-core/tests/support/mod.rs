//! Helpers shared by the integration tests.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly
#![allow(dead_code, unreachable_pub)]

use sluice_core::{
    Alignment, Decision, FixedWindow, LeakMode, LeakyBucket, Limit, ManualClock, Policy, RateLimiter, SlidingLog,
    SlidingLogVariant, SlidingWindow, Timestamp, TokenBucket, TokenBucketSettings,
};
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

/// One policy of each algorithm and variant, with small parameters so a short trace hits
/// every edge.
pub fn policies() -> Vec<Policy> {
    vec![
        SlidingLog::new(3, ms(10), SlidingLogVariant::Accepted).unwrap().into(),
        SlidingLog::new(3, ms(10), SlidingLogVariant::Attempts).unwrap().into(),
        FixedWindow::new(3, ms(10), Alignment::Aligned, ms(4)).unwrap().into(),
        FixedWindow::new(3, ms(10), Alignment::Anchored, Duration::ZERO).unwrap().into(),
        SlidingWindow::new(4, ms(10), 1).unwrap().into(),
        SlidingWindow::new(4, ms(10), 5).unwrap().into(),
        TokenBucket::new(TokenBucketSettings { capacity: 3, refill_amount: 2, refill_interval: ms(4) }).unwrap().into(),
        LeakyBucket::new(ms(3), 2, LeakMode::NoDelay).unwrap().into(),
        LeakyBucket::new(ms(3), 2, LeakMode::Delay).unwrap().into(),
    ]
}
