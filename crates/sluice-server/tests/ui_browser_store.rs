//! The dashboard's store figures in a real browser (Debian's headless Chromium, as in
//! `ui_browser.rs`) against the real `sluice serve` binary, with real data: each policy's
//! exact states on the embedded store, the RLQS buckets of a real quota stream linked to
//! their rule's row, and each policy's quota leases on a real Redis.
//!
//! Each test fails if the page logs a console error, throws, or fails to load a file, and
//! saves a screenshot of what it checked under `target/test-artifacts/ui/`.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use serde_json::json;
use sluice_test_support::redis::RedisServer;
use std::time::Duration;
use support::browser::{Browser, PATIENCE, artifact, assert_no_errors};
use support::quota_fleet::{unique, wait_for_room_in_the_minute};
use support::rlqs::{bucket, open, report, tokens_for};
use support::server::Server;

/// Sends a check of cost 1 for each of `keys` against `policy` through the HTTP API.
async fn send_checks(server: &Server, policy: &str, keys: &[String]) {
    let client = reqwest::Client::new();
    for key in keys {
        let body = json!({"key": key, "policies": [policy]});
        let response = client.post(server.url("/v1/check")).json(&body).send().await.unwrap();
        assert!(matches!(response.status().as_u16(), 200 | 429), "{}", response.status());
    }
}

fn cell(table: &str, policy: &str, field: &str) -> String {
    format!("document.querySelector('#{table} tr[data-policy=\"{policy}\"] [data-field=\"{field}\"]')?.textContent")
}

/// A policy of its own beside the RLQS rules of docs/envoy-rlqs-sluice.yaml.
fn rlqs_config() -> String {
    let rules = include_str!("../../../docs/envoy-rlqs-sluice.yaml");
    format!("policies:\n  api: {{algorithm: fixed_window, limit: 100, window: 1h}}\n{rules}")
}

#[test]
fn the_live_view_counts_states_and_links_each_rlqs_bucket_to_its_rule() {
    // Buckets are kept for three report intervals: longer than the test.
    let server = Server::start(&rlqs_config(), &["--rlqs-report-interval", "1m", "--snapshot", "off"]);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let tenant = unique("tenant");
    let _stream = runtime.block_on(async {
        let keys: Vec<String> = (0..3).map(|index| format!("user-{index}")).collect();
        send_checks(&server, "api", &keys).await;
        // A share lives until its minute's end: room for the rest of the test.
        wait_for_room_in_the_minute(Duration::from_secs(20)).await;
        let id = bucket(&[("tenant", &tenant), ("plan", "free")]);
        let mut stream = open(&server, report("quota", std::slice::from_ref(&id), 1)).await;
        assert_eq!(tokens_for(&stream.next().await.unwrap(), &id), Some(2), "half of the 4 left");
        stream
    });
    let mut browser = Browser::launch(1280, 1400);
    browser.navigate(&server.url("/ui"));
    // The exact count beside the estimate: three keys, three states.
    browser.wait_for(&format!("{} === '3'", cell("policies", "api", "states")), "api's 3 states", PATIENCE);
    assert_eq!(browser.eval(&cell("policies", "api", "keys_estimate")), "≈3");
    // The hub's census (once a second) lists the bucket: one Envoy, told a share.
    let row = format!("#rlqs-buckets tr[data-key$=\"{tenant}\"]");
    let listed = format!("document.querySelector('{row} [data-field=\"share\"]')?.textContent === '1'");
    browser.wait_for(&listed, "the bucket listed with its holder's share", PATIENCE);
    assert_eq!(browser.eval(&format!("document.querySelector('{row} [data-field=\"holders\"]').textContent")), "1");
    // Its rule's name links to the rule's row among the policies, marked as a rule.
    let rule = browser.eval(&format!("document.querySelector('{row}').dataset.policy"));
    let rule = rule.as_str().unwrap().to_owned();
    let href = browser.eval(&format!("document.querySelector('{row} a').getAttribute('href')"));
    assert_eq!(href, format!("#policy-{rule}"));
    let target =
        format!("document.getElementById('policy-{rule}')?.querySelector('[data-field=\"name\"]').textContent");
    assert_eq!(browser.eval(&target), format!("{rule} (Envoy rule)"));
    browser.click(&format!("{row} a"));
    browser.wait_for(&format!("location.hash === '#policy-{rule}'"), "the link followed", PATIENCE);
    assert_eq!(browser.eval("document.querySelector('#policies tr:target')?.dataset.policy"), rule);
    // No leases on the embedded store: the table says so.
    assert_eq!(browser.eval("document.getElementById('policy-leases').classList.contains('off')"), true);
    browser.screenshot(&artifact("live-states-rlqs-buckets.png"));
    assert_no_errors(&browser);
}

#[test]
fn the_live_view_shows_each_policys_quota_leases() {
    let redis = RedisServer::start();
    // Anchored, and leases of the longest period: neither the turn of the hour nor a slow
    // browser start gives the leased units back before the page reads them.
    let config = "policies:\n  api: {algorithm: fixed_window, limit: 100000, window: 1h, alignment: anchored}\n  \
                  other: {algorithm: fixed_window, limit: 100000, window: 1h, alignment: anchored}\n";
    let server = Server::start(config, &["--store", &redis.url(), "--lease-period", "1m", "--redis-module", "never"]);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    // One key, checked often within a lease period: most checks are answered from leases.
    runtime.block_on(send_checks(&server, "api", &vec!["tenant".to_owned(); 200]));
    let mut browser = Browser::launch(1280, 1400);
    browser.navigate(&server.url("/ui"));
    let saved = format!("Number({}?.replace(/,/g, '')) > 100", cell("policy-leases", "api", "leased_checks"));
    browser.wait_for(&saved, "api's checks answered from leases", PATIENCE);
    let held = format!("Number({}?.replace(/,/g, ''))", cell("policy-leases", "api", "units_held"));
    assert!(browser.eval(&held).as_f64().unwrap() > 0.0, "a lease period of 1 min: units still held");
    assert_eq!(browser.eval(&cell("policy-leases", "other", "units_leased")), "0");
    assert_eq!(browser.eval("document.getElementById('policy-leases').classList.contains('off')"), false);
    // No exact count on Redis.
    assert_eq!(browser.eval(&cell("policies", "api", "states")), "–");
    browser.screenshot(&artifact("live-policy-leases.png"));
    assert_no_errors(&browser);
}
