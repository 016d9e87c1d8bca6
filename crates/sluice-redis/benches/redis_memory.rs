//! Bytes per logged request: one key's log filled to N entries (N = 10, 1 000, 100 000), N
//! allowed checks 1 ms apart (distinct timestamps, a one-hour window, limit N), then
//! `MEMORY USAGE key SAMPLES 0` divided by N, for Sluice's sliding log (through
//! `RedisStore::check`) and the textbook sorted-set script. Both keys' names have the same
//! length. The INCR+PEXPIRE counter's whole key is shown for reference.
//!
//! Also prints `MEMORY USAGE` as the log grows (and, for Sluice's string, its length and
//! `OBJECT ENCODING`), to show where the bytes go.
//!
//! `cargo bench -p sluice-redis --bench redis_memory`.

mod common;

use common::{Kind, Peer, Workload, machine_load};
use redis::aio::ConnectionManager;
use sluice_test_support::redis::RedisServer;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The window: long enough that nothing expires while a log fills.
const WINDOW: Duration = Duration::from_secs(3600);

fn main() {
    let server = RedisServer::start();
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a tokio runtime");
    println!("redis_memory: load average {}", machine_load());
    runtime.block_on(async {
        let mut summary = Vec::new();
        for limit in common::limits() {
            let workload = Workload { limit, window: WINDOW, step_us: 1_000 };
            let mut per_request = Vec::new();
            for kind in [Kind::SlidingLog, Kind::SortedSet] {
                let peer = Peer::new(kind, workload, &server.url()).await;
                per_request.push(fill(&peer, limit).await);
            }
            summary.push((limit, per_request[0], per_request[1]));
        }
        let peer =
            Peer::new(Kind::FixedWindow, Workload { limit: 10, window: WINDOW, step_us: 1_000 }, &server.url()).await;
        peer.check_at(0, common::base_us()).await;
        let mut connection = peer.connection();
        let window_index = common::base_us() / WINDOW.as_micros() as u64;
        let key = format!("{}:{window_index}", peer.redis_key(0));
        println!("\nINCR+PEXPIRE: one counter key ({key}), {} bytes whatever N", usage(&mut connection, &key).await);
        println!("\nbytes per logged request (MEMORY USAGE / N)");
        println!("  {:>7} {:>12} {:>12} {:>8}", "N", "sluice", "sorted set", "ratio");
        for (limit, sluice, sorted) in summary {
            println!("  {limit:>7} {sluice:>12.2} {sorted:>12.2} {:>7.2}×", sorted / sluice);
        }
    });
    println!("load average at the end {}", machine_load());
}

async fn usage(connection: &mut ConnectionManager, key: &str) -> u64 {
    redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(key)
        .arg("SAMPLES")
        .arg(0)
        .query_async::<Option<u64>>(connection)
        .await
        .expect("MEMORY USAGE")
        .expect("the key exists")
}

/// Fills caller 0's log of `peer` to `limit` entries; prints the growth; returns bytes per
/// logged request.
async fn fill(peer: &Arc<Peer>, limit: u64) -> f64 {
    let mut connection = peer.connection();
    let key = peer.redis_key(0);
    let base = common::base_us();
    let checkpoints: Vec<u64> = [1, 10, 100, 1_000, 10_000, 100_000].into_iter().filter(|&c| c <= limit).collect();
    let started = Instant::now();
    let mut growth = Vec::new();
    for i in 0..limit {
        assert!(peer.check_at(0, base + i * 1_000).await, "check {i} of {limit} was rejected");
        if checkpoints.contains(&(i + 1)) {
            let bytes = usage(&mut connection, &key).await;
            let detail = match peer.kind {
                Kind::SlidingLog => {
                    let len: u64 = redis::cmd("STRLEN").arg(&key).query_async(&mut connection).await.expect("STRLEN");
                    format!("STRLEN {len}")
                }
                _ => {
                    let len: u64 = redis::cmd("ZCARD").arg(&key).query_async(&mut connection).await.expect("ZCARD");
                    assert_eq!(len, i + 1, "the sorted set lost entries");
                    format!("ZCARD {len}")
                }
            };
            let encoding: String =
                redis::cmd("OBJECT").arg("ENCODING").arg(&key).query_async(&mut connection).await.expect("OBJECT");
            growth.push(format!(
                "{:>7} entries: {:>9} bytes ({:>6.2}/entry), {detail}, {encoding}",
                i + 1,
                bytes,
                bytes as f64 / (i + 1) as f64
            ));
        }
    }
    let total = usage(&mut connection, &key).await;
    println!(
        "\n{} N = {limit} ({key}), filled in {:.1} s: MEMORY USAGE {total} bytes, {:.2} per logged request",
        peer.kind.name(),
        started.elapsed().as_secs_f64(),
        total as f64 / limit as f64
    );
    for line in growth {
        println!("  {line}");
    }
    // A further request is rejected: the log really holds N entries.
    assert!(!peer.check_at(0, base + limit * 1_000).await, "request N + 1 was allowed");
    total as f64 / limit as f64
}
