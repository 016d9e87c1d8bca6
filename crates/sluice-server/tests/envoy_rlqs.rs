//! Envoy 1.40 (the upstream binary) with Sluice as its rate limit quota service (RLQS),
//! on loopback, with the configuration docs/envoy.md shows: docs/envoy-rlqs.yaml with only
//! its ports changed (and, where a test says so, its no-assignment fallback), and
//! docs/envoy-rlqs-sluice.yaml as Sluice's rules (5 requests a minute per tenant).
//!
//! Every wait is on a condition (a response, a metric), bounded; none is a bare sleep.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use reqwest::StatusCode;
use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use support::envoy::Envoy;
use support::server::Server;
use support::upstream::Upstream;

const ENVOY_YAML: &str = include_str!("../../../docs/envoy-rlqs.yaml");
const SLUICE_YAML: &str = include_str!("../../../docs/envoy-rlqs-sluice.yaml");

/// Before its first assignment, Envoy lets requests through (docs/envoy-rlqs.yaml), or
/// refuses them: then every request let through was under an assignment of Sluice's.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Unassigned {
    Allow,
    Deny,
}

/// docs/envoy-rlqs.yaml on loopback, with Envoy's ports picked by the kernel.
fn envoy_config(app: SocketAddr, sluice: SocketAddr, unassigned: Unassigned) -> String {
    let mut config = ENVOY_YAML.to_owned();
    let mut swaps = vec![
        ("{address: 127.0.0.1, port_value: 9901}", "{address: 127.0.0.1, port_value: 0}".to_owned()),
        ("{address: 0.0.0.0, port_value: 10000}", "{address: 127.0.0.1, port_value: 0}".to_owned()),
        ("port_value: 8080}", format!("port_value: {}}}", app.port())),
        ("port_value: 8081}", format!("port_value: {}}}", sluice.port())),
    ];
    if unassigned == Unassigned::Deny {
        swaps.push(("{blanket_rule: ALLOW_ALL}", "{blanket_rule: DENY_ALL}".to_owned()));
    }
    for (from, to) in swaps {
        assert_eq!(config.matches(from).count(), 1, "docs/envoy-rlqs.yaml should have `{from}` once");
        config = config.replace(from, &to);
    }
    config
}

/// Sluice serving the rules, and an application behind the Envoys started later.
async fn sluice_and_app() -> (Server, Upstream) {
    let app = Upstream::start();
    let sluice = Server::start(SLUICE_YAML, &[]);
    wait_until("sluice ready", Duration::from_secs(20), async || {
        reqwest::get(sluice.url("/readyz")).await.is_ok_and(|answer| answer.status() == StatusCode::OK)
    })
    .await;
    (sluice, app)
}

/// Waits (at most `limit`) for `condition`, polling every 50 ms.
async fn wait_until(what: &str, limit: Duration, condition: impl AsyncFn() -> bool) {
    let deadline = Instant::now() + limit;
    while !condition().await {
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The status of a request for `tenant` through `envoy`.
async fn get(envoy: &Envoy, tenant: &str) -> StatusCode {
    let request = reqwest::Client::new().get(envoy.url("/")).header("x-tenant", tenant);
    request.send().await.unwrap().status()
}

/// The value of the metric line `series` (name and labels) of `sluice`.
async fn metric(sluice: &Server, series: &str) -> u64 {
    let text = reqwest::get(sluice.url("/metrics")).await.unwrap().text().await.unwrap();
    let line = text.lines().find(|line| line.strip_prefix(series).is_some_and(|rest| rest.starts_with(' ')));
    line.and_then(|line| line.rsplit(' ').next()).map_or(0, |value| value.parse().unwrap())
}

/// Minutes since the Unix epoch: the windows of the rule's `unit: minute`.
fn minute_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() / 60
}

/// Waits until at least `room` is left in the current minute (at most a minute).
async fn wait_for_room_in_the_minute(room: Duration) {
    wait_until("room in the minute", Duration::from_secs(61), async || {
        let into = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() % 60;
        Duration::from_secs(60 - into) >= room
    })
    .await;
}

/// A value no other test or run uses.
fn unique(what: &str) -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
    format!("{what}-{}-{nanos}", std::process::id())
}

#[tokio::test]
async fn two_envoys_sharing_a_bucket_of_5_per_minute_admit_at_most_5_and_both_are_served() {
    let Some(binary) = support::envoy::binary() else { return };
    let (sluice, app) = sluice_and_app().await;
    let config = envoy_config(app.address, sluice.grpc, Unassigned::Deny);
    let (a, b) = (Envoy::start(&binary, &config).await, Envoy::start(&binary, &config).await);
    // The whole exchange fits in one window of the rule.
    wait_for_room_in_the_minute(Duration::from_secs(30)).await;
    let minute = minute_now();
    let tenant = unique("tenant");
    // Each Envoy's first request creates its bucket and reports it; unassigned, it is refused.
    for (envoy, assigned) in [(&a, 1), (&b, 2)] {
        assert_eq!(get(envoy, &tenant).await, StatusCode::TOO_MANY_REQUESTS);
        wait_until("an assignment", Duration::from_secs(10), async || {
            metric(&sluice, "sluice_rlqs_assignments_total").await >= assigned
        })
        .await;
    }
    // Past a report (Envoy reports every 5 s): refusals ask for more, which must not exceed 5.
    let (mut admitted_a, mut admitted_b) = (0, 0);
    let until = Instant::now() + Duration::from_secs(7);
    while Instant::now() < until {
        admitted_a += u32::from(get(&a, &tenant).await == StatusCode::OK);
        admitted_b += u32::from(get(&b, &tenant).await == StatusCode::OK);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(minute_now(), minute, "the exchange crossed a minute: the bound is per minute");
    assert!(admitted_a + admitted_b <= 5, "admitted {admitted_a} + {admitted_b} in one minute, over 5");
    assert!(admitted_a >= 1 && admitted_b >= 1, "both Envoys are served: {admitted_a}, {admitted_b}");
    assert!(metric(&sluice, "sluice_rlqs_tokens_total").await <= 5);
    assert_eq!(metric(&sluice, "sluice_rlqs_streams").await, 2);
}

#[tokio::test]
async fn an_envoy_that_stops_reporting_has_its_bucket_abandoned_and_gets_a_new_share_when_back() {
    let Some(binary) = support::envoy::binary() else { return };
    let (sluice, app) = sluice_and_app().await;
    let config = envoy_config(app.address, sluice.grpc, Unassigned::Allow);
    let (a, b) = (Envoy::start(&binary, &config).await, Envoy::start(&binary, &config).await);
    let tenant = unique("tenant");
    for envoy in [&a, &b] {
        get(envoy, &tenant).await;
    }
    wait_until("both buckets held", Duration::from_secs(10), async || {
        metric(&sluice, "sluice_rlqs_buckets").await == 2
    })
    .await;
    // B freezes: its stream stays open, but it reports no more. A goes on reporting.
    b.signal("STOP");
    wait_until("B's bucket abandoned as stale", Duration::from_secs(30), async || {
        metric(&sluice, "sluice_rlqs_abandons_total{reason=\"stale\"}").await == 1
    })
    .await;
    assert_eq!(metric(&sluice, "sluice_rlqs_buckets").await, 1, "A, still reporting, keeps its bucket");
    // Back, B reads the abandon, drops the bucket, and reports it afresh on its next request.
    b.signal("CONT");
    wait_until("B's bucket held again", Duration::from_secs(20), async || {
        get(&b, &tenant).await;
        metric(&sluice, "sluice_rlqs_buckets").await == 2
    })
    .await;
}

/// Exhausts `envoy`'s share of `tenant`: requests until one is refused (at most 10 s).
async fn exhaust(envoy: &Envoy, tenant: &str) {
    wait_until("a refusal", Duration::from_secs(10), async || {
        get(envoy, tenant).await == StatusCode::TOO_MANY_REQUESTS
    })
    .await;
}

#[tokio::test]
async fn a_reload_and_a_shutdown_make_every_envoy_abandon_its_buckets_at_once() {
    let Some(binary) = support::envoy::binary() else { return };
    let (mut sluice, app) = sluice_and_app().await;
    let envoy = Envoy::start(&binary, &envoy_config(app.address, sluice.grpc, Unassigned::Allow)).await;
    for stop in ["HUP", "TERM"] {
        wait_for_room_in_the_minute(Duration::from_secs(20)).await;
        let tenant = unique("tenant");
        get(&envoy, &tenant).await;
        wait_until("an assignment", Duration::from_secs(10), async || {
            metric(&sluice, "sluice_rlqs_tokens_total").await > 0 && get(&envoy, &tenant).await == StatusCode::OK
        })
        .await;
        exhaust(&envoy, &tenant).await;
        let abandons = metric(&sluice, "sluice_rlqs_abandons_total{reason=\"reload\"}").await;
        sluice.signal(stop);
        if stop == "TERM" {
            sluice.wait_exit(Duration::from_secs(10));
        } else {
            wait_until("the reload's abandons", Duration::from_secs(5), async || {
                metric(&sluice, "sluice_rlqs_abandons_total{reason=\"reload\"}").await > abandons
            })
            .await;
        }
        // Abandoned, the bucket is new again: Envoy lets requests through until assigned.
        // Without the abandon its spent share would refuse them for the rest of its time
        // to live, then its expired-assignment fallback (DENY_ALL) for a minute.
        wait_until("a request let through", Duration::from_secs(3), async || {
            get(&envoy, &tenant).await == StatusCode::OK
        })
        .await;
    }
}

#[test]
fn docs_envoy_md_shows_both_rlqs_files_as_they_are() {
    let envoy_md = include_str!("../../../docs/envoy.md");
    for (file, text) in [("docs/envoy-rlqs.yaml", ENVOY_YAML), ("docs/envoy-rlqs-sluice.yaml", SLUICE_YAML)] {
        assert!(envoy_md.contains(&format!("```yaml\n{text}```")), "docs/envoy.md should show {file} as it is");
    }
}
