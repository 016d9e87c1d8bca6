//! Floods of gRPC connections, and the idle timeout of both listeners.

use crate::support::server::Server;
use crate::{CONFIG, NO_TIMEOUTS, PATIENCE, check_request, eventually, h2_connection, rls_client, rls_request, served};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

// Regression test for issue 35.3: gRPC connections that answer pings were never closed, so
// 4 096 of them locked Envoy out for good.
#[tokio::test]
async fn a_flood_of_idle_grpc_connections_at_the_cap_makes_room_for_a_client_that_calls() {
    const CAP: usize = 16;
    let server = Server::start(CONFIG, &[&["--max-connections", "16"][..], &NO_TIMEOUTS].concat());
    let closed = Arc::new(AtomicUsize::new(0));
    let mut flood = std::collections::VecDeque::new();
    let open_more = async |flood: &mut std::collections::VecDeque<_>, count: usize| {
        for _ in 0..count {
            flood.push_back(h2_connection(server.grpc, &closed).await);
            if flood.len() > CAP * 3 {
                flood.pop_front();
            }
        }
    };
    open_more(&mut flood, CAP * 2).await;
    eventually("the flood fills the cap, and room is made in it", || closed.load(Ordering::Relaxed) >= CAP).await;
    let mut kept = rls_client(&server).await.unwrap();
    let mut served_count = 0;
    for call in 0..100 {
        open_more(&mut flood, CAP / 2).await;
        let ok = if call % 2 == 0 {
            kept.should_rate_limit(rls_request()).await.is_ok()
        } else if let Some(mut fresh) = rls_client(&server).await {
            fresh.should_rate_limit(rls_request()).await.is_ok()
        } else {
            false
        };
        served_count += usize::from(ok);
    }
    eprintln!("{served_count} of 100 calls served; {} flood connections closed", closed.load(Ordering::Relaxed));
    assert!(served_count >= 95, "{served_count} of 100 calls served under the flood");
}

#[tokio::test]
async fn idle_connections_are_closed_after_the_idle_timeout_and_busy_ones_are_not() {
    let server = Server::start(CONFIG, &["--idle-timeout", "400ms", "--grpc-message-timeout", "1h"]);
    let mut kept_alive = TcpStream::connect(server.http).await.unwrap();
    assert!(served(&mut kept_alive, &check_request(false)).await);
    let closed = Arc::new(AtomicUsize::new(0));
    let mut idle = h2_connection(server.grpc, &closed).await;
    idle = idle.ready().await.unwrap();
    let mut busy = h2_connection(server.grpc, &closed).await.ready().await.unwrap();
    // A stream whose request has begun and not ended: open for as long as the client likes.
    let call = axum::http::Request::post("/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit")
        .header("content-type", "application/grpc")
        .body(())
        .unwrap();
    let (_response, _open_stream) = busy.send_request(call, false).unwrap();
    let started = Instant::now();
    let mut buffer = [0; 64];
    let ended = tokio::time::timeout(PATIENCE, kept_alive.read(&mut buffer)).await.unwrap();
    assert!(matches!(ended, Ok(0) | Err(_)), "the idle HTTP connection is closed");
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(400), "closed after {waited:?}, before the idle timeout");
    eventually("the idle gRPC connection is closed", || closed.load(Ordering::Relaxed) >= 1).await;
    drop(idle);
    // Three idle timeouts later, the connection with a stream open is still served.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(closed.load(Ordering::Relaxed), 1, "the connection with a stream open stays");
    assert!(busy.ready().await.is_ok());
}
