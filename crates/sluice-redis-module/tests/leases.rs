//! Quota leases on real Redis: four processes (each its own `RedisStore` connection and
//! `LeasedStore`) hammer one key, through the scripts and through the module, on a
//! standalone server and on a 3-master Cluster. Every window admits exactly the limit
//! (every process keeps seeing demand), and the algorithms whose store holds leases apart
//! exactly what one store without leases admits; the merged admitted stream replays
//! through a fresh memory store (itself held to the oracles) with nothing refused, and
//! leases answer many checks without Redis. Units given back are admitted again, and a
//! state Redis lost takes none back.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod harness;

use sluice_core::lease::{LeasedStore, Unspent};
use sluice_core::{
    Alignment, Check, FixedWindow, Key, LeakMode, LeakyBucket, Limit, MemoryStore, SlidingLog, SlidingLogVariant,
    SlidingWindow, SlidingWindowSettings, Source, Store, Timestamp, TokenBucket, TokenBucketSettings,
};
use sluice_redis::{ModuleUse, RedisSettings, RedisStore};
use sluice_test_support::redis::{RedisCluster, RedisServer, query};
use std::time::Duration;

const SECOND: u64 = 1_000_000;
/// A second, as a duration.
const SECONDS: Duration = Duration::from_secs(1);
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

/// The algorithms whose store holds leases apart: a token bucket of 2 000 refilled once an
/// hour, a leaky bucket of one a millisecond with a burst of 1 000, a sliding log of 500 a
/// second.
fn held() -> [[Limit; 1]; 3] {
    let settings =
        TokenBucketSettings { capacity: 2_000, refill_amount: 1, refill_interval: Duration::from_secs(3600) };
    let bucket = TokenBucket::new(settings).unwrap();
    let gcra = LeakyBucket::new(Duration::from_millis(1), 999, LeakMode::NoDelay).unwrap();
    let log = SlidingLog::new(500, Duration::from_secs(1), SlidingLogVariant::Accepted).unwrap();
    [[Limit::new("bucket", bucket)], [Limit::new("gcra", gcra)], [Limit::new("log", log)]]
}

/// Four processes hammer one key of each held algorithm at 4 000 checks a second, for 3 s:
/// the merged admitted stream replays through the definition with nothing refused, and
/// each admits exactly what one store without leases admits of the same checks: the
/// bucket of 2 000 (never refilled within the run) its 2 000, the leaky bucket its burst
/// and one a millisecond, the log 500 in each second.
async fn held_leases_hold_on(stores: Vec<RedisStore>) {
    let processes: Vec<_> =
        stores.into_iter().map(|store| LeasedStore::new(store, Duration::from_millis(100))).collect();
    for (index, limits) in held().iter().enumerate() {
        let (admitted, leased) = hammer(&processes, limits, format!("held-{index}").as_bytes(), 250).await;
        assert_exact(limits, &admitted);
        let alone = MemoryStore::new();
        let key = Key::new(b"alone").unwrap();
        let allowed = (0..3 * SECOND / 250)
            .map(|step| alone.check_now(key, limits, Timestamp::from_micros(START + step * 250), 1).unwrap())
            .filter(|verdict| verdict.decision.allowed)
            .count();
        assert_eq!(admitted.len(), allowed, "{}: {leased} leased", limits[0].name());
        assert!(leased * 10 > admitted.len() as u64, "{}: {leased} leased of {}", limits[0].name(), admitted.len());
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
    held_leases_hold_on(four(&server.url(), ModuleUse::Never).await).await;
}

#[tokio::test]
async fn leases_admit_exactly_the_limit_through_the_module() {
    let server = harness::start();
    let stores = four(&server.url(), ModuleUse::Always).await;
    leases_hold_on(stores).await;
    held_leases_hold_on(four(&server.url(), ModuleUse::Always).await).await;
}

#[tokio::test]
async fn leases_admit_exactly_the_limit_on_a_cluster() {
    let cluster = RedisCluster::start_with_module(&harness::module_path());
    let connect = async || {
        let mut stores = Vec::new();
        for _ in 0..4 {
            stores.push(RedisStore::connect_cluster(&cluster.urls(), settings(ModuleUse::Detect)).await.unwrap());
        }
        stores
    };
    leases_hold_on(connect().await).await;
    held_leases_hold_on(connect().await).await;
}

/// The limits of the give-back tests, each with when its quiet process gives back and
/// which of its units: windows at 300 ms, once the key went quiet for a period; the
/// algorithms that hold leases at 150 ms, all of them (as at a stop: a held lease ends one
/// period after its grant, so a key quiet for a period holds none), their quotas
/// never refilled within the test.
fn given_back_cases() -> Vec<([Limit; 1], u64, Unspent)> {
    let hour = Duration::from_secs(3600);
    let settings = TokenBucketSettings { capacity: 500, refill_amount: 1, refill_interval: hour };
    let held: [[Limit; 1]; 3] = [
        [Limit::new("bucket", TokenBucket::new(settings).unwrap())],
        [Limit::new("gcra", LeakyBucket::new(hour, 499, LeakMode::NoDelay).unwrap())],
        [Limit::new("log", SlidingLog::new(500, 10 * SECONDS, SlidingLogVariant::Accepted).unwrap())],
    ];
    let windows = limits().into_iter().map(|limits| (limits, 300, Unspent::OfQuietKeys));
    windows.chain(held.into_iter().map(|limits| (limits, 150, Unspent::All))).collect()
}

/// A process that leased and went quiet gives its unspent units back (through the module's
/// `SLUICE.GIVEBACK` or `lua/give_back.lua`, on states the module or the scripts wrote), and
/// another process then admits them in the same window: the window (or bucket, or log)
/// admits exactly its limit.
async fn given_back_units_are_admitted_again(stores: Vec<RedisStore>) {
    let mut processes = stores.into_iter().map(|store| LeasedStore::new(store, Duration::from_millis(100)));
    let (quiet, other) = (processes.next().unwrap(), processes.next().unwrap());
    for (index, (limits, given_at, which)) in given_back_cases().iter().enumerate() {
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
        quiet.give_back(at(*given_at), *which).await;
        assert_eq!(quiet.figures().units_returned - returned, held, "{}", limits[0].name());
        let mut more = 0;
        for step in 0..1_000 {
            let check = Check::new(key, limits, at(300 + step / 2), 1);
            more += u64::from(other.check(check).await.unwrap().decision.allowed);
        }
        assert_eq!(150 + more, 500, "{}: the units given back are admitted again", limits[0].name());
    }
}

/// Redis loses a window's state mid-window (here `FLUSHALL`; a restart without persistence,
/// an eviction or a failover that lost it alike) while a process holds leased units; another
/// process starts the window again; then the units come back. The new state never counted
/// them (its stamp is not the lease's), so it takes nothing back: the window admits exactly
/// its limit after the loss, not the limit plus the units returned.
async fn a_lost_state_takes_no_units_back(server: &RedisServer, stores: Vec<RedisStore>) {
    let mut processes = stores.into_iter().map(|store| LeasedStore::new(store, Duration::from_millis(100)));
    let (quiet, other) = (processes.next().unwrap(), processes.next().unwrap());
    let window = FixedWindow::new(500, SECONDS, Alignment::Aligned, Duration::ZERO).unwrap();
    let settings = SlidingWindowSettings {
        limit: 500,
        window: 10 * SECONDS,
        buckets: 10,
        variant: SlidingLogVariant::Accepted,
        alignment: Alignment::Aligned,
    };
    let sliding = SlidingWindow::with_settings(settings).unwrap();
    for (index, limits) in [[Limit::new("window", window)], [Limit::new("sliding", sliding)]].iter().enumerate() {
        let key = format!("lost-{index}");
        let key = Key::new(key.as_bytes()).unwrap();
        let at = |ms: u64| Timestamp::from_micros(START + 2 * SECOND + ms * 1_000);
        for ms in 0..150 {
            assert!(quiet.check(Check::new(key, limits, at(ms), 1)).await.unwrap().decision.allowed);
        }
        assert!(quiet.figures().units_held > 0, "{}: a lease is held", limits[0].name());
        assert_eq!(query(server.port(), &["FLUSHALL"]).unwrap(), ["+OK"]);
        let mut admitted = 0;
        for step in 0..1_000 {
            if step == 20 {
                quiet.give_back(at(300), Unspent::OfQuietKeys).await;
            }
            let check = Check::new(key, limits, at(290 + step / 2), 1);
            admitted += u64::from(other.check(check).await.unwrap().decision.allowed);
        }
        assert_eq!(admitted, 500, "{}: the new state admits exactly its limit", limits[0].name());
    }
}

#[tokio::test]
async fn a_lost_state_takes_no_units_back_through_the_module() {
    let server = harness::start();
    a_lost_state_takes_no_units_back(&server, four(&server.url(), ModuleUse::Always).await).await;
}

#[tokio::test]
async fn a_lost_state_takes_no_units_back_through_the_scripts() {
    let server = harness::start();
    a_lost_state_takes_no_units_back(&server, four(&server.url(), ModuleUse::Never).await).await;
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
