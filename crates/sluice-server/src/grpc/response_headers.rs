//! The headers Sluice asks Envoy to add to its responses (`--envoy-headers`).
//!
//! Envoy's rate-limit filter writes `x-ratelimit-limit`, `-remaining` and `-reset` itself
//! (`enable_x_ratelimit_headers: DRAFT_VERSION_03`), from the descriptor statuses. Sluice
//! adds only what Envoy cannot write: the IETF fields `RateLimit-Policy` and `RateLimit`,
//! and `Retry-After` on a refusal. So the two never write the same header twice, and both
//! describe the same descriptor with the same numbers: the tightest is chosen as Envoy
//! chooses it (the least `limit_remaining` among the statuses with a `current_limit`, the
//! first on a tie), and every value is read from its status.

use crate::engine::Answer as Outcome;
use envoy_types::pb::envoy::config::core::v3::HeaderValue;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit as ProtoUnit;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{Code, DescriptorStatus, RateLimit};
use sluice_tower::headers::{retry_after_seconds, structured_item, whole_seconds};

/// A descriptor's status, and the outcome of its check when a limit was checked.
pub(super) type Checked = (DescriptorStatus, Option<Outcome>);

/// The name the IETF fields give a limit without a `rate_limit.name` of its own.
const UNNAMED: &str = "default";

/// The headers for a response whose descriptors were `checked`: none when no descriptor
/// has a limit.
pub(super) fn response_headers(checked: &[Checked]) -> Vec<HeaderValue> {
    let Some((status, limit, outcome)) = tightest(checked) else { return Vec::new() };
    let name = if limit.name.is_empty() { UNNAMED } else { &limit.name };
    let window = window_seconds(limit, outcome);
    let reset = status.duration_until_reset.as_ref().map_or(0, |reset| u64::try_from(reset.seconds).unwrap_or(0));
    let mut pairs = Vec::with_capacity(3);
    // A structured-field string holds printable ASCII only; a name beyond it gets no field.
    if name.bytes().all(|byte| (b' '..=b'~').contains(&byte)) {
        let quota = u64::from(limit.requests_per_unit);
        pairs.push(("ratelimit-policy", structured_item(name, [("q", quota), ("w", window)])));
        let remaining = u64::from(status.limit_remaining);
        pairs.push(("ratelimit", structured_item(name, [("r", remaining), ("t", reset)])));
    }
    if let Some(seconds) = retry_after(checked) {
        pairs.push(("retry-after", seconds.to_string()));
    }
    let header = |(key, value): (&str, String)| HeaderValue { key: key.to_owned(), value, ..HeaderValue::default() };
    pairs.into_iter().map(header).collect()
}

/// The descriptor Envoy's `x-ratelimit-*` headers describe.
fn tightest(checked: &[Checked]) -> Option<(&DescriptorStatus, &RateLimit, Option<&Outcome>)> {
    let with_limit = checked
        .iter()
        .filter_map(|(status, outcome)| status.current_limit.as_ref().map(|limit| (status, limit, outcome.as_ref())));
    // `min_by_key` keeps the first of equal keys, as Envoy does.
    with_limit.min_by_key(|(status, _, _)| status.limit_remaining)
}

/// The limit's window in seconds: its unit, or for a Sluice policy the time it takes to
/// restore a whole quota.
fn window_seconds(limit: &RateLimit, outcome: Option<&Outcome>) -> u64 {
    let policy_window = || outcome.map_or(0, |outcome| whole_seconds(outcome.limit.policy().quota_window()));
    match ProtoUnit::try_from(limit.unit) {
        Ok(ProtoUnit::Second) => 1,
        Ok(ProtoUnit::Minute) => 60,
        Ok(ProtoUnit::Hour) => 3_600,
        Ok(ProtoUnit::Day) => 86_400,
        Ok(ProtoUnit::Week) => 7 * 86_400,
        _ => policy_window(),
    }
}

/// When a refused request could pass, in whole seconds (never 0): the longest wait among
/// the descriptors over their limit, since the request passes only once each of them
/// admits it. None when the request is allowed, or when no wait helps: a descriptor that
/// blocks (`requests_per_unit: 0`), or a cost over what a limit ever admits.
fn retry_after(checked: &[Checked]) -> Option<u64> {
    let refusing = checked.iter().filter(|(status, _)| status.code == Code::OverLimit as i32);
    let wait = |(_, outcome): &Checked| outcome.as_ref().and_then(|outcome| retry_after_seconds(&outcome.decision));
    let waits: Option<Vec<u64>> = refusing.map(wait).collect();
    waits?.into_iter().max()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::{Alignment, Decision, FixedWindow, Limit, Quota, RetryAfter, Source};
    use std::time::Duration;

    /// A checked descriptor of `limit` per hour with `remaining` left; refused with `retry`
    /// when given.
    fn checked(name: &str, remaining: u32, retry: Option<RetryAfter>) -> Checked {
        let window = FixedWindow::new(10, Duration::from_secs(3600), Alignment::Aligned, Duration::ZERO).unwrap();
        let allowed = Decision::allowed(Quota { limit: 10, remaining: u64::from(remaining) }, Duration::from_secs(60));
        let decision = retry.map_or(allowed, |retry| allowed.rejected(retry));
        let code = if decision.allowed { Code::Ok } else { Code::OverLimit };
        let limit = RateLimit { name: name.to_owned(), requests_per_unit: 10, unit: ProtoUnit::Hour as i32 };
        let status = DescriptorStatus {
            code: code as i32,
            current_limit: Some(limit),
            limit_remaining: remaining,
            ..DescriptorStatus::default()
        };
        let outcome = Outcome {
            decision,
            limit: Limit::new("internal.path", window),
            source: Source::Store,
            shadow_rejected: false,
        };
        (status, Some(outcome))
    }

    fn value<'a>(headers: &'a [HeaderValue], key: &str) -> Option<&'a str> {
        headers.iter().find(|header| header.key == key).map(|header| header.value.as_str())
    }

    #[test]
    fn the_tightest_is_the_first_with_the_least_remaining_as_envoy_picks_it() {
        let headers = response_headers(&[checked("a", 5, None), checked("b", 2, None), checked("c", 2, None)]);
        assert_eq!(value(&headers, "ratelimit-policy"), Some("\"b\";q=10;w=3600"));
        assert_eq!(value(&headers, "retry-after"), None, "allowed: no Retry-After");
    }

    #[test]
    fn a_refusal_waits_for_the_slowest_refusing_descriptor() {
        let soon = Some(RetryAfter::After(Duration::from_millis(1_500)));
        let later = Some(RetryAfter::After(Duration::from_secs(7)));
        let headers = response_headers(&[checked("", 0, soon), checked("", 3, None), checked("", 0, later)]);
        assert_eq!(value(&headers, "retry-after"), Some("7"));
        assert_eq!(value(&headers, "ratelimit-policy"), Some("\"default\";q=10;w=3600"), "no name: `default`");
    }

    #[test]
    fn no_retry_after_when_no_wait_helps() {
        let soon = Some(RetryAfter::After(Duration::from_secs(1)));
        let headers = response_headers(&[checked("", 0, soon), checked("", 0, Some(RetryAfter::Never))]);
        assert_eq!(value(&headers, "retry-after"), None);
        let (mut blocked, _) = checked("", 0, None);
        blocked.code = Code::OverLimit as i32;
        assert_eq!(value(&response_headers(&[checked("", 0, soon), (blocked, None)]), "retry-after"), None);
    }

    #[test]
    fn a_name_a_structured_field_cannot_hold_gets_no_ietf_field() {
        let headers = response_headers(&[checked("café", 0, Some(RetryAfter::After(Duration::from_secs(2))))]);
        assert_eq!(value(&headers, "ratelimit"), None);
        assert_eq!(value(&headers, "retry-after"), Some("2"));
    }
}
