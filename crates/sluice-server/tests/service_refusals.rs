//! A Redis that refuses Sluice's configuration is not an outage (issue 35.5): `sluice serve`
//! does not start on one (exit 2, the cause and the fix), and one met later (an ACL
//! changed at run time) makes `/readyz` answer 503 in every failure mode, logs an error and
//! counts it, until it is mended. Real redis-server, real binary.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use reqwest::StatusCode;
use serde_json::json;
use sluice_test_support::redis::{RedisServer, query};
use std::time::{Duration, Instant};
use support::server::{Server, fresh_dir};

const CONFIG: &str = "policies:\n  p: {algorithm: fixed_window, limit: 1000, window: 1h}\n";
const ACL: &str = "ACL SETUSER sluice on >s3cret resetkeys ~sluice:* resetchannels -@all \
    +evalsha +script|load +ping +hello +get +set +getrange +setrange +pexpire +time +del +command";

fn refused_at_start(args: &[&str]) -> String {
    let dir = fresh_dir("refused");
    std::fs::write(dir.join("config.yaml"), CONFIG).unwrap();
    Server::try_start_in(dir, args).err().expect("the server must not start on a configuration Redis refuses")
}

#[test]
fn a_wrong_password_or_an_acl_without_evalsha_stops_the_server_at_start() {
    let redis = RedisServer::start();
    assert_eq!(query(redis.port(), &[ACL]).unwrap(), ["+OK"]);
    let wrong = format!("redis://sluice:wrong@127.0.0.1:{}/", redis.port());
    let error = refused_at_start(&["--store", &wrong]);
    assert!(error.contains("exit status: 2") && error.contains("user or password"), "{error}");
    assert!(!error.contains(":wrong@"), "the password is not shown: {error}");
    assert_eq!(query(redis.port(), &["ACL SETUSER sluice -evalsha"]).unwrap(), ["+OK"]);
    let url = format!("redis://sluice:s3cret@127.0.0.1:{}/", redis.port());
    for mode in ["open", "closed", "fallback"] {
        let error = refused_at_start(&["--store", &url, "--failure-mode", mode]);
        assert!(error.contains("exit status: 2") && error.contains("ACL denies"), "{mode}: {error}");
    }
}

async fn get(server: &Server, path: &str) -> (StatusCode, String) {
    let response = reqwest::get(server.url(path)).await.unwrap();
    (response.status(), response.text().await.unwrap())
}

/// Checks (which drive the store's probe) until `/readyz` answers `status`, for at most 10 s.
async fn until_ready_is(server: &Server, status: StatusCode) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let body = json!({"key": "u", "policies": ["p"]});
        reqwest::Client::new().post(server.url("/v1/check")).json(&body).send().await.unwrap();
        let (now, text) = get(server, "/readyz").await;
        if now == status {
            return text;
        }
        assert!(Instant::now() < deadline, "/readyz still {now}: {text}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn an_acl_changed_at_run_time_makes_the_server_not_ready_until_mended() {
    let redis = RedisServer::start();
    assert_eq!(query(redis.port(), &[ACL]).unwrap(), ["+OK"]);
    let url = format!("redis://sluice:s3cret@127.0.0.1:{}/", redis.port());
    let server = Server::start(CONFIG, &["--store", &url, "--redis-timeout", "5s"]);
    assert_eq!(get(&server, "/readyz").await.0, StatusCode::OK);
    assert_eq!(query(redis.port(), &["ACL SETUSER sluice -evalsha"]).unwrap(), ["+OK"]);
    let text = until_ready_is(&server, StatusCode::SERVICE_UNAVAILABLE).await;
    assert!(text.contains("refuses Sluice's configuration") && text.contains("ACL denies"), "{text}");
    server.wait_for_log("ERROR", Duration::from_secs(5));
    assert!(server.log().contains("Redis refuses Sluice's configuration"), "{}", server.log());
    let metrics = get(&server, "/metrics").await.1;
    assert!(metrics.contains("sluice_store_refused 1"), "{metrics}");
    assert!(!metrics.contains("sluice_redis_refusals_total 0"), "{metrics}");
    assert_eq!(query(redis.port(), &["ACL SETUSER sluice +evalsha"]).unwrap(), ["+OK"]);
    until_ready_is(&server, StatusCode::OK).await;
    assert!(get(&server, "/metrics").await.1.contains("sluice_store_refused 0"));
}

#[test]
fn a_primary_name_no_sentinel_knows_stops_the_server_at_start() {
    let primary = RedisServer::start();
    let sentinel = RedisServer::start_sentinel(primary.port(), "known");
    let store = format!("redis+sentinel://127.0.0.1:{}/mistyped", sentinel.port());
    let error = refused_at_start(&["--store", &store]);
    assert!(error.contains("exit status: 2") && error.contains("know no primary named `mistyped`"), "{error}");
}
