//! The `axum_redis` example, two instances started as processes on a real `redis-server`
//! (on a free loopback port) and driven over real sockets: they share one limit, and
//! answer an outage as one when Redis is gone.

mod support;

use sluice_test_support::redis::RedisServer;
use std::time::{Duration, Instant};
use support::example::Example;

/// Two instances of the example on `redis`.
fn instances(redis: &RedisServer) -> [Example; 2] {
    let url = redis.url();
    let env = [("REDIS_URL", url.as_str())];
    [Example::start("axum_redis", &env), Example::start("axum_redis", &env)]
}

#[tokio::test]
async fn two_instances_share_five_per_ten_seconds() {
    let redis = RedisServer::start();
    let instances = instances(&redis);
    let client = reqwest::Client::new();
    let first = Instant::now();
    let mut allowed = 0;
    // Alternating between the instances: the limit is counted once, in Redis.
    let rejection = loop {
        let response = client.get(instances[allowed % 2].url("/hello")).send().await.expect("GET /hello");
        if response.status() == 429 {
            break response;
        }
        assert_eq!(response.status(), 200);
        allowed += 1;
        // More than 5 can pass only if the first left the 10 s window meanwhile.
        assert!(allowed <= 5 || first.elapsed() >= Duration::from_secs(10), "{allowed} in {:?}", first.elapsed());
    };
    assert!(allowed == 5 || first.elapsed() >= Duration::from_secs(10), "{allowed} in {:?}", first.elapsed());
    assert!(rejection.headers()["ratelimit"].to_str().unwrap().starts_with(r#""hello";r=0;"#));
}

/// A client new to both instances while Redis is gone. (A client Redis had already
/// rejected keeps its 429 until its wait is over: each instance remembers the rejections
/// Redis gave, which stay true.)
#[tokio::test]
async fn without_redis_a_new_client_gets_503_not_429() {
    let mut redis = RedisServer::start();
    let instances = instances(&redis);
    redis.kill();
    let client = reqwest::Client::new();
    for instance in &instances {
        let response = client.get(instance.url("/hello")).send().await.expect("GET /hello");
        assert_eq!(response.status(), 503, "an outage, not a rate limit");
        assert_eq!(response.headers()["retry-after"], "1");
        assert!(response.headers().get("ratelimit").is_none());
        let body: serde_json::Value = response.json().await.expect("a problem+json body");
        assert_eq!(body["type"], sluice_tower::response::STORE_UNAVAILABLE_TYPE);
    }
}
