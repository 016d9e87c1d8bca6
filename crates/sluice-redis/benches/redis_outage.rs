//! What a Redis outage costs a caller, on a real redis-server:
//!
//! - **latency during an outage**: checks while nothing listens (connections refused), in
//!   each failure mode, against the memory store's check in the same run;
//! - **recovery**: how long after Redis answers again every connection of a store decides
//!   through Redis (a restart on the same port, and a stall: SIGSTOP, then SIGCONT).
//!
//! A plain `main`, not criterion: the figures are distributions (p50, p99, max) of single
//! checks and of recoveries. `cargo bench -p sluice-redis --bench redis_outage`.
//! Environment: `SLUICE_BENCH_CHECKS` (default 100 000 per mode), `SLUICE_BENCH_RECOVERIES`
//! (default 10 per fault), `SLUICE_BENCH_CONNECTIONS` (default 2: a server's workers).

use sluice_core::{Check, Key, Limit, MemoryStore, Store, Timestamp, TokenBucket, TokenBucketSettings};
use sluice_redis::{FailureMode, RedisSettings, RedisStore};
use sluice_test_support::redis::{ClosedPort, RedisServer};
use std::time::{Duration, Instant};

fn main() {
    let checks = env_usize("SLUICE_BENCH_CHECKS", 100_000);
    let recoveries = env_usize("SLUICE_BENCH_RECOVERIES", 10);
    let connections = env_usize("SLUICE_BENCH_CONNECTIONS", 2);
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a tokio runtime");
    runtime.block_on(async {
        println!("latency of one check during an outage ({checks} checks each, µs):");
        latency_during_an_outage(checks).await;
        println!("recovery: from Redis answering again to every one of {connections} connections up (ms):");
        recovery(recoveries, connections).await;
    });
}

fn limit() -> Limit {
    let bucket = TokenBucketSettings { capacity: 100, refill_amount: 1, refill_interval: Duration::from_secs(1) };
    Limit::new("outage", TokenBucket::new(bucket).expect("a valid bucket"))
}

fn settings(mode: FailureMode) -> RedisSettings {
    RedisSettings { failure_mode: mode, ..RedisSettings::default() }
}

async fn latency_during_an_outage(checks: usize) {
    let limits = [limit()];
    let memory = MemoryStore::new();
    let mut times = Vec::with_capacity(checks);
    for i in 0..checks {
        let key = format!("k{}", i % 1000);
        let started = Instant::now();
        let _ = memory.check(Check::new(Key::new(key.as_bytes()).expect("a key"), &limits, now(), 1)).await;
        times.push(started.elapsed());
    }
    report("memory store (reference)", &mut times);
    let closed = ClosedPort::bind();
    let url = format!("redis://127.0.0.1:{}/", closed.port());
    for mode in [FailureMode::Open, FailureMode::Closed, FailureMode::Fallback] {
        let store = RedisStore::open(&url, settings(mode)).await.expect("a valid URL");
        wait_until(|| !store.health().is_available()).await;
        times.clear();
        for i in 0..checks {
            let key = format!("k{}", i % 1000);
            let started = Instant::now();
            let verdict = store.check(Check::new(Key::new(key.as_bytes()).expect("a key"), &limits, now(), 1)).await;
            times.push(started.elapsed());
            assert!(verdict.is_ok_and(|verdict| verdict.source.is_without_store()));
        }
        report(&format!("Redis refused, failure mode {mode}"), &mut times);
    }
}

async fn recovery(rounds: usize, connections: usize) {
    let mut server = RedisServer::start();
    let first = RedisStore::connect(&server.url(), settings(FailureMode::Open)).await.expect("Redis answers");
    let mut stores = vec![first.clone()];
    for _ in 1..connections {
        stores.push(first.connect_again().await.expect("another connection"));
    }
    // The store's health is shared by its connections: available once every one is up.
    let all_up = |stores: &[RedisStore]| stores[0].health().is_available();
    let (mut restarts, mut stalls) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        server.kill();
        wait_until(|| !first.health().is_available()).await;
        server.restart();
        let answering = Instant::now();
        wait_until(|| all_up(&stores)).await;
        restarts.push(answering.elapsed());

        signal(&server, "STOP");
        for store in &stores {
            let _ = store.check(Check::new(Key::new(b"stalled").expect("a key"), &[limit()], now(), 1)).await;
        }
        signal(&server, "CONT");
        let answering = Instant::now();
        wait_until(|| all_up(&stores)).await;
        stalls.push(answering.elapsed());
    }
    report_ms("restart on the same port", &mut restarts);
    report_ms("stall (SIGSTOP, a check per connection, SIGCONT)", &mut stalls);
}

async fn wait_until(mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !condition() {
        assert!(Instant::now() < deadline, "the condition never held");
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
}

fn signal(server: &RedisServer, signal: &str) {
    let pid = server.pid().expect("a running redis-server").to_string();
    let status = std::process::Command::new("kill").args([&format!("-{signal}"), &pid]).status();
    assert!(status.is_ok_and(|status| status.success()), "kill -{signal} {pid}");
}

fn now() -> Timestamp {
    sluice_core::Clock::now(&sluice_core::SystemClock::new())
}

fn report(what: &str, times: &mut [Duration]) {
    times.sort_unstable();
    let at = |share: f64| times[((times.len() - 1) as f64 * share) as usize].as_secs_f64() * 1e6;
    println!("  {what}: p50 {:.2}, p99 {:.2}, p99.9 {:.2}, max {:.1}", at(0.5), at(0.99), at(0.999), at(1.0));
}

fn report_ms(what: &str, times: &mut [Duration]) {
    times.sort_unstable();
    let at = |share: f64| times[((times.len() - 1) as f64 * share) as usize].as_secs_f64() * 1e3;
    println!("  {what}: p50 {:.1}, max {:.1} ({} runs)", at(0.5), at(1.0), times.len());
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|value| value.parse().ok()).unwrap_or(default)
}
