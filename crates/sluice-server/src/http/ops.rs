//! Operations endpoints: health, readiness, metrics, the policy list and the OpenAPI document.

use crate::config::leases::never_leased;
use crate::engine::front::Front;
use crate::http::api::PolicyInfo;
use crate::metrics::Gauges;
use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use sluice_redis::{FailureMode, RedisHealth};
use std::sync::Arc;

/// The process is up.
#[utoipa::path(get, path = "/healthz", responses((status = 200, description = "Up", body = String)))]
pub(crate) async fn healthz() -> &'static str {
    "ok\n"
}

/// This instance answers as configured: it has started, shutdown has not begun, and its
/// store answers, or (on Redis) its failure mode keeps serving while Redis does not:
/// `open` and `fallback` are ready during an outage (the body says so), `closed` is not,
/// since it would reject every check. On a Cluster with some masters down (not all), the
/// instance is ready in every mode: only those masters' keys follow the failure mode, and
/// the body names them. A Redis that refuses the configuration (a password rotated, an ACL
/// changed) is no outage: not ready in every mode, until it is mended.
#[utoipa::path(
    get,
    path = "/readyz",
    responses((status = 200, description = "Ready: the store answers, or the failure mode (open, fallback) serves while Redis does not", body = String), (status = 503, description = "Starting, shutting down, Redis refuses the configuration (any failure mode), or Redis does not answer under the closed failure mode", body = String)),
)]
pub(crate) async fn readyz(State(front): State<Arc<Front>>) -> Response {
    if !front.service.is_ready() {
        return (StatusCode::SERVICE_UNAVAILABLE, "not ready: starting or shutting down\n").into_response();
    }
    let Some(redis) = front.engine.backend().redis() else {
        return (StatusCode::OK, "ready\n").into_response();
    };
    if let Some(refused) = redis.refusal() {
        let message = format!("not ready: Redis refuses Sluice's configuration: {refused}\n");
        return (StatusCode::SERVICE_UNAVAILABLE, message).into_response();
    }
    if redis.probe().await {
        return (StatusCode::OK, "ready\n").into_response();
    }
    let mode = redis.settings().failure_mode;
    let health = redis.health();
    if !health.is_down_everywhere() && !health.nodes.is_empty() {
        // A Cluster with some masters down: every other slot is decided by Redis, and
        // another instance would see the same Cluster.
        return (StatusCode::OK, format!("ready: {}\n", masters_down(&health, mode))).into_response();
    }
    let lasted = health.outage.unwrap_or_default().as_secs_f64();
    let message = format!("Redis unavailable for {lasted:.1} s: checks are answered by the failure mode `{mode}`");
    match mode {
        FailureMode::Closed => (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {message}\n")).into_response(),
        FailureMode::Open | FailureMode::Fallback => (StatusCode::OK, format!("ready: {message}\n")).into_response(),
    }
}

/// Which Cluster masters are down, for how long, and what answers for their keys.
fn masters_down(health: &RedisHealth, mode: FailureMode) -> String {
    let down: Vec<String> = health
        .nodes
        .iter()
        .filter_map(|node| {
            let lasted = node.outage?.as_secs_f64();
            Some(format!("{} (slots {}) for {lasted:.1} s", node.address, node.slot_ranges()))
        })
        .collect();
    format!(
        "Redis Cluster masters unavailable: {}; their keys are answered by the failure mode `{mode}`, every other \
         slot's by Redis",
        down.join(", ")
    )
}

/// What `/metrics` is served as: OpenMetrics text, which Prometheus reads (and prefers).
const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Prometheus metrics, OpenMetrics text format.
#[utoipa::path(
    get,
    path = "/metrics",
    responses((status = 200, description = "OpenMetrics text exposition (Prometheus reads it)", body = String, content_type = METRICS_CONTENT_TYPE)),
)]
pub(crate) async fn metrics(State(front): State<Arc<Front>>) -> Response {
    let service = &front.service;
    let backend = service.engine.backend();
    let loaded = service.engine.loaded();
    let never_leased = never_leased(&service.settings, loaded.config.limits());
    let gauges = Gauges {
        keys: backend.memory().map(sluice_core::MemoryStore::len),
        states: backend.memory().map(sluice_core::MemoryStore::len_by_name),
        redis: backend.redis_health(),
        leases: backend.lease_figures(),
        lease_policies: backend.lease_figures_by_limit(),
        never_leased: never_leased.into_iter().map(|(name, reason)| (name.to_owned(), reason)).collect(),
        snapshot_age: service.last_snapshot.lock().map(|at| at.elapsed()),
        now: service.engine.now(),
    };
    let text = service.engine.metrics().render(gauges);
    ([(header::CONTENT_TYPE, METRICS_CONTENT_TYPE)], text).into_response()
}

/// The policies in force.
#[utoipa::path(get, path = "/v1/policies", responses((status = 200, description = "Every policy", body = [PolicyInfo])))]
pub(crate) async fn policies(State(front): State<Arc<Front>>) -> Json<Vec<PolicyInfo>> {
    let loaded = front.engine.loaded();
    let list = loaded.config.policies().iter().map(|entry| PolicyInfo {
        name: entry.limit.name().to_owned(),
        algorithm: entry.limit.policy().algorithm_name(),
        limit: entry.limit.policy().limit(),
        shadow_mode: entry.shadow,
    });
    Json(list.collect())
}
