//! Admin endpoints: `POST /v1/reset` and `POST /v1/reload`, and the rules they and
//! `GET /v1/top` follow.
//!
//! With an admin token configured they require `Authorization: Bearer <token>` (the scheme
//! in any case; the token is checked in constant time, see
//! [`AdminToken`](crate::config::admin_token::AdminToken)); without one they answer loopback
//! clients only.

use crate::engine::front::Front;
use crate::engine::service_state::ServiceState;
use crate::http::api::{ErrorResponse, ResetRequest};
use crate::http::error::ApiError;
use crate::runtime::handoff::Client;
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
        (status = 400, description = "Malformed body, invalid key, or a policy listed twice", body = ErrorResponse),
        (status = 401, description = "Missing or wrong admin token, or a non-loopback client without a token configured", body = ErrorResponse),
        (status = 404, description = "Unknown policy", body = ErrorResponse),
        (status = 413, description = "Body over 64 KiB", body = ErrorResponse),
        (status = 415, description = "Body not sent as application/json", body = ErrorResponse),
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

/// Admits an admin request: the admin token, or a loopback client when none is configured.
pub(super) fn authorize(service: &ServiceState, peer: &Client, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(token) = &service.settings.admin_token else {
        if peer.is_loopback() {
            return Ok(());
        }
        return Err(ApiError::unauthorized(
            "admin endpoints answer loopback clients only unless an admin token is configured",
        ));
    };
    let given = headers.get(header::AUTHORIZATION).and_then(|value| value.to_str().ok());
    match given.and_then(bearer_token) {
        Some(given) if token.matches(given) => Ok(()),
        Some(_) => Err(ApiError::unauthorized("wrong admin token")),
        None => Err(ApiError::unauthorized("admin endpoints need `Authorization: Bearer <admin token>`")),
    }
}

/// The token of an `Authorization` value of the `Bearer` scheme (RFC 6750): the scheme in
/// any case, as RFC 9110 makes auth schemes case-insensitive, then one or more spaces or
/// tabs, then the token.
fn bearer_token(authorization: &str) -> Option<&str> {
    let (scheme, rest) = authorization.split_once([' ', '\t'])?;
    let token = rest.trim_start_matches([' ', '\t']);
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::bearer_token;

    #[test]
    fn the_bearer_scheme_is_read_in_any_case_with_any_blank_run() {
        for header in
            ["Bearer s3cret", "bearer s3cret", "BEARER s3cret", "BeArEr   s3cret", "Bearer\ts3cret", "Bearer \t s3cret"]
        {
            assert_eq!(bearer_token(header), Some("s3cret"), "{header:?}");
        }
    }

    #[test]
    fn other_schemes_and_empty_tokens_are_not_bearer_tokens() {
        for header in
            ["Basic czNjcmV0", "Bearers3cret", "Bearer", "Bearer ", "Bearer \t", "", " Bearer s3cret", "Token s3cret"]
        {
            assert_eq!(bearer_token(header), None, "{header:?}");
        }
    }
}
