//! Several policies per route (all or nothing), per-request costs, policies from YAML
//! (oneshot, ManualClock).

mod support;

use axum::body::Body;
use http::{Method, Request};
use sluice_core::Clock;
use sluice_tower::key::PeerIp;
use sluice_tower::{Policies, PolicyLookupError, RateLimitLayer};
use std::time::Duration;
use support::*;

const PEER: &str = "192.0.2.1:1000";

#[tokio::test]
async fn every_policy_must_allow_and_a_rejection_consumes_from_none() {
    let clock = clock();
    let per_second = sliding_log("per_second", 2, Duration::from_secs(1));
    let per_minute = sliding_log("per_minute", 3, Duration::from_secs(60));
    let app = app(RateLimitLayer::from_limiter(limiter([per_second, per_minute], clock.clone()), PeerIp::new()));
    assert_eq!(status(&app, from_peer(PEER)).await, 200);
    let response = send(&app, from_peer(PEER)).await;
    // Both allow: the fields are the most restrictive policy's (fewest remaining).
    assert_eq!(header(&response, "ratelimit"), Some(r#""per_second";r=0;t=1"#));
    let response = send(&app, from_peer(PEER)).await;
    assert_eq!(response.status(), 429);
    assert_eq!(header(&response, "ratelimit-policy"), Some(r#""per_second";q=2;w=1"#));
    clock.advance(Duration::from_secs(1));
    // The rejected request took nothing from `per_minute`: one is left.
    let response = send(&app, from_peer(PEER)).await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "ratelimit"), Some(r#""per_minute";r=0;t=60"#));
    let response = send(&app, from_peer(PEER)).await;
    assert_eq!(response.status(), 429);
    assert_eq!(header(&response, "retry-after"), Some("59"));
    assert!(body_json(response).await["detail"].as_str().unwrap().contains("`per_minute`"));
}

#[tokio::test]
async fn each_request_costs_what_the_closure_says() {
    let layer = RateLimitLayer::from_limiter(
        limiter([sliding_log("api", 10, Duration::from_secs(60))], clock()),
        PeerIp::new(),
    )
    .cost(|parts| if parts.method == Method::POST { 4 } else { 1 });
    let app = app(layer);
    let post = || {
        let mut request = from_peer(PEER);
        *request.method_mut() = Method::POST;
        request
    };
    let response = send(&app, post()).await;
    assert_eq!(header(&response, "ratelimit"), Some(r#""api";r=6;t=60"#));
    assert_eq!(status(&app, post()).await, 200);
    assert_eq!(status(&app, post()).await, 429, "2 left, 4 asked");
    assert_eq!(status(&app, from_peer(PEER)).await, 200, "a GET costs 1");
}

const SERVICE_FILE: &str = "
server:
  http: 0.0.0.0:8080
domains:
  web:
    descriptors: []
policies:
  per_second:
    algorithm: fixed_window
    limit: 2
    window: 1s
  per_day:
    algorithm: sliding_window
    limit: 1000
    window: 1d
  hourly_trial:
    algorithm: fixed_window
    limit: 1
    window: 1h
    shadow_mode: true
";

#[tokio::test]
async fn policies_come_from_the_services_yaml_file() {
    let policies = Policies::from_yaml(SERVICE_FILE).unwrap();
    assert_eq!(policies.limits().len(), 2);
    let clock = clock();
    let limits = policies.all_of(["per_second", "per_day"]).unwrap();
    let app = app(RateLimitLayer::from_limiter(limiter(limits, clock.clone()), PeerIp::new()));
    assert_eq!(status(&app, from_peer(PEER)).await, 200);
    assert_eq!(status(&app, from_peer(PEER)).await, 200);
    assert_eq!(status(&app, from_peer(PEER)).await, 429);
    clock.advance(Duration::from_secs(1));
    let response = send(&app, from_peer(PEER)).await;
    assert_eq!(response.status(), 200);
    assert!(clock.now() > START);
}

#[test]
fn yaml_problems_are_all_reported_with_their_paths() {
    let error = Policies::from_yaml("policies:\n  api:\n    algorithm: token_bucket\n    capacity: 0\n").unwrap_err();
    let message = error.to_string();
    assert!(message.contains("policies.api.capacity"), "{message}");
    assert!(message.contains("policies.api.refill_interval"), "{message}");
    assert!(Policies::from_yaml("server: {}\n").is_err());
    let policies = Policies::from_yaml(SERVICE_FILE).unwrap();
    assert_eq!(policies.limit("nope").unwrap_err().to_string(), "unknown policy `nope`");
}

#[test]
fn a_policy_in_shadow_mode_is_checked_but_not_handed_out() {
    let policies = Policies::from_yaml(SERVICE_FILE).unwrap();
    assert_eq!(policies.limit("hourly_trial"), Err(PolicyLookupError::ShadowMode("hourly_trial".to_owned())));
    assert!(policies.all_of(["per_second", "hourly_trial"]).is_err());
    assert!(policies.limits().iter().all(|limit| limit.name() != "hourly_trial"));
    let bad = SERVICE_FILE.replace("shadow_mode: true", "shadow_mode: maybe");
    let message = Policies::from_yaml(&bad).unwrap_err().to_string();
    assert!(message.contains("policies.hourly_trial.shadow_mode: must be true or false"), "{message}");
}

#[test]
fn the_services_example_file_reads() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-server/service.yaml")).unwrap();
    let policies = Policies::from_yaml(&text).unwrap();
    assert!(!policies.limits().is_empty());
}

#[tokio::test]
async fn one_layer_on_several_routes_shares_one_limit() {
    let layer = RateLimitLayer::from_limiter(
        limiter([sliding_log("shared", 1, Duration::from_secs(60))], clock()),
        PeerIp::new(),
    );
    let app = axum::Router::new()
        .route("/a", axum::routing::get(|| async { "a" }))
        .route("/b", axum::routing::get(|| async { "b" }))
        .layer(layer);
    let request = |path: &str| {
        let mut request = Request::get(path).body(Body::empty()).unwrap();
        request.extensions_mut().insert(axum::extract::ConnectInfo(PEER.parse::<std::net::SocketAddr>().unwrap()));
        request
    };
    assert_eq!(status(&app, request("/a")).await, 200);
    assert_eq!(status(&app, request("/b")).await, 429);
}

#[tokio::test]
async fn the_layer_keeps_its_states_in_the_limiter_store_on_the_limiter_clock() {
    // The memory store the limiter's builder made judges states by the manual clock: a
    // minute on it frees the key, whatever the system clock says.
    let clock = clock();
    let limiter = limiter([sliding_log("api", 1, Duration::from_secs(60))], clock.clone());
    let store = limiter.store().clone();
    let app = app(RateLimitLayer::from_limiter(limiter, PeerIp::new()));
    assert_eq!(status(&app, from_peer(PEER)).await, 200);
    assert_eq!(store.len(), 1, "the state is in the limiter's store");
    assert_eq!(status(&app, from_peer(PEER)).await, 429);
    clock.advance(Duration::from_secs(60));
    assert_eq!(store.sweep(), 1, "swept by the limiter's clock");
    assert_eq!(status(&app, from_peer(PEER)).await, 200);
}
