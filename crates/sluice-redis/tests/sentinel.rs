//! Redis Sentinel, on real processes: a primary, a replica and a sentinel. The store finds
//! the primary through the sentinel; when the primary is killed and the sentinel promotes
//! the replica, the store follows, the failure mode answering meanwhile (each answer
//! counted), and the promoted replica holds the states it replicated.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

use sluice_core::{Check, Key, Limit, Source, Store, Timestamp, TokenBucket, TokenBucketSettings};
use sluice_redis::{FailureMode, RedisSettings, RedisStore};
use sluice_test_support::redis::{RedisServer, query};
use std::time::{Duration, Instant};

const PRIMARY: &str = "sluice-primary";

/// How long the sentinel may take to see the replica, and to fail over.
const PATIENCE: Duration = Duration::from_secs(30);

async fn sentinel_knows_a_replica(sentinel: &RedisServer) {
    let mut connection = redis::Client::open(sentinel.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    let started = Instant::now();
    loop {
        let replicas: Vec<redis::Value> =
            redis::cmd("SENTINEL").arg("REPLICAS").arg(PRIMARY).query_async(&mut connection).await.unwrap();
        if !replicas.is_empty() {
            return;
        }
        assert!(started.elapsed() < PATIENCE, "the sentinel never saw the replica");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_follows_a_failover_that_sentinel_makes() {
    let mut primary = RedisServer::start();
    let replica = RedisServer::start();
    let replicaof = format!("REPLICAOF 127.0.0.1 {}", primary.port());
    assert_eq!(query(replica.port(), &[&replicaof]).unwrap(), ["+OK"]);
    let sentinel = RedisServer::start_sentinel(primary.port(), PRIMARY);
    sentinel_knows_a_replica(&sentinel).await;

    let settings = RedisSettings {
        failure_mode: FailureMode::Open,
        timeout: Duration::from_millis(500),
        blocked_cache: false,
        ..RedisSettings::injected_time()
    };
    let store = RedisStore::open_sentinel(&[sentinel.url()], PRIMARY, "redis://primary/", settings).await.unwrap();
    let bucket = TokenBucketSettings { capacity: 10, refill_amount: 1, refill_interval: Duration::from_secs(3600) };
    let limit = Limit::new("sentinel", TokenBucket::new(bucket).unwrap());
    let check = async |at: u64| {
        let key = Key::new(b"alice").unwrap();
        store.check(Check::new(key, std::slice::from_ref(&limit), Timestamp::from_micros(at), 1)).await.unwrap()
    };
    let mut at = 1_763_700_000_000_000;
    let started = Instant::now();
    while !store.probe().await {
        assert!(started.elapsed() < PATIENCE, "the primary was never found through the sentinel");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let first = check(at).await;
    assert_eq!((first.source, first.decision.remaining), (Source::Store, 9), "{first:?}");
    // The replica has the state before the primary goes.
    let started = Instant::now();
    while query(primary.port(), &["WAIT 1 500"]).unwrap() != [":1"] {
        assert!(started.elapsed() < PATIENCE, "the replica never acknowledged the write");
    }

    primary.kill();
    let killed = Instant::now();
    let mut answered_without_redis = 0;
    let after = loop {
        at += 1;
        let verdict = check(at).await;
        if verdict.source == Source::Store {
            break verdict;
        }
        answered_without_redis += 1;
        assert_eq!((verdict.source, verdict.decision.allowed), (Source::FailedOpen, true));
        assert!(killed.elapsed() < PATIENCE, "the store never followed the failover");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let followed = killed.elapsed();
    eprintln!(
        "followed the failover {followed:?} after the kill; {answered_without_redis} checks failed open meanwhile"
    );
    // On the promoted replica: the first use was replicated, this is the second.
    assert_eq!(after.decision.remaining, 8, "{after:?}");
    assert_eq!(store.health().answered_without_redis, answered_without_redis);
}
