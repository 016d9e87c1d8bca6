//! The bounds on requests and connections of the real `sluice serve` binary, over real
//! sockets: what a client past each one sees, and that the server keeps serving the others.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use support::server::Server;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tonic::transport::Channel;

/// One Envoy rule, and one Sluice policy for the HTTP API.
const CONFIG: &str = r#"
policies:
  hundred: {algorithm: token_bucket, capacity: 100, refill_amount: 10, refill_interval: 1h}
domains:
  - domain: edge
    descriptors:
      - key: user
        rate_limit: {unit: hour, requests_per_unit: 100}
"#;

/// Long enough for anything a loaded machine may delay; every wait ends on its condition.
const PATIENCE: Duration = Duration::from_secs(10);

const HEALTH: &[u8] = b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n";

async fn client(server: &Server) -> RateLimitServiceClient<Channel> {
    RateLimitServiceClient::connect(format!("http://{}", server.grpc)).await.unwrap()
}

/// A request of `count` descriptors, each of `entries` entries `user: value`.
fn request(count: usize, entries: usize, value: &str) -> RateLimitRequest {
    let entry = Entry { key: "user".into(), value: value.into() };
    let descriptor = RateLimitDescriptor { entries: vec![entry; entries], ..RateLimitDescriptor::default() };
    RateLimitRequest { domain: "edge".into(), descriptors: vec![descriptor; count], hits_addend: 1 }
}

/// The in-memory store's states, from `/metrics`.
async fn states(server: &Server) -> u64 {
    let metrics = reqwest::get(server.url("/metrics")).await.unwrap().text().await.unwrap();
    let line = metrics.lines().find_map(|line| line.strip_prefix("sluice_keys ")).unwrap();
    line.parse().unwrap()
}

#[tokio::test]
async fn envoy_requests_over_the_descriptor_bounds_are_refused_and_create_no_state() {
    let server = Server::start(CONFIG, &["--max-descriptors", "4", "--max-descriptor-entries", "3"]);
    let mut client = client(&server).await;
    let refused = client.should_rate_limit(request(5, 1, "a")).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    assert!(refused.message().contains("5 descriptors, over the 4 allowed (setting `max_descriptors`)"), "{refused}");
    let refused = client.should_rate_limit(request(1, 4, "b")).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    let message = refused.message();
    assert!(message.contains("4 entries, over the 3 allowed (setting `max_descriptor_entries`)"), "{message}");
    assert_eq!(states(&server).await, 0, "a refused request creates no state");
    // At the bounds: answered, and counted (so the count above would have shown states).
    let distinct = (0..4).map(|index| format!("user-{index}"));
    let mut at_bounds = request(4, 1, "");
    for (descriptor, value) in at_bounds.descriptors.iter_mut().zip(distinct) {
        descriptor.entries[0].value = value;
    }
    client.should_rate_limit(at_bounds).await.unwrap();
    assert_eq!(states(&server).await, 4);
    // Three entries: deeper than the rule, so answered without a limit (and no state).
    client.should_rate_limit(request(1, 3, "c")).await.unwrap();
}

#[tokio::test]
async fn a_grpc_message_over_the_size_bound_is_refused() {
    let server = Server::start(CONFIG, &["--max-grpc-message", "2048"]);
    let mut client = client(&server).await;
    let refused = client.should_rate_limit(request(1, 1, &"v".repeat(3000))).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::OutOfRange);
    assert!(refused.message().contains("the limit is: 2048 bytes"), "{refused}");
    assert_eq!(states(&server).await, 0);
    // The same connection serves the next request.
    client.should_rate_limit(request(1, 1, "small")).await.unwrap();
}

/// Sends `request` on `stream` and reads until a whole status line came; that line, or
/// `None` when the server closed the connection first.
async fn status_line(stream: &mut TcpStream, request: &[u8]) -> Option<String> {
    let _ = stream.write_all(request).await;
    let mut response = Vec::new();
    let mut buffer = [0; 4096];
    while !response.windows(2).any(|pair| pair == b"\r\n") {
        match tokio::time::timeout(PATIENCE, stream.read(&mut buffer)).await.unwrap() {
            Ok(0) | Err(_) => return None,
            Ok(read) => response.extend_from_slice(&buffer[..read]),
        }
    }
    Some(String::from_utf8_lossy(&response).lines().next().unwrap_or_default().to_owned())
}

/// Whether the server closes `stream` (end of stream or reset) within [`PATIENCE`].
async fn closed(stream: &mut TcpStream) -> bool {
    let mut buffer = [0; 4096];
    let ended = async { while let Ok(1..) = stream.read(&mut buffer).await {} };
    tokio::time::timeout(PATIENCE, ended).await.is_ok()
}

/// A new connection to `address` that is served, once a slot is free (within [`PATIENCE`]).
async fn served_connection(address: SocketAddr) -> TcpStream {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let mut stream = TcpStream::connect(address).await.unwrap();
        if status_line(&mut stream, HEALTH).await.as_deref() == Some("HTTP/1.1 200 OK") {
            return stream;
        }
        assert!(Instant::now() < deadline, "no slot came free");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A check whose body never comes: in flight until the body timeout. The server asks for
/// its body (100 Continue) once it reads it.
const STALLED_CHECK: &[u8] = b"POST /v1/check HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
    expect: 100-continue\r\ncontent-length: 100\r\n\r\n";

#[tokio::test]
async fn connections_past_the_cap_are_closed_while_every_connection_has_a_request_in_flight() {
    const CAP: usize = 3;
    let server =
        Server::start(CONFIG, &["--max-connections", "3", "--body-timeout", "1h", "--grpc-message-timeout", "1h"]);
    let mut held = Vec::new();
    for _ in 0..CAP {
        let mut stream = TcpStream::connect(server.http).await.unwrap();
        assert_eq!(status_line(&mut stream, HEALTH).await.as_deref(), Some("HTTP/1.1 200 OK"));
        assert_eq!(status_line(&mut stream, STALLED_CHECK).await.as_deref(), Some("HTTP/1.1 100 Continue"));
        held.push(stream);
    }
    for _ in 0..2 {
        let mut extra = TcpStream::connect(server.http).await.unwrap();
        assert!(closed(&mut extra).await, "a connection past the cap is closed");
    }
    drop(held.pop());
    let _replacement = served_connection(server.http).await;
    // The server logs as it refuses; its log reaches the test through a pipe, a moment later.
    server.wait_for_log("the listener serves `max_connections` connections, each with a request in flight", PATIENCE);

    // The gRPC listener has a cap of its own; a stream open is a request in flight.
    let mut streams = Vec::new();
    for _ in 0..CAP {
        let socket = TcpStream::connect(server.grpc).await.unwrap();
        let (send, mut connection) = h2::client::handshake(socket).await.unwrap();
        let mut ping_pong = connection.ping_pong().unwrap();
        tokio::spawn(connection);
        let call = axum::http::Request::post("/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit")
            .header("content-type", "application/grpc")
            .body(())
            .unwrap();
        let (response, request) = send.ready().await.unwrap().send_request(call, false).unwrap();
        // Frames are read in order, but the server answers a ping it read with the stream's
        // head before it hands the stream to the service (where it counts as in flight);
        // a second ping, sent once the first is answered, is read after that.
        ping_pong.ping(h2::Ping::opaque()).await.unwrap();
        ping_pong.ping(h2::Ping::opaque()).await.unwrap();
        streams.push((response, request));
    }
    let mut extra = TcpStream::connect(server.grpc).await.unwrap();
    assert!(closed(&mut extra).await, "a gRPC connection past the cap is closed");
}

#[tokio::test]
async fn a_request_head_that_stops_halfway_is_closed_after_the_header_timeout() {
    let server = Server::start(CONFIG, &["--header-timeout", "300ms"]);
    // A connection that served a request, and one that never sent anything: both idle.
    let mut kept_alive = TcpStream::connect(server.http).await.unwrap();
    assert_eq!(status_line(&mut kept_alive, HEALTH).await.as_deref(), Some("HTTP/1.1 200 OK"));
    let mut silent = TcpStream::connect(server.http).await.unwrap();
    let mut slow = TcpStream::connect(server.http).await.unwrap();
    let sent = Instant::now();
    slow.write_all(b"POST /v1/check HTTP/1.1\r\nhost: x\r\n").await.unwrap();
    assert!(closed(&mut slow).await, "the unfinished head was not closed");
    let waited = sent.elapsed();
    assert!(waited >= Duration::from_millis(300), "closed after {waited:?}, before the header timeout");
    // Twice the header timeout later, the idle connections are still open (the idle
    // timeout, 60 s, applies to them) and are served.
    tokio::time::sleep(Duration::from_millis(600)).await;
    for stream in [&mut kept_alive, &mut silent] {
        assert_eq!(status_line(stream, HEALTH).await.as_deref(), Some("HTTP/1.1 200 OK"));
    }
}

#[tokio::test]
async fn a_request_head_over_the_size_bound_gets_431() {
    let server = Server::start(CONFIG, &[]);
    let head =
        |padding: usize| format!("GET /healthz HTTP/1.1\r\nhost: x\r\nx-padding: {}\r\n\r\n", "p".repeat(padding));
    let mut stream = TcpStream::connect(server.http).await.unwrap();
    assert_eq!(status_line(&mut stream, head(8 * 1024).as_bytes()).await.as_deref(), Some("HTTP/1.1 200 OK"));
    let mut stream = TcpStream::connect(server.http).await.unwrap();
    let line = status_line(&mut stream, head(20 * 1024).as_bytes()).await;
    assert_eq!(line.as_deref(), Some("HTTP/1.1 431 Request Header Fields Too Large"));
    let _still = served_connection(server.http).await;
}

/// File descriptors `pid` has open.
fn open_files(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count()
}

/// Sets the soft limit on `pid`'s open files (`prlimit`, util-linux).
fn limit_open_files(pid: u32, soft: usize) {
    let status = std::process::Command::new("prlimit")
        .args(["--pid", &pid.to_string(), &format!("--nofile={soft}:")])
        .status()
        .expect("prlimit (util-linux) runs");
    assert!(status.success());
}

#[tokio::test]
async fn out_of_file_descriptors_the_server_pauses_accepting_logs_once_and_serves_the_open_connections() {
    let server = Server::start(CONFIG, &["--snapshot", "off", "--workers", "1"]);
    let mut held = served_connection(server.http).await;
    limit_open_files(server.pid(), open_files(server.pid()) + 2);
    // More connections than descriptors left: the server accepts two, then `accept` fails.
    let mut flood = Vec::new();
    for _ in 0..8 {
        flood.push(TcpStream::connect(server.http).await.unwrap());
    }
    server.wait_for_log("cannot accept connections", PATIENCE);
    // Accepts keep failing meanwhile (retried after 10 ms, 20 ms, … up to 1 s), but the
    // log says so once.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(server.log().matches("cannot accept connections").count(), 1, "{}", server.log());
    assert_eq!(status_line(&mut held, HEALTH).await.as_deref(), Some("HTTP/1.1 200 OK"), "open ones are served");
    // Once the flood is gone, descriptors are free again and new connections are served.
    drop(flood);
    let _fresh = served_connection(server.http).await;
    let log = server.log();
    assert!(log.contains("Too many open files"), "{log}");
}
