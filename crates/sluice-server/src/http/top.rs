//! `GET /v1/top?policy=NAME&by=denied|consumed`: a policy's heaviest keys in this minute
//! and the previous one, each with its count and how much that count may overstate.
//!
//! Keys are callers' identities, so the endpoint follows the admin endpoints' rules (an
//! admin token, or loopback clients only without one). The guarantee, per epoch, with `n`
//! the epoch's total and `k` the table's counters: every key whose true count is above
//! `n / k` is listed, and `count − error ≤ true count ≤ count` with `error ≤ n / k`
//! (docs/service.md, "Top keys per policy").

use crate::engine::front::Front;
use crate::http::admin::authorize;
use crate::http::api::ErrorResponse;
use crate::http::error::ApiError;
use crate::metrics::{By, EPOCH_MICROS, EpochTop};
use crate::runtime::handoff::Client;
use axum::Json;
use axum::extract::{ConnectInfo, Query, State};
use axum::http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use utoipa::{IntoParams, ToSchema};

/// Which policy's table to read.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct TopQuery {
    /// The policy (or Envoy rule) name.
    policy: String,
    /// `denied` (checks the policy denied, shadow rejections included) or `consumed`
    /// (units it allowed); `denied` when not given.
    by: Option<String>,
}

/// A policy's heaviest keys over the last two epochs.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct TopResponse {
    /// The policy.
    pub(crate) policy: String,
    /// What is counted: `denied` checks or `consumed` units.
    pub(crate) by: &'static str,
    /// The table's counters, `k`.
    pub(crate) k: usize,
    /// The length of an epoch, in seconds.
    pub(crate) epoch_seconds: u64,
    /// The epoch under way.
    pub(crate) current: TopEpoch,
    /// The epoch before it (complete).
    pub(crate) previous: TopEpoch,
}

/// One epoch's heaviest keys.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct TopEpoch {
    /// Its start, in seconds since the Unix epoch.
    pub(crate) start: u64,
    /// `n`: what was counted in it (denied checks or consumed units).
    pub(crate) total: u64,
    /// `n / k`: every key above it is listed, and no count overstates by more.
    pub(crate) bound: u64,
    /// The listed keys, heaviest first.
    pub(crate) keys: Vec<TopKey>,
}

/// A listed key.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct TopKey {
    /// The caller's key (bytes that are not UTF-8 are replaced).
    pub(crate) key: String,
    /// Its count: never below the true count.
    pub(crate) count: u64,
    /// How much `count` may overstate: the true count is at least `count − error`.
    pub(crate) error: u64,
}

/// A policy's heaviest keys, denied or consumed, this minute and the previous one.
#[utoipa::path(
    get,
    path = "/v1/top",
    params(TopQuery),
    responses(
        (status = 200, description = "The policy's heaviest keys, with their error bounds", body = TopResponse),
        (status = 400, description = "No policy given, or `by` not `denied` or `consumed`", body = ErrorResponse),
        (status = 401, description = "Missing or wrong admin token, or a non-loopback client without a token configured", body = ErrorResponse),
        (status = 404, description = "Unknown policy, or top keys off (`top_keys: 0`)", body = ErrorResponse),
    ),
    security(("admin_token" = [])),
)]
pub(crate) async fn top(
    State(front): State<Arc<Front>>,
    ConnectInfo(peer): ConnectInfo<Client>,
    headers: HeaderMap,
    query: Result<Query<TopQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<TopResponse>, ApiError> {
    authorize(&front.service, &peer, &headers)?;
    let Query(query) = query?;
    let by_name = query.by.as_deref().unwrap_or("denied");
    let by = By::parse(by_name).ok_or_else(|| {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", format!("unknown `by` `{by_name}` (denied, consumed)"))
    })?;
    let figures = front.engine.metrics().figures_of(&query.policy).ok_or_else(|| {
        ApiError::new(StatusCode::NOT_FOUND, "unknown_policy", format!("unknown policy `{}`", query.policy))
    })?;
    let keys = figures
        .keys
        .as_ref()
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "top_keys_off", "top keys are off (`top_keys: 0`)"))?;
    let [current, previous] = keys.top.read(by, front.engine.now());
    Ok(Json(TopResponse {
        policy: query.policy,
        by: by.name(),
        k: keys.top.capacity(),
        epoch_seconds: EPOCH_MICROS / 1_000_000,
        current: epoch(current),
        previous: epoch(previous),
    }))
}

/// An epoch's table as the API answers it.
pub(super) fn epoch(top: EpochTop) -> TopEpoch {
    let keys = top.keys.into_iter().map(|counted| TopKey {
        key: String::from_utf8_lossy(&counted.key).into_owned(),
        count: counted.count,
        error: counted.error,
    });
    TopEpoch { start: top.start_micros / 1_000_000, total: top.total, bound: top.bound, keys: keys.collect() }
}
