//! Rate-limit response headers: the IETF draft's `RateLimit-Policy` and `RateLimit`
//! (draft-ietf-httpapi-ratelimit-headers-10), the older `X-RateLimit-*`, and `Retry-After`.
//!
//! One implementation for the service and the tower layer: `sluice_tower::headers`. As the
//! layer does, the service sends the `X-RateLimit-*` fields only when asked
//! (`x_ratelimit_headers`; docs/tower.md, "Which rate-limit fields: one rule").

use crate::engine::Answer;
use axum::http::HeaderMap;
use bytes::Bytes;
use sluice_tower::headers::Fields;

pub(crate) use sluice_tower::headers::HeaderRanges;

/// Writes the values of the `fields` for `outcome` at the end of `buffer`. Seconds are
/// rounded up, so a real wait is never announced as 0. One buffer for the body and every
/// header value, so that they share one allocation: this runs on every check.
pub(crate) fn write_rate_limit_headers(outcome: &Answer, fields: Fields, buffer: &mut Vec<u8>) -> HeaderRanges {
    let limit = &outcome.limit;
    sluice_tower::headers::write_rate_limit_headers(limit.name(), limit.policy(), &outcome.decision, fields, buffer)
}

/// The fields the service's answers carry: the IETF ones, and `X-RateLimit-*` with
/// `x_ratelimit_headers`.
pub(crate) fn fields(x_ratelimit_headers: bool) -> Fields {
    if x_ratelimit_headers { Fields::IetfAndLegacy } else { Fields::Ietf }
}

/// Inserts the headers written by [`write_rate_limit_headers`], their values sliced from
/// `buffer` (no copy).
pub(crate) fn insert_rate_limit_headers(headers: &mut HeaderMap, ranges: HeaderRanges, buffer: &Bytes) {
    ranges.insert_into(headers, buffer);
}
