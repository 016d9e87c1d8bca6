//! A small load client for the Envoy rate limit service of `sluice serve`.
//!
//! ```text
//! cargo run --release -p sluice-server --example grpc_load -- ADDR CONCURRENCY SECONDS KEYS [CONNECTIONS]
//! ```
//!
//! Keeps CONCURRENCY `ShouldRateLimit` calls in flight for SECONDS, spread over CONNECTIONS
//! HTTP/2 connections (Envoy multiplexes the calls of each of its worker threads on one
//! connection), and prints one line: calls, calls/s, p50 and p99 latency. Each call asks for
//! domain `load` with one descriptor `user=<key>`; with KEYS = 1 every call uses the same key,
//! otherwise each call picks one of KEYS keys at random. `scripts/loadtest.sh` runs it against
//! a server configured with that domain.
//!
//! It runs on a multi-threaded runtime: a `current_thread` client was slower (15 587 calls/s).

use anyhow::{Context, bail};
use clap::Parser;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use std::time::{Duration, Instant};
use tonic::transport::{Channel, Endpoint};

/// The Envoy domain every call asks for.
const DOMAIN: &str = "load";
/// The descriptor key every call sends; its value is the caller key.
const DESCRIPTOR_KEY: &str = "user";

/// Arguments, all positional so that scripts can pass them in order.
#[derive(Debug, Parser)]
#[command(about = "Load client for the Envoy rate limit service (ShouldRateLimit)")]
struct Args {
    /// The gRPC address, such as `127.0.0.1:8081` or `http://127.0.0.1:8081`.
    addr: String,
    /// Calls kept in flight.
    concurrency: usize,
    /// How long to run, in seconds (`10` or `10s`).
    #[arg(value_parser = parse_seconds)]
    duration: Duration,
    /// Distinct keys: 1 for one hot key, N for keys drawn at random among N.
    keys: u64,
    /// HTTP/2 connections the calls are spread over [default: min(CONCURRENCY, 8)].
    connections: Option<usize>,
}

/// What one worker saw.
#[derive(Debug, Default)]
struct Tally {
    /// Latency of every answered call, in nanoseconds.
    latencies: Vec<u64>,
    /// Calls that failed (transport error or a gRPC status other than OK).
    errors: u64,
    /// Calls answered `OVER_LIMIT`.
    over_limit: u64,
    /// The first failure, to show why.
    first_error: Option<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.concurrency == 0 || args.keys == 0 {
        bail!("CONCURRENCY and KEYS must be at least 1");
    }
    let connections = args.connections.unwrap_or(args.concurrency.min(8)).clamp(1, args.concurrency);
    let channels = connect(&args.addr, connections).await?;
    let started = Instant::now();
    let deadline = started + args.duration;
    let workers: Vec<_> = (0..args.concurrency)
        .map(|index| {
            let client = RateLimitServiceClient::new(channels[index % channels.len()].clone());
            tokio::spawn(run_worker(client, args.keys, deadline, index as u64))
        })
        .collect();
    let mut total = Tally::default();
    for worker in workers {
        total.merge(worker.await?);
    }
    report(&args, connections, &mut total, started.elapsed());
    Ok(())
}

/// Opens `count` connections to `addr`, each its own HTTP/2 connection.
async fn connect(addr: &str, count: usize) -> anyhow::Result<Vec<Channel>> {
    let uri = if addr.contains("://") { addr.to_owned() } else { format!("http://{addr}") };
    let endpoint = Endpoint::from_shared(uri).context("invalid address")?.tcp_nodelay(true);
    let mut channels = Vec::with_capacity(count);
    for _ in 0..count {
        channels.push(endpoint.connect().await.with_context(|| format!("cannot connect to {addr}"))?);
    }
    Ok(channels)
}

/// Calls `ShouldRateLimit` one call after another until `deadline`.
async fn run_worker(mut client: RateLimitServiceClient<Channel>, keys: u64, deadline: Instant, seed: u64) -> Tally {
    let mut random = SplitMix64(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5EED);
    let mut tally = Tally::default();
    loop {
        let start = Instant::now();
        if start >= deadline {
            return tally;
        }
        let key = if keys == 1 { "hot".to_owned() } else { format!("key-{}", random.next() % keys) };
        match client.should_rate_limit(request(key)).await {
            Ok(response) => {
                tally.latencies.push(u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX));
                tally.over_limit += u64::from(response.get_ref().overall_code == Code::OverLimit as i32);
            }
            Err(status) => {
                tally.errors += 1;
                tally.first_error.get_or_insert_with(|| status.to_string());
            }
        }
    }
}

/// A one-descriptor request for `key`.
fn request(key: String) -> RateLimitRequest {
    let entry = Entry { key: DESCRIPTOR_KEY.to_owned(), value: key };
    let descriptor = RateLimitDescriptor { entries: vec![entry], ..RateLimitDescriptor::default() };
    RateLimitRequest { domain: DOMAIN.to_owned(), descriptors: vec![descriptor], hits_addend: 1 }
}

impl Tally {
    fn merge(&mut self, other: Tally) {
        self.latencies.extend(other.latencies);
        self.errors += other.errors;
        self.over_limit += other.over_limit;
        self.first_error = self.first_error.take().or(other.first_error);
    }
}

/// Prints the run's one-line summary (`key=value` pairs, read by `scripts/loadtest.sh`).
fn report(args: &Args, connections: usize, total: &mut Tally, elapsed: Duration) {
    total.latencies.sort_unstable();
    let calls = total.latencies.len();
    let micros = |quantile: f64| percentile(&total.latencies, quantile) as f64 / 1_000.0;
    println!(
        "grpc_load: {} in flight on {connections} connections, {:.1} s, {} distinct keys",
        args.concurrency,
        args.duration.as_secs_f64(),
        args.keys,
    );
    println!(
        "calls={calls} errors={} over_limit={} elapsed_s={:.3} calls_per_s={:.0} p50_us={:.0} p99_us={:.0}",
        total.errors,
        total.over_limit,
        elapsed.as_secs_f64(),
        calls as f64 / elapsed.as_secs_f64(),
        micros(0.50),
        micros(0.99),
    );
    if let Some(error) = &total.first_error {
        eprintln!("grpc_load: first error: {error}");
    }
}

/// The value at `quantile` of sorted `values` (nearest rank), 0 when there is none.
fn percentile(values: &[u64], quantile: f64) -> u64 {
    let Some(last) = values.len().checked_sub(1) else { return 0 };
    values[((last as f64) * quantile).round() as usize]
}

fn parse_seconds(text: &str) -> Result<Duration, String> {
    let number = text.strip_suffix('s').unwrap_or(text);
    let seconds: f64 = number.parse().map_err(|_| format!("not a number of seconds: {text}"))?;
    Duration::try_from_secs_f64(seconds).map_err(|error| error.to_string())
}

/// SplitMix64: a tiny, good-enough generator for picking keys (no `rand` dependency).
#[derive(Debug)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}
