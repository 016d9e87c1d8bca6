//! Shutdown of the real `sluice serve` binary is bounded whatever its clients do: the
//! connections still open when the grace period is over are dropped, the last snapshot is
//! written and the process exits 0; a second signal exits at once.
//!
//! Each server is started with a 1 s grace and must be gone within 6 s: the bound is
//! generous, so only a shutdown that waits on a client fails it. Every connection is known
//! to be served before the signal (a round trip on it, or on a later connection to the
//! same listener, which accepts in order).
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use axum::http::Request;
use bytes::Bytes;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use h2::client::SendRequest;
use h2::{Ping, PingPong, SendStream};
use std::time::Duration;
use support::server::Server;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

const CONFIG: &str = r#"
policies:
  ten_per_hour: {algorithm: fixed_window, limit: 10, window: 1h, alignment: anchored}
domains:
  - domain: edge
    descriptors:
      - key: user
        policy: ten_per_hour
"#;

/// The grace the servers here are given, and how long they may take to exit after it.
const GRACE: &str = "1s";
const EXIT_WITHIN: Duration = Duration::from_secs(6);

fn start(grace: &str) -> Server {
    Server::start(CONFIG, &["--shutdown-grace", grace])
}

/// One gRPC round trip on a connection of its own.
async fn grpc_round_trip(server: &Server) {
    let mut client = RateLimitServiceClient::connect(format!("http://{}", server.grpc)).await.unwrap();
    let entries = vec![Entry { key: "user".into(), value: "u".into() }];
    let descriptors = vec![RateLimitDescriptor { entries, ..RateLimitDescriptor::default() }];
    let request = RateLimitRequest { domain: "edge".into(), descriptors, hits_addend: 1 };
    client.should_rate_limit(request).await.unwrap();
}

/// One HTTP round trip on a connection of its own.
async fn http_round_trip(server: &Server) {
    let body = serde_json::json!({"key": "u", "policies": ["ten_per_hour"]});
    let response = reqwest::Client::new().post(server.url("/v1/check")).json(&body).send().await.unwrap();
    assert!(response.status().is_success());
}

/// An HTTP/2 connection to the gRPC port that the server has answered a ping on, the
/// handle to open streams on it, and its pings. The connection is driven on a task of its own.
async fn h2_connection(server: &Server) -> (SendRequest<Bytes>, PingPong) {
    let socket = TcpStream::connect(server.grpc).await.unwrap();
    let (send, mut connection) = h2::client::handshake(socket).await.unwrap();
    let mut ping_pong = connection.ping_pong().unwrap();
    tokio::spawn(async move {
        let _ = connection.await;
    });
    ping_pong.ping(Ping::opaque()).await.unwrap();
    (send, ping_pong)
}

/// Sends SIGTERM and asserts a clean exit, with the last snapshot written, within the bound.
fn terminate_and_expect_a_clean_exit(mut server: Server) {
    let snapshot = server.dir().join("sluice.snapshot");
    let _ = std::fs::remove_file(&snapshot);
    server.signal("TERM");
    let status = server.wait_exit(EXIT_WITHIN);
    assert!(status.success(), "{status}; log:\n{}", server.log());
    assert!(snapshot.exists(), "the last snapshot is written; log:\n{}", server.log());
}

#[tokio::test]
async fn an_idle_http2_connection_to_the_grpc_port_does_not_hold_the_exit_back() {
    let server = start(GRACE);
    let _idle = h2_connection(&server).await;
    terminate_and_expect_a_clean_exit(server);
}

#[tokio::test]
async fn a_grpc_stream_that_never_ends_is_dropped_after_the_grace() {
    let server = start(GRACE);
    let mut connection = h2_connection(&server).await;
    // A call whose request body never comes: it stays in flight.
    let _stream = open_endless_grpc_call(&mut connection).await;
    terminate_and_expect_a_clean_exit(server);
}

#[tokio::test]
async fn half_open_connections_do_not_hold_the_exit_back() {
    let server = start(GRACE);
    // A partial request on each port, never finished, and never read from.
    let mut grpc = TcpStream::connect(server.grpc).await.unwrap();
    grpc.write_all(b"PRI * HTTP/2.0\r\n").await.unwrap();
    let mut http = TcpStream::connect(server.http).await.unwrap();
    http.write_all(b"POST /v1/check HTTP/1.1\r\nHost: sluice\r\nContent-Le").await.unwrap();
    // Later connections answered: the listeners accepted the partial ones first.
    grpc_round_trip(&server).await;
    http_round_trip(&server).await;
    terminate_and_expect_a_clean_exit(server);
    drop((grpc, http));
}

#[tokio::test]
async fn a_second_signal_exits_at_once_while_a_request_holds_the_graceful_path() {
    // A grace far beyond the bound: only the second signal can make the exit in time.
    let mut server = start("1h");
    let mut connection = h2_connection(&server).await;
    let _stream = open_endless_grpc_call(&mut connection).await;
    server.signal("TERM");
    // The first signal is seen (not merged with the second) before the second is sent.
    server.wait_for_log("shutting down", Duration::from_secs(10));
    server.signal("TERM");
    let status = server.wait_exit(EXIT_WITHIN);
    assert_eq!(status.code(), Some(128 + 15), "143: exited on a second SIGTERM; log:\n{}", server.log());
}

/// Opens a `ShouldRateLimit` call and never finishes its body; returns once the server has
/// read what was sent (it answers a ping sent after it: frames are read in order).
async fn open_endless_grpc_call((send, ping_pong): &mut (SendRequest<Bytes>, PingPong)) -> SendStream<Bytes> {
    let request = Request::post("/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit")
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap();
    let (_response, mut stream) = send.clone().ready().await.unwrap().send_request(request, false).unwrap();
    // Five bytes of a gRPC message's header, of the ten it announces: the body never ends.
    stream.send_data(Bytes::from_static(&[0, 0, 0, 0, 10]), false).unwrap();
    ping_pong.ping(Ping::opaque()).await.unwrap();
    stream
}
