//! Quota leases on one real Redis: one hot key shared by four processes (four connections,
//! each behind its own `LeasedStore`), against the same four without leases and against
//! the memory store (one process, no network: the floor), at 10 %, 50 % and 150 % of the
//! limit's rate, for every algorithm (10 000 a second each).
//!
//! Time is injected (`RedisSettings::injected_time()`): check `i` happens at
//! `BASE + i · gap` µs, sent by process `i mod 4`, so the offered rate is exact whatever
//! the machine's speed. Per peer and load: store calls per check (for the leased peer,
//! counted by its leases; otherwise every check), Redis's CPU per check (`INFO cpu`),
//! checks per second of wall time, the p50 and p99 of one check (and of the checks a
//! lease answered), and the admitted checks against what the limit allows. Peers run in
//! interleaved rounds (the order rotating), each on a fresh key, and the medians of the
//! rounds are printed.
//!
//! `cargo bench -p sluice-redis --bench redis_leases`. Environment: `SLUICE_BENCH_ROUNDS`
//! (default 5), `SLUICE_BENCH_ROUND_CHECKS` (default 20 000), `SLUICE_BENCH_LEASE_MS` (the
//! lease period, default 100), `SLUICE_BENCH_ALGORITHMS` (a comma-separated subset of
//! `fixed_window,sliding_window,sliding_log,token_bucket,leaky_bucket`, default all).

mod common;

use common::{connect, env_u64, machine_load, median, server_cpu_seconds};
use redis::aio::ConnectionManager;
use sluice_core::lease::LeasedStore;
use sluice_core::{
    Alignment, Check, FixedWindow, Key, LeakMode, LeakyBucket, Limit, MemoryStore, Policy, SlidingLog,
    SlidingLogVariant, SlidingWindow, Source, Store, Timestamp, TokenBucket, TokenBucketSettings,
};
use sluice_redis::{RedisSettings, RedisStore};
use sluice_test_support::redis::RedisServer;
use std::time::{Duration, Instant};

/// The limit: 10 000 a second (a window's limit, a bucket's rate).
const LIMIT: u64 = 10_000;

/// Each algorithm at 10 000 a second: windows of one second, a bucket of 10 000 refilled
/// 10 every millisecond, a leaky bucket of one every 100 µs with a burst of 9 999.
fn policies() -> Vec<Policy> {
    let second = Duration::from_secs(1);
    let settings =
        TokenBucketSettings { capacity: LIMIT, refill_amount: 10, refill_interval: Duration::from_millis(1) };
    vec![
        FixedWindow::new(LIMIT, second, Alignment::Aligned, Duration::ZERO).expect("valid").into(),
        SlidingWindow::new(LIMIT, second, 10).expect("valid").into(),
        SlidingLog::new(LIMIT, second, SlidingLogVariant::Accepted).expect("valid").into(),
        TokenBucket::new(settings).expect("valid").into(),
        LeakyBucket::new(Duration::from_micros(100), LIMIT - 1, LeakMode::NoDelay).expect("valid").into(),
    ]
}

/// The algorithms `SLUICE_BENCH_ALGORITHMS` names (all by default).
fn chosen() -> Vec<Policy> {
    let wanted = std::env::var("SLUICE_BENCH_ALGORITHMS").unwrap_or_default();
    let named = |policy: &Policy| wanted.is_empty() || wanted.split(',').any(|name| name == policy.algorithm_name());
    policies().into_iter().filter(named).collect()
}
const BASE: u64 = 1_763_700_000_000_000;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Peer {
    Memory,
    Redis,
    Leased,
}

impl Peer {
    const ALL: [Peer; 3] = [Peer::Memory, Peer::Redis, Peer::Leased];

    fn name(self) -> &'static str {
        match self {
            Peer::Memory => "memory store",
            Peer::Redis => "redis, no lease",
            Peer::Leased => "redis, leased",
        }
    }
}

/// One round of one peer.
#[derive(Clone, Copy, Default)]
struct Round {
    calls_per_check: f64,
    server_us: f64,
    rate: f64,
    p50_us: f64,
    p99_us: f64,
    leased_p99_us: f64,
    admitted: f64,
}

/// The four processes of a peer.
enum Processes {
    Memory(MemoryStore),
    Redis(Vec<RedisStore>),
    Leased(Vec<LeasedStore<RedisStore>>),
}

impl Processes {
    async fn open(peer: Peer, url: &str) -> Processes {
        let mut stores = Vec::new();
        if peer != Peer::Memory {
            for _ in 0..4 {
                stores.push(RedisStore::connect(url, RedisSettings::injected_time()).await.expect("Redis"));
            }
        }
        match peer {
            Peer::Memory => Processes::Memory(MemoryStore::new()),
            Peer::Redis => Processes::Redis(stores),
            Peer::Leased => Processes::Leased(stores.into_iter().map(|s| LeasedStore::new(s, period())).collect()),
        }
    }

    async fn check(&self, process: usize, key: Key<'_>, limits: &[Limit], now: Timestamp) -> (bool, Source) {
        let verdict = match self {
            Processes::Memory(store) => store.check_now(key, limits, now, 1),
            Processes::Redis(stores) => stores[process].check(Check::new(key, limits, now, 1)).await,
            Processes::Leased(stores) => stores[process].check(Check::new(key, limits, now, 1)).await,
        }
        .expect("a decision");
        (verdict.decision.allowed, verdict.source)
    }

    fn store_calls(&self, checks: u64) -> u64 {
        match self {
            Processes::Memory(_) => 0,
            Processes::Redis(_) => checks,
            Processes::Leased(stores) => stores.iter().map(|store| store.figures().store_calls).sum(),
        }
    }
}

fn main() {
    let rounds = env_u64("SLUICE_BENCH_ROUNDS", 5) as usize;
    let checks = env_u64("SLUICE_BENCH_ROUND_CHECKS", 20_000);
    let server = RedisServer::start();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
    println!(
        "redis_leases: one key, 4 processes, lease period {:?}, {rounds} rounds of {checks} checks; load average {}",
        period(),
        machine_load()
    );
    runtime.block_on(async {
        let mut admin = connect(&server.url()).await;
        for policy in chosen() {
            println!("\n{}", policy.algorithm_name());
            let limits = [Limit::new("hot", policy)];
            for load in [0.1, 0.5, 1.5] {
                measure_load(&server, &mut admin, &limits, (load, checks, rounds)).await;
            }
        }
    });
    println!("load average at the end {}", machine_load());
}

/// Every peer at `load`, in `rounds` interleaved rounds of `checks`; prints the medians.
async fn measure_load(
    server: &RedisServer,
    admin: &mut ConnectionManager,
    limits: &[Limit],
    (load, checks, rounds): (f64, u64, usize),
) {
    let mut results: Vec<Vec<Round>> = vec![Vec::new(); Peer::ALL.len()];
    for round in 0..rounds {
        for turn in 0..Peer::ALL.len() {
            let index = (round + turn) % Peer::ALL.len();
            let peer = Peer::ALL[index];
            let key = format!("hot-{}-{load}-{round}-{index}", limits[0].policy().algorithm_name());
            let measured = run(peer, &server.url(), admin, (limits, key.as_bytes()), (load, checks)).await;
            results[index].push(measured);
        }
    }
    print_load(load, &results);
}

async fn run(
    peer: Peer,
    url: &str,
    admin: &mut ConnectionManager,
    (limits, key): (&[Limit], &[u8]),
    (load, checks): (f64, u64),
) -> Round {
    let processes = Processes::open(peer, url).await;
    let key = Key::new(key).expect("a key");
    let gap = (1_000_000.0 / (load * LIMIT as f64)) as u64;
    let (mut latencies, mut leased_latencies, mut admitted) = (Vec::new(), Vec::new(), 0u64);
    let cpu_before = server_cpu_seconds(admin).await;
    let started = Instant::now();
    for i in 0..checks {
        let now = Timestamp::from_micros(BASE + i * gap);
        let asked = Instant::now();
        let (allowed, source) = processes.check((i % 4) as usize, key, limits, now).await;
        let took = asked.elapsed().as_secs_f64() * 1e6;
        latencies.push(took);
        if source == Source::Lease {
            leased_latencies.push(took);
        }
        admitted += u64::from(allowed);
    }
    let elapsed = started.elapsed().as_secs_f64();
    let server_us = (server_cpu_seconds(admin).await - cpu_before) * 1e6 / checks as f64;
    // What the limit allows: the same checks, decided by one process on the memory store.
    let alone = MemoryStore::new();
    let allowed_at_most = (0..checks)
        .filter(|i| {
            let now = Timestamp::from_micros(BASE + i * gap);
            alone.check_now(key, limits, now, 1).is_ok_and(|verdict| verdict.decision.allowed)
        })
        .count() as u64;
    Round {
        calls_per_check: processes.store_calls(checks) as f64 / checks as f64,
        server_us,
        rate: checks as f64 / elapsed,
        p50_us: percentile(&mut latencies, 0.50),
        p99_us: percentile(&mut latencies, 0.99),
        leased_p99_us: percentile(&mut leased_latencies, 0.99),
        admitted: admitted as f64 / allowed_at_most as f64,
    }
}

/// `SLUICE_BENCH_LEASE_MS` (default 100): the lease period.
fn period() -> Duration {
    Duration::from_millis(env_u64("SLUICE_BENCH_LEASE_MS", 100))
}

fn percentile(values: &mut [f64], at: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    values[((values.len() - 1) as f64 * at).round() as usize]
}

fn print_load(load: f64, results: &[Vec<Round>]) {
    println!("\n{:.0} % of the limit's rate (medians of the rounds)", load * 100.0);
    println!(
        "  peer              store calls/check  Redis µs/check  checks/s   p50 µs  p99 µs  leased p99 µs  admitted/allowed"
    );
    for (peer, rounds) in Peer::ALL.iter().zip(results) {
        let m = |field: fn(&Round) -> f64| median(&rounds.iter().map(field).collect::<Vec<_>>());
        println!(
            "  {:<17} {:>17.4} {:>15.2} {:>9.0} {:>8.1} {:>7.1} {:>14.1} {:>17.3}",
            peer.name(),
            m(|r| r.calls_per_check),
            m(|r| r.server_us),
            m(|r| r.rate),
            m(|r| r.p50_us),
            m(|r| r.p99_us),
            m(|r| r.leased_p99_us),
            m(|r| r.admitted),
        );
    }
}
