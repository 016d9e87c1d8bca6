//! The HTTP JSON API of the real `sluice serve` binary, over real sockets: every endpoint,
//! the headers, the status codes and the errors.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use reqwest::StatusCode;
use serde_json::{Value, json};
use support::server::Server;

/// The server decides on the real clock: a quota that came back within a second (a window
/// or a refill of 1 s) would make a test's counts depend on the machine not stalling for a
/// second between two of its requests. Nothing here comes back within an hour, and the
/// fixed windows start at a key's first request rather than at the turn of an hour.
const CONFIG: &str = r#"
policies:
  two_per_hour:
    algorithm: sliding_log
    limit: 2
    window: 1h
  hundred:
    algorithm: token_bucket
    capacity: 100
    refill_amount: 10
    refill_interval: 1h
  one_per_hour:
    algorithm: fixed_window
    limit: 1
    window: 1h
    alignment: anchored
  rollout:
    algorithm: fixed_window
    limit: 1
    window: 1h
    alignment: anchored
    shadow_mode: true
"#;

async fn post(server: &Server, path: &str, body: Value) -> reqwest::Response {
    reqwest::Client::new().post(server.url(path)).json(&body).send().await.unwrap()
}

async fn check(
    server: &Server,
    key: &str,
    policies: &[&str],
    cost: u64,
) -> (StatusCode, reqwest::header::HeaderMap, Value) {
    let response = post(server, "/v1/check", json!({"key": key, "policies": policies, "cost": cost})).await;
    let status = response.status();
    let headers = response.headers().clone();
    (status, headers, response.json().await.unwrap())
}

fn header<'a>(headers: &'a reqwest::header::HeaderMap, name: &str) -> &'a str {
    headers.get(name).unwrap_or_else(|| panic!("no {name} header in {headers:?}")).to_str().unwrap()
}

#[tokio::test]
async fn allowed_then_rejected_with_every_header() {
    let server = Server::start(CONFIG, &[]);
    let (status, headers, body) = check(&server, "alice", &["two_per_hour"], 1).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["allowed"], true);
    assert_eq!(body["policy"], "two_per_hour");
    assert_eq!(body["limit"], 2);
    assert_eq!(body["remaining"], 1);
    assert_eq!(body["retry_after_us"], Value::Null);
    assert_eq!(body["source"], "store");
    assert_eq!(header(&headers, "ratelimit-policy"), "\"two_per_hour\";q=2;w=3600");
    assert_eq!(header(&headers, "ratelimit"), "\"two_per_hour\";r=1;t=3600");
    assert!(headers.get("x-ratelimit-limit").is_none(), "the legacy fields are opt-in, as in the tower layer");
    assert!(headers.get("retry-after").is_none());

    let (status, _, _) = check(&server, "alice", &["two_per_hour"], 1).await;
    assert_eq!(status, StatusCode::OK);
    let (status, headers, body) = check(&server, "alice", &["two_per_hour"], 1).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(body["allowed"], false);
    assert_eq!(body["remaining"], 0);
    let retry = body["retry_after_us"].as_u64().unwrap();
    assert!(retry > 0 && retry <= 3_600_000_000, "{retry}");
    assert_eq!(header(&headers, "retry-after"), "3600", "whole seconds, rounded up");
    assert_eq!(header(&headers, "ratelimit"), "\"two_per_hour\";r=0;t=3600");

    // Another key is not affected.
    let (status, _, _) = check(&server, "bob", &["two_per_hour"], 1).await;
    assert_eq!(status, StatusCode::OK);
}

/// Issue 36.7: one rule for the service and the tower layer: the `X-RateLimit-*` fields
/// come when asked (`--x-ratelimit-headers`), on allowed and rejected answers alike.
#[tokio::test]
async fn legacy_fields_are_added_on_request() {
    let server = Server::start(CONFIG, &["--x-ratelimit-headers"]);
    let (_, headers, _) = check(&server, "alice", &["two_per_hour"], 1).await;
    assert_eq!(header(&headers, "x-ratelimit-limit"), "2");
    assert_eq!(header(&headers, "x-ratelimit-remaining"), "1");
    assert_eq!(header(&headers, "x-ratelimit-reset"), "3600");
    check(&server, "alice", &["two_per_hour"], 1).await;
    let (status, headers, _) = check(&server, "alice", &["two_per_hour"], 1).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&headers, "x-ratelimit-remaining"), "0");
    assert_eq!(header(&headers, "ratelimit"), "\"two_per_hour\";r=0;t=3600");
}

/// A peek decides nothing: neither `/v1/peek` nor a check of cost 0 is counted as a check,
/// even when it would be rejected.
#[tokio::test]
async fn peeks_are_not_counted_as_checks() {
    let server = Server::start(CONFIG, &[]);
    for _ in 0..3 {
        check(&server, "k", &["two_per_hour"], 1).await;
    }
    for _ in 0..2 {
        assert_eq!(post(&server, "/v1/peek", json!({"key": "k", "policies": ["two_per_hour"]})).await.status(), 429);
        assert_eq!(check(&server, "k", &["two_per_hour"], 0).await.0, StatusCode::TOO_MANY_REQUESTS);
    }
    let metrics = reqwest::get(server.url("/metrics")).await.unwrap().text().await.unwrap();
    assert!(metrics.contains("sluice_checks_total{policy=\"two_per_hour\",outcome=\"allowed\"} 2\n"), "{metrics}");
    assert!(metrics.contains("sluice_checks_total{policy=\"two_per_hour\",outcome=\"rejected\"} 1\n"), "{metrics}");
}

#[tokio::test]
async fn costs_peeks_and_costs_that_can_never_pass() {
    let server = Server::start(CONFIG, &[]);
    let (status, _, body) = check(&server, "k", &["hundred"], 40).await;
    assert_eq!((status, body["remaining"].as_u64()), (StatusCode::OK, Some(60)));
    let peek = post(&server, "/v1/peek", json!({"key": "k", "policies": ["hundred"]})).await;
    assert_eq!(peek.status(), StatusCode::OK);
    let peeked: Value = peek.json().await.unwrap();
    assert_eq!(peeked["remaining"], 60, "a peek consumes nothing");
    let (_, _, again) = check(&server, "k", &["hundred"], 0).await;
    assert_eq!(again["remaining"], 60, "cost 0 consumes nothing");
    let (status, headers, body) = check(&server, "k", &["hundred"], 101).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(body["cost_exceeds_limit"], true);
    assert_eq!(body["retry_after_us"], Value::Null);
    assert!(headers.get("retry-after").is_none(), "no wait makes a cost above the capacity pass");
    let (status, _, body) = check(&server, "k", &["hundred"], 70).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    let retry = body["retry_after_us"].as_u64().unwrap();
    assert!(retry > 0 && retry <= 3_600_000_000, "at most one refill of 10 tokens away: {retry}");
}

#[tokio::test]
async fn several_policies_are_all_or_nothing() {
    let server = Server::start(CONFIG, &[]);
    let (status, _, body) = check(&server, "k", &["hundred", "one_per_hour"], 1).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["policy"], "one_per_hour", "the most restrictive policy is reported");
    let (status, _, body) = check(&server, "k", &["hundred", "one_per_hour"], 1).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(body["policy"], "one_per_hour");
    let metrics = reqwest::get(server.url("/metrics")).await.unwrap().text().await.unwrap();
    for (series, count) in [
        ("policy=\"hundred\",outcome=\"allowed\"", 1),
        ("policy=\"hundred\",outcome=\"rejected\"", 0),
        ("policy=\"one_per_hour\",outcome=\"allowed\"", 1),
        ("policy=\"one_per_hour\",outcome=\"rejected\"", 1),
    ] {
        let line = format!("sluice_checks_total{{{series}}} {count}\n");
        assert!(
            metrics.contains(&line),
            "an allowed check counts under each policy, a rejection under the rejecting one: {line} missing from\n{metrics}"
        );
    }
    let peek: Value =
        post(&server, "/v1/peek", json!({"key": "k", "policies": ["hundred"]})).await.json().await.unwrap();
    assert_eq!(peek["remaining"], 99, "the rejected request consumed nothing from the other policy");
}

#[tokio::test]
async fn shadow_mode_reports_allowed_and_counts_the_rejection() {
    let server = Server::start(CONFIG, &[]);
    let (status, _, first) = check(&server, "k", &["rollout"], 1).await;
    assert_eq!((status, first["shadow_rejected"].as_bool()), (StatusCode::OK, Some(false)));
    let (status, headers, second) = check(&server, "k", &["rollout"], 1).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(second["allowed"], true);
    assert_eq!(second["shadow_rejected"], true);
    assert!(headers.get("retry-after").is_none());
    // With an enforced policy, the shadow policy never blocks it.
    let (status, _, both) = check(&server, "k", &["rollout", "hundred"], 1).await;
    assert_eq!((status, both["shadow_rejected"].as_bool()), (StatusCode::OK, Some(true)));
    let peek: Value =
        post(&server, "/v1/peek", json!({"key": "k", "policies": ["hundred"]})).await.json().await.unwrap();
    assert_eq!(peek["remaining"], 99, "the enforced policy recorded the request");
    let metrics = reqwest::get(server.url("/metrics")).await.unwrap().text().await.unwrap();
    assert!(metrics.contains("sluice_checks_total{policy=\"rollout\",outcome=\"shadow_rejected\"} 2"), "{metrics}");
    assert!(metrics.contains("sluice_checks_total{policy=\"rollout\",outcome=\"allowed\"} 1"), "{metrics}");
}

#[tokio::test]
async fn global_shadow_mode_lets_everything_through() {
    let server = Server::start(CONFIG, &["--shadow-mode"]);
    check(&server, "k", &["one_per_hour"], 1).await;
    let (status, _, body) = check(&server, "k", &["one_per_hour"], 1).await;
    assert_eq!((status, body["shadow_rejected"].as_bool()), (StatusCode::OK, Some(true)));
}

#[tokio::test]
async fn bad_requests_get_clear_errors() {
    let server = Server::start(CONFIG, &[]);
    let client = reqwest::Client::new();
    let cases: Vec<(reqwest::RequestBuilder, StatusCode, &str)> = vec![
        (
            client.post(server.url("/v1/check")).header("content-type", "application/json").body("{not json"),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            client.post(server.url("/v1/check")).body(r#"{"key":"k","policies":["hundred"]}"#),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
        ),
        (
            client.post(server.url("/v1/check")).json(&json!({"key": "k", "policies": ["nope"]})),
            StatusCode::NOT_FOUND,
            "unknown_policy",
        ),
        (
            client.post(server.url("/v1/check")).json(&json!({"key": "k", "policies": []})),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            client.post(server.url("/v1/check")).json(&json!({"key": "k", "policies": ["hundred", "hundred"]})),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            client.post(server.url("/v1/check")).json(&json!({"key": "", "policies": ["hundred"]})),
            StatusCode::BAD_REQUEST,
            "invalid_key",
        ),
        (
            client.post(server.url("/v1/check")).json(&json!({"key": "x".repeat(1025), "policies": ["hundred"]})),
            StatusCode::BAD_REQUEST,
            "invalid_key",
        ),
        (
            client.post(server.url("/v1/check")).json(&json!({"key": "k", "policies": ["hundred"], "cost": -1})),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            client
                .post(server.url("/v1/check"))
                .header("content-type", "application/json")
                .body(r#"{"key":"k","policies":["hundred"],"cost":18446744073709551616}"#),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            client.post(server.url("/v1/check")).json(&json!({"key": "k", "policies": ["hundred"], "extra": 1})),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            client
                .post(server.url("/v1/check"))
                .header("content-type", "application/json")
                .body(b"{\"key\":\"\xff\xfe\",\"policies\":[\"hundred\"]}".to_vec()),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            client.post(server.url("/v1/check")).header("content-type", "application/json").body(vec![b' '; 70 * 1024]),
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
        ),
    ];
    for (index, (request, status, code)) in cases.into_iter().enumerate() {
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), status, "case {index}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"], code, "case {index}: {body}");
        assert!(!body["message"].as_str().unwrap().is_empty());
    }
    // A cost that is not a whole number from 0 is named as such, not as serde's "u64".
    for (cost, shown) in [("-1", "got -1"), ("1.5", "got 1.5")] {
        let body = format!(r#"{{"key":"k","policies":["hundred"],"cost":{cost}}}"#);
        let request = client.post(server.url("/v1/check")).header("content-type", "application/json").body(body);
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "cost {cost}");
        let body: Value = response.json().await.unwrap();
        let message = body["message"].as_str().unwrap();
        assert!(message.contains("cost must be a whole number from 0") && message.contains(shown), "{message}");
    }
    let health = reqwest::get(server.url("/healthz")).await.unwrap();
    assert_eq!(health.status(), StatusCode::OK, "the server survived every bad request");
}

/// Sends raw HTTP/1.1 bytes and returns the response's status line.
async fn raw_status_line(server: &Server, request: &[u8]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = server.url("").trim_start_matches("http://").trim_end_matches('/').to_owned();
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    // The server may answer (and close) before everything is sent: a failed write is fine.
    let _ = stream.write_all(request).await;
    let mut response = Vec::new();
    let mut buffer = [0; 4096];
    while !response.windows(2).any(|pair| pair == b"\r\n") {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(read) => response.extend_from_slice(&buffer[..read]),
        }
    }
    String::from_utf8_lossy(&response).lines().next().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn chunked_bodies_are_bounded_and_other_methods_are_refused() {
    let server = Server::start(CONFIG, &[]);
    for path in ["/v1/check", "/v1/peek"] {
        let mut request = format!(
            "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
        )
        .into_bytes();
        for _ in 0..5 {
            request.extend_from_slice(format!("{:x}\r\n{}\r\n", 16 * 1024, " ".repeat(16 * 1024)).as_bytes());
        }
        request.extend_from_slice(b"0\r\n\r\n");
        assert_eq!(raw_status_line(&server, &request).await, "HTTP/1.1 413 Payload Too Large", "{path}");
    }
    let small =
        b"POST /v1/check HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n\
        10\r\n{\"key\":\"k\",\"poli\r\n12\r\ncies\":[\"hundred\"]}\r\n0\r\n\r\n";
    assert_eq!(raw_status_line(&server, small).await, "HTTP/1.1 200 OK", "a chunked body within the limit");
    let client = reqwest::Client::new();
    for (method, path, status) in [
        (reqwest::Method::GET, "/v1/check", StatusCode::METHOD_NOT_ALLOWED),
        (reqwest::Method::PUT, "/v1/peek", StatusCode::METHOD_NOT_ALLOWED),
        (reqwest::Method::POST, "/v1/checks", StatusCode::NOT_FOUND),
        (reqwest::Method::POST, "/v1/check/", StatusCode::NOT_FOUND),
    ] {
        let response = client.request(method.clone(), server.url(path)).send().await.unwrap();
        assert_eq!(response.status(), status, "{method} {path}");
        let allow = response.headers().get("allow").map(|allow| allow.to_str().unwrap().to_owned());
        assert_eq!(allow.is_some(), status == StatusCode::METHOD_NOT_ALLOWED, "{method} {path}: Allow {allow:?}");
        // A body like every other error's: a stable code and a message.
        let body: serde_json::Value = response.json().await.unwrap();
        let code = if status == StatusCode::NOT_FOUND { "not_found" } else { "method_not_allowed" };
        assert_eq!(body["error"], code, "{method} {path}: {body}");
        assert!(body["message"].as_str().is_some_and(|message| !message.is_empty()), "{body}");
    }
}

/// Reads from `stream` until the server closes it, for at most `limit`.
async fn read_until_closed(stream: &mut tokio::net::TcpStream, limit: std::time::Duration) {
    use tokio::io::AsyncReadExt;
    let mut buffer = [0; 4096];
    let closed = async { while let Ok(1..) = stream.read(&mut buffer).await {} };
    tokio::time::timeout(limit, closed).await.expect("the server closed the connection");
}

#[tokio::test]
async fn slow_or_silent_clients_are_cut_off_after_the_idle_and_request_timeouts() {
    use tokio::io::AsyncWriteExt;
    // 1 s, so that the busy client below (a request every 150 ms) keeps 850 ms of margin
    // for a stall of the test process on a loaded machine.
    let server = Server::start(CONFIG, &["--request-timeout", "1s", "--idle-timeout", "1s"]);
    let address = server.url("").trim_start_matches("http://").trim_end_matches('/').to_owned();
    let limit = std::time::Duration::from_secs(5);

    // A head that never ends (slowloris), and a connection that never sends anything.
    let opened = std::time::Instant::now();
    let mut slow_head = tokio::net::TcpStream::connect(&address).await.unwrap();
    slow_head.write_all(b"POST /v1/check HTTP/1.1\r\nhost: x\r\n").await.unwrap();
    let mut silent = tokio::net::TcpStream::connect(&address).await.unwrap();
    for stream in [&mut slow_head, &mut silent] {
        read_until_closed(stream, limit).await;
        let waited = opened.elapsed();
        assert!(waited >= std::time::Duration::from_secs(1), "closed after {waited:?}, before the timeout");
    }

    // A body that stops halfway: 408.
    let stalled =
        b"POST /v1/check HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"key\":";
    assert_eq!(raw_status_line(&server, stalled).await, "HTTP/1.1 408 Request Timeout");

    // A client that keeps sending requests keeps its connection, well past the timeout.
    let mut busy = tokio::net::TcpStream::connect(&address).await.unwrap();
    for round in 0..12 {
        use tokio::io::AsyncReadExt;
        busy.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
        let mut buffer = [0; 4096];
        let read = busy.read(&mut buffer).await.unwrap();
        assert!(buffer[..read].starts_with(b"HTTP/1.1 200 OK"), "round {round} on the same connection");
        tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    }
    let metrics = reqwest::get(server.url("/metrics")).await.unwrap();
    assert_eq!(metrics.status(), StatusCode::OK, "the server is still serving");
}

#[tokio::test]
async fn shutdown_is_not_held_back_by_a_client_stuck_in_a_request_head() {
    use tokio::io::AsyncWriteExt;
    let mut server = Server::start(CONFIG, &[]);
    let address = server.url("").trim_start_matches("http://").trim_end_matches('/').to_owned();
    let mut stuck = tokio::net::TcpStream::connect(&address).await.unwrap();
    stuck.write_all(b"POST /v1/check HTTP/1.1\r\nhost: x\r\n").await.unwrap();
    let (status, _, _) = check(&server, "k", &["hundred"], 1).await;
    assert_eq!(status, StatusCode::OK);
    let started = std::time::Instant::now();
    server.signal("TERM");
    let exit = server.wait_exit(std::time::Duration::from_secs(20));
    assert!(exit.success(), "{exit:?}");
    let took = started.elapsed();
    assert!(took < std::time::Duration::from_secs(8), "shutdown took {took:?} (request timeout: 75 s)");
}

#[tokio::test]
async fn the_http_port_also_speaks_http2_to_clients_with_prior_knowledge() {
    let server = Server::start(CONFIG, &[]);
    let address = server.url("").trim_start_matches("http://").trim_end_matches('/').to_owned();
    let tcp = tokio::net::TcpStream::connect(&address).await.unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(connection);
    let mut client = client.ready().await.unwrap();
    let request =
        axum::http::Request::post(server.url("/v1/check")).header("content-type", "application/json").body(()).unwrap();
    let (response, mut body) = client.send_request(request, false).unwrap();
    body.send_data(bytes::Bytes::from_static(br#"{"key":"k2","policies":["hundred"]}"#), true).unwrap();
    let response = response.await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let ratelimit = response.headers()["ratelimit"].to_str().unwrap().to_owned();
    assert!(ratelimit.starts_with("\"hundred\";r=99;t="), "{ratelimit}");
    let mut body = response.into_body();
    let mut bytes = Vec::new();
    while let Some(chunk) = body.data().await {
        bytes.extend_from_slice(&chunk.unwrap());
    }
    let decision: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(decision["remaining"], 99);
}

#[tokio::test]
async fn a_huge_cost_is_a_rejection_not_an_error() {
    let server = Server::start(CONFIG, &[]);
    let (status, _, body) = check(&server, "k", &["two_per_hour"], u64::MAX).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(body["cost_exceeds_limit"], true);
}

#[tokio::test]
async fn reset_forgets_a_key_and_is_admin_only() {
    let server = Server::start(CONFIG, &["--admin-token", "s3cret"]);
    check(&server, "k", &["one_per_hour"], 1).await;
    let client = reqwest::Client::new();
    let body = json!({"key": "k", "policies": ["one_per_hour"]});
    let without = client.post(server.url("/v1/reset")).json(&body).send().await.unwrap();
    assert_eq!(without.status(), StatusCode::UNAUTHORIZED);
    let wrong = client.post(server.url("/v1/reset")).bearer_auth("guess").json(&body).send().await.unwrap();
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    let (status, _, _) = check(&server, "k", &["one_per_hour"], 1).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "nothing was reset");
    let right = client.post(server.url("/v1/reset")).bearer_auth("s3cret").json(&body).send().await.unwrap();
    assert_eq!(right.status(), StatusCode::NO_CONTENT);
    let (status, _, _) = check(&server, "k", &["one_per_hour"], 1).await;
    assert_eq!(status, StatusCode::OK, "the key starts fresh");
}

/// RFC 9110: the scheme of `Authorization` is case-insensitive, and one or more blanks
/// may stand between it and the token.
#[tokio::test]
async fn the_admin_token_is_read_with_the_bearer_scheme_in_any_case() {
    let server = Server::start(CONFIG, &["--admin-token", "s3cret"]);
    let client = reqwest::Client::new();
    let reset = |authorization: &'static str| {
        let request = client.post(server.url("/v1/reset")).header("authorization", authorization);
        async move { request.json(&json!({"key": "k"})).send().await.unwrap().status() }
    };
    for accepted in ["Bearer s3cret", "bearer s3cret", "BEARER s3cret", "Bearer   s3cret", "bEaReR \t s3cret"] {
        assert_eq!(reset(accepted).await, StatusCode::NO_CONTENT, "{accepted:?}");
    }
    for refused in ["Basic s3cret", "Bearers3cret", "Bearer s3cre", "Bearer s3cret0", "Bearer S3CRET", "s3cret"] {
        assert_eq!(reset(refused).await, StatusCode::UNAUTHORIZED, "{refused:?}");
    }
    let reload = client.post(server.url("/v1/reload")).header("authorization", "BEARER s3cret").send().await.unwrap();
    assert_eq!(reload.status(), StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn without_a_token_admin_answers_loopback() {
    let server = Server::start(CONFIG, &[]);
    check(&server, "k", &["one_per_hour"], 1).await;
    let reset = post(&server, "/v1/reset", json!({"key": "k"})).await;
    assert_eq!(reset.status(), StatusCode::NO_CONTENT, "every policy, from loopback");
    let (status, _, _) = check(&server, "k", &["one_per_hour"], 1).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn operations_endpoints() {
    let server = Server::start(CONFIG, &[]);
    assert_eq!(reqwest::get(server.url("/healthz")).await.unwrap().status(), StatusCode::OK);
    assert_eq!(reqwest::get(server.url("/readyz")).await.unwrap().status(), StatusCode::OK);
    check(&server, "k", &["two_per_hour"], 1).await;
    let metrics = reqwest::get(server.url("/metrics")).await.unwrap();
    assert_eq!(metrics.status(), StatusCode::OK);
    let text = metrics.text().await.unwrap();
    for needle in [
        "sluice_checks_total{policy=\"two_per_hour\",outcome=\"allowed\"} 1",
        "sluice_store_latency_seconds_count 1",
        "sluice_keys 1",
        "# TYPE sluice_config_reloads counter",
    ] {
        assert!(text.contains(needle), "{needle} missing from\n{text}");
    }
    // No snapshot written yet: its age is no series, not NaN.
    assert!(!text.contains("NaN") && !text.contains("sluice_snapshot_age_seconds"), "{text}");
    let policies: Value = reqwest::get(server.url("/v1/policies")).await.unwrap().json().await.unwrap();
    assert_eq!(policies.as_array().unwrap().len(), 4);
    assert_eq!(policies[3]["shadow_mode"], true);
}

#[tokio::test]
async fn the_openapi_document_describes_every_route() {
    let server = Server::start(CONFIG, &[]);
    let document: Value = reqwest::get(server.url("/openapi.json")).await.unwrap().json().await.unwrap();
    assert!(document["openapi"].as_str().unwrap().starts_with("3."));
    let paths = document["paths"].as_object().unwrap();
    for path in ["/v1/check", "/v1/peek", "/v1/reset", "/v1/reload", "/v1/policies", "/healthz", "/readyz", "/metrics"]
    {
        assert!(paths.contains_key(path), "{path} missing");
    }
    let check = &document["paths"]["/v1/check"]["post"]["responses"];
    for status in ["200", "429", "400", "404", "413", "415", "503"] {
        assert!(check.get(status).is_some(), "/v1/check does not document {status}");
    }
    let schema = &document["components"]["schemas"]["CheckResponse"]["properties"];
    for field in ["allowed", "remaining", "reset_after_us", "retry_after_us", "delay_us", "shadow_rejected"] {
        assert!(schema.get(field).is_some(), "CheckResponse lacks {field}");
    }
}

/// Random bodies (valid, broken and hostile JSON) never crash the server nor get a 5xx.
#[test]
fn random_bodies_get_a_decision_or_a_4xx() {
    use proptest::prelude::*;
    let server = Server::start(CONFIG, &[]);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let client = reqwest::Client::new();
    let fragments = prop::sample::select(vec![
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "\"key\"",
        "\"policies\"",
        "\"cost\"",
        "\"hundred\"",
        "\"k\"",
        "1",
        "-1",
        "1e400",
        "null",
        "true",
        "\"\\u0000\"",
        "\"\\ud800\"",
        "18446744073709551615",
        "0",
        "\"two_per_hour\"",
    ]);
    let bodies = prop::collection::vec(fragments, 0..16).prop_map(|parts| parts.concat());
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(300));
    runner
        .run(&bodies, |body| {
            let status = runtime.block_on(async {
                let request = client.post(server.url("/v1/check")).header("content-type", "application/json");
                request.body(body.clone()).send().await.unwrap().status()
            });
            prop_assert!(
                status == StatusCode::OK || status == StatusCode::TOO_MANY_REQUESTS || status.is_client_error(),
                "{body}: {status}"
            );
            Ok(())
        })
        .unwrap();
    let health = runtime.block_on(async { reqwest::get(server.url("/healthz")).await.unwrap().status() });
    assert_eq!(health, StatusCode::OK);
}

/// Every endpoint words a body that does not parse alike: `invalid request body: ` and the
/// parser's message, never the web framework's own text.
#[tokio::test]
async fn every_endpoint_words_a_bad_body_alike() {
    let server = Server::start(CONFIG, &[]);
    for path in ["/v1/check", "/v1/peek", "/v1/reset"] {
        for body in [json!({"policies": ["two_per_hour"]}), json!({"key": "k", "extra": 1})] {
            let response = post(&server, path, body.clone()).await;
            assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{path} {body}");
            let answer: Value = response.json().await.unwrap();
            let message = answer["message"].as_str().unwrap();
            assert!(
                message.starts_with("invalid request body: ") && message.contains(" at line 1 column "),
                "{path}: {message}"
            );
        }
    }
}
