//! Rate-limit response headers: the IETF draft's `RateLimit-Policy` and `RateLimit`
//! (draft-ietf-httpapi-ratelimit-headers-10), the older `X-RateLimit-*`, and `Retry-After`.

use crate::engine::Outcome;
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use sluice::{Policy, RetryAfter};
use std::time::Duration;

/// The headers for `outcome`. Seconds are rounded up, so a real wait is never announced as 0.
pub(crate) fn rate_limit_headers(outcome: &Outcome) -> HeaderMap {
    let decision = &outcome.decision;
    let name = outcome.limit.name();
    let quota = decision.limit;
    let window = whole_seconds(quota_window(outcome.limit.policy()));
    let reset = whole_seconds(decision.reset_after);
    let mut headers = HeaderMap::with_capacity(6);
    let mut put = |header: &'static str, value: String| {
        if let Ok(value) = HeaderValue::try_from(value) {
            headers.insert(HeaderName::from_static(header), value);
        }
    };
    put("ratelimit-policy", format!("\"{name}\";q={quota};w={window}"));
    put("ratelimit", format!("\"{name}\";r={};t={reset}", decision.remaining));
    let mut number = |header: &'static str, value: u64| {
        headers.insert(HeaderName::from_static(header), HeaderValue::from(value));
    };
    number("x-ratelimit-limit", quota);
    number("x-ratelimit-remaining", decision.remaining);
    number("x-ratelimit-reset", reset);
    if let (false, Some(RetryAfter::After(wait))) = (decision.allowed, decision.retry_after) {
        number("retry-after", whole_seconds(wait).max(1));
    }
    headers
}

/// The time over which a policy's quota applies: the window, or the time a bucket takes
/// to refill from empty.
pub(crate) fn quota_window(policy: &Policy) -> Duration {
    match policy {
        Policy::SlidingLog(p) => p.window(),
        Policy::FixedWindow(p) => p.window(),
        Policy::SlidingWindow(p) => p.window(),
        Policy::TokenBucket(p) => {
            let refills = p.capacity().div_ceil(p.refill_amount());
            p.refill_interval().saturating_mul(u32::try_from(refills).unwrap_or(u32::MAX))
        }
        Policy::LeakyBucket(p) => p.interval().saturating_mul(u32::try_from(p.burst() + 1).unwrap_or(u32::MAX)),
    }
}

/// Whole seconds, rounded up.
pub(crate) fn whole_seconds(duration: Duration) -> u64 {
    duration.as_secs() + u64::from(duration.subsec_nanos() > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_round_up() {
        assert_eq!(whole_seconds(Duration::ZERO), 0);
        assert_eq!(whole_seconds(Duration::from_micros(1)), 1);
        assert_eq!(whole_seconds(Duration::from_secs(2)), 2);
        assert_eq!(whole_seconds(Duration::from_millis(2001)), 3);
    }
}
