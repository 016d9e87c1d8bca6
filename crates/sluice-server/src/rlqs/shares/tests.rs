//! The shares of one bucket, step by step: grants, refusals, renewals and the close of a
//! window, at chosen times.

use super::*;

const MINUTE_US: u64 = 60_000_000;

fn at(seconds: f64) -> Timestamp {
    // A minute's start, well after the epoch, plus `seconds`.
    Timestamp::from_micros(29_000_000 * MINUTE_US + (seconds * 1e6) as u64)
}

fn shares() -> BucketShares {
    let windows = Windows::new(Duration::from_secs(60)).unwrap();
    BucketShares::new(windows, Timing { report_interval: Duration::from_secs(5) })
}

fn one_request() -> Usage {
    Usage { allowed: 1, ..Usage::default() }
}

fn share(assignment: Assignment) -> (u64, Duration) {
    match assignment {
        Assignment::Share { tokens, ttl, .. } => (tokens, ttl),
        Assignment::Refusal { .. } => panic!("a refusal, not a share"),
    }
}

#[test]
fn the_first_envoy_gets_half_of_what_is_left_and_the_next_is_served_from_the_rest() {
    let mut shares = shares();
    assert_eq!(shares.report(1, at(1.0), one_request()), 1, "let through before any share: unpaid");
    assert_eq!(shares.plan(at(1.0), 4), vec![(1, 2)]);
    let assignment = shares.grant(1, 2, at(1.0)).unwrap();
    assert_eq!(share(assignment), (2, Duration::from_secs(58)), "until the window ends, less the margin");
    let Assignment::Share { fill_interval, .. } = assignment else { unreachable!() };
    assert_eq!(fill_interval, Duration::from_secs(121));
    shares.report(2, at(1.5), one_request());
    assert_eq!(shares.plan(at(1.5), 1), vec![(2, 1)], "one token left: a share of one");
    assert_eq!(shares.plan(at(1.5), 0), vec![]);
}

#[test]
fn a_holder_the_limit_cannot_serve_is_refused_in_the_same_round_and_not_again() {
    let mut shares = shares();
    shares.report(1, at(1.0), one_request());
    assert_eq!(shares.refuse_unserved(at(1.0)), vec![(1, Assignment::Refusal { ttl: Duration::from_secs(30) })]);
    assert_eq!(shares.refuse_unserved(at(2.0)), vec![], "refused already");
    assert!(shares.wants_round(at(2.0)), "it still wants tokens, should the limit have some");
    shares.report(1, at(6.0), Usage { denied: 3, elapsed: Duration::from_secs(5), ..Usage::default() });
    assert_eq!(shares.refuse_unserved(at(6.0)), vec![], "25 s of the refusal left");
    shares.report(1, at(26.0), Usage { denied: 3, elapsed: Duration::from_secs(5), ..Usage::default() });
    let renewed = vec![(1, Assignment::Refusal { ttl: Duration::from_secs(30) })];
    assert_eq!(shares.refuse_unserved(at(26.0)), renewed, "5 s left: renewed");
}

#[test]
fn usage_a_grant_paid_for_is_not_unpaid() {
    let mut shares = shares();
    shares.report(1, at(1.0), one_request());
    shares.grant(1, 3, at(1.0)).unwrap();
    let usage = Usage { allowed: 4, denied: 2, elapsed: Duration::from_secs(5) };
    assert_eq!(shares.report(1, at(6.0), usage), 1, "3 paid by the grant, 1 not");
    assert_eq!(shares.plan(at(6.0), 10), vec![(1, 5)], "refused, it asks for more: alone, half of what is left");
}

#[test]
fn refusals_reported_from_before_a_grant_do_not_make_it_spent() {
    let mut shares = shares();
    shares.report(1, at(1.0), one_request());
    shares.report(1, at(6.0), Usage { denied: 4, elapsed: Duration::from_secs(5), ..Usage::default() });
    shares.grant(1, 5, at(6.5)).unwrap();
    shares.report(1, at(11.0), Usage { allowed: 2, denied: 3, elapsed: Duration::from_secs(5) });
    assert_eq!(shares.plan(at(11.0), 10), vec![], "the report began before the grant: its refusals may be older");
    shares.report(1, at(16.0), Usage { allowed: 3, denied: 1, elapsed: Duration::from_secs(5) });
    assert_eq!(shares.plan(at(16.0), 10), vec![(1, 5)], "refused since the grant: spent");
}

#[test]
fn a_share_lives_until_its_window_ends_unrenewed_then_a_refusal_closes_it() {
    let mut shares = shares();
    shares.report(1, at(10.5), one_request());
    let assignment = shares.grant(1, 2, at(10.5)).unwrap();
    assert_eq!(share(assignment), (2, Duration::from_secs(49)), "ends at 59.5 s: 250 ms before the window");
    assert_eq!(shares.next_due(at(10.5), at(99.0)), at(25.5 + 1e-6), "nothing due before the holder would go stale");
    for second in [15.5, 20.5, 25.5, 30.5, 35.5, 40.5, 45.5, 50.5, 55.5] {
        shares.report(1, at(second), one_request());
        assert_eq!(shares.renew_one(1, at(second)), None, "no renewal at {second} s");
        assert_eq!(shares.renew(at(second)), vec![], "nothing due at {second} s");
    }
    assert_eq!(shares.next_due(at(55.5), at(99.0)), at(58.5), "closed a second before it ends");
    let refusal = Assignment::Refusal { ttl: Duration::from_secs(30) };
    assert_eq!(shares.renew(at(58.5)), vec![(1, refusal)]);
}

#[test]
fn a_holder_whose_first_report_counts_no_request_is_refused_at_once() {
    let mut shares = shares();
    shares.report(1, at(1.0), Usage { elapsed: Duration::from_secs(5), ..Usage::default() });
    assert_eq!(shares.plan(at(1.0), 5), vec![], "idle: no tokens");
    let refusal = Assignment::Refusal { ttl: Duration::from_secs(30) };
    assert_eq!(shares.renew_one(1, at(1.0)), Some(refusal));
    assert_eq!(shares.renew_one(1, at(2.0)), None, "refused already");
}

#[test]
fn an_idle_envoy_is_refused_when_the_window_turns_and_a_silent_one_is_dropped() {
    let mut shares = shares();
    for stream in [1, 2] {
        shares.report(stream, at(1.0), one_request());
        shares.grant(stream, 2, at(1.0)).unwrap();
    }
    shares.report(1, at(56.0), Usage { elapsed: Duration::from_secs(5), ..Usage::default() });
    shares.report(2, at(56.0), Usage { allowed: 2, elapsed: Duration::from_secs(5), ..Usage::default() });
    assert_eq!(shares.plan(at(60.2), 5), vec![(2, 1)], "a new window: only the one that sent requests");
    let refusal = Assignment::Refusal { ttl: Duration::from_secs(30) };
    assert_eq!(shares.renew(at(60.2)), vec![(1, refusal)], "the idle one is refused, not left to its fallback");
    assert!(shares.drop_stale(at(70.0)).is_empty(), "reported 14 s ago: not stale");
    assert_eq!(shares.drop_stale(at(71.5)), vec![1, 2]);
}
