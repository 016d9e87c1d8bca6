//! `POST /v1/check` and `POST /v1/peek`.

use crate::engine::Answer;
use crate::engine::front::Front;
use crate::http::api::{CheckRequest, CheckResponse, ErrorResponse, PeekRequest, PolicyNames};
use crate::http::body::{RequestBody, read_body};
use crate::http::deadline::Deadline;
use crate::http::error::{ApiError, json_body};
use crate::http::headers::{fields, insert_rate_limit_headers, write_rate_limit_headers};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::{self, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use sluice_core::Source;
use sluice_tower::headers::Fields;
use std::borrow::Cow;
use std::sync::Arc;

/// Checks a key against policies, consuming `cost` when allowed.
#[utoipa::path(
    post,
    path = "/v1/check",
    request_body = CheckRequest<'_>,
    responses(
        (status = 200, description = "Allowed (or rejected only by a shadow-mode policy)", body = CheckResponse<'_>),
        (status = 429, description = "Rejected; `Retry-After` tells when a request of the same cost could pass", body = CheckResponse<'_>),
        (status = 400, description = "Malformed body, invalid key, no policy or a policy listed twice", body = ErrorResponse),
        (status = 404, description = "Unknown policy", body = ErrorResponse),
        (status = 408, description = "The body did not come in full within the body timeout (`body_timeout`, or `request_timeout` if shorter); HTTP/1 closes the connection", body = ErrorResponse),
        (status = 413, description = "Body over 64 KiB", body = ErrorResponse),
        (status = 415, description = "Body not sent as application/json", body = ErrorResponse),
        (status = 422, description = "The store cannot decide exactly (a time of 2^53 µs or more)", body = ErrorResponse),
        (status = 500, description = "The store answered something this version cannot read", body = ErrorResponse),
        (status = 503, description = "The store cannot answer and the failure mode is `closed`", body = ErrorResponse),
    ),
)]
pub(crate) async fn check(State(front): State<Arc<Front>>, request: Request) -> Response {
    check_request(&front, request).await
}

/// [`check`], for any request body (the connection's fast path hands hyper's own).
pub(crate) async fn check_request<B: RequestBody>(front: &Front, request: http::Request<B>) -> Response {
    answer(front, request, |headers, body| {
        let request: CheckRequest<'_> = json_body(headers, body)?;
        Ok((request.key, request.policies, request.cost))
    })
    .await
}

/// Tells what a cost-1 request would get now, without consuming anything.
#[utoipa::path(
    post,
    path = "/v1/peek",
    request_body = PeekRequest<'_>,
    responses(
        (status = 200, description = "A cost-1 request would pass", body = CheckResponse<'_>),
        (status = 429, description = "A cost-1 request would be rejected", body = CheckResponse<'_>),
        (status = 400, description = "Malformed body or invalid key", body = ErrorResponse),
        (status = 404, description = "Unknown policy", body = ErrorResponse),
        (status = 408, description = "The body did not come in full within the body timeout (`body_timeout`, or `request_timeout` if shorter); HTTP/1 closes the connection", body = ErrorResponse),
        (status = 413, description = "Body over 64 KiB", body = ErrorResponse),
        (status = 415, description = "Body not sent as application/json", body = ErrorResponse),
        (status = 422, description = "The store cannot decide exactly (a time of 2^53 µs or more)", body = ErrorResponse),
        (status = 500, description = "The store answered something this version cannot read", body = ErrorResponse),
        (status = 503, description = "The store cannot answer", body = ErrorResponse),
    ),
)]
pub(crate) async fn peek(State(front): State<Arc<Front>>, request: Request) -> Response {
    peek_request(&front, request).await
}

/// [`peek`], for any request body.
pub(crate) async fn peek_request<B: RequestBody>(front: &Front, request: http::Request<B>) -> Response {
    answer(front, request, |headers, body| {
        let request: PeekRequest<'_> = json_body(headers, body)?;
        Ok((request.key, request.policies, 0))
    })
    .await
}

/// What a check or peek body asks: the key, the policies and the cost.
type Asked<'a> = (Cow<'a, str>, PolicyNames<'a>, u64);

/// Reads the body, parses it with `parse`, checks and answers.
async fn answer<B: RequestBody>(
    front: &Front,
    request: http::Request<B>,
    parse: for<'a> fn(&HeaderMap, &'a [u8]) -> Result<Asked<'a>, ApiError>,
) -> Response {
    let checked = async {
        let (parts, body) = request.into_parts();
        let body = read_body(body, Deadline::body(&front.service.settings)).await?;
        let (key, policies, cost) = parse(&parts.headers, &body)?;
        Ok::<_, ApiError>(front.engine.check(key.as_bytes(), &policies, cost).await?)
    };
    let fields = fields(front.service.settings.x_ratelimit_headers);
    checked.await.map_or_else(IntoResponse::into_response, |outcome| respond(&outcome, fields))
}

/// 200 or 429 with the decision and its headers; 503 when the `closed` failure mode decided
/// for an enforced policy (one in shadow mode never blocks, whatever decided for it).
fn respond(outcome: &Answer, fields: Fields) -> Response {
    if outcome.source == Source::FailedClosed && !outcome.shadow_rejected {
        return store_down(outcome);
    }
    let status = if outcome.decision.allowed { StatusCode::OK } else { StatusCode::TOO_MANY_REQUESTS };
    // The body and every header value share one buffer, sized for them all: this runs on
    // every check.
    let mut buffer = Vec::with_capacity(384 + 3 * outcome.limit.name().len());
    CheckResponse::from_outcome(outcome).write_json(&mut buffer);
    let body_length = buffer.len();
    // No rate-limit fields on a failed-open answer: no quota was read to announce.
    let ranges = (outcome.source != Source::FailedOpen).then(|| write_rate_limit_headers(outcome, fields, &mut buffer));
    let buffer = Bytes::from(buffer);
    let mut response = Response::new(Body::from(buffer.slice(..body_length)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.reserve(8);
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Some(ranges) = ranges {
        insert_rate_limit_headers(headers, ranges, &buffer);
    }
    response
}

/// The answer while the store is down under the `closed` failure mode: an outage, not a
/// spent quota, so 503 `store_unavailable` without rate-limit fields, and `Retry-After`
/// from the store's wait (the Redis store's probe interval, rounded up to a whole second),
/// as the tower layer answers.
fn store_down(outcome: &Answer) -> Response {
    let message = "the store cannot answer and the failure mode is closed";
    let mut response = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", message).into_response();
    if let Some(seconds) = sluice_tower::headers::retry_after_seconds(&outcome.decision) {
        response.headers_mut().insert(http::header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}
