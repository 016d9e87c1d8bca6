//! What responses carry: rate-limit fields, 429 with problem+json, gRPC RESOURCE_EXHAUSTED,
//! and custom answers (oneshot, ManualClock).

mod support;

use http::{Response, StatusCode};
use http_body_util::Full;
use sluice_core::{Clock, LeakMode, LeakyBucket, TokenBucket, TokenBucketSettings};
use sluice_tower::RateLimitLayer;
use sluice_tower::headers::Fields;
use sluice_tower::key::PeerIp;
use std::time::Duration;
use support::*;

const PEER: &str = "192.0.2.1:1000";

#[tokio::test]
async fn allowed_responses_carry_the_ietf_fields() {
    let app = app(RateLimitLayer::from_limiter(
        limiter([sliding_log("api", 100, Duration::from_secs(60))], clock()),
        PeerIp::new(),
    ));
    let response = send(&app, from_peer(PEER)).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(header(&response, "ratelimit-policy"), Some(r#""api";q=100;w=60"#));
    assert_eq!(header(&response, "ratelimit"), Some(r#""api";r=99;t=60"#));
    assert_eq!(header(&response, "x-ratelimit-limit"), None, "legacy fields are opt-in");
    assert_eq!(header(&response, "retry-after"), None);
    assert_eq!(body_text(response).await, "ok");
}

#[tokio::test]
async fn legacy_fields_are_added_on_request() {
    let layer = RateLimitLayer::from_limiter(
        limiter([sliding_log("api", 100, Duration::from_secs(60))], clock()),
        PeerIp::new(),
    )
    .fields(Fields::IetfAndLegacy);
    let response = send(&app(layer), from_peer(PEER)).await;
    assert_eq!(header(&response, "x-ratelimit-limit"), Some("100"));
    assert_eq!(header(&response, "x-ratelimit-remaining"), Some("99"));
    assert_eq!(header(&response, "x-ratelimit-reset"), Some("60"));
}

/// An app limiting each peer to one request a minute (policy `api`), with `fields`.
fn one_a_minute(fields: Fields) -> axum::Router {
    let limits = limiter([sliding_log("api", 1, Duration::from_secs(60))], clock());
    app(RateLimitLayer::from_limiter(limits, PeerIp::new()).fields(fields))
}

#[tokio::test]
async fn legacy_fields_come_with_rejections_too() {
    let app = one_a_minute(Fields::IetfAndLegacy);
    assert_eq!(status(&app, from_peer(PEER)).await, 200);
    let response = send(&app, from_peer(PEER)).await;
    assert_eq!(response.status(), 429);
    assert_eq!(header(&response, "x-ratelimit-limit"), Some("1"));
    assert_eq!(header(&response, "x-ratelimit-remaining"), Some("0"));
    assert_eq!(header(&response, "x-ratelimit-reset"), Some("60"));
}

#[tokio::test]
async fn fields_can_be_kept_for_rejections_only() {
    let app = one_a_minute(Fields::OnRejectionsOnly);
    let allowed = send(&app, from_peer(PEER)).await;
    assert_eq!(header(&allowed, "ratelimit"), None);
    let rejected = send(&app, from_peer(PEER)).await;
    assert_eq!(header(&rejected, "ratelimit"), Some(r#""api";r=0;t=60"#));
    assert_eq!(header(&rejected, "retry-after"), Some("60"));
}

#[tokio::test]
async fn a_rejection_is_429_with_retry_after_and_a_problem_json_body() {
    let clock = clock();
    let app = app(RateLimitLayer::from_limiter(
        limiter([sliding_log("hello", 2, Duration::from_secs(10))], clock.clone()),
        PeerIp::new(),
    ));
    assert_eq!(status(&app, from_peer(PEER)).await, 200);
    clock.advance(Duration::from_millis(2_500));
    assert_eq!(status(&app, from_peer(PEER)).await, 200);
    let response = send(&app, from_peer(PEER)).await;
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    // The first request leaves the window 7.5 s from now: rounded up to 8.
    assert_eq!(header(&response, "retry-after"), Some("8"));
    assert_eq!(header(&response, "ratelimit"), Some(r#""hello";r=0;t=10"#));
    assert_eq!(header(&response, "content-type"), Some("application/problem+json"));
    let body = body_json(response).await;
    assert_eq!(body["status"], 429);
    assert_eq!(body["title"], "Too Many Requests");
    assert_eq!(body["retry_after"], 8);
    assert_eq!(body["type"], "about:blank");
    assert!(body["detail"].as_str().unwrap().contains("`hello`"));
}

#[tokio::test]
async fn retry_after_is_never_zero() {
    let clock = clock();
    let app = app(RateLimitLayer::from_limiter(
        limiter([sliding_log("tiny", 1, Duration::from_millis(10))], clock.clone()),
        PeerIp::new(),
    ));
    assert_eq!(status(&app, from_peer(PEER)).await, 200);
    clock.advance(Duration::from_millis(9));
    let response = send(&app, from_peer(PEER)).await;
    assert_eq!(response.status(), 429);
    assert_eq!(header(&response, "retry-after"), Some("1"), "1 ms to wait is announced as 1 s");
}

#[tokio::test]
async fn a_cost_no_policy_can_ever_allow_gets_429_without_retry_after() {
    let layer =
        RateLimitLayer::from_limiter(limiter([sliding_log("api", 5, Duration::from_secs(60))], clock()), PeerIp::new())
            .cost(|_| 6);
    let response = send(&app(layer), from_peer(PEER)).await;
    assert_eq!(response.status(), 429);
    assert_eq!(header(&response, "retry-after"), None);
    let body = body_json(response).await;
    assert!(body["detail"].as_str().unwrap().contains("never"));
    assert!(body.get("retry_after").is_none());
}

#[tokio::test]
async fn token_bucket_fields_use_the_time_to_refill_from_empty() {
    let bucket = TokenBucketSettings { capacity: 10, refill_amount: 1, refill_interval: Duration::from_secs(1) };
    let bucket = sluice_core::Limit::new("api", TokenBucket::new(bucket).unwrap());
    let response =
        send(&app(RateLimitLayer::from_limiter(limiter([bucket], clock()), PeerIp::new())), from_peer(PEER)).await;
    assert_eq!(header(&response, "ratelimit-policy"), Some(r#""api";q=10;w=10"#));
    assert_eq!(header(&response, "ratelimit"), Some(r#""api";r=9;t=1"#));
}

#[tokio::test]
async fn the_rejection_can_be_answered_by_a_closure_and_keeps_the_fields() {
    let layer =
        RateLimitLayer::from_limiter(limiter([sliding_log("api", 1, Duration::from_secs(60))], clock()), PeerIp::new())
            .on_rejection(|rejection| {
                let text = format!("slow down, {}", rejection.limit.name());
                let mut response = Response::new(Full::new(text.into()));
                *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
                response
            });
    let app = app(layer);
    assert_eq!(status(&app, from_peer(PEER)).await, 200);
    let response = send(&app, from_peer(PEER)).await;
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(header(&response, "retry-after"), Some("60"));
    assert!(header(&response, "ratelimit").is_some());
    assert_eq!(body_text(response).await, "slow down, api");
}

#[tokio::test]
async fn grpc_requests_are_rejected_with_resource_exhausted_and_retry_info() {
    use tonic_types::StatusExt;
    let layer =
        RateLimitLayer::from_limiter(limiter([sliding_log("rpc", 1, Duration::from_secs(30))], clock()), PeerIp::new());
    let app = app(layer);
    let grpc = || {
        let mut request = from_peer(PEER);
        request.headers_mut().insert("content-type", "application/grpc".parse().unwrap());
        request
    };
    assert_eq!(status(&app, grpc()).await, 200);
    let response = send(&app, grpc()).await;
    assert_eq!(response.status(), StatusCode::OK, "gRPC errors travel in a 200");
    let status = tonic::Status::from_header_map(response.headers()).unwrap();
    assert_eq!(status.code(), tonic::Code::ResourceExhausted);
    assert!(status.message().contains("`rpc`"));
    let retry = status.get_details_retry_info().unwrap();
    assert_eq!(retry.retry_delay, Some(Duration::from_secs(30)));
}

#[tokio::test]
async fn a_shaping_delay_waits_on_the_layer_clock() {
    let clock = clock();
    let shaper =
        sluice_core::Limit::new("shape", LeakyBucket::new(Duration::from_millis(200), 3, LeakMode::Delay).unwrap());
    let app = app(RateLimitLayer::from_limiter(limiter([shaper], clock.clone()), PeerIp::new()));
    for expected_wait_ms in [0, 200, 400, 600] {
        let before = clock.now();
        assert_eq!(status(&app, from_peer(PEER)).await, 200);
        assert_eq!(clock.now().saturating_since(before), Duration::from_millis(expected_wait_ms));
        clock.set(before);
    }
    assert_eq!(status(&app, from_peer(PEER)).await, 429, "the queue is full");
}

#[tokio::test]
async fn a_full_queue_rejects_without_taking_a_turn_so_the_leak_rate_passes() {
    let clock = clock();
    let shaper =
        sluice_core::Limit::new("shape", LeakyBucket::new(Duration::from_secs(1), 2, LeakMode::Delay).unwrap());
    let app = app(RateLimitLayer::from_limiter(limiter([shaper], clock.clone()), PeerIp::new()));
    let start = clock.now();
    for _ in 0..3 {
        assert_eq!(status(&app, from_peer(PEER)).await, 200);
        clock.set(start);
    }
    for _ in 0..5 {
        assert_eq!(status(&app, from_peer(PEER)).await, 429, "the queue is full");
    }
    // A second on, one place has leaked: a request passes after a 2 s wait.
    let later = start.saturating_add(Duration::from_secs(1));
    clock.set(later);
    assert_eq!(status(&app, from_peer(PEER)).await, 200);
    assert_eq!(clock.now().saturating_since(later), Duration::from_secs(2));
}

#[tokio::test]
async fn a_shaping_delay_past_the_maximum_is_a_rejection() {
    let clock = clock();
    let shaper =
        sluice_core::Limit::new("shape", LeakyBucket::new(Duration::from_secs(1), 5, LeakMode::Delay).unwrap());
    let layer = RateLimitLayer::from_limiter(limiter([shaper], clock.clone()), PeerIp::new())
        .max_delay(Duration::from_millis(1_500));
    let app = app(layer);
    let start = clock.now();
    assert_eq!(status(&app, from_peer(PEER)).await, 200);
    assert_eq!(status(&app, from_peer(PEER)).await, 200, "waits 1 s");
    clock.set(start);
    let response = send(&app, from_peer(PEER)).await;
    assert_eq!(response.status(), 429, "would wait 2 s");
    assert_eq!(header(&response, "retry-after"), Some("2"));
    assert_eq!(clock.now(), start, "a rejected request does not wait");
}
