//! The layer's overhead per request: one axum route driven in-process with `oneshot`,
//! without a limiter, behind `sluice-tower`, and behind `tower_governor` (the same peer-IP
//! key and one GCRA policy that never rejects, over 256 clients), each with and without
//! rate-limit fields on allowed responses.
//!
//! `cargo bench -p sluice-tower --bench overhead`

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::routing::get;
use criterion::{Criterion, criterion_group, criterion_main};
use http::Request;
use sluice::{LeakMode, LeakyBucket, Limit};
use sluice_tower::RateLimitLayer;
use sluice_tower::headers::Fields;
use sluice_tower::key::PeerIp;
use std::hint::black_box;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tower::ServiceExt;
use tower_governor::GovernorLayer;
use tower_governor::governor::GovernorConfigBuilder;

const CLIENTS: u32 = 256;

fn route() -> Router {
    Router::new().route("/", get(|| async { "ok" }))
}

/// A request from the next of the 256 clients.
fn request(counter: &AtomicU32) -> Request<Body> {
    let client = counter.fetch_add(1, Ordering::Relaxed) % CLIENTS;
    let peer = SocketAddr::from(([10, 0, (client >> 8) as u8, client as u8], 40_000));
    let mut request = Request::get("/").body(Body::empty()).expect("request");
    request.extensions_mut().insert(ConnectInfo(peer));
    request
}

fn sluice_app(fields: Fields) -> Router {
    // GCRA, like governor's: one request per µs per client, a burst of a million.
    let gcra = LeakyBucket::new(Duration::from_micros(1), 1_000_000, LeakMode::NoDelay).expect("policy");
    route().layer(RateLimitLayer::new(Limit::new("bench", gcra), PeerIp::new()).fields(fields))
}

fn governor_app(headers: bool) -> Router {
    let mut builder = GovernorConfigBuilder::default();
    builder.per_nanosecond(1).burst_size(1_000_000);
    match headers {
        false => route().layer(GovernorLayer::new(builder.finish().expect("config"))),
        true => route().layer(GovernorLayer::new(builder.use_headers().finish().expect("config"))),
    }
}

fn overhead(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    let mut group = c.benchmark_group("overhead");
    let apps = [
        ("no_limiter", route()),
        ("sluice_tower", sluice_app(Fields::Ietf)),
        ("sluice_tower_no_fields", sluice_app(Fields::OnRejectionsOnly)),
        ("tower_governor", governor_app(false)),
        ("tower_governor_headers", governor_app(true)),
    ];
    for (name, app) in apps {
        let counter = AtomicU32::new(0);
        group.bench_function(name, |b| {
            b.to_async(&runtime).iter(|| {
                let app = app.clone();
                let request = request(&counter);
                async move {
                    let response = app.oneshot(request).await.expect("infallible");
                    assert!(response.status().is_success());
                    black_box(response)
                }
            });
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(6)).warm_up_time(Duration::from_secs(1));
    targets = overhead
}
criterion_main!(benches);
