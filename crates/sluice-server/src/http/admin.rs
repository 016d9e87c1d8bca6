//! Admin endpoints: `POST /v1/reset` and `POST /v1/reload`.
//!
//! With an admin token configured they require `Authorization: Bearer <token>`; without
//! one they answer loopback clients only.

use crate::front::Front;
use crate::handoff::Client;
use crate::http::api::{ErrorResponse, ResetRequest};
use crate::http::error::ApiError;
use crate::service::Service;
use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// Forgets a key's state under some or all policies.
#[utoipa::path(
    post,
    path = "/v1/reset",
    request_body = ResetRequest,
    responses(
        (status = 204, description = "The key starts fresh"),
        (status = 400, description = "Malformed body or invalid key", body = ErrorResponse),
        (status = 401, description = "Missing or wrong admin token, or a non-loopback client without a token configured", body = ErrorResponse),
        (status = 404, description = "Unknown policy", body = ErrorResponse),
        (status = 503, description = "The store cannot answer", body = ErrorResponse),
    ),
    security(("admin_token" = [])),
)]
pub(crate) async fn reset(
    State(front): State<Arc<Front>>,
    ConnectInfo(peer): ConnectInfo<Client>,
    headers: HeaderMap,
    body: Result<Json<ResetRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    authorize(&front.service, &peer, &headers)?;
    let Json(request) = body?;
    front.engine.reset(request.key.as_bytes(), &request.policies).await?;
    tracing::info!(key = request.key, policies = ?request.policies, "key reset");
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// Reloads the configuration file now (as SIGHUP does).
#[utoipa::path(
    post,
    path = "/v1/reload",
    responses(
        (status = 204, description = "The new configuration is in force"),
        (status = 401, description = "Not authorized", body = ErrorResponse),
        (status = 422, description = "The file is invalid; the old configuration stays", body = ErrorResponse),
    ),
    security(("admin_token" = [])),
)]
pub(crate) async fn reload(
    State(front): State<Arc<Front>>,
    ConnectInfo(peer): ConnectInfo<Client>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    authorize(&front.service, &peer, &headers)?;
    match front.service.reload().await {
        Ok(_) => Ok(StatusCode::NO_CONTENT.into_response()),
        Err(error) => Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_config", format!("{error:#}"))),
    }
}

fn authorize(service: &Service, peer: &Client, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(token) = &service.settings.admin_token else {
        if peer.is_loopback() {
            return Ok(());
        }
        return Err(ApiError::unauthorized(
            "admin endpoints answer loopback clients only unless an admin token is configured",
        ));
    };
    let given = headers.get(header::AUTHORIZATION).and_then(|value| value.to_str().ok());
    match given.and_then(|value| value.strip_prefix("Bearer ")) {
        Some(given) if same(given.as_bytes(), token.as_bytes()) => Ok(()),
        Some(_) => Err(ApiError::unauthorized("wrong admin token")),
        None => Err(ApiError::unauthorized("admin endpoints need `Authorization: Bearer <admin token>`")),
    }
}

/// Compares in time independent of where the inputs differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
