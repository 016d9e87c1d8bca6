//! Store failures: a store's failure mode decides, a store that cannot decide follows the
//! layer's rule, and the layer never panics (oneshot, ManualClock).

mod support;

use sluice_core::{Check, Key, Limit, RateLimiter, RetryAfter, Source, Store, StoreError, Verdict};
use sluice_tower::key::PeerIp;
use sluice_tower::{OnStoreError, RateLimitLayer};
use std::time::Duration;
use support::*;

const PEER: &str = "192.0.2.1:1000";

/// A store that is down, answering as a failure mode would (or with an error).
#[derive(Clone, Debug)]
enum DownStore {
    Error,
    Decides(Source),
}

impl Store for DownStore {
    async fn check(&self, check: Check<'_>) -> Result<Verdict, StoreError> {
        let Check { limits, now, cost, .. } = check;
        let source = match self {
            DownStore::Error => return Err(StoreError::Unavailable("connection refused".into())),
            DownStore::Decides(source) => *source,
        };
        let mut decision = limits[0].policy().decide_fresh(now, cost);
        if source == Source::FailedClosed {
            decision = decision.with_remaining(0).rejected(RetryAfter::After(Duration::from_secs(1)));
        }
        Ok(Verdict::new(decision, 0, source))
    }

    async fn reset(&self, _: Key<'_>, _: &[Limit]) -> Result<(), StoreError> {
        Ok(())
    }
}

fn layer(store: DownStore) -> RateLimitLayer<DownStore, sluice_core::ManualClock> {
    let limit = sliding_log("api", 5, Duration::from_secs(60));
    let limiter = RateLimiter::builder().limit(limit).store(store).clock(clock()).build().expect("one limit");
    RateLimitLayer::from_limiter(limiter, PeerIp::new())
}

#[tokio::test]
async fn failing_open_allows_without_rate_limit_fields() {
    let response = send(&app(layer(DownStore::Decides(Source::FailedOpen))), from_peer(PEER)).await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "ratelimit"), None, "a fresh state invented by the failure mode is not announced");
}

/// Issue 36.2: a `closed` failure mode is an outage, not abuse: 503 with its own problem
/// type and `Retry-After`, and no `RateLimit` fields claiming a spent quota.
#[tokio::test]
async fn failing_closed_is_answered_as_an_outage() {
    let response = send(&app(layer(DownStore::Decides(Source::FailedClosed))), from_peer(PEER)).await;
    assert_eq!(response.status(), 503);
    assert_eq!(header(&response, "retry-after"), Some("1"));
    assert_eq!(header(&response, "content-type"), Some("application/problem+json"));
    for field in ["ratelimit", "ratelimit-policy", "x-ratelimit-remaining"] {
        assert_eq!(header(&response, field), None, "{field}: no quota was looked at");
    }
    let body = body_json(response).await;
    assert_eq!(body["type"], sluice_tower::response::STORE_UNAVAILABLE_TYPE);
    assert_eq!(body["retry_after"], 1);
    assert!(body["detail"].as_str().unwrap().contains("store cannot answer"), "{body}");
}

/// The rejection closure answers policies' rejections only: an outage keeps its 503.
#[tokio::test]
async fn a_custom_rejection_does_not_answer_an_outage() {
    let teapot = |_: &sluice_tower::response::Rejection<'_>| {
        let mut response = http::Response::new(http_body_util::Full::new(bytes::Bytes::new()));
        *response.status_mut() = http::StatusCode::IM_A_TEAPOT;
        response
    };
    let layer = layer(DownStore::Decides(Source::FailedClosed)).on_rejection(teapot);
    assert_eq!(send(&app(layer), from_peer(PEER)).await.status(), 503);
}

#[tokio::test]
async fn grpc_requests_failing_closed_get_unavailable_with_retry_info() {
    use tonic_types::StatusExt;
    let mut request = from_peer(PEER);
    request.headers_mut().insert("content-type", "application/grpc".parse().unwrap());
    let response = send(&app(layer(DownStore::Decides(Source::FailedClosed))), request).await;
    let status = tonic::Status::from_header_map(response.headers()).unwrap();
    assert_eq!(status.code(), tonic::Code::Unavailable, "not RESOURCE_EXHAUSTED: no quota was spent");
    let retry = status.get_details_retry_info().and_then(|info| info.retry_delay);
    assert_eq!(retry, Some(Duration::from_secs(1)));
}

#[tokio::test]
async fn a_fallback_store_decides_with_fields() {
    let response = send(&app(layer(DownStore::Decides(Source::Fallback))), from_peer(PEER)).await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "ratelimit"), Some(r#""api";r=4;t=60"#));
}

#[tokio::test]
async fn a_store_that_cannot_decide_gets_503_by_default() {
    let response = send(&app(layer(DownStore::Error)), from_peer(PEER)).await;
    assert_eq!(response.status(), 503);
    assert_eq!(header(&response, "content-type"), Some("application/problem+json"));
    assert_eq!(header(&response, "retry-after"), Some("1"));
    let body = body_json(response).await;
    assert_eq!(body["detail"], "store unavailable");
    assert_eq!(body["type"], sluice_tower::response::STORE_UNAVAILABLE_TYPE);
}

#[tokio::test]
async fn a_store_that_cannot_decide_may_let_requests_through() {
    let app = app(layer(DownStore::Error).on_store_error(OnStoreError::Allow));
    let response = send(&app, from_peer(PEER)).await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "ratelimit"), None);
}

#[tokio::test]
async fn grpc_requests_to_a_store_that_cannot_decide_get_unavailable() {
    let mut request = from_peer(PEER);
    request.headers_mut().insert("content-type", "application/grpc+proto".parse().unwrap());
    let response = send(&app(layer(DownStore::Error)), request).await;
    let status = tonic::Status::from_header_map(response.headers()).unwrap();
    assert_eq!(status.code(), tonic::Code::Unavailable);
}

#[tokio::test]
async fn poll_ready_forwards_to_the_inner_service_only() {
    use tower::{Layer, Service, ServiceExt};
    let inner = tower::service_fn(|_: http::Request<String>| async {
        Ok::<_, std::convert::Infallible>(http::Response::new(http_body_util::Full::new(bytes::Bytes::new())))
    });
    let mut service = layer(DownStore::Error).layer(inner);
    // Ready at once, whatever the store: the decision happens in `call`.
    let ready = service.ready().await.unwrap();
    let _ = ready.get_ref();
    let response = ready.call(http::Request::new(String::new())).await.unwrap();
    assert_eq!(response.status(), 400, "no peer address: no key");
    let _inner = service.into_inner();
}
