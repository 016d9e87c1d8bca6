//! `sluice serve --store rediss://…` with `--redis-ca-file`, against a real redis-server on
//! a TLS port with certificates the test makes: the service decides through Redis (also
//! with a self-signed certificate made by `openssl req -x509`, given as the CA file), and
//! one given a CA that did not sign Redis's certificate does not start, saying what to do.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use serde_json::{Value, json};
use sluice_test_support::certificates::Certificates;
use sluice_test_support::redis::RedisServer;
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
    let dir = support::server::fresh_dir("tls-refused");
    std::fs::write(dir.join("config.yaml"), CONFIG).unwrap();
    let error = Server::try_start_in(dir, &["--store", &url, "--redis-ca-file", &other])
        .err()
        .expect("a Redis whose certificate is not trusted is a configuration error, not an outage");
    assert!(error.contains("exit status: 2"), "{error}");
    assert!(error.contains("refuses Sluice's configuration"), "{error}");
    assert!(error.contains("not signed by a CA Sluice trusts") && error.contains("--redis-ca-file"), "{error}");
}

/// Issue 36.1: the certificate Redis's TLS docs have users make, given as the CA file.
#[tokio::test]
async fn a_self_signed_certificate_made_by_openssl_is_trusted_when_given() {
    let certs = Certificates::self_signed_by_openssl();
    let redis = RedisServer::start_tls(&certs.dir, "no");
    let url = format!("rediss://localhost:{}/", redis.tls_port().unwrap());
    let ca = certs.path("ca.pem").display().to_string();
    let server = Server::start(CONFIG, &["--store", &url, "--redis-ca-file", &ca, "--redis-timeout", "5s"]);
    let body = check(&server).await;
    assert_eq!((body["source"].as_str(), body["remaining"].as_u64()), (Some("store"), Some(2)), "{body}");
}

/// `#insecure` works, and says in the log what it gives up.
#[tokio::test]
async fn the_insecure_fragment_is_warned_about() {
    let certs = Certificates::make();
    let redis = RedisServer::start_tls(&certs.dir, "no");
    let url = format!("rediss://127.0.0.1:{}/#insecure", redis.tls_port().unwrap());
    let server = Server::start(CONFIG, &["--store", &url, "--redis-timeout", "5s"]);
    assert_eq!(check(&server).await["source"], "store");
    server.wait_for_log("#insecure: Redis's certificate is not verified", Duration::from_secs(10));
}
