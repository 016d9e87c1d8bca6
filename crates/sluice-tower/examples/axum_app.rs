//! An axum app limited by Sluice: `GET /hello` allows 5 requests per 10 seconds per client
//! IP (sliding log), `GET /api` a token bucket of 10 per `x-api-key`, refilled 1 per second.

use axum::{Router, http::HeaderName, routing::get};
use sluice_tower::key::{HeaderKey, PeerIp};
use sluice_tower::{Limit, RateLimitLayer, SlidingLog, SlidingLogVariant, TokenBucket, TokenBucketSettings};
use std::net::SocketAddr;
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let hello = Limit::new("hello", SlidingLog::new(5, Duration::from_secs(10), SlidingLogVariant::Accepted)?);
    let bucket = TokenBucketSettings { capacity: 10, refill_amount: 1, refill_interval: Duration::from_secs(1) };
    let api = Limit::new("api", TokenBucket::new(bucket)?);
    let api_key = HeaderKey::new(HeaderName::from_static("x-api-key"));

    // `route_layer`, not `layer`: only the requests a handler serves are charged (a POST to
    // /hello is a 405 that uses no quota).
    let app = Router::new()
        .route("/hello", get(|| async { "Hello!\n" }).route_layer(RateLimitLayer::new(hello, PeerIp::new())))
        .route("/api", get(|| async { "{\"ok\":true}\n" }).route_layer(RateLimitLayer::new(api, api_key)));

    // ADDR=127.0.0.1:8080 moves it.
    let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:3000".to_owned());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("listening on http://{}", listener.local_addr()?);
    // With the peer's address in each request, for `PeerIp`.
    axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await?;
    Ok(())
}
