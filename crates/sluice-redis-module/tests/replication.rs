//! The module replicates what it wrote, never the command: a replica without the module
//! (as an AOF replay would) ends up with the primary's bytes and expiry times, to the
//! millisecond, even under Redis `TIME`; and a check that changes no state replicates
//! nothing.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod harness;

use sluice_core::{
    Alignment, FixedWindow, LeakMode, LeakyBucket, Limit, Policy, SlidingLog, SlidingLogVariant, SlidingWindow,
    TokenBucket, TokenBucketSettings,
};
use sluice_test_support::redis::RedisServer;
use std::time::{Duration, Instant};

/// Every algorithm and layout: whole and ring sliding logs of both variants, both window
/// alignments, and the buckets.
fn policies() -> Vec<Policy> {
    let ms = Duration::from_millis;
    let log = |n, variant| Policy::from(SlidingLog::new(n, ms(50), variant).unwrap());
    let settings = TokenBucketSettings { capacity: 5, refill_amount: 1, refill_interval: ms(5) };
    vec![
        log(4, SlidingLogVariant::Accepted),
        log(40, SlidingLogVariant::Attempts),
        log(200, SlidingLogVariant::Accepted),
        FixedWindow::new(5, ms(20), Alignment::Aligned, ms(3)).unwrap().into(),
        FixedWindow::new(5, ms(20), Alignment::Anchored, Duration::ZERO).unwrap().into(),
        SlidingWindow::new(8, ms(30), 3).unwrap().into(),
        TokenBucket::new(settings).unwrap().into(),
        LeakyBucket::new(ms(4), 3, LeakMode::Delay).unwrap().into(),
    ]
}

/// Polls `check` every 10 ms for up to 10 s.
fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A primary with the module and a replica without it, in sync; connections to both.
fn primary_and_replica() -> (RedisServer, RedisServer, redis::Connection, redis::Connection) {
    let primary = harness::start();
    let replica = RedisServer::start();
    let (to_primary, mut to_replica) = (harness::connect(&primary), harness::connect(&replica));
    let () = redis::cmd("REPLICAOF").arg("127.0.0.1").arg(primary.port()).query(&mut to_replica).unwrap();
    wait_until("the replica to sync", || {
        let info: String = redis::cmd("INFO").arg("replication").query(&mut to_replica).unwrap();
        info.contains("master_link_status:up")
    });
    (primary, replica, to_primary, to_replica)
}

#[test]
fn a_replica_without_the_module_gets_the_same_bytes_and_expiry() {
    let (_primary, replica, mut to_primary, mut to_replica) = primary_and_replica();
    let limits: Vec<Limit> =
        policies().into_iter().enumerate().map(|(i, policy)| Limit::new(format!("p{i}"), policy)).collect();
    for request in 0..600u64 {
        // Mostly Redis TIME; every limit alone and, every fifth request, all together.
        let cost = [1, 1, 1, 0, 2, 7][(request % 6) as usize];
        let limit = &limits[(request % limits.len() as u64) as usize];
        let (checked, keys) = if request % 5 == 4 {
            (limits.clone(), (0..limits.len()).map(|i| format!("{{all}}:{i}")).collect())
        } else {
            (vec![limit.clone()], vec![format!("{{alone}}:{}", request % limits.len() as u64)])
        };
        let packed = harness::packed(&checked, None, cost, 3_600_000, 1);
        let _: Vec<u8> = redis::cmd("SLUICE.CHECK").arg(&keys).arg(&packed).query(&mut to_primary).unwrap();
        if request % 50 == 0 {
            std::thread::sleep(Duration::from_millis(7));
        }
    }
    let acknowledged: i64 = redis::cmd("WAIT").arg(1).arg(10_000).query(&mut to_primary).unwrap();
    assert_eq!(acknowledged, 1);
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut to_primary).unwrap();
    keys.sort();
    assert_eq!(keys.len(), 2 * limits.len(), "{keys:?}");
    for key in &keys {
        let state = |con: &mut redis::Connection| -> (Option<Vec<u8>>, i64) {
            redis::pipe().cmd("GET").arg(key).cmd("PEXPIRETIME").arg(key).query(con).unwrap()
        };
        assert_eq!(state(&mut to_replica), state(&mut to_primary), "{key}");
    }
    assert!(!replica.log().contains("unknown command"), "the command was replicated:\n{}", replica.log());
}

#[test]
fn a_check_that_changes_no_state_replicates_nothing() {
    let (_primary, _replica, mut to_primary, mut to_replica) = primary_and_replica();
    let window = FixedWindow::new(1, Duration::from_secs(3600), Alignment::Anchored, Duration::ZERO).unwrap();
    let limits = [Limit::new("w", window)];
    let mut check = |cost: u64, deadline: Option<f64>| -> Vec<u8> {
        let packed = harness::packed(&limits, None, cost, 0, 1);
        let deadline = deadline.map(|at| at.to_le_bytes().to_vec());
        redis::cmd("SLUICE.CHECK").arg("k").arg(&packed).arg(deadline).query(&mut to_primary).unwrap()
    };
    assert_eq!(harness::numbers(&check(1, None))[1], 1, "the first request is admitted (and written)");
    wait_until("the replica to get the state", || {
        redis::cmd("EXISTS").arg("k").query::<bool>(&mut to_replica).unwrap()
    });
    let () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut to_replica).unwrap();
    for _ in 0..5 {
        assert_eq!(harness::numbers(&check(1, None))[1], 0, "the limit is reached: rejected");
        assert_eq!(harness::numbers(&check(0, None))[1], 0, "a peek at a full window");
        assert!(check(1, Some(1.0)).is_empty(), "past its deadline: nothing decided");
    }
    // A write after the checks: once the replica has it, it has had all that came before.
    let () = redis::cmd("SET").arg("marker").arg(1).query(&mut to_primary).unwrap();
    wait_until("the replica to get the marker", || {
        redis::cmd("EXISTS").arg("marker").query::<bool>(&mut to_replica).unwrap()
    });
    let stats: String = redis::cmd("INFO").arg("commandstats").query(&mut to_replica).unwrap();
    let replicated: Vec<&str> = stats
        .lines()
        .filter_map(|line| line.strip_prefix("cmdstat_")?.split_once(':'))
        .filter(|(command, _)| !["config|resetstat", "info", "exists", "ping", "replconf"].contains(command))
        .map(|(command, calls)| if command == "set" && calls.starts_with("calls=1,") { "the marker" } else { command })
        .collect();
    assert_eq!(replicated, ["the marker"], "{stats}");
}
