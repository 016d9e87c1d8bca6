//! Operations endpoints: health, readiness, metrics, the policy list and the OpenAPI document.

use crate::front::Front;
use crate::http::api::PolicyInfo;
use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use sluice::{Key, Source};
use std::sync::Arc;

/// The process is up.
#[utoipa::path(get, path = "/healthz", responses((status = 200, description = "Up", body = String)))]
pub(crate) async fn healthz() -> &'static str {
    "ok\n"
}

/// Ready to decide: every worker has its store connection, the store answers, and
/// shutdown has not begun.
#[utoipa::path(
    get,
    path = "/readyz",
    responses((status = 200, description = "Ready: the store answers", body = String), (status = 503, description = "The store does not answer, or the service is shutting down", body = String)),
)]
pub(crate) async fn readyz(State(front): State<Arc<Front>>) -> Response {
    if !front.service.is_ready() {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready: starting or shutting down\n").into_response()
    } else if store_answers(&front).await {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "store unavailable\n").into_response()
    }
}

/// Peeks (cost 0, nothing written) at a probe key through this worker's own store
/// connection: only the store itself counts as an answer.
async fn store_answers(front: &Front) -> bool {
    let Some(limit) = front.engine.loaded().config.limits().next().cloned() else {
        return true;
    };
    let Ok(key) = Key::new(b"sluice:readiness-probe") else { return false };
    let now = sluice::Clock::now(&sluice::SystemClock::new());
    let verdict = front.engine.backend().check(key, std::slice::from_ref(&limit), now, 0).await;
    matches!(verdict, Ok(verdict) if verdict.source == Source::Store || verdict.source == Source::Cache)
}

/// Prometheus metrics, text format.
#[utoipa::path(get, path = "/metrics", responses((status = 200, description = "Prometheus text exposition", body = String)))]
pub(crate) async fn metrics(State(front): State<Arc<Front>>) -> Response {
    let service = &front.service;
    let keys = service.engine.backend().memory().map(sluice::MemoryStore::len);
    let age = service.last_snapshot.lock().map(|at| at.elapsed());
    let text = service.engine.metrics().render(keys, age);
    ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], text).into_response()
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
