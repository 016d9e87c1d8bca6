//! Killing the real redis-server in the middle of a stream of checks: no panic, no hang
//! past the timeout, decisions follow the failure mode, and checks return to Redis after
//! it restarts.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use sluice::{Key, Limit, Source, Store, Timestamp, TokenBucket, TokenBucketSettings, Verdict};
use sluice_redis::{FailureMode, RedisSettings, RedisStore};
use std::time::{Duration, Instant};
use support::proxy::MovableProxy;
use support::redis::{RedisServer, query};

/// The store's timeout: long enough that a check of the live server never reaches it on a
/// busy 2-core machine (a check that did would fail over, and the test with it), short
/// enough that a check hanging past it is told apart from one that answers.
const TIMEOUT: Duration = Duration::from_millis(500);
/// Time a check may take beyond the timeout (scheduling on a busy 2-core machine).
const SLACK: Duration = Duration::from_secs(1);

async fn timed_check(store: &RedisStore, limit: &Limit, at: u64) -> Verdict {
    timed_check_of(store, b"stream", limit, at).await
}

async fn timed_check_of(store: &RedisStore, key: &[u8], limit: &Limit, at: u64) -> Verdict {
    let started = Instant::now();
    let key = Key::new(key).unwrap();
    let verdict = store.check(key, std::slice::from_ref(limit), Timestamp::from_micros(at), 1).await.unwrap();
    let took = started.elapsed();
    assert!(took <= TIMEOUT + SLACK, "a check took {took:?}, past the {TIMEOUT:?} timeout");
    verdict
}

async fn stream_through_an_outage(mode: FailureMode) {
    let mut server = RedisServer::start();
    // Without the blocked-key cache, every check goes to Redis (or to the failure mode).
    let settings =
        RedisSettings { failure_mode: mode, timeout: TIMEOUT, blocked_cache: false, ..RedisSettings::injected_time() };
    let store = RedisStore::connect(&server.url(), settings).await.unwrap();
    // 5 requests per window: the stream below exhausts it, so sources and decisions differ.
    let bucket = TokenBucketSettings { capacity: 5, refill_amount: 1, refill_interval: Duration::from_secs(3600) };
    let limit = Limit::new("stream", TokenBucket::new(bucket).unwrap());
    let mut at = 1_763_700_000_000_000;
    for i in 0..8 {
        let verdict = timed_check(&store, &limit, at).await;
        assert_eq!((verdict.source, verdict.decision.allowed), (Source::Store, i < 5), "{mode:?} before, check {i}");
        at += 1;
    }
    server.kill();
    for i in 0..8 {
        let verdict = timed_check(&store, &limit, at).await;
        let expected = match mode {
            FailureMode::Open => (Source::FailedOpen, true),
            FailureMode::Closed => (Source::FailedClosed, false),
            // The fallback starts empty: 5 more, then rejections.
            FailureMode::Fallback => (Source::Fallback, i < 5),
        };
        assert_eq!((verdict.source, verdict.decision.allowed), expected, "{mode:?} while down, check {i}");
        at += 1;
    }
    server.restart();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let verdict = timed_check(&store, &limit, at).await;
        at += 1;
        if verdict.source == Source::Store {
            // Back on Redis, which restarted empty (no persistence in this test).
            assert!(verdict.decision.allowed, "{mode:?} after restart: {verdict:?}");
            break;
        }
        assert!(Instant::now() < deadline, "{mode:?}: checks never went back to Redis");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_fails_open_by_default() {
    assert_eq!(RedisSettings::default().failure_mode, FailureMode::Open);
    stream_through_an_outage(FailureMode::Open).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_fails_closed_when_told() {
    stream_through_an_outage(FailureMode::Closed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_falls_back_to_memory_when_told() {
    stream_through_an_outage(FailureMode::Fallback).await;
}

/// The fallback's states are bounded by `fallback_max_keys`: with room for one, a second
/// key's state takes the first's place, and the first key starts over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fallback_holds_at_most_fallback_max_keys() {
    let mut server = RedisServer::start();
    let settings = RedisSettings {
        failure_mode: FailureMode::Fallback,
        timeout: TIMEOUT,
        blocked_cache: false,
        fallback_max_keys: 1,
        ..RedisSettings::injected_time()
    };
    let store = RedisStore::connect(&server.url(), settings).await.unwrap();
    let bucket = TokenBucketSettings { capacity: 2, refill_amount: 1, refill_interval: Duration::from_secs(3600) };
    let limit = Limit::new("bounded", TokenBucket::new(bucket).unwrap());
    server.kill();
    let at = 1_763_700_000_000_000;
    let decide = async |key: &[u8], offset: u64| {
        let verdict = timed_check_of(&store, key, &limit, at + offset).await;
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
    for mode in [FailureMode::Open, FailureMode::Closed, FailureMode::Fallback] {
        let settings = RedisSettings { failure_mode: mode, timeout: TIMEOUT, ..RedisSettings::injected_time() };
        let store = RedisStore::connect(&server.url(), settings).await.unwrap();
        let bucket = TokenBucketSettings { capacity: 5, refill_amount: 1, refill_interval: Duration::from_secs(3600) };
        let limit = Limit::new("reset", TokenBucket::new(bucket).unwrap());
        timed_check(&store, &limit, 1_763_700_000_000_000).await;
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
/// decides, and checks return to Redis once it has memory again.
#[tokio::test]
async fn a_redis_out_of_memory_follows_the_failure_mode() {
    let server = RedisServer::start();
    let (store, limit) = failing_open_with_five_an_hour(&server.url()).await;
    let mut admin = redis::Client::open(server.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    let config = |value: &'static str| redis::cmd("CONFIG").arg("SET").arg("maxmemory").arg(value).to_owned();
    let _: () = config("1").query_async(&mut admin).await.unwrap();
    let verdict = timed_check(&store, &limit, 1_763_700_000_000_000).await;
    assert_eq!((verdict.source, verdict.decision.allowed), (Source::FailedOpen, true));
    let _: () = config("0").query_async(&mut admin).await.unwrap();
    let verdict = timed_check(&store, &limit, 1_763_700_000_000_001).await;
    assert_eq!((verdict.source, verdict.decision.remaining), (Source::Store, 4));
}

/// A store on the Redis at `url` that fails open, checks every request on Redis (no
/// blocked-key cache), and a token bucket of 5 an hour.
async fn failing_open_with_five_an_hour(url: &str) -> (RedisStore, Limit) {
    let settings = RedisSettings {
        failure_mode: FailureMode::Open,
        timeout: TIMEOUT,
        blocked_cache: false,
        ..RedisSettings::injected_time()
    };
    let store = RedisStore::connect(url, settings).await.unwrap();
    let bucket = TokenBucketSettings { capacity: 5, refill_amount: 1, refill_interval: Duration::from_secs(3600) };
    (store, Limit::new("five_an_hour", TokenBucket::new(bucket).unwrap()))
}

/// Sends `signal` (`STOP` or `CONT`) to the redis-server process.
fn signal(server: &RedisServer, signal: &str) {
    let pid = server.pid().expect("a running redis-server").to_string();
    let status = std::process::Command::new("kill").args([&format!("-{signal}"), &pid]).status().unwrap();
    assert!(status.success(), "kill -{signal} {pid}");
}

/// A Redis that hangs (stopped, its connections open but silent, as a host that froze or a
/// network that drops packets) is cut off at the store's timeout: each check answers by the
/// failure mode within it, none waits for Redis; once Redis answers again, checks return
/// to it, on the same data. The commands sent while it hung were sent: Redis runs them when
/// it resumes, so they count (`docs/redis.md`, "A check that timed out may still count").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_that_hangs_is_cut_off_at_the_timeout() {
    let server = RedisServer::start();
    let (store, limit) = failing_open_with_five_an_hour(&server.url()).await;
    let mut at = 1_763_700_000_000_000;
    assert_eq!(timed_check(&store, &limit, at).await.source, Source::Store);
    signal(&server, "STOP");
    for _ in 0..3 {
        at += 1;
        let verdict = timed_check(&store, &limit, at).await;
        assert_eq!((verdict.source, verdict.decision.allowed), (Source::FailedOpen, true));
    }
    signal(&server, "CONT");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        at += 1;
        let verdict = timed_check(&store, &limit, at).await;
        if verdict.source == Source::Store {
            // The use before the hang and this one are counted; so may be the three sent
            // while it hung, whichever Redis read before it noticed a closed connection.
            assert!(verdict.decision.remaining <= 3, "{verdict:?}");
            break;
        }
        assert!(Instant::now() < deadline, "checks never went back to Redis");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A failover that moves the address (a DNS name, a virtual IP) leaves the store's
/// connection open to the demoted node, which refuses writes with `READONLY`: the checks
/// meanwhile follow the failure mode, the store connects again, and checks return to Redis,
/// on the new primary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_failover_checks_return_to_the_new_primary() {
    let (old, new) = (RedisServer::start(), RedisServer::start());
    let proxy = MovableProxy::start(old.port()).await;
    let (store, limit) = failing_open_with_five_an_hour(&proxy.url()).await;
    let mut at = 1_763_700_000_000_000;
    assert_eq!(timed_check(&store, &limit, at).await.source, Source::Store);
    // The failover: the old primary becomes a replica of the new one, and the address moves.
    let replicaof = format!("REPLICAOF 127.0.0.1 {}", new.port());
    assert_eq!(query(old.port(), &[&replicaof]).unwrap(), ["+OK"]);
    proxy.move_to(new.port());
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut refused = 0;
    let verdict = loop {
        at += 1;
        let verdict = timed_check(&store, &limit, at).await;
        if verdict.source == Source::Store {
            break verdict;
        }
        refused += 1;
        assert_eq!((verdict.source, verdict.decision.allowed), (Source::FailedOpen, true));
        assert!(Instant::now() < deadline, "checks never left the demoted node");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // The demoted node refused at least the first check (the connection did not break).
    assert!(refused > 0, "no check reached the demoted node");
    // A fresh state: the first use on the new primary, which the old one never wrote to.
    assert_eq!(verdict.decision.remaining, 4, "{verdict:?}");
    assert_eq!(query(new.port(), &["DBSIZE"]).unwrap(), [":1"]);
}
