//! Stalled gRPC streams: bounded, reset, and what they hold.

use crate::support::server::Server;
use crate::{CONFIG, PATIENCE, eventually, h2_connection, rls_client, rls_request};
use bytes::Bytes;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The server's resident memory, in bytes (`VmRSS` in `/proc/PID/status`).
fn resident(server: &Server) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.pid())).unwrap();
    let line = status.lines().find_map(|line| line.strip_prefix("VmRSS:")).unwrap();
    line.trim().trim_end_matches(" kB").parse::<usize>().unwrap() * 1024
}

/// A gRPC call whose message announces `declared` bytes and sends its 5-byte prefix only;
/// its answer, and its request, open until dropped.
fn stall(
    send: &mut h2::client::SendRequest<Bytes>,
    declared: u32,
) -> (h2::client::ResponseFuture, h2::SendStream<Bytes>) {
    let call = axum::http::Request::post("/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit")
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap();
    let (response, mut body) = send.send_request(call, false).unwrap();
    let mut prefix = vec![0];
    prefix.extend_from_slice(&declared.to_be_bytes());
    // A stream past the bound may be answered and reset before its prefix is sent (the
    // connection is driven on another thread): then it is no longer there to send on.
    let _ = body.send_data(prefix.into(), false);
    (response, body)
}

// Regression test for issue 35.2: 2 connections × 5 000 stalled streams took the server
// from 21 to 916 MB, and kept it after they closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_grpc_streams_are_bounded_reset_after_the_message_timeout_and_hold_little() {
    const CONNECTIONS: usize = 15;
    const STREAMS: usize = 100;
    /// Streams one worker lets wait for their message (`MAX_WAITING_STREAMS`).
    const WAITING: usize = 1024;
    const TIMEOUT: Duration = Duration::from_secs(2);
    let args = ["--grpc-max-streams", "100", "--grpc-message-timeout", "2s", "--workers", "1"];
    let server = Server::start(CONFIG, &args);
    let mut warm = rls_client(&server).await.unwrap();
    warm.should_rate_limit(rls_request()).await.unwrap();
    let before = resident(&server);
    let closed = Arc::new(AtomicUsize::new(0));
    let (mut connections, mut calls, mut requests) = (Vec::new(), Vec::new(), Vec::new());
    let started = Instant::now();
    for _ in 0..CONNECTIONS {
        let mut send = h2_connection(server.grpc, &closed).await.ready().await.unwrap();
        eventually("the server announces its stream bound", || send.current_max_send_streams() == STREAMS).await;
        for _ in 0..STREAMS {
            send = send.ready().await.unwrap();
            let (call, request) = stall(&mut send, 60_000);
            calls.push(tokio::spawn(async move { (call.await, Instant::now()) }));
            requests.push(request);
        }
        connections.push(send);
    }
    let all_sent = Instant::now();
    let mut peak = resident(&server);
    while calls.iter().any(|call| !call.is_finished()) && started.elapsed() < TIMEOUT {
        peak = peak.max(resident(&server));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (mut timed_out, mut refused, mut first_timed_out) = (0, 0, None::<Instant>);
    for call in calls {
        let (answer, at) = tokio::time::timeout(PATIENCE, call).await.expect("every stalled call is answered").unwrap();
        match answer.unwrap().headers().get("grpc-status").map(|status| status.as_bytes().to_vec()).as_deref() {
            Some(b"4") => {
                assert!(at - started >= TIMEOUT, "DEADLINE_EXCEEDED before the message timeout");
                timed_out += 1;
                first_timed_out = Some(first_timed_out.map_or(at, |first| first.min(at)));
            }
            Some(b"8") => refused += 1,
            other => panic!("a stalled call answered {other:?}"),
        }
    }
    assert_eq!(timed_out + refused, CONNECTIONS * STREAMS);
    // Exact when every stream was sent before the first place came free (a timeout);
    // on a machine so loaded that it was not, more streams waited, in turn.
    let exact = first_timed_out.is_some_and(|first| first > all_sent);
    eprintln!("{timed_out} streams waited, {refused} refused; all sent before a place came free: {exact}");
    if exact {
        assert_eq!(timed_out, WAITING, "as many stalled streams wait as the bound lets");
    } else {
        assert!(timed_out >= WAITING, "{timed_out} streams waited");
    }
    let per_stream = peak.saturating_sub(before) / WAITING;
    eprintln!("resident: {before} B before, {peak} B at the peak: {per_stream} B per waiting stream");
    assert!(per_stream < 24 * 1024, "{per_stream} bytes per waiting stream (92 KB before the fix)");
    drop((connections, requests));
    eventually("the connections close", || closed.load(Ordering::Relaxed) == CONNECTIONS).await;
    // mimalloc returns freed pages to the system as the thread that freed them allocates
    // again: once the worker serves calls.
    let (deadline, closed_at, mut calls) = (Instant::now() + PATIENCE, resident(&server), 0);
    while resident(&server) > before + 8 * 1024 * 1024 {
        assert!(Instant::now() < deadline, "{} resident, {before} before the flood", resident(&server));
        for _ in 0..100 {
            warm.should_rate_limit(rls_request()).await.unwrap();
        }
        calls += 100;
    }
    eprintln!("resident: {closed_at} B once closed, {} B after {calls} more calls", resident(&server));
}
