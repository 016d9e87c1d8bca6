//! The `axum_app` example, started as a process on a free port and driven over a real
//! socket with a real HTTP client.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long the example may take to start listening.
const STARTUP: Duration = Duration::from_secs(30);

/// The example's process, killed when dropped.
struct Example {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Example {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `target/<profile>/examples/axum_app`, next to this test's `deps/` directory.
fn example_path() -> PathBuf {
    let test = std::env::current_exe().expect("test path");
    let profile_dir = test.parent().and_then(|deps| deps.parent()).expect("target/<profile>");
    let path = profile_dir.join("examples").join(format!("axum_app{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.exists(),
        "{} is missing: run `cargo test -p sluice-tower`, which builds the examples",
        path.display()
    );
    path
}

/// Starts the example on port 0 and waits until its port accepts connections.
fn start() -> Example {
    let mut child = Command::new(example_path())
        .env("ADDR", "127.0.0.1:0")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the example");
    let stdout = child.stdout.take().expect("stdout");
    let (lines, listening) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    let mut example = Example { child, addr: SocketAddr::from(([127, 0, 0, 1], 0)) };
    let line = listening.recv_timeout(STARTUP).expect("the example prints `listening on http://ADDR`");
    example.addr = line.trim_start_matches("listening on http://").parse().expect("an address");
    wait_for_port(example.addr);
    example
}

fn wait_for_port(addr: SocketAddr) {
    let deadline = Instant::now() + STARTUP;
    while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
        assert!(Instant::now() < deadline, "{addr} did not accept connections within {STARTUP:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[tokio::test]
async fn the_sixth_hello_within_ten_seconds_gets_429_with_problem_json() {
    let example = start();
    let client = reqwest::Client::new();
    let url = format!("http://{}/hello", example.addr);
    let first = Instant::now();
    let mut allowed = 0;
    let rejection = loop {
        let response = client.get(&url).send().await.expect("GET /hello");
        if response.status() == 429 {
            break response;
        }
        assert_eq!(response.status(), 200);
        assert!(response.headers()["ratelimit"].to_str().unwrap().starts_with(r#""hello";r="#));
        assert_eq!(response.headers()["ratelimit-policy"], r#""hello";q=5;w=10"#);
        allowed += 1;
        // More than 5 can pass only if the first left the 10 s window meanwhile.
        assert!(
            allowed <= 5 || first.elapsed() >= Duration::from_secs(10),
            "{allowed} allowed in {:?}",
            first.elapsed()
        );
    };
    let elapsed = first.elapsed();
    assert!(allowed == 5 || elapsed >= Duration::from_secs(10), "{allowed} allowed in {elapsed:?}");
    let retry_after: u64 = rejection.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=10).contains(&retry_after), "Retry-After: {retry_after}");
    assert!(rejection.headers()["ratelimit"].to_str().unwrap().starts_with(r#""hello";r=0;"#));
    assert_eq!(rejection.headers()["content-type"], "application/problem+json");
    let body: serde_json::Value = rejection.json().await.expect("a problem+json body");
    assert_eq!(body["status"], 429);
    assert_eq!(body["retry_after"], retry_after);
    assert!(body["detail"].as_str().unwrap().contains("`hello`"));
}

#[tokio::test]
async fn api_keys_each_get_a_bucket_of_ten() {
    let example = start();
    let client = reqwest::Client::new();
    let url = format!("http://{}/api", example.addr);
    let get = |key: &'static str| client.get(&url).header("x-api-key", key).send();
    let first = Instant::now();
    let mut allowed = 0_u64;
    while get("alice").await.expect("GET /api").status() == 200 {
        allowed += 1;
        // One token comes back per second: more than 10 only with time passing.
        let refilled = first.elapsed().as_secs();
        assert!(allowed <= 10 + refilled, "{allowed} allowed in {:?}", first.elapsed());
    }
    assert!(allowed >= 10);
    assert_eq!(get("bob").await.expect("GET /api").status(), 200, "another key, another bucket");
    let keyless = client.get(&url).send().await.expect("GET /api");
    assert_eq!(keyless.status(), 400, "no API key");
}
