//! The dashboard's endpoints over real sockets: the page and its assets, `/v1/live`,
//! `/v1/playground` and its bounds, and who may open them (`--ui`). The page itself is
//! driven in a browser by `ui_browser.rs`.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use reqwest::StatusCode;
use serde_json::{Value, json};
use support::server::Server;

const CONFIG: &str = r#"
policies:
  three_per_hour:
    algorithm: sliding_log
    limit: 3
    window: 1h
"#;

async fn post(server: &Server, path: &str, body: &Value) -> (StatusCode, Value) {
    let response = reqwest::Client::new().post(server.url(path)).json(body).send().await.unwrap();
    (response.status(), response.json().await.unwrap())
}

async fn get(server: &Server, path: &str) -> reqwest::Response {
    reqwest::get(server.url(path)).await.unwrap()
}

#[tokio::test]
async fn the_page_and_its_assets_are_built_in_with_a_self_only_policy() {
    let server = Server::start(CONFIG, &[]);
    for (path, content_type) in [
        ("/ui", "text/html; charset=utf-8"),
        ("/ui/app.js", "text/javascript; charset=utf-8"),
        ("/ui/playground.js", "text/javascript; charset=utf-8"),
        ("/ui/style.css", "text/css; charset=utf-8"),
        ("/ui/icon.svg", "image/svg+xml"),
    ] {
        let response = get(&server, path).await;
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        assert_eq!(response.headers()["content-type"], content_type, "{path}");
        let policy = response.headers()["content-security-policy"].to_str().unwrap().to_owned();
        assert!(policy.contains("script-src 'self'") && policy.contains("default-src 'none'"), "{policy}");
        let body = response.text().await.unwrap();
        for remote in ["http://", "https://", "//cdn"] {
            assert!(!body.contains(remote) || path == "/ui/icon.svg", "{path} refers to {remote}");
        }
    }
    assert_eq!(get(&server, "/ui/secrets.txt").await.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn live_counts_checks_per_policy_and_their_top_keys() {
    let server = Server::start(CONFIG, &[]);
    // The top keys below are this minute's: the checks and the read fall in one minute.
    support::quota_fleet::wait_for_room_in_the_minute(std::time::Duration::from_secs(10)).await;
    for _ in 0..4 {
        post(&server, "/v1/check", &json!({"key": "alice", "policies": ["three_per_hour"]})).await;
    }
    let live: Value = get(&server, "/v1/live").await.json().await.unwrap();
    let policy = &live["policies"][0];
    assert_eq!(
        (&policy["name"], &policy["allowed"], &policy["rejected"]),
        (&json!("three_per_hour"), &json!(3), &json!(1))
    );
    assert_eq!(live["without_store"], json!({"failed_open": 0, "failed_closed": 0, "fallback": 0}));
    let rlqs =
        json!({"streams": 0, "buckets": 0, "reports": 0, "assignments": 0, "tokens": 0, "refusals": 0, "abandons": 0});
    assert_eq!(live["rlqs"], rlqs);
    assert_eq!(live["leases"], Value::Null, "no leases on the embedded store");
    // Every check counts in its policy's top keys: exact while the table has room.
    assert_eq!(policy["top_denied"]["keys"], json!([{"key": "alice", "count": 1, "error": 0}]), "{live}");
    assert_eq!(policy["top_consumed"]["keys"], json!([{"key": "alice", "count": 3, "error": 0}]), "{live}");
    assert_eq!((&policy["near_limit"], &policy["keys_estimate"]), (&json!(2), &json!(1)));
    assert_eq!(policy["limit_text"], "3 / 1 h");
    // Every check is in the per-second history once its second is over (the current one
    // is left out while it still counts): poll until it is.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let live: Value = get(&server, "/v1/live").await.json().await.unwrap();
        let sum = |field: &str| live["per_second"][field].as_array().unwrap().iter().map(|n| n.as_u64().unwrap()).sum();
        assert_eq!(live["per_second"]["allowed"].as_array().unwrap().len(), 300);
        if (sum("allowed"), sum("rejected")) == (3u64, 1u64) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the checks never reached the history: {}", live["per_second"]);
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn the_playground_decides_a_trace_without_touching_the_live_state() {
    let server = Server::start(CONFIG, &[]);
    let policy = json!({"algorithm": "sliding_log", "limit": 3, "window": "1s"});
    let trace: Vec<Value> = (0..5).map(|index| json!({"at_us": index * 100_000, "key": "alice"})).collect();
    let (status, body) = post(&server, "/v1/playground", &json!({"policies": {"p": policy}, "trace": trace})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let allowed: Vec<&Value> =
        body["policies"][0]["decisions"].as_array().unwrap().iter().map(|d| &d["allowed"]).collect();
    assert_eq!(allowed, [&json!(true), &json!(true), &json!(true), &json!(false), &json!(false)]);
    assert_eq!(body["policies"][0]["decisions"][3]["retry_after_us"], 700_000);
    // The live state never saw alice.
    let (status, _) = post(&server, "/v1/check", &json!({"key": "alice", "policies": ["three_per_hour"]})).await;
    assert_eq!(status, StatusCode::OK);
    let live: Value = get(&server, "/v1/live").await.json().await.unwrap();
    assert_eq!(live["policies"][0]["allowed"], 1);
}

#[tokio::test]
async fn the_playground_names_the_bound_a_request_exceeds() {
    let server = Server::start(CONFIG, &[]);
    let policy = json!({"algorithm": "fixed_window", "limit": 1, "window": "1s"});
    let nine: serde_json::Map<String, Value> = (0..9).map(|index| (format!("p{index}"), policy.clone())).collect();
    let (status, body) = post(&server, "/v1/playground", &json!({"policies": nine, "trace": []})).await;
    assert_eq!((status, body["error"].as_str().unwrap()), (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"));
    assert!(body["message"].as_str().unwrap().starts_with("max_policies"), "{body}");
    let trace = vec![json!({"at_us": 0}); 2001];
    let (status, body) = post(&server, "/v1/playground", &json!({"policies": {"p": policy}, "trace": trace})).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(body["message"].as_str().unwrap().starts_with("max_trace"), "{body}");
    let bad = json!({"policies": {"p": {"algorithm": "fixed_window", "limit": 0, "window": "1s"}}, "trace": []});
    let (status, body) = post(&server, "/v1/playground", &bad).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body["message"].as_str().unwrap().contains("policies.p.limit"), "{body}");
}

#[tokio::test]
async fn the_dashboard_can_be_turned_off() {
    let server = Server::start(CONFIG, &["--ui", "off"]);
    for path in ["/ui", "/ui/app.js", "/v1/live"] {
        assert_eq!(get(&server, path).await.status(), StatusCode::NOT_FOUND, "{path}");
    }
    let (status, _) = post(&server, "/v1/playground", &json!({"policies": {}, "trace": []})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn the_openapi_document_has_the_dashboards_endpoints() {
    let server = Server::start(CONFIG, &[]);
    let document: Value = get(&server, "/openapi.json").await.json().await.unwrap();
    assert!(document["paths"]["/v1/live"]["get"].is_object());
    let playground = &document["paths"]["/v1/playground"]["post"];
    assert!(playground["responses"]["413"].is_object(), "{playground}");
    assert!(document["components"]["schemas"]["PlaygroundRequest"].is_object());
}
