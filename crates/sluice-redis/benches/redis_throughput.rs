//! Checks per second on one Redis: Sluice's sliding log (`RedisStore::check`) against the
//! textbook sorted-set script, with an INCR+PEXPIRE fixed window as the floor, at
//! N = 10, 1 000 and 100 000, over 1 000 keys, 64 checks in flight on one multiplexed
//! connection per peer (tokio tasks on a two-thread runtime).
//!
//! A plain `main`, not criterion: the three peers run in interleaved rounds (the order
//! rotating every round), so a burst of load from another process hits all of them alike,
//! and each round gives a paired ratio. Every peer is first warmed up until its window has
//! elapsed once in virtual time (see `common`), so the measured checks expire as many entries
//! as they add; at N = 100 000 that would take 50 M checks, so the warm-up stops at
//! `WARMUP_CAP` and the logs keep growing during the run (their mean size is printed).
//!
//! `cargo bench -p sluice-redis --bench redis_throughput`. Environment:
//! `SLUICE_BENCH_ROUNDS` (default 7), `SLUICE_BENCH_ROUND_CHECKS` (default 30 000),
//! `SLUICE_BENCH_IN_FLIGHT` (default 64).
//!
//! Measured with this bench and not kept: `TCP_NODELAY` on the Redis connection
//! (`crates/sluice-redis/src/store/origin.rs` keeps Nagle's algorithm on), slower on loopback:
//! 59 690–61 257 against 60 922–66 809 checks/s at N = 10 (`SLUICE_BENCH_LIMITS=10`, the two
//! builds alternated), since commands sent while others are in flight then leave one packet
//! each.

mod common;

use common::{
    KEYS, Kind, Peer, WARMUP_CAP, Workload, connect, env_u64, in_flight, machine_load, median, server_cpu_seconds,
};
use redis::aio::ConnectionManager;
use sluice_test_support::redis::RedisServer;
use std::sync::Arc;
use std::time::Instant;

fn main() {
    let rounds = env_u64("SLUICE_BENCH_ROUNDS", 7) as usize;
    let round_checks = env_u64("SLUICE_BENCH_ROUND_CHECKS", 30_000);
    let server = RedisServer::start();
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a tokio runtime");
    println!(
        "redis_throughput: {KEYS} keys, {} in flight, {rounds} rounds of \
         {round_checks} checks per peer and N; load average {}",
        in_flight(),
        machine_load()
    );
    runtime.block_on(async {
        let mut admin = connect(&server.url()).await;
        let version: String = redis::cmd("INFO")
            .arg("server")
            .query_async::<String>(&mut admin)
            .await
            .expect("INFO server")
            .lines()
            .find_map(|l| l.strip_prefix("redis_version:").map(str::to_owned))
            .unwrap_or_default();
        println!("redis {version}");
        for limit in common::limits() {
            bench_limit(&server, &mut admin, limit, rounds, round_checks).await;
            let _: () = redis::cmd("FLUSHALL").query_async(&mut admin).await.expect("FLUSHALL");
        }
    });
    println!("load average at the end {}", machine_load());
}

/// One round of one peer: checks per second, and CPU µs per check of Redis and of this
/// process (the client).
#[derive(Clone, Copy)]
struct Round {
    rate: f64,
    server_us: f64,
    client_us: f64,
}

fn spread(values: &[f64]) -> (f64, f64, f64) {
    let low = values.iter().copied().fold(f64::INFINITY, f64::min);
    let high = values.iter().copied().fold(0.0, f64::max);
    (median(values), low, high)
}

async fn bench_limit(server: &RedisServer, admin: &mut ConnectionManager, limit: u64, rounds: usize, checks: u64) {
    let workload = Workload::for_limit(limit);
    let mut peers: Vec<Arc<Peer>> = Vec::new();
    for kind in Kind::ALL {
        peers.push(Peer::new(kind, workload, &server.url()).await);
    }
    let warmup = workload.steady_after().min(WARMUP_CAP);
    println!(
        "\nN = {limit}: window {} s, virtual step {} µs per check ({} ms per key), warm-up \
         {warmup} checks per peer (steady state after {})",
        workload.window.as_secs(),
        workload.step_us,
        workload.step_us * KEYS as u64 / 1000,
        workload.steady_after()
    );
    for peer in &peers {
        let started = Instant::now();
        peer.run(warmup).await;
        peer.take_tally();
        println!("  warm-up {:<18} {:>6.1} s", peer.kind.name(), started.elapsed().as_secs_f64());
    }
    let before = log_sizes(&peers).await;
    let mut results: Vec<Vec<Round>> = vec![Vec::new(); peers.len()];
    for round in 0..rounds {
        for offset in 0..peers.len() {
            let index = (round + offset) % peers.len();
            let server_cpu = server_cpu_seconds(admin).await;
            let client_cpu = process_cpu_seconds();
            let elapsed = peers[index].run(checks).await;
            let client_cpu = process_cpu_seconds() - client_cpu;
            let server_cpu = server_cpu_seconds(admin).await - server_cpu;
            results[index].push(Round {
                rate: checks as f64 / elapsed.as_secs_f64(),
                server_us: server_cpu * 1e6 / checks as f64,
                client_us: client_cpu * 1e6 / checks as f64,
            });
        }
    }
    let after = log_sizes(&peers).await;
    println!(
        "  {:<18} {:>9} {:>19} {:>8} {:>15}  CPU µs/check: redis, client; µs per check in flight",
        "peer", "checks/s", "(min–max)", "allowed", "log size (mean)"
    );
    for (index, peer) in peers.iter().enumerate() {
        let (allowed, total) = peer.take_tally();
        let (rate, low, high) = spread(&results[index].iter().map(|r| r.rate).collect::<Vec<_>>());
        let server_us = median(&results[index].iter().map(|r| r.server_us).collect::<Vec<_>>());
        let client_us = median(&results[index].iter().map(|r| r.client_us).collect::<Vec<_>>());
        let size = match (before[index], after[index]) {
            (Some(b), Some(a)) => format!("{b:.0} → {a:.0}"),
            _ => "-".to_owned(),
        };
        println!(
            "  {:<18} {:>9.0} {:>8.0} – {:<8.0} {:>7.1}% {:>15}  {server_us:>5.1}, {client_us:>5.1}; {:>6.1}",
            peer.kind.name(),
            rate,
            low,
            high,
            100.0 * allowed as f64 / total as f64,
            size,
            // Little's law: the mean time a check spends in flight.
            in_flight() as f64 / rate * 1e6
        );
    }
    for (other, name) in [(1, "sorted set"), (2, "INCR+PEXPIRE")] {
        let ratios: Vec<f64> = (0..rounds).map(|r| results[0][r].rate / results[other][r].rate).collect();
        let (ratio, low, high) = spread(&ratios);
        println!("  sluice / {name} checks/s: median of rounds {ratio:.2}× ({low:.2}–{high:.2}×)");
    }
    println!("  load average {}", machine_load());
}

/// This process's CPU time so far (user + system, from `/proc/self/stat`), in seconds.
fn process_cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces): state is field 3, utime 14.
    let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    // USER_HZ is 100 on Linux.
    (ticks(11) + ticks(12)) as f64 / 100.0
}

/// Mean entries per key: `ZCARD` for the sorted set, slots for Sluice's log (`STRLEN / 8`
/// for a whole log, N ≤ 32; `(STRLEN − 32) / 8` ring slots above); `None` for the fixed window.
async fn log_sizes(peers: &[Arc<Peer>]) -> Vec<Option<f64>> {
    let mut sizes = Vec::new();
    for peer in peers {
        let mut connection = peer.connection();
        let mut sum = 0u64;
        let command = match peer.kind {
            Kind::SlidingLog => "STRLEN",
            Kind::SortedSet => "ZCARD",
            Kind::FixedWindow => {
                sizes.push(None);
                continue;
            }
        };
        for index in 0..KEYS {
            let value: u64 = redis::cmd(command)
                .arg(peer.redis_key(index))
                .query_async(&mut connection)
                .await
                .expect("STRLEN/ZCARD");
            sum += match peer.kind {
                Kind::SlidingLog if peer.workload.limit <= 32 => value / 8,
                Kind::SlidingLog => value.saturating_sub(32) / 8,
                _ => value,
            };
        }
        sizes.push(Some(sum as f64 / KEYS as f64));
    }
    sizes
}
