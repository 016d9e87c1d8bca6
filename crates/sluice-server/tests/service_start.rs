//! Start-up readiness on Redis Sentinel and Redis Cluster: `sluice serve --workers 16`
//! prints "listening" only once every worker can decide through Redis, so the first checks
//! after a start are decided by Redis, never by the failure mode, whichever worker takes
//! them. Each store is started 20 times, each start's first 20 checks sent at once (so
//! that they spread over the workers), under the `closed` failure mode, where a check the
//! failure mode answered would be a 503.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use futures_util::future::join_all;
use reqwest::StatusCode;
use serde_json::json;
use sluice_test_support::redis::{RedisCluster, RedisServer};
use std::time::{Duration, Instant};
use support::server::Server;

const CONFIG: &str = "policies:\n  generous: {algorithm: fixed_window, limit: 1000000, window: 1h}\n";

/// Starts per store.
const STARTS: usize = 20;
/// Checks sent at once after each start.
const FIRST_CHECKS: usize = 20;
/// How long the starts of one store may take together.
const BOUND: Duration = Duration::from_secs(50);

/// Starts `sluice serve` on `store` [`STARTS`] times; after each, the first checks and
/// `/readyz` must be answered by Redis.
async fn first_checks_are_decided_by_redis(store: &str) {
    let began = Instant::now();
    let client = reqwest::Client::new();
    for start in 0..STARTS {
        let args = ["--store", store, "--workers", "16", "--failure-mode", "closed", "--redis-timeout", "2s"];
        let server = Server::start(CONFIG, &args);
        let checks = (0..FIRST_CHECKS).map(|i| {
            let body = json!({"key": format!("start-{start}-{i}"), "policies": ["generous"]});
            // A connection each: the service hands connections to its workers in turn.
            let client = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
            let url = server.url("/v1/check");
            async move {
                let response = client.post(url).json(&body).send().await.unwrap();
                (response.status(), response.json::<serde_json::Value>().await.unwrap())
            }
        });
        for (status, body) in join_all(checks).await {
            assert_eq!((status, body["source"].as_str()), (StatusCode::OK, Some("store")), "start {start}: {body}");
        }
        let ready = client.get(server.url("/readyz")).send().await.unwrap();
        assert_eq!(ready.status(), StatusCode::OK, "start {start}: {}", ready.text().await.unwrap());
        assert!(began.elapsed() < BOUND, "{} starts took {:?}", start + 1, began.elapsed());
    }
    eprintln!("{store}: {STARTS} starts, every first check decided by Redis, in {:?}", began.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_checks_after_a_start_on_sentinel_are_decided_by_redis() {
    let primary = RedisServer::start();
    let sentinel = RedisServer::start_sentinel(primary.port(), "sluice-primary");
    let store = format!("redis+sentinel://127.0.0.1:{}/sluice-primary", sentinel.port());
    first_checks_are_decided_by_redis(&store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_checks_after_a_start_on_a_cluster_are_decided_by_redis() {
    let cluster = RedisCluster::start();
    let nodes: Vec<String> = cluster.ports().iter().map(|port| format!("127.0.0.1:{port}")).collect();
    first_checks_are_decided_by_redis(&format!("redis+cluster://{}", nodes.join(","))).await;
}
