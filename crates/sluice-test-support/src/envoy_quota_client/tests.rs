//! One test per row of docs/envoy-quota-client.md's table, as the real Envoy 1.40 measured
//! it (crates/sluice-server/tests/envoy_quota_client.rs).

use super::*;

const HOUR: Duration = Duration::from_secs(3_600);

fn id() -> envoy_types::pb::envoy::service::rate_limit_quota::v3::BucketId {
    bucket_id("tenant", "a")
}

/// A bucket held by Envoy (one request made it, admitted as unassigned) at 0 s.
fn held(expired: Option<(Blanket, Duration)>) -> EnvoyBucket {
    let mut bucket = EnvoyBucket::new(Blanket::AllowAll, expired);
    assert!(bucket.request(Duration::ZERO));
    bucket
}

/// A token bucket of `max` refilled by one token an hour, for an hour.
fn tokens(max: u32) -> BucketAction {
    token_bucket(&id(), max, 1, HOUR, HOUR)
}

/// How many of `requests` requests at `now` Envoy admits.
fn admitted(bucket: &mut EnvoyBucket, now: Duration, requests: u32) -> u32 {
    (0..requests).map(|_| u32::from(bucket.request(now))).sum()
}

fn secs(seconds: u64) -> Duration {
    Duration::from_secs(seconds)
}

#[test]
fn a_fresh_token_bucket_starts_full_even_of_one_token() {
    for max in [1, 3] {
        let mut bucket = held(None);
        bucket.apply(secs(1), &tokens(max));
        assert_eq!(admitted(&mut bucket, secs(1), 5), max);
    }
}

#[test]
fn a_changed_token_bucket_starts_at_the_old_fill_fraction() {
    let mut spent = held(None);
    spent.apply(secs(1), &tokens(10));
    assert_eq!(admitted(&mut spent, secs(1), 12), 10);
    spent.apply(secs(2), &tokens(20));
    assert_eq!(admitted(&mut spent, secs(2), 5), 0, "a spent bucket's replacement starts empty");
    let mut partly = held(None);
    partly.apply(secs(1), &tokens(10));
    assert_eq!(admitted(&mut partly, secs(1), 6), 6);
    partly.apply(secs(2), &tokens(20));
    assert_eq!(admitted(&mut partly, secs(2), 10), 8, "4 of 10 left → 8 of 20");
}

#[test]
fn an_identical_token_bucket_is_kept_with_its_tokens_and_a_new_time_to_live() {
    let mut bucket = held(None);
    bucket.apply(secs(1), &token_bucket(&id(), 10, 1, HOUR, secs(2)));
    assert_eq!(admitted(&mut bucket, secs(1), 6), 6);
    bucket.apply(secs(2), &token_bucket(&id(), 10, 1, HOUR, secs(2)));
    assert_eq!(admitted(&mut bucket, secs(3), 6), 4, "kept, and alive past the first time to live");
}

#[test]
fn a_token_bucket_differing_only_in_whole_seconds_of_fill_interval_is_kept() {
    let mut bucket = held(None);
    bucket.apply(secs(1), &tokens(10));
    assert_eq!(admitted(&mut bucket, secs(1), 6), 6);
    bucket.apply(secs(2), &token_bucket(&id(), 10, 1, HOUR / 2, HOUR));
    assert_eq!(admitted(&mut bucket, secs(2), 6), 4);
}

#[test]
fn a_token_bucket_after_a_blanket_rule_starts_full_in_one_response_or_two() {
    for blanket_rule in [Blanket::AllowAll, Blanket::DenyAll] {
        for max in [10, 20] {
            // Two responses, then the same two actions in one (applied in order).
            for gap in [secs(1), Duration::ZERO] {
                let mut bucket = held(None);
                bucket.apply(secs(1), &tokens(10));
                assert_eq!(admitted(&mut bucket, secs(1), 12), 10);
                bucket.apply(secs(2), &blanket(&id(), blanket_rule, HOUR));
                assert_eq!(admitted(&mut bucket, secs(2) + gap / 2, 2), if blanket_rule.admits() { 2 } else { 0 });
                bucket.apply(secs(2) + gap, &tokens(max));
                assert_eq!(admitted(&mut bucket, secs(3), max + 2), max, "{blanket_rule:?} then {max}, {gap:?}");
            }
        }
    }
}

#[test]
fn a_token_bucket_after_a_lapse_starts_full() {
    let mut bucket = held(None);
    bucket.apply(secs(1), &token_bucket(&id(), 2, 1, HOUR, secs(1)));
    assert_eq!(admitted(&mut bucket, secs(1), 3), 2);
    assert_eq!(admitted(&mut bucket, secs(2), 2), 2, "lapsed: no_assignment_behavior (ALLOW_ALL)");
    bucket.apply(secs(3), &tokens(2));
    assert_eq!(admitted(&mut bucket, secs(3), 3), 2, "the same token bucket again, full");
}

#[test]
fn a_time_to_live_counts_whole_seconds() {
    let mut bucket = held(None);
    bucket.apply(secs(1), &blanket(&id(), Blanket::DenyAll, Duration::from_millis(1_900)));
    assert!(!bucket.request(Duration::from_millis(1_999)));
    assert!(bucket.request(secs(2)));
}

#[test]
fn deny_all_past_its_time_to_live_falls_back_to_expired_then_no_assignment_behavior() {
    let mut plain = held(None);
    plain.apply(secs(1), &blanket(&id(), Blanket::DenyAll, secs(1)));
    assert_eq!(admitted(&mut plain, secs(1), 2), 0);
    assert_eq!(admitted(&mut plain, secs(2), 2), 2, "without a fallback: no_assignment_behavior at once");
    let mut fallback = held(Some((Blanket::DenyAll, Duration::from_millis(2_500))));
    fallback.apply(secs(1), &blanket(&id(), Blanket::DenyAll, secs(1)));
    assert_eq!(admitted(&mut fallback, Duration::from_millis(3_999), 2), 0, "the fallback, 2 whole seconds");
    assert_eq!(admitted(&mut fallback, secs(4), 2), 2);
}

#[test]
fn an_abandon_forgets_the_bucket_and_its_unreported_usage() {
    let mut bucket = held(None);
    assert_eq!(bucket.take_creation_report(), Some(Usage { allowed: 1, denied: 0, elapsed: Duration::ZERO }));
    bucket.apply(secs(1), &tokens(2));
    assert_eq!(admitted(&mut bucket, secs(1), 3), 2);
    bucket.apply(secs(2), &abandon(&id()));
    assert!(!bucket.is_held());
    assert_eq!(bucket.report(secs(5)), None, "the 2 admitted and 1 refused are never reported");
    bucket.apply(secs(6), &tokens(2));
    assert!(!bucket.is_held(), "an assignment for a bucket Envoy does not hold is ignored");
    assert_eq!(admitted(&mut bucket, secs(7), 3), 3, "recreated, unassigned: ALLOW_ALL");
    assert_eq!(bucket.take_creation_report(), Some(Usage { allowed: 1, denied: 0, elapsed: Duration::ZERO }));
    assert_eq!(bucket.report(Duration::from_millis(9_900)), Some(Usage { allowed: 2, denied: 0, elapsed: secs(2) }));
}

#[test]
fn a_report_carries_the_counts_since_the_last_and_resets_them() {
    let mut bucket = EnvoyBucket::new(Blanket::DenyAll, None);
    assert!(!bucket.request(Duration::ZERO));
    assert_eq!(bucket.take_creation_report(), Some(Usage { allowed: 0, denied: 1, elapsed: Duration::ZERO }));
    assert_eq!(bucket.take_creation_report(), None);
    bucket.apply(secs(1), &tokens(1));
    assert_eq!(admitted(&mut bucket, secs(1), 3), 1);
    assert_eq!(bucket.report(Duration::from_millis(5_300)), Some(Usage { allowed: 1, denied: 2, elapsed: secs(5) }));
    assert_eq!(bucket.report(secs(10)), Some(Usage { allowed: 0, denied: 0, elapsed: secs(4) }));
}

#[test]
fn only_the_quota_servers_assignment_counts_as_assigned_not_a_fallback() {
    let mut bucket = EnvoyBucket::new(Blanket::AllowAll, Some((Blanket::DenyAll, secs(2))));
    assert!(!bucket.is_assigned(secs(0)), "not held yet");
    bucket.request(secs(0));
    assert!(!bucket.is_assigned(secs(0)), "held, decided by no_assignment_behavior");
    bucket.apply(secs(1), &token_bucket(&id(), 3, 1, HOUR, secs(1)));
    assert!(bucket.is_assigned(secs(1)));
    assert!(!bucket.is_assigned(secs(2)), "the time to live is over: expired_assignment_behavior");
    assert!(!bucket.is_assigned(secs(5)), "and then no_assignment_behavior");
}
