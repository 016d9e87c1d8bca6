//! Hot reload of the real `sluice serve`: a changed file is picked up, unchanged policies
//! keep their state, changed ones start fresh, an invalid file is refused and the old
//! configuration keeps serving; SIGHUP reloads too.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use reqwest::StatusCode;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use support::server::Server;

/// Anchored at the first request, not aligned to the clock: the turn of an hour during a
/// test does not empty the window that the test counts on.
const ONE_PER_HOUR: &str = "policies:\n  p: {algorithm: fixed_window, limit: 1, window: 1h, alignment: anchored}\n";

async fn status(server: &Server, policy: &str) -> StatusCode {
    let body = json!({"key": "k", "policies": [policy]});
    reqwest::Client::new().post(server.url("/v1/check")).json(&body).send().await.unwrap().status()
}

async fn metrics(server: &Server) -> String {
    reqwest::get(server.url("/metrics")).await.unwrap().text().await.unwrap()
}

/// Waits until `/metrics` contains `needle` (reloads are asynchronous).
async fn wait_for_metric(server: &Server, needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !metrics(server).await.contains(needle) {
        assert!(Instant::now() < deadline, "{needle} never appeared; log:\n{}", server.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_changed_file_is_reloaded_keeping_unchanged_state() {
    let server = Server::start(ONE_PER_HOUR, &[]);
    assert_eq!(status(&server, "p").await, StatusCode::OK);
    assert_eq!(status(&server, "p").await, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(status(&server, "q").await, StatusCode::NOT_FOUND);

    server.write_config(&format!("{ONE_PER_HOUR}  q: {{algorithm: sliding_log, limit: 5, window: 1s}}\n"));
    wait_for_metric(&server, "sluice_config_reloads_total{result=\"ok\"} 1").await;
    assert_eq!(status(&server, "q").await, StatusCode::OK, "the new policy is served");
    assert_eq!(status(&server, "p").await, StatusCode::TOO_MANY_REQUESTS, "the unchanged policy kept its state");

    server.write_config(&ONE_PER_HOUR.replace("limit: 1,", "limit: 2,"));
    wait_for_metric(&server, "sluice_config_reloads_total{result=\"ok\"} 2").await;
    assert_eq!(status(&server, "p").await, StatusCode::OK, "a changed policy starts fresh");
    assert_eq!(status(&server, "q").await, StatusCode::NOT_FOUND, "a removed policy is gone");
}

#[tokio::test]
async fn an_invalid_file_is_refused_and_the_old_one_keeps_serving() {
    let server = Server::start(ONE_PER_HOUR, &[]);
    assert_eq!(status(&server, "p").await, StatusCode::OK);
    server.write_config("policies:\n  p: {algorithm: fixed_window, limit: 0, window: 1h}\n");
    wait_for_metric(&server, "sluice_config_reloads_total{result=\"failed\"} 1").await;
    assert_eq!(status(&server, "p").await, StatusCode::TOO_MANY_REQUESTS, "the old policy and its state stay");
    assert!(server.log().contains("policies.p.limit"), "the log names the problem:\n{}", server.log());
    let reload = reqwest::Client::new().post(server.url("/v1/reload")).send().await.unwrap();
    assert_eq!(reload.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let body: Value = reload.json().await.unwrap();
    assert!(body["message"].as_str().unwrap().contains("policies.p.limit"), "{body}");
    server.write_config("policies: [not a mapping\n");
    wait_for_metric(&server, "sluice_config_reloads_total{result=\"failed\"} 3").await;
    assert_eq!(reqwest::get(server.url("/healthz")).await.unwrap().status(), StatusCode::OK);
}

#[tokio::test]
async fn sighup_and_the_admin_endpoint_reload() {
    let server = Server::start(ONE_PER_HOUR, &[]);
    server.signal("HUP");
    wait_for_metric(&server, "sluice_config_reloads_total{result=\"ok\"} 1").await;
    let reload = reqwest::Client::new().post(server.url("/v1/reload")).send().await.unwrap();
    assert_eq!(reload.status(), StatusCode::NO_CONTENT);
    wait_for_metric(&server, "sluice_config_reloads_total{result=\"ok\"} 2").await;
}
