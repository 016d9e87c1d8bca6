//! The behaviour every [`Store`] must have, as a test suite any store runs: the pure
//! algorithms' decisions for a trace with bursts, equal times, gaps and a step back, on two
//! keys; all-or-nothing checks of several limits; limits that never share a state; resets
//! that forget one key for the limits named; and no check without a limit.
//!
//! The memory store runs it in `tests/store_conformance.rs`, the Redis store in
//! `sluice-redis`'s `tests/conformance.rs`, against a real redis-server. Enabled by the
//! `conformance` feature, for a store's tests:
//!
//! ```toml
//! [dev-dependencies]
//! sluice-core = { version = "0.1", features = ["conformance"] }
//! ```
//!
//! ```ignore
//! #[tokio::test]
//! async fn my_store_conforms() {
//!     sluice_core::conformance::run(|| async { MyStore::new() }).await;
//! }
//! ```

use crate::algorithm::Algorithm;
use crate::{
    Alignment, Check, Decision, FixedWindow, Key, LeakMode, LeakyBucket, Limit, Policy, SlidingLog, SlidingLogVariant,
    SlidingWindow, SlidingWindowSettings, SlidingWindowVariant, Store, StoreError, Timestamp, TokenBucket,
    TokenBucketSettings, Verdict,
};
use std::future::Future;
use std::time::Duration;

fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

/// A sliding window counter of `limit` per 10 ms over `buckets` buckets.
fn sliding_window(limit: u64, buckets: u64, variant: SlidingWindowVariant, alignment: Alignment) -> Policy {
    let settings = SlidingWindowSettings { limit, window: ms(10), buckets, variant, alignment };
    SlidingWindow::with_settings(settings).expect("valid parameters").into()
}

/// One policy of each algorithm and variant, with small parameters so a short trace hits
/// every edge: the policies the suite runs (and the core's own tests use).
pub fn policies() -> Vec<Policy> {
    vec![
        SlidingLog::new(3, ms(10), SlidingLogVariant::Accepted).expect("valid parameters").into(),
        SlidingLog::new(3, ms(10), SlidingLogVariant::Attempts).expect("valid parameters").into(),
        FixedWindow::new(3, ms(10), Alignment::Aligned, ms(4)).expect("valid parameters").into(),
        FixedWindow::new(3, ms(10), Alignment::Anchored, Duration::ZERO).expect("valid parameters").into(),
        SlidingWindow::new(4, ms(10), 1).expect("valid parameters").into(),
        SlidingWindow::new(4, ms(10), 5).expect("valid parameters").into(),
        TokenBucket::new(TokenBucketSettings { capacity: 3, refill_amount: 2, refill_interval: ms(4) })
            .expect("valid parameters")
            .into(),
        LeakyBucket::new(ms(3), 2, LeakMode::NoDelay).expect("valid parameters").into(),
        LeakyBucket::new(ms(3), 2, LeakMode::Delay).expect("valid parameters").into(),
        // Last, so that the first nine keep their places (tests pin their identities).
        sliding_window(4, 5, SlidingWindowVariant::Attempts, Alignment::Aligned),
        sliding_window(4, 1, SlidingWindowVariant::Accepted, Alignment::Anchored),
        sliding_window(4, 5, SlidingWindowVariant::Attempts, Alignment::Anchored),
    ]
}

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
    crate::policy::with_algorithm!(policy, algorithm => run(algorithm, trace))
}

async fn check<S: Store>(store: &S, key: &str, limits: &[Limit], at: u64, cost: u64) -> Result<Verdict, StoreError> {
    let key = Key::new(key.as_bytes()).expect("a valid key");
    store.check(Check::new(key, limits, Timestamp::from_micros(at), cost)).await
}

/// [`check`], through [`Store::check_ready`] when the store decides at once.
async fn check_ready_or_later<S: Store>(
    store: &S,
    key: &str,
    limits: &[Limit],
    at: u64,
    cost: u64,
) -> Result<Verdict, StoreError> {
    let (key_bytes, now) = (Key::new(key.as_bytes()).expect("a valid key"), Timestamp::from_micros(at));
    match store.check_ready(Check::new(key_bytes, limits, now, cost)) {
        Some(checked) => checked,
        None => check(store, key, limits, at, cost).await,
    }
}

/// Runs the suite on stores made by `make` (a fresh, empty store for each part: stores
/// sharing one backend must be told apart, by a key prefix for instance).
///
/// Key `b` of every trace is asked through [`Store::check_ready`] where the store decides
/// at once, so that path must decide as `check` does. The store must decide at the `now`
/// it is given: a Redis store runs it under
/// application time.
///
/// # Panics
///
/// At the first decision that differs from the pure algorithm's, or the first error, with
/// the policy, the request and both decisions.
pub async fn run<S: Store, F: Future<Output = S>>(make: impl Fn() -> F) {
    for policy in policies() {
        let store = make().await;
        let limit = [Limit::new("conformance", policy.clone())];
        let trace = trace();
        for (index, (&(at, cost), want)) in trace.iter().zip(expected(&policy, &trace)).enumerate() {
            // Two keys interleaved: each must see its own history only.
            let got = check(&store, "a", &limit, at, cost).await.expect("the store decides");
            assert_eq!(got.decision, want, "{policy:?}, request {index} at {at} cost {cost}");
            let other = check_ready_or_later(&store, "b", &limit, at, cost).await.expect("the store decides");
            assert_eq!(other.decision, want, "{policy:?}, key b, request {index}");
        }
    }
    all_or_nothing(&make().await).await;
    limits_do_not_share_state(&make().await).await;
    reset_forgets_one_key_for_the_given_limits(&make().await).await;
    assert!(matches!(check(&make().await, "a", &[], 0, 1).await, Err(StoreError::NoLimits)));
}

async fn all_or_nothing<S: Store>(store: &S) {
    let bucket = TokenBucketSettings { capacity: 10, refill_amount: 1, refill_interval: Duration::from_secs(1) };
    let wide = Limit::new("wide", TokenBucket::new(bucket).expect("valid parameters"));
    let narrow =
        Limit::new("narrow", SlidingLog::new(2, ms(10), SlidingLogVariant::Accepted).expect("valid parameters"));
    let both = [wide.clone(), narrow.clone()];
    for _ in 0..2 {
        assert!(check(store, "k", &both, 5, 1).await.expect("the store decides").decision.allowed);
    }
    let rejected = check(store, "k", &both, 5, 1).await.expect("the store decides");
    assert!(!rejected.decision.allowed);
    assert_eq!(rejected.limit, 1, "the narrow limit decided");
    // The rejected request took no token from the wide limit.
    let wide_alone = check(store, "k", std::slice::from_ref(&wide), 5, 0).await.expect("the store decides");
    assert_eq!(wide_alone.decision.remaining, 8);
    // A limit that logs attempts records them even when another limit rejects.
    let attempts =
        Limit::new("attempts", SlidingLog::new(5, ms(10), SlidingLogVariant::Attempts).expect("valid parameters"));
    let with_attempts = [narrow, attempts.clone()];
    assert!(!check(store, "k", &with_attempts, 6, 1).await.expect("the store decides").decision.allowed);
    let logged = check(store, "k", std::slice::from_ref(&attempts), 6, 0).await.expect("the store decides");
    assert_eq!(logged.decision.remaining, 4);
}

async fn limits_do_not_share_state<S: Store>(store: &S) {
    let policy = SlidingLog::new(1, ms(10), SlidingLogVariant::Accepted).expect("valid parameters");
    let first = [Limit::new("first", policy.clone())];
    let second = [Limit::new("second", policy)];
    assert!(check(store, "k", &first, 1, 1).await.expect("the store decides").decision.allowed);
    assert!(check(store, "k", &second, 1, 1).await.expect("the store decides").decision.allowed);
    assert!(!check(store, "k", &first, 1, 1).await.expect("the store decides").decision.allowed);
}

async fn reset_forgets_one_key_for_the_given_limits<S: Store>(store: &S) {
    let log = Limit::new("log", SlidingLog::new(1, ms(10), SlidingLogVariant::Accepted).expect("valid parameters"));
    let bucket = TokenBucketSettings { capacity: 1, refill_amount: 1, refill_interval: ms(10) };
    let bucket = Limit::new("bucket", TokenBucket::new(bucket).expect("valid parameters"));
    let both = [log.clone(), bucket.clone()];
    for key in ["a", "b"] {
        assert!(check(store, key, &both, 5, 1).await.expect("the store decides").decision.allowed);
        assert!(!check(store, key, &both, 5, 1).await.expect("the store decides").decision.allowed);
    }
    store.reset(Key::new(b"a").expect("a valid key"), std::slice::from_ref(&log)).await.expect("the store decides");
    let fresh = check(store, "a", std::slice::from_ref(&log), 5, 0).await.expect("the store decides").decision;
    assert_eq!((fresh.allowed, fresh.remaining), (true, 1), "the reset limit starts fresh");
    let kept = check(store, "a", std::slice::from_ref(&bucket), 5, 0).await.expect("the store decides").decision;
    assert_eq!(kept.remaining, 0, "a limit not named keeps its state");
    let other = check(store, "b", std::slice::from_ref(&log), 5, 0).await.expect("the store decides").decision;
    assert_eq!(other.remaining, 0, "another key keeps its state");
    store.reset(Key::new(b"a").expect("a valid key"), &both).await.expect("the store decides");
    assert!(check(store, "a", &both, 5, 1).await.expect("the store decides").decision.allowed);
    // Nothing to forget is not an error.
    store.reset(Key::new(b"never-seen").expect("a valid key"), &both).await.expect("the store decides");
    store.reset(Key::new(b"a").expect("a valid key"), &[]).await.expect("the store decides");
}
