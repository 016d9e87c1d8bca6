//! Every worked example of docs/semantics.md, as table tests.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use sluice_core::{
    Alignment, FixedWindow, LeakMode, LeakyBucket, RetryAfter, SlidingLog, SlidingLogVariant, SlidingWindow,
    SlidingWindowSettings, SlidingWindowVariant, TokenBucket, TokenBucketSettings,
};
use std::time::Duration;
use support::{check_at, limiter, ms, us};

/// Rows of (time µs, cost, allowed, remaining, retry_after µs when rejected).
type Row = (u64, u64, bool, u64, Option<u64>);

fn run(policy: impl Into<sluice_core::Policy>, rows: &[Row]) {
    let (limiter, clock) = limiter(policy);
    for (index, &(at, cost, allowed, remaining, retry)) in rows.iter().enumerate() {
        let decision = check_at(&limiter, &clock, at, cost);
        let row = format!("row {index} at {at} µs: {decision:?}");
        assert_eq!(decision.allowed, allowed, "{row}");
        assert_eq!(decision.remaining, remaining, "{row}");
        assert_eq!(decision.retry_after, retry.map(|r| RetryAfter::After(us(r))), "{row}");
    }
}

const S: u64 = 1_000_000;
const MS: u64 = 1_000;

#[test]
fn sliding_log_two_per_second() {
    // Worked example from docs/semantics.md: N=2, W=1000 ms, accepted: 100, 400, 500, 1100 ms.
    let policy = SlidingLog::new(2, ms(1000), SlidingLogVariant::Accepted).unwrap();
    run(
        policy,
        &[
            (100 * MS, 1, true, 1, None),
            (400 * MS, 1, true, 0, None),
            (500 * MS, 1, false, 0, Some(600 * MS)),
            (1100 * MS, 1, true, 0, None),
        ],
    );
}

#[test]
fn sliding_log_two_per_minute_both_variants() {
    // Worked example from docs/semantics.md: N=2, W=60 s: 1:00:01, 1:00:30, 1:00:50, 1:01:40.
    let hour = 3600 * S;
    for variant in [SlidingLogVariant::Accepted, SlidingLogVariant::Attempts] {
        let (limiter, clock) = limiter(SlidingLog::new(2, Duration::from_secs(60), variant).unwrap());
        let allowed: Vec<bool> =
            [1, 30, 50, 100].iter().map(|second| check_at(&limiter, &clock, hour + second * S, 1).allowed).collect();
        assert_eq!(allowed, [true, true, false, true], "{variant:?}");
    }
}

#[test]
fn attempts_variant_keeps_a_hammering_client_blocked() {
    // docs/semantics.md: N=2, W=1000 ms, attempts: the 500 ms attempt is still in the window at 1100.
    let policy = SlidingLog::new(2, ms(1000), SlidingLogVariant::Attempts).unwrap();
    run(
        policy,
        &[
            (100 * MS, 1, true, 1, None),
            (400 * MS, 1, true, 0, None),
            (500 * MS, 1, false, 0, Some(900 * MS)),
            (1100 * MS, 1, false, 0, Some(400 * MS)),
            (1500 * MS, 1, true, 0, None),
        ],
    );
}

#[test]
fn sliding_log_counts_requests_in_the_same_microsecond() {
    let policy = SlidingLog::new(3, ms(10), SlidingLogVariant::Accepted).unwrap();
    run(
        policy,
        &[(7, 1, true, 2, None), (7, 1, true, 1, None), (7, 1, true, 0, None), (7, 1, false, 0, Some(10 * MS))],
    );
}

#[test]
fn costs_zero_and_beyond_the_limit() {
    let policy = SlidingLog::new(3, ms(10), SlidingLogVariant::Accepted).unwrap();
    let (limiter, clock) = limiter(policy);
    let peek = check_at(&limiter, &clock, 5, 0);
    assert!(peek.allowed && peek.remaining == 3 && peek.reset_after.is_zero());
    let too_big = check_at(&limiter, &clock, 5, 4);
    assert_eq!((too_big.allowed, too_big.retry_after), (false, Some(RetryAfter::Never)));
    let two = check_at(&limiter, &clock, 6, 2);
    assert!(two.allowed && two.remaining == 1);
    let peek = check_at(&limiter, &clock, 7, 0);
    assert_eq!((peek.allowed, peek.remaining, peek.reset_after), (true, 1, us(10 * MS - 1)));
}

#[test]
fn fixed_window_github_hourly() {
    // Worked example from docs/semantics.md: GitHub, 5000 per clock hour (here 3 per hour for brevity).
    let policy = FixedWindow::new(3, Duration::from_secs(3600), Alignment::Aligned, Duration::ZERO).unwrap();
    let hour = 3600 * S;
    run(
        policy,
        &[
            (10 * hour, 1, true, 2, None),
            (10 * hour + 10 * S, 2, true, 0, None),
            (11 * hour - S, 1, false, 0, Some(S)),
            (11 * hour, 1, true, 2, None),
        ],
    );
}

#[test]
fn fixed_window_offset_starts_days_at_local_midnight() {
    let day = 86_400 * S;
    let policy =
        FixedWindow::new(1, Duration::from_secs(86_400), Alignment::Aligned, Duration::from_secs(5 * 3600)).unwrap();
    let five_am = 100 * day + 5 * 3600 * S;
    run(policy, &[(five_am - S, 1, true, 0, None), (five_am - 1, 1, false, 0, Some(1)), (five_am, 1, true, 0, None)]);
}

#[test]
fn fixed_window_anchored_starts_at_the_first_request() {
    // docs/semantics.md: a window with a user-defined start, here 2 per minute from the first request.
    let policy = FixedWindow::new(2, Duration::from_secs(60), Alignment::Anchored, Duration::ZERO).unwrap();
    run(
        policy,
        &[
            (17 * S, 1, true, 1, None),
            (40 * S, 1, true, 0, None),
            (76 * S, 1, false, 0, Some(S)),
            (77 * S, 1, true, 1, None),
            (136 * S, 1, true, 0, None),
            (136 * S, 1, false, 0, Some(S)),
        ],
    );
}

#[test]
fn sliding_window_counter_weights_the_previous_window() {
    // Worked example from docs/semantics.md (Cloudflare): limit 10 per minute, B = 1.
    let policy = SlidingWindow::new(10, Duration::from_secs(60), 1).unwrap();
    let (limiter, clock) = limiter(policy);
    for _ in 0..8 {
        assert!(check_at(&limiter, &clock, 30 * S, 1).allowed);
    }
    // 15 s into the next minute: 8 × 45/60 = 6 from the previous minute, so 4 fit.
    let decision = check_at(&limiter, &clock, 75 * S, 4);
    assert_eq!((decision.allowed, decision.remaining), (true, 0));
    let rejected = check_at(&limiter, &clock, 75 * S, 1);
    assert!(!rejected.allowed);
    // 8·(60 − e) + 5·60 ≤ 600 once e ≥ 22.5 s: at 82.5 s.
    assert_eq!(rejected.retry_after, Some(RetryAfter::After(ms(7_500))));
}

#[test]
fn sliding_window_attempts_anchored_keeps_a_hammering_client_limited() {
    // Worked example from docs/semantics.md: limit 2 per 10 s, B = 1, attempts, anchored.
    let settings = SlidingWindowSettings {
        limit: 2,
        window: Duration::from_secs(10),
        buckets: 1,
        variant: SlidingWindowVariant::Attempts,
        alignment: Alignment::Anchored,
    };
    let policy = SlidingWindow::with_settings(settings).unwrap();
    run(
        policy.clone(),
        &[
            (3 * S, 1, true, 1, None),
            (4 * S, 1, true, 0, None),
            // Counted: c[0] = 3; fits once 3·(w − e) + 1·w ≤ 2·w, e = 6 666 667 µs into [13 s, 23 s).
            (5 * S, 1, false, 0, Some(13 * S + 6_666_667 - 5 * S)),
            (9 * S, 1, false, 0, Some(13 * S + 7_500_000 - 9 * S)),
            // 4 × 9/10 + 1 > 2: rejected and counted; nothing fits before bucket [23 s, 33 s).
            (14 * S, 1, false, 0, Some(9 * S)),
            // Every counted bucket left the window at 33 s: a new grid starts at 40 s.
            (40 * S, 1, true, 1, None),
        ],
    );
    // Under `accepted` the rejected attempts count nothing: at 14 s the estimate is 1.8,
    // and a request fits at 18 s.
    let accepted =
        SlidingWindow::with_settings(SlidingWindowSettings { variant: SlidingWindowVariant::Accepted, ..settings });
    run(
        accepted.unwrap(),
        &[
            (3 * S, 1, true, 1, None),
            (4 * S, 1, true, 0, None),
            (5 * S, 1, false, 0, Some(13 * S + 5 * S - 5 * S)),
            (14 * S, 1, false, 0, Some(4 * S)),
        ],
    );
}

#[test]
fn token_bucket_chat_demo() {
    // Worked example from docs/semantics.md: the chat demo, capacity 3 with one token every 4 s.
    let bucket = TokenBucketSettings { capacity: 3, refill_amount: 1, refill_interval: Duration::from_secs(4) };
    let policy = TokenBucket::new(bucket).unwrap();
    run(
        policy,
        &[
            (0, 1, true, 2, None),
            (0, 1, true, 1, None),
            (0, 1, true, 0, None),
            (S, 1, false, 0, Some(3 * S)),
            (4 * S, 1, true, 0, None),
            (5 * S, 1, false, 0, Some(3 * S)),
            (20 * S, 3, true, 0, None),
        ],
    );
}

#[test]
fn token_bucket_stripe_carries_the_refill_remainder() {
    // Worked example from docs/semantics.md: Stripe, 500 with one token every 10 ms; no drift across partial ticks.
    let bucket = TokenBucketSettings { capacity: 500, refill_amount: 1, refill_interval: ms(10) };
    let policy = TokenBucket::new(bucket).unwrap();
    let (limiter, clock) = limiter(policy);
    assert!(check_at(&limiter, &clock, 0, 500).allowed);
    assert_eq!(check_at(&limiter, &clock, 15 * MS, 1).remaining, 0);
    let decision = check_at(&limiter, &clock, 25 * MS, 1);
    assert!(decision.allowed, "the token of 20 ms arrived although the last check was at 15 ms");
    // Full again 500 ticks after the 20 ms refill: at 5020 ms.
    assert_eq!(decision.reset_after, ms(5020 - 25));
}

#[test]
fn leaky_bucket_meter_and_shaper() {
    // nginx `limit_req rate=1r/s burst=1 nodelay`.
    let meter = LeakyBucket::new(Duration::from_secs(1), 1, LeakMode::NoDelay).unwrap();
    run(meter, &[(0, 1, true, 1, None), (0, 1, true, 0, None), (0, 1, false, 0, Some(S)), (S, 1, true, 0, None)]);
    // Without `nodelay`: the second request waits for its turn.
    let shaper = LeakyBucket::new(Duration::from_secs(1), 1, LeakMode::Delay).unwrap();
    let (limiter, clock) = limiter(shaper);
    assert_eq!(check_at(&limiter, &clock, 0, 1).delay, Duration::ZERO);
    assert_eq!(check_at(&limiter, &clock, 0, 1).delay, Duration::from_secs(1));
    assert!(!check_at(&limiter, &clock, 0, 1).allowed);
}

#[test]
fn time_stepping_back_is_decided_at_the_state_time() {
    let policy = SlidingLog::new(1, ms(10), SlidingLogVariant::Accepted).unwrap();
    // The second request claims to be 5 ms earlier: it is decided at 20 ms, the newest entry.
    run(policy, &[(20 * MS, 1, true, 0, None), (15 * MS, 1, false, 0, Some(10 * MS))]);
}
