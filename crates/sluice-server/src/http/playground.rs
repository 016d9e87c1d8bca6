//! `POST /v1/playground`: decides a posted trace on a throwaway store (see
//! [`crate::offline::playground`]).

use crate::engine::front::Front;
use crate::http::api::ErrorResponse;
use crate::http::error::ApiError;
use crate::http::ui::admit;
use crate::offline::playground::{PlaygroundError, PlaygroundRequest, PlaygroundResponse};
use crate::runtime::handoff::Client;
use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{ConnectInfo, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use tokio::sync::Semaphore;

/// One trace is decided at a time, on a blocking thread rather than a worker's runtime: the
/// largest trace takes some tens of milliseconds of CPU, which no check should wait behind,
/// and a flood of them queues here (until the request timeout) instead of taking every core.
static RUNS: Semaphore = Semaphore::const_new(1);

/// Decides a trace of requests under some policies, each on a fresh in-memory state:
/// never the service's own. Bounded: 8 policies, 2 000 requests, cost 100, 30 days, 64 KiB.
#[utoipa::path(
    post,
    path = "/v1/playground",
    request_body = PlaygroundRequest,
    responses(
        (status = 200, description = "Every policy's decision for every request", body = PlaygroundResponse),
        (status = 400, description = "Malformed body, invalid policies, a trace out of order or an invalid key", body = ErrorResponse),
        (status = 403, description = "Not a loopback client, and the dashboard is for loopback clients only", body = ErrorResponse),
        (status = 404, description = "The dashboard is off", body = ErrorResponse),
        (status = 413, description = "Over a bound; the message names it (`max_policies`, `max_trace`, `max_cost`, `max_offset`, `max_counters`) or the body is over 64 KiB", body = ErrorResponse),
        (status = 415, description = "Body not sent as application/json", body = ErrorResponse),
    ),
)]
pub(crate) async fn playground(
    State(front): State<Arc<Front>>,
    ConnectInfo(Client(peer)): ConnectInfo<Client>,
    body: Result<Json<PlaygroundRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    admit(front.service.settings.ui, peer)?;
    let Json(request) = body?;
    // Never closed: acquiring cannot fail.
    let _turn = RUNS.acquire().await.map_err(|_| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "busy", "busy"))?;
    let decided = tokio::task::spawn_blocking(move || request.decide().map(|response| serde_json::to_vec(&response)));
    match decided.await {
        Ok(Ok(Ok(json))) => Ok(([(header::CONTENT_TYPE, "application/json")], json).into_response()),
        Ok(Err(error)) => Err(error.into()),
        Ok(Ok(Err(error))) => Err(ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", error.to_string())),
        Err(error) => Err(ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", error.to_string())),
    }
}

impl From<PlaygroundError> for ApiError {
    fn from(error: PlaygroundError) -> ApiError {
        match error {
            PlaygroundError::TooLarge(message) => {
                ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", message)
            }
            PlaygroundError::Invalid(message) => ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message),
        }
    }
}
