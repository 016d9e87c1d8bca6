//! Which requests a per-route layer charges. axum's `MethodRouter::layer` wraps the method
//! router's fallback too, so a request of a method the route does not serve is charged and
//! may be answered 429 instead of 405; `route_layer` wraps only the handlers, so exactly the
//! requests a handler serves are charged. The README and the example use `route_layer`.

mod support;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::routing::{get, post};
use http::{Method, Request};
use sluice_tower::RateLimitLayer;
use sluice_tower::key::PeerIp;
use std::net::SocketAddr;
use std::time::Duration;
use support::*;

fn layer(limit: u64) -> RateLimitLayer<sluice_core::MemoryStore, sluice_core::ManualClock> {
    RateLimitLayer::from_limiter(
        limiter([sliding_log("route", limit, Duration::from_secs(60))], clock()),
        PeerIp::new(),
    )
}

fn request(method: Method, path: &str) -> Request<Body> {
    let mut request = Request::builder().method(method).uri(path).body(Body::empty()).expect("a request");
    request.extensions_mut().insert(ConnectInfo("192.0.2.1:1000".parse::<SocketAddr>().expect("an address")));
    request
}

#[tokio::test]
async fn route_layer_charges_only_the_requests_a_handler_serves() {
    let app = Router::new()
        .route("/api", get(|| async { "ok" }).route_layer(layer(2)))
        .route("/login", post(|| async { "welcome" }).route_layer(layer(1)));
    assert_eq!(status(&app, request(Method::POST, "/api")).await, 405);
    assert_eq!(status(&app, request(Method::DELETE, "/api")).await, 405);
    // Neither 405 used the quota: both GETs pass.
    assert_eq!(status(&app, request(Method::GET, "/api")).await, 200);
    assert_eq!(status(&app, request(Method::GET, "/api")).await, 200);
    assert_eq!(status(&app, request(Method::GET, "/api")).await, 429);
    assert_eq!(status(&app, request(Method::POST, "/login")).await, 200);
    assert_eq!(status(&app, request(Method::POST, "/login")).await, 429);
    assert_eq!(status(&app, request(Method::GET, "/login")).await, 405, "a wrong method is a 405, limited or not");
}

#[tokio::test]
async fn layer_on_a_method_router_charges_its_405s_too() {
    let app = Router::new()
        .route("/api", get(|| async { "ok" }).layer(layer(2)))
        .route("/login", post(|| async { "welcome" }).layer(layer(1)));
    assert_eq!(status(&app, request(Method::POST, "/api")).await, 405);
    assert_eq!(status(&app, request(Method::GET, "/api")).await, 200);
    assert_eq!(status(&app, request(Method::GET, "/api")).await, 429, "the 405 used one of the two");
    assert_eq!(status(&app, request(Method::POST, "/login")).await, 200);
    assert_eq!(status(&app, request(Method::GET, "/login")).await, 429, "rejected before the router's 405");
}
