//! Assignments as Envoy's `RateLimitQuotaResponse` carries them.
//!
//! A share is a token bucket of `tokens` whose fill adds 1 token per fill interval (two
//! windows and a second, see [`super::timing::Windows::fill_interval`]): less than one
//! token over the window the share lives in, so a share lets through at most its
//! `tokens`. Envoy 1.40 keeps a bucket's tokens when an assignment repeats (same size and
//! fill), but builds a *changed* one with the old bucket's fill fraction, so that fresh
//! tokens sent to an Envoy whose bucket ran dry would start empty; a bucket created after
//! a blanket assignment starts full (tests/envoy_quota_client.rs measures both). Fresh
//! tokens therefore go out as a blanket refusal then the token bucket, in one response:
//! Envoy applies a response's actions in order, and requests see only the last.

use super::shares::Assignment;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::BucketAction;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::bucket_action::{
    AbandonAction, BucketAction as Action, QuotaAssignmentAction,
};
use envoy_types::pb::envoy::service::rate_limit_quota::v3::{BucketId, RateLimitQuotaResponse};
pub(crate) use envoy_types::pb::envoy::r#type::v3::rate_limit_strategy::BlanketRule;
use envoy_types::pb::envoy::r#type::v3::rate_limit_strategy::Strategy;
use envoy_types::pb::envoy::r#type::v3::{RateLimitStrategy, TokenBucket};
use envoy_types::pb::google::protobuf::{Duration as ProtoDuration, UInt32Value};
use std::time::Duration;

/// The time to live of the refusal that clears a bucket before fresh tokens: replaced
/// by them at once, it never applies.
const CLEARING_TTL: Duration = Duration::from_secs(1);

/// The actions telling Envoy `assignment` for the bucket `id`.
pub(crate) fn actions(id: &BucketId, assignment: &Assignment) -> Vec<BucketAction> {
    match *assignment {
        Assignment::Share { tokens, ttl, fill_interval } => {
            let bucket = TokenBucket {
                max_tokens: u32::try_from(tokens).unwrap_or(u32::MAX),
                tokens_per_fill: Some(UInt32Value { value: 1 }),
                fill_interval: Some(seconds(fill_interval)),
            };
            vec![blanket(id, BlanketRule::DenyAll, CLEARING_TTL), assign(id, Strategy::TokenBucket(bucket), ttl)]
        }
        Assignment::Refusal { ttl } => vec![blanket(id, BlanketRule::DenyAll, ttl)],
    }
}

/// Lets every request of bucket `id` through (`AllowAll`), or none (`DenyAll`), for `ttl`:
/// a rule that is unlimited or in shadow mode, or one whose limit is 0.
pub(crate) fn blanket(id: &BucketId, rule: BlanketRule, ttl: Duration) -> BucketAction {
    assign(id, Strategy::BlanketRule(rule as i32), ttl)
}

/// Tells Envoy to drop bucket `id` and what it was assigned; its next request for it
/// reports it afresh.
pub(crate) fn abandon(id: &BucketId) -> BucketAction {
    BucketAction { bucket_id: Some(id.clone()), bucket_action: Some(Action::AbandonAction(AbandonAction {})) }
}

/// The most actions one response carries: 4096 take about 250 KB, and the 100 000
/// buckets `max_rlqs_buckets` allows by default fit in 25 responses, well within a
/// stream's queue.
const ACTIONS_PER_RESPONSE: usize = 4096;

/// The responses carrying `actions`, at most [`ACTIONS_PER_RESPONSE`] each; none when there
/// are none (a response must carry one).
pub(crate) fn responses(mut actions: Vec<BucketAction>) -> impl Iterator<Item = RateLimitQuotaResponse> {
    std::iter::from_fn(move || {
        if actions.is_empty() {
            return None;
        }
        let rest = actions.split_off(actions.len().min(ACTIONS_PER_RESPONSE));
        Some(RateLimitQuotaResponse { bucket_action: std::mem::replace(&mut actions, rest) })
    })
}

fn assign(id: &BucketId, strategy: Strategy, ttl: Duration) -> BucketAction {
    let assignment = QuotaAssignmentAction {
        assignment_time_to_live: Some(seconds(ttl)),
        rate_limit_strategy: Some(RateLimitStrategy { strategy: Some(strategy) }),
    };
    BucketAction { bucket_id: Some(id.clone()), bucket_action: Some(Action::QuotaAssignmentAction(assignment)) }
}

/// Whole seconds: Envoy reads only the seconds of a time to live and of a fill interval.
fn seconds(duration: Duration) -> ProtoDuration {
    ProtoDuration { seconds: i64::try_from(duration.as_secs()).unwrap_or(i64::MAX), nanos: 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_go_out_in_responses_of_at_most_4096_and_none_go_out_empty() {
        let id = BucketId { bucket: [("k".to_owned(), "v".to_owned())].into() };
        let sizes = |count: usize| -> Vec<usize> {
            responses(vec![abandon(&id); count]).map(|response| response.bucket_action.len()).collect()
        };
        assert_eq!(sizes(0), Vec::<usize>::new());
        assert_eq!(sizes(3), vec![3]);
        assert_eq!(sizes(10_000), vec![4096, 4096, 1808]);
    }
}
