//! `CL.THROTTLE` through `sluice serve --resp` against the real redis-cell, differentially:
//! the same random corpus (keys, max_burst, count, period, quantity, gaps) goes to both, call
//! by call, on this machine's one wall clock, and every reply must agree, field for field.
//!
//! The peer is redis-cell built from its crates.io source by `scripts/redis-cell.sh`: release
//! 0.2.2 with `scripts/redis-cell-0.5-reply.patch`, which changes its reply to 0.5.0's (a zero
//! rate refused; `retry_after` and `reset_after` rounded up to whole seconds when a
//! millisecond remains); its GCRA arithmetic is already 0.5.0's. It runs in a redis-server
//! of its own.
//!
//! Each server reads its own clock, a few hundred microseconds apart, and redis-cell's Redis
//! drops a key up to about 1 ms before its TAT (its clock and the key's TTL are whole
//! milliseconds), after which redis-cell starts the key afresh where Sluice still counts the
//! last microseconds of its state: the two states can then stand up to about 1 ms apart while
//! the key stays busy; and Sluice is called once redis-cell has answered, so the two read
//! their clocks as far apart as that round trip took (on a busy machine, milliseconds), and a
//! refill then sets the two states apart by as much. So a call that lands within a few
//! milliseconds of a boundary may be answered differently. Such a disagreement is counted
//! apart, not failed, when redis-cell's arithmetic itself gives different replies from the
//! TAT it stored (read before the call, or the last one read, which Redis may have dropped
//! since), at 2 ms plus the key's longest call pair before the call was sent and as long
//! after it was answered; the key then starts over under a new name, since the two states
//! differ. Sluice's interval is `period / count` truncated to whole microseconds
//! (docs/resp.md): its drift, under 1 µs per request, stays well inside that margin here.
//! Every other disagreement fails the test, and so would more than 2 % of boundary ones.
//!
//! Pipelines are compared apart, on intervals of 20 minutes and more, where no boundary lies
//! within the milliseconds a pipeline takes: there every reply must be equal.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use redis::Connection;
use sluice_test_support::redis::RedisServer;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use support::server::Server;

/// CL.THROTTLE needs no policy; a configuration needs one.
const CONFIG: &str = "policies:\n  unused: {algorithm: fixed_window, limit: 1, window: 1s}\n";

/// A reply's five integers, or its error's text.
type Answer = Result<Vec<i64>, String>;

/// The module `scripts/test.sh` builds (`SLUICE_REDIS_CELL`).
fn redis_cell() -> PathBuf {
    let default = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/redis-cell/build/release/libredis_cell.so");
    let path = std::env::var_os("SLUICE_REDIS_CELL").map_or_else(|| PathBuf::from(default), PathBuf::from);
    assert!(path.exists(), "{} is missing: scripts/test.sh (or scripts/redis-cell.sh) builds it", path.display());
    path
}

fn throttle(connection: &mut Connection, args: &[String]) -> Answer {
    redis::cmd("CL.THROTTLE").arg(args).query::<Vec<i64>>(connection).map_err(|error| {
        let detail = error.detail().unwrap_or_default();
        format!("{} {detail}", error.code().unwrap_or_default()).trim().to_owned()
    })
}

/// The TAT redis-cell stores at `key` (ns, as a string), if Redis still holds it.
fn stored_tat(cell: &mut Connection, key: &str) -> Option<i64> {
    let stored: Option<String> = redis::cmd("GET").arg(key).query(cell).unwrap();
    stored.map(|tat| tat.parse().unwrap())
}

fn now_ns() -> i64 {
    i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos()).unwrap()
}

/// redis-cell 0.5.0's reply for a key whose stored TAT is `tat`, at `now` (ns).
fn cell_reply(tat: Option<i64>, now: i64, [max_burst, count, period, quantity]: [i64; 4]) -> Vec<i64> {
    let interval = (i128::from(period) as f64 * 1e9 / count as f64) as i64;
    let (tolerance, increment) = (interval * (max_burst + 1), interval * quantity);
    let tat = tat.filter(|&tat| tat > now).unwrap_or(now);
    let new_tat = tat.max(now) + increment;
    let diff = now - (new_tat - tolerance);
    let (limited, retry, ttl) = if diff < 0 {
        (1, if increment <= tolerance { -diff } else { -1_000_000_000 }, tat - now)
    } else {
        (0, -1_000_000_000, new_tat - now)
    };
    let next = tolerance - ttl;
    let remaining = if next > -interval { ((next / 1000) as f64 / (interval / 1000) as f64) as i64 } else { 0 };
    let seconds = |ns: i64| ns / 1_000_000_000 + i64::from(ns % 1_000_000_000 / 1_000_000 > 0);
    vec![limited, max_burst + 1, remaining, seconds(retry), seconds(ttl)]
}

/// splitmix64: a corpus that a seed repeats.
struct Corpus(u64);

impl Corpus {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % bound
    }
}

/// What one run found.
#[derive(Debug, Default)]
struct Tally {
    calls: usize,
    agreed: usize,
    at_a_boundary: Vec<String>,
    unexplained: Vec<String>,
}

/// Sends `calls` random calls to redis-cell and to `sluice`, comparing each pair of replies.
fn compare(sluice: &mut Connection, seed: u64, calls: usize) -> Tally {
    let cell_server = RedisServer::start_with_module(&redis_cell());
    let mut cell = redis::Client::open(cell_server.url()).unwrap().get_connection().unwrap();
    let mut corpus = Corpus(seed);
    // Six keys, each with its parameters: intervals from 20 ms to 5 s, bursts up to 9.
    let mut slots: Vec<([i64; 3], u32)> = (0..6)
        .map(|_| ([corpus.below(10) as i64, 1 + corpus.below(50) as i64, 1 + corpus.below(5) as i64], 0))
        .collect();
    let mut tally = Tally { calls, ..Tally::default() };
    let mut last_tats = HashMap::new();
    // Per key: how far apart the two servers' clocks may have read at any of its calls.
    let mut slack: HashMap<String, i64> = HashMap::new();
    for call in 0..calls {
        let slot = corpus.below(6) as usize;
        let ([burst, count, period], generation) = slots[slot];
        let quantity = [0, 1, 1, 1, 1, 2, 3, 12][corpus.below(8) as usize];
        // A zero rate now and then: both must refuse it alike.
        let count = if corpus.below(50) == 0 { 0 } else { count };
        let key = format!("diff-{seed}-{slot}-{generation}");
        let args: Vec<String> =
            vec![key.clone(), burst.to_string(), count.to_string(), period.to_string(), quantity.to_string()];
        let tat = stored_tat(&mut cell, &key);
        let sent = now_ns();
        let (expected, got) = (throttle(&mut cell, &args), throttle(sluice, &args));
        let answered = now_ns();
        let line = format!("call {call}: CL.THROTTLE {}: redis-cell {expected:?}, sluice {got:?}", args.join(" "));
        // The TATs redis-cell may have decided on: the one read, and the last one stored,
        // which Redis may have dropped since (about 1 ms early).
        let tats = [tat, last_tats.get(&key).copied()];
        let parameters = [burst, count, period, quantity];
        // The two states stand as far apart as the two calls that last refilled the key
        // were (Sluice is called once redis-cell has answered), plus the 1 ms Redis may
        // drop a key early, plus 1 ms of clocks: on a busy machine more than 2 ms.
        let margin = *slack
            .entry(key.clone())
            .and_modify(|slack| *slack = (*slack).max(answered - sent))
            .or_insert(answered - sent)
            + 2_000_000;
        let times = [sent - margin, answered + margin];
        let replies: HashSet<Vec<i64>> = match count {
            0 => HashSet::new(),
            _ => tats.iter().flat_map(|&tat| times.map(|at| cell_reply(tat, at, parameters))).collect(),
        };
        if expected == got {
            tally.agreed += 1;
        } else if replies.len() > 1 {
            tally.at_a_boundary.push(line);
            slots[slot].1 += 1;
        } else {
            tally.unexplained.push(line);
        }
        if let Some(tat) = stored_tat(&mut cell, &key) {
            last_tats.insert(key, tat);
        }
        // The corpus's gap before the next call (the schedule under test, not a wait for
        // anything): 0 to 30 ms, so that calls land on every side of the keys' boundaries.
        std::thread::sleep(Duration::from_micros(corpus.below(30_000)));
    }
    tally
}

fn assert_agrees(tally: &Tally, store: &str) {
    println!(
        "{store}: {} calls, {} agreed, {} at a boundary, {} unexplained",
        tally.calls,
        tally.agreed,
        tally.at_a_boundary.len(),
        tally.unexplained.len()
    );
    for line in &tally.at_a_boundary {
        println!("  at a boundary: {line}");
    }
    assert!(
        tally.unexplained.is_empty(),
        "{store}: disagreements away from any boundary:\n{}",
        tally.unexplained.join("\n")
    );
    assert!(tally.at_a_boundary.len() * 50 <= tally.calls, "{store}: over 2 % at a boundary: {tally:?}");
}

fn seed() -> u64 {
    std::env::var("SLUICE_RESP_SEED").ok().and_then(|seed| seed.parse().ok()).unwrap_or(44)
}

#[test]
fn cl_throttle_on_the_embedded_store_answers_as_redis_cell() {
    let server = Server::start(CONFIG, &["--resp", "127.0.0.1:0", "--snapshot", "off"]);
    let mut sluice =
        redis::Client::open(format!("redis://{}", server.resp.unwrap())).unwrap().get_connection().unwrap();
    assert_agrees(&compare(&mut sluice, seed(), 500), "embedded store");
}

#[test]
fn cl_throttle_on_redis_answers_as_redis_cell() {
    // A long Redis timeout: a call the `open` failure mode answered (a debug build on a busy
    // machine can take 50 ms) would store nothing, and the states would part for good.
    let store = RedisServer::start();
    let server = Server::start(
        CONFIG,
        &["--resp", "127.0.0.1:0", "--snapshot", "off", "--store", &store.url(), "--redis-timeout", "2s"],
    );
    let mut sluice =
        redis::Client::open(format!("redis://{}", server.resp.unwrap())).unwrap().get_connection().unwrap();
    assert_agrees(&compare(&mut sluice, seed() + 1, 400), "Redis store");
}

/// Pipelines of calls on fresh keys with intervals of 20 minutes or more: no boundary lies
/// within the few milliseconds a pipeline takes, so every reply must be equal, field for
/// field, however the calls of a pipeline are run together.
fn compare_pipelines(sluice: &mut Connection, seed: u64) {
    let cell_server = RedisServer::start_with_module(&redis_cell());
    let mut cell = redis::Client::open(cell_server.url()).unwrap().get_connection().unwrap();
    let mut corpus = Corpus(seed);
    let parameters: Vec<[i64; 3]> =
        (0..10).map(|_| [corpus.below(6) as i64, 1 + corpus.below(3) as i64, 3600]).collect();
    for batch in 0..6 {
        let mut pipe = redis::pipe();
        let mut calls = Vec::new();
        for _ in 0..50 {
            let key = corpus.below(10) as usize;
            let [burst, count, period] = parameters[key];
            let quantity = corpus.below(4) as i64;
            pipe.cmd("CL.THROTTLE").arg(format!("pipe-{seed}-{key}")).arg(burst).arg(count).arg(period).arg(quantity);
            calls.push(format!("pipe-{seed}-{key} {burst} {count} {period} {quantity}"));
        }
        let expected: Vec<Vec<i64>> = pipe.query(&mut cell).unwrap();
        let got: Vec<Vec<i64>> = pipe.query(sluice).unwrap();
        for ((call, expected), got) in calls.iter().zip(&expected).zip(&got) {
            assert_eq!(got, expected, "batch {batch}: CL.THROTTLE {call}");
        }
    }
}

#[test]
fn pipelines_answer_as_redis_cell_on_the_embedded_store_and_on_redis() {
    let embedded = Server::start(CONFIG, &["--resp", "127.0.0.1:0", "--snapshot", "off"]);
    let mut sluice =
        redis::Client::open(format!("redis://{}", embedded.resp.unwrap())).unwrap().get_connection().unwrap();
    compare_pipelines(&mut sluice, seed() + 2);
    let store = RedisServer::start();
    let on_redis = Server::start(
        CONFIG,
        &["--resp", "127.0.0.1:0", "--snapshot", "off", "--store", &store.url(), "--redis-timeout", "2s"],
    );
    let mut sluice =
        redis::Client::open(format!("redis://{}", on_redis.resp.unwrap())).unwrap().get_connection().unwrap();
    compare_pipelines(&mut sluice, seed() + 3);
}
