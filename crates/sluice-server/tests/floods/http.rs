//! Floods of HTTP connections: idle ones, and requests that never finish.

use crate::support::server::Server;
use crate::{CONFIG, NO_TIMEOUTS, PATIENCE, check_request, connect_from, eventually, served};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What one flood connection sends before it goes silent.
const OPENINGS: [&[u8]; 3] = [
    b"",
    b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00",
    b"POST /v1/check HTTP/1.1\r\nhost: x\r\n",
];

/// Connections that send their opening and then nothing, counting those the server closed.
struct Flood {
    address: SocketAddr,
    open: std::collections::VecDeque<tokio::task::JoinHandle<()>>,
    opened: usize,
    closed_by_server: Arc<AtomicUsize>,
}

impl Flood {
    fn new(address: SocketAddr) -> Flood {
        Flood { address, open: Default::default(), opened: 0, closed_by_server: Arc::default() }
    }

    /// Opens `count` more connections, each with the next opening. Keeps at most `keep`
    /// open on the test's side (its oldest are dropped), so its descriptors stay bounded.
    async fn open(&mut self, count: usize, keep: usize) {
        for _ in 0..count {
            let mut stream = TcpStream::connect(self.address).await.unwrap();
            let _ = stream.write_all(OPENINGS[self.opened % OPENINGS.len()]).await;
            self.opened += 1;
            let closed = Arc::clone(&self.closed_by_server);
            self.open.push_back(tokio::spawn(async move {
                let mut buffer = [0; 1024];
                while let Ok(1..) = stream.read(&mut buffer).await {}
                closed.fetch_add(1, Ordering::Relaxed);
            }));
            if self.open.len() > keep {
                self.open.pop_front().unwrap().abort();
            }
        }
    }

    fn closed_by_server(&self) -> usize {
        self.closed_by_server.load(Ordering::Relaxed)
    }
}

// Regression test for issue 35.3: 4 096 idle connections from one client left 0 of 200
// requests for everyone else.
#[tokio::test]
async fn a_flood_of_idle_http_connections_at_the_cap_makes_room_for_a_client_that_sends_requests() {
    const CAP: usize = 16;
    let server = Server::start(CONFIG, &[&["--max-connections", "16"][..], &NO_TIMEOUTS].concat());
    let mut flood = Flood::new(server.http);
    flood.open(CAP * 2, CAP * 3).await;
    eventually("the flood fills the cap, and room is made in it", || flood.closed_by_server() >= CAP).await;
    let (mut served_count, mut kept_alive) = (0, TcpStream::connect(server.http).await.unwrap());
    for request in 0..200 {
        // Before each request, as many new idle connections as half the cap.
        flood.open(CAP / 2, CAP * 3).await;
        let ok = if request % 2 == 0 {
            served(&mut kept_alive, &check_request(false)).await
        } else {
            served(&mut TcpStream::connect(server.http).await.unwrap(), &check_request(true)).await
        };
        if ok {
            served_count += 1;
        } else {
            kept_alive = TcpStream::connect(server.http).await.unwrap();
        }
    }
    eprintln!("{served_count} of 200 requests served; {} flood connections opened", flood.opened);
    assert!(served_count >= 190, "{served_count} of 200 requests served under the flood");
    // The cap was full throughout: every flood connection past it made room for itself.
    let opened = flood.opened;
    eventually("the server closed every flood connection past the cap", || flood.closed_by_server() + CAP >= opened)
        .await;
}

/// A check whose body never comes, once the server reads it (it asks: 100 Continue).
const SLOW_BODY: &[u8] = b"POST /v1/check HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
    expect: 100-continue\r\ncontent-length: 100\r\n\r\n";

// Issue 35.3: slow bodies from one client left no connection for the others.
#[tokio::test]
async fn one_clients_requests_that_never_finish_do_not_shut_out_another_client() {
    const CAP: usize = 16;
    let server = Server::start(CONFIG, &[&["--max-connections", "16"][..], &NO_TIMEOUTS].concat());
    let mut flood = Vec::new();
    let slow_body = async || {
        let mut stream = connect_from("127.0.0.1", server.http).await;
        let _ = stream.write_all(SLOW_BODY).await;
        stream
    };
    for _ in 0..CAP {
        let mut stream = slow_body().await;
        let mut buffer = [0; 64];
        let read = tokio::time::timeout(PATIENCE, stream.read(&mut buffer)).await.unwrap().unwrap();
        assert!(buffer[..read].starts_with(b"HTTP/1.1 100 Continue"), "every slow body is read");
        flood.push(stream);
    }
    let (mut served_count, mut kept_alive) = (0, connect_from("127.0.0.2", server.http).await);
    for request in 0..100 {
        for _ in 0..2 {
            flood.push(slow_body().await);
        }
        let ok = if request % 2 == 0 {
            served(&mut kept_alive, &check_request(false)).await
        } else {
            served(&mut connect_from("127.0.0.2", server.http).await, &check_request(true)).await
        };
        if ok {
            served_count += 1;
        } else {
            kept_alive = connect_from("127.0.0.2", server.http).await;
        }
    }
    eprintln!("{served_count} of 100 requests served beside {} slow bodies", flood.len());
    assert!(served_count >= 95, "{served_count} of 100 requests served beside the slow bodies");
}

/// A request's head and the first byte of its 1 000-byte body, and then nothing: a check
/// (the handler reads its body), or a reset (the router's handlers are handed it read).
fn stalled_body(path: &str) -> String {
    format!("POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{{")
}

/// Reads `stream` until the server closes it, within [`PATIENCE`]: everything it sent.
async fn read_until_closed(stream: &mut TcpStream) -> String {
    let mut response = Vec::new();
    let read = tokio::time::timeout(PATIENCE, stream.read_to_end(&mut response)).await;
    read.expect("the server closed the connection").unwrap();
    String::from_utf8_lossy(&response).into_owned()
}

// Issue 46.4: 4 096 connections from one address, each with a complete head and one byte of
// its body, refused every new client from that address until the request timeout (75 s).
#[tokio::test]
async fn stalled_bodies_are_answered_408_at_the_body_timeout_and_give_their_slots_back() {
    const CAP: usize = 8;
    let timeouts =
        ["--idle-timeout", "1h", "--header-timeout", "1h", "--request-timeout", "1h", "--body-timeout", "200ms"];
    let server = Server::start(CONFIG, &[&["--max-connections", "8"][..], &timeouts].concat());
    let mut stalled = Vec::new();
    for path in ["/v1/check", "/v1/reset"].repeat(CAP / 2) {
        let mut stream = connect_from("127.0.0.1", server.http).await;
        stream.write_all(stalled_body(path).as_bytes()).await.unwrap();
        stalled.push(stream);
    }
    // Every slot of the listener is held by a request in flight from one address: only the
    // body timeout ends them (the request, idle and header timeouts are an hour).
    for stream in &mut stalled {
        let response = read_until_closed(stream).await;
        let (head, body) = response.split_once("\r\n\r\n").expect("a whole response");
        assert!(head.starts_with("HTTP/1.1 408 Request Timeout"), "{head}");
        assert!(head.to_ascii_lowercase().contains("\r\nconnection: close"), "{head}");
        let error: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(error["error"], "body_timeout", "{body}");
        let message = error["message"].as_str().unwrap();
        assert_eq!(message, "the request body did not come in full within 200ms (body_timeout)");
    }
    // The server closed each of them, so their slots come back (as each watchdog sees its
    // connection end): a new client from the same address is served.
    let deadline = std::time::Instant::now() + PATIENCE;
    while !served(&mut connect_from("127.0.0.1", server.http).await, &check_request(true)).await {
        assert!(std::time::Instant::now() < deadline, "no client from the stalled bodies' address served");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}
