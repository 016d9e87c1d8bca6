//! An axum app whose limit every instance shares through Redis: `GET /hello` allows 5
//! requests per 10 seconds per client IP, counted in Redis, so that two instances of the app
//! behind one load balancer still allow 5, not 10. While Redis is down the limiter fails
//! closed: 503 with `Retry-After`, not 429.

use axum::{Router, routing::get};
use sluice_tower::key::PeerIp;
use sluice_tower::{FailureMode, Limit, RateLimitLayer, RateLimiter, RedisSettings, RedisStore};
use sluice_tower::{SlidingLog, SlidingLogVariant};
use std::net::SocketAddr;
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let hello = Limit::new("hello", SlidingLog::new(5, Duration::from_secs(10), SlidingLogVariant::Accepted)?);

    // REDIS_URL=redis://HOST:PORT moves it. `RedisStore::open` does not wait for Redis:
    // started during an outage, the app answers by its failure mode until Redis is back.
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
    // `Closed`: refuse while Redis is down (the default, `Open`, lets everyone through).
    let settings = RedisSettings { failure_mode: FailureMode::Closed, ..RedisSettings::default() };
    let store = RedisStore::open(&url, settings).await?;
    let limiter = RateLimiter::builder().limit(hello).store(store).build()?;
    let limited = RateLimitLayer::from_limiter(limiter, PeerIp::new());

    let app = Router::new().route("/hello", get(|| async { "Hello!\n" }).route_layer(limited));

    // ADDR=127.0.0.1:8080 moves it.
    let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:3000".to_owned());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("listening on http://{}", listener.local_addr()?);
    axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await?;
    Ok(())
}
