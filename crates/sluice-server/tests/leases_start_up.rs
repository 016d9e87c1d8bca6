//! What `sluice serve` says of its leases when it starts: whether they are on, their
//! period, and each policy that never gets one with why, in the start-up lines and in
//! `/metrics` (`sluice_lease_never_leased`).
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use serde_json::{Value, json};
use sluice_test_support::redis::RedisServer;
use support::server::Server;

/// Three policies whose whole quota is 4 or less, and one that can be leased.
const CONFIG: &str = "policies:
  tiny: {algorithm: fixed_window, limit: 4, window: 1h}
  single: {algorithm: token_bucket, capacity: 1, refill_amount: 1, refill_interval: 1h}
  strict: {algorithm: leaky_bucket, interval: 1h, burst: 0}
  api: {algorithm: fixed_window, limit: 100, window: 1h}
";

const NEVER_LEASED: [(&str, u64); 3] = [("tiny", 4), ("single", 1), ("strict", 1)];

async fn metrics(server: &Server) -> String {
    reqwest::get(server.url("/metrics")).await.unwrap().text().await.unwrap()
}

#[tokio::test]
async fn the_start_up_lines_and_metrics_name_the_period_and_each_policy_never_leased() {
    let redis = RedisServer::start();
    let server = Server::start(CONFIG, &["--store", &redis.url(), "--lease-period", "100ms"]);
    let lines = server.start_up_lines();
    assert!(lines.contains("\nleases on: period 100 ms\n"), "{lines}");
    let rendered = metrics(&server).await;
    for (policy, quota) in NEVER_LEASED {
        let line = format!(
            "\n  policy {policy} gets no lease: its whole quota ({quota}) is 4 or less, and a lease takes at most a \
             quarter of what remains after a request\n"
        );
        assert!(lines.contains(&line), "{line} not in:\n{lines}");
        let series = format!("\nsluice_lease_never_leased{{policy=\"{policy}\",reason=\"small_quota\"}} 1\n");
        assert!(rendered.contains(&series), "{series} not in:\n{rendered}");
    }
    assert!(
        !lines.contains("policy api gets no lease") && !rendered.contains("never_leased{policy=\"api\""),
        "{rendered}"
    );
    // And none is: every check of `tiny` is the store's (or its blocked-key cache's).
    let client = reqwest::Client::new();
    for _ in 0..8 {
        let body = json!({"key": "tenant", "policies": ["tiny"]});
        let answer: Value =
            client.post(server.url("/v1/check")).json(&body).send().await.unwrap().json().await.unwrap();
        assert!(matches!(answer["source"].as_str(), Some("store" | "cache")), "{answer}");
    }
    let rendered = metrics(&server).await;
    assert!(rendered.contains("\nsluice_lease_checks_total 0\n"), "{rendered}");
}

#[tokio::test]
async fn without_a_lease_period_the_start_up_lines_say_leases_are_off() {
    let redis = RedisServer::start();
    let server = Server::start(CONFIG, &["--store", &redis.url()]);
    let lines = server.start_up_lines();
    assert!(lines.contains("\nleases off\n") && !lines.contains("gets no lease"), "{lines}");
    assert!(!metrics(&server).await.contains("sluice_lease_never_leased{"));
    let embedded = Server::start(CONFIG, &[]);
    assert!(!embedded.start_up_lines().contains("leases"), "{}", embedded.start_up_lines());
}
