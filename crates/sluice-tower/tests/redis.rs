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
