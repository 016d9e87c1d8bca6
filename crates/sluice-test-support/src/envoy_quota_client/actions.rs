//! The actions a quota server sends, built in one line each, so that a test feeds the very
//! same values to a real Envoy and to [`super::EnvoyBucket`].

use super::Blanket;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::BucketId;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::BucketAction;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::bucket_action::{
    AbandonAction, BucketAction as Action, QuotaAssignmentAction,
};
use envoy_types::pb::envoy::r#type::v3::rate_limit_strategy::{BlanketRule, Strategy};
use envoy_types::pb::envoy::r#type::v3::{RateLimitStrategy, TokenBucket};
use envoy_types::pb::google::protobuf::{Duration as ProtoDuration, UInt32Value};
use std::time::Duration;

/// A bucket id of one entry, `key: value`.
pub fn bucket_id(key: &str, value: &str) -> BucketId {
    BucketId { bucket: [(key.to_owned(), value.to_owned())].into_iter().collect() }
}

/// Assigns `id` a token bucket of `max_tokens`, refilled with `tokens_per_fill` every
/// `fill_interval`, for `ttl`.
pub fn token_bucket(
    id: &BucketId,
    max_tokens: u32,
    tokens_per_fill: u32,
    fill_interval: Duration,
    ttl: Duration,
) -> BucketAction {
    let bucket = TokenBucket {
        max_tokens,
        tokens_per_fill: Some(UInt32Value { value: tokens_per_fill }),
        fill_interval: Some(proto_duration(fill_interval)),
    };
    assign(id, Strategy::TokenBucket(bucket), ttl)
}

/// Assigns `id` the blanket rule `blanket` for `ttl`.
pub fn blanket(id: &BucketId, blanket: Blanket, ttl: Duration) -> BucketAction {
    let rule = match blanket {
        Blanket::AllowAll => BlanketRule::AllowAll,
        Blanket::DenyAll => BlanketRule::DenyAll,
    };
    assign(id, Strategy::BlanketRule(rule.into()), ttl)
}

/// Tells Envoy to forget `id`.
pub fn abandon(id: &BucketId) -> BucketAction {
    BucketAction { bucket_id: Some(id.clone()), bucket_action: Some(Action::AbandonAction(AbandonAction {})) }
}

fn assign(id: &BucketId, strategy: Strategy, ttl: Duration) -> BucketAction {
    let assignment = QuotaAssignmentAction {
        assignment_time_to_live: Some(proto_duration(ttl)),
        rate_limit_strategy: Some(RateLimitStrategy { strategy: Some(strategy) }),
    };
    BucketAction { bucket_id: Some(id.clone()), bucket_action: Some(Action::QuotaAssignmentAction(assignment)) }
}

fn proto_duration(duration: Duration) -> ProtoDuration {
    ProtoDuration {
        seconds: i64::try_from(duration.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(duration.subsec_nanos()).unwrap_or(0),
    }
}
