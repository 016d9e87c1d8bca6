//! A tonic service behind the layer, over a real socket with a real gRPC client.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use sluice_tower::RateLimitLayer;
use sluice_tower::key::{HeaderKey, MissingKey, PeerIp, RequestKey};
use std::time::Duration;
use support::{clock, limiter, sliding_log};
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;
use tonic_types::StatusExt;

/// A tonic health service behind `layer` on a loopback port, and a client connected to it.
struct Served {
    client: HealthClient<tonic::transport::Channel>,
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
}

impl Served {
    async fn start<S, C>(layer: RateLimitLayer<S, C>) -> Served
    where
        S: sluice_core::Store + Clone + Send + Sync + 'static,
        C: sluice_core::Clock + Clone + Send + Sync + 'static,
    {
        let (_reporter, health) = tonic_health::server::health_reporter();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = Server::builder().layer(layer).add_service(health);
        let server = tokio::spawn(server.serve_with_incoming_shutdown(TcpIncoming::from(listener), async {
            let _ = stopped.await;
        }));
        let channel =
            tonic::transport::Channel::from_shared(format!("http://{addr}")).unwrap().connect().await.unwrap();
        Served { client: HealthClient::new(channel), stop, server }
    }

    /// Stops the server and waits for it.
    async fn stop(self) {
        self.stop.send(()).unwrap();
        self.server.await.unwrap().unwrap();
    }
}

fn check() -> HealthCheckRequest {
    HealthCheckRequest { service: String::new() }
}

#[tokio::test]
async fn grpc_clients_get_resource_exhausted_with_retry_info() {
    let limit = sliding_log("rpc", 2, Duration::from_secs(3600));
    let mut served = Served::start(RateLimitLayer::from_limiter(limiter([limit], clock()), PeerIp::new())).await;
    for remaining in [1, 0] {
        let response = served.client.check(check()).await.unwrap();
        let fields = response.metadata().get("ratelimit").unwrap().to_str().unwrap().to_owned();
        assert_eq!(fields, format!(r#""rpc";r={remaining};t=3600"#));
    }
    let status = served.client.check(check()).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::ResourceExhausted);
    assert!(status.message().contains("`rpc`"), "{}", status.message());
    let retry = status.get_details_retry_info().unwrap();
    assert_eq!(retry.retry_delay, Some(Duration::from_secs(3600)));
    assert_eq!(status.metadata().get("retry-after").unwrap(), "3600");
    served.stop().await;
}

/// Requests the layer answers without checking them get gRPC codes, not HTTP statuses: no
/// key is `INVALID_ARGUMENT` (or `UNAUTHENTICATED` when the rule says 401), and a shared
/// key that is not a valid key (the layer's own mistake) is `INTERNAL`.
#[tokio::test]
async fn grpc_requests_without_a_key_get_grpc_codes() {
    let api_key = || HeaderKey::new(http::HeaderName::from_static("x-api-key"));
    let limits = || limiter([sliding_log("rpc", 2, Duration::from_secs(3600))], clock());
    let cases = [
        (RateLimitLayer::from_limiter(limits(), api_key()), tonic::Code::InvalidArgument),
        (
            RateLimitLayer::from_limiter(limits(), api_key())
                .missing_key(MissingKey::Reject(http::StatusCode::UNAUTHORIZED)),
            tonic::Code::Unauthenticated,
        ),
        (
            RateLimitLayer::from_limiter(limits(), api_key()).missing_key(MissingKey::Shared(RequestKey::from(""))),
            tonic::Code::Internal,
        ),
    ];
    for (layer, code) in cases {
        let mut served = Served::start(layer).await;
        let status = served.client.check(check()).await.unwrap_err();
        assert_eq!(status.code(), code, "{}", status.message());
        served.stop().await;
    }
}
