//! The JSON bodies of the HTTP API. Their schemas feed `/openapi.json`.

use crate::engine::Answer;
use crate::micros::micros;
use serde::{Deserialize, Serialize};
use sluice_core::{RetryAfter, Source};
use smallvec::SmallVec;
use std::borrow::Cow;
use utoipa::ToSchema;

/// Policy names as read from a request: borrowed from the body unless escaped.
pub(crate) type PolicyNames<'a> = SmallVec<[Cow<'a, str>; 4]>;

/// Check a key against one or several policies, all or nothing.
///
/// Fields borrow from the request body (no copy unless a string holds escapes).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CheckRequest<'a> {
    /// The caller's key (user, API key, IP): 1 to 1024 bytes of UTF-8.
    #[serde(borrow)]
    #[schema(value_type = String, min_length = 1, max_length = 1024)]
    pub(crate) key: Cow<'a, str>,
    /// The policies to check together; the request passes only if every one allows it.
    #[serde(borrow)]
    #[schema(value_type = Vec<String>, min_items = 1)]
    pub(crate) policies: PolicyNames<'a>,
    /// What the request costs (default 1). 0 peeks without consuming.
    #[serde(default = "one", deserialize_with = "crate::http::cost::deserialize")]
    #[schema(default = 1, minimum = 0)]
    pub(crate) cost: u64,
}

fn one() -> u64 {
    1
}

/// Ask what a request of cost 1 would get, without consuming anything.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PeekRequest<'a> {
    /// The caller's key.
    #[serde(borrow)]
    #[schema(value_type = String, min_length = 1, max_length = 1024)]
    pub(crate) key: Cow<'a, str>,
    /// The policies to look at.
    #[serde(borrow)]
    #[schema(value_type = Vec<String>, min_items = 1)]
    pub(crate) policies: PolicyNames<'a>,
}

/// Forget a key's state (admin).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResetRequest {
    /// The caller's key.
    #[schema(min_length = 1, max_length = 1024)]
    pub(crate) key: String,
    /// The policies whose state to forget; every policy when absent or empty.
    #[serde(default)]
    pub(crate) policies: Vec<String>,
}

/// The decision (the fields of `docs/semantics.md`, "A decision"; durations in whole
/// microseconds).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct CheckResponse<'a> {
    /// The request may proceed (also when only a shadow-mode policy rejected it).
    pub(crate) allowed: bool,
    /// The policy whose decision is reported: the most restrictive one.
    pub(crate) policy: &'a str,
    /// That policy's limit (token bucket: capacity; leaky bucket: burst + 1).
    pub(crate) limit: u64,
    /// Cost-1 requests that would still pass right now; null when no quota was read (the
    /// store was down and the `open` failure mode let the request through).
    pub(crate) remaining: Option<u64>,
    /// µs until all quota is back if no request came.
    pub(crate) reset_after_us: u64,
    /// µs until a request of the same cost could pass; null when allowed, or when the cost
    /// can never pass (then `cost_exceeds_limit` is true).
    pub(crate) retry_after_us: Option<u64>,
    /// The cost is more than the policy can ever allow.
    pub(crate) cost_exceeds_limit: bool,
    /// µs the caller should wait before proceeding (leaky bucket in `delay` mode).
    pub(crate) delay_us: u64,
    /// A policy in shadow mode would have rejected this request.
    pub(crate) shadow_rejected: bool,
    /// Who decided: `store`, `cache`, `lease` (units this server leased from the store), `failed_open`, `failed_closed` or `fallback`.
    pub(crate) source: &'static str,
}

impl<'a> CheckResponse<'a> {
    pub(crate) fn from_outcome(outcome: &'a Answer) -> CheckResponse<'a> {
        let decision = &outcome.decision;
        let (retry_after_us, cost_exceeds_limit) = match decision.retry_after {
            None => (None, false),
            Some(RetryAfter::After(wait)) => (Some(micros(wait)), false),
            Some(RetryAfter::Never) => (None, true),
        };
        CheckResponse {
            allowed: decision.allowed,
            policy: outcome.limit.name(),
            limit: decision.limit,
            // A failed-open answer made up a fresh state: it claims no quota.
            remaining: (outcome.source != Source::FailedOpen).then_some(decision.remaining),
            reset_after_us: micros(decision.reset_after),
            retry_after_us,
            cost_exceeds_limit,
            delay_us: micros(decision.delay),
            shadow_rejected: outcome.shadow_rejected,
            source: source_name(outcome.source),
        }
    }
}

impl CheckResponse<'_> {
    /// Appends the response as compact JSON: byte for byte what `serde_json` writes for it
    /// (a test holds the two equal), without serde's per-field machinery, as this runs on
    /// every check.
    pub(crate) fn write_json(&self, out: &mut Vec<u8>) {
        let mut digits = itoa::Buffer::new();
        let field = |out: &mut Vec<u8>, name: &str, value: &[u8]| {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(value);
        };
        let boolean = |value: bool| if value { &b"true"[..] } else { &b"false"[..] };
        field(out, "{\"allowed\":", boolean(self.allowed));
        out.extend_from_slice(b",\"policy\":");
        // Writing to memory cannot fail; serde_json escapes the name.
        let _ = serde_json::to_writer(&mut *out, self.policy);
        field(out, ",\"limit\":", digits.format(self.limit).as_bytes());
        let remaining = self.remaining.map_or(&b"null"[..], |remaining| digits.format(remaining).as_bytes());
        field(out, ",\"remaining\":", remaining);
        field(out, ",\"reset_after_us\":", digits.format(self.reset_after_us).as_bytes());
        let retry_after = self.retry_after_us.map_or(&b"null"[..], |micros| digits.format(micros).as_bytes());
        field(out, ",\"retry_after_us\":", retry_after);
        field(out, ",\"cost_exceeds_limit\":", boolean(self.cost_exceeds_limit));
        field(out, ",\"delay_us\":", digits.format(self.delay_us).as_bytes());
        field(out, ",\"shadow_rejected\":", boolean(self.shadow_rejected));
        // Source names are plain ASCII words: nothing to escape.
        field(out, ",\"source\":\"", self.source.as_bytes());
        out.extend_from_slice(b"\"}");
    }
}

pub(crate) fn source_name(source: Source) -> &'static str {
    match source {
        Source::Store => "store",
        Source::Cache => "cache",
        Source::FailedOpen => "failed_open",
        Source::FailedClosed => "failed_closed",
        Source::Fallback => "fallback",
        Source::Lease => "lease",
    }
}

/// An error: a stable code and a message for people.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ErrorResponse {
    /// A stable code: `bad_request`, `invalid_key`, `unknown_policy`, `payload_too_large`,
    /// `unsupported_media_type`, `unauthorized`, `store_unavailable`, `store_error`…
    pub(crate) error: &'static str,
    /// What is wrong, for people.
    pub(crate) message: String,
}

/// A policy as configured.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct PolicyInfo {
    /// The policy's name.
    pub(crate) name: String,
    /// Its algorithm (`sliding_log`, `fixed_window`, `sliding_window`, `token_bucket`, `leaky_bucket`).
    pub(crate) algorithm: &'static str,
    /// Its limit.
    pub(crate) limit: u64,
    /// Whether it is in shadow mode.
    pub(crate) shadow_mode: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn the_hand_written_json_is_what_serde_writes(
            allowed: bool,
            policy in any::<String>(),
            limit: u64,
            remaining: Option<u64>,
            reset_after_us: u64,
            retry_after_us: Option<u64>,
            cost_exceeds_limit: bool,
            delay_us: u64,
            shadow_rejected: bool,
            source in prop::sample::select(vec!["store", "cache", "failed_open", "failed_closed", "fallback", "lease"]),
        ) {
            let response = CheckResponse {
                allowed, policy: &policy, limit, remaining, reset_after_us, retry_after_us,
                cost_exceeds_limit, delay_us, shadow_rejected, source,
            };
            let mut written = Vec::new();
            response.write_json(&mut written);
            prop_assert_eq!(&written[..], &serde_json::to_vec(&response).unwrap()[..]);
        }
    }
}
