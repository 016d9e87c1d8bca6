//! Several Envoy 1.40 processes (the upstream binary) sharing one RLQS bucket behind
//! Sluice, on loopback, configured as docs/envoy.md shows: steady traffic at three times a
//! rule's limit, Envoys joining and leaving, under both no-assignment fallbacks. Counted
//! per minute (the rule's window), by when each request was sent.
//!
//! Every wait is on a condition (a metric, a minute's turn), bounded; none is a bare sleep.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use std::time::{Duration, Instant};
use support::envoy::Envoy;
use support::quota_fleet::{
    SLUICE_YAML, Traffic, Unassigned, admitted_by, admitted_by_minute, envoy_config, metric, minute_now,
    rules_per_minute, sluice_and_app, unique, wait_for_minute, wait_until,
};

/// `count` Envoys share a bucket of 60 a minute, with three times its demand between them
/// (3 requests a second): in each whole minute they let through 54 to 60.
async fn three_times_the_demand(count: usize, unassigned: Unassigned) {
    let Some(binary) = support::envoy::binary() else { return };
    let limit = 60;
    let every = Duration::from_millis(1000 * count as u64 / 3);
    let (sluice, app) = sluice_and_app(&rules_per_minute(60)).await;
    let config = envoy_config(app.address, sluice.grpc, unassigned);
    let mut envoys = Vec::new();
    for _ in 0..count {
        envoys.push(Envoy::start(&binary, &config).await);
    }
    let tenant = unique("tenant");
    let mut traffic = Traffic::default();
    for (index, envoy) in envoys.iter().enumerate() {
        traffic.send(index, envoy, &tenant, every);
    }
    // Two whole minutes after the one the traffic began in.
    let first = minute_now() + 1;
    wait_for_minute(first + 2, Duration::from_secs(1)).await;
    let outcomes = traffic.stop();
    let admitted = admitted_by_minute(&outcomes);
    for minute in [first, first + 1] {
        let count_in = admitted.get(&minute).copied().unwrap_or(0);
        eprintln!("{count} Envoys, {unassigned:?}, 3x the demand of {limit} a minute: {count_in} let through");
        let least = limit * 9 / 10;
        assert!((least..=limit).contains(&count_in), "minute {minute}: {count_in} of {limit} ({admitted:?})");
    }
}

#[tokio::test]
async fn three_envoys_at_three_times_the_demand_use_90_percent_of_60_a_minute_and_never_more() {
    three_times_the_demand(3, Unassigned::Allow).await;
}

#[tokio::test]
async fn two_envoys_at_three_times_the_demand_use_90_percent_of_60_a_minute_under_deny_all() {
    three_times_the_demand(2, Unassigned::Deny).await;
}

/// Envoys A and B share a bucket of 5 a minute at 1 request a second each; C joins 20 s
/// into the first whole minute, A leaves 10 s into the second. Never more than 5 in a
/// minute (besides each bucket's first request, which Envoy decides alone under
/// `ALLOW_ALL`); C is answered within a report interval of its first report; B and C
/// are both served in the second minute.
async fn joining_and_leaving(unassigned: Unassigned) {
    let Some(binary) = support::envoy::binary() else { return };
    let (sluice, app) = sluice_and_app(SLUICE_YAML).await;
    let config = envoy_config(app.address, sluice.grpc, unassigned);
    let (a, b, c) = (
        Envoy::start(&binary, &config).await,
        Envoy::start(&binary, &config).await,
        Envoy::start(&binary, &config).await,
    );
    let tenant = unique("tenant");
    let mut traffic = Traffic::default();
    traffic.send(0, &a, &tenant, Duration::from_secs(1));
    traffic.send(1, &b, &tenant, Duration::from_secs(1));
    let first = minute_now() + 1;
    wait_for_minute(first, Duration::from_secs(20)).await;
    traffic.send(2, &c, &tenant, Duration::from_secs(1));
    let joined = Instant::now();
    wait_until("C's bucket held", Duration::from_secs(10), async || metric(&sluice, "sluice_rlqs_buckets").await == 3)
        .await;
    // Envoy reports every 5 s, and its first report goes out with its first request.
    wait_until("every holder answered", Duration::from_secs(5), async || {
        metric(&sluice, "sluice_rlqs_holders{answer=\"none\"}").await == 0
            && metric(&sluice, "sluice_rlqs_holders{answer=\"share\"}").await
                + metric(&sluice, "sluice_rlqs_holders{answer=\"refusal\"}").await
                == 3
    })
    .await;
    eprintln!("{unassigned:?}: a joining Envoy answered {:?} after its first request", joined.elapsed());
    wait_for_minute(first + 1, Duration::from_secs(10)).await;
    traffic.stop_one(0);
    drop(a);
    wait_for_minute(first + 2, Duration::from_secs(0)).await;
    let outcomes = traffic.stop();
    let admitted = admitted_by_minute(&outcomes);
    for minute in [first, first + 1] {
        let count = admitted.get(&minute).copied().unwrap_or(0);
        assert!(count <= 5, "minute {minute}: {count} let through, over 5 ({admitted:?})");
    }
    eprintln!("{unassigned:?}: let through per minute, beside each bucket's first request: {admitted:?}");
    let (b_served, c_served) = (admitted_by(&outcomes, 1, first + 1), admitted_by(&outcomes, 2, first + 1));
    assert!(b_served >= 1 && c_served >= 1, "B and C both served in the second minute: {b_served}, {c_served}");
    let firsts_let_through = outcomes.iter().filter(|outcome| outcome.first && outcome.allowed).count();
    let expected = if unassigned == Unassigned::Allow { 3 } else { 0 };
    assert_eq!(firsts_let_through, expected, "each bucket's first request follows the fallback");
}

#[tokio::test]
async fn envoys_joining_and_leaving_a_bucket_of_5_a_minute_under_allow_all() {
    joining_and_leaving(Unassigned::Allow).await;
}

#[tokio::test]
async fn envoys_joining_and_leaving_a_bucket_of_5_a_minute_under_deny_all() {
    joining_and_leaving(Unassigned::Deny).await;
}
