//! Rate-limit response fields: the IETF draft's `RateLimit-Policy` and `RateLimit`
//! (draft-ietf-httpapi-ratelimit-headers), optionally the older `X-RateLimit-*`, and
//! `Retry-After` on rejections.
//!
//! The one implementation of these fields: the layer and `sluice serve` both call it.
//! Values are written into one buffer and sliced out of it, so a response's fields cost one
//! allocation however many there are.
//!
//! # Examples
//!
//! ```
//! use http::HeaderMap;
//! use sluice_core::{Key, Limit, MemoryStore, SlidingLog, SlidingLogVariant, Timestamp};
//! use sluice_tower::headers::{Fields, insert_rate_limit_headers};
//! use std::time::Duration;
//!
//! let policy = SlidingLog::new(100, Duration::from_secs(60), SlidingLogVariant::Accepted)?;
//! let limit = Limit::new("api", policy);
//! let now = Timestamp::from_micros(1_700_000_000_000_000);
//! let verdict = MemoryStore::new().check_now(Key::new(b"alice")?, std::slice::from_ref(&limit), now, 1)?;
//!
//! let mut headers = HeaderMap::new();
//! insert_rate_limit_headers(&mut headers, limit.name(), limit.policy(), &verdict.decision, Fields::Ietf);
//! assert_eq!(headers["ratelimit-policy"], r#""api";q=100;w=60"#);
//! assert_eq!(headers["ratelimit"], r#""api";r=99;t=60"#);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use bytes::Bytes;
use http::header::RETRY_AFTER;
use http::{HeaderMap, HeaderName, HeaderValue};
use sluice_core::{Decision, Policy, RetryAfter};
use smallvec::SmallVec;
use std::ops::Range;
use std::time::Duration;

const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
const X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
const X_RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
const X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// Which rate-limit fields a response carries (`Retry-After` comes with every rejection).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Fields {
    /// `RateLimit-Policy` and `RateLimit` only.
    #[default]
    Ietf,
    /// The IETF fields and `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset`.
    IetfAndLegacy,
    /// None on allowed responses (they cost a few hundred nanoseconds each); rejections
    /// still carry the IETF fields.
    OnRejectionsOnly,
}

/// The fields of one response: each name, and where its value lies in the buffer they
/// were written to.
#[derive(Clone, Debug, Default)]
pub struct HeaderRanges(SmallVec<[(HeaderName, Range<usize>); 6]>);

/// Writes the values of the rate-limit fields for `decision` of the policy `name` at the end
/// of `buffer`, and returns where each lies. Seconds are rounded up, so a real wait is never
/// announced as 0 (`Retry-After` is at least 1). A name that is not printable ASCII (a
/// control character, or beyond ASCII, which a structured-field string cannot hold) gets
/// no `RateLimit-Policy` nor `RateLimit`; the other fields are numbers.
pub fn write_rate_limit_headers(
    name: &str,
    policy: &Policy,
    decision: &Decision,
    fields: Fields,
    buffer: &mut Vec<u8>,
) -> HeaderRanges {
    let quota = decision.limit;
    let window = whole_seconds(policy.quota_window());
    let reset = whole_seconds(decision.reset_after);
    let mut ranges = HeaderRanges::default();
    if printable_ascii(name.as_bytes()) {
        ranges.put(RATELIMIT_POLICY, buffer, |buffer| write_item(buffer, name, [("q", quota), ("w", window)]));
        ranges.put(RATELIMIT, buffer, |buffer| write_item(buffer, name, [("r", decision.remaining), ("t", reset)]));
    }
    if fields == Fields::IetfAndLegacy {
        ranges.put(X_RATELIMIT_LIMIT, buffer, |buffer| write_number(buffer, quota));
        ranges.put(X_RATELIMIT_REMAINING, buffer, |buffer| write_number(buffer, decision.remaining));
        ranges.put(X_RATELIMIT_RESET, buffer, |buffer| write_number(buffer, reset));
    }
    if let Some(seconds) = retry_after_seconds(decision) {
        ranges.put(RETRY_AFTER, buffer, |buffer| write_number(buffer, seconds));
    }
    ranges
}

impl HeaderRanges {
    fn put(&mut self, header: HeaderName, buffer: &mut Vec<u8>, write: impl FnOnce(&mut Vec<u8>)) {
        let start = buffer.len();
        write(buffer);
        self.0.push((header, start..buffer.len()));
    }

    /// Inserts the fields into `headers`, their values sliced from `buffer` (no copy):
    /// `buffer` must hold what [`write_rate_limit_headers`] wrote (a range past its end,
    /// or a value `http` refuses, is left out).
    pub fn insert_into(self, headers: &mut HeaderMap, buffer: &Bytes) {
        headers.reserve(self.0.len());
        for (name, range) in self.0 {
            let value = (range.end <= buffer.len()).then(|| HeaderValue::from_maybe_shared(buffer.slice(range)).ok());
            if let Some(value) = value.flatten() {
                headers.insert(name, value);
            }
        }
    }
}

/// The fields of one policy, for many responses: what never changes (`RateLimit-Policy`,
/// `X-RateLimit-Limit`) is rendered once, so an allowed response costs one small
/// allocation per changing field.
#[derive(Clone, Debug)]
pub struct PolicyFields {
    policy: HeaderValue,
    /// `"name";r=`, the start of every `RateLimit` value.
    ratelimit_prefix: Box<[u8]>,
    /// `X-RateLimit-Limit`, when the legacy fields are sent.
    legacy_limit: Option<HeaderValue>,
    /// Allowed responses get no fields.
    silent: bool,
}

impl PolicyFields {
    /// The fields of the policy `name`.
    pub fn new(name: &str, policy: &Policy, fields: Fields) -> Self {
        let window = whole_seconds(policy.quota_window());
        let policy_text = structured_item(name, [("q", policy.limit()), ("w", window)]);
        let mut prefix = Vec::with_capacity(name.len() + 6);
        write_name(&mut prefix, name);
        prefix.extend_from_slice(b";r=");
        let legacy_limit = (fields == Fields::IetfAndLegacy).then(|| HeaderValue::from(policy.limit()));
        PolicyFields {
            policy: printable_ascii(name.as_bytes())
                .then(|| HeaderValue::from_str(&policy_text).ok())
                .flatten()
                .unwrap_or(HeaderValue::from_static("")),
            ratelimit_prefix: prefix.into_boxed_slice(),
            legacy_limit,
            silent: fields == Fields::OnRejectionsOnly,
        }
    }

    /// Adds the fields of an allowed `decision` to `headers`. A policy whose name cannot
    /// be sent (a control character) gets none.
    pub fn insert_allowed(&self, headers: &mut HeaderMap, decision: &Decision) {
        if let Some(values) = self.render(decision) {
            values.insert_into(headers);
        }
    }

    /// The fields of an allowed `decision`, to add to a response later.
    #[inline]
    pub fn render(&self, decision: &Decision) -> Option<AllowedFields> {
        if self.silent || self.policy.is_empty() {
            return None;
        }
        self.render_fields(decision)
    }

    fn render_fields(&self, decision: &Decision) -> Option<AllowedFields> {
        let reset = whole_seconds(decision.reset_after);
        let (mut remaining_digits, mut reset_digits) = (itoa::Buffer::new(), itoa::Buffer::new());
        let remaining_text = remaining_digits.format(decision.remaining).as_bytes();
        let reset_text = reset_digits.format(reset).as_bytes();
        // Written once into an allocation of exactly its length, which the value then
        // owns (no second copy, no shared header for `Bytes`).
        let mut value = Vec::with_capacity(self.ratelimit_prefix.len() + remaining_text.len() + 3 + reset_text.len());
        value.extend_from_slice(&self.ratelimit_prefix);
        value.extend_from_slice(remaining_text);
        value.extend_from_slice(b";t=");
        value.extend_from_slice(reset_text);
        let ratelimit = HeaderValue::from_maybe_shared(Bytes::from(value)).ok()?;
        let legacy = self
            .legacy_limit
            .as_ref()
            .map(|limit| Box::new([limit.clone(), HeaderValue::from(decision.remaining), HeaderValue::from(reset)]));
        Some(AllowedFields { policy: self.policy.clone(), ratelimit, legacy })
    }
}

/// The rate-limit fields of one allowed response, rendered by [`PolicyFields::render`].
#[derive(Clone, Debug)]
pub struct AllowedFields {
    policy: HeaderValue,
    ratelimit: HeaderValue,
    legacy: Option<Box<[HeaderValue; 3]>>,
}

impl AllowedFields {
    /// Adds the fields to `headers`.
    pub fn insert_into(self, headers: &mut HeaderMap) {
        headers.insert(RATELIMIT_POLICY, self.policy);
        headers.insert(RATELIMIT, self.ratelimit);
        if let Some(legacy) = self.legacy {
            let [limit, remaining, reset] = *legacy;
            headers.insert(X_RATELIMIT_LIMIT, limit);
            headers.insert(X_RATELIMIT_REMAINING, remaining);
            headers.insert(X_RATELIMIT_RESET, reset);
        }
    }
}

/// Writes the rate-limit fields for `decision` of the policy `name` into `headers`, with
/// one allocation.
pub fn insert_rate_limit_headers(
    headers: &mut HeaderMap,
    name: &str,
    policy: &Policy,
    decision: &Decision,
    fields: Fields,
) {
    let mut buffer = Vec::with_capacity(2 * name.len() + 64);
    let ranges = write_rate_limit_headers(name, policy, decision, fields, &mut buffer);
    ranges.insert_into(headers, &Bytes::from(buffer));
}

/// The `Retry-After` of a rejection in whole seconds, rounded up and never 0; `None` when
/// allowed or when no wait helps (the cost exceeds what the policy can ever admit).
pub fn retry_after_seconds(decision: &Decision) -> Option<u64> {
    match (decision.allowed, decision.retry_after) {
        (false, Some(RetryAfter::After(wait))) => Some(whole_seconds(wait).max(1)),
        _ => None,
    }
}

/// A structured-field item for the IETF fields, as text: `"name";k1=v1;k2=v2`.
pub fn structured_item(name: &str, parameters: [(&str, u64); 2]) -> String {
    let mut buffer = Vec::with_capacity(name.len() + 48);
    write_item(&mut buffer, name, parameters);
    // A `str` with ASCII added and `\` inserted before ASCII bytes is still UTF-8.
    String::from_utf8_lossy(&buffer).into_owned()
}

/// Writes a structured-field item: `"name";k1=v1;k2=v2`, with `"` and `\` escaped in the
/// name (RFC 8941 strings).
fn write_item(buffer: &mut Vec<u8>, name: &str, parameters: [(&str, u64); 2]) {
    write_name(buffer, name);
    for (key, number) in parameters {
        buffer.push(b';');
        buffer.extend_from_slice(key.as_bytes());
        buffer.push(b'=');
        write_number(buffer, number);
    }
}

/// Writes `name` as an RFC 8941 string: quoted, with `"` and `\` escaped.
fn write_name(buffer: &mut impl Extend<u8>, name: &str) {
    buffer.extend([b'"']);
    for byte in name.bytes() {
        if byte == b'"' || byte == b'\\' {
            buffer.extend([b'\\']);
        }
        buffer.extend([byte]);
    }
    buffer.extend([b'"']);
}

fn write_number(buffer: &mut Vec<u8>, number: u64) {
    buffer.extend_from_slice(itoa::Buffer::new().format(number).as_bytes());
}

/// Whether `value` is printable ASCII, all a structured-field string may hold.
fn printable_ascii(value: &[u8]) -> bool {
    value.iter().all(|&byte| (b' '..=b'~').contains(&byte))
}

/// Whole seconds, rounded up.
pub fn whole_seconds(duration: Duration) -> u64 {
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
    fn policy_fields_match_the_buffer_rendering() {
        use sluice_core::{Limit, MemoryStore, SlidingLog, SlidingLogVariant, Timestamp};
        let policy = SlidingLog::new(3, Duration::from_millis(1500), SlidingLogVariant::Accepted).unwrap();
        // A short name with a quote to escape, and one longer than any inline buffer.
        for name in [r#"we"ird"#.to_owned(), "long-".repeat(30)] {
            let limit = Limit::new(name.as_str(), policy.clone());
            let store = MemoryStore::new();
            let key = sluice_core::Key::new(b"k").unwrap();
            let decision =
                store.check_now(key, std::slice::from_ref(&limit), Timestamp::from_micros(7), 1).unwrap().decision;
            for fields in [Fields::Ietf, Fields::IetfAndLegacy] {
                let (mut cached, mut rendered) = (HeaderMap::new(), HeaderMap::new());
                PolicyFields::new(limit.name(), limit.policy(), fields).insert_allowed(&mut cached, &decision);
                insert_rate_limit_headers(&mut rendered, limit.name(), limit.policy(), &decision, fields);
                assert_eq!(cached, rendered);
                let expected = format!("\"{}\";r=2;t=2", name.replace('"', "\\\""));
                assert_eq!(cached[RATELIMIT], expected.as_str());
            }
        }
    }

    /// A name a structured-field string cannot hold gets no fields, allowed or rejected,
    /// rather than a header that parsers refuse.
    #[test]
    fn a_name_beyond_printable_ascii_gets_no_fields() {
        use sluice_core::{Limit, MemoryStore, SlidingLog, SlidingLogVariant, Timestamp};
        let policy = SlidingLog::new(1, Duration::from_secs(1), SlidingLogVariant::Accepted).unwrap();
        let store = MemoryStore::new();
        let key = sluice_core::Key::new(b"k").unwrap();
        for name in ["café", "tab\there"] {
            let limit = Limit::new(name, policy.clone());
            let limits = std::slice::from_ref(&limit);
            let allowed = store.check_now(key, limits, Timestamp::from_micros(7), 1).unwrap().decision;
            let rejected = store.check_now(key, limits, Timestamp::from_micros(8), 1).unwrap().decision;
            assert!(PolicyFields::new(name, limit.policy(), Fields::Ietf).render(&allowed).is_none(), "{name}");
            for decision in [allowed, rejected] {
                let mut headers = HeaderMap::new();
                insert_rate_limit_headers(&mut headers, name, limit.policy(), &decision, Fields::IetfAndLegacy);
                assert!(headers.get(RATELIMIT).is_none() && headers.get(RATELIMIT_POLICY).is_none(), "{name}");
            }
        }
    }

    #[test]
    fn seconds_round_up() {
        assert_eq!(whole_seconds(Duration::ZERO), 0);
        assert_eq!(whole_seconds(Duration::from_micros(1)), 1);
        assert_eq!(whole_seconds(Duration::from_secs(2)), 2);
        assert_eq!(whole_seconds(Duration::from_millis(2001)), 3);
    }
}
