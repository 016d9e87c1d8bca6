//! Property tests: every algorithm against a brute-force oracle written from docs/semantics.md.
//!
//! Random small parameters (limits of a few requests, windows of a few µs, so that entries
//! expire, windows roll and buckets refill within a trace) and random traces with equal
//! timestamps, bursts, long gaps, peeks (cost 0), costs above the limit and clocks that step
//! back. Every field of every decision is compared, both from the pure
//! [`Algorithm::step`] (threading the state) and from [`MemoryStore::check_now`], alone and
//! with several policies checked together all or nothing.

#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

#[path = "oracle/mod.rs"]
mod oracle;

use oracle::Oracle;
use oracle::fixed_window::FixedWindowOracle;
use oracle::leaky_bucket::LeakyBucketOracle;
use oracle::sliding_log::SlidingLogOracle;
use oracle::sliding_window::SlidingWindowOracle;
use oracle::token_bucket::TokenBucketOracle;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use sluice_core::{
    Algorithm, Alignment, Decision, FixedWindow, Key, LeakMode, LeakyBucket, Limit, ManualClock, MemoryStore, Policy,
    RetryAfter, SlidingLog, SlidingLogVariant, SlidingWindow, SlidingWindowSettings, Timestamp, TokenBucket,
    TokenBucketSettings,
};
use std::time::Duration;

/// Cases per property by default: the whole file runs in a few seconds in debug mode.
const CASES: u32 = 768;

/// `PROPTEST_CASES` if set (for a longer hunt), else [`CASES`].
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|cases| cases.parse().ok()).unwrap_or(CASES)
}

/// Longest trace.
const TRACE_LEN: usize = 48;

/// A policy's parameters, from which both the implementation and the oracle are built.
#[derive(Clone, Debug)]
enum Spec {
    SlidingLog { limit: u64, window: u64, attempts: bool },
    FixedWindow { limit: u64, window: u64, anchored: bool, offset: u64 },
    SlidingWindow { limit: u64, width: u64, buckets: u64, attempts: bool, anchored: bool },
    TokenBucket { capacity: u64, amount: u64, interval: u64 },
    LeakyBucket { interval: u64, burst: u64, delay: bool },
}

fn us(micros: u64) -> Duration {
    Duration::from_micros(micros)
}

impl Spec {
    fn sliding_log(&self) -> Option<SlidingLog> {
        let Spec::SlidingLog { limit, window, attempts } = *self else {
            return None;
        };
        let variant = if attempts { SlidingLogVariant::Attempts } else { SlidingLogVariant::Accepted };
        Some(SlidingLog::new(limit, us(window), variant).unwrap())
    }

    fn fixed_window(&self) -> Option<FixedWindow> {
        let Spec::FixedWindow { limit, window, anchored, offset } = *self else {
            return None;
        };
        let alignment = if anchored { Alignment::Anchored } else { Alignment::Aligned };
        Some(FixedWindow::new(limit, us(window), alignment, us(offset)).unwrap())
    }

    fn sliding_window(&self) -> Option<SlidingWindow> {
        let Spec::SlidingWindow { limit, width, buckets, attempts, anchored } = *self else {
            return None;
        };
        let variant = if attempts { SlidingLogVariant::Attempts } else { SlidingLogVariant::Accepted };
        let alignment = if anchored { Alignment::Anchored } else { Alignment::Aligned };
        let settings = SlidingWindowSettings { limit, window: us(width * buckets), buckets, variant, alignment };
        Some(SlidingWindow::with_settings(settings).unwrap())
    }

    fn token_bucket(&self) -> Option<TokenBucket> {
        let Spec::TokenBucket { capacity, amount, interval } = *self else {
            return None;
        };
        Some(
            TokenBucket::new(TokenBucketSettings { capacity, refill_amount: amount, refill_interval: us(interval) })
                .unwrap(),
        )
    }

    fn leaky_bucket(&self) -> Option<LeakyBucket> {
        let Spec::LeakyBucket { interval, burst, delay } = *self else {
            return None;
        };
        let mode = if delay { LeakMode::Delay } else { LeakMode::NoDelay };
        Some(LeakyBucket::new(us(interval), burst, mode).unwrap())
    }

    fn policy(&self) -> Policy {
        match self {
            Spec::SlidingLog { .. } => self.sliding_log().unwrap().into(),
            Spec::FixedWindow { .. } => self.fixed_window().unwrap().into(),
            Spec::SlidingWindow { .. } => self.sliding_window().unwrap().into(),
            Spec::TokenBucket { .. } => self.token_bucket().unwrap().into(),
            Spec::LeakyBucket { .. } => self.leaky_bucket().unwrap().into(),
        }
    }

    fn oracle(&self) -> Box<dyn Oracle> {
        match *self {
            Spec::SlidingLog { limit, window, attempts } => Box::new(SlidingLogOracle::new(limit, window, attempts)),
            Spec::FixedWindow { limit, window, anchored, offset } => {
                Box::new(FixedWindowOracle::new(limit, window, anchored, offset))
            }
            Spec::SlidingWindow { limit, width, buckets, attempts, anchored } => {
                Box::new(SlidingWindowOracle::new(limit, width, buckets, attempts, anchored))
            }
            Spec::TokenBucket { capacity, amount, interval } => {
                Box::new(TokenBucketOracle::new(capacity, amount, interval))
            }
            Spec::LeakyBucket { interval, burst, delay } => Box::new(LeakyBucketOracle::new(interval, burst, delay)),
        }
    }

    /// The decision's `limit`, also the largest cost ever allowed.
    fn limit(&self) -> u64 {
        match *self {
            Spec::SlidingLog { limit, .. } | Spec::FixedWindow { limit, .. } | Spec::SlidingWindow { limit, .. } => {
                limit
            }
            Spec::TokenBucket { capacity, .. } => capacity,
            Spec::LeakyBucket { burst, .. } => burst + 1,
        }
    }

    /// The time over which the policy's state goes from exhausted back to fresh, roughly.
    fn scale(&self) -> u64 {
        match *self {
            Spec::SlidingLog { window, .. } | Spec::FixedWindow { window, .. } => window,
            Spec::SlidingWindow { width, buckets, .. } => width * (buckets + 1),
            Spec::TokenBucket { capacity, amount, interval } => interval * capacity.div_ceil(amount),
            Spec::LeakyBucket { interval, burst, .. } => interval * (burst + 1),
        }
    }

    /// Runs `trace` through the pure algorithm, threading its state, against the oracle.
    fn check_steps(&self, trace: &[(u64, u64)]) -> Result<(), TestCaseError> {
        let mut oracle = self.oracle();
        match self {
            Spec::SlidingLog { .. } => check_steps(&self.sliding_log().unwrap(), oracle.as_mut(), trace),
            Spec::FixedWindow { .. } => check_steps(&self.fixed_window().unwrap(), oracle.as_mut(), trace),
            Spec::SlidingWindow { .. } => check_steps(&self.sliding_window().unwrap(), oracle.as_mut(), trace),
            Spec::TokenBucket { .. } => check_steps(&self.token_bucket().unwrap(), oracle.as_mut(), trace),
            Spec::LeakyBucket { .. } => check_steps(&self.leaky_bucket().unwrap(), oracle.as_mut(), trace),
        }
    }
}

fn check_steps<A: Algorithm>(
    algorithm: &A,
    oracle: &mut dyn Oracle,
    trace: &[(u64, u64)],
) -> Result<(), TestCaseError> {
    let mut state = A::State::default();
    for (index, &(now, cost)) in trace.iter().enumerate() {
        let expected = oracle.step(now, cost);
        let (got, next) = algorithm.step(&state, Timestamp::from_micros(now), cost);
        prop_assert_eq!(
            got,
            expected,
            "Algorithm::step, request #{} (now {}, cost {}) of trace {:?}",
            index,
            now,
            cost,
            trace
        );
        state = next;
    }
    Ok(())
}

/// A store that never drops a state on its own (its clock stands at the epoch).
fn store() -> MemoryStore {
    MemoryStore::builder().clock(ManualClock::default()).build()
}

/// How restrictive a decision is, for the oracle of a combined check: rejections first, then
/// the longer `retry_after` ("never" longest), then the fewer `remaining`.
fn restrictiveness(decision: &Decision) -> (bool, u8, Duration, std::cmp::Reverse<u64>) {
    let (rank, wait) = match decision.retry_after {
        None => (0, Duration::ZERO),
        Some(RetryAfter::After(wait)) => (1, wait),
        Some(RetryAfter::Never) => (2, Duration::ZERO),
    };
    (!decision.allowed, rank, wait, std::cmp::Reverse(decision.remaining))
}

/// Runs `trace` through `MemoryStore::check_now` with every spec checked together on one
/// key, against the oracles checked all or nothing.
fn check_store(specs: &[Spec], trace: &[(u64, u64)]) -> Result<(), TestCaseError> {
    let store = store();
    let key = Key::new(b"key").unwrap();
    let limits: Vec<Limit> =
        specs.iter().enumerate().map(|(i, spec)| Limit::new(format!("policy-{i}"), spec.policy())).collect();
    let mut oracles: Vec<Box<dyn Oracle>> = specs.iter().map(Spec::oracle).collect();
    for (index, &(now, cost)) in trace.iter().enumerate() {
        let decisions: Vec<Decision> = oracles.iter().map(|o| o.decide(now, cost)).collect();
        let admitted = decisions.iter().all(|d| d.allowed);
        for oracle in &mut oracles {
            oracle.commit(now, cost, admitted);
        }
        // The first of the most restrictive decisions.
        let mut chosen = 0;
        for (i, decision) in decisions.iter().enumerate() {
            if restrictiveness(decision) > restrictiveness(&decisions[chosen]) {
                chosen = i;
            }
        }
        // Reported as it is, its own delay included (docs/semantics.md).
        let expected = decisions[chosen];
        let verdict = store.check_now(key, &limits, Timestamp::from_micros(now), cost).unwrap();
        prop_assert_eq!(
            (verdict.decision, verdict.limit),
            (expected, chosen),
            "MemoryStore::check_now, request #{} (now {}, cost {}) of trace {:?}; every policy's oracle: {:?}",
            index,
            now,
            cost,
            trace,
            decisions
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Generators

/// Limits: mostly tiny so that they are hit all the time, sometimes larger.
fn limit() -> impl Strategy<Value = u64> {
    prop_oneof![6 => 1..=6u64, 1 => 7..=40u64]
}

fn sliding_log() -> impl Strategy<Value = Spec> {
    (limit(), 1..=50u64, any::<bool>()).prop_map(|(limit, window, attempts)| Spec::SlidingLog {
        limit,
        window,
        attempts,
    })
}

/// Windows around 2^32 µs (about 71 minutes) and a day: a log spanning less than 2^32 µs
/// keeps 4-byte slots, a longer one whole timestamps, and traces cross between the two.
fn long_sliding_log() -> impl Strategy<Value = Spec> {
    let window = prop_oneof![
        3 => (1u64 << 32) - 3..=(1u64 << 32) + 3,
        2 => (1u64 << 31)..=(1u64 << 33),
        1 => Just(86_400_000_000u64),
    ];
    (limit(), window, any::<bool>()).prop_map(|(limit, window, attempts)| Spec::SlidingLog { limit, window, attempts })
}

/// Start times just before a multiple of 2^32 µs, where the low 32 bits of a timestamp wrap.
fn wrapping_base() -> impl Strategy<Value = u64> {
    (1..400_000u64, 0..64u64).prop_map(|(multiple, before)| (multiple << 32) - before)
}

fn fixed_window() -> impl Strategy<Value = Spec> {
    (limit(), 1..=50u64, any::<bool>()).prop_flat_map(|(limit, window, anchored)| {
        let offsets = if anchored { 0..1 } else { 0..window };
        offsets.prop_map(move |offset| Spec::FixedWindow { limit, window, anchored, offset })
    })
}

fn sliding_window() -> impl Strategy<Value = Spec> {
    (limit(), 1..=20u64, prop_oneof![3 => Just(1u64), 2 => 2..=5u64], any::<bool>(), any::<bool>()).prop_map(
        |(limit, width, buckets, attempts, anchored)| Spec::SlidingWindow { limit, width, buckets, attempts, anchored },
    )
}

fn token_bucket() -> impl Strategy<Value = Spec> {
    (limit(), prop_oneof![3 => Just(1u64), 2 => 2..=4u64, 1 => 5..=50u64], 1..=30u64)
        .prop_map(|(capacity, amount, interval)| Spec::TokenBucket { capacity, amount, interval })
}

fn leaky_bucket() -> impl Strategy<Value = Spec> {
    (1..=30u64, prop_oneof![6 => 0..=5u64, 1 => 6..=30u64], any::<bool>())
        .prop_map(|(interval, burst, delay)| Spec::LeakyBucket { interval, burst, delay })
}

fn any_spec() -> impl Strategy<Value = Spec> {
    prop_oneof![sliding_log(), fixed_window(), sliding_window(), token_bucket(), leaky_bucket()]
}

/// Start times: near the epoch (aligned windows before their offset), or a realistic time.
fn base() -> impl Strategy<Value = u64> {
    prop_oneof![0..100u64, 1_700_000_000_000_000..1_700_000_000_100_000u64]
}

/// Time steps relative to the policy's time `scale`: equal timestamps, small steps, gaps
/// long enough to expire everything, and (when `backwards`) clocks stepping back.
fn delta(scale: u64, backwards: bool) -> impl Strategy<Value = i64> {
    let s = i64::try_from(scale.max(1)).unwrap();
    let back = if backwards { 1 } else { 0 };
    prop_oneof![
        4 => Just(0i64),
        6 => 0..=(s / 4).max(1),
        4 => 0..=s,
        2 => s..=4 * s,
        back => -2 * s..=-1,
    ]
}

/// Costs: peeks, single requests, bulk requests and costs above the limit.
fn cost(limit: u64) -> impl Strategy<Value = u64> {
    prop_oneof![2 => Just(0u64), 8 => Just(1u64), 3 => 1..=limit, 1 => limit + 1..=limit + 3]
}

/// `(now, cost)` requests.
fn trace(scale: u64, limit: u64, backwards: bool) -> impl Strategy<Value = Vec<(u64, u64)>> {
    trace_from(base(), scale, limit, backwards)
}

/// `(now, cost)` requests from a start time drawn from `base`.
fn trace_from(
    base: impl Strategy<Value = u64>,
    scale: u64,
    limit: u64,
    backwards: bool,
) -> impl Strategy<Value = Vec<(u64, u64)>> {
    (base, prop::collection::vec((delta(scale, backwards), cost(limit)), 1..=TRACE_LEN)).prop_map(|(base, steps)| {
        let mut now = i128::from(base);
        steps
            .into_iter()
            .map(|(delta, cost)| {
                now = (now + i128::from(delta)).max(0);
                (u64::try_from(now).unwrap(), cost)
            })
            .collect()
    })
}

/// A spec and a trace for it.
fn case(spec: impl Strategy<Value = Spec>) -> impl Strategy<Value = (Spec, Vec<(u64, u64)>)> {
    spec.prop_flat_map(|spec| {
        let trace = trace(spec.scale(), spec.limit(), true);
        (Just(spec), trace)
    })
}

fn check_one(spec: &Spec, trace: &[(u64, u64)]) -> Result<(), TestCaseError> {
    spec.check_steps(trace)?;
    check_store(std::slice::from_ref(spec), trace)
}

// ---------------------------------------------------------------------------------------
// Properties

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn sliding_log_matches_oracle((spec, trace) in case(sliding_log())) {
        check_one(&spec, &trace)?;
    }

    #[test]
    fn long_sliding_log_matches_oracle(
        (spec, trace) in long_sliding_log().prop_flat_map(|spec| {
            let trace = trace_from(prop_oneof![base(), wrapping_base()], spec.scale(), spec.limit(), true);
            (Just(spec), trace)
        })
    ) {
        check_one(&spec, &trace)?;
    }

    #[test]
    fn fixed_window_matches_oracle((spec, trace) in case(fixed_window())) {
        check_one(&spec, &trace)?;
    }

    #[test]
    fn sliding_window_matches_oracle((spec, trace) in case(sliding_window())) {
        check_one(&spec, &trace)?;
    }

    #[test]
    fn token_bucket_matches_oracle((spec, trace) in case(token_bucket())) {
        check_one(&spec, &trace)?;
    }

    #[test]
    fn leaky_bucket_matches_oracle((spec, trace) in case(leaky_bucket())) {
        check_one(&spec, &trace)?;
    }

    /// Two or three policies on one key: all or nothing, the most restrictive reported.
    #[test]
    fn policies_checked_together_match_oracles(
        (specs, trace) in prop::collection::vec(any_spec(), 2..=3).prop_flat_map(|specs| {
            let scale = specs.iter().map(Spec::scale).max().unwrap_or(1);
            let limit = specs.iter().map(Spec::limit).max().unwrap_or(1);
            (Just(specs), trace(scale, limit, true))
        })
    ) {
        check_store(&specs, &trace)?;
    }

    /// The sliding log is exact: no half-open window `(t − W, t]` holds more than `N`
    /// admitted cost, checked at every admitted time, for both variants; and its log never
    /// holds more than `N` entries.
    #[test]
    fn sliding_log_never_admits_more_than_limit_per_window(
        (spec, trace) in sliding_log().prop_flat_map(|spec| {
            let trace = trace(spec.scale(), spec.limit(), false);
            (Just(spec), trace)
        })
    ) {
        let Spec::SlidingLog { limit, window, .. } = spec else { unreachable!() };
        let log = spec.sliding_log().unwrap();
        let mut state = Default::default();
        let mut admitted: Vec<(u64, u64)> = Vec::new();
        for &(now, cost) in &trace {
            let (decision, next) = log.step(&state, Timestamp::from_micros(now), cost);
            state = next;
            let held: &sluice_core::algorithm::sliding_log::SlidingLogState = &state;
            prop_assert!(held.len() as u64 <= limit, "{} entries held, limit {}: {:?}", held.len(), limit, trace);
            if decision.allowed && cost > 0 {
                admitted.push((now, cost));
                let in_window: u64 =
                    admitted.iter().filter(|(t, _)| t + window > now).map(|(_, c)| c).sum();
                prop_assert!(
                    in_window <= limit,
                    "{} admitted in ({} − {}, {}] of trace {:?}", in_window, now, window, now, trace
                );
            }
        }
    }

    /// A GCRA meter (interval I, burst b) admits exactly what a token bucket of b + 1
    /// tokens refilled one per I admits, for traces whose time never goes back; in fact the
    /// whole decision agrees (`tat` is the time the bucket would be full again). Not when the
    /// clock steps back: the token bucket then decides at its last refill, GCRA at `now`.
    #[test]
    fn nodelay_leaky_bucket_is_a_token_bucket(
        (spec, trace) in leaky_bucket().prop_flat_map(|spec| {
            let trace = trace(spec.scale(), spec.limit(), false);
            (Just(spec), trace)
        })
    ) {
        let Spec::LeakyBucket { interval, burst, .. } = spec else { unreachable!() };
        let gcra = LeakyBucket::new(us(interval), burst, LeakMode::NoDelay).unwrap();
        let bucket = TokenBucketSettings { capacity: burst + 1, refill_amount: 1, refill_interval: us(interval) };
        let bucket = TokenBucket::new(bucket).unwrap();
        let (mut tat, mut tokens) = Default::default();
        for (index, &(now, cost)) in trace.iter().enumerate() {
            let now = Timestamp::from_micros(now);
            let (by_gcra, next_tat) = gcra.step(&tat, now, cost);
            let (by_bucket, next_tokens) = bucket.step(&tokens, now, cost);
            prop_assert_eq!(by_gcra, by_bucket, "request #{} of {:?}", index, trace);
            (tat, tokens) = (next_tat, next_tokens);
        }
    }
}

/// The oracles themselves reproduce docs/semantics.md's worked examples for the sliding log.
#[test]
fn sliding_log_oracle_reproduces_spec_examples() {
    let ms = 1_000;
    let run = |limit: u64, window: u64, attempts: bool, times: &[u64]| -> Vec<Decision> {
        let mut oracle = SlidingLogOracle::new(limit, window, attempts);
        times.iter().map(|&t| oracle.step(t, 1)).collect()
    };
    let two_per_second = run(2, 1000 * ms, false, &[100 * ms, 400 * ms, 500 * ms, 1100 * ms]);
    let allowed: Vec<bool> = two_per_second.iter().map(|d| d.allowed).collect();
    assert_eq!(allowed, [true, true, false, true]);
    assert_eq!(two_per_second[2].retry_after, Some(RetryAfter::After(Duration::from_millis(600))));
    let attempts = run(2, 1000 * ms, true, &[100 * ms, 400 * ms, 500 * ms, 1100 * ms]);
    let allowed: Vec<bool> = attempts.iter().map(|d| d.allowed).collect();
    assert_eq!(allowed, [true, true, false, false]);
    let s = 1_000_000;
    let times = [3601 * s, 3630 * s, 3650 * s, 3700 * s];
    for attempts in [false, true] {
        let allowed: Vec<bool> = run(2, 60 * s, attempts, &times).iter().map(|d| d.allowed).collect();
        assert_eq!(allowed, [true, true, false, true], "two per minute, attempts = {attempts}");
    }
}

/// Runs `trace` through the pure algorithm and through the oracle, and returns both lists of
/// decisions (for the pinned cases below, which show a discrepancy in one glance).
fn both(spec: &Spec, trace: &[(u64, u64)]) -> (Vec<Decision>, Vec<Decision>) {
    let mut oracle = spec.oracle();
    let expected = trace.iter().map(|&(now, cost)| oracle.step(now, cost)).collect();
    let got = match spec {
        Spec::SlidingLog { .. } => steps(&spec.sliding_log().unwrap(), trace),
        Spec::FixedWindow { .. } => steps(&spec.fixed_window().unwrap(), trace),
        Spec::SlidingWindow { .. } => steps(&spec.sliding_window().unwrap(), trace),
        Spec::TokenBucket { .. } => steps(&spec.token_bucket().unwrap(), trace),
        Spec::LeakyBucket { .. } => steps(&spec.leaky_bucket().unwrap(), trace),
    };
    (got, expected)
}

fn steps<A: Algorithm>(algorithm: &A, trace: &[(u64, u64)]) -> Vec<Decision> {
    let mut state = A::State::default();
    trace
        .iter()
        .map(|&(now, cost)| {
            let (decision, next) = algorithm.step(&state, Timestamp::from_micros(now), cost);
            state = next;
            decision
        })
        .collect()
}

/// Pinned: a peek logs nothing, even under `attempts`, so its `retry_after` is when a cost-1
/// request would pass if no other request came: N = 1, W = 2, the attempt at 0 leaves the
/// window at 2, so a peek at 1 says 1 µs (not 2, which would count the peek as an attempt).
#[test]
fn attempts_peek_reports_when_a_cost_one_request_would_pass() {
    let spec = Spec::SlidingLog { limit: 1, window: 2, attempts: true };
    let (got, expected) = both(&spec, &[(0, 1), (1, 0)]);
    assert_eq!(expected[1].retry_after, Some(RetryAfter::After(us(1))));
    assert_eq!(got, expected);
}

/// Pinned: an aligned window with an offset, before the first offset: the window index is
/// `floor((now − offset) / W) = −1`, so the window is `[offset − W, offset)` and ends at
/// `offset`; a request at `offset` is in the next window and is allowed (the implementation
/// allows it too).
#[test]
fn aligned_window_before_the_first_offset_ends_at_the_offset() {
    let spec = Spec::FixedWindow { limit: 1, window: 35, anchored: false, offset: 1 };
    let (got, expected) = both(&spec, &[(0, 0), (0, 1), (0, 1), (1, 1)]);
    assert_eq!(expected[0].reset_after, us(1));
    assert_eq!(expected[2].retry_after, Some(RetryAfter::After(us(1))));
    assert!(got[3].allowed && expected[3].allowed);
    assert_eq!(got, expected);
}
