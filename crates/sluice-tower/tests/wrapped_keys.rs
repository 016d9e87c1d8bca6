//! A user's extractor around a ready one keeps what the ready one gives the layer (its key
//! taken in place, the missing-peer-address answer) by forwarding the trait's provided
//! methods; without them it is keyed like a closure.

mod support;

use axum::body::Body;
use http::request::Parts;
use http::{Extensions, HeaderMap, Request, StatusCode};
use sluice_tower::RateLimitLayer;
use sluice_tower::key::{InPlace, KeyBuffer, KeyExtractor, PeerIp, RequestKey};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use support::*;

/// A user's wrapper around [`PeerIp`] that counts the requests it keys from the whole
/// head; it forwards the provided methods only when `forwards` is set.
struct CountedPeerIp {
    peer_ip: PeerIp,
    forwards: bool,
    from_head: Arc<AtomicUsize>,
}

impl KeyExtractor for CountedPeerIp {
    fn extract(&self, parts: &Parts) -> Option<RequestKey> {
        self.from_head.fetch_add(1, Ordering::Relaxed);
        self.peer_ip.extract(parts)
    }

    fn extract_in_place<'a>(
        &self,
        headers: &'a HeaderMap,
        extensions: &'a Extensions,
        buffer: &'a mut KeyBuffer,
    ) -> InPlace<'a> {
        if !self.forwards {
            return InPlace::NeedsHead;
        }
        self.peer_ip.extract_in_place(headers, extensions, buffer)
    }

    fn reads_peer_address(&self) -> bool {
        self.forwards && self.peer_ip.reads_peer_address()
    }
}

/// An app keyed by a [`CountedPeerIp`], and the count of requests it keyed from the head.
fn counted_app(forwards: bool) -> (axum::Router, Arc<AtomicUsize>) {
    let from_head = Arc::new(AtomicUsize::new(0));
    let key = CountedPeerIp { peer_ip: PeerIp::new(), forwards, from_head: Arc::clone(&from_head) };
    let one_per_minute = sliding_log("one", 1, Duration::from_secs(60));
    (app(RateLimitLayer::from_limiter(limiter([one_per_minute], clock()), key)), from_head)
}

/// The detail of the answer to a request the server gave no peer address.
async fn keyless_detail(app: &axum::Router) -> String {
    let response = send(app, Request::get("/").body(Body::empty()).expect("a request")).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    body_json(response).await["detail"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn a_wrapper_that_forwards_keeps_the_in_place_key_and_the_peer_address_answer() {
    let (app, from_head) = counted_app(true);
    assert_eq!(status(&app, from_peer("192.0.2.1:1000")).await, 200);
    assert_eq!(status(&app, from_peer("192.0.2.1:2000")).await, 429, "same address, other port");
    assert_eq!(status(&app, from_peer("192.0.2.2:1000")).await, 200);
    let detail = keyless_detail(&app).await;
    assert!(detail.contains("into_make_service_with_connect_info::<SocketAddr>()"), "{detail}");
    assert_eq!(from_head.load(Ordering::Relaxed), 0, "every request keyed in place");
}

#[tokio::test]
async fn a_wrapper_that_does_not_forward_is_keyed_from_the_head() {
    let (app, from_head) = counted_app(false);
    assert_eq!(status(&app, from_peer("192.0.2.1:1000")).await, 200);
    assert_eq!(status(&app, from_peer("192.0.2.1:2000")).await, 429, "same key either way");
    assert_eq!(keyless_detail(&app).await, "the request has no valid rate-limit key");
    assert_eq!(from_head.load(Ordering::Relaxed), 3);
}
