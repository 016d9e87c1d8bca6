//! Threads hammering one key never get more than the limit.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use sluice_core::{
    Key, Limit, ManualClock, MemoryStore, SlidingLog, SlidingLogVariant, Timestamp, TokenBucket, TokenBucketSettings,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

fn hammer(store: &MemoryStore, limits: &[Limit], threads: usize, checks: usize) -> u64 {
    let allowed = AtomicU64::new(0);
    std::thread::scope(|scope| {
        for thread in 0..threads {
            let allowed = &allowed;
            scope.spawn(move || {
                for i in 0..checks {
                    // Every thread's clock reads a little differently, some steps back.
                    let now = Timestamp::from_micros(1_000 + ((i * 7 + thread * 13) % 50) as u64);
                    let verdict = store.check_now(Key::new(b"hot").unwrap(), limits, now, 1).unwrap();
                    if verdict.decision.allowed {
                        allowed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    allowed.into_inner()
}

#[test]
fn threads_on_one_key_get_exactly_the_limit() {
    let store = MemoryStore::builder().clock(ManualClock::default()).build();
    let limit =
        Limit::new("hot", SlidingLog::new(1_000, Duration::from_secs(60), SlidingLogVariant::Accepted).unwrap());
    let allowed = hammer(&store, &[limit], 4, 5_000);
    assert_eq!(allowed, 1_000);
}

#[test]
fn threads_on_one_key_with_two_limits_get_the_smaller_limit() {
    let store = MemoryStore::builder().clock(ManualClock::default()).build();
    let log = Limit::new("log", SlidingLog::new(700, Duration::from_secs(60), SlidingLogVariant::Accepted).unwrap());
    let bucket = TokenBucketSettings { capacity: 500, refill_amount: 1, refill_interval: Duration::from_secs(60) };
    let bucket = Limit::new("bucket", TokenBucket::new(bucket).unwrap());
    let allowed = hammer(&store, &[log.clone(), bucket], 4, 2_000);
    assert_eq!(allowed, 500);
    // The log recorded exactly the admitted requests, not the rejected ones.
    let after = store.check_now(Key::new(b"hot").unwrap(), &[log], Timestamp::from_micros(2_000), 0).unwrap();
    assert_eq!(after.decision.remaining, 200);
}
