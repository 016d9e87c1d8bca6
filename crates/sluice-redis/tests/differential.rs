//! Memory vs Redis: the same random traces through both stores give the same decisions,
//! every field, to the microsecond.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

use proptest::prelude::*;
use sluice_core::Limit;
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
