//! What the layer answers instead of the inner service: 429 with a `problem+json` body
//! (RFC 9457) for HTTP, `RESOURCE_EXHAUSTED` with a `google.rpc.RetryInfo` for gRPC (with
//! the `tonic` feature; without it gRPC requests get the HTTP answers).

use crate::headers::{retry_after_seconds, whole_seconds};
use bytes::Bytes;
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::request::Parts;
use http::{HeaderValue, Response, StatusCode};
use http_body_util::Full;
use sluice_core::{Decision, Limit, RetryAfter};
use std::time::Duration;
#[cfg(feature = "tonic")]
use tonic_types::{ErrorDetails, StatusExt};

/// The body of responses the layer writes itself.
pub type RejectionBody = Full<Bytes>;

/// A response body type the layer can write its own answers in: the layer's service
/// answers with the inner service's body type, so it adds no wrapping (and no boxing) to
/// responses that pass.
///
/// Implemented for axum's and tonic's bodies (with the `axum` and `tonic` features),
/// `Full<Bytes>`, `http_body_util`'s boxed bodies and `Either<B, Full<Bytes>>`; implement
/// it for your own body type if needed.
pub trait LayerBody {
    /// The body of an answer written by the layer.
    fn from_rejection(body: RejectionBody) -> Self;
}

#[cfg(feature = "axum")]
impl LayerBody for axum::body::Body {
    fn from_rejection(body: RejectionBody) -> Self {
        axum::body::Body::new(body)
    }
}

#[cfg(feature = "tonic")]
impl LayerBody for tonic::body::Body {
    fn from_rejection(body: RejectionBody) -> Self {
        tonic::body::Body::new(body)
    }
}

impl LayerBody for RejectionBody {
    fn from_rejection(body: RejectionBody) -> Self {
        body
    }
}

impl<B> LayerBody for http_body_util::Either<B, RejectionBody> {
    fn from_rejection(body: RejectionBody) -> Self {
        http_body_util::Either::Right(body)
    }
}

impl<E> LayerBody for http_body_util::combinators::BoxBody<Bytes, E> {
    fn from_rejection(body: RejectionBody) -> Self {
        http_body_util::BodyExt::boxed(http_body_util::BodyExt::map_err(body, |never| match never {}))
    }
}

impl<E> LayerBody for http_body_util::combinators::UnsyncBoxBody<Bytes, E> {
    fn from_rejection(body: RejectionBody) -> Self {
        http_body_util::BodyExt::boxed_unsync(http_body_util::BodyExt::map_err(body, |never| match never {}))
    }
}

const PROBLEM_JSON: HeaderValue = HeaderValue::from_static("application/problem+json");
/// The problem type of a 429: `about:blank` (RFC 9457 §4.2.1), so the title is the status's
/// own phrase and the detail names the policy.
const RATE_LIMITED_TYPE: &str = "about:blank";

/// The problem type of a 503 answered while the store is down (a `closed` failure mode,
/// or a store that cannot be reached): an identifier to compare, not a page to fetch. The
/// same name as `sluice serve`'s error code for the same case.
pub const STORE_UNAVAILABLE_TYPE: &str = "urn:sluice:store_unavailable";

/// A request refused by a policy, as the rejection closure sees it.
#[derive(Clone, Copy, Debug)]
pub struct Rejection<'a> {
    /// The policy that refused it (with several, the most restrictive one).
    pub limit: &'a Limit,
    /// Its decision: `retry_after` says when a request of the same cost could pass.
    pub decision: &'a Decision,
    /// The refused request's head.
    pub parts: &'a Parts,
}

impl Rejection<'_> {
    /// How long to wait before retrying, `None` when no wait helps.
    pub fn retry_after(&self) -> Option<Duration> {
        match (self.decision.allowed, self.decision.retry_after) {
            (false, Some(RetryAfter::After(wait))) => Some(wait),
            _ => None,
        }
    }
}

/// The default answer to a rejection: gRPC requests (content type `application/grpc…`)
/// get `grpc_resource_exhausted` (with the `tonic` feature), others [`too_many_requests`].
pub fn default_rejection(rejection: &Rejection<'_>) -> Response<RejectionBody> {
    #[cfg(feature = "tonic")]
    if is_grpc(rejection.parts) {
        return grpc_resource_exhausted(rejection);
    }
    too_many_requests(rejection)
}

/// 429 Too Many Requests with a `problem+json` body naming the policy, such as
/// `{"type":"about:blank","title":"Too Many Requests","status":429,"detail":"rate limit
/// `api` exceeded","retry_after":3}`. `Retry-After` is added by the layer.
pub fn too_many_requests(rejection: &Rejection<'_>) -> Response<RejectionBody> {
    let name = rejection.limit.name();
    let detail = match rejection.retry_after() {
        Some(_) => format!("rate limit `{name}` exceeded"),
        None => format!("rate limit `{name}` can never allow this request's cost"),
    };
    let retry_after = retry_after_seconds(rejection.decision);
    problem(StatusCode::TOO_MANY_REQUESTS, RATE_LIMITED_TYPE, &detail, retry_after)
}

/// gRPC `RESOURCE_EXHAUSTED` (trailers-only, HTTP 200) whose details carry the wait as a
/// `google.rpc.RetryInfo`.
#[cfg(feature = "tonic")]
pub fn grpc_resource_exhausted(rejection: &Rejection<'_>) -> Response<RejectionBody> {
    let message = format!("rate limit `{}` exceeded", rejection.limit.name());
    let details = ErrorDetails::with_retry_info(rejection.retry_after());
    tonic::Status::with_error_details(tonic::Code::ResourceExhausted, message, details).into_http()
}

/// A `problem+json` response (RFC 9457) with `status`, `type`, its title, `detail` and,
/// when given, `retry_after` in seconds.
pub fn problem(status: StatusCode, kind: &str, detail: &str, retry_after: Option<u64>) -> Response<RejectionBody> {
    let title = status.canonical_reason().unwrap_or("Error");
    let mut body = serde_json::json!({ "type": kind, "title": title, "status": status.as_u16(), "detail": detail });
    if let (Some(seconds), Some(fields)) = (retry_after, body.as_object_mut()) {
        fields.insert("retry_after".to_owned(), seconds.into());
    }
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, PROBLEM_JSON);
    response
}

/// The answer when the layer cannot check a request: a bad key (HTTP `status`, gRPC
/// `INVALID_ARGUMENT` or `UNAUTHENTICATED`) or a store that cannot decide (HTTP 503, gRPC
/// `UNAVAILABLE`).
pub(crate) fn unchecked(parts: &Parts, status: StatusCode, detail: &str) -> Response<RejectionBody> {
    #[cfg(feature = "tonic")]
    if is_grpc(parts) {
        return grpc_unchecked(status, detail);
    }
    let _ = parts;
    problem(status, "about:blank", detail, None)
}

/// The answer while the store is down: HTTP 503 with a `problem+json` body of type
/// [`STORE_UNAVAILABLE_TYPE`] and `Retry-After` (whole seconds, at least 1), and no
/// rate-limit fields, since no quota was looked at; gRPC `UNAVAILABLE` with a
/// `google.rpc.RetryInfo` (with the `tonic` feature).
pub(crate) fn store_unavailable(
    parts: &Parts,
    detail: &str,
    retry_after: Option<RetryAfter>,
) -> Response<RejectionBody> {
    let wait = match retry_after {
        Some(RetryAfter::After(wait)) => Some(wait),
        _ => None,
    };
    #[cfg(feature = "tonic")]
    if is_grpc(parts) {
        let details = ErrorDetails::with_retry_info(wait);
        return tonic::Status::with_error_details(tonic::Code::Unavailable, detail, details).into_http();
    }
    let _ = parts;
    let seconds = wait.map(|wait| whole_seconds(wait).max(1));
    let mut response = problem(StatusCode::SERVICE_UNAVAILABLE, STORE_UNAVAILABLE_TYPE, detail, seconds);
    if let Some(seconds) = seconds {
        response.headers_mut().insert(RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

/// [`unchecked`] for a gRPC request.
#[cfg(feature = "tonic")]
fn grpc_unchecked(status: StatusCode, detail: &str) -> Response<RejectionBody> {
    let code = match status {
        StatusCode::UNAUTHORIZED => tonic::Code::Unauthenticated,
        StatusCode::SERVICE_UNAVAILABLE => tonic::Code::Unavailable,
        StatusCode::INTERNAL_SERVER_ERROR => tonic::Code::Internal,
        _ => tonic::Code::InvalidArgument,
    };
    tonic::Status::new(code, detail).into_http()
}

#[cfg(feature = "tonic")]
fn is_grpc(parts: &Parts) -> bool {
    parts.headers.get(CONTENT_TYPE).is_some_and(|value| value.as_bytes().starts_with(b"application/grpc"))
}
