//! The RLQS service under abuse, over real sockets: one connection reporting buckets by the
//! thousand does not shut out another connection, buckets with no rule hold no room, and a
//! stream that reads nothing does not flood the log (issue 43).
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use envoy_types::pb::envoy::service::rate_limit_quota::v3::BucketId;
use std::time::{Duration, Instant};
use support::quota_fleet::wait_for_room_in_the_minute;
use support::rlqs::{bucket, open, report, tokens_for};
use support::server::Server;

const RULES: &str = include_str!("../../../docs/envoy-rlqs-sluice.yaml");

/// `count` buckets `{plan, tenant}`, each tenant named from `prefix`.
fn buckets(plan: &str, prefix: &str, count: usize) -> Vec<BucketId> {
    (0..count).map(|index| bucket(&[("plan", plan), ("tenant", &format!("{prefix}-{index}"))])).collect()
}

/// The value of the metric `series` of `server`, if exported.
async fn metric(server: &Server, series: &str) -> Option<u64> {
    let text = reqwest::get(server.url("/metrics")).await.unwrap().text().await.unwrap();
    text.lines().find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse::<u64>().ok())
}

/// Waits (at most `limit`) until the metric `series` of `server` reaches `at_least`.
async fn wait_metric(server: &Server, series: &str, at_least: u64, limit: Duration) {
    let deadline = Instant::now() + limit;
    while metric(server, series).await.is_none_or(|value| value < at_least) {
        assert!(Instant::now() < deadline, "{series} did not reach {at_least} within {limit:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// Regression test for issue 43: one stream holding all of `max_rlqs_buckets` got every
// later stream refused with RESOURCE_EXHAUSTED.
#[tokio::test]
async fn a_connection_that_fills_the_bucket_cap_leaves_another_connection_served() {
    // Shares are paid in the rule's minute, none in its last seconds: the test fits in one.
    wait_for_room_in_the_minute(Duration::from_secs(20)).await;
    let server = Server::start(RULES, &["--max-rlqs-buckets", "100"]);
    let mut hog = open(&server, report("quota", &buckets("free", "junk", 100), 0)).await;
    wait_metric(&server, "sluice_rlqs_buckets", 100, Duration::from_secs(10)).await;
    let id = bucket(&[("plan", "free"), ("tenant", "real")]);
    let mut envoy = open(&server, report("quota", std::slice::from_ref(&id), 1)).await;
    let response = envoy.next().await.unwrap();
    assert!(tokens_for(&response, &id).is_some(), "the second connection's bucket is assigned: {response:?}");
    let status = hog.ended().await;
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{}", status.message());
    assert!(status.message().contains("more than its share"), "{}", status.message());
    // The second connection, alone and under the cap again, adds buckets.
    envoy.reports.send(report("", &buckets("free", "more", 10), 1)).await.unwrap();
    wait_metric(&server, "sluice_rlqs_buckets", 11, Duration::from_secs(10)).await;
}

#[tokio::test]
async fn buckets_with_no_rule_hold_no_room() {
    wait_for_room_in_the_minute(Duration::from_secs(20)).await;
    let server = Server::start(RULES, &["--max-rlqs-buckets", "100"]);
    let unruled = buckets("gold", "junk", 100);
    let flood = open(&server, report("quota", &unruled, 0)).await;
    wait_metric(&server, "sluice_rlqs_reports_total", 100, Duration::from_secs(10)).await;
    flood.reports.send(report("", &unruled, 0)).await.unwrap();
    wait_metric(&server, "sluice_rlqs_reports_total", 200, Duration::from_secs(10)).await;
    assert_eq!(metric(&server, "sluice_rlqs_buckets").await, Some(0));
    let ruled = buckets("free", "real", 100);
    let mut envoy = open(&server, report("quota", &ruled, 1)).await;
    let response = envoy.next().await.unwrap();
    let assigned = ruled.iter().filter(|id| tokens_for(&response, id).is_some()).count();
    assert_eq!(assigned, 100, "every ruled bucket assigned a share, none refused");
}

// Regression test for issue 43: one WARN per response dropped, 244 495 lines in 20 s from
// 20 streams that read nothing.
#[tokio::test]
async fn a_stream_that_reads_nothing_is_logged_at_most_once_a_minute() {
    const REPORTS: u64 = 400;
    const BUCKETS: usize = 1000;
    let rules = "domain: quota\ndescriptors:\n  - key: open\n    rate_limit: {unlimited: true}\n";
    let server = Server::start(rules, &[]);
    let started = Instant::now();
    // Each report is answered with 1 000 blanket rules (about 35 KB), which the client
    // never reads: past its flow-control window, the server's buffers and the stream's
    // queue, responses are dropped, hundreds of them.
    let ids: Vec<BucketId> = (0..BUCKETS).map(|index| bucket(&[("open", &format!("x-{index}"))])).collect();
    let silent = open(&server, report("quota", &ids, 1)).await;
    for _ in 1..REPORTS {
        silent.reports.send(report("", &ids, 1)).await.unwrap();
    }
    let all = REPORTS * BUCKETS as u64;
    wait_metric(&server, "sluice_rlqs_reports_total", all, Duration::from_secs(120)).await;
    let lines = server.log().lines().filter(|line| line.contains("read no responses")).count();
    let minutes = usize::try_from(started.elapsed().as_secs() / 60).unwrap();
    assert!(lines >= 1, "the drops are logged; log:\n{}", server.log());
    assert!(lines <= 1 + minutes, "{lines} lines in {minutes} whole minutes; log:\n{}", server.log());
    drop(silent);
}
