//! Envoy 1.40 (the upstream binary) with Sluice as its rate limit quota service (RLQS),
//! on loopback, with the configuration docs/envoy.md shows: docs/envoy-rlqs.yaml with only
//! its ports changed (and, where a test says so, its no-assignment fallback), and
//! docs/envoy-rlqs-sluice.yaml as Sluice's rules (5 requests a minute per tenant).
//!
//! Every wait is on a condition (a response, a metric), bounded; none is a bare sleep.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use reqwest::StatusCode;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};
use support::envoy::Envoy;
use support::quota_fleet::{
    ENVOY_YAML, SLUICE_YAML, Unassigned, envoy_config, get, metric, minute_now, unique, wait_for_room_in_the_minute,
    wait_ready, wait_until,
};

#[tokio::test]
async fn two_envoys_sharing_a_bucket_of_5_per_minute_admit_at_most_5_and_both_are_served() {
    let Some(binary) = support::envoy::binary() else { return };
    let (sluice, app) = support::quota_fleet::sluice_and_app(SLUICE_YAML).await;
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
    let (sluice, app) = support::quota_fleet::sluice_and_app(SLUICE_YAML).await;
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

/// docs/envoy-rlqs.yaml unchanged (ALLOW_ALL before an assignment): a reload that leaves
/// the tenant's rule as it was leaves its spent share in force, and one that changes it
/// makes Envoy abandon the bucket at once, to be matched under the new rule.
#[tokio::test]
async fn a_reload_keeps_an_unchanged_rules_assignments_and_abandons_a_changed_ones() {
    let Some(binary) = support::envoy::binary() else { return };
    let (sluice, app) = support::quota_fleet::sluice_and_app(SLUICE_YAML).await;
    let envoy = Envoy::start(&binary, &envoy_config(app.address, sluice.grpc, Unassigned::Allow)).await;
    // Spending the 5 takes up to 15 s (20 s bounded), the reloads up to 10 s more (bounded).
    wait_for_room_in_the_minute(Duration::from_secs(45)).await;
    let tenant = unique("tenant");
    get(&envoy, &tenant).await;
    wait_until("an assignment", Duration::from_secs(10), async || {
        metric(&sluice, "sluice_rlqs_tokens_total").await > 0 && get(&envoy, &tenant).await == StatusCode::OK
    })
    .await;
    // The whole 5 spent (a share of 2, then top-ups at Envoy's 5 s reports), Sluice refuses
    // the bucket for the rest of the minute: no later report gets a request through.
    wait_until("the tenant's 5 spent", Duration::from_secs(20), async || {
        get(&envoy, &tenant).await;
        metric(&sluice, "sluice_rlqs_refusals_total").await > 0
    })
    .await;
    exhaust(&envoy, &tenant).await;
    // The refusal is docs/envoy-rlqs.yaml's `deny_response_settings`: 429, RateLimit fields.
    let refused = reqwest::Client::new().get(envoy.url("/")).header("x-tenant", &tenant).send().await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let header = |name: &str| refused.headers().get(name).map(|value| value.to_str().unwrap().to_owned());
    assert_eq!(header("ratelimit-policy").as_deref(), Some("\"free\";q=5;w=60"));
    assert_eq!(header("ratelimit").as_deref(), Some("\"free\";r=0"));
    // The same file again: the hub sees the reload within a tick (0.2 s) and keeps the
    // bucket. An abandon would let the next request through (ALLOW_ALL until assigned).
    sluice.signal("HUP");
    wait_until("the reload", Duration::from_secs(5), async || {
        metric(&sluice, "sluice_config_reloads_total{result=\"ok\"}").await == 1
    })
    .await;
    let until = Instant::now() + Duration::from_secs(1);
    while Instant::now() < until {
        assert_eq!(get(&envoy, &tenant).await, StatusCode::TOO_MANY_REQUESTS, "the spent share stays in force");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(metric(&sluice, "sluice_rlqs_abandons_total{reason=\"reload\"}").await, 0);
    // The rule now allows 6: abandoned, the bucket is new again, and Envoy lets requests
    // through until assigned under the new rule.
    sluice.write_config(&SLUICE_YAML.replace("requests_per_unit: 5", "requests_per_unit: 6"));
    sluice.signal("HUP");
    wait_until("the reload's abandons", Duration::from_secs(5), async || {
        metric(&sluice, "sluice_rlqs_abandons_total{reason=\"reload\"}").await == 1
    })
    .await;
    wait_until("a request let through", Duration::from_secs(3), async || get(&envoy, &tenant).await == StatusCode::OK)
        .await;
}

/// docs/envoy-rlqs.yaml unchanged (ALLOW_ALL before an assignment): a tenant spends its 5,
/// Sluice stops gracefully and starts again on the same address, and the tenant gets
/// nothing more in the minute: Envoy keeps refusing while Sluice is away, and the
/// restarted Sluice, which kept the count in its snapshot, serves the bucket again at
/// Envoy's next report.
#[tokio::test]
async fn a_graceful_restart_under_allow_all_lets_nothing_through_beyond_the_limit() {
    let Some(binary) = support::envoy::binary() else { return };
    let (mut sluice, app) = support::quota_fleet::sluice_and_app(SLUICE_YAML).await;
    let envoy = Envoy::start(&binary, &envoy_config(app.address, sluice.grpc, Unassigned::Allow)).await;
    // Spending the 5 takes up to 15 s (a share of 2, then top-ups of 1 at Envoy's 5 s
    // reports, then the refusal), the restart up to 15 s more.
    wait_for_room_in_the_minute(Duration::from_secs(50)).await;
    let minute = minute_now();
    let tenant = unique("tenant");
    let admitted = AtomicU32::new(0);
    let send = async || {
        admitted.fetch_add(u32::from(get(&envoy, &tenant).await == StatusCode::OK), Ordering::Relaxed);
    };
    send().await;
    wait_until("the tenant's 5 spent", Duration::from_secs(20), async || {
        send().await;
        metric(&sluice, "sluice_rlqs_refusals_total").await > 0
    })
    .await;
    sluice.signal("TERM");
    sluice.wait_exit(Duration::from_secs(10));
    let stopped = sluice.stop();
    let away = Instant::now() + Duration::from_secs(3);
    while Instant::now() < away {
        send().await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let sluice = stopped.start();
    wait_ready(&sluice).await;
    let back = Instant::now();
    wait_until("the bucket held again", Duration::from_secs(10), async || {
        send().await;
        metric(&sluice, "sluice_rlqs_buckets").await == 1
    })
    .await;
    eprintln!("the restarted Sluice held the bucket again {:?} after it was ready", back.elapsed());
    for _ in 0..20 {
        send().await;
    }
    assert_eq!(minute_now(), minute, "the exchange crossed a minute: the bound is per minute");
    let admitted = admitted.into_inner();
    assert!(admitted <= 5, "{admitted} let through in the minute, over 5");
}

#[test]
fn docs_envoy_md_shows_both_rlqs_files_as_they_are() {
    let envoy_md = include_str!("../../../docs/envoy.md");
    for (file, text) in [("docs/envoy-rlqs.yaml", ENVOY_YAML), ("docs/envoy-rlqs-sluice.yaml", SLUICE_YAML)] {
        assert!(envoy_md.contains(&format!("```yaml\n{text}```")), "docs/envoy.md should show {file} as it is");
    }
}
