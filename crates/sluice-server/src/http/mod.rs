//! The HTTP JSON API.
//!
//! | endpoint | what |
//! | --- | --- |
//! | `POST /v1/check` | check a key against policies with a cost (all or nothing): 200 or 429 |
//! | `POST /v1/peek` | the same without consuming: what a cost-1 request would get |
//! | `POST /v1/reset` | forget a key's state (admin) |
//! | `POST /v1/reload` | reload the configuration file (admin) |
//! | `GET /v1/policies` | the policies in force |
//! | `GET /v1/top` | a policy's heaviest keys with their error bounds (admin) |
//! | `GET /v1/rlqs/buckets` | the RLQS buckets held by the most Envoys, with their rules (admin) |
//! | `GET /v1/live` | the policies' counts, top keys, decisions without the store (dashboard) |
//! | `POST /v1/playground` | decide a posted trace on a throwaway store (dashboard) |
//! | `GET /ui` | the dashboard (loopback clients only by default) |
//! | `GET /healthz`, `/readyz`, `/metrics`, `/openapi.json` | operations |

mod admin;
pub(crate) mod api;
mod body;
mod check;
mod connection;
mod cost;
mod deadline;
mod error;
pub(crate) mod headers;
mod live;
mod live_policy;
mod no_route;
mod openapi;
mod ops;
mod playground;
mod rlqs_buckets;
mod server;
mod top;
mod ui;
mod watched;

pub(crate) use connection::MakeApi;
pub(crate) use openapi::openapi_json;
pub(crate) use server::serve;

use crate::engine::front::Front;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use std::sync::Arc;

/// The largest request body accepted.
pub(crate) const MAX_BODY_BYTES: usize = 64 * 1024;

/// The API's routes, as one worker serves them.
pub(crate) fn router(front: Arc<Front>) -> Router {
    let openapi = openapi_json();
    Router::new()
        .route("/v1/check", post(check::check))
        .route("/v1/peek", post(check::peek))
        .route("/v1/reset", post(admin::reset))
        .route("/v1/reload", post(admin::reload))
        .route("/v1/policies", get(ops::policies))
        .route("/v1/top", get(top::top))
        .route("/v1/rlqs/buckets", get(rlqs_buckets::buckets))
        .route("/v1/live", get(live::live))
        .route("/v1/playground", post(playground::playground))
        .route("/ui", get(ui::index))
        .route("/ui/", get(ui::index))
        .route("/ui/{file}", get(ui::asset))
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .route("/metrics", get(ops::metrics))
        .route("/openapi.json", get(move || async move { ([("content-type", "application/json")], openapi) }))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::map_response(no_route::explain))
        .with_state(front)
}
