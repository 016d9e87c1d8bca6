//! Memory vs Redis: the same random traces through both stores give the same decisions,
//! every field, to the microsecond.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use proptest::prelude::*;
use sluice::{
    Alignment, FixedWindow, Key, LeakMode, LeakyBucket, Limit, ManualClock, MemoryStore, Policy, SlidingLog,
    SlidingLogVariant, SlidingWindow, Source, Store, Timestamp, TokenBucket,
};
use sluice_redis::{RedisSettings, RedisStore};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use support::redis::RedisServer;

fn us(micros: u64) -> Duration {
    Duration::from_micros(micros)
}

/// Any policy of any algorithm and variant, with parameters small enough that a short
/// trace reaches every edge (expiry, refill, window change).
fn policy() -> impl Strategy<Value = Policy> {
    let limit = prop_oneof![4 => 1u64..6, 1 => 6u64..40];
    let window = 1u64..60;
    prop_oneof![
        (limit.clone(), window.clone(), any::<bool>()).prop_map(|(n, w, attempts)| {
            let variant = if attempts { SlidingLogVariant::Attempts } else { SlidingLogVariant::Accepted };
            SlidingLog::new(n, us(w), variant).unwrap().into()
        }),
        (limit.clone(), window.clone(), any::<bool>(), 0u64..60).prop_map(|(n, w, anchored, offset)| {
            let (alignment, offset) =
                if anchored { (Alignment::Anchored, 0) } else { (Alignment::Aligned, offset % w) };
            FixedWindow::new(n, us(w), alignment, us(offset)).unwrap().into()
        }),
        (limit.clone(), 1u64..20, 1u64..6)
            .prop_map(|(n, width, b)| SlidingWindow::new(n, us(width * b), b).unwrap().into()),
        (limit.clone(), 1u64..4, window.clone())
            .prop_map(|(c, amount, interval)| { TokenBucket::new(c, amount, us(interval)).unwrap().into() }),
        (1u64..30, 0u64..5, any::<bool>()).prop_map(|(interval, burst, delay)| {
            let mode = if delay { LeakMode::Delay } else { LeakMode::NoDelay };
            LeakyBucket::new(us(interval), burst, mode).unwrap().into()
        }),
    ]
}

/// Requests: (time step, cost). Steps include 0 (same µs), long gaps and steps back.
fn trace() -> impl Strategy<Value = Vec<(i64, u64)>> {
    let step = prop_oneof![3 => Just(0i64), 6 => 1i64..20, 1 => 50i64..400, 1 => -30i64..0];
    let cost = prop_oneof![1 => Just(0u64), 6 => Just(1u64), 2 => 2u64..5, 1 => 5u64..50];
    prop::collection::vec((step, cost), 1..40)
}

/// Decisions the blocked-key cache answered: the comparison covers them too.
static CACHED: AtomicU64 = AtomicU64::new(0);

/// A fresh key prefix per case: no test shares state, none needs to run alone.
fn prefix() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("diff{}:", NEXT.fetch_add(1, Ordering::Relaxed))
}

struct Harness {
    _server: RedisServer,
    runtime: tokio::runtime::Runtime,
    url: String,
}

impl Harness {
    fn start() -> Self {
        let server = RedisServer::start();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        Harness { url: server.url(), _server: server, runtime }
    }

    fn redis(&self) -> RedisStore {
        let settings = RedisSettings { key_prefix: prefix(), ..RedisSettings::injected_time() };
        self.runtime.block_on(RedisStore::connect(&self.url, settings)).unwrap()
    }

    /// Runs `trace` on two interleaved keys through both stores; returns the first mismatch.
    fn compare(&self, limits: &[Limit], start: u64, trace: &[(i64, u64)]) -> Result<(), String> {
        let memory = MemoryStore::builder().clock(ManualClock::default()).build();
        let redis = self.redis();
        let mut now = start;
        for (index, &(step, cost)) in trace.iter().enumerate() {
            now = now.saturating_add_signed(step);
            let key = Key::new(if index % 3 == 2 { b"other" } else { b"key" }).unwrap();
            let at = Timestamp::from_micros(now);
            let expected = memory.check_now(key, limits, at, cost).unwrap();
            let got = self.runtime.block_on(redis.check(key, limits, at, cost)).unwrap();
            // The blocked-key cache must answer exactly what Redis would.
            if got.source == Source::Cache {
                CACHED.fetch_add(1, Ordering::Relaxed);
            }
            if (got.decision, got.limit) != (expected.decision, expected.limit) {
                return Err(format!("request {index} at {now} cost {cost}:\n memory {expected:?}\n redis  {got:?}"));
            }
        }
        Ok(())
    }
}

fn start_time() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0u64), 0u64..1_000, Just(1_763_700_000_000_000u64)]
}

#[test]
fn every_algorithm_decides_the_same_in_redis() {
    let harness = Harness::start();
    proptest!(ProptestConfig::with_cases(400), |(policy in policy(), start in start_time(), trace in trace())| {
        let limits = [Limit::new("p", policy.clone())];
        prop_assert_eq!(harness.compare(&limits, start, &trace), Ok(()), "{:?}", policy);
    });
    assert!(CACHED.load(Ordering::Relaxed) > 100, "the blocked-key cache answered too rarely to be tested");
}

#[test]
fn several_limits_decide_the_same_in_redis() {
    let harness = Harness::start();
    let policies = prop::collection::vec(policy(), 2..4);
    proptest!(ProptestConfig::with_cases(200), |(policies in policies, start in start_time(), trace in trace())| {
        let limits: Vec<Limit> =
            policies.iter().enumerate().map(|(i, p)| Limit::new(format!("p{i}"), p.clone())).collect();
        prop_assert_eq!(harness.compare(&limits, start, &trace), Ok(()), "{:?}", policies);
    });
}
