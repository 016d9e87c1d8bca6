//! Envoy 1.40's quota client (the `rate_limit_quota` filter), measured: a scripted quota
//! server sends assignments at chosen moments, requests go through a real Envoy, and what
//! Envoy admits must be what the model (`sluice_test_support::envoy_quota_client`) admits
//! for the very same actions and requests, and what docs/envoy-quota-client.md says.
//!
//! Every wait is on something observed (a report received, the probe bucket's flip, an
//! Envoy statistic), bounded. Where a time to live decides, requests are sent at times
//! computed from when a response was sent and seen applied, at least MARGIN (300 ms) from
//! any expiry (times to live and fallbacks are whole seconds), and each test checks
//! afterwards that its requests kept that margin.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::BucketAction;
use sluice_test_support::envoy_quota_client::{Blanket, EnvoyBucket, Usage, abandon, blanket, token_bucket};
use std::time::Duration;
use support::quota_rig::{Bucket, PROBE, Rig};
use tonic::Status;

const HOUR: Duration = Duration::from_secs(3_600);

/// What a row of the table assigns its bucket in a round.
#[derive(Clone, Copy, Debug)]
enum Give {
    /// A token bucket of this many tokens, refilled by one an hour, for an hour.
    Tokens(u32),
    /// The same, refilled every half hour instead.
    TokensHalfHourly(u32),
    Allow,
    Deny,
}

impl Give {
    fn action(
        self,
        bucket: Bucket,
    ) -> envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::BucketAction {
        match self {
            Give::Tokens(max) => token_bucket(&bucket.id(), max, 1, HOUR, HOUR),
            Give::TokensHalfHourly(max) => token_bucket(&bucket.id(), max, 1, HOUR / 2, HOUR),
            Give::Allow => blanket(&bucket.id(), Blanket::AllowAll, HOUR),
            Give::Deny => blanket(&bucket.id(), Blanket::DenyAll, HOUR),
        }
    }
}

/// A row: its name, then per round the actions of one response, the requests sent after
/// it, and how many of them are admitted.
type Row = (&'static str, [(&'static [Give], u32, u32); 3]);

const NONE: (&[Give], u32, u32) = (&[], 0, 0);

const ROWS: [Row; 11] = [
    ("fresh, 3 tokens", [(&[Give::Tokens(3)], 5, 3), NONE, NONE]),
    ("fresh, 1 token", [(&[Give::Tokens(1)], 3, 1), NONE, NONE]),
    ("changed: 10 spent, then 20", [(&[Give::Tokens(10)], 12, 10), (&[Give::Tokens(20)], 5, 0), NONE]),
    ("changed: 6 of 10 used, then 20", [(&[Give::Tokens(10)], 6, 6), (&[Give::Tokens(20)], 10, 8), NONE]),
    ("identical: 6 of 10 used, then 10", [(&[Give::Tokens(10)], 6, 6), (&[Give::Tokens(10)], 6, 4), NONE]),
    (
        "fill interval's seconds only changed",
        [(&[Give::Tokens(10)], 6, 6), (&[Give::TokensHalfHourly(10)], 6, 4), NONE],
    ),
    (
        "10 spent, DENY_ALL, then 10 (two responses)",
        [(&[Give::Tokens(10)], 12, 10), (&[Give::Deny], 2, 0), (&[Give::Tokens(10)], 12, 10)],
    ),
    (
        "10 spent, ALLOW_ALL, then 10 (two responses)",
        [(&[Give::Tokens(10)], 12, 10), (&[Give::Allow], 2, 2), (&[Give::Tokens(10)], 12, 10)],
    ),
    (
        "10 spent, [DENY_ALL, 10] in one response",
        [(&[Give::Tokens(10)], 12, 10), (&[Give::Deny, Give::Tokens(10)], 12, 10), NONE],
    ),
    (
        "10 spent, [DENY_ALL, 20] in one response",
        [(&[Give::Tokens(10)], 12, 10), (&[Give::Deny, Give::Tokens(20)], 22, 20), NONE],
    ),
    (
        "10 spent, [ALLOW_ALL, 20] in one response",
        [(&[Give::Tokens(10)], 12, 10), (&[Give::Allow, Give::Tokens(20)], 22, 20), NONE],
    ),
];

/// The buckets of the rows, one each.
const ROW_BUCKETS: [&str; 11] = ["r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10"];

#[tokio::test]
async fn token_bucket_assignments_start_full_carried_over_or_at_the_old_fill_fraction() {
    let Some(mut rig) = Rig::start().await else { return };
    let buckets = ROW_BUCKETS.map(Bucket::plain);
    let mut models = buckets.map(|bucket| bucket.model());
    let mut created: Vec<_> = buckets.into_iter().zip(models.iter_mut()).collect();
    rig.create(&mut created).await;
    for round in 0..3 {
        let actions = ROWS
            .iter()
            .zip(buckets)
            .flat_map(|((_, rounds), bucket)| rounds[round].0.iter().map(move |give| give.action(bucket)));
        let actions: Vec<_> = actions.collect();
        let (_, applied) = rig.push(actions.clone()).await;
        for (((name, rounds), bucket), model) in ROWS.iter().zip(buckets).zip(models.iter_mut()) {
            let id = bucket.id();
            for action in actions.iter().filter(|action| action.bucket_id.as_ref() == Some(&id)) {
                model.apply(applied, action);
            }
            let (_, requests, expected) = rounds[round];
            if requests > 0 {
                expect(&rig, (bucket, model), requests, expected, &format!("{name}, round {}", round + 1)).await;
            }
        }
    }
}

/// Sends `requests` requests to `bucket` and its model: both admit `expected`.
async fn expect(rig: &Rig, (bucket, model): (Bucket, &mut EnvoyBucket), requests: u32, expected: u32, what: &str) {
    let (envoy, modelled) = rig.requests(bucket, model, requests).await;
    eprintln!("{what}: Envoy admitted {envoy} of {requests}, the model {modelled}");
    assert_eq!((envoy, modelled), (expected, expected), "{what}");
}

/// A usage as a report carries it.
fn counts(usage: Option<Usage>) -> Option<(u64, u64)> {
    usage.map(|usage| (usage.allowed, usage.denied))
}

/// Sleeps until `at` on the rig's clock: only where a time to live decides, at a margin.
async fn sleep_until(rig: &Rig, at: Duration) {
    tokio::time::sleep(at.saturating_sub(rig.now())).await;
}

const SECOND: Duration = Duration::from_secs(1);
/// How far from an expiry the requests that tell it are sent.
const MARGIN: Duration = Duration::from_millis(300);

/// The buckets of the lapse test: their names, and the actions of its one response.
fn lapsing() -> [(Bucket, &'static str, BucketAction); 4] {
    let (lapse, deny) = (Bucket::plain("lapse"), Bucket::plain("deny"));
    let (deny_fallback, tokens_fallback) = (Bucket::with_fallback("deny"), Bucket::with_fallback("tokens"));
    [
        (lapse, "token bucket of 2", token_bucket(&lapse.id(), 2, 1, HOUR, SECOND)),
        (deny, "DENY_ALL", blanket(&deny.id(), Blanket::DenyAll, SECOND)),
        (deny_fallback, "DENY_ALL, fallback", blanket(&deny_fallback.id(), Blanket::DenyAll, SECOND)),
        (tokens_fallback, "token bucket of 2, fallback", token_bucket(&tokens_fallback.id(), 2, 1, HOUR, SECOND)),
    ]
}

#[tokio::test]
async fn assignments_lapse_after_whole_seconds_to_the_expired_then_the_no_assignment_behavior() {
    let Some(mut rig) = Rig::start().await else { return };
    let buckets = lapsing();
    let mut models = buckets.each_ref().map(|(bucket, ..)| bucket.model());
    rig.create(&mut buckets.iter().map(|(bucket, ..)| *bucket).zip(models.iter_mut()).collect::<Vec<_>>()).await;
    let (sent, applied) = rig.push(buckets.iter().map(|(.., action)| action.clone()).collect()).await;
    for (model, (.., action)) in models.iter_mut().zip(&buckets) {
        model.apply(applied, action);
    }
    // Envoy starts each time to live when it applies the response, between `sent` and
    // `applied`: the assignments end within [sent + 1 s, applied + 1 s], the fallbacks 2 s
    // later. Each stage's requests are sent MARGIN or more away from those spans.
    let stages = [
        ("before its time to live", Duration::ZERO, [(3, 2), (2, 0), (2, 0), (3, 2)]),
        ("lapsed", SECOND, [(2, 2), (2, 2), (2, 0), (2, 0)]),
        ("past the fallback", 3 * SECOND, [(0, 0), (0, 0), (2, 2), (2, 2)]),
    ];
    for (stage, from, rows) in stages {
        if from > Duration::ZERO {
            sleep_until(&rig, applied + from + MARGIN).await;
        }
        for (((bucket, name, _), model), (requests, admitted)) in buckets.iter().zip(&mut models).zip(rows) {
            if requests > 0 {
                expect(&rig, (*bucket, model), requests, admitted, &format!("{name}, {stage}")).await;
            }
        }
        let next_expiry = sent + if from == Duration::ZERO { SECOND } else { 3 * SECOND };
        assert!(from > SECOND || rig.now() + MARGIN <= next_expiry, "too slow to tell: {stage} ended too late");
    }
    let (lapse, model) = (buckets[0].0, &mut models[0]);
    let again = token_bucket(&lapse.id(), 2, 1, HOUR, HOUR);
    let (_, applied) = rig.push(vec![again.clone()]).await;
    model.apply(applied, &again);
    expect(&rig, (lapse, model), 3, 2, "the same token bucket after the lapse: full").await;
}

#[tokio::test]
async fn an_identical_assignment_restarts_the_time_to_live_of_the_token_bucket_it_keeps() {
    let Some(mut rig) = Rig::start().await else { return };
    let bucket = Bucket::plain("refreshed");
    let mut model = bucket.model();
    rig.create(&mut [(bucket, &mut model)]).await;
    let grant = token_bucket(&bucket.id(), 3, 1, HOUR, 2 * SECOND);
    let (first, applied) = rig.push(vec![grant.clone()]).await;
    model.apply(applied, &grant);
    expect(&rig, (bucket, &mut model), 2, 2, "a token bucket of 3 for 2 s").await;
    sleep_until(&rig, applied + SECOND).await;
    let (again, applied_again) = rig.push(vec![grant.clone()]).await;
    model.apply(applied_again, &grant);
    // The first time to live ends within [first + 2 s, applied + 2 s], the second within
    // [again + 2 s, applied_again + 2 s]: requests between them, MARGIN from each.
    sleep_until(&rig, applied + 2 * SECOND + MARGIN).await;
    expect(&rig, (bucket, &mut model), 2, 1, "past the first time to live: kept, 1 token left").await;
    assert!(rig.now() + MARGIN <= again + 2 * SECOND && first < again, "too slow to tell");
    sleep_until(&rig, applied_again + 2 * SECOND + MARGIN).await;
    expect(&rig, (bucket, &mut model), 2, 2, "past the second: lapsed, no_assignment_behavior").await;
}

#[tokio::test]
async fn a_token_bucket_refills_over_the_whole_seconds_of_its_fill_interval() {
    let Some(mut rig) = Rig::start().await else { return };
    let bucket = Bucket::plain("refilled");
    let mut model = bucket.model();
    rig.create(&mut [(bucket, &mut model)]).await;
    // One token every 1.9 s, which Envoy reads as every 1 s.
    let grant = token_bucket(&bucket.id(), 1, 1, Duration::from_millis(1_900), HOUR);
    let (_, applied) = rig.push(vec![grant.clone()]).await;
    model.apply(applied, &grant);
    let taking = rig.now();
    expect(&rig, (bucket, &mut model), 2, 1, "a token bucket of 1").await;
    let spent = rig.now();
    // 1.3 s after the token was taken (between `taking` and `spent`), the bucket holds 1.3
    // tokens at 1 a second (0.68 at 1 per 1.9 s): one request admitted, the next refused.
    sleep_until(&rig, spent + SECOND + MARGIN).await;
    expect(&rig, (bucket, &mut model), 2, 1, "1.3 s later").await;
    assert!(rig.now() + MARGIN < taking + 2 * SECOND, "too slow to tell: a second token came");
}

#[tokio::test]
async fn an_abandon_forgets_the_bucket_and_its_unreported_usage_until_a_request_recreates_it() {
    let Some(mut rig) = Rig::start().await else { return };
    let bucket = Bucket::plain("abandoned");
    let mut model = bucket.model();
    rig.create(&mut [(bucket, &mut model)]).await;
    // Right after a periodic report, so that the next is 5 s away.
    let last = rig.periodic_report(rig.server.reports().len()).await;
    assert_eq!(bucket.usage_in(&last), counts(model.report(rig.at(&last))));
    let grant = token_bucket(&bucket.id(), 2, 1, HOUR, HOUR);
    let (_, applied) = rig.push(vec![grant.clone()]).await;
    model.apply(applied, &grant);
    expect(&rig, (bucket, &mut model), 3, 2, "a token bucket of 2").await;
    let (_, applied) = rig.push(vec![abandon(&bucket.id())]).await;
    model.apply(applied, &abandon(&bucket.id()));
    assert!(applied + SECOND < rig.at(&last) + 5 * SECOND, "too slow to tell: the abandon came near Envoy's report");
    // Envoy no longer holds the bucket: it ignores an assignment for it.
    let ignored = blanket(&bucket.id(), Blanket::DenyAll, HOUR);
    let (_, applied) = rig.push(vec![ignored.clone()]).await;
    model.apply(applied, &ignored);
    let next = rig.periodic_report(rig.server.reports().len()).await;
    assert_eq!(bucket.usage_in(&next), None, "abandoned: not reported, its 2 admitted and 1 refused lost");
    assert_eq!(model.report(rig.at(&next)), None);
    // The next request recreates the bucket, unassigned, and reports it at once, alone.
    let (skip, sent) = (rig.server.reports().len(), rig.now());
    expect(&rig, (bucket, &mut model), 1, 1, "recreated: no_assignment_behavior").await;
    let created = rig
        .server
        .report_after(skip, |report| bucket.usage_in(report).is_some() && PROBE.usage_in(report).is_none())
        .await;
    assert!(rig.at(&created) < sent + SECOND, "the creation report comes at once");
    assert_eq!(bucket.usage_in(&created), counts(model.take_creation_report()));
    let (_, applied) = rig.push(vec![token_bucket(&bucket.id(), 1, 1, HOUR, HOUR)]).await;
    model.apply(applied, &token_bucket(&bucket.id(), 1, 1, HOUR, HOUR));
    expect(&rig, (bucket, &mut model), 2, 1, "assigned again").await;
}

/// How the server's side of the stream ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    /// The stream ends with status OK.
    Ok,
    /// The stream ends with status UNAVAILABLE.
    Error,
    /// The server is killed: its connections reset, its port closed; back later.
    Killed,
}

#[tokio::test]
async fn a_stream_ended_with_ok_keeps_assignments_and_is_reopened_at_the_next_report() {
    stream_end(End::Ok).await;
}

#[tokio::test]
async fn a_stream_ended_with_an_error_keeps_assignments_and_is_reopened_at_the_next_report() {
    stream_end(End::Error).await;
}

#[tokio::test]
async fn a_killed_server_loses_the_report_envoy_could_not_send_but_assignments_stay() {
    stream_end(End::Killed).await;
}

/// The stream ends as `end` says, just after a periodic report; requests go on meanwhile.
async fn stream_end(end: End) {
    let Some(mut rig) = Rig::start().await else { return };
    let bucket = Bucket::plain("kept");
    let mut model = bucket.model();
    rig.create(&mut [(bucket, &mut model)]).await;
    let grant = token_bucket(&bucket.id(), 10, 1, HOUR, HOUR);
    let (_, applied) = rig.push(vec![grant.clone()]).await;
    model.apply(applied, &grant);
    expect(&rig, (bucket, &mut model), 4, 4, "a token bucket of 10").await;
    let last = rig.periodic_report(rig.server.reports().len()).await;
    assert_eq!(bucket.usage_in(&last), counts(model.report(rig.at(&last))));
    let connect_failures = rig.stat(CONNECT_FAILURES).await;
    match end {
        End::Ok => rig.server.end_stream(None),
        End::Error => rig.server.end_stream(Some(Status::unavailable("going away"))),
        End::Killed => rig.server.kill(),
    }
    expect(&rig, (bucket, &mut model), 2, 2, &format!("stream ended ({end:?}): the assignment stays")).await;
    let mut gap = 5 * SECOND;
    if end == End::Killed {
        down_through_a_report(&rig, (bucket, &mut model), rig.at(&last), connect_failures).await;
        gap = 10 * SECOND;
    }
    let next = rig.periodic_report(rig.server.reports().len()).await;
    let after = rig.at(&next) - rig.at(&last);
    eprintln!("{end:?}: the next report came {after:?} after the last, on stream {}", next.stream);
    assert_eq!(next.stream, 2, "Envoy opens a new stream for its report");
    let waited = next.at - rig.server.opened(2);
    assert!(waited < SECOND / 2, "the new stream opened with the report ({waited:?} before it), not at the end");
    assert!(after > gap - SECOND && after < gap + SECOND, "at Envoy's report timer: {after:?}, not {gap:?}");
    let expected = if end == End::Killed { (1, 0) } else { (2, 0) };
    assert_eq!(bucket.usage_in(&next), Some(expected));
    assert_eq!(counts(model.report(rig.at(&next))), Some(expected));
    // Envoy builds its reports about 5 s apart (a hair under, at times, on its clock) and
    // counts the time in whole seconds: 4 or 5 s, even after a lost report (building it
    // restarted the count), so a server cannot tell one was lost. (The model's count is not
    // compared: the test sees a report when it arrives, not when Envoy built it.)
    let elapsed = bucket.elapsed_in(&next).unwrap();
    assert!(elapsed == 4 * SECOND || elapsed == 5 * SECOND, "time_elapsed {elapsed:?}");
    // The new stream assigns; the same token bucket is kept, tokens and all.
    let (_, applied) = rig.push(vec![grant.clone()]).await;
    model.apply(applied, &grant);
    let left = if end == End::Killed { 3 } else { 4 };
    expect(&rig, (bucket, &mut model), 6, left, "the same token bucket on the new stream").await;
}

/// Envoy's refused connections to the quota server.
const CONNECT_FAILURES: &str = "cluster.quota.upstream_cx_connect_fail";

/// With the server killed, waits for Envoy's next report (after the one at `last`): it
/// finds no server, and the report it built (the model's) is lost. Then sends a request
/// and brings the server back.
async fn down_through_a_report(rig: &Rig, (bucket, model): (Bucket, &mut EnvoyBucket), last: Duration, before: u64) {
    let deadline = last + 7 * SECOND;
    while rig.stat(CONNECT_FAILURES).await == before {
        assert!(rig.now() < deadline, "Envoy did not try to reach the server at its next report");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(counts(model.report(rig.now())), Some((2, 0)), "the report Envoy lost");
    expect(rig, (bucket, model), 1, 1, "server still down: the assignment stays").await;
    rig.server.revive().await;
}
