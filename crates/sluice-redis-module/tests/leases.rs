//! Quota leases on real Redis: four processes (each its own `RedisStore` connection and
//! `LeasedStore`) hammer one key, through the scripts and through the module, on a
//! standalone server and on a 3-master Cluster. Every window admits exactly the limit
//! (every process keeps seeing demand), the merged admitted stream replays through a
//! fresh memory store (itself held to the oracles) with nothing refused, and most checks
//! never reach Redis.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod harness;

use sluice_core::lease::{LeasedStore, Unspent};
use sluice_core::{
    Alignment, Check, FixedWindow, Key, Limit, MemoryStore, SlidingLogVariant, SlidingWindow, SlidingWindowSettings,
    Source, Store, Timestamp,
};
use sluice_redis::{ModuleUse, RedisSettings, RedisStore};
use sluice_test_support::redis::RedisCluster;
use std::time::Duration;

const SECOND: u64 = 1_000_000;
/// A whole second of µs, far from 2^53: the checks inject their own time.
const START: u64 = 1_763_700_000 * SECOND;

fn settings(module: ModuleUse) -> RedisSettings {
    RedisSettings { module, timeout: Duration::from_secs(2), ..RedisSettings::injected_time() }
}

fn limits() -> [[Limit; 1]; 2] {
    let window = FixedWindow::new(500, Duration::from_secs(1), Alignment::Aligned, Duration::ZERO).unwrap();
    let settings = SlidingWindowSettings {
        limit: 500,
        window: Duration::from_secs(10),
        buckets: 10,
        variant: SlidingLogVariant::Accepted,
        alignment: Alignment::Anchored,
    };
    let sliding = SlidingWindow::with_settings(settings).unwrap();
    [[Limit::new("window", window)], [Limit::new("sliding", sliding)]]
}

/// Four leased processes send a check every `gap` µs (round robin) for 3 s of injected
/// time; returns the admitted times and how many checks leases answered.
async fn hammer(processes: &[LeasedStore<RedisStore>], limits: &[Limit], key: &[u8], gap: u64) -> (Vec<u64>, u64) {
    let key = Key::new(key).unwrap();
    let (mut admitted, mut leased) = (Vec::new(), 0);
    for step in 0..3 * SECOND / gap {
        let now = START + step * gap;
        let store = &processes[(step % 4) as usize];
        let verdict = store.check(Check::new(key, limits, Timestamp::from_micros(now), 1)).await.unwrap();
        assert!(matches!(verdict.source, Source::Store | Source::Lease | Source::Cache), "{verdict:?}");
        if verdict.decision.allowed {
            admitted.push(now);
        }
        leased += u64::from(verdict.source == Source::Lease);
    }
    (admitted, leased)
}

/// The admitted stream, replayed in order on a fresh memory store: all admitted.
fn assert_exact(limits: &[Limit], admitted: &[u64]) {
    let replay = MemoryStore::new();
    let key = Key::new(b"replay").unwrap();
    for (index, &now) in admitted.iter().enumerate() {
        let verdict = replay.check_now(key, limits, Timestamp::from_micros(now), 1).unwrap();
        assert!(verdict.decision.allowed, "{}: admitted request {index} at {now} is over the limit", limits[0].name());
    }
}

async fn leases_hold_on(stores: Vec<RedisStore>) {
    let processes: Vec<_> =
        stores.into_iter().map(|store| LeasedStore::new(store, Duration::from_millis(100))).collect();
    for (index, limits) in limits().iter().enumerate() {
        // 8 times the limit's rate.
        let (admitted, leased) = hammer(&processes, limits, format!("tenant-{index}").as_bytes(), 250).await;
        assert_exact(limits, &admitted);
        if limits[0].name() == "window" {
            for second in 1..3 {
                let start = START + second * SECOND;
                let in_window = admitted.iter().filter(|t| (start..start + SECOND).contains(t)).count();
                assert_eq!(in_window, 500, "window {second} admitted {in_window}, not exactly the limit");
            }
        }
        assert!(
            leased * 2 > admitted.len() as u64,
            "{}: {leased} leased of {} admitted",
            limits[0].name(),
            admitted.len()
        );
    }
}

async fn four(url: &str, module: ModuleUse) -> Vec<RedisStore> {
    let mut stores = Vec::new();
    for _ in 0..4 {
        stores.push(RedisStore::connect(url, settings(module)).await.unwrap());
    }
    stores
}

#[tokio::test]
async fn leases_admit_exactly_the_limit_through_the_scripts() {
    let server = harness::start();
    let stores = four(&server.url(), ModuleUse::Never).await;
    assert!(!stores[0].uses_module());
    leases_hold_on(stores).await;
}

#[tokio::test]
async fn leases_admit_exactly_the_limit_through_the_module() {
    let server = harness::start();
    let stores = four(&server.url(), ModuleUse::Always).await;
    leases_hold_on(stores).await;
}

#[tokio::test]
async fn leases_admit_exactly_the_limit_on_a_cluster() {
    let cluster = RedisCluster::start_with_module(&harness::module_path());
    let mut stores = Vec::new();
    for _ in 0..4 {
        stores.push(RedisStore::connect_cluster(&cluster.urls(), settings(ModuleUse::Detect)).await.unwrap());
    }
    leases_hold_on(stores).await;
}

/// A process that leased and went quiet gives its unspent units back (through
/// `lua/give_back.lua`, on states the module or the scripts wrote), and another process
/// then admits them in the same window: the window admits exactly its limit.
async fn given_back_units_are_admitted_again(stores: Vec<RedisStore>) {
    let mut processes = stores.into_iter().map(|store| LeasedStore::new(store, Duration::from_millis(100)));
    let (quiet, other) = (processes.next().unwrap(), processes.next().unwrap());
    for (index, limits) in limits().iter().enumerate() {
        let key = format!("given-back-{index}");
        let key = Key::new(key.as_bytes()).unwrap();
        // 2 s into a window: a whole second of it is left for the other process.
        let at = |ms: u64| Timestamp::from_micros(START + 2 * SECOND + ms * 1_000);
        for ms in 0..150 {
            assert!(quiet.check(Check::new(key, limits, at(ms), 1)).await.unwrap().decision.allowed);
        }
        let held = quiet.figures().units_held;
        assert!(held > 0, "{}: a lease is held", limits[0].name());
        let returned = quiet.figures().units_returned;
        quiet.give_back(at(300), Unspent::OfQuietKeys).await;
        assert_eq!(quiet.figures().units_returned - returned, held, "{}", limits[0].name());
        let mut more = 0;
        for step in 0..1_000 {
            more +=
                u64::from(other.check(Check::new(key, limits, at(300 + step / 2), 1)).await.unwrap().decision.allowed);
        }
        assert_eq!(150 + more, 500, "{}: the units given back are admitted again", limits[0].name());
    }
}

#[tokio::test]
async fn given_back_units_are_admitted_again_through_the_module() {
    let server = harness::start();
    given_back_units_are_admitted_again(four(&server.url(), ModuleUse::Always).await).await;
}

#[tokio::test]
async fn given_back_units_are_admitted_again_through_the_scripts() {
    let server = harness::start();
    given_back_units_are_admitted_again(four(&server.url(), ModuleUse::Never).await).await;
}
