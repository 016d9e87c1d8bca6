//! `POST /v1/playground`: decides a posted trace on a throwaway store (see
//! [`crate::playground`]).

use crate::front::Front;
use crate::handoff::Client;
use crate::http::api::ErrorResponse;
use crate::http::error::ApiError;
use crate::http::ui::admit;
use crate::playground::{PlaygroundError, PlaygroundRequest, PlaygroundResponse};
use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{ConnectInfo, State};
use axum::http::StatusCode;
use std::sync::Arc;

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
        (status = 413, description = "Over a bound; the message names it (`max_policies`, `max_trace`, `max_cost`, `max_offset`) or the body is over 64 KiB", body = ErrorResponse),
        (status = 415, description = "Body not sent as application/json", body = ErrorResponse),
    ),
)]
pub(crate) async fn playground(
    State(front): State<Arc<Front>>,
    ConnectInfo(Client(peer)): ConnectInfo<Client>,
    body: Result<Json<PlaygroundRequest>, JsonRejection>,
) -> Result<Json<PlaygroundResponse>, ApiError> {
    admit(front.service.settings.ui, peer)?;
    let Json(request) = body?;
    Ok(Json(request.decide()?))
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
