//! Helpers shared by the integration tests.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly
#![allow(dead_code, unreachable_pub)]

use sluice::{Decision, Limit, ManualClock, Policy, RateLimiter, Timestamp};
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// Runs a future that must be ready at once (the memory store's futures are).
pub fn ready<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("the memory store's future must be ready at once"),
    }
}

/// A limiter on a fresh memory store with a manual clock at the epoch.
pub fn limiter(policy: impl Into<Policy>) -> (RateLimiter<sluice::MemoryStore, ManualClock>, ManualClock) {
    let clock = ManualClock::default();
    (RateLimiter::new(Limit::new("test", policy)).with_clock(clock.clone()), clock)
}

/// Checks `key` at `at_us` µs with `cost`.
pub fn check_at(
    limiter: &RateLimiter<sluice::MemoryStore, ManualClock>,
    clock: &ManualClock,
    at_us: u64,
    cost: u64,
) -> Decision {
    clock.set(Timestamp::from_micros(at_us));
    ready(limiter.check_n("key", cost)).expect("the memory store always decides")
}

pub fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

pub fn us(micros: u64) -> Duration {
    Duration::from_micros(micros)
}
