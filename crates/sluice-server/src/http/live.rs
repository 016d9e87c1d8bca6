//! `GET /v1/live`: what the dashboard's live view polls.

use crate::engine::front::Front;
use crate::http::api::ErrorResponse;
use crate::http::error::ApiError;
use crate::http::live_policy::{LivePolicy, live_policies};
use crate::http::ui::admit;
use crate::metrics::{BucketCensus, RlqsCounts, Seconds};
use crate::runtime::handoff::Client;
use axum::Json;
use axum::extract::{ConnectInfo, State};
use serde::Serialize;
use sluice_core::lease::LeaseFigures;
use std::sync::Arc;
use utoipa::ToSchema;

/// The service's counters now. Rates are the differences between two polls.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct LiveResponse {
    /// Every policy in force, then every Envoy rule with a limit, with what it decided
    /// since the service started.
    pub(crate) policies: Vec<LivePolicy>,
    /// Decisions made while the store could not answer, by failure mode.
    pub(crate) without_store: WithoutStore,
    /// Envoy's rate limit quota service: what it holds now and what it did since the start.
    pub(crate) rlqs: RlqsCounts,
    /// The RLQS buckets held by the most Envoys (the first [`LIVE_BUCKETS`]), each with
    /// its rule and its holders' answers (`/v1/rlqs/buckets` has more).
    pub(crate) rlqs_buckets: BucketCensus,
    /// Quota leases on a shared store (`lease_period`), over every policy; null without
    /// leases (the embedded store, or a lease period of 0).
    pub(crate) leases: Option<LiveLeases>,
    /// Checks allowed and rejected in each of the last 300 whole seconds (every check,
    /// not a sample).
    pub(crate) per_second: PerSecondCounts,
}

/// RLQS buckets the live view lists (`/v1/rlqs/buckets` lists up to 100).
pub(crate) const LIVE_BUCKETS: usize = 10;

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
    let policies = live_policies(&front, &loaded, shadow_all, now);
    let mut rlqs_buckets = BucketCensus::clone(&metrics.rlqs().listed());
    rlqs_buckets.buckets.truncate(LIVE_BUCKETS);
    let [failed_open, failed_closed, fallback] = metrics.without_store();
    let Seconds { last, allowed, rejected } = metrics.per_second().before(now);
    Ok(Json(LiveResponse {
        policies,
        without_store: WithoutStore { failed_open, failed_closed, fallback },
        rlqs: metrics.rlqs().counts(),
        rlqs_buckets,
        leases: front
            .engine
            .backend()
            .lease_figures()
            .filter(|_| !front.service.settings.lease_period.is_zero())
            .map(|figures| LiveLeases::from(&figures)),
        per_second: PerSecondCounts { last, allowed, rejected },
    }))
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
