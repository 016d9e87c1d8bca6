//! Faults of a real redis-server and of the link to it: a stall (SIGSTOP / SIGCONT), a kill
//! and a restart on the same port, refused connections, a slow or silent link (a proxy in
//! between), a failover, a Redis out of memory. Each in the `open`, `closed` and `fallback`
//! failure modes, with exact quota accounting: a check answered without Redis never
//! consumes quota, and the failure mode's answers are counted (`docs/reliability.md`).
//!
//! No test waits on luck: each waits on a condition with a deadline. The store's timeout
//! is long (a check of the live server never reaches it on a busy machine), so that a check
//! answered within a fraction of it is known not to have waited for Redis.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

use sluice_core::{
    Alignment, Check, FixedWindow, Key, Limit, RetryAfter, Source, Store, Timestamp, TokenBucket, TokenBucketSettings,
    Verdict,
};
use sluice_redis::{FailureMode, RedisSettings, RedisStore};
use sluice_test_support::faulty_link::{Fault, FaultyLink};
use sluice_test_support::proxy::MovableProxy;
use sluice_test_support::redis::{ClosedPort, RedisServer, query};
use std::time::{Duration, Instant};

/// The store's timeout.
const TIMEOUT: Duration = Duration::from_millis(500);
/// Time a check may take beyond the timeout (scheduling on a busy 2-core machine).
const SLACK: Duration = Duration::from_secs(1);
/// How long a condition may take to become true before the test fails.
const PATIENCE: Duration = Duration::from_secs(10);
/// The time of the first check (injected).
const START: u64 = 1_763_700_000_000_000;
const MODES: [FailureMode; 3] = [FailureMode::Open, FailureMode::Closed, FailureMode::Fallback];

fn settings(mode: FailureMode) -> RedisSettings {
    // Without the blocked-key cache, every check goes to Redis (or to the failure mode).
    RedisSettings { failure_mode: mode, timeout: TIMEOUT, blocked_cache: false, ..RedisSettings::injected_time() }
}

/// `capacity` requests an hour: nothing refills while a test runs.
fn bucket(name: &str, capacity: u64) -> Limit {
    let bucket = TokenBucketSettings { capacity, refill_amount: 1, refill_interval: Duration::from_secs(3600) };
    Limit::new(name, TokenBucket::new(bucket).unwrap())
}

async fn timed_check(store: &RedisStore, limit: &Limit, at: u64) -> Verdict {
    timed_check_of(store, b"stream", limit, at).await
}

async fn timed_check_of(store: &RedisStore, key: &[u8], limit: &Limit, at: u64) -> Verdict {
    let started = Instant::now();
    let key = Key::new(key).unwrap();
    let verdict =
        store.check(Check::new(key, std::slice::from_ref(limit), Timestamp::from_micros(at), 1)).await.unwrap();
    let took = started.elapsed();
    assert!(took <= TIMEOUT + SLACK, "a check took {took:?}, past the {TIMEOUT:?} timeout");
    verdict
}

/// What the failure mode answers for the `i`th check of an outage, on a key the fallback
/// has not seen, with `capacity` per hour.
fn expected_without_redis(mode: FailureMode, i: u64, capacity: u64) -> (Source, bool) {
    match mode {
        FailureMode::Open => (Source::FailedOpen, true),
        FailureMode::Closed => (Source::FailedClosed, false),
        FailureMode::Fallback => (Source::Fallback, i < capacity),
    }
}

/// Waits until `condition` holds, failing the test with `what` after [`PATIENCE`].
async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) -> Duration {
    let started = Instant::now();
    while !condition() {
        assert!(started.elapsed() < PATIENCE, "{what}: not after {PATIENCE:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    started.elapsed()
}

/// Sends `signal` (`STOP` or `CONT`) to the redis-server process.
fn signal(server: &RedisServer, signal: &str) {
    let pid = server.pid().expect("a running redis-server").to_string();
    let status = std::process::Command::new("kill").args([&format!("-{signal}"), &pid]).status().unwrap();
    assert!(status.success(), "kill -{signal} {pid}");
}

/// A Redis that stalls (stopped: its connections open but silent, as a host that froze or
/// swaps) with checks in flight: each is answered by the failure mode within the timeout,
/// the next ones at once, and when Redis resumes and runs the checks it held, none of them
/// writes (their deadline has passed): the quota is exactly what Redis admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stall_consumes_no_quota_in_any_mode() {
    for mode in MODES {
        let server = RedisServer::start();
        let store = RedisStore::connect(&server.url(), settings(mode)).await.unwrap();
        let limit = bucket("stall", 100);
        let before = timed_check(&store, &limit, START).await;
        assert_eq!((before.source, before.decision.remaining), (Source::Store, 99), "{mode:?}");
        signal(&server, "STOP");
        // 20 checks in flight at once: every one reaches the stalled Redis's socket.
        let in_flight: Vec<_> = (0..20u64)
            .map(|i| {
                let (store, limit) = (store.clone(), limit.clone());
                tokio::spawn(async move { timed_check(&store, &limit, START + 1 + i).await })
            })
            .collect();
        let mut answered = Vec::new();
        for check in in_flight {
            answered.push(check.await.unwrap());
        }
        assert!(answered.iter().all(|verdict| verdict.source.is_without_store()), "{mode:?}: {answered:?}");
        assert!(!store.health().is_available(), "{mode:?}: the stall was not noticed");
        // The outage is known: the next check does not wait for Redis.
        let started = Instant::now();
        let during = timed_check(&store, &limit, START + 30).await;
        assert!(started.elapsed() < TIMEOUT / 2, "{mode:?}: a check during the outage waited {:?}", started.elapsed());
        assert!(during.source.is_without_store(), "{mode:?}: {during:?}");
        signal(&server, "CONT");
        wait_until("Redis found again after the stall", || store.health().is_available()).await;
        let after = timed_check(&store, &limit, START + 31).await;
        // 99 before, and only this one since: the 21 answered meanwhile consumed nothing.
        assert_eq!((after.source, after.decision.remaining), (Source::Store, 98), "{mode:?}: {after:?}");
        let health = store.health();
        assert_eq!((health.outages, health.answered_without_redis), (1, 21), "{mode:?}: {health:?}");
        assert!(health.errors[0] >= 1, "{mode:?}: the stall counts as a timeout: {health:?}");
    }
}

/// Two stores (two servers) sharing one Redis with 100 per window, through a stall: Redis
/// admits exactly 100, and every request admitted beyond is one the failure mode answered
/// while Redis did not, counted by the stores.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_admit_the_limit_plus_only_the_counted_failure_answers() {
    for mode in [FailureMode::Open, FailureMode::Fallback] {
        let server = RedisServer::start();
        let stores = [
            RedisStore::connect(&server.url(), settings(mode)).await.unwrap(),
            RedisStore::connect(&server.url(), settings(mode)).await.unwrap(),
        ];
        let window = FixedWindow::new(100, Duration::from_secs(3600), Alignment::Aligned, Duration::ZERO).unwrap();
        let limit = Limit::new("shared", window);
        let admitted_by =
            |verdict: &Verdict, by_redis: &mut u64, by_mode: &mut u64| match (verdict.decision.allowed, verdict.source)
            {
                (true, Source::Store) => *by_redis += 1,
                (true, _) => *by_mode += 1,
                _ => {}
            };
        let (mut by_redis, mut by_mode) = (0, 0);
        for i in 0..60 {
            let verdict = timed_check(&stores[i % 2], &limit, START + i as u64).await;
            admitted_by(&verdict, &mut by_redis, &mut by_mode);
        }
        signal(&server, "STOP");
        for i in 0..10 {
            let verdict = timed_check(&stores[i % 2], &limit, START + 100 + i as u64).await;
            admitted_by(&verdict, &mut by_redis, &mut by_mode);
        }
        signal(&server, "CONT");
        for store in &stores {
            wait_until("both stores find Redis again", || store.health().is_available()).await;
        }
        for i in 0..60 {
            let verdict = timed_check(&stores[i % 2], &limit, START + 200 + i as u64).await;
            admitted_by(&verdict, &mut by_redis, &mut by_mode);
        }
        let counted: u64 = stores.iter().map(|store| store.health().answered_without_redis).sum();
        assert_eq!(by_redis, 100, "{mode:?}: Redis admitted {by_redis}");
        assert_eq!((by_mode, counted), (10, 10), "{mode:?}: admitted by the failure mode, and counted");
    }
}

/// A restart with no traffic at all: the store hears the connection close (RESP3), finds
/// Redis again as soon as it answers, and the first check after that is decided by Redis
/// (in every mode, `closed` included).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_the_first_check_is_decided_by_redis() {
    for mode in MODES {
        let mut server = RedisServer::start();
        let store = RedisStore::connect(&server.url(), settings(mode)).await.unwrap();
        let limit = bucket("restart", 5);
        assert_eq!(timed_check(&store, &limit, START).await.source, Source::Store);
        server.kill();
        wait_until("the closed connection noticed without a check", || !store.health().is_available()).await;
        server.restart();
        let found = wait_until("Redis found again", || store.health().is_available()).await;
        assert!(found < Duration::from_secs(1), "{mode:?}: found again {found:?} after Redis answered");
        let verdict = timed_check(&store, &limit, START + 1).await;
        // Redis restarted empty (no persistence in this test): a fresh state.
        assert_eq!((verdict.source, verdict.decision.remaining), (Source::Store, 4), "{mode:?}: {verdict:?}");
        assert_eq!(store.health().answered_without_redis, 0, "{mode:?}");
    }
}

/// Killed in the middle of a stream of checks: every check meanwhile follows the failure
/// mode, and checks return to Redis after it restarts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_through_a_kill_follows_the_failure_mode() {
    for mode in MODES {
        let mut server = RedisServer::start();
        let store = RedisStore::connect(&server.url(), settings(mode)).await.unwrap();
        let limit = bucket("stream", 5);
        let mut at = START;
        for i in 0..8 {
            let verdict = timed_check(&store, &limit, at).await;
            assert_eq!((verdict.source, verdict.decision.allowed), (Source::Store, i < 5), "{mode:?} before, {i}");
            at += 1;
        }
        server.kill();
        for i in 0..8 {
            let verdict = timed_check(&store, &limit, at).await;
            let expected = expected_without_redis(mode, i, 5);
            assert_eq!((verdict.source, verdict.decision.allowed), expected, "{mode:?} while down, check {i}");
            at += 1;
        }
        server.restart();
        wait_until("Redis found again", || store.health().is_available()).await;
        let verdict = timed_check(&store, &limit, at).await;
        assert_eq!((verdict.source, verdict.decision.remaining), (Source::Store, 4), "{mode:?}: {verdict:?}");
        assert_eq!(store.health().answered_without_redis, 8, "{mode:?}");
    }
}

/// Started while nothing listens (connections refused): the store opens anyway, every
/// check is answered by the failure mode without waiting, the outage and its errors are
/// counted, and nothing is written anywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_connections_are_answered_at_once() {
    for mode in MODES {
        let port = ClosedPort::bind();
        let url = format!("redis://127.0.0.1:{}/", port.port());
        assert!(RedisStore::connect(&url, settings(mode)).await.is_err(), "connect waits for Redis");
        let store = RedisStore::open(&url, settings(mode)).await.unwrap();
        let limit = bucket("refused", 5);
        wait_until("the refusal noticed", || !store.health().is_available()).await;
        for i in 0..8 {
            let started = Instant::now();
            let verdict = timed_check(&store, &limit, START + i).await;
            assert!(started.elapsed() < TIMEOUT / 2, "{mode:?}: check {i} waited {:?}", started.elapsed());
            assert_eq!((verdict.source, verdict.decision.allowed), expected_without_redis(mode, i, 5), "{mode:?}");
        }
        let health = store.health();
        assert_eq!((health.outages, health.answered_without_redis), (1, 8), "{mode:?}: {health:?}");
        assert!(health.errors[1] >= 1, "{mode:?}: no connection error counted: {health:?}");
    }
}

/// A store opened while its Redis cannot be reached (a link that refuses) starts in an
/// outage and finds Redis as soon as the link carries again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_opened_during_an_outage_finds_redis_later() {
    let server = RedisServer::start();
    let link = FaultyLink::start(server.port()).await;
    link.set(Fault::Refuse);
    let store = RedisStore::open(&link.url(), settings(FailureMode::Closed)).await.unwrap();
    let limit = bucket("late", 5);
    wait_until("the refusal noticed", || !store.health().is_available()).await;
    let verdict = timed_check(&store, &limit, START).await;
    assert_eq!((verdict.source, verdict.decision.allowed), (Source::FailedClosed, false));
    // Retry when the next probe (every 100 ms) may have found Redis, not in a made-up second.
    assert_eq!(verdict.decision.retry_after, Some(RetryAfter::After(Duration::from_millis(100))));
    link.set(Fault::None);
    wait_until("Redis found", || store.health().is_available()).await;
    let verdict = timed_check(&store, &limit, START + 1).await;
    assert_eq!((verdict.source, verdict.decision.remaining), (Source::Store, 4), "{verdict:?}");
}

/// A link slower than the timeout: the check is answered by the failure mode, and when it
/// reaches Redis after its deadline, Redis writes nothing; once the link is fast again,
/// checks return to Redis on the quota they left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_link_consumes_no_quota() {
    for mode in MODES {
        let server = RedisServer::start();
        let link = FaultyLink::start(server.port()).await;
        let store = RedisStore::connect(&link.url(), settings(mode)).await.unwrap();
        let limit = bucket("slow", 5);
        assert_eq!(timed_check(&store, &limit, START).await.decision.remaining, 4);
        link.set(Fault::Delay(TIMEOUT * 2));
        let verdict = timed_check(&store, &limit, START + 1).await;
        assert!(verdict.source.is_without_store(), "{mode:?}: {verdict:?}");
        link.set(Fault::None);
        // The probe that finds Redis again follows the delayed check on the connection:
        // Redis has run that check (and written nothing) by then.
        wait_until("Redis found again", || store.health().is_available()).await;
        let verdict = timed_check(&store, &limit, START + 2).await;
        assert_eq!((verdict.source, verdict.decision.remaining), (Source::Store, 3), "{mode:?}: {verdict:?}");
    }
}

/// A link that goes silent (a partition) and heals: the checks held meanwhile reach Redis
/// after their deadline and write nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_link_that_heals_consumes_no_quota() {
    for mode in MODES {
        let server = RedisServer::start();
        let link = FaultyLink::start(server.port()).await;
        let store = RedisStore::connect(&link.url(), settings(mode)).await.unwrap();
        let limit = bucket("silent", 5);
        assert_eq!(timed_check(&store, &limit, START).await.decision.remaining, 4);
        link.set(Fault::Silent);
        for i in 0..3 {
            let verdict = timed_check(&store, &limit, START + 1 + i).await;
            assert_eq!((verdict.source, verdict.decision.allowed), expected_without_redis(mode, i, 5), "{mode:?}");
        }
        link.set(Fault::None);
        wait_until("Redis found again", || store.health().is_available()).await;
        let verdict = timed_check(&store, &limit, START + 10).await;
        assert_eq!((verdict.source, verdict.decision.remaining), (Source::Store, 3), "{mode:?}: {verdict:?}");
    }
}

/// The fallback's states are bounded by `fallback_max_keys`: with room for one, a second
/// key's state takes the first's place, and the first key starts over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fallback_holds_at_most_fallback_max_keys() {
    let mut server = RedisServer::start();
    let settings = RedisSettings { fallback_max_keys: 1, ..settings(FailureMode::Fallback) };
    let store = RedisStore::connect(&server.url(), settings).await.unwrap();
    let limit = bucket("bounded", 2);
    server.kill();
    let decide = async |key: &[u8], offset: u64| {
        let verdict = timed_check_of(&store, key, &limit, START + offset).await;
        assert_eq!(verdict.source, Source::Fallback);
        verdict.decision.allowed
    };
    assert_eq!([decide(b"a", 0).await, decide(b"a", 1).await, decide(b"a", 2).await], [true, true, false]);
    assert!(decide(b"b", 3).await);
    // `a`'s state was dropped to make room for `b`'s: it starts over.
    assert!(decide(b"a", 4).await, "the fallback kept more states than fallback_max_keys");
    server.restart();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_while_redis_is_down_fails_whatever_the_failure_mode() {
    let mut server = RedisServer::start();
    for mode in MODES {
        let store = RedisStore::connect(&server.url(), settings(mode)).await.unwrap();
        let limit = bucket("reset", 5);
        timed_check(&store, &limit, START).await;
        server.kill();
        let started = Instant::now();
        let result = store.reset(Key::new(b"stream").unwrap(), std::slice::from_ref(&limit)).await;
        assert!(started.elapsed() <= TIMEOUT + SLACK, "{mode:?}: a reset took {:?}", started.elapsed());
        assert!(matches!(result, Err(ref error) if error.is_transient()), "{mode:?}: {result:?}");
        server.restart();
    }
}

/// A Redis out of memory under `noeviction` refuses the script's writes (`OOM … script:
/// … @user_script`): a state of the server, not a fault of the script, so the failure mode
/// decides, the probe (a write) keeps the outage on while Redis refuses writes, and checks
/// return to Redis once it has memory again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_out_of_memory_follows_the_failure_mode() {
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url(), settings(FailureMode::Open)).await.unwrap();
    let limit = bucket("oom", 5);
    assert_eq!(query(server.port(), &["CONFIG SET maxmemory 1"]).unwrap(), ["+OK"]);
    let verdict = timed_check(&store, &limit, START).await;
    assert_eq!((verdict.source, verdict.decision.allowed), (Source::FailedOpen, true));
    assert!(!store.probe().await, "a probe (a write) must fail while Redis refuses writes");
    assert!(!store.health().is_available());
    assert!(store.health().errors[2] >= 1, "OOM is counted as a server error: {:?}", store.health());
    assert_eq!(query(server.port(), &["CONFIG SET maxmemory 0"]).unwrap(), ["+OK"]);
    wait_until("Redis found again", || store.health().is_available()).await;
    let verdict = timed_check(&store, &limit, START + 1).await;
    assert_eq!((verdict.source, verdict.decision.remaining), (Source::Store, 4));
}

/// A failover that moves the address (a DNS name, a virtual IP) leaves the store's
/// connection open to the demoted node, which refuses writes with `READONLY`: the checks
/// meanwhile follow the failure mode, the store connects again, and checks return to Redis,
/// on the new primary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_failover_checks_return_to_the_new_primary() {
    let (old, new) = (RedisServer::start(), RedisServer::start());
    let proxy = MovableProxy::start(old.port()).await;
    let store = RedisStore::connect(&proxy.url(), settings(FailureMode::Open)).await.unwrap();
    let limit = bucket("failover", 5);
    let mut at = START;
    assert_eq!(timed_check(&store, &limit, at).await.source, Source::Store);
    // The failover: the old primary becomes a replica of the new one, and the address moves.
    let replicaof = format!("REPLICAOF 127.0.0.1 {}", new.port());
    assert_eq!(query(old.port(), &[&replicaof]).unwrap(), ["+OK"]);
    proxy.move_to(new.port());
    let verdict = timed_check(&store, &limit, at + 1).await;
    // The demoted node refused the check (the connection did not break).
    assert_eq!((verdict.source, verdict.decision.allowed), (Source::FailedOpen, true));
    wait_until("the new primary found", || store.health().is_available()).await;
    at += 2;
    let verdict = timed_check(&store, &limit, at).await;
    // A fresh state: the first use on the new primary, which the old one never wrote to.
    assert_eq!((verdict.source, verdict.decision.remaining), (Source::Store, 4), "{verdict:?}");
    assert_eq!(query(new.port(), &["EXISTS sluice:probe"]).unwrap(), [":1"], "the probe wrote to the new primary");
}

/// The store's timeout is the only bound on a call: a Redis 0.8 s away is waited for under
/// a timeout of 3 s (redis-rs's own default of 500 ms would cut it short).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_timeout_is_waited_for_in_full() {
    let server = RedisServer::start();
    let link = FaultyLink::start(server.port()).await;
    let settings = RedisSettings { timeout: Duration::from_secs(3), ..settings(FailureMode::Closed) };
    let store = RedisStore::connect(&link.url(), settings).await.unwrap();
    let limit = bucket("patient", 5);
    assert_eq!(
        store
            .check(Check::new(Key::new(b"k").unwrap(), std::slice::from_ref(&limit), Timestamp::from_micros(START), 1))
            .await
            .unwrap()
            .source,
        Source::Store
    );
    link.set(Fault::Delay(Duration::from_millis(400)));
    let started = Instant::now();
    let key = Key::new(b"k").unwrap();
    let verdict =
        store.check(Check::new(key, std::slice::from_ref(&limit), Timestamp::from_micros(START + 1), 1)).await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(800), "the link's delay is in the round trip");
    assert_eq!((verdict.source, verdict.decision.remaining), (Source::Store, 3), "{verdict:?}");
}
