//! The user-facing limiter: building it, keys, costs, the sync and async checks, waiting.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use sluice_core::{
    BuildError, CheckError, Clock, LeakMode, LeakyBucket, Limit, ManualClock, MemoryStore, RateLimiter, RetryAfter,
    SlidingLog, SlidingLogVariant, Timestamp, TokenBucket, TokenBucketSettings,
};
use std::time::Duration;
use support::ms;

fn bucket(capacity: u64, refill_interval: Duration) -> Limit {
    let settings = TokenBucketSettings { capacity, refill_amount: 1, refill_interval };
    Limit::new("t", TokenBucket::new(settings).unwrap())
}

fn on_clock(limit: Limit, clock: &ManualClock) -> RateLimiter<MemoryStore, ManualClock> {
    RateLimiter::builder().limit(limit).clock(clock.clone()).build().unwrap()
}

#[test]
fn check_decides_at_once_on_the_limiter_clock() {
    let clock = ManualClock::default();
    let limiter = on_clock(bucket(2, ms(250)), &clock);
    assert_eq!(limiter.check_n("k", 2).unwrap().remaining, 0);
    let rejected = limiter.check("k").unwrap();
    assert!(!rejected.allowed);
    assert_eq!(rejected.retry_after_micros(), Some(250_000));
    clock.advance(ms(250));
    assert!(limiter.check("k").unwrap().allowed);
    assert_eq!(limiter.check_n("k", 0).unwrap().remaining, 0, "cost 0 only looks");
}

#[test]
fn a_builder_without_limits_is_an_error_not_a_panic() {
    let error = RateLimiter::builder().build().unwrap_err();
    assert_eq!(error, BuildError::NoLimits);
    assert_eq!(error.to_string(), "a rate limiter needs at least one limit");
    let on_a_store = RateLimiter::builder().store(MemoryStore::new()).clock(ManualClock::default()).build();
    assert_eq!(on_a_store.unwrap_err(), BuildError::NoLimits);
    let none = RateLimiter::builder().limits([]).clock(ManualClock::default()).build();
    assert_eq!(none.unwrap_err(), BuildError::NoLimits);
}

#[test]
fn a_given_store_is_used_as_it_is() {
    let store = MemoryStore::new();
    let limiter = RateLimiter::builder().limit(bucket(1, ms(250))).store(store.clone()).build().unwrap();
    assert!(limiter.check("k").unwrap().allowed);
    assert_eq!(store.len(), 1, "the limiter's states are in the caller's store");
}

#[tokio::test]
async fn the_async_check_decides_as_the_sync_one() {
    let clock = ManualClock::default();
    let sync = on_clock(bucket(3, ms(100)), &clock);
    let not_sync = on_clock(bucket(3, ms(100)), &clock);
    for cost in [1, 2, 1, 0, 4] {
        assert_eq!(not_sync.check_n_async("k", cost).await.unwrap(), sync.check_n("k", cost).unwrap());
    }
    assert_eq!(not_sync.check_async("k").await.unwrap(), sync.check("k").unwrap());
}

#[tokio::test]
async fn acquire_waits_out_retry_after_on_the_limiter_clock() {
    let clock = ManualClock::default();
    let limiter = on_clock(bucket(1, ms(250)), &clock);
    assert!(limiter.acquire("k", 1, Duration::ZERO).await.unwrap().allowed);
    let start = clock.now();
    let decision = limiter.acquire("k", 1, Duration::from_secs(1)).await.unwrap();
    assert!(decision.allowed);
    assert_eq!(clock.now().saturating_since(start), ms(250));
}

#[tokio::test]
async fn acquire_gives_up_past_max_wait_and_on_never() {
    let clock = ManualClock::default();
    let limiter = on_clock(bucket(2, Duration::from_secs(10)), &clock);
    limiter.check_n("k", 2).unwrap();
    let gave_up = limiter.acquire("k", 1, Duration::from_secs(9)).await.unwrap();
    assert!(!gave_up.allowed);
    assert_eq!(clock.now().as_micros(), 0, "it did not wait");
    let never = limiter.acquire("k", 3, Duration::from_secs(3600)).await.unwrap();
    assert_eq!(never.retry_after, Some(RetryAfter::Never));
}

#[tokio::test]
async fn acquire_in_a_shaper_waits_for_its_turn() {
    let clock = ManualClock::default();
    let shaper = LeakyBucket::new(ms(100), 5, LeakMode::Delay).unwrap();
    let limiter = on_clock(Limit::new("s", shaper), &clock);
    for turn in 0..3u64 {
        let decision = limiter.acquire("k", 1, Duration::ZERO).await.unwrap();
        assert!(decision.allowed);
        assert_eq!(decision.delay, if turn == 0 { Duration::ZERO } else { ms(100) });
    }
    assert_eq!(clock.now().as_micros(), 200_000);
}

#[test]
fn keys_must_be_1_to_1024_bytes() {
    let limiter = RateLimiter::new(Limit::new("t", SlidingLog::new(1, ms(1), SlidingLogVariant::Accepted).unwrap()));
    assert!(matches!(limiter.check(""), Err(CheckError::Key(_))));
    let long = vec![b'k'; 1025];
    let error = limiter.check(&long).unwrap_err();
    assert_eq!(error.to_string(), "key must be 1 to 1024 bytes long, got 1025");
    assert!(limiter.check(vec![0xff; 1024]).unwrap().allowed, "any bytes make a key");
}

#[test]
fn several_limits_are_all_or_nothing() {
    let clock = ManualClock::default();
    let per_second =
        Limit::new("second", SlidingLog::new(2, Duration::from_secs(1), SlidingLogVariant::Accepted).unwrap());
    let per_minute =
        Limit::new("minute", SlidingLog::new(3, Duration::from_secs(60), SlidingLogVariant::Accepted).unwrap());
    let limiter = RateLimiter::builder().limit(per_second).limit(per_minute).clock(clock.clone()).build().unwrap();
    assert_eq!(limiter.limits().len(), 2);
    let allowed: Vec<bool> = (0..3).map(|_| limiter.check("k").unwrap().allowed).collect();
    assert_eq!(allowed, [true, true, false]);
    clock.advance(Duration::from_secs(1));
    let third = limiter.check("k").unwrap();
    assert!(third.allowed && third.remaining == 0, "the minute limit reports 0 left: {third:?}");
    assert!(!limiter.check("k").unwrap().allowed);
}

#[test]
fn a_limiter_on_a_manual_clock_never_sweeps_by_the_system_clock() {
    // The store the builder makes follows the limiter's clock: at 1970 on the manual clock,
    // the states of many keys are live although the system clock says they expired long
    // ago. Enough keys that every shard sweeps (a sweep runs after 1024 insertions in a
    // shard), with memory store settings given to the builder.
    let clock = ManualClock::default();
    let policy = SlidingLog::new(1, Duration::from_secs(60), SlidingLogVariant::Accepted).unwrap();
    let limiter = RateLimiter::builder()
        .limit(Limit::new("t", policy))
        .memory_store(MemoryStore::builder().shards(64))
        .clock(clock.clone())
        .build()
        .unwrap();
    let keys = 64 * 4_096;
    for i in 0..keys {
        assert!(limiter.check(format!("key-{i}")).unwrap().allowed);
    }
    assert_eq!(limiter.store().len(), keys);
    for i in (0..keys).step_by(97) {
        assert!(!limiter.check(format!("key-{i}")).unwrap().allowed, "key-{i} lost its state");
    }
    clock.set(Timestamp::from_micros(120_000_000));
    assert_eq!(limiter.store().sweep(), keys, "the store sweeps by the limiter's clock");
}
