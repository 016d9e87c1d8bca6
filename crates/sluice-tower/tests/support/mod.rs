//! Helpers shared by the layer's tests: policies, an app, requests and response readers.
#![allow(dead_code, unused_imports, unreachable_pub, clippy::unwrap_used)]

use sluice_core::{Limit, ManualClock, MemoryStore, RateLimiter, SlidingLog, SlidingLogVariant, Timestamp};
use std::time::Duration;

#[cfg(feature = "axum")]
pub use axum_app::*;

pub mod example;

/// 2026-01-01T00:00:00Z, a whole second.
pub const START: Timestamp = Timestamp::from_micros(1_767_225_600_000_000);

pub fn clock() -> ManualClock {
    ManualClock::at(START)
}

/// A limiter for `limits` on a memory store that follows `clock`.
pub fn limiter(limits: impl IntoIterator<Item = Limit>, clock: ManualClock) -> RateLimiter<MemoryStore, ManualClock> {
    RateLimiter::builder().limits(limits).clock(clock).build().unwrap()
}

/// A sliding log of `limit` per `window`.
pub fn sliding_log(name: &str, limit: u64, window: Duration) -> Limit {
    Limit::new(name, SlidingLog::new(limit, window, SlidingLogVariant::Accepted).unwrap())
}

/// A log writer for `tracing_subscriber::fmt().with_writer(…)`: what was logged, as text.
#[derive(Clone, Debug, Default)]
pub struct CapturedLog(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl CapturedLog {
    /// Everything logged so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("the log's lock")).into_owned()
    }
}

impl std::io::Write for CapturedLog {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("the log's lock").extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for CapturedLog {
    type Writer = CapturedLog;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// An axum app behind the layer, and its requests and responses.
#[cfg(feature = "axum")]
mod axum_app {
    use axum::Router;
    use axum::body::Body;
    use axum::extract::ConnectInfo;
    use axum::routing::get;
    use http::{Request, Response};
    use http_body_util::BodyExt;
    use sluice_tower::RateLimitLayer;
    use std::net::SocketAddr;
    use tower::ServiceExt;

    /// `GET /` answering "ok", behind `layer`.
    pub fn app<S: sluice_core::Store + Clone, C: sluice_core::Clock + Clone>(layer: RateLimitLayer<S, C>) -> Router {
        Router::new().route("/", get(|| async { "ok" }).post(|| async { "posted" })).layer(layer)
    }

    /// `GET /` from `peer`.
    pub fn from_peer(peer: &str) -> Request<Body> {
        let mut request = Request::get("/").body(Body::empty()).unwrap();
        request.extensions_mut().insert(ConnectInfo(peer.parse::<SocketAddr>().unwrap()));
        request
    }

    /// Sends `request` to `app` once.
    pub async fn send(app: &Router, request: Request<Body>) -> Response<Body> {
        app.clone().oneshot(request).await.unwrap()
    }

    /// The response's status after sending `request`.
    pub async fn status(app: &Router, request: Request<Body>) -> u16 {
        send(app, request).await.status().as_u16()
    }

    pub async fn body_text(response: Response<Body>) -> String {
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    pub async fn body_json(response: Response<Body>) -> serde_json::Value {
        serde_json::from_str(&body_text(response).await).unwrap()
    }

    pub fn header<'a>(response: &'a Response<Body>, name: &str) -> Option<&'a str> {
        response.headers().get(name).map(|value| value.to_str().unwrap())
    }
}
