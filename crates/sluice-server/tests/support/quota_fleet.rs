//! Envoys behind Sluice's RLQS, as docs/envoy.md runs them: docs/envoy-rlqs.yaml with only
//! its ports changed (and, where a test says so, its no-assignment fallback), Sluice on
//! docs/envoy-rlqs-sluice.yaml (or its rule at another rate), an application behind them,
//! and steady traffic whose outcomes are counted per minute (the rule's window).
#![allow(dead_code, clippy::unwrap_used)] // each test file uses a part

use super::envoy::Envoy;
use super::server::Server;
use super::upstream::Upstream;
use parking_lot::Mutex;
use reqwest::StatusCode;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub const ENVOY_YAML: &str = include_str!("../../../../docs/envoy-rlqs.yaml");
pub const SLUICE_YAML: &str = include_str!("../../../../docs/envoy-rlqs-sluice.yaml");

/// Before its first assignment, Envoy lets requests through (docs/envoy-rlqs.yaml), or
/// refuses them: then every request let through was under an assignment of Sluice's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unassigned {
    Allow,
    Deny,
}

/// docs/envoy-rlqs.yaml on loopback, with Envoy's ports picked by the kernel.
pub fn envoy_config(app: SocketAddr, sluice: SocketAddr, unassigned: Unassigned) -> String {
    let mut swaps = vec![
        ("{address: 127.0.0.1, port_value: 9901}", "{address: 127.0.0.1, port_value: 0}".to_owned()),
        ("{address: 0.0.0.0, port_value: 10000}", "{address: 127.0.0.1, port_value: 0}".to_owned()),
        ("port_value: 8080}", format!("port_value: {}}}", app.port())),
        ("port_value: 8081}", format!("port_value: {}}}", sluice.port())),
    ];
    if unassigned == Unassigned::Deny {
        swaps.push(("{blanket_rule: ALLOW_ALL}", "{blanket_rule: DENY_ALL}".to_owned()));
    }
    swapped(ENVOY_YAML, "docs/envoy-rlqs.yaml", &swaps)
}

/// docs/envoy-rlqs-sluice.yaml with its rule at `per_minute` requests a minute.
pub fn rules_per_minute(per_minute: u32) -> String {
    let to = format!("requests_per_unit: {per_minute}}}");
    swapped(SLUICE_YAML, "docs/envoy-rlqs-sluice.yaml", &[("requests_per_unit: 5}", to)])
}

fn swapped(text: &str, file: &str, swaps: &[(&str, String)]) -> String {
    let mut text = text.to_owned();
    for (from, to) in swaps {
        assert_eq!(text.matches(from).count(), 1, "{file} should have `{from}` once");
        text = text.replace(from, to);
    }
    text
}

/// Sluice serving `rules`, ready, and an application for the Envoys started later.
pub async fn sluice_and_app(rules: &str) -> (Server, Upstream) {
    let app = Upstream::start();
    let sluice = Server::start(rules, &[]);
    wait_ready(&sluice).await;
    (sluice, app)
}

/// Waits (at most 20 s) for Sluice's `/readyz` to answer 200.
pub async fn wait_ready(sluice: &Server) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let url = sluice.url("/readyz");
    while !reqwest::get(&url).await.is_ok_and(|answer| answer.status() == StatusCode::OK) {
        assert!(Instant::now() < deadline, "sluice not ready within 20 s; log:\n{}", sluice.log());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits (at most `limit`) for `condition`, polling every 50 ms.
pub async fn wait_until(what: &str, limit: Duration, condition: impl AsyncFn() -> bool) {
    let deadline = Instant::now() + limit;
    while !condition().await {
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The status of a request for `tenant` to `url` (an Envoy's listener).
pub async fn get_url(url: &str, tenant: &str) -> StatusCode {
    let request = reqwest::Client::new().get(url).header("x-tenant", tenant);
    request.send().await.unwrap().status()
}

/// The status of a request for `tenant` through `envoy`.
pub async fn get(envoy: &Envoy, tenant: &str) -> StatusCode {
    get_url(&envoy.url("/"), tenant).await
}

/// The value of the metric line `series` (name and labels) of `sluice`; 0 when absent.
pub async fn metric(sluice: &Server, series: &str) -> u64 {
    let text = reqwest::get(sluice.url("/metrics")).await.unwrap().text().await.unwrap();
    let line = text.lines().find(|line| line.strip_prefix(series).is_some_and(|rest| rest.starts_with(' ')));
    line.and_then(|line| line.rsplit(' ').next()).map_or(0, |value| value.parse().unwrap())
}

/// Minutes since the Unix epoch: the windows of the rule's `unit: minute`.
pub fn minute_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() / 60
}

/// Seconds into the current minute.
pub fn second_of_minute() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64() % 60.0
}

/// Waits until at least `room` is left in the current minute (at most a minute).
pub async fn wait_for_room_in_the_minute(room: Duration) {
    wait_until("room in the minute", Duration::from_secs(61), async || 60.0 - second_of_minute() >= room.as_secs_f64())
        .await;
}

/// Waits until `into` of minute `minute` has passed (or a later minute has begun).
pub async fn wait_for_minute(minute: u64, into: Duration) {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let until = Duration::from_secs(minute * 60) + into;
    let limit = until.saturating_sub(now) + Duration::from_secs(10);
    wait_until("a minute's turn", limit, async || {
        minute_now() > minute || (minute_now() == minute && second_of_minute() >= into.as_secs_f64())
    })
    .await;
}

/// A value no other test or run uses, for a descriptor or bucket of its own.
pub fn unique(what: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
    format!("{what}-{}-{nanos}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// One request's outcome: the Envoy it went through, the minute it was sent in, whether
/// it was that Envoy's first for the tenant (it creates the bucket, decided by Envoy's
/// fallback before Sluice can answer), and whether it was let through.
#[derive(Clone, Copy, Debug)]
pub struct Outcome {
    pub envoy: usize,
    pub minute: u64,
    pub first: bool,
    pub allowed: bool,
}

/// Requests sent through Envoys at a steady pace, each outcome recorded.
#[derive(Debug, Default)]
pub struct Traffic {
    outcomes: Arc<Mutex<Vec<Outcome>>>,
    senders: Vec<tokio::task::JoinHandle<()>>,
}

impl Traffic {
    /// Sends a request for `tenant` through `envoy` (numbered `index`) every `every`,
    /// until [`Traffic::stop`] or [`Traffic::stop_one`].
    pub fn send(&mut self, index: usize, envoy: &Envoy, tenant: &str, every: Duration) {
        let (url, tenant, outcomes) = (envoy.url("/"), tenant.to_owned(), Arc::clone(&self.outcomes));
        let sender = tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every);
            let mut first = true;
            loop {
                ticks.tick().await;
                let minute = minute_now();
                let allowed = get_url(&url, &tenant).await == StatusCode::OK;
                outcomes.lock().push(Outcome { envoy: index, minute, first, allowed });
                first = false;
            }
        });
        self.senders.push(sender);
    }

    /// Stops the sender started `index`-th.
    pub fn stop_one(&self, index: usize) {
        self.senders[index].abort();
    }

    /// Stops every sender; the outcomes.
    pub fn stop(self) -> Vec<Outcome> {
        for sender in &self.senders {
            sender.abort();
        }
        self.outcomes.lock().clone()
    }
}

/// Requests let through in each minute, but for each bucket's first.
pub fn admitted_by_minute(outcomes: &[Outcome]) -> BTreeMap<u64, u64> {
    let mut admitted = BTreeMap::new();
    for outcome in outcomes.iter().filter(|outcome| outcome.allowed && !outcome.first) {
        *admitted.entry(outcome.minute).or_default() += 1;
    }
    admitted
}

/// Requests let through by `envoy` in `minute`.
pub fn admitted_by(outcomes: &[Outcome], envoy: usize, minute: u64) -> u64 {
    outcomes.iter().filter(|o| o.envoy == envoy && o.minute == minute && o.allowed).count() as u64
}
