//! A plain hyper server (no axum) behind the layer, over a real socket: the layer answers
//! in the inner service's `Full<Bytes>` body.

mod support;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use sluice_tower::RateLimitLayer;
use sluice_tower::key::PeerIp;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;
use support::{clock, limiter, sliding_log};
use tower::{Layer, ServiceExt, service_fn};

async fn hello(_: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(b"hello"))))
}

#[tokio::test]
async fn a_hyper_service_is_limited_per_peer() {
    let layer = RateLimitLayer::from_limiter(
        limiter([sliding_log("hyper", 2, Duration::from_secs(3600))], clock()),
        PeerIp::new(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        loop {
            let Ok((stream, peer)) = listener.accept().await else { return };
            // hyper users put the peer address in the request's extensions themselves.
            let service = layer.layer(service_fn(hello)).map_request(move |mut request: Request<Incoming>| {
                request.extensions_mut().insert::<SocketAddr>(peer);
                request
            });
            let connection = auto::Builder::new(TokioExecutor::new());
            tokio::spawn(async move {
                let _ = connection.serve_connection(TokioIo::new(stream), TowerToHyperService::new(service)).await;
            });
        }
    });

    let client = reqwest::Client::new();
    let url = format!("http://{addr}/");
    for remaining in [1, 0] {
        let response = client.get(&url).send().await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["ratelimit"], format!(r#""hyper";r={remaining};t=3600"#));
        assert_eq!(response.text().await.unwrap(), "hello");
    }
    let response = client.get(&url).send().await.unwrap();
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "3600");
    assert_eq!(response.headers()["content-type"], "application/problem+json");
    server.abort();
}
