//! The user-facing limiter: keys, costs, waiting.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use sluice::{
    CheckError, LeakMode, LeakyBucket, Limit, ManualClock, RateLimiter, RetryAfter, SlidingLog, SlidingLogVariant,
    TokenBucket, TokenBucketSettings,
};
use std::time::Duration;
use support::{ms, ready};

#[test]
fn acquire_waits_out_retry_after_on_the_limiter_clock() {
    let clock = ManualClock::default();
    let bucket = TokenBucketSettings { capacity: 1, refill_amount: 1, refill_interval: ms(250) };
    let limiter = RateLimiter::new(Limit::new("t", TokenBucket::new(bucket).unwrap())).with_clock(clock.clone());
    assert!(ready(limiter.acquire("k", 1, Duration::ZERO)).unwrap().allowed);
    let start = sluice::Clock::now(&clock);
    let decision = ready(limiter.acquire("k", 1, Duration::from_secs(1))).unwrap();
    assert!(decision.allowed);
    assert_eq!(sluice::Clock::now(&clock).saturating_since(start), ms(250));
}

#[test]
fn acquire_gives_up_past_max_wait_and_on_never() {
    let clock = ManualClock::default();
    let bucket = TokenBucketSettings { capacity: 2, refill_amount: 1, refill_interval: Duration::from_secs(10) };
    let limiter = RateLimiter::new(Limit::new("t", TokenBucket::new(bucket).unwrap())).with_clock(clock.clone());
    ready(limiter.check_n("k", 2)).unwrap();
    let gave_up = ready(limiter.acquire("k", 1, Duration::from_secs(9))).unwrap();
    assert!(!gave_up.allowed);
    assert_eq!(sluice::Clock::now(&clock).as_micros(), 0, "it did not wait");
    let never = ready(limiter.acquire("k", 3, Duration::from_secs(3600))).unwrap();
    assert_eq!(never.retry_after, Some(RetryAfter::Never));
}

#[test]
fn acquire_in_a_shaper_waits_for_its_turn() {
    let clock = ManualClock::default();
    let shaper = LeakyBucket::new(ms(100), 5, LeakMode::Delay).unwrap();
    let limiter = RateLimiter::new(Limit::new("s", shaper)).with_clock(clock.clone());
    for turn in 0..3u64 {
        let decision = ready(limiter.acquire("k", 1, Duration::ZERO)).unwrap();
        assert!(decision.allowed);
        assert_eq!(decision.delay, if turn == 0 { Duration::ZERO } else { ms(100) });
    }
    assert_eq!(sluice::Clock::now(&clock).as_micros(), 200_000);
}

#[test]
fn keys_must_be_1_to_1024_bytes() {
    let limiter = RateLimiter::new(Limit::new("t", SlidingLog::new(1, ms(1), SlidingLogVariant::Accepted).unwrap()));
    assert!(matches!(ready(limiter.check("")), Err(CheckError::Key(_))));
    let long = vec![b'k'; 1025];
    let error = ready(limiter.check(&long)).unwrap_err();
    assert_eq!(error.to_string(), "key must be 1 to 1024 bytes long, got 1025");
    assert!(ready(limiter.check(vec![0xff; 1024])).unwrap().allowed, "any bytes make a key");
}

#[test]
fn several_limits_are_all_or_nothing() {
    let clock = ManualClock::default();
    let per_second =
        Limit::new("second", SlidingLog::new(2, Duration::from_secs(1), SlidingLogVariant::Accepted).unwrap());
    let per_minute =
        Limit::new("minute", SlidingLog::new(3, Duration::from_secs(60), SlidingLogVariant::Accepted).unwrap());
    let limiter = RateLimiter::all_of([per_second, per_minute]).with_clock(clock.clone());
    let allowed: Vec<bool> = (0..3).map(|_| ready(limiter.check("k")).unwrap().allowed).collect();
    assert_eq!(allowed, [true, true, false]);
    clock.advance(Duration::from_secs(1));
    let third = ready(limiter.check("k")).unwrap();
    assert!(third.allowed && third.remaining == 0, "the minute limit reports 0 left: {third:?}");
    assert!(!ready(limiter.check("k")).unwrap().allowed);
}

#[test]
fn a_limiter_on_a_manual_clock_never_sweeps_by_the_system_clock() {
    // The limiter's own store follows its clock: at 1970 on the manual clock, the states of
    // many keys are live although the system clock says they expired long ago. Enough keys
    // that every shard sweeps (a sweep runs after 1024 insertions in a shard).
    let clock = ManualClock::default();
    let policy = SlidingLog::new(1, Duration::from_secs(60), SlidingLogVariant::Accepted).unwrap();
    let limiter = RateLimiter::new(Limit::new("t", policy)).with_clock(clock.clone());
    let keys = 4_096 * 128;
    for i in 0..keys {
        assert!(ready(limiter.check(format!("key-{i}"))).unwrap().allowed);
    }
    assert_eq!(limiter.store().len(), keys);
    for i in (0..keys).step_by(97) {
        assert!(!ready(limiter.check(format!("key-{i}"))).unwrap().allowed, "key-{i} lost its state");
    }
}
