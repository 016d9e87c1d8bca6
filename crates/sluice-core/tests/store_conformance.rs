//! The memory store runs the suite every store must pass ([`sluice_core::conformance`]),
//! plus what only the memory store has.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use sluice_core::{
    Check, Key, Limit, ManualClock, MemoryStore, SlidingLog, SlidingLogVariant, SlidingWindow, Store, StoreError,
    Timestamp, TokenBucket, TokenBucketSettings,
};
use std::future::Future;
use std::time::Duration;
use support::{ms, policies, us};

#[test]
fn reset_keeps_the_count_of_states_right() {
    let store = MemoryStore::builder().clock(ManualClock::default()).build();
    let limits = [
        Limit::new(
            "one",
            TokenBucket::new(TokenBucketSettings { capacity: 2, refill_amount: 1, refill_interval: ms(5) }).unwrap(),
        ),
        Limit::new(
            "two",
            TokenBucket::new(TokenBucketSettings { capacity: 3, refill_amount: 1, refill_interval: ms(5) }).unwrap(),
        ),
    ];
    for key in [&b"a"[..], b"b"] {
        store.check_now(Key::new(key).unwrap(), &limits, Timestamp::from_micros(1), 1).unwrap();
    }
    assert_eq!(store.len(), 4);
    // A limit listed twice is one state, forgotten once.
    let twice = [limits[0].clone(), limits[0].clone()];
    assert_eq!(store.reset_now(Key::new(b"a").unwrap(), &twice), 1);
    assert_eq!(store.len(), 3);
    assert_eq!(store.reset_now(Key::new(b"a").unwrap(), &limits), 1);
    assert_eq!(store.reset_now(Key::new(b"a").unwrap(), &limits), 0);
    assert_eq!(store.len(), 2);
}

#[tokio::test]
async fn memory_store_conforms() {
    sluice_core::conformance::run(|| async { MemoryStore::builder().clock(ManualClock::default()).build() }).await;
}

#[tokio::test]
async fn default_memory_store_conforms() {
    // The default store sweeps by the system clock; with a handful of keys no sweep runs,
    // and it must decide exactly as the pure algorithms do.
    sluice_core::conformance::run(|| async { MemoryStore::new() }).await;
}

#[test]
fn peeks_change_nothing() {
    let store = MemoryStore::builder().clock(ManualClock::default()).build();
    let bucket = TokenBucketSettings { capacity: 2, refill_amount: 1, refill_interval: ms(5) };
    let limit = [Limit::new("l", TokenBucket::new(bucket).unwrap())];
    let key = Key::new(b"k").unwrap();
    let now = Timestamp::from_micros(100);
    for _ in 0..3 {
        assert_eq!(store.check_now(key, &limit, now, 0).unwrap().decision.remaining, 2);
    }
    assert!(store.is_empty(), "a peek stores nothing");
    assert_eq!(store.check_now(key, &limit, now, 1).unwrap().decision.remaining, 1);
    assert_eq!(store.len(), 1);
    assert_eq!(store.check_now(key, &limit, now, 0).unwrap().decision.reset_after, us(5_000));
}

#[test]
fn a_limit_listed_twice_records_once() {
    let store = MemoryStore::builder().clock(ManualClock::default()).build();
    let limit = Limit::new("l", SlidingLog::new(2, ms(5), SlidingLogVariant::Attempts).unwrap());
    let twice = [limit.clone(), limit.clone()];
    let key = Key::new(b"k").unwrap();
    assert!(store.check_now(key, &twice, Timestamp::from_micros(1), 1).unwrap().decision.allowed);
    let after = store.check_now(key, &[limit], Timestamp::from_micros(1), 0).unwrap();
    assert_eq!(after.decision.remaining, 1);
}

#[test]
fn extreme_times_and_costs_never_panic() {
    // Debug builds panic on overflow: every algorithm must saturate instead.
    let times = [0, 1, (1 << 53) - 1, 1 << 53, u64::MAX - 1, u64::MAX, 5];
    let costs = [0, 1, 2, u64::MAX];
    // Buckets of 1 µs, so that the bucket index runs to the end of `u64` too.
    let one_microsecond_buckets = SlidingWindow::new(2, Duration::from_micros(10), 10).unwrap().into();
    for policy in policies().into_iter().chain([one_microsecond_buckets]) {
        let store = MemoryStore::builder().clock(ManualClock::default()).build();
        let limit = [Limit::new("edge", policy.clone())];
        let key = Key::new(b"k").unwrap();
        for &at in &times {
            for &cost in &costs {
                let verdict = store.check_now(key, &limit, Timestamp::from_micros(at), cost).unwrap();
                assert_eq!(verdict.decision.limit, policy.limit());
            }
        }
    }
}

/// A store around a memory store, as an app might write one (to count, or to log), that
/// forwards `check` and `reset` only: `check_ready` is the trait's default.
struct Plain(MemoryStore);

impl Store for Plain {
    fn check(&self, check: Check<'_>) -> impl Future<Output = Checked> + Send {
        self.0.check(check)
    }

    fn reset(&self, key: Key<'_>, limits: &[Limit]) -> impl Future<Output = Result<(), StoreError>> + Send {
        self.0.reset(key, limits)
    }
}

/// The same wrapper, forwarding `check_ready` too: it keeps the decide-now path.
struct Forwarding(MemoryStore);

impl Store for Forwarding {
    fn check(&self, check: Check<'_>) -> impl Future<Output = Checked> + Send {
        self.0.check(check)
    }

    fn reset(&self, key: Key<'_>, limits: &[Limit]) -> impl Future<Output = Result<(), StoreError>> + Send {
        self.0.reset(key, limits)
    }

    fn check_ready(&self, check: Check<'_>) -> Option<Checked> {
        self.0.check_ready(check)
    }
}

type Checked = Result<sluice_core::Verdict, StoreError>;

fn manual_memory_store() -> MemoryStore {
    MemoryStore::builder().clock(ManualClock::default()).build()
}

#[tokio::test]
async fn wrapped_memory_stores_conform_with_or_without_the_decide_now_path() {
    sluice_core::conformance::run(|| async { Plain(manual_memory_store()) }).await;
    sluice_core::conformance::run(|| async { Forwarding(manual_memory_store()) }).await;
}

#[test]
fn check_ready_decides_at_once_only_where_the_store_says_so() {
    let limit = [Limit::new("one", SlidingLog::new(1, ms(10), SlidingLogVariant::Accepted).unwrap())];
    let (key, now) = (Key::new(b"k").unwrap(), Timestamp::from_micros(1));
    let memory = manual_memory_store();
    let first = memory.check_ready(Check::new(key, &limit, now, 1)).expect("the memory store decides at once").unwrap();
    assert!(first.decision.allowed);
    assert!(!memory.check_ready(Check::new(key, &limit, now, 1)).unwrap().unwrap().decision.allowed, "and records");

    let forwarding = Forwarding(manual_memory_store());
    assert!(forwarding.check_ready(Check::new(key, &limit, now, 1)).unwrap().unwrap().decision.allowed);
    assert_eq!(forwarding.0.len(), 1, "the wrapped store recorded the request");

    // The trait's default checks nothing: the request is for `check` to decide.
    let plain = Plain(manual_memory_store());
    assert!(plain.check_ready(Check::new(key, &limit, now, 1)).is_none());
    assert!(plain.0.is_empty(), "nothing was checked");
}
