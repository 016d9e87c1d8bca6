//! An axum app limited by Sluice: `GET /hello` allows 5 requests per 10 seconds per client
//! IP (sliding log), `GET /api` a token bucket of 10 per `x-api-key`, refilled 1 per second.
//!
//! ```text
//! cargo run --release -p sluice-tower --example axum_app      # ADDR=127.0.0.1:8080 to move it
//! for i in 1 2 3 4 5 6; do curl -i localhost:3000/hello; done
//! ```

use axum::{Router, http::HeaderName, routing::get};
use sluice_core::{Limit, SlidingLog, SlidingLogVariant, TokenBucket, TokenBucketSettings};
use sluice_tower::RateLimitLayer;
use sluice_tower::key::{HeaderKey, PeerIp};
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

    let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:3000".to_owned());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("listening on http://{}", listener.local_addr()?);
    axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await?;
    Ok(())
}
