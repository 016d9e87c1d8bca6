//! The Envoy rate limit service (gRPC) of the real `sluice serve` binary, called with a
//! tonic client built from the same protos (`envoy-types`).
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{Code, DescriptorStatus};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::UInt64Value;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use support::server::Server;
use tonic::transport::Channel;

/// An envoyproxy/ratelimit configuration, unchanged.
const RATELIMIT_FILE: &str = r#"
domain: edge
descriptors:
  - key: remote_address
    rate_limit:
      unit: minute
      requests_per_unit: 2
  - key: database
    value: users
    rate_limit: {unit: second, requests_per_unit: 500}
  - key: path
    value: "/health"
    rate_limit: {unlimited: true}
  - key: tenant
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: source_cluster
    value: proxy
    descriptors:
      - key: destination_cluster
        value: bar
        rate_limit: {unit: hour, requests_per_unit: 1, name: proxy_to_bar}
"#;

async fn client(server: &Server) -> RateLimitServiceClient<Channel> {
    RateLimitServiceClient::connect(format!("http://{}", server.grpc)).await.unwrap()
}

fn descriptor(entries: &[(&str, &str)]) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: entries.iter().map(|(key, value)| Entry { key: (*key).into(), value: (*value).into() }).collect(),
        ..RateLimitDescriptor::default()
    }
}

async fn ask(
    client: &mut RateLimitServiceClient<Channel>,
    domain: &str,
    descriptors: Vec<RateLimitDescriptor>,
    hits: u32,
) -> RateLimitResponse {
    let request = RateLimitRequest { domain: domain.into(), descriptors, hits_addend: hits };
    client.should_rate_limit(request).await.unwrap().into_inner()
}

fn code(status: &DescriptorStatus) -> Code {
    Code::try_from(status.code).unwrap()
}

/// The windows of Envoy's `unit: minute` and `unit: hour`.
const A_MINUTE: Duration = Duration::from_secs(60);
const AN_HOUR: Duration = Duration::from_secs(3600);

/// How long a test's requests may take, at most, for [`in_one_window`].
const LONGEST_TEST: Duration = Duration::from_secs(10);

/// Waits, if the current `unit` (an Envoy rule's window, aligned to the clock) ends within
/// [`LONGEST_TEST`], for the next one to begin: the test's requests then all fall in one
/// window, as it assumes, rather than around the turn of a minute or an hour.
async fn in_one_window(unit: Duration) {
    in_one_window_lasting(unit, LONGEST_TEST).await;
}

/// [`in_one_window`] for a test that may take up to `longest`.
async fn in_one_window_lasting(unit: Duration, longest: Duration) {
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let into = u64::try_from(since_epoch.as_nanos() % unit.as_nanos()).unwrap();
    let left = unit - Duration::from_nanos(into);
    if left < longest {
        tokio::time::sleep(left).await;
    }
}

#[tokio::test]
async fn a_descriptor_is_limited_per_value_with_full_statuses() {
    let server = Server::start(RATELIMIT_FILE, &[]);
    let mut client = client(&server).await;
    in_one_window(A_MINUTE).await;
    let alice = || vec![descriptor(&[("remote_address", "10.0.0.1")])];
    let first = ask(&mut client, "edge", alice(), 0).await;
    assert_eq!(Code::try_from(first.overall_code).unwrap(), Code::Ok);
    let status = &first.statuses[0];
    assert_eq!(code(status), Code::Ok);
    let limit = status.current_limit.as_ref().unwrap();
    assert_eq!((limit.requests_per_unit, Unit::try_from(limit.unit).unwrap()), (2, Unit::Minute));
    assert_eq!(status.limit_remaining, 1);
    assert_eq!(limit.name, "", "a rule without `name:` reports none (Envoy shows it to clients)");
    let reset = status.duration_until_reset.as_ref().unwrap();
    assert!((1..=60).contains(&reset.seconds) && reset.nanos == 0, "whole seconds, as the reference: {reset:?}");

    assert_eq!(Code::try_from(ask(&mut client, "edge", alice(), 0).await.overall_code).unwrap(), Code::Ok);
    let third = ask(&mut client, "edge", alice(), 0).await;
    assert_eq!(Code::try_from(third.overall_code).unwrap(), Code::OverLimit);
    assert_eq!((code(&third.statuses[0]), third.statuses[0].limit_remaining), (Code::OverLimit, 0));

    let bob = ask(&mut client, "edge", vec![descriptor(&[("remote_address", "10.0.0.2")])], 0).await;
    assert_eq!(Code::try_from(bob.overall_code).unwrap(), Code::Ok, "each value has its own counter");
}

#[tokio::test]
async fn unlimited_unknown_and_nested_rules() {
    let server = Server::start(RATELIMIT_FILE, &[]);
    let mut client = client(&server).await;
    in_one_window(AN_HOUR).await;
    let health = ask(&mut client, "edge", vec![descriptor(&[("path", "/health")])], 0).await;
    assert_eq!((code(&health.statuses[0]), health.statuses[0].limit_remaining), (Code::Ok, u32::MAX));
    let unknown = ask(&mut client, "elsewhere", vec![descriptor(&[("remote_address", "x")])], 0).await;
    assert_eq!(code(&unknown.statuses[0]), Code::Ok);
    assert!(unknown.statuses[0].current_limit.is_none(), "no rule, no limit");
    let nested = || vec![descriptor(&[("source_cluster", "proxy"), ("destination_cluster", "bar")])];
    let first = ask(&mut client, "edge", nested(), 0).await;
    assert_eq!(first.statuses[0].current_limit.as_ref().unwrap().name, "proxy_to_bar");
    assert_eq!(Code::try_from(ask(&mut client, "edge", nested(), 0).await.overall_code).unwrap(), Code::OverLimit);
    let too_deep = ask(&mut client, "edge", vec![descriptor(&[("remote_address", "y"), ("extra", "z")])], 0).await;
    assert!(too_deep.statuses[0].current_limit.is_none(), "a request deeper than the tree has no limit");
}

/// A rule on a token bucket that gets one token back an hour, and one on a sliding log of 2
/// an hour: unlike Envoy's aligned windows (`unit: second`, `minute`), their quotas do not
/// come back at the turn of a clock second or minute, so what a test consumes is what it
/// sees remain, however the test's requests fall around a turn.
const HOURLY_BUCKET: &str = r#"
policies:
  bucket: {algorithm: token_bucket, capacity: 500, refill_amount: 1, refill_interval: 1h}
  two_per_hour: {algorithm: sliding_log, limit: 2, window: 1h}
domains:
  - domain: edge
    descriptors:
      - key: database
        value: users
        policy: bucket
      - key: remote_address
        policy: two_per_hour
"#;

#[tokio::test]
async fn hits_addend_zero_means_one_and_descriptors_can_override_it() {
    let server = Server::start(HOURLY_BUCKET, &[]);
    let mut client = client(&server).await;
    let database = || descriptor(&[("database", "users")]);
    let zero = ask(&mut client, "edge", vec![database()], 0).await;
    assert_eq!(zero.statuses[0].limit_remaining, 499, "a hits_addend of 0 counts as 1");
    let ten = ask(&mut client, "edge", vec![database()], 10).await;
    assert_eq!(ten.statuses[0].limit_remaining, 489);
    let mut own = database();
    own.hits_addend = Some(UInt64Value { value: 100 });
    let overridden = ask(&mut client, "edge", vec![own], 10).await;
    assert_eq!(overridden.statuses[0].limit_remaining, 389, "the descriptor's hits_addend wins");
}

#[tokio::test]
async fn one_descriptor_over_the_limit_makes_the_response_over_the_limit() {
    let server = Server::start(HOURLY_BUCKET, &[]);
    let mut client = client(&server).await;
    let pair = || vec![descriptor(&[("database", "users")]), descriptor(&[("remote_address", "10.9.9.9")])];
    ask(&mut client, "edge", pair(), 0).await;
    ask(&mut client, "edge", pair(), 0).await;
    let third = ask(&mut client, "edge", pair(), 0).await;
    assert_eq!(Code::try_from(third.overall_code).unwrap(), Code::OverLimit);
    assert_eq!(code(&third.statuses[0]), Code::Ok);
    assert_eq!(code(&third.statuses[1]), Code::OverLimit);
    assert_eq!(third.statuses[0].limit_remaining, 497, "every descriptor is counted, as envoyproxy/ratelimit does");
}

#[tokio::test]
async fn shadow_mode_rules_answer_ok_and_count_the_rejection() {
    let server = Server::start(RATELIMIT_FILE, &[]);
    let mut client = client(&server).await;
    in_one_window(AN_HOUR).await;
    let tenant = || vec![descriptor(&[("tenant", "acme")])];
    ask(&mut client, "edge", tenant(), 0).await;
    let second = ask(&mut client, "edge", tenant(), 0).await;
    assert_eq!(Code::try_from(second.overall_code).unwrap(), Code::Ok);
    assert_eq!(code(&second.statuses[0]), Code::Ok);
    let metrics = reqwest::get(server.url("/metrics")).await.unwrap().text().await.unwrap();
    assert!(metrics.contains("sluice_checks_total{policy=\"edge.tenant\",outcome=\"shadow_rejected\"} 1"), "{metrics}");
}

/// Envoy writes `x-ratelimit-*` itself (`enable_x_ratelimit_headers`); Sluice adds only
/// the IETF fields, named by `rate_limit.name` or else `default`, so neither repeats the other.
#[tokio::test]
async fn headers_are_added_when_enabled() {
    let server = Server::start(RATELIMIT_FILE, &["--envoy-headers"]);
    let mut client = client(&server).await;
    let response = ask(&mut client, "edge", vec![descriptor(&[("remote_address", "1.2.3.4")])], 0).await;
    let reset = response.statuses[0].duration_until_reset.as_ref().unwrap().seconds;
    let headers: Vec<(String, String)> =
        response.response_headers_to_add.iter().map(|h| (h.key.clone(), h.value.clone())).collect();
    assert_eq!(
        headers,
        [
            ("ratelimit-policy".to_owned(), "\"default\";q=2;w=60".to_owned()),
            ("ratelimit".to_owned(), format!("\"default\";r=1;t={reset}")),
        ]
    );
    let named =
        ask(&mut client, "edge", vec![descriptor(&[("source_cluster", "proxy"), ("destination_cluster", "bar")])], 0)
            .await;
    assert_eq!(header(&named, "ratelimit-policy"), Some("\"proxy_to_bar\";q=1;w=3600"));
    let plain = Server::start(RATELIMIT_FILE, &[]);
    let mut client = self::client(&plain).await;
    let response = ask(&mut client, "edge", vec![descriptor(&[("remote_address", "1.2.3.4")])], 0).await;
    assert!(response.response_headers_to_add.is_empty());
}

/// Envoy's `x-ratelimit-reset` reads only `duration_until_reset.seconds`: a fraction of a
/// second would show as 0, for every request of a per-second rule (issue 34).
#[tokio::test]
async fn a_per_second_rule_resets_in_1_second_never_0() {
    let server = Server::start(RATELIMIT_FILE, &[]);
    let mut client = client(&server).await;
    for _ in 0..20 {
        let response = ask(&mut client, "edge", vec![descriptor(&[("database", "users")])], 0).await;
        let reset = response.statuses[0].duration_until_reset.as_ref().unwrap();
        assert_eq!((reset.seconds, reset.nanos), (1, 0));
    }
}

/// A refusal says when the request could pass (`Retry-After`), and `RateLimit`'s `t` when
/// the quota is whole again; for a token bucket the first comes sooner (issue 34).
#[tokio::test]
async fn a_refused_token_bucket_says_when_a_token_is_back() {
    let config = r#"
policies:
  bucket: {algorithm: token_bucket, capacity: 3, refill_amount: 1, refill_interval: 10s}
domains:
  - domain: api
    descriptors:
      - key: api_key
        policy: bucket
"#;
    let server = Server::start(config, &["--envoy-headers"]);
    let mut client = client(&server).await;
    let key = || vec![descriptor(&[("api_key", "k1")])];
    assert_eq!(ask(&mut client, "api", key(), 3).await.overall_code, Code::Ok as i32);
    let refused = ask(&mut client, "api", key(), 1).await;
    assert_eq!(refused.overall_code, Code::OverLimit as i32);
    let retry: u64 = header(&refused, "retry-after").unwrap().parse().unwrap();
    assert!((1..=10).contains(&retry), "a token comes back within 10 s: {retry}");
    let reset = refused.statuses[0].duration_until_reset.as_ref().unwrap().seconds;
    assert!((21..=30).contains(&reset), "the bucket is full again within 30 s: {reset}");
    assert_eq!(header(&refused, "ratelimit"), Some(format!("\"default\";r=0;t={reset}").as_str()));
    assert_eq!(header(&refused, "ratelimit-policy"), Some("\"default\";q=3;w=30"));
}

#[tokio::test]
async fn sluice_policies_can_back_envoy_rules() {
    let config = r#"
policies:
  exact:
    algorithm: sliding_log
    limit: 1
    window: 10s
domains:
  - domain: api
    descriptors:
      - key: api_key
        policy: exact
"#;
    let server = Server::start(config, &[]);
    let mut client = client(&server).await;
    let key = || vec![descriptor(&[("api_key", "k1")])];
    assert_eq!(Code::try_from(ask(&mut client, "api", key(), 0).await.overall_code).unwrap(), Code::Ok);
    let second = ask(&mut client, "api", key(), 0).await;
    assert_eq!(Code::try_from(second.overall_code).unwrap(), Code::OverLimit);
    let reset = second.statuses[0].duration_until_reset.as_ref().unwrap();
    assert!(reset.seconds <= 10);
    // The HTTP API serves the same policy, on its own keys.
    let http = reqwest::Client::new()
        .post(server.url("/v1/check"))
        .json(&serde_json::json!({"key": "k1", "policies": ["exact"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(http.status(), reqwest::StatusCode::OK);
}

#[tokio::test]
async fn malformed_requests_are_invalid_arguments() {
    let server = Server::start(RATELIMIT_FILE, &[]);
    let mut client = client(&server).await;
    let empty_domain =
        RateLimitRequest { domain: String::new(), descriptors: vec![descriptor(&[("a", "b")])], hits_addend: 0 };
    assert_eq!(client.should_rate_limit(empty_domain).await.unwrap_err().code(), tonic::Code::InvalidArgument);
    let no_descriptors = RateLimitRequest { domain: "edge".into(), descriptors: vec![], hits_addend: 0 };
    assert_eq!(client.should_rate_limit(no_descriptors).await.unwrap_err().code(), tonic::Code::InvalidArgument);
    let long = "v".repeat(2000);
    // A valid descriptor before the invalid one: the request is refused and counts nothing.
    let too_long = RateLimitRequest {
        domain: "edge".into(),
        descriptors: vec![descriptor(&[("remote_address", "ok")]), descriptor(&[("remote_address", &long)])],
        hits_addend: 0,
    };
    assert_eq!(client.should_rate_limit(too_long).await.unwrap_err().code(), tonic::Code::InvalidArgument);
    let still: RateLimitResponse = ask(&mut client, "edge", vec![descriptor(&[("remote_address", "ok")])], 0).await;
    assert_eq!(Code::try_from(still.overall_code).unwrap(), Code::Ok);
    assert_eq!(still.statuses[0].limit_remaining, 1, "the refused request did not count");
}

#[tokio::test]
async fn a_descriptor_limit_override_applies_in_a_known_domain() {
    use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride;
    let server = Server::start(RATELIMIT_FILE, &[]);
    let mut client = client(&server).await;
    let with_override = |entries: &[(&str, &str)], requests_per_unit, unit| {
        let mut descriptor = descriptor(entries);
        descriptor.limit = Some(RateLimitOverride { requests_per_unit, unit });
        vec![descriptor]
    };
    const MINUTE: i32 = 2;
    in_one_window(A_MINUTE).await;
    // 1 per minute in place of the rule's 2 per minute.
    let address = [("remote_address", "10.1.1.1")];
    let first = ask(&mut client, "edge", with_override(&address, 1, MINUTE), 0).await;
    let status = &first.statuses[0];
    assert_eq!((code(status), status.limit_remaining), (Code::Ok, 0));
    let limit = status.current_limit.as_ref().unwrap();
    assert_eq!((limit.requests_per_unit, Unit::try_from(limit.unit).unwrap()), (1, Unit::Minute));
    let second = ask(&mut client, "edge", with_override(&address, 1, MINUTE), 0).await;
    assert_eq!(code(&second.statuses[0]), Code::OverLimit);
    // The rule itself counts apart.
    let plain = ask(&mut client, "edge", vec![descriptor(&address)], 0).await;
    assert_eq!((code(&plain.statuses[0]), plain.statuses[0].limit_remaining), (Code::Ok, 1));
    // Whatever the rules say: a descriptor no rule matches is limited by its override.
    let unruled = [("anything", "x")];
    assert_eq!(code(&ask(&mut client, "edge", with_override(&unruled, 1, MINUTE), 0).await.statuses[0]), Code::Ok);
    let again = ask(&mut client, "edge", with_override(&unruled, 1, MINUTE), 0).await;
    assert_eq!(code(&again.statuses[0]), Code::OverLimit);
    // 0 allows nothing; an unknown domain has no limit, override or not.
    assert_eq!(
        code(&ask(&mut client, "edge", with_override(&unruled, 0, MINUTE), 0).await.statuses[0]),
        Code::OverLimit
    );
    let elsewhere = ask(&mut client, "other", with_override(&unruled, 0, MINUTE), 0).await;
    assert_eq!((code(&elsewhere.statuses[0]), elsewhere.statuses[0].current_limit.is_none()), (Code::Ok, true));
    // Months vary in length: refused, as in configuration files.
    let month = RateLimitRequest { domain: "edge".into(), descriptors: with_override(&unruled, 5, 5), hits_addend: 0 };
    assert_eq!(client.should_rate_limit(month).await.unwrap_err().code(), tonic::Code::InvalidArgument);
    // Counted under one name: 2 allowed; 3 rejected (two over their override, one at 0).
    let metrics = reqwest::get(server.url("/metrics")).await.unwrap().text().await.unwrap();
    for line in [
        r#"sluice_checks_total{policy="envoy_override",outcome="allowed"} 2"#,
        r#"sluice_checks_total{policy="envoy_override",outcome="rejected"} 3"#,
    ] {
        assert!(metrics.lines().any(|metric| metric == line), "{line} missing from\n{metrics}");
    }
}

#[tokio::test]
async fn an_overrides_count_survives_a_restart() {
    use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride;
    const DAY: i32 = 4;
    let overridden = || {
        let mut descriptor = descriptor(&[("remote_address", "10.2.2.2")]);
        descriptor.limit = Some(RateLimitOverride { requests_per_unit: 2, unit: DAY });
        vec![descriptor]
    };
    // Two starts and a shutdown: far more than other tests take, so a day's window and a
    // margin of two minutes (the wait happens only just before midnight UTC).
    in_one_window_lasting(Duration::from_secs(86_400), Duration::from_secs(120)).await;
    let mut server = Server::start(RATELIMIT_FILE, &["--snapshot-interval", "1h"]);
    let first = ask(&mut client(&server).await, "edge", overridden(), 0).await;
    assert_eq!((code(&first.statuses[0]), first.statuses[0].limit_remaining), (Code::Ok, 1));
    server.signal("TERM");
    assert!(server.wait_exit(Duration::from_secs(10)).success(), "log:\n{}", server.log());
    let server = server.restart();
    let mut client = client(&server).await;
    let second = ask(&mut client, "edge", overridden(), 0).await;
    assert_eq!(
        (code(&second.statuses[0]), second.statuses[0].limit_remaining),
        (Code::Ok, 0),
        "one left after the restart"
    );
    assert_eq!(code(&ask(&mut client, "edge", overridden(), 0).await.statuses[0]), Code::OverLimit);
}

#[tokio::test]
async fn a_grpc_peer_that_stops_answering_pings_is_disconnected() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = Server::start(RATELIMIT_FILE, &["--grpc-keepalive", "200ms"]);
    // An HTTP/2 peer that opens the connection (preface, empty SETTINGS) and then goes
    // silent, as a crashed host behind a NAT would: it never acknowledges a ping.
    let mut peer = tokio::net::TcpStream::connect(server.grpc).await.unwrap();
    peer.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00").await.unwrap();
    let mut buffer = [0; 4096];
    let closed = async { while let Ok(1..) = peer.read(&mut buffer).await {} };
    let waited = tokio::time::timeout(std::time::Duration::from_secs(5), closed).await;
    assert!(waited.is_ok(), "the silent peer's connection was kept open");
    // A live client is answered as usual.
    let mut client = client(&server).await;
    let response = ask(&mut client, "edge", vec![descriptor(&[("database", "users")])], 1).await;
    assert_eq!(response.overall_code, Code::Ok as i32);
}

/// Rules for the cases compared with envoyproxy/ratelimit (the reference): its fixed window
/// cache (`src/redis/fixed_cache_impl.go`) adds a request's hits to the window's counter and
/// `src/limiter/base_limiter.go` (`GetResponseDescriptorStatus`) answers from the counter.
const REFERENCE_CASES: &str = r#"
domain: edge
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 5}
  - key: blocked
    rate_limit: {unit: hour, requests_per_unit: 0, name: nobody}
  - key: watched
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 2}
"#;

fn with_hits(entries: &[(&str, &str)], hits: u64) -> RateLimitDescriptor {
    RateLimitDescriptor { hits_addend: Some(UInt64Value { value: hits }), ..descriptor(entries) }
}

fn header<'a>(response: &'a RateLimitResponse, name: &str) -> Option<&'a str> {
    response.response_headers_to_add.iter().find(|header| header.key == name).map(|header| header.value.as_str())
}

/// The reference answers a descriptor over its limit with `limit_remaining` 0, also in shadow
/// mode; so does Sluice, though the rejected hits are not counted here (the fixed window
/// rejects without consuming, docs/semantics.md), so a smaller request may still fit.
#[tokio::test]
async fn over_the_limit_nothing_remains_as_the_reference_reports() {
    let server = Server::start(REFERENCE_CASES, &["--envoy-headers"]);
    let mut client = client(&server).await;
    in_one_window(AN_HOUR).await;
    let used = ask(&mut client, "edge", vec![descriptor(&[("user", "ann")])], 3).await;
    assert_eq!((code(&used.statuses[0]), used.statuses[0].limit_remaining), (Code::Ok, 2));
    let over = ask(&mut client, "edge", vec![descriptor(&[("user", "ann")])], 4).await;
    assert_eq!((code(&over.statuses[0]), over.statuses[0].limit_remaining), (Code::OverLimit, 0));
    let reset = over.statuses[0].duration_until_reset.as_ref().unwrap().seconds;
    assert_eq!(header(&over, "ratelimit"), Some(format!("\"default\";r=0;t={reset}").as_str()));
    assert_eq!(header(&over, "retry-after"), Some(reset.to_string().as_str()), "a window's count resets at its end");
    let fits = ask(&mut client, "edge", vec![descriptor(&[("user", "ann")])], 2).await;
    assert_eq!(
        (code(&fits.statuses[0]), fits.statuses[0].limit_remaining),
        (Code::Ok, 0),
        "Sluice did not count the rejected 4 (the reference did, and refuses until the window ends)"
    );
    let shadow = ask(&mut client, "edge", vec![descriptor(&[("watched", "ann")])], 3).await;
    assert_eq!((code(&shadow.statuses[0]), shadow.statuses[0].limit_remaining), (Code::Ok, 0));
    // 6 can never fit in 5: rejected with all 5 left, reported as 0 left, and so the tightest.
    let pair = vec![with_hits(&[("user", "bob")], 1), with_hits(&[("user", "dan")], 6)];
    let tightest = ask(&mut client, "edge", pair, 0).await;
    assert_eq!(Code::try_from(tightest.overall_code).unwrap(), Code::OverLimit);
    assert!(header(&tightest, "ratelimit").unwrap().contains(";r=0;"), "the descriptor over its limit is the tightest");
    assert_eq!(header(&tightest, "retry-after"), None, "6 never fits in 5: no wait helps");
    let blocked = vec![descriptor(&[("user", "fay")]), descriptor(&[("blocked", "fay")])];
    let blocked = ask(&mut client, "edge", blocked, 0).await;
    assert_eq!(header(&blocked, "ratelimit-policy"), Some("\"nobody\";q=0;w=3600"), "Envoy's tightest too");
    assert_eq!(header(&blocked, "retry-after"), None, "a rule of 0 never admits");
}

/// The reference counts a `requests_per_unit: 0` rule like any other, so its status carries
/// the limit (0 per unit) and the time to the window's end.
#[tokio::test]
async fn a_rule_of_zero_reports_its_limit_and_reset_as_the_reference_does() {
    use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride;
    const HOUR: i32 = 3;
    let server = Server::start(REFERENCE_CASES, &[]);
    let mut client = client(&server).await;
    let blocked = ask(&mut client, "edge", vec![descriptor(&[("blocked", "eve")])], 0).await;
    let status = &blocked.statuses[0];
    assert_eq!((code(status), status.limit_remaining), (Code::OverLimit, 0));
    let limit = status.current_limit.as_ref().unwrap();
    assert_eq!(
        (limit.name.as_str(), limit.requests_per_unit, Unit::try_from(limit.unit).unwrap()),
        ("nobody", 0, Unit::Hour)
    );
    let reset = status.duration_until_reset.as_ref().unwrap();
    assert!((0..=3600).contains(&reset.seconds) && (reset.seconds, reset.nanos) != (0, 0), "{reset:?}");
    let mut zero = descriptor(&[("user", "eve")]);
    zero.limit = Some(RateLimitOverride { requests_per_unit: 0, unit: HOUR });
    let overridden = ask(&mut client, "edge", vec![zero], 0).await;
    let status = &overridden.statuses[0];
    assert_eq!((code(status), status.current_limit.as_ref().unwrap().requests_per_unit), (Code::OverLimit, 0));
    assert!(status.duration_until_reset.as_ref().is_some_and(|reset| reset.seconds <= 3600));
}

/// A descriptor's own `hits_addend: 0` checks without counting in the reference
/// (`utils.GetHitsAddends`); the request's 0 is the field left unset, and means 1.
#[tokio::test]
async fn a_descriptors_hits_addend_of_zero_checks_without_counting() {
    let server = Server::start(REFERENCE_CASES, &[]);
    let mut client = client(&server).await;
    in_one_window(AN_HOUR).await;
    for _ in 0..3 {
        let look = ask(&mut client, "edge", vec![with_hits(&[("user", "cy")], 0)], 7).await;
        assert_eq!((code(&look.statuses[0]), look.statuses[0].limit_remaining), (Code::Ok, 5), "nothing counted");
    }
    let counted = ask(&mut client, "edge", vec![descriptor(&[("user", "cy")])], 0).await;
    assert_eq!(counted.statuses[0].limit_remaining, 4, "the request's 0 means 1");
    ask(&mut client, "edge", vec![with_hits(&[("user", "cy")], 4)], 0).await;
    // Nothing left: Sluice answers over the limit (the reference answers OK until its
    // counter goes past the limit, which Sluice's never does: docs/service.md).
    let exhausted = ask(&mut client, "edge", vec![with_hits(&[("user", "cy")], 0)], 0).await;
    assert_eq!((code(&exhausted.statuses[0]), exhausted.statuses[0].limit_remaining), (Code::OverLimit, 0));
    let metrics = reqwest::get(server.url("/metrics")).await.unwrap().text().await.unwrap();
    let counted =
        |outcome: &str, n: u32| format!("sluice_checks_total{{policy=\"edge.user\",outcome=\"{outcome}\"}} {n}");
    for line in [counted("allowed", 2), counted("rejected", 0)] {
        assert!(
            metrics.lines().any(|metric| metric == line),
            "only the requests that add hits count: {line}\n{metrics}"
        );
    }
}

/// tonic answers a call to a service it does not serve with `UNIMPLEMENTED` and logs
/// nothing; Sluice logs it, so an Envoy pointed at the wrong service shows (issue 34).
#[tokio::test]
async fn a_call_to_a_service_sluice_does_not_serve_is_logged() {
    use envoy_types::pb::envoy::service::auth::v3::CheckRequest;
    use envoy_types::pb::envoy::service::auth::v3::authorization_client::AuthorizationClient;
    let server = Server::start(RATELIMIT_FILE, &[]);
    let mut authz = AuthorizationClient::connect(format!("http://{}", server.grpc)).await.unwrap();
    let status = authz.check(CheckRequest::default()).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unimplemented);
    server.wait_for_log("path=\"/envoy.service.auth.v3.Authorization/Check\"", Duration::from_secs(10));
    let mut client = client(&server).await;
    let served = ask(&mut client, "edge", vec![descriptor(&[("database", "users")])], 0).await;
    assert_eq!(served.overall_code, Code::Ok as i32);
    assert_eq!(server.log().matches("does not serve").count(), 1, "{}", server.log());
}
