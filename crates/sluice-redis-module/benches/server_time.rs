//! Redis server time per check, from Redis's own accounting (`INFO commandstats`,
//! `usec_per_call`), in one redis-server with the module loaded: `SLUICE.CHECK` against the
//! scripts' `EVALSHA` on the same workload, and `INCR` + `PEXPIRE`, the textbook fixed
//! window's pair, as the floor to compare with.
//!
//! Each round of each peer: `CONFIG RESETSTAT`, then `SLUICE_BENCH_ROUND_CHECKS` (default
//! 20 000) checks of cost 1 under Redis `TIME`, pipelined 64 at a time, spread over 100
//! caller keys; the peers alternate over `SLUICE_BENCH_ROUNDS` (default 5) rounds after one
//! warm-up round, and the median is reported.
//!
//! `cargo bench -p sluice-redis-module --bench server_time`
#![allow(clippy::unwrap_used)] // the shared test helpers unwrap: a failed setup should fail loudly

#[path = "../tests/harness/mod.rs"]
mod harness;
#[path = "../../sluice-redis/tests/support/mod.rs"]
mod support;

use sluice_core::{
    Alignment, FixedWindow, LeakMode, LeakyBucket, Limit, Policy, SlidingLog, SlidingLogVariant, SlidingWindow,
    TokenBucket, TokenBucketSettings,
};
use std::time::Duration;

const KEYS: u64 = 100;
const BATCH: u64 = 64;

/// Who answers a check.
#[derive(Clone, Copy, PartialEq)]
enum Peer {
    Module,
    Script,
    Pair,
}

fn main() {
    let rounds = env("SLUICE_BENCH_ROUNDS", 5);
    let checks = env("SLUICE_BENCH_ROUND_CHECKS", 20_000);
    let server = harness::start();
    let mut con = harness::connect(&server);
    println!("server_time: µs of Redis time per check (usec_per_call), median of {rounds} rounds of {checks}");
    println!("{:<44} {:>8} {:>8} {:>10}", "checked", "module", "script", "INCR+PEXPIRE");
    for (name, limits) in workloads() {
        let mut medians = Vec::new();
        for peer in [Peer::Module, Peer::Script, Peer::Pair] {
            run(&mut con, peer, &limits, checks);
            let mut times: Vec<f64> = (0..rounds).map(|_| run(&mut con, peer, &limits, checks)).collect();
            times.sort_by(f64::total_cmp);
            medians.push(times[times.len() / 2]);
        }
        println!("{name:<44} {:>8.2} {:>8.2} {:>10.2}", medians[0], medians[1], medians[2]);
        let () = redis::cmd("FLUSHALL").query(&mut con).expect("FLUSHALL");
    }
}

/// One limit of each algorithm, sliding logs of three sizes, and two limits together.
fn workloads() -> Vec<(&'static str, Vec<Limit>)> {
    let second = Duration::from_secs(1);
    let log = |n| Policy::from(SlidingLog::new(n, second * 10, SlidingLogVariant::Accepted).expect("a log"));
    let fixed: Policy = FixedWindow::new(1000, second, Alignment::Aligned, Duration::ZERO).expect("a window").into();
    let leaky: Policy = LeakyBucket::new(Duration::from_micros(100), 50, LeakMode::NoDelay).expect("a bucket").into();
    let settings =
        TokenBucketSettings { capacity: 1000, refill_amount: 10, refill_interval: Duration::from_millis(10) };
    let one = |policy: Policy| vec![Limit::new("p", policy)];
    vec![
        ("fixed window", one(fixed.clone())),
        ("sliding window (B = 4)", one(SlidingWindow::new(1000, second, 4).expect("a window").into())),
        ("token bucket", one(TokenBucket::new(settings).expect("a bucket").into())),
        ("leaky bucket", one(leaky.clone())),
        ("sliding log, N = 10 (whole)", one(log(10))),
        ("sliding log, N = 1 000 (ring)", one(log(1_000))),
        ("sliding log, N = 100 000 (ring)", one(log(100_000))),
        ("fixed window + leaky bucket together", vec![Limit::new("a", fixed), Limit::new("b", leaky)]),
    ]
}

/// One round: `checks` checks through `peer`; returns Redis's µs per check.
fn run(con: &mut redis::Connection, peer: Peer, limits: &[Limit], checks: u64) -> f64 {
    let () = redis::cmd("CONFIG").arg("RESETSTAT").query(con).expect("CONFIG RESETSTAT");
    let packed = harness::packed(limits, None, 1, 0, 1);
    let source = harness::script(limits);
    let script = redis::Script::new(source);
    let _: String = redis::cmd("SCRIPT").arg("LOAD").arg(source).query(con).expect("SCRIPT LOAD");
    let mut sent = 0;
    while sent < checks {
        let mut pipe = redis::pipe();
        for request in sent..(sent + BATCH).min(checks) {
            let caller = request % KEYS;
            let keys: Vec<String> = (0..limits.len()).map(|i| format!("{{{caller}}}:{i}")).collect();
            match peer {
                Peer::Module => pipe.cmd("SLUICE.CHECK").arg(&keys).arg(&packed),
                Peer::Script => pipe.cmd("EVALSHA").arg(script.get_hash()).arg(keys.len()).arg(&keys).arg(&packed),
                Peer::Pair => {
                    let key = format!("pair:{caller}");
                    pipe.cmd("INCR").arg(&key).cmd("PEXPIRE").arg(&key).arg(1000)
                }
            };
        }
        let () = pipe.query::<redis::Value>(con).map(drop).expect("a batch of checks");
        sent = (sent + BATCH).min(checks);
    }
    let stats: String = redis::cmd("INFO").arg("commandstats").query(con).expect("INFO commandstats");
    let per_call = |command: &str| {
        let line = stats.lines().find(|line| line.starts_with(&format!("cmdstat_{command}:")));
        let field = line.and_then(|line| line.split(',').find_map(|f| f.strip_prefix("usec_per_call=")));
        field.and_then(|value| value.parse::<f64>().ok()).unwrap_or_else(|| panic!("no {command} in {stats}"))
    };
    match peer {
        Peer::Module => per_call("sluice.check"),
        Peer::Script => per_call("evalsha"),
        Peer::Pair => per_call("incr") + per_call("pexpire"),
    }
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|value| value.parse().ok()).unwrap_or(default)
}
