//! `sluice serve --store redis://…` end to end, against a real redis-server started on a
//! free loopback port: servers share limits through Redis, and follow their failure mode
//! while Redis is down.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sluice_test_support::redis::{ClosedPort, RedisServer};
use std::time::{Duration, Instant};
use support::server::Server;

const CONFIG: &str = r#"
policies:
  three_per_hour: {algorithm: fixed_window, limit: 3, window: 1h, alignment: anchored}
domains:
  - domain: edge
    descriptors:
      - key: user
        policy: three_per_hour
"#;

async fn check(server: &Server, key: &str) -> (StatusCode, Value) {
    let body = json!({"key": key, "policies": ["three_per_hour"]});
    let response = reqwest::Client::new().post(server.url("/v1/check")).json(&body).send().await.unwrap();
    let status = response.status();
    (status, response.json().await.unwrap())
}

async fn grpc(server: &Server, user: &str) -> Result<i32, tonic::Status> {
    grpc_response(server, user).await.map(|response| response.overall_code)
}

async fn grpc_response(server: &Server, user: &str) -> Result<RateLimitResponse, tonic::Status> {
    let mut client = RateLimitServiceClient::connect(format!("http://{}", server.grpc)).await.unwrap();
    let entries = vec![Entry { key: "user".into(), value: user.into() }];
    let descriptors = vec![RateLimitDescriptor { entries, ..RateLimitDescriptor::default() }];
    let request = RateLimitRequest { domain: "edge".into(), descriptors, hits_addend: 1 };
    client.should_rate_limit(request).await.map(tonic::Response::into_inner)
}

/// A server on `redis` whose checks fail after `timeout` (short where Redis is taken away,
/// so the test is quick; long where it is not, so no check fails open by chance on a
/// loaded machine).
fn start(redis: &RedisServer, mode: &str, timeout: &str) -> Server {
    Server::start(CONFIG, &["--store", &redis.url(), "--failure-mode", mode, "--redis-timeout", timeout])
}

#[tokio::test]
async fn two_servers_share_one_limit_through_redis() {
    let redis = RedisServer::start();
    let (a, b) = (start(&redis, "open", "5s"), start(&redis, "open", "5s"));
    assert_eq!(check(&a, "u").await.0, StatusCode::OK);
    assert_eq!(check(&b, "u").await.0, StatusCode::OK);
    let (status, body) = check(&a, "u").await;
    assert_eq!((status, body["remaining"].as_u64(), body["source"].as_str()), (StatusCode::OK, Some(0), Some("store")));
    assert_eq!(check(&b, "u").await.0, StatusCode::TOO_MANY_REQUESTS, "the limit holds across servers");
    assert_eq!(reqwest::get(a.url("/readyz")).await.unwrap().status(), StatusCode::OK);
    // The Envoy rule on the same policy counts on keys of its own.
    assert_eq!(grpc(&b, "u").await.unwrap(), 1, "OK");
    let reset = reqwest::Client::new().post(b.url("/v1/reset")).json(&json!({"key": "u"})).send().await.unwrap();
    assert_eq!(reset.status(), StatusCode::NO_CONTENT);
    assert_eq!(check(&a, "u").await.0, StatusCode::OK, "a reset through one server is seen by the other");
}

#[tokio::test]
async fn closed_mode_answers_503_and_unavailable_while_redis_is_down() {
    let mut redis = RedisServer::start();
    let server = start(&redis, "closed", "200ms");
    assert_eq!(check(&server, "u").await.0, StatusCode::OK);
    redis.kill();
    let started = Instant::now();
    let body = json!({"key": "u", "policies": ["three_per_hour"]});
    let response = reqwest::Client::new().post(server.url("/v1/check")).json(&body).send().await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(2), "no hang past the timeout");
    // An outage, as the tower layer answers it: `Retry-After` from the probe interval, no
    // rate-limit fields claiming a quota (issue 36.2).
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    let headers = response.headers().clone();
    assert_eq!(headers.get("retry-after").map(|value| value.to_str().unwrap()), Some("1"));
    for field in ["ratelimit", "ratelimit-policy", "x-ratelimit-remaining"] {
        assert!(headers.get(field).is_none(), "{field}: {headers:?}");
    }
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"], "store_unavailable", "{body}");
    assert_eq!(
        grpc(&server, "u").await.unwrap_err().code(),
        tonic::Code::Unavailable,
        "so Envoy's failure_mode_deny applies"
    );
    assert_eq!(reqwest::get(server.url("/readyz")).await.unwrap().status(), StatusCode::SERVICE_UNAVAILABLE);
    let metrics = reqwest::get(server.url("/metrics")).await.unwrap().text().await.unwrap();
    for line in [
        "sluice_decisions_without_store_total{source=\"failed_closed\"} 2",
        "sluice_store_errors_total{kind=\"unavailable\"} 2",
        "sluice_store_available 0",
        "sluice_store_outages_total 1",
    ] {
        assert!(metrics.lines().any(|metric| metric == line), "{line} in\n{metrics}");
    }
    server.wait_for_log("Redis unavailable (", Duration::from_secs(5));
    redis.restart();
    server.wait_for_log("checks were answered by the failure mode meanwhile", Duration::from_secs(10));
    let (status, body) = check(&server, "u").await;
    assert_eq!((status, body["source"].as_str()), (StatusCode::OK, Some("store")), "{body}");
    assert_eq!(reqwest::get(server.url("/readyz")).await.unwrap().status(), StatusCode::OK);
}

/// A failed-open answer claims no quota nobody read: no rate-limit fields and `remaining`
/// null over HTTP, no `current_limit` (so no `x-ratelimit-*` from Envoy) over RLS.
#[tokio::test]
async fn open_mode_allows_and_says_so_while_redis_is_down() {
    let mut redis = RedisServer::start();
    let server = start(&redis, "open", "200ms");
    redis.kill();
    let body = json!({"key": "u", "policies": ["three_per_hour"]});
    let response = reqwest::Client::new().post(server.url("/v1/check")).json(&body).send().await.unwrap();
    let fields = ["ratelimit", "ratelimit-policy", "x-ratelimit-remaining", "x-ratelimit-limit"];
    assert!(fields.iter().all(|field| response.headers().get(*field).is_none()), "{:?}", response.headers());
    let (status, body): (StatusCode, Value) = (response.status(), response.json().await.unwrap());
    assert_eq!((status, body["source"].as_str()), (StatusCode::OK, Some("failed_open")));
    assert!(body["remaining"].is_null(), "{body}");
    let status = &grpc_response(&server, "u").await.unwrap().statuses[0];
    assert_eq!((status.code, status.current_limit.as_ref(), status.limit_remaining), (1, None, 0), "{status:?}");
    let metrics = reqwest::get(server.url("/metrics")).await.unwrap().text().await.unwrap();
    assert!(metrics.contains("sluice_decisions_without_store_total{source=\"failed_open\"} 2"), "{metrics}");
}

/// A server started while Redis cannot be reached starts anyway (no crash loop during an
/// outage), says so in its log, answers by its failure mode at once, and is ready as that
/// mode means: `open` and `fallback` serve, `closed` does not.
#[tokio::test]
async fn a_server_starts_during_an_outage_and_follows_its_failure_mode() {
    let closed = ClosedPort::bind();
    let url = format!("redis://127.0.0.1:{}", closed.port());
    for (mode, check_status, ready) in [
        ("open", StatusCode::OK, StatusCode::OK),
        ("fallback", StatusCode::OK, StatusCode::OK),
        ("closed", StatusCode::SERVICE_UNAVAILABLE, StatusCode::SERVICE_UNAVAILABLE),
    ] {
        let server = Server::start(CONFIG, &["--store", &url, "--failure-mode", mode, "--redis-timeout", "5s"]);
        server.wait_for_log("Redis unavailable (connection", Duration::from_secs(5));
        let started = Instant::now();
        let (status, body) = check(&server, "u").await;
        assert!(started.elapsed() < Duration::from_secs(2), "{mode}: the check waited for Redis");
        assert_eq!(status, check_status, "{mode}: {body}");
        let readyz = reqwest::get(server.url("/readyz")).await.unwrap();
        assert_eq!(readyz.status(), ready, "{mode}");
        let text = readyz.text().await.unwrap();
        assert!(text.contains(&format!("failure mode `{mode}`")), "{mode}: {text}");
        let metrics = reqwest::get(server.url("/metrics")).await.unwrap().text().await.unwrap();
        assert!(metrics.contains("sluice_store_available 0"), "{mode}: {metrics}");
        assert!(metrics.contains("sluice_store_errors_total{kind=\"unavailable\"} 1"), "{mode}: {metrics}");
        assert!(!metrics.contains("sluice_redis_errors_total{cause=\"connection\"} 0"), "{mode}: {metrics}");
    }
}

/// Shadow mode is never enforced, not even by the `closed` failure mode: with Redis down,
/// a check of shadow policies only answers 200 (`shadow_rejected`), an Envoy rule in shadow
/// mode `OK`; a check that also names an enforced policy still answers 503.
#[tokio::test]
async fn shadow_mode_never_blocks_while_redis_is_down_in_closed_mode() {
    const SHADOW_CONFIG: &str = r#"
policies:
  three_per_hour: {algorithm: fixed_window, limit: 3, window: 1h, alignment: anchored}
  trial: {algorithm: fixed_window, limit: 3, window: 1h, alignment: anchored, shadow_mode: true}
domains:
  - domain: edge
    descriptors:
      - key: user
        shadow_mode: true
        rate_limit: {unit: hour, requests_per_unit: 3}
"#;
    let mut redis = RedisServer::start();
    let server = Server::start(
        SHADOW_CONFIG,
        &["--store", &redis.url(), "--failure-mode", "closed", "--redis-timeout", "200ms"],
    );
    redis.kill();
    let check = |policies: Value| {
        let body = json!({"key": "u", "policies": policies});
        reqwest::Client::new().post(server.url("/v1/check")).json(&body).send()
    };
    let response = check(json!(["trial"])).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        (body["shadow_rejected"].as_bool(), body["source"].as_str()),
        (Some(true), Some("failed_closed")),
        "{body}"
    );
    let both = check(json!(["three_per_hour", "trial"])).await.unwrap();
    assert_eq!(both.status(), StatusCode::SERVICE_UNAVAILABLE, "the enforced policy fails closed");
    assert_eq!(grpc(&server, "u").await.unwrap(), 1, "OK: the rule is in shadow mode");
}
