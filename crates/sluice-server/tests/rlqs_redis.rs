//! RLQS on two Sluice servers sharing one Redis (a real redis-server on a free loopback
//! port): each pays its shares from the same state, so the shares of every server's
//! streams, and RLS checks on either, never sum above the rule's limit.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_usage_reports::BucketQuotaUsage;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::{BucketId, RateLimitQuotaUsageReports};
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use sluice_test_support::redis::RedisServer;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use support::rlqs::{Stream, bucket, open, tokens_for};
use support::server::Server;

const RULES: &str = include_str!("../../../docs/envoy-rlqs-sluice.yaml");

/// A report of `denied` refused requests for `id`: an Envoy asking for (more) quota.
fn asking(id: &BucketId, denied: u64) -> RateLimitQuotaUsageReports {
    let usage = BucketQuotaUsage { bucket_id: Some(id.clone()), num_requests_denied: denied, ..Default::default() };
    RateLimitQuotaUsageReports { domain: "quota".into(), bucket_quota_usages: vec![usage] }
}

/// The tokens assigned to `id` on `stream` until it has been quiet for 300 ms.
async fn tokens_assigned(stream: &mut Stream, id: &BucketId) -> u64 {
    let mut tokens = 0;
    let responses = stream.responses.as_mut().unwrap();
    while let Ok(Ok(Some(response))) = tokio::time::timeout(Duration::from_millis(300), responses.message()).await {
        tokens += u64::from(tokens_for(&response, id).unwrap_or(0));
    }
    tokens
}

#[tokio::test]
async fn shares_on_two_servers_sharing_redis_never_sum_above_the_limit() {
    two_servers_share_one_quota(&[]).await;
}

/// With quota leases on, the RLS checks may lease units (debited in Redis when leased),
/// and a share could be paid from them: shares and RLS checks still sum to the limit.
#[tokio::test]
async fn shares_paid_through_quota_leases_never_sum_above_the_limit() {
    two_servers_share_one_quota(&["--lease-period", "100ms"]).await;
}

/// Six streams on two servers sharing one Redis (`extra` arguments for both) ask for a
/// bucket of 5 per minute: at most 5 tokens are assigned, and RLS checks get the rest.
async fn two_servers_share_one_quota(extra: &[&str]) {
    let redis = RedisServer::start();
    let url = redis.url();
    let args: Vec<&str> = ["--store", url.as_str()].into_iter().chain(extra.iter().copied()).collect();
    let servers = [Server::start(RULES, &args), Server::start(RULES, &args)];
    while SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() % 60 > 45 {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let tenant = format!("tenant-{}", SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos());
    let id = bucket(&[("plan", "free"), ("tenant", &tenant)]);
    // Three Envoys on each server hold the bucket, all asking; then all ask again.
    let mut streams = Vec::new();
    for server in servers.iter().cycle().take(6) {
        streams.push(open(server, asking(&id, 1)).await);
    }
    let mut assigned = 0;
    for stream in &mut streams {
        stream.reports.send(asking(&id, 3)).await.unwrap();
    }
    for stream in &mut streams {
        assigned += tokens_assigned(stream, &id).await;
    }
    assert!(assigned > 0 && assigned <= 5, "{assigned} tokens assigned over both servers, of 5");
    // What is left is RLS's, on either server: one quota.
    let mut rls = RateLimitServiceClient::connect(format!("http://{}", servers[1].grpc)).await.unwrap();
    let entry = |key: &str, value: &str| Entry { key: key.to_owned(), value: value.to_owned() };
    let descriptor =
        RateLimitDescriptor { entries: vec![entry("plan", "free"), entry("tenant", &tenant)], ..Default::default() };
    let request = RateLimitRequest { domain: "quota".into(), descriptors: vec![descriptor], ..Default::default() };
    let mut admitted_by_rls = 0;
    while rls.should_rate_limit(request.clone()).await.unwrap().into_inner().overall_code == Code::Ok as i32 {
        admitted_by_rls += 1;
    }
    assert_eq!(assigned + admitted_by_rls, 5, "shares and RLS checks share the 5 of the minute");
}
