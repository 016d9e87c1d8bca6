//! Recovery within one probe interval (issue 46, item 1): docs/reliability.md promises that
//! every connection decides through Redis again within one probe interval (100 ms) of Redis
//! answering. Here a real redis-server is killed and restarted on its port while two
//! connections of one store check without pause, and for each restart and each connection
//! the lag from Redis answering PING (polled by the test every millisecond) to the first
//! check Redis decided (not the failure mode) is held to the interval plus [`MARGIN`].
//!
//! No luck is involved in passing: a connection's probe tries Redis once per interval, so
//! whenever Redis comes back, the next attempt is less than one interval away. Each restart
//! is also timed to make a late probe show: Redis is started right after a probe attempt was
//! refused (the store counts each), so a probe that sees a successful attempt only one
//! interval after making it (redis-rs's `ConnectionManager` answers with the previous
//! attempt's error, then tries again in the background) takes nearly two intervals, every
//! time.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

use sluice_core::{Check, Key, Limit, Source, Store, Timestamp, TokenBucket, TokenBucketSettings};
use sluice_redis::{FailureMode, RedisSettings, RedisStore};
use sluice_test_support::redis::{RedisServer, query};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The store's probe interval, the promise's bound.
const PROBE_INTERVAL: Duration = Duration::from_millis(100);
/// What the lag may take beyond the interval: the probe's sleep overshoots by up to a
/// millisecond (tokio's timer); then a connection and its `HELLO`, the probe script and the
/// check's script loaded again into the empty Redis (about ten loopback round trips, each
/// well under a millisecond), the checking task's 1 ms pause, and scheduling on a 2-core
/// machine shared with builds (the worst lag measured here is 105 ms, at a load average of
/// 12). The test holds a run's worst lag: with a probe one interval late, 190–206 ms, about
/// twice this margin past the interval.
const MARGIN: Duration = Duration::from_millis(50);
/// Restarts per run.
const RESTARTS: usize = 10;
/// Refused probe attempts (counted over both connections) before Redis is started again:
/// by then each connection's probe tries once per interval.
const REFUSED_BEFORE_RESTART: u64 = 6;
/// How long a condition may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(10);

/// A million an hour: every check Redis decides is allowed.
fn generous() -> Limit {
    let bucket = TokenBucketSettings { capacity: 1_000_000, refill_amount: 1, refill_interval: Duration::from_secs(1) };
    Limit::new("recovery", TokenBucket::new(bucket).unwrap())
}

/// When each check Redis decided on one connection ended.
type Decided = Arc<Mutex<Vec<Instant>>>;

/// Checks on `store` until `stop`, one at a time with a 1 ms pause, recording in `decided`
/// when each check Redis decided ended.
async fn check_until(store: RedisStore, decided: Decided, stop: Arc<AtomicBool>) {
    let limit = generous();
    let key = Key::new(b"recovery").unwrap();
    while !stop.load(Ordering::Relaxed) {
        let check = Check::new(key, std::slice::from_ref(&limit), Timestamp::from_micros(0), 1);
        let verdict = store.check(check).await.unwrap();
        if verdict.source == Source::Store {
            decided.lock().unwrap().push(Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// The connection errors the store has counted: each refused probe attempt is one (a check
/// answered during an outage counts none).
fn connection_errors(store: &RedisStore) -> u64 {
    store.health().errors[1]
}

/// Waits until `condition` holds, polling every millisecond; fails the test after [`PATIENCE`].
async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let started = Instant::now();
    while !condition() {
        assert!(started.elapsed() < PATIENCE, "{what}: not within {PATIENCE:?}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Polls `port` with PING every millisecond until Redis answers it: when it did.
fn answered_at(port: u16) -> Instant {
    let started = Instant::now();
    loop {
        if query(port, &["PING"]).is_ok_and(|reply| reply == ["+PONG"]) {
            return Instant::now();
        }
        assert!(started.elapsed() < PATIENCE, "Redis did not answer PING within {PATIENCE:?}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Kills `server`, waits until the store's probes are refused once per interval, restarts
/// it right after a refused attempt, and returns it with the instant it answered PING.
async fn restart_after_a_refused_attempt(mut server: RedisServer, store: &RedisStore) -> (RedisServer, Instant) {
    server.kill();
    let before = connection_errors(store);
    wait_until("probes refused", || connection_errors(store) >= before + REFUSED_BEFORE_RESTART).await;
    let seen = connection_errors(store);
    wait_until("the next refused attempt", || connection_errors(store) > seen).await;
    let port = server.port();
    let answered = std::thread::spawn(move || answered_at(port));
    let server = tokio::task::spawn_blocking(move || {
        server.restart();
        server
    })
    .await
    .unwrap();
    (server, answered.join().unwrap())
}

/// Each restart's lags in milliseconds, one per connection, for the report.
fn shown(lags: &[Vec<Duration>]) -> String {
    let ms = |lag: &Duration| format!("{:.1}", lag.as_secs_f64() * 1e3);
    let restarts: Vec<String> = lags.iter().map(|lags| lags.iter().map(ms).collect::<Vec<_>>().join("/")).collect();
    restarts.join(", ")
}

/// Issue 46.1: after each restart, each connection's first check decided by Redis comes
/// within one probe interval (plus [`MARGIN`]) of Redis answering PING.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_connection_decides_through_redis_within_one_probe_interval_of_a_restart() {
    let mut server = RedisServer::start();
    let settings = RedisSettings { failure_mode: FailureMode::Open, blocked_cache: false, ..RedisSettings::default() };
    let store = RedisStore::connect(&server.url(), settings).await.unwrap();
    let stores = [store.clone(), store.connect_again().await.unwrap()];
    let stop = Arc::new(AtomicBool::new(false));
    let decided: Vec<Decided> = stores.iter().map(|_| Decided::default()).collect();
    let tasks: Vec<_> = stores
        .iter()
        .zip(&decided)
        .map(|(store, decided)| tokio::spawn(check_until(store.clone(), Arc::clone(decided), Arc::clone(&stop))))
        .collect();
    let mut lags = Vec::new();
    for _ in 0..RESTARTS {
        let answered;
        (server, answered) = restart_after_a_refused_attempt(server, &store).await;
        let first_after = |decided: &Decided| decided.lock().unwrap().iter().copied().find(|at| *at >= answered);
        wait_until("every connection decides through Redis", || decided.iter().all(|d| first_after(d).is_some())).await;
        lags.push(decided.iter().map(|d| first_after(d).unwrap() - answered).collect::<Vec<_>>());
        wait_until("the outage over", || store.health().is_available()).await;
    }
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.unwrap();
    }
    eprintln!("from Redis answering PING to each connection's first check decided by Redis (ms): {}", shown(&lags));
    let worst = lags.iter().flatten().max().copied().unwrap_or_default();
    assert!(worst <= PROBE_INTERVAL + MARGIN, "decided through Redis {worst:?} after Redis answered: {}", shown(&lags));
}

/// Recovering within one interval costs no more attempts (docs/reliability.md, promise 11):
/// while a `redis://` Redis is down (here a port that accepts and closes each connection at
/// once, so that attempts can be counted), a store's connection tries once per probe
/// interval. The first probe makes up to three at once (the connection, redis-rs's own
/// attempt after it failed, and the probe's retry riding that one); from the fourth, the
/// attempts are at least one interval apart (before, two per interval: the stale error,
/// then a retry on redis-rs's next attempt).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_costs_one_connection_attempt_per_probe_interval() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (sender, attempts) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            drop(stream);
            if sender.send(Instant::now()).is_err() {
                return;
            }
        }
    });
    let store = RedisStore::open(&format!("redis://127.0.0.1:{port}/"), RedisSettings::default()).await.unwrap();
    let at: Vec<Instant> =
        tokio::task::spawn_blocking(move || (0..12).map(|_| attempts.recv_timeout(PATIENCE).unwrap()).collect())
            .await
            .unwrap();
    assert!(!store.health().is_available());
    let steady: Vec<Duration> = at[3..].windows(2).map(|pair| pair[1] - pair[0]).collect();
    assert!(steady.iter().all(|gap| *gap >= PROBE_INTERVAL), "attempts closer than one interval: {steady:?}");
}
