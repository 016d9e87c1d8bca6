//! `GET /v1/live`: what the dashboard's live view polls.

use crate::config::service_file::PolicyEntry;
use crate::engine::front::Front;
use crate::http::api::ErrorResponse;
use crate::http::error::ApiError;
use crate::http::top::{TopEpoch, epoch};
use crate::http::ui::admit;
use crate::metrics::{By, PolicyCounters, PolicyFigures, RlqsCounts, Seconds};
use crate::runtime::handoff::Client;
use axum::Json;
use axum::extract::{ConnectInfo, State};
use serde::Serialize;
use sluice_core::Timestamp;
use sluice_core::lease::LeaseFigures;
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
    /// Quota leases on a shared store (`lease_period`), over every policy; null without
    /// leases (the embedded store, or a lease period of 0).
    pub(crate) leases: Option<LiveLeases>,
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
    /// Decisions at 0.8 of its limit or more.
    pub(crate) near_limit: u64,
    /// Distinct keys it has checked, estimated (HyperLogLog); null with `top_keys: 0`.
    pub(crate) keys_estimate: Option<u64>,
    /// This minute's most denied keys (the first [`LIVE_TOP`]), with their error bounds;
    /// null with `top_keys: 0`.
    pub(crate) top_denied: Option<TopEpoch>,
    /// This minute's keys that consumed the most units (the first [`LIVE_TOP`]).
    pub(crate) top_consumed: Option<TopEpoch>,
}

/// Keys of each top list the live view shows (`/v1/top` has them all).
pub(crate) const LIVE_TOP: usize = 5;

/// What quota leases did since the start (docs/leases.md), as `sluice_lease_*` counts it.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct LiveLeases {
    /// Leased units held now, not yet spent or given up.
    pub(crate) units_held: u64,
    /// Units leased: debited by the store beyond the requests' own costs.
    pub(crate) units_leased: u64,
    /// Unspent leased units given back to the store.
    pub(crate) units_returned: u64,
    /// Leased units that could no longer be spent and were given up.
    pub(crate) units_expired: u64,
    /// Checks decided from leased units: store calls saved.
    pub(crate) leased_checks: u64,
    /// Checks that went to the store.
    pub(crate) store_calls: u64,
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

/// The policies' counts and top keys, and the decisions made without the store.
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
    let now = front.engine.now();
    let shadow_all = front.service.settings.shadow_mode;
    let policies = loaded.config.policies().iter().enumerate();
    let policies = policies.map(|(index, entry)| live_policy(entry, loaded.counters(index), shadow_all, now));
    let [failed_open, failed_closed, fallback] = metrics.without_store();
    let Seconds { last, allowed, rejected } = metrics.per_second().before(now);
    Ok(Json(LiveResponse {
        policies: policies.collect(),
        without_store: WithoutStore { failed_open, failed_closed, fallback },
        rlqs: metrics.rlqs().counts(),
        leases: front
            .engine
            .backend()
            .lease_figures()
            .filter(|_| !front.service.settings.lease_period.is_zero())
            .map(|figures| LiveLeases::from(&figures)),
        per_second: PerSecondCounts { last, allowed, rejected },
    }))
}

/// A policy in force with its counts and figures (`shadow_all`: `--shadow-mode`).
fn live_policy(entry: &PolicyEntry, counters: Option<&PolicyCounters>, shadow_all: bool, now: Timestamp) -> LivePolicy {
    let [allowed, rejected, shadow_rejected] = counters.map_or([0; 3], PolicyCounters::totals);
    let figures = counters.and_then(PolicyCounters::figures);
    let policy = entry.limit.policy();
    LivePolicy {
        name: entry.limit.name().to_owned(),
        algorithm: policy.algorithm_name(),
        limit: policy.limit(),
        limit_text: crate::config::policy_text::describe(policy),
        shadow_mode: entry.shadow || shadow_all,
        allowed,
        rejected,
        shadow_rejected,
        near_limit: figures.map_or(0, |figures| figures.near_limit.get()),
        keys_estimate: figures.and_then(|figures| Some(figures.keys.as_ref()?.distinct.estimate())),
        top_denied: figures.and_then(|figures| top_now(figures, By::Denied, now)),
        top_consumed: figures.and_then(|figures| top_now(figures, By::Consumed, now)),
    }
}

impl From<&LeaseFigures> for LiveLeases {
    fn from(figures: &LeaseFigures) -> LiveLeases {
        LiveLeases {
            units_held: figures.units_held,
            units_leased: figures.units_leased,
            units_returned: figures.units_returned,
            units_expired: figures.units_expired,
            leased_checks: figures.leased_checks,
            store_calls: figures.store_calls,
        }
    }
}

/// This minute's first [`LIVE_TOP`] keys of a policy's table `by`.
fn top_now(figures: &PolicyFigures, by: By, now: Timestamp) -> Option<TopEpoch> {
    let [mut current, _] = figures.keys.as_ref()?.top.read(by, now);
    current.keys.truncate(LIVE_TOP);
    Some(epoch(current))
}
