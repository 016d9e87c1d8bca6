//! The rate limit quota service (RLQS) over gRPC, spoken directly: what a stream is
//! assigned, the one quota RLS and RLQS share, and the clear errors bad input ends with.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::bucket_action::BucketAction as Action;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_service_client::RateLimitQuotaServiceClient;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::{
    BucketId, RateLimitQuotaResponse, RateLimitQuotaUsageReports,
};
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::r#type::v3::rate_limit_strategy::{BlanketRule, Strategy};
use serde_json::Value;
use std::time::Duration;
use support::quota_fleet::{metric, unique, wait_for_room_in_the_minute, wait_until};
use support::rlqs::{bucket, open, report, tokens_for};
use support::server::Server;

const RULES: &str = include_str!("../../../docs/envoy-rlqs-sluice.yaml");

#[tokio::test]
async fn a_share_is_paid_from_the_limit_so_rls_checks_see_the_same_quota() {
    let server = Server::start(RULES, &[]);
    wait_for_room_in_the_minute(Duration::from_secs(10)).await;
    let tenant = unique("tenant");
    let id = bucket(&[("tenant", &tenant), ("plan", "free")]);
    let no_rule = bucket(&[("tenant", &tenant), ("plan", "gold")]);
    // One request let through before any assignment, then a share of what is left.
    let mut stream = open(&server, report("quota", &[id.clone(), no_rule.clone()], 1)).await;
    let response = stream.next().await.unwrap();
    assert_eq!(tokens_for(&response, &id), Some(2), "of 4 left, half: the rest waits for other Envoys");
    assert!(response.bucket_action.iter().all(|action| action.bucket_id.as_ref() != Some(&no_rule)));
    // The RLS check of the same descriptor (the bucket's entries sorted by key) sees 1 + 2 taken.
    let mut rls = RateLimitServiceClient::connect(format!("http://{}", server.grpc)).await.unwrap();
    let answer = rls.should_rate_limit(rls_request(&tenant)).await.unwrap().into_inner();
    assert_eq!(answer.statuses[0].limit_remaining, 1, "5 − 1 reported − 2 assigned − this check");
    // The usage the share paid for is not counted again: having spent its share, the Envoy
    // gets the one token left (a share of 1), and RLS has none.
    stream.reports.send(report("", std::slice::from_ref(&id), 2)).await.unwrap();
    let top_up = stream.next().await.unwrap();
    assert_eq!(tokens_for(&top_up, &id), Some(1), "the reported 2 were paid already: 1 is left");
    let again = rls.should_rate_limit(rls_request(&tenant)).await.unwrap().into_inner();
    assert_eq!(again.overall_code, Code::OverLimit as i32, "5 = 1 unpaid + 2 + 1 by RLS + 1");
}

/// The RLS request of the descriptor a bucket {plan: free, tenant} is matched as.
fn rls_request(tenant: &str) -> RateLimitRequest {
    let entry = |key: &str, value: &str| Entry { key: key.to_owned(), value: value.to_owned() };
    let descriptor =
        RateLimitDescriptor { entries: vec![entry("plan", "free"), entry("tenant", tenant)], ..Default::default() };
    RateLimitRequest { domain: "quota".into(), descriptors: vec![descriptor], ..Default::default() }
}

#[tokio::test]
async fn a_stream_without_a_domain_or_with_an_oversized_bucket_id_ends_with_invalid_argument() {
    let server = Server::start(RULES, &["--max-descriptor-entries", "8"]);
    let id = bucket(&[("plan", "free")]);
    let status = open(&server, report("", std::slice::from_ref(&id), 1)).await.next().await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(status.message().contains("must name a domain"), "{}", status.message());
    let keys: Vec<String> = (0..2000).map(|index| format!("k{index}")).collect();
    let huge = bucket(&keys.iter().map(|key| (key.as_str(), "v")).collect::<Vec<_>>());
    let status = open(&server, report("quota", &[huge], 1)).await.next().await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(status.message().contains("2000 entries, over the 8 allowed"), "{}", status.message());
    // Later reports are checked too, and may not change the stream's domain.
    let mut stream = open(&server, report("quota", std::slice::from_ref(&id), 0)).await;
    stream.reports.send(report("other", &[id], 0)).await.unwrap();
    let status = stream.ended().await;
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(status.message().contains("domain cannot change"), "{}", status.message());
}

#[tokio::test]
async fn buckets_past_the_bound_end_the_stream_with_resource_exhausted() {
    let server = Server::start(RULES, &["--max-rlqs-buckets", "3"]);
    let ids: Vec<BucketId> =
        (0..4).map(|index| bucket(&[("plan", "free"), ("tenant", &format!("t{index}"))])).collect();
    let status = open(&server, report("quota", &ids, 1)).await.next().await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "one report of 4 buckets: {}", status.message());
    let mut stream = open(&server, report("quota", &ids[..3], 0)).await;
    stream.reports.send(report("quota", &ids[3..], 0)).await.unwrap();
    let status = stream.ended().await;
    assert_eq!(status.code(), tonic::Code::ResourceExhausted);
    assert!(status.message().contains("setting `max_rlqs_buckets`"), "{}", status.message());
}

#[tokio::test]
async fn a_stream_that_sends_nothing_ends_with_deadline_exceeded() {
    let server = Server::start(RULES, &[]);
    let mut client = RateLimitQuotaServiceClient::connect(format!("http://{}", server.grpc)).await.unwrap();
    let silent = futures_util::stream::pending::<RateLimitQuotaUsageReports>();
    let status = tokio::time::timeout(Duration::from_secs(20), client.stream_rate_limit_quotas(silent))
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::DeadlineExceeded);
}

// The client's deadline (`grpc-timeout`) bounds the call, as tonic's server kept it: here
// the wait for a first report, which is otherwise 10 s. Sent over raw HTTP/2, since
// tonic's client keeps the deadline itself and would end the call first.
#[tokio::test]
async fn a_call_still_unanswered_at_its_grpc_timeout_ends_with_deadline_exceeded() {
    let server = Server::start(RULES, &[]);
    let socket = tokio::net::TcpStream::connect(server.grpc).await.unwrap();
    let (send, connection) = h2::client::handshake(socket).await.unwrap();
    tokio::spawn(connection);
    let call =
        axum::http::Request::post("/envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas")
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .header("grpc-timeout", "200m")
            .body(())
            .unwrap();
    let (answer, _request) = send.ready().await.unwrap().send_request(call, false).unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(20), answer).await.unwrap().unwrap();
    let headers = answer.headers();
    let text = |name: &str| headers.get(name).map(|value| value.to_str().unwrap().to_owned());
    assert_eq!(text("grpc-status").as_deref(), Some("4"), "DEADLINE_EXCEEDED: {headers:?}");
    assert_eq!(text("grpc-message").as_deref(), Some("the%20call's%20grpc-timeout%20ran%20out"), "{headers:?}");
}

#[tokio::test]
async fn unlimited_and_blocked_rules_are_assigned_blanket_rules() {
    use envoy_types::pb::envoy::r#type::v3::rate_limit_strategy::BlanketRule;
    let rules = "domain: quota\ndescriptors:\n  - key: open\n    rate_limit: {unlimited: true}\n  \
                 - key: shut\n    rate_limit: {unit: minute, requests_per_unit: 0}\n";
    let server = Server::start(rules, &[]);
    let (open_id, shut_id) = (bucket(&[("open", "x")]), bucket(&[("shut", "x")]));
    let response = open(&server, report("quota", &[open_id.clone(), shut_id.clone()], 1)).await.next().await.unwrap();
    let rule_for = |id: &BucketId| {
        let action = response.bucket_action.iter().find(|action| action.bucket_id.as_ref() == Some(id)).unwrap();
        let Some(Action::QuotaAssignmentAction(assignment)) = &action.bucket_action else { panic!("{action:?}") };
        match assignment.rate_limit_strategy.as_ref().unwrap().strategy.as_ref().unwrap() {
            Strategy::BlanketRule(rule) => *rule,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(rule_for(&open_id), BlanketRule::AllowAll as i32);
    assert_eq!(rule_for(&shut_id), BlanketRule::DenyAll as i32);
}

/// Whether `response` refuses every request of `id` (a blanket `DENY_ALL`).
fn refuses(response: &RateLimitQuotaResponse, id: &BucketId) -> bool {
    response.bucket_action.iter().filter(|action| action.bucket_id.as_ref() == Some(id)).any(|action| {
        let Some(Action::QuotaAssignmentAction(assignment)) = &action.bucket_action else { return false };
        let strategy = assignment.rate_limit_strategy.as_ref().and_then(|strategy| strategy.strategy.as_ref());
        strategy == Some(&Strategy::BlanketRule(BlanketRule::DenyAll as i32))
    })
}

/// Rules in the domain `quota`: `kept` limited to 5 a minute, `changed` to `changed` a
/// minute, and `open` as `open` says.
fn three_rules(changed: u32, open: &str) -> String {
    format!(
        "domain: quota\ndescriptors:\n  - key: kept\n    rate_limit: {{unit: minute, requests_per_unit: 5}}\n  \
         - key: changed\n    rate_limit: {{unit: minute, requests_per_unit: {changed}}}\n  \
         - key: open\n    rate_limit: {open}\n"
    )
}

/// The buckets abandoned by the next response of `stream` that abandons any.
async fn next_abandoned(stream: &mut support::rlqs::Stream) -> Vec<BucketId> {
    loop {
        let response = stream.next().await.unwrap();
        let abandons = response
            .bucket_action
            .into_iter()
            .filter(|action| matches!(action.bucket_action, Some(Action::AbandonAction(_))));
        let abandoned: Vec<BucketId> = abandons.filter_map(|action| action.bucket_id).collect();
        if !abandoned.is_empty() {
            return abandoned;
        }
    }
}

#[tokio::test]
async fn a_reload_abandons_only_the_buckets_the_new_rules_serve_otherwise() {
    // Reports due every minute: no bucket goes stale (three intervals) during the test.
    let server = Server::start(&three_rules(5, "{unlimited: true}"), &["--rlqs-report-interval", "1m"]);
    // No share closes (a second before the minute's end) during the test either.
    wait_for_room_in_the_minute(Duration::from_secs(30)).await;
    let tenant = unique("tenant");
    let [kept, changed, open_id] = ["kept", "changed", "open"].map(|key| bucket(&[(key, tenant.as_str())]));
    let ids = [kept.clone(), changed.clone(), open_id.clone()];
    let mut stream = open(&server, report("quota", &ids, 1)).await;
    let mut assigned = Vec::new();
    while !ids.iter().all(|id| assigned.contains(id)) {
        assigned.extend(stream.next().await.unwrap().bucket_action.into_iter().filter_map(|action| action.bucket_id));
    }
    let reload = async |rules: String, abandons: u64| {
        server.write_config(&rules);
        let answer = reqwest::Client::new().post(server.url("/v1/reload")).send().await.unwrap();
        assert_eq!(answer.status(), reqwest::StatusCode::NO_CONTENT, "the reload is taken");
        wait_until("the hub's abandons", Duration::from_secs(5), async || {
            metric(&server, "sluice_rlqs_abandons_total{reason=\"reload\"}").await == abandons
        })
        .await;
    };
    // `changed` now 10 a minute: its bucket alone is abandoned.
    reload(three_rules(10, "{unlimited: true}"), 1).await;
    assert_eq!(next_abandoned(&mut stream).await, std::slice::from_ref(&changed));
    // `open` now blocked: its blanket rule alone is abandoned; `kept` still is not.
    reload(three_rules(10, "{unit: minute, requests_per_unit: 0}"), 2).await;
    assert_eq!(next_abandoned(&mut stream).await, std::slice::from_ref(&open_id));
    // Reported again, each is matched under the new rules: `changed`, with a request let
    // through, gets half of the 9 of its 10 left (under the old rule: at most 2 of 5).
    stream.reports.send(report("", &[changed.clone(), open_id.clone()], 1)).await.unwrap();
    let mentions = |response: &RateLimitQuotaResponse| {
        response.bucket_action.iter().any(|action| action.bucket_id.as_ref() == Some(&changed))
    };
    let response = loop {
        let response = stream.next().await.unwrap();
        if mentions(&response) {
            break response;
        }
    };
    assert_eq!(tokens_for(&response, &changed), Some(4), "{response:?}");
    assert!(refuses(&response, &open_id), "{response:?}");
    assert_eq!(metric(&server, "sluice_rlqs_abandons_total{reason=\"reload\"}").await, 2, "`kept` never");
}

/// The value of the one metric line of `metrics` that contains every one of `parts`.
fn metric_with(metrics: &str, parts: &[&str]) -> u64 {
    let mut lines = metrics.lines().filter(|line| parts.iter().all(|part| line.contains(part)));
    let line = lines.next().unwrap_or_else(|| panic!("no metric line with {parts:?}:\n{metrics}"));
    assert!(lines.next().is_none(), "more than one metric line with {parts:?}");
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

#[tokio::test]
async fn envoys_the_rule_cannot_serve_are_refused_at_once_counted_and_logged_once() {
    let server = Server::start(RULES, &[]);
    wait_for_room_in_the_minute(Duration::from_secs(10)).await;
    let tenant = unique("tenant");
    let id = bucket(&[("tenant", &tenant), ("plan", "free")]);
    // Its first report: 5 let through before any assignment (the whole limit), 2 refused.
    let mut first_report = report("quota", std::slice::from_ref(&id), 5);
    first_report.bucket_quota_usages[0].num_requests_denied = 2;
    let mut first = open(&server, first_report).await;
    assert!(refuses(&first.next().await.unwrap(), &id), "nothing left: refused in the same round");
    let mut second = open(&server, report("quota", std::slice::from_ref(&id), 1)).await;
    assert!(refuses(&second.next().await.unwrap(), &id), "a second Envoy, refused too");
    let metrics = reqwest::get(server.url("/metrics")).await.unwrap().text().await.unwrap();
    let rlqs = r#"source="rlqs""#;
    assert_eq!(metric_with(&metrics, &[rlqs, r#"outcome="allowed""#]), 6, "Envoy's own decisions: 5 + 1");
    assert_eq!(metric_with(&metrics, &[rlqs, r#"outcome="rejected""#]), 2);
    assert_eq!(metric_with(&metrics, &["sluice_rlqs_refusals_total "]), 2);
    // The log is read from the server's stderr by a thread of the harness: wait for the line.
    server.wait_for_log("RLQS rule exhausted", Duration::from_secs(10));
    let log = server.log();
    assert_eq!(log.matches("RLQS rule exhausted").count(), 1, "logged once a minute at most:\n{log}");
}

#[tokio::test]
async fn a_graceful_stop_leaves_assignments_to_run_out_unless_told_to_abandon_them() {
    for (args, abandons) in [(&[][..], false), (&["--rlqs-abandon-on-shutdown"][..], true)] {
        let mut server = Server::start(RULES, args);
        wait_for_room_in_the_minute(Duration::from_secs(10)).await;
        let id = bucket(&[("tenant", &unique("tenant")), ("plan", "free")]);
        let mut stream = open(&server, report("quota", std::slice::from_ref(&id), 1)).await;
        assert!(tokens_for(&stream.next().await.unwrap(), &id).is_some(), "a share first");
        server.signal("TERM");
        // Everything the stream gets from now on, until it ends.
        let mut actions = Vec::new();
        while let Ok(response) = stream.next().await {
            actions.extend(response.bucket_action.into_iter().filter_map(|action| action.bucket_action));
        }
        let abandoned = actions.iter().any(|action| matches!(action, Action::AbandonAction(_)));
        assert_eq!(abandoned, abandons, "{args:?}: {actions:?}");
        assert!(server.wait_exit(Duration::from_secs(20)).success(), "{args:?}");
    }
}

/// `GET /v1/rlqs/buckets` with the admin token `s3cret`, or none.
async fn listed_buckets(server: &Server, query: &str, token: Option<&str>) -> (reqwest::StatusCode, Value) {
    let mut request = reqwest::Client::new().get(server.url(&format!("/v1/rlqs/buckets{query}")));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    (response.status(), response.json().await.unwrap())
}

/// Once the hub's census has run, each bucket is listed with its rule (a row
/// of the live view's policies) and what each of its holders was last told, under the
/// admin rules.
#[tokio::test]
async fn the_bucket_census_lists_each_buckets_rule_and_what_its_holders_were_told() {
    let server = Server::start(RULES, &["--admin-token", "s3cret"]);
    wait_for_room_in_the_minute(Duration::from_secs(10)).await;
    let tenant = unique("tenant");
    let id = bucket(&[("tenant", &tenant), ("plan", "free")]);
    let mut first = open(&server, report("quota", std::slice::from_ref(&id), 1)).await;
    assert_eq!(tokens_for(&first.next().await.unwrap(), &id), Some(2));
    let mut second = open(&server, report("quota", std::slice::from_ref(&id), 0)).await;
    second.next().await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let listed = loop {
        let (status, census) = listed_buckets(&server, "", Some("s3cret")).await;
        assert_eq!(status, reqwest::StatusCode::OK, "{census}");
        let ours = census["buckets"].as_array().unwrap().iter().find(|b| b["key"].as_str().unwrap().contains(&tenant));
        if let Some(ours) = ours.filter(|ours| ours["holders"] == 2) {
            break ours.clone();
        }
        assert!(std::time::Instant::now() < deadline, "no census lists the bucket held twice: {census}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let answered = ["share", "refusal", "none"].map(|answer| listed[answer].as_u64().unwrap());
    assert_eq!(answered.iter().sum::<u64>(), 2, "{listed}");
    assert!(answered[0] >= 1, "the first Envoy's share runs for the minute: {listed}");
    let live: Value = reqwest::get(server.url("/v1/live")).await.unwrap().json().await.unwrap();
    let rule = live["policies"].as_array().unwrap().iter().find(|policy| policy["name"] == listed["policy"]);
    assert_eq!(rule.map(|rule| &rule["envoy_rule"]), Some(&Value::Bool(true)), "{listed}\n{live}");
    assert!(live["rlqs_buckets"]["buckets"].as_array().unwrap().iter().any(|b| b["key"] == listed["key"]));
    assert_eq!(listed_buckets(&server, "", None).await.0, reqwest::StatusCode::UNAUTHORIZED);
    assert_eq!(listed_buckets(&server, "?limit=0", Some("s3cret")).await.0, reqwest::StatusCode::BAD_REQUEST);
    let (status, refused) = listed_buckets(&server, "?limit=many", Some("s3cret")).await;
    assert_eq!(
        (status, refused["error"].as_str()),
        (reqwest::StatusCode::BAD_REQUEST, Some("bad_request")),
        "{refused}"
    );
    let (status, one) = listed_buckets(&server, "?limit=1", Some("s3cret")).await;
    assert_eq!((status, one["buckets"].as_array().unwrap().len()), (reqwest::StatusCode::OK, 1));
}
