//! Two instances of an app share one limit through the Redis store, on a real
//! `redis-server` this test starts on a free loopback port; when Redis goes away, the
//! store's failure mode decides.

mod support;

use axum::Router;
use sluice_core::RateLimiter;
use sluice_redis::{FailureMode, RedisSettings, RedisStore};
use sluice_test_support::redis::{ClosedPort, RedisServer};
use sluice_tower::RateLimitLayer;
use sluice_tower::key::PeerIp;
use std::time::{Duration, Instant};
use support::*;

const PEER: &str = "192.0.2.1:1000";

/// Issue 36.2: an outage answered as one (503, its problem type, `Retry-After` from the
/// probe interval, rounded up to a whole second), not as a spent quota (429 with `r=0`).
async fn assert_outage(response: http::Response<axum::body::Body>) {
    assert_eq!(response.status(), 503, "closed: an outage, not a rate limit");
    assert_eq!(header(&response, "retry-after"), Some("1"));
    assert_eq!((header(&response, "ratelimit"), header(&response, "ratelimit-policy")), (None, None));
    let body = body_json(response).await;
    assert_eq!(body["type"], sluice_tower::response::STORE_UNAVAILABLE_TYPE, "{body}");
}

/// An app instance with its own connection to Redis, on the shared (manual) time, whose
/// checks fail after `timeout` (short where Redis is taken away, so the test is quick;
/// long where it is not, so no check fails open by chance on a loaded machine).
async fn instance(
    server: &RedisServer,
    failure_mode: FailureMode,
    timeout: Duration,
    clock: &sluice_core::ManualClock,
) -> Router {
    let settings = RedisSettings { failure_mode, timeout, ..RedisSettings::injected_time() };
    let store = RedisStore::connect(&server.url(), settings).await.expect("connect to redis-server");
    let limit = sliding_log("shared", 3, Duration::from_secs(60));
    let limiter = RateLimiter::builder().limit(limit).store(store).clock(clock.clone()).build().expect("one limit");
    app(RateLimitLayer::from_limiter(limiter, PeerIp::new()))
}

#[tokio::test]
async fn two_instances_share_one_limit() {
    let server = RedisServer::start();
    let clock = clock();
    let timeout = Duration::from_secs(5);
    let (a, b) = (
        instance(&server, FailureMode::Open, timeout, &clock).await,
        instance(&server, FailureMode::Open, timeout, &clock).await,
    );
    assert_eq!(status(&a, from_peer(PEER)).await, 200);
    assert_eq!(status(&b, from_peer(PEER)).await, 200);
    let response = send(&a, from_peer(PEER)).await;
    assert_eq!(header(&response, "ratelimit"), Some(r#""shared";r=0;t=60"#));
    let response = send(&b, from_peer(PEER)).await;
    assert_eq!(response.status(), 429, "the fourth request, on the other instance");
    assert_eq!(header(&response, "retry-after"), Some("60"));
    clock.advance(Duration::from_secs(60));
    assert_eq!(status(&b, from_peer(PEER)).await, 200);
}

#[tokio::test]
async fn when_redis_is_down_the_failure_mode_decides_within_the_timeout() {
    let mut server = RedisServer::start();
    let clock = clock();
    let timeout = Duration::from_millis(200);
    let open = instance(&server, FailureMode::Open, timeout, &clock).await;
    let closed = instance(&server, FailureMode::Closed, timeout, &clock).await;
    let fallback = instance(&server, FailureMode::Fallback, timeout, &clock).await;
    assert_eq!(status(&open, from_peer(PEER)).await, 200);
    server.kill();

    let started = Instant::now();
    let response = send(&open, from_peer(PEER)).await;
    assert_eq!(response.status(), 200, "open: allowed");
    assert_eq!(header(&response, "ratelimit"), None);
    let response = send(&closed, from_peer(PEER)).await;
    assert_outage(response).await;
    let response = send(&fallback, from_peer(PEER)).await;
    assert_eq!(response.status(), 200, "fallback: decided in memory");
    assert_eq!(header(&response, "ratelimit"), Some(r#""shared";r=2;t=60"#));
    // Three checks, each bounded by the 200 ms timeout (generously: no wall-clock luck).
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
}

/// A brand-new client of an app whose Redis never started: the `closed` layer answers 503
/// at once (the store opened without waiting), and `open` lets it through.
#[tokio::test]
async fn a_redis_that_never_started_is_an_outage_for_a_new_client() {
    let closed_port = ClosedPort::bind();
    let url = format!("redis://127.0.0.1:{}", closed_port.port());
    for (failure_mode, status) in [(FailureMode::Closed, 503), (FailureMode::Open, 200)] {
        let settings =
            RedisSettings { failure_mode, timeout: Duration::from_secs(5), ..RedisSettings::injected_time() };
        let store = RedisStore::open(&url, settings).await.expect("a valid URL");
        let limiter = RateLimiter::builder().limit(sliding_log("api", 3, Duration::from_secs(60))).store(store);
        let app = app(RateLimitLayer::from_limiter(limiter.clock(clock()).build().expect("one limit"), PeerIp::new()));
        let started = Instant::now();
        let response = send(&app, from_peer(PEER)).await;
        assert!(started.elapsed() < Duration::from_secs(4), "{failure_mode}: waited for Redis");
        assert_eq!(response.status(), status, "{failure_mode}");
        if failure_mode == FailureMode::Closed {
            assert_outage(response).await;
        }
    }
}

/// Two app instances, each behind its own `LeasedStore` over its own Redis connection,
/// share a token bucket, a GCRA and a sliding log: together they admit exactly what one
/// store alone admits of the same requests, and most of their checks are answered from
/// leased units.
#[tokio::test]
async fn two_instances_behind_leases_on_redis_admit_what_one_store_would() {
    use sluice_core::{Check, Clock, Key, LeakMode, LeakyBucket, Limit, MemoryStore, TokenBucket, TokenBucketSettings};
    use sluice_tower::LeasedStore;
    let server = RedisServer::start();
    let second = Duration::from_secs(1);
    let bucket = TokenBucketSettings { capacity: 50, refill_amount: 1, refill_interval: Duration::from_secs(3600) };
    let limits = [
        Limit::new("tokens", TokenBucket::new(bucket).unwrap()),
        Limit::new("gcra", LeakyBucket::new(Duration::from_millis(20), 49, LeakMode::NoDelay).unwrap()),
        sliding_log("log", 50, second),
    ];
    for limit in limits {
        let clock = clock();
        let mut instances = Vec::new();
        let mut stores = Vec::new();
        for _ in 0..2 {
            let redis = RedisStore::connect(&server.url(), RedisSettings::injected_time()).await.unwrap();
            let store = LeasedStore::new(redis, Duration::from_millis(100));
            let limiter = RateLimiter::builder().limit(limit.clone()).store(store.clone()).clock(clock.clone());
            instances.push(app(RateLimitLayer::from_limiter(limiter.build().unwrap(), PeerIp::new())));
            stores.push(store);
        }
        // 400 requests 1 ms apart, alternating instances; one store alone decides the same.
        let alone = MemoryStore::new();
        let (mut admitted, mut allowed) = (0, 0);
        for i in 0..400 {
            clock.advance(Duration::from_millis(1));
            admitted += u32::from(status(&instances[i % 2], from_peer(PEER)).await == 200);
            let check = Check::new(Key::new(b"192.0.2.1").unwrap(), std::slice::from_ref(&limit), clock.now(), 1);
            allowed += u32::from(alone.check_now(check.key, check.limits, check.now, 1).unwrap().decision.allowed);
        }
        let leased: u64 = stores.iter().map(|store| store.figures().leased_checks).sum();
        // Never more; and here no less: the instances keep asking, so no lease ends unspent.
        assert_eq!(admitted, allowed, "{}: admitted, against one store alone", limit.name());
        assert!(leased > 0, "{}: no check answered from a lease", limit.name());
    }
}
