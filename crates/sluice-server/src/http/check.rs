//! `POST /v1/check` and `POST /v1/peek`.

use crate::engine::Outcome;
use crate::http::api::{CheckRequest, CheckResponse, ErrorResponse, PeekRequest};
use crate::http::error::ApiError;
use crate::http::error::json_body;
use crate::http::headers::add_rate_limit_headers;
use crate::service::Service;
use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use sluice::Source;
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
        (status = 413, description = "Body over 64 KiB", body = ErrorResponse),
        (status = 415, description = "Body not sent as application/json", body = ErrorResponse),
        (status = 503, description = "The store cannot answer and the failure mode is `closed`", body = ErrorResponse),
    ),
)]
pub(crate) async fn check(
    State(service): State<Arc<Service>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body?;
    let request: CheckRequest<'_> = json_body(&headers, &body)?;
    let outcome = service.engine.check(request.key.as_bytes(), &request.policies, request.cost).await?;
    Ok(respond(&outcome))
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
        (status = 503, description = "The store cannot answer", body = ErrorResponse),
    ),
)]
pub(crate) async fn peek(
    State(service): State<Arc<Service>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body?;
    let request: PeekRequest<'_> = json_body(&headers, &body)?;
    let outcome = service.engine.check(request.key.as_bytes(), &request.policies, 0).await?;
    Ok(respond(&outcome))
}

/// 200 or 429 with the decision and its headers; 503 when the `closed` failure mode decided.
fn respond(outcome: &Outcome) -> Response {
    if outcome.source == Source::FailedClosed {
        let message = "the store cannot answer and the failure mode is closed";
        return ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", message).into_response();
    }
    let status = if outcome.decision.allowed { StatusCode::OK } else { StatusCode::TOO_MANY_REQUESTS };
    let mut response = (status, Json(CheckResponse::from_outcome(outcome))).into_response();
    add_rate_limit_headers(response.headers_mut(), outcome);
    response
}
