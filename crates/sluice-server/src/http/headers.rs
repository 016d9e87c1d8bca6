//! Rate-limit response headers: the IETF draft's `RateLimit-Policy` and `RateLimit`
//! (draft-ietf-httpapi-ratelimit-headers-10), the older `X-RateLimit-*`, and `Retry-After`.

use crate::engine::Outcome;
use axum::http::header::RETRY_AFTER;
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use bytes::Bytes;
use sluice::{Policy, RetryAfter};
use smallvec::SmallVec;
use std::ops::Range;
use std::time::Duration;

const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
const X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
const X_RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
const X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// The rate-limit headers of one response: each name, and where its value lies in the
/// buffer they were written to.
pub(crate) type HeaderRanges = SmallVec<[(HeaderName, Range<usize>); 6]>;

/// Writes the values of the headers for `outcome` at the end of `buffer`. Seconds are
/// rounded up, so a real wait is never announced as 0. One buffer for the body and every
/// header value, so that they share one allocation: this runs on every check.
pub(crate) fn write_rate_limit_headers(outcome: &Outcome, buffer: &mut Vec<u8>) -> HeaderRanges {
    let decision = &outcome.decision;
    let name = outcome.limit.name();
    let quota = decision.limit;
    let window = whole_seconds(quota_window(outcome.limit.policy()));
    let reset = whole_seconds(decision.reset_after);
    let mut ranges = HeaderRanges::new();
    let mut put = |header: HeaderName, buffer: &mut Vec<u8>, write: &dyn Fn(&mut Vec<u8>)| {
        let start = buffer.len();
        write(buffer);
        ranges.push((header, start..buffer.len()));
    };
    put(RATELIMIT_POLICY, buffer, &|buffer| write_item(buffer, name, [("q", quota), ("w", window)]));
    put(RATELIMIT, buffer, &|buffer| write_item(buffer, name, [("r", decision.remaining), ("t", reset)]));
    let number =
        |value: u64| move |buffer: &mut Vec<u8>| buffer.extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
    put(X_RATELIMIT_LIMIT, buffer, &number(quota));
    put(X_RATELIMIT_REMAINING, buffer, &number(decision.remaining));
    put(X_RATELIMIT_RESET, buffer, &number(reset));
    if let (false, Some(RetryAfter::After(wait))) = (decision.allowed, decision.retry_after) {
        put(RETRY_AFTER, buffer, &number(whole_seconds(wait).max(1)));
    }
    ranges
}

/// Inserts the headers written by [`write_rate_limit_headers`], their values sliced from
/// `buffer` (no copy). A value that cannot be sent (a policy name with a control
/// character) is left out.
pub(crate) fn insert_rate_limit_headers(headers: &mut HeaderMap, ranges: HeaderRanges, buffer: &Bytes) {
    headers.reserve(ranges.len());
    for (name, range) in ranges {
        if let Ok(value) = HeaderValue::from_maybe_shared(buffer.slice(range)) {
            headers.insert(name, value);
        }
    }
}

/// A structured-field item for the IETF headers, as text (see [`write_item`]).
pub(crate) fn structured_item(name: &str, parameters: [(&str, u64); 2]) -> String {
    let mut buffer = Vec::with_capacity(name.len() + 48);
    write_item(&mut buffer, name, parameters);
    // A `str` with ASCII added and `\` inserted before ASCII bytes is still UTF-8.
    String::from_utf8_lossy(&buffer).into_owned()
}

/// Writes a structured-field item for the IETF headers: `"name";k1=v1;k2=v2`, with `"` and
/// `\` escaped in the name (RFC 8941 strings).
fn write_item(buffer: &mut Vec<u8>, name: &str, parameters: [(&str, u64); 2]) {
    buffer.push(b'"');
    if name.bytes().any(|byte| byte == b'"' || byte == b'\\') {
        for byte in name.bytes() {
            if byte == b'"' || byte == b'\\' {
                buffer.push(b'\\');
            }
            buffer.push(byte);
        }
    } else {
        buffer.extend_from_slice(name.as_bytes());
    }
    buffer.push(b'"');
    let mut digits = itoa::Buffer::new();
    for (key, number) in parameters {
        buffer.push(b';');
        buffer.extend_from_slice(key.as_bytes());
        buffer.push(b'=');
        buffer.extend_from_slice(digits.format(number).as_bytes());
    }
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

    fn item(name: &str, parameters: [(&str, u64); 2]) -> Vec<u8> {
        let mut buffer = Vec::new();
        write_item(&mut buffer, name, parameters);
        buffer
    }

    #[test]
    fn structured_items_escape_quotes_and_backslashes() {
        assert_eq!(item("api", [("q", 100), ("w", 60)]), b"\"api\";q=100;w=60");
        assert_eq!(item(r#"a"b\c"#, [("r", 0), ("t", u64::MAX)]), br#""a\"b\\c";r=0;t=18446744073709551615"#);
        assert!(HeaderValue::from_bytes(&item("new\nline", [("r", 1), ("t", 1)])).is_err());
    }

    #[test]
    fn seconds_round_up() {
        assert_eq!(whole_seconds(Duration::ZERO), 0);
        assert_eq!(whole_seconds(Duration::from_micros(1)), 1);
        assert_eq!(whole_seconds(Duration::from_secs(2)), 2);
        assert_eq!(whole_seconds(Duration::from_millis(2001)), 3);
    }
}
