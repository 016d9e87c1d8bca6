//! The apps both overhead benches drive: one axum route, bare, behind a limiter, or behind
//! a layer that does nothing.

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::response::Response;
use axum::routing::get;
use http::Request;
use sluice_core::{LeakMode, LeakyBucket, Limit};
use sluice_tower::RateLimitLayer;
use sluice_tower::headers::Fields;
use sluice_tower::key::PeerIp;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tower::util::MapResponseLayer;
use tower_governor::GovernorLayer;
use tower_governor::governor::GovernorConfigBuilder;

const CLIENTS: u32 = 256;

pub(crate) fn route() -> Router {
    Router::new().route("/", get(|| async { "ok" }))
}

/// A request from the next of the 256 clients.
pub(crate) fn request(counter: &AtomicU32) -> Request<Body> {
    let client = counter.fetch_add(1, Ordering::Relaxed) % CLIENTS;
    let peer = SocketAddr::from(([10, 0, (client >> 8) as u8, client as u8], 40_000));
    let mut request = Request::get("/").body(Body::empty()).expect("request");
    request.extensions_mut().insert(ConnectInfo(peer));
    request
}

pub(crate) fn sluice_app(fields: Fields) -> Router {
    // GCRA, like governor's: one request per µs per client, a burst of a million.
    let gcra = LeakyBucket::new(Duration::from_micros(1), 1_000_000, LeakMode::NoDelay).expect("policy");
    route().layer(RateLimitLayer::new(Limit::new("bench", gcra), PeerIp::new()).fields(fields))
}

pub(crate) fn governor_app(headers: bool) -> Router {
    let mut builder = GovernorConfigBuilder::default();
    builder.per_nanosecond(1).burst_size(1_000_000);
    match headers {
        false => route().layer(GovernorLayer::new(builder.finish().expect("config"))),
        true => route().layer(GovernorLayer::new(builder.use_headers().finish().expect("config"))),
    }
}

/// A layer that only wraps the route's future (`MapResponse` with the identity): what any
/// layer costs on this route before it does anything, axum applying it to every request
/// included.
pub(crate) fn pass_through_app() -> Router {
    route().layer(MapResponseLayer::new(|response: Response| response))
}

/// Every variant, by name.
pub(crate) fn apps() -> [(&'static str, Router); 6] {
    [
        ("no_limiter", route()),
        ("sluice_tower", sluice_app(Fields::Ietf)),
        ("sluice_tower_no_fields", sluice_app(Fields::OnRejectionsOnly)),
        ("tower_governor", governor_app(false)),
        ("tower_governor_headers", governor_app(true)),
        ("pass_through", pass_through_app()),
    ]
}
