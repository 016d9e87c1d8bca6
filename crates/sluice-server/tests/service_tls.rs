//! `sluice serve --store rediss://…` with `--redis-ca-file`, against a real redis-server on
//! a TLS port with certificates the test makes: the service decides through Redis, and one
//! given a CA that did not sign Redis's certificate logs the certificate error as its
//! outage's cause.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

#[path = "../../sluice-redis/tests/support/certificates.rs"]
mod certificates;
#[path = "../../sluice-redis/tests/support/redis.rs"]
mod redis_support;
mod support;

use certificates::Certificates;
use redis_support::RedisServer;
use serde_json::{Value, json};
use std::time::Duration;
use support::server::Server;

const CONFIG: &str = "policies:\n  three: {algorithm: fixed_window, limit: 3, window: 1h, alignment: anchored}\n";

async fn check(server: &Server) -> Value {
    let body = json!({"key": "u", "policies": ["three"]});
    let response = reqwest::Client::new().post(server.url("/v1/check")).json(&body).send().await.unwrap();
    response.json().await.unwrap()
}

#[tokio::test]
async fn a_service_on_redis_over_tls_verifies_it_with_the_ca_file() {
    let certs = Certificates::make();
    let redis = RedisServer::start_tls(&certs.dir, "no");
    let url = format!("rediss://127.0.0.1:{}/", redis.tls_port().unwrap());
    let ca = certs.path("ca.pem").display().to_string();
    let server = Server::start(CONFIG, &["--store", &url, "--redis-ca-file", &ca, "--redis-timeout", "5s"]);
    let body = check(&server).await;
    assert_eq!((body["source"].as_str(), body["remaining"].as_u64()), (Some("store"), Some(2)), "{body}");

    let other = certs.path("other-ca.pem").display().to_string();
    let refused = Server::start(CONFIG, &["--store", &url, "--redis-ca-file", &other, "--failure-mode", "closed"]);
    refused.wait_for_log("Redis unavailable (connection", Duration::from_secs(10));
    let log = refused.log();
    assert!(log.contains("invalid peer certificate"), "{log}");
    assert_eq!(check(&refused).await["error"], "store_unavailable");
}
