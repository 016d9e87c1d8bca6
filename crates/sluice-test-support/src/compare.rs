//! Random policies and traces, and the memory-vs-Redis comparison, shared by the
//! standalone and Cluster differential tests.

use proptest::prelude::*;
use sluice_core::{
    Alignment, Check, FixedWindow, Key, LeakMode, LeakyBucket, Limit, ManualClock, MemoryStore, Policy, SlidingLog,
    SlidingLogVariant, SlidingWindow, SlidingWindowSettings, Source, Store, Timestamp, TokenBucket,
    TokenBucketSettings,
};
use sluice_redis::RedisStore;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Decisions the blocked-key cache answered: the comparison covers them too.
pub static CACHED: AtomicU64 = AtomicU64::new(0);

fn us(micros: u64) -> Duration {
    Duration::from_micros(micros)
}

/// Any policy of any algorithm and variant, with parameters small enough that a short
/// trace reaches every edge (expiry, refill, window change).
pub fn policy() -> impl Strategy<Value = Policy> {
    // Limits above 128 reach the sliding log's slot-by-slot path (smaller logs are read whole).
    let limit = prop_oneof![4 => 1u64..6, 1 => 6u64..40, 1 => 120u64..200];
    let window = 1u64..60;
    prop_oneof![
        (limit.clone(), window.clone(), any::<bool>()).prop_map(|(n, w, attempts)| {
            let variant = if attempts { SlidingLogVariant::Attempts } else { SlidingLogVariant::Accepted };
            SlidingLog::new(n, us(w), variant).expect("a valid sliding log").into()
        }),
        (limit.clone(), window.clone(), any::<bool>(), 0u64..60).prop_map(|(n, w, anchored, offset)| {
            let (alignment, offset) =
                if anchored { (Alignment::Anchored, 0) } else { (Alignment::Aligned, offset % w) };
            FixedWindow::new(n, us(w), alignment, us(offset)).expect("a valid fixed window").into()
        }),
        (limit.clone(), 1u64..20, 1u64..6, any::<bool>(), any::<bool>()).prop_map(
            |(n, width, b, attempts, anchored)| {
                let variant = if attempts { SlidingLogVariant::Attempts } else { SlidingLogVariant::Accepted };
                let alignment = if anchored { Alignment::Anchored } else { Alignment::Aligned };
                let settings =
                    SlidingWindowSettings { limit: n, window: us(width * b), buckets: b, variant, alignment };
                SlidingWindow::with_settings(settings).expect("a valid sliding window").into()
            }
        ),
        (limit, 1u64..4, window).prop_map(|(c, amount, interval)| TokenBucket::new(TokenBucketSettings {
            capacity: c,
            refill_amount: amount,
            refill_interval: us(interval)
        })
        .expect("a valid token bucket")
        .into()),
        (1u64..30, 0u64..5, any::<bool>()).prop_map(|(interval, burst, delay)| {
            let mode = if delay { LeakMode::Delay } else { LeakMode::NoDelay };
            LeakyBucket::new(us(interval), burst, mode).expect("a valid leaky bucket").into()
        }),
    ]
}

/// Requests: (time step, cost). Steps include 0 (same µs), long gaps and steps back.
pub fn trace() -> impl Strategy<Value = Vec<(i64, u64)>> {
    let step = prop_oneof![3 => Just(0i64), 6 => 1i64..20, 1 => 50i64..400, 1 => -30i64..0];
    let cost = prop_oneof![1 => Just(0u64), 6 => Just(1u64), 2 => 2u64..5, 1 => 5u64..50, 1 => 50u64..250];
    prop::collection::vec((step, cost), 1..40)
}

/// Sliding logs of limits above 32, which keep a ring in Redis: with [`long_trace`], traces
/// wrap it, overwrite a full ring (`attempts`), grow and shrink it.
pub fn long_log() -> impl Strategy<Value = SlidingLog> {
    (prop_oneof![20u64..40, 33u64..80, 120u64..200], 1u64..400, any::<bool>()).prop_map(|(n, w, attempts)| {
        let variant = if attempts { SlidingLogVariant::Attempts } else { SlidingLogVariant::Accepted };
        SlidingLog::new(n, Duration::from_micros(w), variant).expect("a valid sliding log")
    })
}

/// Long traces (steps and costs) of `lengths` requests, for [`long_log`].
pub fn long_trace(lengths: std::ops::Range<usize>) -> impl Strategy<Value = Vec<(i64, u64)>> {
    let step = prop_oneof![3 => Just(0i64), 6 => 1i64..20, 1 => 50i64..800, 1 => -30i64..0];
    let cost = prop_oneof![1 => Just(0u64), 8 => Just(1u64), 2 => 2u64..8, 1 => 8u64..250];
    prop::collection::vec((step, cost), lengths)
}

/// Where traces start: the epoch, just after it, today, or about a second below 2^53 µs,
/// where Lua's doubles are still exact but only just (every generated trace and policy
/// stays below 2^53 from there).
pub fn start_time() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0u64), 0u64..1_000, Just(1_763_700_000_000_000u64), Just(sluice_core::EXACT_LIMIT - (1 << 20))]
}

/// Injected time, and a timeout for tests rather than for a request path (a debug build
/// loading the script through Cluster redirects can take more than 50 ms).
pub fn settings() -> sluice_redis::RedisSettings {
    sluice_redis::RedisSettings { timeout: Duration::from_secs(5), ..sluice_redis::RedisSettings::injected_time() }
}

/// A name no other case uses, so cases share a store without sharing state.
pub fn case_name() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("case{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Runs `trace` on two interleaved keys through a fresh memory store and `redis`;
/// returns the first mismatch.
#[allow(clippy::unwrap_used)] // a key or a memory check that fails is the test's own bug
pub fn compare(
    runtime: &tokio::runtime::Runtime,
    redis: &RedisStore,
    limits: &[Limit],
    start: u64,
    trace: &[(i64, u64)],
) -> Result<(), String> {
    let memory = MemoryStore::builder().clock(ManualClock::default()).build();
    let case = case_name();
    let keys = [format!("{case}-key"), format!("{case}-other}}{{")];
    let mut now = start;
    for (index, &(step, cost)) in trace.iter().enumerate() {
        now = now.saturating_add_signed(step);
        let key = Key::new(keys[usize::from(index % 3 == 2)].as_bytes()).unwrap();
        let at = Timestamp::from_micros(now);
        let expected = memory.check_now(key, limits, at, cost).unwrap();
        let got =
            runtime.block_on(redis.check(Check::new(key, limits, at, cost))).map_err(|error| format!("{error:?}"))?;
        if got.source.is_without_store() {
            return Err(format!("request {index}: Redis did not decide ({:?})", got.source));
        }
        if got.source == Source::Cache {
            CACHED.fetch_add(1, Ordering::Relaxed);
        }
        if (got.decision, got.limit) != (expected.decision, expected.limit) {
            return Err(format!("request {index} at {now} cost {cost}:\n memory {expected:?}\n redis  {got:?}"));
        }
    }
    Ok(())
}
