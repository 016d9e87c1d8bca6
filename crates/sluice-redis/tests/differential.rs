//! Memory vs Redis: the same random traces through both stores give the same decisions,
//! every field, to the microsecond.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

use proptest::prelude::*;
use sluice_core::algorithm::LeaseTerms;
use sluice_core::{Check, GiveBack, Key, Limit, ManualClock, MemoryStore, Receipt, Store, Timestamp};
use sluice_redis::RedisStore;
use sluice_test_support::compare::{CACHED, compare, long_log, long_trace, policy, settings, start_time, trace};
use sluice_test_support::redis::RedisServer;
use std::sync::atomic::Ordering;

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

/// One step of a lease trace: a check asking `lease` more units at `step` µs after the last,
/// then, when granted, `back` of them given back.
type LeaseStep = (i64, u64, u64, u64);

/// The lease period the traces ask for.
const PERIOD: std::time::Duration = std::time::Duration::from_millis(100);

fn lease_trace() -> impl Strategy<Value = Vec<LeaseStep>> {
    prop::collection::vec((0i64..400_000, 1u64..4, 0u64..6, 0u64..8), 1..40)
}

/// A lease, then a give-back of its units where the algorithm's terms place them, on the
/// memory store (the core's `Algorithm::give_back`) and on Redis (`lua/give_back.lua`, which
/// reads each limit's wire form): every answer the same, and a peek after each give-back too.
fn compare_give_back(
    runtime: &tokio::runtime::Runtime,
    redis: &RedisStore,
    limits: &[Limit],
    start: u64,
    trace: &[LeaseStep],
) -> Result<(), String> {
    let memory = MemoryStore::builder().clock(ManualClock::default()).build();
    let key_text = format!("{}-leased", sluice_test_support::compare::case_name());
    let key = Key::new(key_text.as_bytes()).unwrap();
    let mut now = start;
    for (index, &(step, cost, lease, back)) in trace.iter().enumerate() {
        now = now.saturating_add_signed(step);
        let check = Check::new(key, limits, Timestamp::from_micros(now), cost).lease(lease, PERIOD);
        let expected = memory.check_and_lease_now(check).unwrap();
        let got = runtime.block_on(redis.check_and_lease(check)).map_err(|error| format!("{error:?}"))?;
        if (got.verdict.decision, &got.leased, got.decided_at)
            != (expected.verdict.decision, &expected.leased, expected.decided_at)
        {
            return Err(format!("lease {index} at {now}:\n memory {expected:?}\n redis  {got:?}"));
        }
        let Some(decided_at) = expected.decided_at else { continue };
        let receipts: Vec<Receipt> = limits
            .iter()
            .zip(&expected.leased)
            .map(|(limit, decision)| Receipt {
                debited_in: limit.policy().lease_terms().debited_in(decision, decided_at, PERIOD),
                stamp: 0,
            })
            .collect();
        let give_back = GiveBack::new(key, limits, &receipts, lease, back, Timestamp::from_micros(now));
        memory.give_back_now(give_back);
        runtime.block_on(redis.give_back(give_back)).map_err(|error| format!("{error:?}"))?;
        let peek = Check::new(key, limits, Timestamp::from_micros(now), 0);
        let (expected, got) =
            (memory.check_now(key, limits, peek.now, 0).unwrap(), runtime.block_on(redis.check(peek)));
        let got = got.map_err(|error| format!("{error:?}"))?;
        if got.decision != expected.decision {
            return Err(format!("peek after giving {back} back at {now}:\n memory {expected:?}\n redis  {got:?}"));
        }
    }
    Ok(())
}

/// Give-back speaks the wire ids: on every algorithm (the leased ones take units back, the
/// others nothing), Redis's script and the core agree.
#[test]
fn give_back_follows_the_core_on_every_leased_algorithm() {
    let (server, runtime) = (RedisServer::start(), runtime());
    let redis = connect(&server, &runtime);
    let taken_back = std::cell::Cell::new(0u32);
    proptest!(ProptestConfig::with_cases(300), |(policy in policy(), start in 1u64 << 50..1u64 << 51, trace in lease_trace())| {
        // The scripts lease windows and buckets only (not yet the leases a store holds apart).
        prop_assume!(matches!(policy.lease_terms(), LeaseTerms::Debited { .. } | LeaseTerms::Refused(_)));
        let limits = [Limit::new("p", policy.clone())];
        prop_assert_eq!(compare_give_back(&runtime, &redis, &limits, start, &trace), Ok(()), "{:?}", policy);
        taken_back.set(taken_back.get() + u32::from(policy.lease_terms().refusal().is_none()));
    });
    assert!(taken_back.get() > 50, "too few leased algorithms among the cases: {}", taken_back.get());
}
