//! The behaviour every `Store` must have, written once over the `Store` trait.
//! The memory store runs it here; other stores call the same suite.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use sluice_core::algorithm::Algorithm;
use sluice_core::{
    Decision, Key, Limit, ManualClock, MemoryStore, Policy, SlidingLog, SlidingLogVariant, SlidingWindow, Store,
    StoreError, Timestamp, TokenBucket, TokenBucketSettings,
};
use std::time::Duration;
use support::{ms, policies, us};

/// A deterministic trace of (time µs, cost): bursts, equal times, gaps, a step back.
fn trace() -> Vec<(u64, u64)> {
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut time = 1_000_000u64;
    (0..400)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            time = match seed % 10 {
                0 => time + 25_000,
                1 => time.saturating_sub(2_000),
                2 | 3 => time,
                _ => time + seed % 3_000,
            };
            (time, [0, 1, 1, 1, 2, 3, 5][(seed >> 20) as usize % 7])
        })
        .collect()
}

/// The pure algorithm's decisions for a trace on one key.
fn expected(policy: &Policy, trace: &[(u64, u64)]) -> Vec<Decision> {
    fn run<A: Algorithm>(algorithm: &A, trace: &[(u64, u64)]) -> Vec<Decision> {
        let mut state = A::State::default();
        let mut decisions = Vec::new();
        for &(at, cost) in trace {
            let (decision, next) = algorithm.step(&state, Timestamp::from_micros(at), cost);
            state = next;
            decisions.push(decision);
        }
        decisions
    }
    match policy {
        Policy::SlidingLog(p) => run(p, trace),
        Policy::FixedWindow(p) => run(p, trace),
        Policy::SlidingWindow(p) => run(p, trace),
        Policy::TokenBucket(p) => run(p, trace),
        Policy::LeakyBucket(p) => run(p, trace),
    }
}

async fn check<S: Store>(
    store: &S,
    key: &str,
    limits: &[Limit],
    at: u64,
    cost: u64,
) -> Result<sluice_core::Verdict, StoreError> {
    store.check(Key::new(key.as_bytes()).unwrap(), limits, Timestamp::from_micros(at), cost).await
}

/// The suite: any store must give the pure algorithms' decisions, key by key.
async fn conformance<S: Store>(make: impl Fn() -> S) {
    for policy in policies() {
        let store = make();
        let limit = [Limit::new("conformance", policy.clone())];
        let trace = trace();
        for (index, (&(at, cost), want)) in trace.iter().zip(expected(&policy, &trace)).enumerate() {
            // Two keys interleaved: each must see its own history only.
            let got = check(&store, "a", &limit, at, cost).await.unwrap();
            assert_eq!(got.decision, want, "{policy:?}, request {index} at {at} cost {cost}");
            let other = check(&store, "b", &limit, at, cost).await.unwrap();
            assert_eq!(other.decision, want, "{policy:?}, key b, request {index}");
        }
    }
    all_or_nothing(&make()).await;
    limits_do_not_share_state(&make()).await;
    reset_forgets_one_key_for_the_given_limits(&make()).await;
    assert!(matches!(check(&make(), "a", &[], 0, 1).await, Err(StoreError::NoLimits)));
}

async fn all_or_nothing<S: Store>(store: &S) {
    let bucket = TokenBucketSettings { capacity: 10, refill_amount: 1, refill_interval: Duration::from_secs(1) };
    let wide = Limit::new("wide", TokenBucket::new(bucket).unwrap());
    let narrow = Limit::new("narrow", SlidingLog::new(2, ms(10), SlidingLogVariant::Accepted).unwrap());
    let both = [wide.clone(), narrow.clone()];
    for _ in 0..2 {
        assert!(check(store, "k", &both, 5, 1).await.unwrap().decision.allowed);
    }
    let rejected = check(store, "k", &both, 5, 1).await.unwrap();
    assert!(!rejected.decision.allowed);
    assert_eq!(rejected.limit, 1, "the narrow limit decided");
    // The rejected request took no token from the wide limit.
    let wide_alone = check(store, "k", std::slice::from_ref(&wide), 5, 0).await.unwrap();
    assert_eq!(wide_alone.decision.remaining, 8);
    // A limit that logs attempts records them even when another limit rejects.
    let attempts = Limit::new("attempts", SlidingLog::new(5, ms(10), SlidingLogVariant::Attempts).unwrap());
    let with_attempts = [narrow, attempts.clone()];
    assert!(!check(store, "k", &with_attempts, 6, 1).await.unwrap().decision.allowed);
    let logged = check(store, "k", std::slice::from_ref(&attempts), 6, 0).await.unwrap();
    assert_eq!(logged.decision.remaining, 4);
}

async fn limits_do_not_share_state<S: Store>(store: &S) {
    let policy = SlidingLog::new(1, ms(10), SlidingLogVariant::Accepted).unwrap();
    let first = [Limit::new("first", policy.clone())];
    let second = [Limit::new("second", policy)];
    assert!(check(store, "k", &first, 1, 1).await.unwrap().decision.allowed);
    assert!(check(store, "k", &second, 1, 1).await.unwrap().decision.allowed);
    assert!(!check(store, "k", &first, 1, 1).await.unwrap().decision.allowed);
}

async fn reset_forgets_one_key_for_the_given_limits<S: Store>(store: &S) {
    let log = Limit::new("log", SlidingLog::new(1, ms(10), SlidingLogVariant::Accepted).unwrap());
    let bucket = TokenBucketSettings { capacity: 1, refill_amount: 1, refill_interval: ms(10) };
    let bucket = Limit::new("bucket", TokenBucket::new(bucket).unwrap());
    let both = [log.clone(), bucket.clone()];
    for key in ["a", "b"] {
        assert!(check(store, key, &both, 5, 1).await.unwrap().decision.allowed);
        assert!(!check(store, key, &both, 5, 1).await.unwrap().decision.allowed);
    }
    store.reset(Key::new(b"a").unwrap(), std::slice::from_ref(&log)).await.unwrap();
    let fresh = check(store, "a", std::slice::from_ref(&log), 5, 0).await.unwrap().decision;
    assert_eq!((fresh.allowed, fresh.remaining), (true, 1), "the reset limit starts fresh");
    let kept = check(store, "a", std::slice::from_ref(&bucket), 5, 0).await.unwrap().decision;
    assert_eq!(kept.remaining, 0, "a limit not named keeps its state");
    let other = check(store, "b", std::slice::from_ref(&log), 5, 0).await.unwrap().decision;
    assert_eq!(other.remaining, 0, "another key keeps its state");
    store.reset(Key::new(b"a").unwrap(), &both).await.unwrap();
    assert!(check(store, "a", &both, 5, 1).await.unwrap().decision.allowed);
    // Nothing to forget is not an error.
    store.reset(Key::new(b"never-seen").unwrap(), &both).await.unwrap();
    store.reset(Key::new(b"a").unwrap(), &[]).await.unwrap();
}

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
    conformance(|| MemoryStore::builder().clock(ManualClock::default()).build()).await;
}

#[tokio::test]
async fn default_memory_store_conforms() {
    // The default store sweeps by the system clock; with a handful of keys no sweep runs,
    // and it must decide exactly as the pure algorithms do.
    conformance(MemoryStore::new).await;
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
