//! One check at a time on one Redis connection, from a single-threaded tokio runtime (as a
//! `sluice serve` worker runs its store): what a sequential caller waits for a store call
//! alone, against a `PING` on the same kind of connection (redis-rs's, sync and async):
//!
//! - `PING, sync` and `PING, async`: one loopback round trip, Redis doing nearly nothing;
//! - `RedisStore::check`: one `EVALSHA` (the leaky bucket `CL.THROTTLE` uses, 1 000 000 a
//!   second with a burst of 1 000 000, so every call is allowed and stores a state), over
//!   1 000 keys in turn, Redis's `TIME`;
//! - `LeasedStore, 100 ms`: the same behind leases, as `sluice serve` runs it by default:
//!   keys revisited less often than once a period find their lease expired and ask Redis.
//!
//! The difference between the check and a `PING` is the script's time in Redis plus the
//! store's own work; `sluice serve` adds its front (`resp_throttle` in sluice-server).
//! Peers run in interleaved rounds; medians of the rounds.
//!
//! `cargo bench -p sluice-redis --bench redis_sequential`. Environment: `SLUICE_BENCH_ROUNDS`
//! (default 5), `SLUICE_BENCH_ROUND_CHECKS` (default 5 000), `SLUICE_BENCH_STORE_MODULE` (the
//! path of Sluice's module, `libsluice_redis_module.so`: the redis-server loads it, and the
//! store checks with `SLUICE.CHECK` instead of the scripts).
//!
//! Measured and not kept: sparing the runtime's wake-up per check. The store's timeout
//! (`tokio::time::timeout`) registers a timer due before any other, so tokio writes to the
//! runtime's eventfd on every call (`strace`: one `write` and 0.45 extra `epoll_wait` per
//! call in a `sluice serve` worker). A task sleeping 10 ms at a time keeps an earlier timer
//! registered and removes them, but the check's p50 stayed 51.8 to 60.1 µs against 51.6 to
//! 68.5 µs without it (three alternated runs of this bench's peers, at `fe28899`).

mod common;

use common::{env_u64, machine_load, median};
use sluice_core::lease::LeasedStore;
use sluice_core::{Check, Clock, Key, LeakMode, LeakyBucket, Limit, Store, SystemClock};
use sluice_redis::{RedisSettings, RedisStore};
use sluice_test_support::redis::RedisServer;
use std::time::{Duration, Instant};

const NAMES: [&str; 4] = ["PING, sync", "PING, async", "RedisStore::check", "LeasedStore, 100 ms"];

/// One round of one peer: calls per second, p50 and p99 in µs.
type Round = [f64; 3];

/// The connections and stores the peers call on.
struct Peers {
    sync: redis::Connection,
    manager: redis::aio::ConnectionManager,
    store: RedisStore,
    leased: LeasedStore<RedisStore>,
    limits: [Limit; 1],
    clock: SystemClock,
}

impl Peers {
    async fn connect(url: &str) -> Peers {
        let client = redis::Client::open(url).expect("a Redis URL");
        let store = RedisStore::connect(url, RedisSettings::default()).await.expect("Redis answers");
        let own = store.connect_again().await.expect("Redis answers");
        let bucket = LeakyBucket::new(Duration::from_micros(1), 1_000_000, LeakMode::NoDelay).expect("valid");
        Peers {
            sync: client.get_connection().expect("Redis answers"),
            manager: redis::aio::ConnectionManager::new(client).await.expect("Redis answers"),
            store,
            leased: LeasedStore::new(own, Duration::from_millis(100)),
            limits: [Limit::new("cl.throttle:", bucket)],
            clock: SystemClock::new(),
        }
    }

    /// Call `index` of `peer`, timed.
    async fn call(&mut self, peer: usize, index: u64) -> Duration {
        let key = format!("bench-{}", index % 1000);
        let key = Key::new(key.as_bytes()).expect("a valid key");
        let check = Check::new(key, &self.limits, self.clock.now(), 1);
        let started = Instant::now();
        let allowed = match peer {
            0 => redis::cmd("PING").query::<()>(&mut self.sync).is_ok(),
            1 => redis::cmd("PING").query_async::<()>(&mut self.manager).await.is_ok(),
            2 => self.store.check(check).await.is_ok_and(|verdict| verdict.decision.allowed),
            _ => self.leased.check(check).await.is_ok_and(|verdict| verdict.decision.allowed),
        };
        let elapsed = started.elapsed();
        assert!(allowed, "{} failed or was limited", NAMES[peer]);
        elapsed
    }

    async fn round(&mut self, peer: usize, checks: u64) -> Round {
        let started = Instant::now();
        let mut latencies = Vec::with_capacity(checks as usize);
        for index in 0..checks {
            latencies.push(self.call(peer, index).await);
        }
        let per_second = checks as f64 / started.elapsed().as_secs_f64();
        latencies.sort_unstable();
        let micros = |at: f64| latencies[((latencies.len() - 1) as f64 * at) as usize].as_secs_f64() * 1e6;
        [per_second, micros(0.5), micros(0.99)]
    }
}

fn main() {
    let rounds = env_u64("SLUICE_BENCH_ROUNDS", 5) as usize;
    let checks = env_u64("SLUICE_BENCH_ROUND_CHECKS", 5_000);
    let module = std::env::var_os("SLUICE_BENCH_STORE_MODULE").map(std::path::PathBuf::from);
    let server = module.as_deref().map_or_else(RedisServer::start, RedisServer::start_with_module);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
    println!("redis_sequential: {rounds} rounds of {checks} calls per peer; load average {}", machine_load());
    let results = runtime.block_on(async {
        let mut peers = Peers::connect(&server.url()).await;
        for peer in 0..NAMES.len() {
            peers.round(peer, 1_000).await;
        }
        let mut results: [Vec<Round>; 4] = Default::default();
        for round in 0..rounds {
            for offset in 0..NAMES.len() {
                let peer = (round + offset) % NAMES.len();
                results[peer].push(peers.round(peer, checks).await);
            }
        }
        results
    });
    println!("peer                  calls/s   p50 µs   p99 µs   (medians)");
    for (name, rounds) in NAMES.iter().zip(&results) {
        let of = |field: usize| median(&rounds.iter().map(|round| round[field]).collect::<Vec<_>>());
        println!("{name:<20} {:>8.0} {:>8.1} {:>8.1}", of(0), of(1), of(2));
    }
    println!("load average at the end {}", machine_load());
}
