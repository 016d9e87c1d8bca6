//! `sluice serve` on a Redis Cluster of three masters and their replicas when a master is
//! killed (`closed` failure mode, 4 workers): one outage, of that master's slots only, in
//! every place it shows. Its keys answer 503 while it is down and the healthy masters'
//! keys are decided by Redis; `/readyz` stays 200 and names the master; the metrics say
//! which master is down; the log has one line when its outage starts and one when its
//! slots are served by the promoted replica, and none of redis-rs's Cluster client's own
//! warnings.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use reqwest::StatusCode;
use serde_json::{Value, json};
use sluice_test_support::failover_cluster::FailoverCluster;
use std::time::{Duration, Instant};
use support::server::Server;

const CONFIG: &str = "policies:\n  generous: {algorithm: fixed_window, limit: 1000000, window: 1h}\n";
/// How long a condition may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(30);

async fn check(server: &Server, key: &str) -> (StatusCode, Value) {
    let body = json!({"key": key, "policies": ["generous"]});
    let response = reqwest::Client::new().post(server.url("/v1/check")).json(&body).send().await.unwrap();
    (response.status(), response.json().await.unwrap())
}

async fn get(server: &Server, path: &str) -> (StatusCode, String) {
    let response = reqwest::get(server.url(path)).await.unwrap();
    (response.status(), response.text().await.unwrap())
}

/// Checks `key` every 20 ms until it answers `status` with `field` = `value` in the body
/// (`source` of a decision, `error` of a 503).
async fn until_answered(server: &Server, key: &str, status: StatusCode, (field, value): (&str, &str)) {
    let started = Instant::now();
    loop {
        let (answered, body) = check(server, key).await;
        if (answered, body[field].as_str()) == (status, Some(value)) {
            return;
        }
        assert!(started.elapsed() < PATIENCE, "{key}: never {status} with {field} {value}; last {answered} {body}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_master_is_one_outage_of_its_slots_in_answers_readyz_metrics_and_logs() {
    let mut cluster = FailoverCluster::start(Duration::from_millis(1000), false);
    let nodes: Vec<String> =
        cluster.urls().iter().map(|url| url.trim_start_matches("redis://").trim_end_matches('/').to_owned()).collect();
    let store = format!("redis+cluster://{}", nodes.join(","));
    let server = Server::start(
        CONFIG,
        &["--store", &store, "--workers", "4", "--failure-mode", "closed", "--redis-timeout", "500ms"],
    );
    let slot = cluster.slot_of("user-0");
    let victim = cluster.master_of(slot).unwrap();
    let healthy = (1..100)
        .map(|i| format!("user-{i}"))
        .find(|key| cluster.master_of(cluster.slot_of(key)) != Some(victim))
        .unwrap();
    assert_eq!(check(&server, "user-0").await.1["source"], "store");

    cluster.kill(victim);
    until_answered(&server, "user-0", StatusCode::SERVICE_UNAVAILABLE, ("error", "store_unavailable")).await;
    let (status, body) = check(&server, &healthy).await;
    assert_eq!((status, body["source"].as_str()), (StatusCode::OK, Some("store")), "{body}");
    let (ready, text) = get(&server, "/readyz").await;
    assert_eq!(ready, StatusCode::OK, "{text}");
    assert!(text.contains(&format!("masters unavailable: 127.0.0.1:{victim} (slots ")), "{text}");
    let (_, metrics) = get(&server, "/metrics").await;
    let down = format!("sluice_redis_node_available{{node=\"127.0.0.1:{victim}\",slots=");
    assert!(metrics.lines().any(|line| line.starts_with(&down) && line.ends_with(" 0")), "{metrics}");
    assert!(metrics.contains("sluice_store_available 0"), "{metrics}");

    let cluster = tokio::task::spawn_blocking(move || {
        cluster.wait_until("a replica promoted", |cluster| cluster.master_of(slot).is_some_and(|port| port != victim));
        cluster
    })
    .await
    .unwrap();
    until_answered(&server, "user-0", StatusCode::OK, ("source", "store")).await;
    server.wait_for_log("its slots are served by", Duration::from_secs(5));
    let (ready, text) = get(&server, "/readyz").await;
    assert_eq!((ready, text.as_str()), (StatusCode::OK, "ready\n"));
    let (_, metrics) = get(&server, "/metrics").await;
    assert!(
        metrics.contains("sluice_store_available 1") && metrics.contains("sluice_store_outages_total 1"),
        "{metrics}"
    );
    assert!(!metrics.contains(&down), "the killed master is no longer listed: {metrics}");
    let log = server.log();
    let started: Vec<&str> = log.lines().filter(|line| line.contains("Redis unavailable")).collect();
    let ended: Vec<&str> = log.lines().filter(|line| line.contains("Redis outage over")).collect();
    assert_eq!((started.len(), ended.len()), (1, 1), "one log pair for the outage:\n{log}");
    assert!(started[0].contains(&format!("node 127.0.0.1:{victim} (slots")), "{log}");
    eprintln!("{}\n{}", started[0], ended[0]);
    assert!(!log.contains("ClusterConnInner") && !log.contains("cluster client recovery"), "redis-rs warnings:\n{log}");
    drop(cluster);
}
