//! The per-policy figures of the real `sluice serve` binary, over real sockets: the top
//! keys at `/v1/top` with their error bounds and the admin rules, the fill ratio and the
//! distinct-key estimate in `/metrics`, and the series budget under a flood of a million
//! distinct keys (docs/service.md, "Top keys per policy" and "Series budget").
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::Digest;
use support::server::Server;

/// Nothing here comes back within an hour, so counts do not depend on the machine's speed.
const CONFIG: &str = r"
policies:
  tight: {algorithm: fixed_window, limit: 2, window: 1h, alignment: anchored}
  roomy: {algorithm: token_bucket, capacity: 1000, refill_amount: 1, refill_interval: 1h}
domains:
  - domain: edge
    descriptors:
      - key: user
        policy: roomy
";

async fn check(server: &Server, key: &str, policy: &str, cost: u64) -> StatusCode {
    let body = json!({"key": key, "policies": [policy], "cost": cost});
    reqwest::Client::new().post(server.url("/v1/check")).json(&body).send().await.unwrap().status()
}

async fn top(server: &Server, query: &str, token: Option<&str>) -> (StatusCode, Value) {
    let mut request = reqwest::Client::new().get(server.url(&format!("/v1/top?{query}")));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    (response.status(), response.json().await.unwrap())
}

async fn metrics(server: &Server) -> String {
    reqwest::get(server.url("/metrics")).await.unwrap().text().await.unwrap()
}

#[tokio::test]
async fn top_lists_denied_keys_and_consumed_units_with_their_error_bounds() {
    let server = Server::start(CONFIG, &["--top-keys", "4", "--snapshot", "off"]);
    // The counts below are this minute's: the checks and the reads fall in one minute.
    support::quota_fleet::wait_for_room_in_the_minute(std::time::Duration::from_secs(10)).await;
    // `abuser` is denied 5 times, `other` once; `big` consumes 30 units, `small` 1.
    for _ in 0..7 {
        check(&server, "abuser", "tight", 1).await;
    }
    for key in ["other", "other", "other"] {
        check(&server, key, "tight", 1).await;
    }
    check(&server, "big", "roomy", 30).await;
    check(&server, "small", "roomy", 1).await;
    let (status, denied) = top(&server, "policy=tight&by=denied", None).await;
    assert_eq!(status, StatusCode::OK, "{denied}");
    assert_eq!((denied["k"].as_u64(), denied["epoch_seconds"].as_u64()), (Some(4), Some(60)));
    let current = &denied["current"];
    assert_eq!(current["total"], 6, "{denied}");
    assert_eq!(current["bound"], 1, "n / k = 6 / 4");
    assert_eq!(
        current["keys"],
        json!([{"key": "abuser", "count": 5, "error": 0}, {"key": "other", "count": 1, "error": 0}])
    );
    let (_, consumed) = top(&server, "policy=roomy&by=consumed", None).await;
    assert_eq!(consumed["current"]["total"], 31, "{consumed}");
    assert_eq!(consumed["current"]["keys"][0], json!({"key": "big", "count": 30, "error": 0}));
    let (_, default_by) = top(&server, "policy=tight", None).await;
    assert_eq!(default_by["by"], "denied");
}

#[tokio::test]
async fn top_refuses_unknown_policies_and_tables_and_follows_the_admin_token() {
    let server = Server::start(CONFIG, &["--admin-token", "s3cret", "--snapshot", "off"]);
    let (status, body) = top(&server, "policy=tight", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    let (status, _) = top(&server, "policy=tight", Some("wrong")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(top(&server, "policy=tight", Some("s3cret")).await.0, StatusCode::OK);
    let (status, body) = top(&server, "policy=nope", Some("s3cret")).await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::NOT_FOUND, Some("unknown_policy")));
    assert_eq!(body["message"], "unknown policy `nope`");
    let (status, body) = top(&server, "policy=tight&by=allowed", Some("s3cret")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(top(&server, "by=denied", Some("s3cret")).await.0, StatusCode::BAD_REQUEST, "no policy");
    let off = Server::start(CONFIG, &["--top-keys", "0", "--snapshot", "off"]);
    let (status, body) = top(&off, "policy=tight", None).await;
    assert_eq!((status, body["message"].as_str()), (StatusCode::NOT_FOUND, Some("top keys are off (`top_keys: 0`)")));
}

#[tokio::test]
async fn metrics_show_the_fill_ratio_near_limit_decisions_and_distinct_keys() {
    let server = Server::start(CONFIG, &["--snapshot", "off"]);
    // tight (limit 2): 0.5 then 1 (allowed), then 1 (denied): two near the limit.
    for _ in 0..3 {
        check(&server, "a", "tight", 1).await;
    }
    check(&server, "b", "tight", 1).await;
    let text = metrics(&server).await;
    for line in [
        "sluice_fill_ratio_bucket{le=\"0.5\",policy=\"tight\"} 2\n",
        "sluice_fill_ratio_bucket{le=\"0.8\",policy=\"tight\"} 2\n",
        "sluice_fill_ratio_bucket{le=\"1.0\",policy=\"tight\"} 4\n",
        "sluice_fill_ratio_count{policy=\"tight\"} 4\n",
        "sluice_near_limit_total{policy=\"tight\"} 2\n",
        "sluice_keys_estimate{policy=\"tight\"} 2\n",
        "sluice_keys_estimate{policy=\"roomy\"} 0\n",
        // The exact count beside the estimate: the states the embedded store holds now.
        "sluice_policy_states{policy=\"tight\"} 2\n",
        "sluice_policy_states{policy=\"roomy\"} 0\n",
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }
}

#[tokio::test]
async fn ranks_are_exported_with_hashed_keys_unless_raw_keys_are_asked_for() {
    // The first 16 hex digits of SHA-256("abuser") (docs/service.md, "Metrics").
    let digest = sha2::Sha256::digest(b"abuser");
    let hashed: String = digest[..8].iter().map(|byte| format!("{byte:02x}")).collect();
    for (args, key) in [(&[][..], hashed.as_str()), (&["--raw-key-labels"][..], "abuser")] {
        let mut args = args.to_vec();
        args.extend(["--top-key-series", "2", "--snapshot", "off"]);
        let server = Server::start(CONFIG, &args);
        // The ranks are this minute's: the checks and the scrape fall in one minute.
        support::quota_fleet::wait_for_room_in_the_minute(std::time::Duration::from_secs(10)).await;
        for _ in 0..4 {
            check(&server, "abuser", "tight", 1).await;
        }
        let text = metrics(&server).await;
        for line in [
            format!("sluice_top_key_count{{policy=\"tight\",by=\"denied\",rank=\"1\",key=\"{key}\"}} 2\n"),
            format!("sluice_top_key_error{{policy=\"tight\",by=\"denied\",rank=\"1\",key=\"{key}\"}} 0\n"),
            "sluice_top_key_count{policy=\"tight\",by=\"denied\",rank=\"2\",key=\"\"} 0\n".to_owned(),
            format!("sluice_top_key_count{{policy=\"tight\",by=\"consumed\",rank=\"1\",key=\"{key}\"}} 2\n"),
        ] {
            assert!(text.contains(&line), "{line} missing from\n{text}");
        }
    }
}

/// The sample lines of a `/metrics` text: one per series.
fn series(text: &str) -> Vec<&str> {
    text.lines().filter(|line| !line.starts_with('#') && !line.is_empty()).collect()
}

/// The value of the series named exactly `name` (with its labels, if any).
fn value(text: &str, name: &str) -> f64 {
    let line = text.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(' '));
    line.unwrap_or_else(|| panic!("no {name} in\n{text}")).parse().unwrap()
}

/// One RLS request carrying `count` descriptors, each a key never seen before.
fn flood_request(first: usize, count: usize) -> RateLimitRequest {
    let descriptors = (first..first + count)
        .map(|index| {
            let entries = vec![Entry { key: "user".into(), value: format!("tenant-{index:07}") }];
            RateLimitDescriptor { entries, ..RateLimitDescriptor::default() }
        })
        .collect();
    RateLimitRequest { domain: "edge".into(), descriptors, hits_addend: 1 }
}

/// Keys in the flood; descriptors per request.
const FLOOD: usize = 1_000_000;
const PER_REQUEST: usize = 1_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_million_distinct_keys_add_no_series_and_the_tables_stay_bounded() {
    let args = ["--snapshot", "off", "--max-descriptors", "1000", "--top-key-series", "3"];
    let server = Server::start(CONFIG, &args);
    let before = metrics(&server).await;
    let mut client = RateLimitServiceClient::connect(format!("http://{}", server.grpc)).await.unwrap();
    for first in (0..FLOOD).step_by(PER_REQUEST) {
        client.should_rate_limit(flood_request(first, PER_REQUEST)).await.unwrap();
    }
    let after = metrics(&server).await;
    assert_eq!(series(&before).len(), series(&after).len(), "before:\n{before}\nafter:\n{after}");
    // docs/service.md, "Series budget": 62 + P × (13 + 4m) + P (embedded store's states),
    // P = 4 names, m = 3.
    assert_eq!(series(&after).len(), 62 + 4 * (13 + 4 * 3) + 4, "{after}");
    let estimate = value(&after, "sluice_keys_estimate{policy=\"edge.user\"}");
    let error = (estimate - FLOOD as f64).abs() / FLOOD as f64;
    assert!(error < 0.049, "{estimate} estimated for {FLOOD} keys: within 3 standard errors");
    assert_eq!(value(&after, "sluice_keys"), FLOOD as f64, "the store holds every key: the exact count");
    // The exact count per policy beside the estimate; none evicted, so all.
    assert_eq!(value(&after, "sluice_policy_states{policy=\"edge.user\"}"), FLOOD as f64);
    assert_eq!(value(&after, "sluice_policy_states{policy=\"tight\"}"), 0.0);
    // Every policy's and rule's figures: 4 tables of 64 counters (at most 80 bytes each, keys
    // apart) and a 4 KiB sketch; the flood's keys are under 64 bytes.
    let bytes = value(&after, "sluice_figures_bytes");
    let names = 4.0; // tight, roomy, the rule edge.user, and the Envoy overrides
    let bound = names * (4.0 * 64.0 * (80.0 + 64.0) + 4096.0);
    assert!(bytes <= bound, "{bytes} bytes held by the figures, over {bound}");
    println!("figures_bytes after {FLOOD} distinct keys: {bytes} (bound {bound}); estimate {estimate}");
}
