//! A tonic service behind the layer, over a real socket with a real gRPC client.

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

#[tokio::test]
async fn grpc_clients_get_resource_exhausted_with_retry_info() {
    let (_reporter, health) = tonic_health::server::health_reporter();
    let limit = sliding_log("rpc", 2, Duration::from_secs(3600));
    let layer = RateLimitLayer::from_limiter(limiter([limit], clock()), PeerIp::new());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = Server::builder().layer(layer).add_service(health);
    let server = tokio::spawn(server.serve_with_incoming_shutdown(TcpIncoming::from(listener), async {
        let _ = stopped.await;
    }));

    let channel = tonic::transport::Channel::from_shared(format!("http://{addr}")).unwrap().connect().await.unwrap();
    let mut client = HealthClient::new(channel);
    let check = || HealthCheckRequest { service: String::new() };
    for remaining in [1, 0] {
        let response = client.check(check()).await.unwrap();
        let fields = response.metadata().get("ratelimit").unwrap().to_str().unwrap().to_owned();
        assert_eq!(fields, format!(r#""rpc";r={remaining};t=3600"#));
    }
    let status = client.check(check()).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::ResourceExhausted);
    assert!(status.message().contains("`rpc`"), "{}", status.message());
    let retry = status.get_details_retry_info().unwrap();
    assert_eq!(retry.retry_delay, Some(Duration::from_secs(3600)));
    assert_eq!(status.metadata().get("retry-after").unwrap(), "3600");

    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
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
        let status = HealthClient::new(channel).check(HealthCheckRequest { service: String::new() }).await.unwrap_err();
        assert_eq!(status.code(), code, "{}", status.message());
        stop.send(()).unwrap();
        server.await.unwrap().unwrap();
    }
}
