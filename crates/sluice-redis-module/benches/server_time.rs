//! Redis server time per check, in one redis-server, in one run: `SLUICE.CHECK` against the
//! scripts' `EVALSHA` on the same workload, `INCR` + `PEXPIRE` (the textbook fixed window's
//! pair), redis-cell's `CL.THROTTLE` (GCRA, a Rust module: built from its crates.io source by
//! this benchmark), and two floors of the module API (the `bench-floor` feature's
//! `SLUICE.FLOOR`): a command that only opens its key and replies, and one that also writes
//! a fixed window's 16 bytes and TTL and replicates them as one `SET … PXAT`, the least a
//! module command that changes a key costs.
//!
//! Time is Redis's own accounting (`INFO commandstats`, `usec_per_call`: the command's
//! function, what a shard's one core spends). Each round of each peer: `CONFIG RESETSTAT`,
//! then `SLUICE_BENCH_ROUND_CHECKS` (default 20 000) checks of cost 1 under Redis `TIME`,
//! pipelined 64 at a time over 100 caller keys; the peers alternate over
//! `SLUICE_BENCH_ROUNDS` (default 5) rounds after one warm-up round, and the median is
//! reported. Every policy admits every check (its limit is never reached), and every state
//! lives at least 1 s (`min_ttl`, as the pair's `PEXPIRE 1000`), so each check writes a key
//! that exists, as the pair does.
//!
//! Beside each µs figure, in parentheses: the server process's CPU time per check (`INFO cpu`,
//! user + system, all threads, over the round): what the check costs the server in all,
//! reading and parsing the pipelined requests and writing the replies included. The server is
//! Debian's `redis-server`, or the binary `SLUICE_REDIS_SERVER` names (Valkey's
//! `valkey-server`, another Redis), as in the tests.
//!
//! With `SLUICE_BENCH_CALLGRIND=1` the server runs under callgrind instead, and the report
//! is instructions per check inside the command's function (as `usec_per_call` times it),
//! over `SLUICE_BENCH_ROUND_CHECKS` (default there 2 000) checks after as many to warm up.
//!
//! ```text
//! cargo bench -p sluice-redis-module --features bench-floor --bench server_time
//! SLUICE_BENCH_CALLGRIND=1 cargo bench -p sluice-redis-module --features bench-floor --bench server_time
//! SLUICE_REDIS_SERVER=/path/to/valkey-server cargo bench -p sluice-redis-module --features bench-floor --bench server_time
//! ```
//!
//! Measured with this bench and not kept: replicating a ring's three writes as one `EVAL` of a
//! three-line script (one command looked up instead of three). It cut the ring's check to about
//! 9 500 instructions and 0.94 µs against 1.16–1.23 µs in the same run, still 2.3× the pair, at
//! the price of a Lua call (and a SHA1 of the script's text) on every replica and in every AOF
//! replay, per check. Moving the module's `unsafe` into `keyspace` (`eccf3b1`) changed no
//! check's count on Redis 7.0 beyond the run-to-run spread (fixed window 7 353 before, 7 356
//! after); the floors, which open their key through the same `Keys` as a check since, cost
//! about 200 instructions more (floor 1 927 → 2 126, write floor 5 790 → 5 920).
#![allow(clippy::unwrap_used)] // the shared test helpers unwrap: a failed setup should fail loudly

#[path = "../tests/harness/mod.rs"]
mod harness;
#[path = "server_time/setup.rs"]
mod setup;

use setup::{Peer, Server};
use sluice_core::{
    Alignment, FixedWindow, LeakMode, LeakyBucket, Limit, Policy, SlidingLog, SlidingLogVariant, SlidingWindow,
    TokenBucket, TokenBucketSettings,
};
use std::time::Duration;

const KEYS: u64 = 100;
const BATCH: u64 = 64;
/// The smallest TTL of a state, ms: as long as the pair's `PEXPIRE`.
const MIN_TTL_MS: u64 = 1000;

fn main() {
    let callgrind = std::env::var("SLUICE_BENCH_CALLGRIND").is_ok_and(|value| value == "1");
    let rounds = if callgrind { 1 } else { env("SLUICE_BENCH_ROUNDS", 5) };
    let checks = env("SLUICE_BENCH_ROUND_CHECKS", if callgrind { 2_000 } else { 20_000 });
    let mut server = Server::start(callgrind);
    let peers = server.peers();
    let unit = if callgrind { "instructions" } else { "µs of Redis time (usec_per_call; server CPU µs)" };
    println!("server_time on {}: {unit} per check, median of {rounds} rounds of {checks}", server.version());
    let header: Vec<&str> = peers.iter().map(|peer| peer.name()).collect();
    println!("| checked | {} | module ÷ pair | module ÷ write floor |", header.join(" | "));
    println!("|---|{}---|---|", "---|".repeat(peers.len()));
    let mut singles = Vec::new();
    for (name, limits) in workloads() {
        let medians: Vec<(f64, f64)> =
            peers.iter().map(|&peer| median(&mut server, peer, &limits, checks, rounds)).collect();
        let of = |peer: Peer| peers.iter().position(|&p| p == peer).map(|at| medians[at].0);
        let module = of(Peer::Module).unwrap_or(f64::NAN);
        let ratio = |peer| of(peer).map_or("—".to_owned(), |base| format!("{:.2}", module / base));
        let cells: Vec<String> = medians.iter().map(|&value| figure(value, callgrind)).collect();
        println!("| {name} | {} | {} | {} |", cells.join(" | "), ratio(Peer::Pair), ratio(Peer::WriteFloor));
        singles.push(module);
        server.flush();
    }
    // Two limits together (the last workload) against the two alone (the first and fourth).
    println!("two limits ÷ (fixed window + leaky bucket alone): {:.2}", singles[7] / (singles[0] + singles[3]));
}

/// One limit of each algorithm, sliding logs of three sizes, and two limits together.
fn workloads() -> Vec<(&'static str, Vec<Limit>)> {
    let second = Duration::from_secs(1);
    let log = |n, window| Policy::from(SlidingLog::new(n, window, SlidingLogVariant::Accepted).expect("a log"));
    let fixed: Policy =
        FixedWindow::new(1_000_000, second, Alignment::Aligned, Duration::ZERO).expect("a window").into();
    let interval = Duration::from_micros(10);
    let leaky: Policy = LeakyBucket::new(interval, 1000, LeakMode::NoDelay).expect("a bucket").into();
    let settings = TokenBucketSettings { capacity: 1_000_000, refill_amount: 1_000_000, refill_interval: second };
    let one = |policy: Policy| vec![Limit::new("p", policy)];
    vec![
        ("fixed window", one(fixed.clone())),
        ("sliding window (B = 4)", one(SlidingWindow::new(1_000_000, second, 4).expect("a window").into())),
        ("token bucket", one(TokenBucket::new(settings).expect("a bucket").into())),
        ("leaky bucket", one(leaky.clone())),
        ("sliding log, N = 10, 1 ms (whole)", one(log(10, Duration::from_millis(1)))),
        ("sliding log, N = 1 000, 100 ms (ring)", one(log(1_000, Duration::from_millis(100)))),
        ("sliding log, N = 100 000, 10 s (ring)", one(log(100_000, second * 10))),
        ("fixed window + leaky bucket together", vec![Limit::new("a", fixed), Limit::new("b", leaky)]),
    ]
}

/// The medians of `rounds` rounds of `peer` (Redis time or instructions, and server CPU),
/// after one round to warm up.
fn median(server: &mut Server, peer: Peer, limits: &[Limit], checks: u64, rounds: u64) -> (f64, f64) {
    server.measure(peer, limits, checks);
    let (mut times, mut cpu): (Vec<f64>, Vec<f64>) = (0..rounds).map(|_| server.measure(peer, limits, checks)).unzip();
    times.sort_by(f64::total_cmp);
    cpu.sort_by(f64::total_cmp);
    (times[times.len() / 2], cpu[cpu.len() / 2])
}

/// A median as the table shows it: instructions, or µs of Redis time (server CPU µs).
fn figure((value, cpu): (f64, f64), callgrind: bool) -> String {
    if callgrind { format!("{value:.0}") } else { format!("{value:.2} ({cpu:.2})") }
}

/// One pipelined batch of `peer`'s commands for checks `from..to`.
fn batch(peer: Peer, limits: &[Limit], script: &redis::Script, packed: &[u8], from: u64, to: u64) -> redis::Pipeline {
    let mut pipe = redis::pipe();
    for request in from..to {
        let caller = request % KEYS;
        let keys: Vec<String> = (0..limits.len()).map(|i| format!("{{{caller}}}:{i}")).collect();
        match peer {
            Peer::Module => pipe.cmd("SLUICE.CHECK").arg(&keys).arg(packed),
            Peer::Script => pipe.cmd("EVALSHA").arg(script.get_hash()).arg(keys.len()).arg(&keys).arg(packed),
            Peer::Pair => {
                let key = format!("pair:{caller}");
                pipe.cmd("INCR").arg(&key).cmd("PEXPIRE").arg(&key).arg(MIN_TTL_MS)
            }
            Peer::Cell => pipe.cmd("CL.THROTTLE").arg(format!("cell:{caller}")).arg(&[1_000_000, 1_000_000, 1, 1]),
            // The write floor's keys: live, 16 bytes (it runs first).
            Peer::Floor => pipe.cmd("SLUICE.FLOOR").arg(format!("floor:{caller}")),
            Peer::WriteFloor => pipe.cmd("SLUICE.FLOOR").arg(format!("floor:{caller}")).arg("WRITE"),
        };
    }
    pipe
}

/// Sends `checks` checks through `peer`.
fn send(con: &mut redis::Connection, peer: Peer, limits: &[Limit], checks: u64) {
    let packed = harness::packed(limits, None, 1, 0, MIN_TTL_MS);
    let source = harness::script(limits);
    let script = redis::Script::new(source);
    let _: String = redis::cmd("SCRIPT").arg("LOAD").arg(source).query(con).expect("SCRIPT LOAD");
    let mut sent = 0;
    while sent < checks {
        let to = (sent + BATCH).min(checks);
        let () = batch(peer, limits, &script, &packed, sent, to).query::<redis::Value>(con).map(drop).expect("a batch");
        sent = to;
    }
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|value| value.parse().ok()).unwrap_or(default)
}
