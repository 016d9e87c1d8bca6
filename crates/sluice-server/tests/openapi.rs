//! `/openapi.json` against what the real `sluice serve` sends: every status a probe
//! provokes is documented for its operation, and every constraint the server enforces on
//! a body is in the body's schema (issue 35.7).
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use serde_json::Value;
use std::net::SocketAddr;
use std::time::Duration;
use support::server::Server;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const CONFIG: &str = "policies:\n  hourly: {algorithm: fixed_window, limit: 100, window: 1h}\n";

/// Long enough for anything a loaded machine may delay.
const PATIENCE: Duration = Duration::from_secs(20);

/// A request as sent, and the operation it is for.
struct Probe {
    /// The documented operation: method (lower case) and path.
    operation: (&'static str, &'static str),
    method: &'static str,
    /// Extra header lines, each ending in `\r\n`.
    headers: String,
    /// The body, and the content length announced when it differs (a body that never comes).
    body: String,
    announced: Option<usize>,
}

impl Probe {
    fn new(operation: (&'static str, &'static str)) -> Probe {
        let method = if operation.0 == "get" { "GET" } else { "POST" };
        Probe { operation, method, headers: String::new(), body: String::new(), announced: None }
    }

    fn json(mut self, body: &str) -> Probe {
        self.headers.push_str("content-type: application/json\r\n");
        self.body = body.to_owned();
        self
    }

    fn method(mut self, method: &'static str) -> Probe {
        self.method = method;
        self
    }

    fn raw(mut self, headers: &str, body: &str) -> Probe {
        self.headers.push_str(headers);
        self.body = body.to_owned();
        self
    }

    fn stalled(mut self) -> Probe {
        self.announced = Some(self.body.len() + 10);
        self
    }

    /// Sends the probe on a connection of its own; the status and head of the answer.
    async fn send(&self, address: SocketAddr) -> (String, String) {
        let length = self.announced.unwrap_or(self.body.len());
        let (method, path) = (self.method, self.operation.1);
        let request = format!(
            "{method} {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n{}content-length: {length}\r\n\r\n{}",
            self.headers, self.body
        );
        let mut stream = TcpStream::connect(address).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = Vec::new();
        let read = tokio::time::timeout(PATIENCE, stream.read_to_end(&mut response)).await.unwrap();
        read.unwrap();
        let text = String::from_utf8_lossy(&response).into_owned();
        let head = text.split("\r\n\r\n").next().unwrap_or_default().to_owned();
        (head.split(' ').nth(1).unwrap_or("none").to_owned(), head)
    }
}

const CHECK: (&str, &str) = ("post", "/v1/check");
const PEEK: (&str, &str) = ("post", "/v1/peek");
const RESET: (&str, &str) = ("post", "/v1/reset");
const PLAYGROUND: (&str, &str) = ("post", "/v1/playground");

/// Probes of the body-taking operations: each good, malformed, unknown, oversized, of the
/// wrong type, over a constraint, too slow, or sent with another method.
fn body_probes() -> Vec<Probe> {
    let long_key = "k".repeat(1025);
    let big = format!(r#"{{"key":"{}","policies":["hourly"]}}"#, "k".repeat(70 * 1024));
    let mut probes = Vec::new();
    for operation in [CHECK, PEEK, RESET] {
        probes.extend([
            Probe::new(operation).json(r#"{"key":"a","policies":["hourly"]}"#),
            Probe::new(operation).json(r#"{"key":"a","policies":["nope"]}"#),
            Probe::new(operation).json(r#"{"key":"a","policies":["hourly","hourly"]}"#),
            Probe::new(operation).json(&format!(r#"{{"key":"{long_key}","policies":["hourly"]}}"#)),
            Probe::new(operation).json(r#"{"key":"","policies":["hourly"]}"#),
            Probe::new(operation).json("{"),
            Probe::new(operation).json(&big),
            Probe::new(operation).raw("content-type: text/plain\r\n", r#"{"key":"a","policies":["hourly"]}"#),
            Probe::new(operation).json(r#"{"key":"a""#).stalled(),
            Probe::new(operation).method("GET"),
            Probe::new(operation).method("DELETE"),
        ]);
    }
    probes.extend([
        Probe::new(CHECK).json(r#"{"key":"a","policies":[]}"#),
        Probe::new(PEEK).json(r#"{"key":"a","policies":[]}"#),
        Probe::new(CHECK).json(r#"{"key":"a","policies":["hourly"],"cost":-1}"#),
        Probe::new(CHECK).json(r#"{"key":"a","policies":["hourly"],"cost":18446744073709551616}"#),
        Probe::new(CHECK).json(r#"{"key":"a","policies":["hourly"],"cost":1000}"#),
    ]);
    let policy = r#"{"p":{"algorithm":"fixed_window","limit":1,"window":"1s"}}"#;
    probes.extend([
        Probe::new(PLAYGROUND).json(&format!(r#"{{"policies":{policy},"trace":[{{"at_us":0}}]}}"#)),
        Probe::new(PLAYGROUND).json(&format!(r#"{{"policies":{policy},"trace":[{{"at_us":0,"cost":101}}]}}"#)),
        Probe::new(PLAYGROUND).json(&format!(r#"{{"policies":{policy},"trace":[{{"at_us":0,"key":""}}]}}"#)),
        Probe::new(PLAYGROUND).json("{"),
        Probe::new(PLAYGROUND).raw("content-type: text/plain\r\n", "{}"),
        Probe::new(PLAYGROUND).json("{").stalled(),
        Probe::new(PLAYGROUND).method("GET"),
    ]);
    probes
}

/// Probes of the operations without a body: served, another method, a head too large.
fn other_probes() -> Vec<Probe> {
    let large_head = format!("x-padding: {}\r\n", "p".repeat(20 * 1024));
    let mut probes = vec![Probe::new(("post", "/v1/reload")), Probe::new(("post", "/v1/reload")).method("GET")];
    for path in ["/v1/policies", "/v1/live", "/healthz", "/readyz", "/metrics"] {
        probes.push(Probe::new(("get", path)));
        probes.push(Probe::new(("get", path)).method("POST"));
        probes.push(Probe::new(("get", path)).raw(&large_head, ""));
    }
    probes
}

#[tokio::test]
async fn every_status_the_server_sends_is_documented_for_its_operation() {
    let server = Server::start(CONFIG, &["--request-timeout", "300ms"]);
    let document: Value = reqwest::get(server.url("/openapi.json")).await.unwrap().json().await.unwrap();
    let mut undocumented = Vec::new();
    for probe in body_probes().into_iter().chain(other_probes()) {
        let (status, head) = probe.send(server.http).await;
        let (method, path) = probe.operation;
        let documented = &document["paths"][path][method]["responses"][&status];
        if documented.is_null() {
            undocumented.push(format!("{} {path} ({method} documented): {status}", probe.method));
        }
        if (path, status.as_str()) == ("/metrics", "200") {
            let served = head.lines().find_map(|line| line.strip_prefix("content-type: ")).unwrap();
            assert!(documented["content"].get(served).is_some(), "/metrics is served as {served}: {documented}");
        }
    }
    assert!(undocumented.is_empty(), "sent but not documented:\n{}", undocumented.join("\n"));
}

#[tokio::test]
async fn the_constraints_the_server_enforces_are_in_the_schemas() {
    let server = Server::start(CONFIG, &[]);
    let document: Value = reqwest::get(server.url("/openapi.json")).await.unwrap().json().await.unwrap();
    let schemas = &document["components"]["schemas"];
    for name in ["CheckRequest", "PeekRequest", "ResetRequest"] {
        let key = &schemas[name]["properties"]["key"];
        assert_eq!((&key["minLength"], &key["maxLength"]), (&Value::from(1), &Value::from(1024)), "{name}.key");
        assert_eq!(schemas[name]["properties"]["policies"]["uniqueItems"], true, "{name}.policies");
    }
    for name in ["CheckRequest", "PeekRequest"] {
        assert_eq!(schemas[name]["properties"]["policies"]["minItems"], 1, "{name}.policies");
    }
    let cost = &schemas["CheckRequest"]["properties"]["cost"];
    assert_eq!((&cost["minimum"], &cost["maximum"]), (&Value::from(0), &Value::from(u64::MAX)), "{cost}");
    let traced = &schemas["TracedRequest"]["properties"];
    assert_eq!(traced["cost"]["maximum"], 100);
    assert_eq!(traced["key"]["maxLength"], 1024);
}
