//! `GET /v1/rlqs/buckets`: the RLQS buckets held by the most Envoys, each with its rule
//! and what its holders were last told (a share, a refusal, nothing), as the hub's
//! last once-a-second census found them.
//!
//! A bucket's key is made of a caller's descriptor values, so the endpoint follows the
//! admin endpoints' rules (an admin token, or loopback clients only without one), as
//! `/v1/top` does.

use crate::engine::front::Front;
use crate::http::admin::authorize;
use crate::http::api::ErrorResponse;
use crate::http::error::ApiError;
use crate::metrics::{BucketCensus, LISTED_BUCKETS};
use crate::runtime::handoff::Client;
use axum::Json;
use axum::extract::{ConnectInfo, Query, State};
use axum::http::{HeaderMap, StatusCode};
use serde::Deserialize;
use std::sync::Arc;
use utoipa::IntoParams;

/// How many buckets to list.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct BucketsQuery {
    /// The most buckets to list, 1 to 100; 100 when not given.
    limit: Option<usize>,
}

/// The RLQS buckets held by the most Envoys, the most held first.
#[utoipa::path(
    get,
    path = "/v1/rlqs/buckets",
    params(BucketsQuery),
    responses(
        (status = 200, description = "The buckets the last census listed, with their rules and holders' answers", body = BucketCensus),
        (status = 400, description = "`limit` not a number from 1 to 100", body = ErrorResponse),
        (status = 401, description = "Missing or wrong admin token, or a non-loopback client without a token configured", body = ErrorResponse),
    ),
    security(("admin_token" = [])),
)]
pub(crate) async fn buckets(
    State(front): State<Arc<Front>>,
    ConnectInfo(peer): ConnectInfo<Client>,
    headers: HeaderMap,
    query: Result<Query<BucketsQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<BucketCensus>, ApiError> {
    authorize(&front.service, &peer, &headers)?;
    let Query(query) = query?;
    let limit = query.limit.unwrap_or(LISTED_BUCKETS);
    if !(1..=LISTED_BUCKETS).contains(&limit) {
        let message = format!("`limit` must be from 1 to {LISTED_BUCKETS}, not {limit}");
        return Err(ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message));
    }
    let mut census = BucketCensus::clone(&front.engine.metrics().rlqs().listed());
    census.buckets.truncate(limit);
    Ok(Json(census))
}
