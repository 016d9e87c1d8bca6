//! A usage report as the hub takes it: each bucket's id checked against the bounds and
//! its entries sorted by key, so that a bucket id (a map, in no order) is one RLS
//! descriptor.

use super::holder::Usage;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::BucketId;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::RateLimitQuotaUsageReports;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_usage_reports::BucketQuotaUsage;
use std::time::Duration;
use tonic::Status;

/// A bucket's entries sorted by key: the descriptor it is matched as.
pub(crate) type Entries = Vec<(String, String)>;

/// One bucket's usage in a report.
#[derive(Clone, Debug)]
pub(crate) struct BucketReport {
    /// The id as Envoy sent it, to address the answers with.
    pub(crate) id: BucketId,
    pub(crate) entries: Entries,
    pub(crate) usage: Usage,
}

/// How large a report may be.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReportBounds {
    /// Entries in one bucket id (setting `max_descriptor_entries`).
    pub(crate) max_entries: usize,
    /// Buckets in one report, and buckets with a rule held by the whole service, shared
    /// among connections (setting `max_rlqs_buckets`).
    pub(crate) max_buckets: usize,
}

/// The buckets of `reports`, checked; `INVALID_ARGUMENT` naming the first problem.
pub(crate) fn read(reports: RateLimitQuotaUsageReports, bounds: ReportBounds) -> Result<Vec<BucketReport>, Status> {
    let count = reports.bucket_quota_usages.len();
    if count == 0 {
        return Err(Status::invalid_argument("a usage report must carry at least one bucket"));
    }
    if count > bounds.max_buckets {
        return Err(Status::invalid_argument(format!(
            "the report has {count} buckets, over the {} allowed (setting `max_rlqs_buckets`)",
            bounds.max_buckets
        )));
    }
    let buckets = reports.bucket_quota_usages.into_iter().enumerate();
    buckets.map(|(index, usage)| read_one(index, usage, bounds)).collect()
}

fn read_one(index: usize, usage: BucketQuotaUsage, bounds: ReportBounds) -> Result<BucketReport, Status> {
    let invalid = |problem: String| Status::invalid_argument(format!("bucket_quota_usages[{index}]: {problem}"));
    let id = usage.bucket_id.ok_or_else(|| invalid("no bucket_id".to_owned()))?;
    let count = id.bucket.len();
    if count == 0 {
        return Err(invalid("the bucket id has no entries".to_owned()));
    }
    if count > bounds.max_entries {
        return Err(invalid(format!(
            "the bucket id has {count} entries, over the {} allowed (setting `max_descriptor_entries`)",
            bounds.max_entries
        )));
    }
    if id.bucket.keys().any(String::is_empty) {
        return Err(invalid("a bucket id key is empty".to_owned()));
    }
    let elapsed = match usage.time_elapsed {
        None => Duration::ZERO,
        Some(elapsed) if elapsed.seconds < 0 || elapsed.nanos < 0 => {
            return Err(invalid("time_elapsed is negative".to_owned()));
        }
        Some(elapsed) => Duration::new(elapsed.seconds.unsigned_abs(), elapsed.nanos.unsigned_abs()),
    };
    let mut entries: Entries = id.bucket.iter().map(|(key, value)| (key.clone(), value.clone())).collect();
    entries.sort();
    let usage = Usage { allowed: usage.num_requests_allowed, denied: usage.num_requests_denied, elapsed };
    Ok(BucketReport { id, entries, usage })
}
