//! Rate-limit response headers: the IETF draft's `RateLimit-Policy` and `RateLimit`
//! (draft-ietf-httpapi-ratelimit-headers-10), the older `X-RateLimit-*`, and `Retry-After`.

use crate::engine::Outcome;
use axum::body::Bytes;
use axum::http::header::RETRY_AFTER;
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use sluice::{Policy, RetryAfter};
use std::time::Duration;

const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
const X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
const X_RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
const X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// Adds the headers for `outcome` to `headers`. Seconds are rounded up, so a real wait is
/// never announced as 0.
pub(crate) fn add_rate_limit_headers(headers: &mut HeaderMap, outcome: &Outcome) {
    let decision = &outcome.decision;
    let name = outcome.limit.name();
    let quota = decision.limit;
    let window = whole_seconds(quota_window(outcome.limit.policy()));
    let reset = whole_seconds(decision.reset_after);
    headers.reserve(6);
    if let Some(value) = structured(name, [("q", quota), ("w", window)]) {
        headers.insert(RATELIMIT_POLICY, value);
    }
    if let Some(value) = structured(name, [("r", decision.remaining), ("t", reset)]) {
        headers.insert(RATELIMIT, value);
    }
    headers.insert(X_RATELIMIT_LIMIT, HeaderValue::from(quota));
    headers.insert(X_RATELIMIT_REMAINING, HeaderValue::from(decision.remaining));
    headers.insert(X_RATELIMIT_RESET, HeaderValue::from(reset));
    if let (false, Some(RetryAfter::After(wait))) = (decision.allowed, decision.retry_after) {
        headers.insert(RETRY_AFTER, HeaderValue::from(whole_seconds(wait).max(1)));
    }
}

/// A structured-field item for the IETF headers: `"name";k1=v1;k2=v2`, with `"` and `\`
/// escaped in the name (RFC 8941 strings). `None` when the name cannot be sent in a header
/// (a control character). Written with `itoa` rather than `format!`: this runs on every check.
fn structured(name: &str, parameters: [(&str, u64); 2]) -> Option<HeaderValue> {
    let mut value = Vec::with_capacity(name.len() + 48);
    value.push(b'"');
    for byte in name.bytes() {
        if byte == b'"' || byte == b'\\' {
            value.push(b'\\');
        }
        value.push(byte);
    }
    value.push(b'"');
    let mut digits = itoa::Buffer::new();
    for (key, number) in parameters {
        value.push(b';');
        value.extend_from_slice(key.as_bytes());
        value.push(b'=');
        value.extend_from_slice(digits.format(number).as_bytes());
    }
    HeaderValue::from_maybe_shared(Bytes::from(value)).ok()
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
    fn structured_items_escape_quotes_and_backslashes() {
        let value = structured("api", [("q", 100), ("w", 60)]).unwrap();
        assert_eq!(value, "\"api\";q=100;w=60");
        let value = structured(r#"a"b\c"#, [("r", 0), ("t", u64::MAX)]).unwrap();
        assert_eq!(value, r#""a\"b\\c";r=0;t=18446744073709551615"#);
        assert!(structured("new\nline", [("r", 1), ("t", 1)]).is_none());
    }

    #[test]
    fn seconds_round_up() {
        assert_eq!(whole_seconds(Duration::ZERO), 0);
        assert_eq!(whole_seconds(Duration::from_micros(1)), 1);
        assert_eq!(whole_seconds(Duration::from_secs(2)), 2);
        assert_eq!(whole_seconds(Duration::from_millis(2001)), 3);
    }
}
