//! Memory vs Redis: the same random traces through both stores give the same decisions,
//! every field, to the microsecond.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

use proptest::prelude::*;
use sluice_core::{
    Check, Key, LeakMode, LeakyBucket, Limit, MemoryStore, Policy, SlidingLog, SlidingLogVariant, Timestamp,
    TokenBucket, TokenBucketSettings,
};
use sluice_redis::RedisStore;
use sluice_test_support::compare::{CACHED, compare, long_log, long_trace, policy, settings, start_time, trace};
use sluice_test_support::leases::{LeaseStep, PERIOD, compare_leases, lease_start, lease_trace};
use sluice_test_support::redis::RedisServer;
use std::sync::atomic::Ordering;
use std::time::Duration;

fn connect(server: &RedisServer, runtime: &tokio::runtime::Runtime) -> RedisStore {
    runtime.block_on(RedisStore::connect(&server.url(), settings())).unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

#[test]
fn every_algorithm_decides_the_same_in_redis() {
    let (server, runtime) = (RedisServer::start(), runtime());
    let redis = connect(&server, &runtime);
    proptest!(ProptestConfig::with_cases(400), |(policy in policy(), start in start_time(), trace in trace())| {
        let limits = [Limit::new("p", policy.clone())];
        prop_assert_eq!(compare(&runtime, &redis, &limits, start, &trace), Ok(()), "{:?}", policy);
    });
    assert!(CACHED.load(Ordering::Relaxed) > 100, "the blocked-key cache answered too rarely to be tested");
}

#[test]
fn several_limits_decide_the_same_in_redis() {
    let (server, runtime) = (RedisServer::start(), runtime());
    let redis = connect(&server, &runtime);
    let policies = prop::collection::vec(policy(), 2..4);
    proptest!(ProptestConfig::with_cases(200), |(policies in policies, start in start_time(), trace in trace())| {
        let limits: Vec<Limit> =
            policies.iter().enumerate().map(|(i, p)| Limit::new(format!("p{i}"), p.clone())).collect();
        prop_assert_eq!(compare(&runtime, &redis, &limits, start, &trace), Ok(()), "{:?}", policies);
    });
}

#[test]
fn long_sliding_log_traces_decide_the_same_in_redis() {
    // Limits above 32 keep their log as a ring read slot by slot: long traces wrap it,
    // overwrite a full ring (`attempts`), grow and shrink it, and use its cached header.
    let (server, runtime) = (RedisServer::start(), runtime());
    let redis = connect(&server, &runtime);
    let (log, trace) = (long_log(), long_trace(50..400));
    proptest!(ProptestConfig::with_cases(120), |(log in log, start in start_time(), trace in trace)| {
        let limits = [Limit::new("log", log.clone())];
        prop_assert_eq!(compare(&runtime, &redis, &limits, start, &trace), Ok(()), "{:?}", log);
    });
}

/// Give-back speaks the wire ids: on every algorithm (the leased ones take units back, the
/// others nothing), Redis's script and the core agree.
#[test]
fn give_back_follows_the_core_on_every_leased_algorithm() {
    let (server, runtime) = (RedisServer::start(), runtime());
    let redis = connect(&server, &runtime);
    let taken_back = std::cell::Cell::new(0u32);
    proptest!(ProptestConfig::with_cases(300), |(policy in policy(), start in lease_start(), trace in lease_trace())| {
        let limits = [Limit::new("p", policy.clone())];
        prop_assert_eq!(compare_leases(&runtime, &redis, &limits, start, &trace), Ok(()), "{:?}", policy);
        taken_back.set(taken_back.get() + u32::from(policy.lease_terms().refusal().is_none()));
    });
    assert!(taken_back.get() > 50, "too few leased algorithms among the cases: {}", taken_back.get());
}

/// Leases and give-backs of several limits at once, of every algorithm (`lua/check.lua`):
/// all or nothing, as the memory store decides them.
#[test]
fn leases_of_several_limits_follow_the_core() {
    let (server, runtime) = (RedisServer::start(), runtime());
    let redis = connect(&server, &runtime);
    let policies = prop::collection::vec(policy(), 2..4);
    proptest!(ProptestConfig::with_cases(150), |(policies in policies, start in lease_start(), trace in lease_trace())| {
        let limits: Vec<Limit> =
            policies.iter().enumerate().map(|(i, p)| Limit::new(format!("p{i}"), p.clone())).collect();
        prop_assert_eq!(compare_leases(&runtime, &redis, &limits, start, &trace), Ok(()), "{:?}", policies);
    });
}

/// A bucket holds at most 16 leases: the seventeenth within one lease period is not granted
/// (the request is decided alone), in Redis as in the core, and the leases then end
/// unreported. A sliding log keeps granting: its seventeenth lease moves the oldest one's
/// units to the next deadline, in Redis as in the core.
#[test]
fn many_leases_held_at_once_follow_the_core() {
    let (server, runtime) = (RedisServer::start(), runtime());
    let redis = connect(&server, &runtime);
    let second = Duration::from_secs(1);
    let bucket = TokenBucketSettings { capacity: 100, refill_amount: 1, refill_interval: second };
    let policies: [(Policy, Option<usize>); 4] = [
        (SlidingLog::new(32, second, SlidingLogVariant::Accepted).unwrap().into(), None),
        (SlidingLog::new(100, second, SlidingLogVariant::Accepted).unwrap().into(), None),
        (TokenBucket::new(bucket).unwrap().into(), Some(16)),
        (LeakyBucket::new(Duration::from_millis(1), 99, LeakMode::NoDelay).unwrap().into(), Some(16)),
    ];
    // 20 leases of one unit, 10 µs apart, none given back; then leases after they ended.
    let lease = |step| LeaseStep { step, cost: 1, lease: 1, back: None };
    let trace: Vec<LeaseStep> = (0..20).map(|_| lease(10)).chain([lease(200_000), lease(10)]).collect();
    for (policy, most) in policies {
        let limits = [Limit::new("p", policy.clone())];
        assert_eq!(compare_leases(&runtime, &redis, &limits, 1 << 50, &trace), Ok(()), "{policy:?}");
        let memory = MemoryStore::new();
        let key = Key::new(b"count").unwrap();
        let granted = (0..20)
            .map(|step| Check::new(key, &limits, Timestamp::from_micros(10 * step), 1).lease(1, PERIOD))
            .filter(|check| memory.check_and_lease_now(*check).unwrap().decided_at.is_some())
            .count();
        assert!(most.is_none_or(|most| granted == most), "{policy:?}: {granted} granted");
    }
}

/// A short window with leases longer than it: a sliding log lists up to 27 leases at once
/// unless the two oldest merge. Checks a window past a merged lease's deadline see its units
/// still counted (at the later deadline), in Redis (whole log and ring) as in the core.
#[test]
fn a_sliding_logs_seventeenth_lease_merges_as_in_the_core() {
    let (server, runtime) = (RedisServer::start(), runtime());
    let redis = connect(&server, &runtime);
    let window = Duration::from_millis(10);
    // 40 leases of one unit 4 ms apart (their deadlines too), then a check each 1 ms.
    let lease = |step| LeaseStep { step, cost: 1, lease: 1, back: None };
    let peek = |step| LeaseStep { step, cost: 1, lease: 0, back: None };
    let trace: Vec<LeaseStep> = (0..40).map(|_| lease(4_000)).chain((0..40).map(|_| peek(1_000))).collect();
    for limit in [32, 100] {
        let policy: Policy = SlidingLog::new(limit, window, SlidingLogVariant::Accepted).unwrap().into();
        let limits = [Limit::new("p", policy)];
        assert_eq!(compare_leases(&runtime, &redis, &limits, 1 << 50, &trace), Ok(()), "limit {limit}");
    }
}
