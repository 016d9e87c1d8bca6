//! `RedisStore` with the module: it finds `SLUICE.CHECK` on a Redis that has it loaded and
//! sends every check there (no `EVALSHA`), keeps to the scripts where it is absent or when
//! told to, and a store on the module decides as the memory store, field for field, on
//! standalone Redis and on a 3-master Cluster.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod harness;

use sluice_core::{Check, Key, Limit, Store, Timestamp, Verdict};
use sluice_redis::{ModuleUse, RedisSettings, RedisStore};
use sluice_test_support::compare::{compare, policy, start_time, trace};
use sluice_test_support::leases::{compare_leases, lease_start, lease_trace};
use sluice_test_support::redis::{RedisCluster, RedisServer, query};
use std::time::Duration;

fn settings(module: ModuleUse) -> RedisSettings {
    RedisSettings { module, timeout: Duration::from_secs(2), blocked_cache: false, ..RedisSettings::injected_time() }
}

/// The calls of `command` Redis counted since the server started (`INFO commandstats`).
fn calls(server: &RedisServer, command: &str) -> u64 {
    calls_on(server.port(), command)
}

/// The calls of `command` the server on `port` counted since it started.
fn calls_on(port: u16, command: &str) -> u64 {
    let stats = query(port, &["INFO commandstats"]).unwrap().concat();
    let prefix = format!("cmdstat_{command}:calls=");
    stats
        .lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |calls| calls.parse().unwrap())
}

/// Checks a new store makes: more than the probes it may still run (one at start besides
/// connect's own), so that counting `EVALSHA` tells whether the checks ran scripts without
/// waiting for the probes to end.
const CHECKS: u64 = 20;

/// Probes a store starts with, at most (its background probe and connect's).
const START_PROBES: u64 = 2;

/// Sends [`CHECKS`] checks of one key through `store`; returns the `EVALSHA` calls Redis
/// counted meanwhile.
async fn evalsha_during_checks(server: &RedisServer, store: &RedisStore, limit: &[Limit]) -> u64 {
    let before = calls(server, "evalsha");
    for at in 0..CHECKS {
        check(store, limit, b"k", 1_763_700_000_000_000 + at, 1).await;
    }
    calls(server, "evalsha") - before
}

fn one_sliding_log() -> [Limit; 1] {
    let log =
        sluice_core::SlidingLog::new(3, Duration::from_secs(1), sluice_core::SlidingLogVariant::Accepted).unwrap();
    [Limit::new("m", log)]
}

async fn check(store: &RedisStore, limits: &[Limit], key: &[u8], at: u64, cost: u64) -> Verdict {
    store.check(Check::new(Key::new(key).unwrap(), limits, Timestamp::from_micros(at), cost)).await.unwrap()
}

#[tokio::test]
async fn a_store_finds_the_module_and_sends_its_checks_there() {
    let server = harness::start();
    let store = RedisStore::connect(&server.url(), settings(ModuleUse::Detect)).await.unwrap();
    assert!(store.uses_module(), "connect's probe found SLUICE.CHECK");
    let limit = one_sliding_log();
    let scripts_run = evalsha_during_checks(&server, &store, &limit).await;
    assert!(scripts_run <= START_PROBES, "{scripts_run} EVALSHA for {CHECKS} checks: the checks ran scripts");
    assert_eq!(calls(&server, "sluice.check"), CHECKS);
    let scripts = RedisStore::connect(&server.url(), settings(ModuleUse::Never)).await.unwrap();
    assert!(!scripts.uses_module());
    let scripts_run = evalsha_during_checks(&server, &scripts, &limit).await;
    assert!(scripts_run >= CHECKS, "told to keep to the scripts: {scripts_run} EVALSHA");
    assert_eq!(calls(&server, "sluice.check"), CHECKS, "and nothing more went to the module");
}

#[tokio::test]
async fn a_store_whose_module_is_unloaded_runs_the_scripts_again_at_once() {
    let server = harness::start();
    let store = RedisStore::connect(&server.url(), settings(ModuleUse::Detect)).await.unwrap();
    assert!(store.uses_module());
    let limit = one_sliding_log();
    let at = 1_763_700_000_000_000;
    assert_eq!(check(&store, &limit, b"k", at, 1).await.decision.remaining, 2, "decided by the module");
    assert_eq!(query(server.port(), &["MODULE UNLOAD sluice"]).unwrap(), ["+OK"]);
    // Redis answers the next check with an error that names its arguments, the packed
    // bytes included, which breaks the reply: the check is answered by the failure mode,
    // and the outage's probe finds the module gone.
    let verdict = check(&store, &limit, b"k", at + 1, 1).await;
    assert_eq!(verdict.source, sluice_core::Source::FailedOpen);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while store.uses_module() || !store.health().is_available() {
        assert!(std::time::Instant::now() < deadline, "the probe did not find the module gone");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The scripts go on from the state the module wrote.
    let verdict = check(&store, &limit, b"k", at + 2, 1).await;
    assert_eq!((verdict.source, verdict.decision.remaining), (sluice_core::Source::Store, 1));
    let scripts_run = evalsha_during_checks(&server, &store, &limit).await;
    assert!(scripts_run >= CHECKS, "{scripts_run} EVALSHA for {CHECKS} checks");
}

#[tokio::test]
async fn without_the_module_the_store_keeps_to_the_scripts() {
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url(), settings(ModuleUse::Detect)).await.unwrap();
    assert!(!store.uses_module());
    let limit = one_sliding_log();
    let verdict = check(&store, &limit, b"first", 1_763_700_000_000_000, 1).await;
    assert_eq!((verdict.source, verdict.decision.remaining), (sluice_core::Source::Store, 2));
    let scripts_run = evalsha_during_checks(&server, &store, &limit).await;
    assert!(scripts_run >= CHECKS, "{scripts_run} EVALSHA for {CHECKS} checks");
}

/// The store differential test of `sluice-redis` (random policies and traces, against the
/// memory store, every field), run through a store on the module.
#[test]
fn a_store_on_the_module_decides_as_the_memory_store() {
    use proptest::strategy::{Strategy, ValueTree};
    use proptest::test_runner::TestRunner;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let server = harness::start();
    let store = runtime.block_on(RedisStore::connect(&server.url(), settings(ModuleUse::Detect))).unwrap();
    assert!(store.uses_module());
    let mut runner = TestRunner::deterministic();
    let cases = (policy(), start_time(), trace());
    for case in 0..200 {
        let (policy, start, trace) = cases.new_tree(&mut runner).unwrap().current();
        let limits = [Limit::new(format!("case{case}"), policy)];
        compare(&runtime, &store, &limits, start, &trace).unwrap_or_else(|mismatch| panic!("case {case}: {mismatch}"));
    }
    assert!(calls(&server, "sluice.check") > 1_000, "the checks went to the module");
}

/// The same differential test on a 3-master Cluster, one to three limits per check (every
/// limit of a key shares its hash slot): through the module, on every node.
#[test]
fn a_cluster_store_on_the_module_decides_as_the_memory_store() {
    use proptest::prelude::*;
    let cluster = RedisCluster::start_with_module(&harness::module_path());
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let store = runtime.block_on(RedisStore::connect_cluster(&cluster.urls(), settings(ModuleUse::Detect))).unwrap();
    assert!(store.uses_module(), "connect's probe found SLUICE.CHECK");
    let total = |command: &str| cluster.ports().into_iter().map(|port| calls_on(port, command)).sum::<u64>();
    let scripts_before = total("evalsha") + total("eval");
    let policies = prop::collection::vec(policy(), 1..4);
    proptest!(ProptestConfig::with_cases(120), |(policies in policies, start in start_time(), trace in trace())| {
        let limits: Vec<Limit> =
            policies.iter().enumerate().map(|(i, p)| Limit::new(format!("p{i}"), p.clone())).collect();
        prop_assert_eq!(compare(&runtime, &store, &limits, start, &trace), Ok(()), "{:?}", policies);
    });
    let scripts_run = total("evalsha") + total("eval") - scripts_before;
    assert!(
        scripts_run <= START_PROBES,
        "{scripts_run} scripts ran during the checks: they did not all go to the module"
    );
    for port in cluster.ports() {
        assert!(
            calls_on(port, "sluice.check") > 0,
            "node {port} ran no SLUICE.CHECK: the keys did not reach every master"
        );
    }
    assert!(total("sluice.check") > 1_000, "the checks went to the module");
}

/// The store's lease differential test (leases of one to three limits, and give-backs in
/// any order, against the memory store) through a store on the module: checks go to
/// `SLUICE.CHECK`, give-backs to `SLUICE.GIVEBACK`, and no script runs.
#[test]
fn a_store_on_the_module_leases_as_the_memory_store() {
    use proptest::prelude::*;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let server = harness::start();
    let store = runtime.block_on(RedisStore::connect(&server.url(), settings(ModuleUse::Detect))).unwrap();
    assert!(store.uses_module());
    let scripts_before = calls(&server, "evalsha") + calls(&server, "eval");
    let policies = prop::collection::vec(policy(), 1..4);
    proptest!(ProptestConfig::with_cases(200), |(policies in policies, start in lease_start(), trace in lease_trace())| {
        let limits: Vec<Limit> =
            policies.iter().enumerate().map(|(i, p)| Limit::new(format!("p{i}"), p.clone())).collect();
        prop_assert_eq!(compare_leases(&runtime, &store, &limits, start, &trace), Ok(()), "{:?}", policies);
    });
    let scripts_run = calls(&server, "evalsha") + calls(&server, "eval") - scripts_before;
    assert!(scripts_run <= START_PROBES, "{scripts_run} scripts ran: not everything went to the module");
    assert!(calls(&server, "sluice.giveback") > 100, "the give-backs went to the module");
}

/// The same on a 3-master Cluster.
#[test]
fn a_cluster_store_on_the_module_leases_as_the_memory_store() {
    use proptest::prelude::*;
    let cluster = RedisCluster::start_with_module(&harness::module_path());
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let store = runtime.block_on(RedisStore::connect_cluster(&cluster.urls(), settings(ModuleUse::Detect))).unwrap();
    assert!(store.uses_module(), "connect's probe found SLUICE.CHECK");
    let policies = prop::collection::vec(policy(), 1..4);
    proptest!(ProptestConfig::with_cases(80), |(policies in policies, start in lease_start(), trace in lease_trace())| {
        let limits: Vec<Limit> =
            policies.iter().enumerate().map(|(i, p)| Limit::new(format!("p{i}"), p.clone())).collect();
        prop_assert_eq!(compare_leases(&runtime, &store, &limits, start, &trace), Ok(()), "{:?}", policies);
    });
    let total = |command: &str| cluster.ports().into_iter().map(|port| calls_on(port, command)).sum::<u64>();
    assert!(total("sluice.giveback") > 50, "the give-backs went to the module");
}
