//! `GET /v1/live`: what the dashboard's live view polls.

use crate::engine::front::Front;
use crate::http::api::ErrorResponse;
use crate::http::error::ApiError;
use crate::http::ui::admit;
use crate::metrics::{HotKey, RlqsCounts, SAMPLE_EVERY, Seconds};
use crate::runtime::handoff::Client;
use axum::Json;
use axum::extract::{ConnectInfo, State};
use serde::Serialize;
use std::sync::Arc;
use utoipa::ToSchema;

/// The service's counters now. Rates are the differences between two polls.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct LiveResponse {
    /// Every policy in force, with what it decided since the service started.
    pub(crate) policies: Vec<LivePolicy>,
    /// Decisions made while the store could not answer, by failure mode.
    pub(crate) without_store: WithoutStore,
    /// Envoy's rate limit quota service: what it holds now and what it did since the start.
    pub(crate) rlqs: RlqsCounts,
    /// The hottest keys, hottest first (estimates: one check in `hot_keys_sample` is counted).
    pub(crate) hot_keys: Vec<LiveKey>,
    /// The sampling rate of the hot keys: one check in this many is counted.
    pub(crate) hot_keys_sample: u32,
    /// Checks allowed and rejected in each of the last 300 whole seconds (every check,
    /// not a sample).
    pub(crate) per_second: PerSecondCounts,
}

/// Checks per second, oldest first: entry `i` counts second `last − (n − 1) + i`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct PerSecondCounts {
    /// The last whole second counted, in seconds since the Unix epoch (the current second
    /// is still counting and is left out).
    pub(crate) last: u64,
    /// Checks allowed (shadow rejections included: they were let through).
    pub(crate) allowed: Vec<u64>,
    /// Checks rejected.
    pub(crate) rejected: Vec<u64>,
}

/// A policy and its counts.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct LivePolicy {
    /// The policy's name.
    pub(crate) name: String,
    /// Its algorithm.
    pub(crate) algorithm: &'static str,
    /// Its limit.
    pub(crate) limit: u64,
    /// Its limit with its window, or its bucket's size and rate, in words (`2 / 1 s`,
    /// `capacity 100, 10 per 1 s`).
    pub(crate) limit_text: String,
    /// Whether it is in shadow mode.
    pub(crate) shadow_mode: bool,
    /// Requests it allowed.
    pub(crate) allowed: u64,
    /// Requests it rejected.
    pub(crate) rejected: u64,
    /// Requests it would have rejected, in shadow mode.
    pub(crate) shadow_rejected: u64,
}

/// Decisions made without the store (see the `failure_mode` setting).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct WithoutStore {
    /// Allowed because the store could not answer (`open`).
    pub(crate) failed_open: u64,
    /// Refused because the store could not answer (`closed`).
    pub(crate) failed_closed: u64,
    /// Decided by the in-process fallback limiter (`fallback`).
    pub(crate) fallback: u64,
}

/// A hot key, with estimated counts.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct LiveKey {
    /// The caller's key.
    pub(crate) key: String,
    /// Estimated checks of the key (recent ones weigh more: counts halve as samples come).
    pub(crate) checks: u64,
    /// Estimated rejected checks of the key.
    pub(crate) rejected: u64,
    /// The policy that rejected its latest sampled rejection; null when none was sampled.
    pub(crate) limited_by: Option<String>,
}

/// The policies' counts, the decisions made without the store and the hottest keys.
#[utoipa::path(
    get,
    path = "/v1/live",
    responses(
        (status = 200, description = "The counters now", body = LiveResponse),
        (status = 403, description = "Not a loopback client, and the dashboard is for loopback clients only", body = ErrorResponse),
        (status = 404, description = "The dashboard is off", body = ErrorResponse),
    ),
)]
pub(crate) async fn live(
    State(front): State<Arc<Front>>,
    ConnectInfo(Client(peer)): ConnectInfo<Client>,
) -> Result<Json<LiveResponse>, ApiError> {
    admit(front.service.settings.ui, peer)?;
    let loaded = front.engine.loaded();
    let metrics = front.engine.metrics();
    let policies = loaded.config.policies().iter().enumerate().map(|(index, entry)| {
        let [allowed, rejected, shadow_rejected] = loaded.counters(index).map_or([0; 3], |counters| counters.totals());
        let policy = entry.limit.policy();
        LivePolicy {
            name: entry.limit.name().to_owned(),
            algorithm: policy.algorithm_name(),
            limit: policy.limit(),
            limit_text: crate::config::policy_text::describe(policy),
            shadow_mode: entry.shadow || front.service.settings.shadow_mode,
            allowed,
            rejected,
            shadow_rejected,
        }
    });
    let [failed_open, failed_closed, fallback] = metrics.without_store();
    let hot_keys = metrics.hot_keys().top().into_iter().map(estimate);
    let Seconds { last, allowed, rejected } = metrics.per_second().before(front.engine.now());
    Ok(Json(LiveResponse {
        policies: policies.collect(),
        without_store: WithoutStore { failed_open, failed_closed, fallback },
        rlqs: metrics.rlqs().counts(),
        hot_keys: hot_keys.collect(),
        hot_keys_sample: SAMPLE_EVERY,
        per_second: PerSecondCounts { last, allowed, rejected },
    }))
}

fn estimate(hot: HotKey) -> LiveKey {
    let scale = u64::from(SAMPLE_EVERY);
    let limited_by = (!hot.limited_by.is_empty()).then_some(hot.limited_by);
    LiveKey { key: hot.key, checks: hot.checks * scale, rejected: hot.rejected * scale, limited_by }
}
