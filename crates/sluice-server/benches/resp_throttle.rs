//! `CL.THROTTLE` calls per second through `sluice serve --resp`, against redis-cell on
//! redis-server, as one client sees them over loopback, three peers started side by side in
//! the same run:
//!
//! - `sluice`: the embedded store;
//! - `sluice+redis`: a Redis store (a redis-server of its own), with quota leases of
//!   `SLUICE_BENCH_LEASE_PERIOD` (default `100ms`; `0` for none); that redis-server loads
//!   Sluice's own module when `SLUICE_BENCH_STORE_MODULE` names its `.so` (the store then
//!   checks with `SLUICE.CHECK` instead of the scripts);
//! - `redis-cell`: the module (scripts/redis-cell.sh, or `SLUICE_REDIS_CELL`) in a
//!   redis-server of its own.
//!
//! Each round runs every workload and, in each, sends to each peer in turn (the order
//! rotating every round, so that a burst of load from another process hits all of them
//! alike) sequential calls (one round trip each: calls per second, p50 and p99) and
//! pipelined batches of 100 calls (calls per second). A workload is a number of keys the
//! calls rotate over, at a rate none reaches (`max_burst` 1 000 000, 1 000 000 per second),
//! so no call is limited:
//!
//! - `cold`, 1 000 keys: a key comes back only every 1 000 calls, mostly later than a lease
//!   of 100 ms lasts at these rates, so nearly every call of `sluice+redis` goes to Redis;
//! - `hot`, 10 keys: a key comes back every 10 calls, so leases answer most of them.
//!
//! The same harness as `envoy_latency` (not criterion): peers that are servers are
//! compared round by round, in ratios.
//!
//! For the two peers with a redis-server, Redis's own accounting (`INFO commandstats`, reset
//! before each phase) gives what bounds them: the commands Redis ran per call (`EVALSHA`
//! for Sluice's store, whose leases may answer some calls without it; `CL.THROTTLE` for
//! redis-cell; `SLUICE.CHECK` with the module) and Redis's time per call, in µs, for the sequential and pipelined phases.
//!
//! `cargo bench -p sluice-server --bench resp_throttle`. Environment: `SLUICE_BENCH_ROUNDS`
//! (default 5), `SLUICE_BENCH_ROUND_CALLS` (default 4 000 sequential and as many pipelined,
//! per workload), `SLUICE_BENCH_KEYS` (the workloads' key counts, default `1000,10`),
//! `SLUICE_BENCH_LEASE_PERIOD`, `SLUICE_BENCH_STORE_MODULE`.
#![allow(clippy::unwrap_used)] // a bench that cannot set up should stop loudly

#[path = "../tests/support/server.rs"]
mod server;

use redis::Connection;
use server::Server;
use sluice_test_support::redis::RedisServer;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const CONFIG: &str = "policies:\n  unused: {algorithm: fixed_window, limit: 1, window: 1s}\n";
const NAMES: [&str; 3] = ["sluice", "sluice+redis", "redis-cell"];
const BATCH: usize = 100;

/// One round of one peer.
#[derive(Clone, Copy, Default)]
struct Round {
    sequential_per_second: f64,
    p50_us: f64,
    p99_us: f64,
    pipelined_per_second: f64,
    /// What Redis ran for the sequential calls, when the peer has a redis-server.
    sequential_redis: Served,
    /// What Redis ran for the pipelined calls.
    pipelined_redis: Served,
}

/// Redis's own accounting of one phase, per call the client made.
#[derive(Clone, Copy, Default)]
struct Served {
    commands: f64,
    usec: f64,
}

/// A peer's redis-server and the command it runs per call, read in `INFO commandstats`.
struct Accounting {
    admin: Connection,
    command: &'static str,
}

impl Accounting {
    fn new(url: &str, command: &'static str) -> Accounting {
        Accounting { admin: connect(url), command }
    }

    fn reset(&mut self) {
        let () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut self.admin).unwrap();
    }

    /// Redis's commands and time for `calls` client calls since the last reset.
    fn served(&mut self, calls: usize) -> Served {
        let stats: String = redis::cmd("INFO").arg("commandstats").query(&mut self.admin).unwrap();
        let prefix = format!("cmdstat_{}:", self.command);
        let line = stats.lines().find_map(|line| line.strip_prefix(prefix.as_str())).unwrap_or("");
        let field = |name: &str| -> f64 {
            let value = line.split(',').find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='));
            value.and_then(|value| value.parse().ok()).unwrap_or(0.0)
        };
        Served { commands: field("calls") / calls as f64, usec: field("usec") / calls as f64 }
    }
}

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|value| value.parse().ok()).unwrap_or(default)
}

fn redis_cell() -> PathBuf {
    let default = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/redis-cell/build/release/libredis_cell.so");
    let path = std::env::var_os("SLUICE_REDIS_CELL").map_or_else(|| PathBuf::from(default), PathBuf::from);
    assert!(path.exists(), "{} is missing: scripts/redis-cell.sh builds it", path.display());
    path
}

fn connect(url: &str) -> Connection {
    redis::Client::open(url).unwrap().get_connection().unwrap()
}

/// The key counts of the workloads (`SLUICE_BENCH_KEYS`, default `1000,10`).
fn workloads() -> Vec<usize> {
    let keys = std::env::var("SLUICE_BENCH_KEYS").unwrap_or_else(|_| "1000,10".into());
    keys.split(',').map(|count| count.trim().parse().unwrap()).collect()
}

/// The `index`th call of a workload over `keys` keys; keys are named by their workload, so
/// that a cold key is never warmed by the hot workload.
fn call(index: usize, keys: usize) -> redis::Cmd {
    let mut command = redis::cmd("CL.THROTTLE");
    command.arg(format!("bench-{keys}-{}", index % keys)).arg(1_000_000).arg(1_000_000).arg(1);
    command
}

/// One round on `connection` over `keys` keys: `calls` sequential calls, then as many in
/// batches of [`BATCH`]; each phase accounted by `redis` when the peer has one.
fn round(connection: &mut Connection, keys: usize, calls: usize, mut redis: Option<&mut Accounting>) -> Round {
    if let Some(redis) = redis.as_mut() {
        redis.reset();
    }
    let mut latencies = Vec::with_capacity(calls);
    let started = Instant::now();
    for key in 0..calls {
        let sent = Instant::now();
        let reply: Vec<i64> = call(key, keys).query(connection).unwrap();
        latencies.push(sent.elapsed());
        assert_eq!(reply[0], 0, "a call was limited: {reply:?}");
    }
    let sequential = started.elapsed();
    let sequential_redis = redis.as_mut().map(|redis| redis.served(calls)).unwrap_or_default();
    if let Some(redis) = redis.as_mut() {
        redis.reset();
    }
    latencies.sort_unstable();
    let started = Instant::now();
    for batch in 0..calls / BATCH {
        let mut pipe = redis::pipe();
        for key in 0..BATCH {
            pipe.add_command(call(batch * BATCH + key, keys));
        }
        let replies: Vec<Vec<i64>> = pipe.query(connection).unwrap();
        assert!(replies.iter().all(|reply| reply[0] == 0), "a pipelined call was limited");
    }
    let pipelined = started.elapsed();
    let pipelined_redis = redis.map(|redis| redis.served(calls / BATCH * BATCH)).unwrap_or_default();
    let micros = |at: f64| latencies[((latencies.len() - 1) as f64 * at) as usize].as_secs_f64() * 1e6;
    Round {
        sequential_per_second: calls as f64 / sequential.as_secs_f64(),
        p50_us: micros(0.5),
        p99_us: micros(0.99),
        pipelined_per_second: (calls / BATCH * BATCH) as f64 / pipelined.as_secs_f64(),
        sequential_redis,
        pipelined_redis,
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing of the kind and
    // only checks that this builds.
    if !std::env::args().any(|arg| arg == "--bench") {
        return;
    }
    let (rounds, calls) = (env_number("SLUICE_BENCH_ROUNDS", 5), env_number("SLUICE_BENCH_ROUND_CALLS", 4_000));
    let cell = RedisServer::start_with_module(&redis_cell());
    let module = std::env::var_os("SLUICE_BENCH_STORE_MODULE").map(PathBuf::from);
    let store = module.as_deref().map_or_else(RedisServer::start, RedisServer::start_with_module);
    let store_command = if module.is_some() { "sluice.check" } else { "evalsha" };
    let embedded = Server::start(CONFIG, &["--resp", "127.0.0.1:0", "--snapshot", "off"]);
    let lease_period = std::env::var("SLUICE_BENCH_LEASE_PERIOD").unwrap_or_else(|_| "100ms".into());
    let leased = Server::start(
        CONFIG,
        &["--resp", "127.0.0.1:0", "--snapshot", "off", "--store", &store.url(), "--lease-period", &lease_period],
    );
    let mut connections = [
        connect(&format!("redis://{}", embedded.resp.unwrap())),
        connect(&format!("redis://{}", leased.resp.unwrap())),
        connect(&cell.url()),
    ];
    let mut accounting =
        [None, Some(Accounting::new(&store.url(), store_command)), Some(Accounting::new(&cell.url(), "cl.throttle"))];
    let workloads = workloads();
    let results = measure(&workloads, (rounds, calls), &mut connections, &mut accounting);
    for (keys, results) in workloads.iter().zip(&results) {
        report(*keys, results);
    }
}

/// Every round of every peer in each workload: `[workload][peer][round]`, the workloads
/// (of `workloads` keys each) taking turns within each round.
fn measure(
    workloads: &[usize],
    (rounds, calls): (usize, usize),
    connections: &mut [Connection; 3],
    accounting: &mut [Option<Accounting>; 3],
) -> Vec<[Vec<Round>; 3]> {
    // Warm up: every key's state exists before the first round.
    for &keys in workloads {
        for connection in connections.iter_mut() {
            round(connection, keys, keys.max(1000), None);
        }
    }
    let mut results: Vec<[Vec<Round>; 3]> = workloads.iter().map(|_| Default::default()).collect();
    for index in 0..rounds {
        for (workload, &keys) in workloads.iter().enumerate() {
            for offset in 0..NAMES.len() {
                let peer = (index + offset) % NAMES.len();
                results[workload][peer].push(round(&mut connections[peer], keys, calls, accounting[peer].as_mut()));
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    results
}

/// Prints the medians and ratios of the workload over `keys` keys.
fn report(keys: usize, results: &[Vec<Round>; 3]) {
    println!("\nkeys: {keys}");
    println!("peer           sequential/s   p50 µs   p99 µs   pipelined/s   (medians of {} rounds)", results[0].len());
    for (name, rounds) in NAMES.iter().zip(results) {
        let of = |field: fn(&Round) -> f64| median(rounds.iter().map(field).collect());
        println!(
            "{name:<14} {:>12.0} {:>8.1} {:>8.1} {:>13.0}",
            of(|r| r.sequential_per_second),
            of(|r| r.p50_us),
            of(|r| r.p99_us),
            of(|r| r.pipelined_per_second)
        );
    }
    for (peer, name) in NAMES.iter().enumerate().take(2) {
        let ratio = |field: fn(&Round) -> f64| {
            median(results[peer].iter().zip(&results[2]).map(|(ours, cell)| field(ours) / field(cell)).collect())
        };
        println!(
            "{name} / redis-cell, paired by round: sequential {:.2}×, pipelined {:.2}×",
            ratio(|r| r.sequential_per_second),
            ratio(|r| r.pipelined_per_second)
        );
    }
    println!("Redis, per call: commands run and µs spent (medians), sequential | pipelined");
    for (name, rounds) in NAMES.iter().zip(results).skip(1) {
        let of = |field: fn(&Round) -> f64| median(rounds.iter().map(field).collect());
        println!(
            "{name:<14} {:>5.2} {:>6.1} µs | {:>5.2} {:>6.1} µs",
            of(|r| r.sequential_redis.commands),
            of(|r| r.sequential_redis.usec),
            of(|r| r.pipelined_redis.commands),
            of(|r| r.pipelined_redis.usec)
        );
    }
}
