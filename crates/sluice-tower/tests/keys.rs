//! Every key extractor, through the layer (oneshot, ManualClock).

mod support;

use axum::body::Body;
use http::{HeaderName, Request, StatusCode};
use sluice_tower::key::{
    ClientIp, ExtensionKey, ForwardingHeader, HeaderKey, KeyExtractor, MissingKey, PeerIp, RequestKey, TrustedProxies,
};
use sluice_tower::{OnStoreError, RateLimitLayer};
use std::time::Duration;
use support::*;

fn one_per_minute() -> sluice_core::Limit {
    sliding_log("one", 1, Duration::from_secs(60))
}

fn with_forwarded(peer: &str, name: &str, value: &str) -> Request<Body> {
    with_headers(peer, &[(name, value)])
}

fn with_headers(peer: &str, headers: &[(&str, &str)]) -> Request<Body> {
    let mut request = from_peer(peer);
    for (name, value) in headers {
        let name = HeaderName::from_bytes(name.as_bytes()).expect("header name");
        request.headers_mut().insert(name, value.parse().expect("header value"));
    }
    request
}

#[tokio::test]
async fn peer_ip_keys_each_peer_apart() {
    let app = app(RateLimitLayer::from_limiter(limiter([one_per_minute()], clock()), PeerIp::new()));
    assert_eq!(status(&app, from_peer("192.0.2.1:1000")).await, 200);
    assert_eq!(status(&app, from_peer("192.0.2.1:2000")).await, 429, "same address, other port");
    assert_eq!(status(&app, from_peer("192.0.2.2:1000")).await, 200);
}

#[tokio::test]
async fn peer_ip_reads_a_plain_socket_address_extension_too() {
    let app = app(RateLimitLayer::from_limiter(limiter([one_per_minute()], clock()), PeerIp::new()));
    let request = || {
        let mut request = Request::get("/").body(Body::empty()).unwrap();
        request.extensions_mut().insert("198.51.100.7:9".parse::<std::net::SocketAddr>().unwrap());
        request
    };
    assert_eq!(status(&app, request()).await, 200);
    assert_eq!(status(&app, request()).await, 429);
}

#[tokio::test]
async fn ipv6_clients_share_their_slash_64_by_default() {
    let app = app(RateLimitLayer::from_limiter(limiter([one_per_minute()], clock()), PeerIp::new()));
    assert_eq!(status(&app, from_peer("[2001:db8:1:2::1]:80")).await, 200);
    assert_eq!(status(&app, from_peer("[2001:db8:1:2:ffff::9]:80")).await, 429, "same /64");
    assert_eq!(status(&app, from_peer("[2001:db8:1:3::1]:80")).await, 200, "next /64");
}

#[tokio::test]
async fn ipv6_prefix_is_configurable() {
    let app = app(RateLimitLayer::from_limiter(limiter([one_per_minute()], clock()), PeerIp::new().ipv6_prefix(128)));
    assert_eq!(status(&app, from_peer("[2001:db8:1:2::1]:80")).await, 200);
    assert_eq!(status(&app, from_peer("[2001:db8:1:2::2]:80")).await, 200, "/128: other address, other key");
}

#[tokio::test]
async fn forwarding_headers_are_ignored_without_trusted_proxies() {
    let untrusting = ClientIp::behind(TrustedProxies::Cidrs(Vec::new()));
    let app = app(RateLimitLayer::from_limiter(limiter([one_per_minute()], clock()), untrusting));
    assert_eq!(status(&app, with_forwarded("192.0.2.1:1", "x-forwarded-for", "203.0.113.1")).await, 200);
    // A spoofed header from the same untrusted peer does not buy a fresh key.
    assert_eq!(status(&app, with_forwarded("192.0.2.1:1", "x-forwarded-for", "203.0.113.2")).await, 429);
    assert_eq!(status(&app, with_forwarded("192.0.2.1:1", "forwarded", "for=203.0.113.3")).await, 429);
}

#[tokio::test]
async fn a_spoofed_header_from_an_untrusted_peer_is_ignored() {
    let proxies = TrustedProxies::cidrs(["10.0.0.0/8"]).unwrap();
    let app = app(RateLimitLayer::from_limiter(limiter([one_per_minute()], clock()), ClientIp::behind(proxies)));
    assert_eq!(status(&app, with_forwarded("203.0.113.50:1", "x-forwarded-for", "198.51.100.1")).await, 200);
    assert_eq!(status(&app, with_forwarded("203.0.113.50:1", "x-forwarded-for", "198.51.100.2")).await, 429);
    // The client it claimed to be still has its own quota.
    assert_eq!(status(&app, with_forwarded("10.0.0.1:1", "x-forwarded-for", "198.51.100.2")).await, 200);
}

#[tokio::test]
async fn behind_trusted_proxies_the_client_is_the_first_untrusted_address_from_the_right() {
    let proxies = TrustedProxies::cidrs(["10.0.0.0/8"]).unwrap();
    let app = app(RateLimitLayer::from_limiter(limiter([one_per_minute()], clock()), ClientIp::behind(proxies)));
    let chain = "6.6.6.6, 203.0.113.9, 10.0.0.7";
    assert_eq!(status(&app, with_forwarded("10.0.0.1:1", "x-forwarded-for", chain)).await, 200);
    // Same client through another proxy, with another spoofed left-most entry.
    let chain = "7.7.7.7, 203.0.113.9, 10.0.0.8";
    assert_eq!(status(&app, with_forwarded("10.0.0.2:1", "x-forwarded-for", chain)).await, 429);
}

#[tokio::test]
async fn a_forwarded_header_the_proxies_do_not_write_is_ignored() {
    // The proxies append to X-Forwarded-For and pass on the Forwarded header the client
    // wrote: a client rotating it must not get a fresh key each time.
    let proxies = TrustedProxies::cidrs(["10.0.0.0/8"]).unwrap();
    let app = app(RateLimitLayer::from_limiter(limiter([one_per_minute()], clock()), ClientIp::behind(proxies)));
    let through_proxy =
        |spoofed: &str| with_headers("10.0.0.1:1", &[("x-forwarded-for", "203.0.113.9"), ("forwarded", spoofed)]);
    assert_eq!(status(&app, through_proxy("for=198.51.100.1")).await, 200);
    assert_eq!(status(&app, through_proxy("for=198.51.100.2")).await, 429, "still 203.0.113.9");
    assert_eq!(status(&app, with_forwarded("10.0.0.1:1", "forwarded", "for=198.51.100.3")).await, 200, "the proxy");
}

#[tokio::test]
async fn behind_proxies_that_write_forwarded_only_forwarded_is_read() {
    let proxies = TrustedProxies::cidrs(["10.0.0.0/8"]).unwrap();
    let client_ip = ClientIp::behind(proxies).header(ForwardingHeader::Forwarded);
    let app = app(RateLimitLayer::from_limiter(limiter([one_per_minute()], clock()), client_ip));
    let forwarded = r#"for=203.0.113.9, for="[2001:db8::1]:443", for=10.0.0.7"#;
    let through_proxy =
        |spoofed: &str| with_headers("10.0.0.1:1", &[("forwarded", forwarded), ("x-forwarded-for", spoofed)]);
    assert_eq!(status(&app, through_proxy("198.51.100.1")).await, 200);
    assert_eq!(status(&app, through_proxy("198.51.100.2")).await, 429, "still 2001:db8::1");
    let other = with_forwarded("10.0.0.2:1", "forwarded", "for=203.0.113.9");
    assert_eq!(status(&app, other).await, 200, "another client");
}

#[tokio::test]
async fn a_hop_count_trusts_that_many_proxies() {
    let app = app(RateLimitLayer::from_limiter(
        limiter([one_per_minute()], clock()),
        ClientIp::behind(TrustedProxies::hops(1)),
    ));
    assert_eq!(status(&app, with_forwarded("10.0.0.1:1", "x-forwarded-for", "1.1.1.1, 203.0.113.9")).await, 200);
    assert_eq!(status(&app, with_forwarded("10.0.0.2:1", "x-forwarded-for", "2.2.2.2, 203.0.113.9")).await, 429);
}

#[tokio::test]
async fn header_key_limits_each_api_key_apart() {
    let api_key = HeaderKey::new(HeaderName::from_static("x-api-key"));
    let app = app(RateLimitLayer::from_limiter(limiter([one_per_minute()], clock()), api_key));
    let request = |key: &str| Request::get("/").header("x-api-key", key).body(Body::empty()).unwrap();
    assert_eq!(status(&app, request("a")).await, 200);
    assert_eq!(status(&app, request("a")).await, 429);
    assert_eq!(status(&app, request("b")).await, 200);
}

#[derive(Clone)]
struct UserId(u32);

impl std::fmt::Display for UserId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "user:{}", self.0)
    }
}

#[tokio::test]
async fn extension_key_limits_each_user_apart() {
    let app = app(RateLimitLayer::from_limiter(limiter([one_per_minute()], clock()), ExtensionKey::<UserId>::new()));
    let request = |user: u32| {
        let mut request = Request::get("/").body(Body::empty()).unwrap();
        request.extensions_mut().insert(UserId(user));
        request
    };
    assert_eq!(status(&app, request(1)).await, 200);
    assert_eq!(status(&app, request(1)).await, 429);
    assert_eq!(status(&app, request(2)).await, 200);
}

#[tokio::test]
async fn a_closure_is_a_key_extractor() {
    let by_path = |parts: &http::request::Parts| Some(RequestKey::from(parts.uri.query().unwrap_or("none")));
    let app = app(RateLimitLayer::from_limiter(limiter([one_per_minute()], clock()), by_path));
    let request = |query: &str| Request::get(format!("/?{query}")).body(Body::empty()).unwrap();
    assert_eq!(status(&app, request("t=1")).await, 200);
    assert_eq!(status(&app, request("t=1")).await, 429);
    assert_eq!(status(&app, request("t=2")).await, 200);
}

#[tokio::test]
async fn a_request_without_a_key_is_rejected_400_with_problem_json_by_default() {
    let app = app(RateLimitLayer::from_limiter(
        limiter([one_per_minute()], clock()),
        HeaderKey::new(HeaderName::from_static("x-api-key")),
    ));
    let response = send(&app, Request::get("/").body(Body::empty()).unwrap()).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert_eq!(header(&response, "content-type"), Some("application/problem+json"));
    let body = body_json(response).await;
    assert_eq!(body["status"], 400);
    assert!(body["detail"].as_str().unwrap().contains("no valid rate-limit key"));
}

#[tokio::test]
async fn the_missing_key_rule_can_answer_401_or_share_one_key() {
    let api_key = || HeaderKey::new(HeaderName::from_static("x-api-key"));
    let app401 =
        app(RateLimitLayer::new(one_per_minute(), api_key()).missing_key(MissingKey::Reject(StatusCode::UNAUTHORIZED)));
    assert_eq!(status(&app401, Request::get("/").body(Body::empty()).unwrap()).await, 401);
    let shared = MissingKey::Shared(RequestKey::from("anonymous"));
    let app = app(RateLimitLayer::from_limiter(limiter([one_per_minute()], clock()), api_key()).missing_key(shared));
    assert_eq!(status(&app, Request::get("/").body(Body::empty()).unwrap()).await, 200);
    assert_eq!(status(&app, Request::get("/").body(Body::empty()).unwrap()).await, 429, "keyless requests share");
}

#[tokio::test]
async fn an_invalid_shared_key_is_the_layers_error_and_lets_nothing_through() {
    for shared in [RequestKey::from(""), RequestKey::from("k".repeat(1025))] {
        let layer = RateLimitLayer::from_limiter(
            limiter([one_per_minute()], clock()),
            HeaderKey::new(HeaderName::from_static("x-api-key")),
        )
        .missing_key(MissingKey::Shared(shared))
        .on_store_error(OnStoreError::Allow);
        let app = app(layer);
        for _ in 0..2 {
            let response = send(&app, Request::get("/").body(Body::empty()).unwrap()).await;
            assert_eq!(response.status(), 500);
            let body = body_text(response).await;
            assert!(body.contains("shared key for requests without a key is not a valid key"), "{body}");
        }
    }
}

#[tokio::test]
async fn client_ip_keys_ipv6_clients_by_their_prefix() {
    let proxies = || TrustedProxies::cidrs(["10.0.0.0/8"]).unwrap();
    let by_64 = app(RateLimitLayer::from_limiter(limiter([one_per_minute()], clock()), ClientIp::behind(proxies())));
    assert_eq!(status(&by_64, with_forwarded("10.0.0.1:1", "x-forwarded-for", "2001:db8:1:2::1")).await, 200);
    let same_64 = with_forwarded("10.0.0.1:1", "x-forwarded-for", "2001:db8:1:2::9");
    assert_eq!(status(&by_64, same_64).await, 429, "same /64");
    let by_128 = ClientIp::behind(proxies()).ipv6_prefix(128);
    let by_128 = app(RateLimitLayer::from_limiter(limiter([one_per_minute()], clock()), by_128));
    assert_eq!(status(&by_128, with_forwarded("10.0.0.1:1", "x-forwarded-for", "2001:db8:1:2::1")).await, 200);
    let other_address = with_forwarded("10.0.0.1:1", "x-forwarded-for", "2001:db8:1:2::9");
    assert_eq!(status(&by_128, other_address).await, 200, "/128: each address apart");
}

#[tokio::test]
async fn a_key_longer_than_1024_bytes_follows_the_missing_key_rule() {
    let app = app(RateLimitLayer::from_limiter(
        limiter([one_per_minute()], clock()),
        HeaderKey::new(HeaderName::from_static("x-api-key")),
    ));
    let request = Request::get("/").header("x-api-key", "k".repeat(1025)).body(Body::empty()).unwrap();
    assert_eq!(status(&app, request).await, 400);
}

#[tokio::test]
async fn without_connection_info_peer_ip_has_no_key() {
    let app = app(RateLimitLayer::from_limiter(limiter([one_per_minute()], clock()), PeerIp::new()));
    assert_eq!(status(&app, Request::get("/").body(Body::empty()).unwrap()).await, 400);
}

/// The status and every header of each answer to `requests`, body included.
async fn answers(app: &axum::Router, requests: Vec<Request<Body>>) -> Vec<(u16, Vec<(String, String)>, String)> {
    let mut answers = Vec::new();
    for request in requests {
        let response = send(app, request).await;
        let status = response.status().as_u16();
        let mut headers: Vec<_> = response
            .headers()
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_str().unwrap_or("?").to_owned()))
            .collect();
        headers.sort();
        answers.push((status, headers, body_text(response).await));
    }
    answers
}

#[tokio::test]
async fn ready_extractors_answer_like_the_same_closure() {
    // The ready extractors key a request without taking it apart; a closure gets the head.
    // Both must give the same answers: allowed with fields, rejected, keyless.
    let two_per_minute = || sliding_log("two", 2, Duration::from_secs(60));
    let requests = || {
        ["192.0.2.1:1", "192.0.2.1:2", "192.0.2.1:3", "192.0.2.2:1"]
            .into_iter()
            .map(from_peer)
            .chain([Request::get("/").body(Body::empty()).unwrap()])
            .collect::<Vec<_>>()
    };
    let ready = app(RateLimitLayer::from_limiter(limiter([two_per_minute()], clock()), PeerIp::new()));
    let closure = |parts: &http::request::Parts| PeerIp::new().extract(parts);
    let by_closure = app(RateLimitLayer::from_limiter(limiter([two_per_minute()], clock()), closure));
    let expected = answers(&by_closure, requests()).await;
    assert_eq!(expected.iter().map(|answer| answer.0).collect::<Vec<_>>(), [200, 200, 429, 200, 400]);
    let mut ready_answers = answers(&ready, requests()).await;
    // Only the ready extractor knows it reads the peer address: its 400 says how to get one
    // (`a_server_without_connect_info_is_told_how_to_fix_it`), the closure's cannot.
    let (keyless, expected_keyless) = (ready_answers.pop(), expected.last());
    assert_eq!(keyless.map(|answer| answer.0), expected_keyless.map(|answer| answer.0));
    assert_eq!(ready_answers, expected[..expected.len() - 1]);
}

/// An app served without `into_make_service_with_connect_info` gives its requests no peer
/// address: the 400 says what to change, and so does one log line (the first time only).
#[test]
fn a_server_without_connect_info_is_told_how_to_fix_it() {
    let log = support::CapturedLog::default();
    let subscriber = tracing_subscriber::fmt().with_writer(log.clone()).with_ansi(false).finish();
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("a runtime");
    tracing::subscriber::with_default(subscriber, || {
        runtime.block_on(async {
            let peer = RateLimitLayer::from_limiter(limiter([one_per_minute()], clock()), PeerIp::new());
            let behind = ClientIp::behind(TrustedProxies::hops(1));
            let client = RateLimitLayer::from_limiter(limiter([one_per_minute()], clock()), behind);
            for app in [app(peer), app(client)] {
                for _ in 0..2 {
                    let request = Request::builder().uri("/").body(Body::empty()).expect("a request");
                    let response = send(&app, request).await;
                    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
                    let detail = body_json(response).await["detail"].as_str().unwrap_or_default().to_owned();
                    assert!(detail.contains("into_make_service_with_connect_info::<SocketAddr>()"), "{detail}");
                }
            }
            // A header key has nothing to do with the peer address.
            let app = app(RateLimitLayer::from_limiter(
                limiter([one_per_minute()], clock()),
                HeaderKey::new(HeaderName::from_static("x-api-key")),
            ));
            let response = send(&app, Request::builder().uri("/").body(Body::empty()).expect("a request")).await;
            let detail = body_json(response).await["detail"].as_str().unwrap_or_default().to_owned();
            assert_eq!(detail, "the request has no valid rate-limit key");
        });
    });
    let logged = log.text();
    assert_eq!(logged.matches("into_make_service_with_connect_info").count(), 1, "logged once:\n{logged}");
}
