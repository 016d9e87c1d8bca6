//! An RLQS client for tests: a stream opened with its first report, the reports and
//! bucket ids tests send, and the tokens an answer assigns.
#![allow(dead_code, clippy::unwrap_used)] // each test file uses a part

use super::server::Server;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::bucket_action::BucketAction as Action;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_service_client::RateLimitQuotaServiceClient;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_usage_reports::BucketQuotaUsage;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::{
    BucketId, RateLimitQuotaResponse, RateLimitQuotaUsageReports,
};
use envoy_types::pb::envoy::r#type::v3::rate_limit_strategy::Strategy;
use std::time::Duration;
use tokio::sync::mpsc;
use tonic::Streaming;

/// An open RLQS stream: what the test sends, and what Sluice answers.
pub struct Stream {
    pub reports: mpsc::Sender<RateLimitQuotaUsageReports>,
    pub responses: Result<Streaming<RateLimitQuotaResponse>, tonic::Status>,
}

/// Opens a stream to `server` whose first message is `first`.
pub async fn open(server: &Server, first: RateLimitQuotaUsageReports) -> Stream {
    let mut client = RateLimitQuotaServiceClient::connect(format!("http://{}", server.grpc)).await.unwrap();
    let (reports, receiver) = mpsc::channel(16);
    reports.send(first).await.unwrap();
    let outgoing = futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|report| (report, receiver))
    });
    let responses = client.stream_rate_limit_quotas(outgoing).await.map(tonic::Response::into_inner);
    Stream { reports, responses }
}

impl Stream {
    /// The status the stream ends with, past the responses before it.
    pub async fn ended(&mut self) -> tonic::Status {
        loop {
            if let Err(status) = self.next().await {
                return status;
            }
        }
    }

    /// The next response, or the status the stream ended with (at most 10 s).
    pub async fn next(&mut self) -> Result<RateLimitQuotaResponse, tonic::Status> {
        let responses = self.responses.as_mut().map_err(|status| status.clone())?;
        let next = tokio::time::timeout(Duration::from_secs(10), responses.message()).await.unwrap();
        next.and_then(|response| response.ok_or_else(|| tonic::Status::ok("the stream ended")))
    }
}

pub fn bucket(entries: &[(&str, &str)]) -> BucketId {
    BucketId { bucket: entries.iter().map(|&(key, value)| (key.to_owned(), value.to_owned())).collect() }
}

/// A report in `domain` of `allowed` requests for each bucket.
pub fn report(domain: &str, buckets: &[BucketId], allowed: u64) -> RateLimitQuotaUsageReports {
    let usage = |id: &BucketId| BucketQuotaUsage {
        bucket_id: Some(id.clone()),
        num_requests_allowed: allowed,
        ..BucketQuotaUsage::default()
    };
    RateLimitQuotaUsageReports { domain: domain.to_owned(), bucket_quota_usages: buckets.iter().map(usage).collect() }
}

/// The tokens of the token bucket assigned to `id` in `response` (fresh tokens come
/// after a blanket refusal that clears the bucket, in the same response).
pub fn tokens_for(response: &RateLimitQuotaResponse, id: &BucketId) -> Option<u32> {
    let mut actions = response.bucket_action.iter().rev().filter(|action| action.bucket_id.as_ref() == Some(id));
    actions.find_map(|action| {
        let Some(Action::QuotaAssignmentAction(assignment)) = &action.bucket_action else { return None };
        match assignment.rate_limit_strategy.as_ref()?.strategy.as_ref()? {
            Strategy::TokenBucket(bucket) => Some(bucket.max_tokens),
            _ => None,
        }
    })
}
