//! Redis server time per check, from Redis's own accounting: for each peer (Sluice's sliding
//! log, the textbook sorted-set script, INCR+PEXPIRE) `CONFIG RESETSTAT`, M checks (64 in
//! flight, the same workload as `redis_throughput`), then `INFO commandstats`: the `usec` of
//! `evalsha` divided by its `calls`. Also shows what one check calls inside its script
//! (`redis.call`s per check, by command) and how much of the time those calls take (the rest
//! is the Lua interpreter running the script).
//!
//! The peers run in interleaved rounds after the same warm-up as `redis_throughput`; the
//! median over rounds is reported.
//!
//! `cargo bench -p sluice-redis --bench redis_server_time`. Environment:
//! `SLUICE_BENCH_ROUNDS` (default 5), `SLUICE_BENCH_ROUND_CHECKS` (default 20 000).
//!
//! Measured and not kept: several checks per `EVALSHA`. Redis's time per check fell from 6.1 to
//! 4.4 µs, but `sluice serve` on Redis (`scripts/loadtest.sh`, HTTP) went from 69 995–75 058 to
//! 60 229–66 690 checks/s.

mod common;

use common::{Kind, Peer, WARMUP_CAP, Workload, command_stats, connect, env_u64, info, machine_load, median};
use redis::aio::ConnectionManager;
use sluice_test_support::redis::RedisServer;
use std::collections::BTreeMap;
use std::sync::Arc;

/// One round of one peer: µs per check, and inner calls (count, µs) per check by command.
struct Round {
    usec_per_check: f64,
    inner: BTreeMap<String, (f64, f64)>,
}

fn main() {
    let rounds = env_u64("SLUICE_BENCH_ROUNDS", 5) as usize;
    let round_checks = env_u64("SLUICE_BENCH_ROUND_CHECKS", 20_000);
    let server = RedisServer::start();
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a tokio runtime");
    println!(
        "redis_server_time: {rounds} rounds of {round_checks} checks per peer and N; load average {}",
        machine_load()
    );
    runtime.block_on(async {
        let mut admin = connect(&server.url()).await;
        for limit in common::limits() {
            bench_limit(&server, &mut admin, limit, rounds, round_checks).await;
            let _: () = redis::cmd("FLUSHALL").query_async(&mut admin).await.expect("FLUSHALL");
        }
    });
    println!("load average at the end {}", machine_load());
}

async fn bench_limit(server: &RedisServer, admin: &mut ConnectionManager, limit: u64, rounds: usize, checks: u64) {
    let workload = Workload::for_limit(limit);
    let mut peers: Vec<Arc<Peer>> = Vec::new();
    for kind in Kind::ALL {
        let peer = Peer::new(kind, workload, &server.url()).await;
        peer.run(workload.steady_after().min(WARMUP_CAP)).await;
        peer.take_tally();
        peers.push(peer);
    }
    let mut results: Vec<Vec<Round>> = peers.iter().map(|_| Vec::new()).collect();
    for round in 0..rounds {
        for offset in 0..peers.len() {
            let index = (round + offset) % peers.len();
            let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query_async(admin).await.expect("CONFIG RESETSTAT");
            peers[index].run(checks).await;
            let stats = command_stats(&info(admin, "commandstats").await);
            let (calls, usec) = stats
                .iter()
                .find(|(name, _, _)| name == "evalsha")
                .map(|&(_, calls, usec)| (calls, usec))
                .expect("no evalsha in INFO commandstats");
            assert!(calls >= checks, "{calls} EVALSHA for {checks} checks");
            let inner = stats
                .iter()
                .filter(|(name, _, _)| {
                    name != "evalsha" && !["config", "info", "script"].iter().any(|admin| name.starts_with(admin))
                })
                .map(|(name, c, u)| (name.clone(), (*c as f64 / calls as f64, *u as f64 / calls as f64)))
                .collect();
            results[index].push(Round { usec_per_check: usec as f64 / calls as f64, inner });
        }
    }
    println!(
        "\nN = {limit} (window {} s, {} ms between checks of a key)",
        workload.window.as_secs(),
        workload.step_us * common::KEYS as u64 / 1000
    );
    println!("  {:<18} {:>10} {:>17} {:>12}  redis.call per check", "peer", "µs/check", "(min–max)", "in calls");
    let medians: Vec<f64> =
        results.iter().map(|rounds| median(&rounds.iter().map(|r| r.usec_per_check).collect::<Vec<_>>())).collect();
    for (peer, rounds) in peers.iter().zip(&results) {
        let times: Vec<f64> = rounds.iter().map(|r| r.usec_per_check).collect();
        let low = times.iter().copied().fold(f64::INFINITY, f64::min);
        let high = times.iter().copied().fold(0.0, f64::max);
        // The round whose time is the median's (or the next above), for the call breakdown.
        let mut sorted: Vec<&Round> = rounds.iter().collect();
        sorted.sort_by(|a, b| a.usec_per_check.total_cmp(&b.usec_per_check));
        let typical = sorted[sorted.len() / 2];
        let in_calls: f64 = typical.inner.values().map(|(_, u)| u).sum();
        let breakdown: Vec<String> =
            typical.inner.iter().map(|(name, (count, _))| format!("{count:.2} {}", name.to_uppercase())).collect();
        println!(
            "  {:<18} {:>10.2} {:>8.2} – {:<6.2} {:>12.2}  {}",
            peer.kind.name(),
            median(&times),
            low,
            high,
            in_calls,
            breakdown.join(", ")
        );
    }
    println!(
        "  sluice / sorted set {:.2}×, sluice / INCR+PEXPIRE {:.2}× (medians); load average {}",
        medians[0] / medians[1],
        medians[0] / medians[2],
        machine_load()
    );
}
