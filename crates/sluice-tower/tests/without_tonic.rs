//! Without the `tonic` feature, gRPC requests are answered as HTTP ones: 429 with a
//! `problem+json` body (with it, `RESOURCE_EXHAUSTED`: tests/responses.rs).
#![cfg(not(feature = "tonic"))]
#![allow(clippy::unwrap_used)]

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use sluice_core::{Limit, SlidingLog, SlidingLogVariant};
use sluice_tower::RateLimitLayer;
use sluice_tower::key::HeaderKey;
use std::convert::Infallible;
use std::time::Duration;
use tower::{Layer, ServiceExt, service_fn};

#[tokio::test]
async fn a_rejected_grpc_request_gets_429_and_problem_json() {
    let one = Limit::new("one", SlidingLog::new(1, Duration::from_secs(60), SlidingLogVariant::Accepted).unwrap());
    let layer = RateLimitLayer::new(one, HeaderKey::new(http::HeaderName::from_static("x-user")));
    let service = layer
        .layer(service_fn(|_: Request<Full<Bytes>>| async { Ok::<_, Infallible>(Response::new(Full::from("ok"))) }));
    let grpc = || {
        Request::post("/pkg.Service/Method")
            .header("content-type", "application/grpc")
            .header("x-user", "alice")
            .body(Full::default())
            .unwrap()
    };
    assert_eq!(service.clone().oneshot(grpc()).await.unwrap().status(), 200);
    let rejected = service.oneshot(grpc()).await.unwrap();
    assert_eq!(rejected.status(), 429);
    assert_eq!(rejected.headers()["content-type"], "application/problem+json");
}
