//! Floods against the real `sluice serve` binary, over real sockets, at a small connection
//! cap: idle connections, requests that never finish and stalled gRPC streams must neither
//! shut out a client that sends requests nor hold memory without bound
//! (docs/reliability.md, "Floods and hostile clients").
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

mod floods {
    mod grpc;
    mod http;
    mod streams;
}

use bytes::Bytes;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use support::server::Server;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const CONFIG: &str = r#"
policies:
  many: {algorithm: fixed_window, limit: 1000000, window: 1h}
domains:
  - domain: edge
    descriptors:
      - key: user
        policy: many
"#;

/// Long enough for anything a loaded machine may delay; every wait ends on its condition.
const PATIENCE: Duration = Duration::from_secs(20);

const CHECK: &str = r#"{"key":"normal","policies":["many"]}"#;

fn check_request(close: bool) -> String {
    let connection = if close { "connection: close\r\n" } else { "" };
    format!(
        "POST /v1/check HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n{connection}content-length: {}\r\n\r\n{CHECK}",
        CHECK.len()
    )
}

/// Sends `request` and reads its whole response; whether it is a 200.
async fn served(stream: &mut TcpStream, request: &str) -> bool {
    if stream.write_all(request.as_bytes()).await.is_err() {
        return false;
    }
    let mut response = Vec::new();
    let mut buffer = [0; 4096];
    loop {
        if let Some(end) = response.windows(4).position(|window| window == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&response[..end]).to_ascii_lowercase();
            let length = head.lines().find_map(|line| line.strip_prefix("content-length: ")?.parse().ok());
            if response.len() >= end + 4 + length.unwrap_or(0) {
                return head.starts_with("http/1.1 200");
            }
        }
        match tokio::time::timeout(PATIENCE, stream.read(&mut buffer)).await {
            Ok(Ok(read @ 1..)) => response.extend_from_slice(&buffer[..read]),
            _ => return false,
        }
    }
}

/// Waits until `condition` holds, within [`PATIENCE`].
async fn eventually(what: &str, condition: impl Fn() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !condition() {
        assert!(Instant::now() < deadline, "not within {PATIENCE:?}: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Settings that leave making room as the only way the server closes a connection.
const NO_TIMEOUTS: [&str; 6] = ["--idle-timeout", "1h", "--header-timeout", "1h", "--body-timeout", "1h"];

/// A connection from `local` (a loopback address of its own) to `server`.
async fn connect_from(local: &str, server: SocketAddr) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{local}:0").parse().unwrap()).unwrap();
    socket.connect(server).await.unwrap()
}

/// An HTTP/2 connection to `address` that answers the server's pings and opens no stream
/// unless told; its driver counts in `closed` when the server closes it.
async fn h2_connection(address: SocketAddr, closed: &Arc<AtomicUsize>) -> h2::client::SendRequest<Bytes> {
    let socket = TcpStream::connect(address).await.unwrap();
    let (send, connection) = h2::client::handshake(socket).await.unwrap();
    let closed = Arc::clone(closed);
    tokio::spawn(async move {
        let _ = connection.await;
        closed.fetch_add(1, Ordering::Relaxed);
    });
    send
}

fn rls_request() -> RateLimitRequest {
    let entries = vec![Entry { key: "user".into(), value: "normal".into() }];
    let descriptors = vec![RateLimitDescriptor { entries, ..RateLimitDescriptor::default() }];
    RateLimitRequest { domain: "edge".into(), descriptors, hits_addend: 1 }
}

type RlsClient = RateLimitServiceClient<tonic::transport::Channel>;

async fn rls_client(server: &Server) -> Option<RlsClient> {
    RateLimitServiceClient::connect(format!("http://{}", server.grpc)).await.ok()
}
