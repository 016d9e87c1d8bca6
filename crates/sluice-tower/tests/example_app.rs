//! The `axum_app` example, started as a process on a free port and driven over a real
//! socket with a real HTTP client.

mod support;

use std::time::{Duration, Instant};
use support::example::Example;

fn start() -> Example {
    Example::start("axum_app", &[])
}

#[tokio::test]
async fn the_sixth_hello_within_ten_seconds_gets_429_with_problem_json() {
    let example = start();
    let client = reqwest::Client::new();
    let url = example.url("/hello");
    let first = Instant::now();
    let mut allowed = 0;
    let rejection = loop {
        let response = client.get(&url).send().await.expect("GET /hello");
        if response.status() == 429 {
            break response;
        }
        assert_eq!(response.status(), 200);
        assert!(response.headers()["ratelimit"].to_str().unwrap().starts_with(r#""hello";r="#));
        assert_eq!(response.headers()["ratelimit-policy"], r#""hello";q=5;w=10"#);
        allowed += 1;
        // More than 5 can pass only if the first left the 10 s window meanwhile.
        assert!(
            allowed <= 5 || first.elapsed() >= Duration::from_secs(10),
            "{allowed} allowed in {:?}",
            first.elapsed()
        );
    };
    let elapsed = first.elapsed();
    assert!(allowed == 5 || elapsed >= Duration::from_secs(10), "{allowed} allowed in {elapsed:?}");
    let retry_after: u64 = rejection.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=10).contains(&retry_after), "Retry-After: {retry_after}");
    assert!(rejection.headers()["ratelimit"].to_str().unwrap().starts_with(r#""hello";r=0;"#));
    assert_eq!(rejection.headers()["content-type"], "application/problem+json");
    let body: serde_json::Value = rejection.json().await.expect("a problem+json body");
    assert_eq!(body["status"], 429);
    assert_eq!(body["retry_after"], retry_after);
    assert!(body["detail"].as_str().unwrap().contains("`hello`"));
}

#[tokio::test]
async fn api_keys_each_get_a_bucket_of_ten() {
    let example = start();
    let client = reqwest::Client::new();
    let url = example.url("/api");
    let get = |key: &'static str| client.get(&url).header("x-api-key", key).send();
    let first = Instant::now();
    let mut allowed = 0_u64;
    while get("alice").await.expect("GET /api").status() == 200 {
        allowed += 1;
        // One token comes back per second: more than 10 only with time passing.
        let refilled = first.elapsed().as_secs();
        assert!(allowed <= 10 + refilled, "{allowed} allowed in {:?}", first.elapsed());
    }
    assert!(allowed >= 10);
    assert_eq!(get("bob").await.expect("GET /api").status(), 200, "another key, another bucket");
    let keyless = client.get(&url).send().await.expect("GET /api");
    assert_eq!(keyless.status(), 400, "no API key");
}
