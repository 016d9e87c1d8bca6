//! Redis Cluster: a real 3-master cluster on loopback ports. Every limit of one key shares
//! a hash slot, so single and multi-limit checks (and leases, and give-backs) run as one
//! script, with no CROSSSLOT, and decide exactly as the memory store does.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

use proptest::prelude::*;
use sluice_core::Limit;
use sluice_redis::RedisStore;
use sluice_test_support::compare::{compare, policy, settings, start_time, trace};
use sluice_test_support::leases::{compare_leases, lease_start, lease_trace};
use sluice_test_support::redis::{RedisCluster, query};

#[test]
fn a_cluster_decides_like_the_memory_store_with_keys_on_every_node() {
    let cluster = RedisCluster::start();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let urls = cluster.urls();
    let redis = runtime.block_on(RedisStore::connect_cluster(&urls, settings())).unwrap();
    let policies = prop::collection::vec(policy(), 1..4);
    proptest!(ProptestConfig::with_cases(120), |(policies in policies, start in start_time(), trace in trace())| {
        let limits: Vec<Limit> =
            policies.iter().enumerate().map(|(i, p)| Limit::new(format!("p{i}"), p.clone())).collect();
        prop_assert_eq!(compare(&runtime, &redis, &limits, start, &trace), Ok(()), "{:?}", policies);
    });
    // The cases' keys landed on every master, not just one.
    for port in cluster.ports() {
        let keys = query(port, &["DBSIZE"]).unwrap();
        let count: u64 = keys[0].trim_start_matches(':').trim().parse().unwrap_or(0);
        assert!(count > 0, "node {port} holds no key: {keys:?}");
    }
}

/// Leases of one to three limits of every algorithm, and give-backs in any order, on the
/// Cluster's scripts: as the memory store decides them.
#[test]
fn a_cluster_leases_like_the_memory_store() {
    let cluster = RedisCluster::start();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let redis = runtime.block_on(RedisStore::connect_cluster(&cluster.urls(), settings())).unwrap();
    let policies = prop::collection::vec(policy(), 1..4);
    proptest!(ProptestConfig::with_cases(80), |(policies in policies, start in lease_start(), trace in lease_trace())| {
        let limits: Vec<Limit> =
            policies.iter().enumerate().map(|(i, p)| Limit::new(format!("p{i}"), p.clone())).collect();
        prop_assert_eq!(compare_leases(&runtime, &redis, &limits, start, &trace), Ok(()), "{:?}", policies);
    });
}
