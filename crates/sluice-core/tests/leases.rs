//! Quota leases never over-admit: N processes, each its own [`LeasedStore`], share one
//! store on one clock; random traffic, costs and policies (one or two at once); the
//! brute-force oracles of docs/semantics.md replay the merged stream of admitted requests
//! and must admit every one of them (docs/leases.md has the argument).

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
use sluice_core::lease::{LeasedStore, Unspent, check_leasable};
use sluice_core::{
    Alignment, Check, Clock, FixedWindow, Key, LeakMode, LeakyBucket, Limit, ManualClock, MemoryStore, Policy,
    SlidingLog, SlidingLogVariant, SlidingWindow, SlidingWindowSettings, Source, Store, Timestamp, TokenBucket,
    TokenBucketSettings,
};
use std::sync::Arc;
use std::time::Duration;

/// A leasable policy's parameters (µs), from which both the policy and its oracle are built.
#[derive(Clone, Copy, Debug)]
enum Spec {
    FixedWindow { limit: u64, window: u64, anchored: bool },
    SlidingWindow { limit: u64, width: u64, buckets: u64, anchored: bool },
    SlidingLog { limit: u64, window: u64 },
    TokenBucket { capacity: u64, amount: u64, interval: u64 },
    LeakyBucket { interval: u64, burst: u64, delay: bool },
}

impl Spec {
    fn policy(self) -> Policy {
        let alignment = |anchored| if anchored { Alignment::Anchored } else { Alignment::Aligned };
        match self {
            Spec::FixedWindow { limit, window, anchored } => {
                FixedWindow::new(limit, us(window), alignment(anchored), Duration::ZERO).unwrap().into()
            }
            Spec::SlidingWindow { limit, width, buckets, anchored } => {
                let variant = SlidingLogVariant::Accepted;
                let window = us(width * buckets);
                let settings =
                    SlidingWindowSettings { limit, window, buckets, variant, alignment: alignment(anchored) };
                SlidingWindow::with_settings(settings).unwrap().into()
            }
            Spec::SlidingLog { limit, window } => {
                SlidingLog::new(limit, us(window), SlidingLogVariant::Accepted).unwrap().into()
            }
            Spec::TokenBucket { capacity, amount, interval } => {
                let settings = TokenBucketSettings { capacity, refill_amount: amount, refill_interval: us(interval) };
                TokenBucket::new(settings).unwrap().into()
            }
            Spec::LeakyBucket { interval, burst, delay } => {
                let mode = if delay { LeakMode::Delay } else { LeakMode::NoDelay };
                LeakyBucket::new(us(interval), burst, mode).unwrap().into()
            }
        }
    }

    fn oracle(self) -> Box<dyn Oracle> {
        match self {
            Spec::FixedWindow { limit, window, anchored } => {
                Box::new(FixedWindowOracle::new(limit, window, anchored, 0))
            }
            Spec::SlidingWindow { limit, width, buckets, anchored } => {
                Box::new(SlidingWindowOracle::new(limit, width, buckets, false, anchored))
            }
            Spec::SlidingLog { limit, window } => Box::new(SlidingLogOracle::new(limit, window, false)),
            Spec::TokenBucket { capacity, amount, interval } => {
                Box::new(TokenBucketOracle::new(capacity, amount, interval))
            }
            Spec::LeakyBucket { interval, burst, delay } => Box::new(LeakyBucketOracle::new(interval, burst, delay)),
        }
    }
}

fn us(micros: u64) -> Duration {
    Duration::from_micros(micros)
}

fn spec() -> impl Strategy<Value = Spec> {
    prop_oneof![
        (1..60u64, 20..400u64, any::<bool>()).prop_map(|(limit, window, anchored)| Spec::FixedWindow {
            limit,
            window,
            anchored
        }),
        (1..60u64, 10..200u64, 1..4u64, any::<bool>())
            .prop_map(|(limit, width, buckets, anchored)| Spec::SlidingWindow { limit, width, buckets, anchored }),
        (1..60u64, 20..400u64).prop_map(|(limit, window)| Spec::SlidingLog { limit, window }),
        (1..30u64, 1..6u64, 1..40u64).prop_map(|(capacity, amount, interval)| Spec::TokenBucket {
            capacity,
            amount,
            interval
        }),
        (1..20u64, 0..20u64, any::<bool>()).prop_map(|(interval, burst, delay)| Spec::LeakyBucket {
            interval,
            burst,
            delay
        }),
    ]
}

/// One request: which process gets it, for which key, its cost, and the µs since the last;
/// and what that process does then.
#[derive(Clone, Copy, Debug)]
struct Request {
    process: usize,
    key: usize,
    cost: u64,
    gap: u64,
    then: Then,
}

/// What a process does after a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Then {
    Nothing,
    /// Gives back its unspent units.
    GiveBack(Unspent),
    /// Stops without giving anything back; a new process takes its place.
    Crash,
}

fn request(processes: usize) -> impl Strategy<Value = Request> {
    let give_back = prop_oneof![
        36 => Just(Then::Nothing),
        2 => Just(Then::GiveBack(Unspent::All)),
        2 => Just(Then::GiveBack(Unspent::OfQuietKeys)),
        1 => Just(Then::Crash),
    ];
    let cost = prop_oneof![6 => Just(1u64), 1 => 2..4u64];
    let gap = prop_oneof![3 => Just(0u64), 6 => 0..8u64, 1 => 0..200u64];
    (0..processes, 0..2usize, cost, gap, give_back).prop_map(|(process, key, cost, gap, then)| Request {
        process,
        key,
        cost,
        gap,
        then,
    })
}

/// Cases: `PROPTEST_CASES` if set, else enough for the file to run in seconds.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|cases| cases.parse().ok()).unwrap_or(256)
}

/// Polls a future that the memory store makes ready at once.
fn ready<F: Future>(future: F) -> F::Output {
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match std::pin::pin!(future).poll(&mut context) {
        std::task::Poll::Ready(output) => output,
        std::task::Poll::Pending => panic!("the memory store answers at once"),
    }
}

/// The admitted requests (time, cost) of each key, in the order they were admitted.
type Admitted = [Vec<(u64, u64)>; 2];

/// Runs `requests` through `processes` leased stores on one shared memory store.
fn run(limits: &[Limit], period: u64, processes: usize, requests: &[Request]) -> (Admitted, u64) {
    let shared = Arc::new(MemoryStore::new());
    let mut stores: Vec<_> = (0..processes).map(|_| LeasedStore::new(shared.clone(), us(period))).collect();
    let keys = [Key::new(b"alpha").unwrap(), Key::new(b"beta").unwrap()];
    let mut admitted: Admitted = Default::default();
    let mut now = 1_000_000u64;
    let mut crashed_leased = 0;
    for request in requests {
        now += request.gap;
        let store = &stores[request.process];
        let verdict =
            ready(store.check(Check::new(keys[request.key], limits, Timestamp::from_micros(now), request.cost)))
                .unwrap();
        if verdict.decision.allowed {
            admitted[request.key].push((now, request.cost));
        }
        if request.gap > 100 {
            store.sweep(Timestamp::from_micros(now));
        }
        match request.then {
            Then::Nothing => {}
            Then::GiveBack(which) => ready(store.give_back(Timestamp::from_micros(now), which)),
            Then::Crash => {
                crashed_leased += store.figures().leased_checks;
                stores[request.process] = LeasedStore::new(shared.clone(), us(period));
            }
        }
    }
    let leased = stores.iter().map(|store| store.figures().leased_checks).sum::<u64>();
    (admitted, leased + crashed_leased)
}

/// Every admitted request of each key, replayed in order, is admitted by each oracle.
fn assert_exact(specs: &[Spec], admitted: &Admitted) -> Result<(), TestCaseError> {
    for stream in admitted {
        for spec in specs {
            let mut oracle = spec.oracle();
            for (index, &(now, cost)) in stream.iter().enumerate() {
                let decision = oracle.step(now, cost);
                prop_assert!(
                    decision.allowed,
                    "{spec:?} over its limit at admitted request {index} ({now} µs, cost {cost}): {stream:?}"
                );
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn leases_never_admit_more_than_the_definition(
        specs in prop::collection::vec(spec(), 1..3),
        processes in 2..9usize,
        period in 1..300u64,
        requests in (2..9usize).prop_flat_map(|n| prop::collection::vec(request(n), 1..400)),
    ) {
        let limits: Vec<Limit> = specs.iter().enumerate().map(|(i, spec)| Limit::new(format!("l{i}"), spec.policy())).collect();
        prop_assert!(check_leasable(&limits).is_ok());
        let processes = processes.max(requests.iter().map(|r| r.process + 1).max().unwrap_or(1));
        let (admitted, _) = run(&limits, period, processes, &requests);
        assert_exact(&specs, &admitted)?;
    }
}

/// Four processes share a hammered key: each window admits exactly the limit (every
/// process keeps seeing demand, so no leased unit is left unspent), most checks are
/// answered from leases, and the store sees a small share of them.
#[test]
fn hammering_four_processes_admits_exactly_the_limit_per_window() {
    let window = 1_000_000;
    for spec in [
        Spec::FixedWindow { limit: 1_000, window, anchored: false },
        Spec::FixedWindow { limit: 1_000, window, anchored: true },
    ] {
        let limits = [Limit::new("api", spec.policy())];
        // 10 000 requests a second (10 × the limit), round robin, for 5 windows.
        let requests: Vec<Request> =
            (0..50_000).map(|i| Request { process: i % 4, key: 0, cost: 1, gap: 100, then: Then::Nothing }).collect();
        let (admitted, leased) = run(&limits, 100_000, 4, &requests);
        assert_exact(&[spec], &admitted).unwrap();
        // Aligned windows start on whole seconds; anchored ones at the first request.
        let first = if matches!(spec, Spec::FixedWindow { anchored: true, .. }) { admitted[0][0].0 } else { 2_000_000 };
        for k in 0..4 {
            let start = first + k * window;
            let in_window = admitted[0].iter().filter(|(t, _)| (start..start + window).contains(t)).count();
            assert_eq!(in_window, 1_000, "{spec:?}: window {k}");
        }
        let checks_admitted = admitted[0].len() as u64;
        assert!(leased * 2 > checks_admitted, "{spec:?}: {leased} of {checks_admitted} admitted checks leased");
    }
}

/// The algorithms whose store holds leases, hammered by four processes at 10 times their
/// rate for 5 s: a token bucket that does not refill in that time admits exactly its
/// capacity; a leaky bucket and a sliding log admit within their definitions, and no less
/// than 90 % of what one process alone on the store would (the units held out of reach for
/// a lease period are the price). At the limit, leases shrink to nothing: the store decides.
#[test]
fn hammering_four_processes_through_held_leases() {
    let hour = 3_600_000_000;
    let requests: Vec<Request> =
        (0..50_000).map(|i| Request { process: i % 4, key: 0, cost: 1, gap: 100, then: Then::Nothing }).collect();
    for (spec, exactly) in [
        (Spec::TokenBucket { capacity: 1_000, amount: 1, interval: hour }, Some(1_000)),
        (Spec::LeakyBucket { interval: 1_000, burst: 999, delay: false }, None),
        (Spec::SlidingLog { limit: 1_000, window: 1_000_000 }, None),
    ] {
        let limits = [Limit::new("api", spec.policy())];
        let (admitted, _) = run(&limits, 100_000, 4, &requests);
        assert_exact(&[spec], &admitted).unwrap();
        let alone = {
            let mut oracle = spec.oracle();
            let mut now = 1_000_000;
            requests
                .iter()
                .filter(|request| {
                    now += request.gap;
                    oracle.step(now, 1).allowed
                })
                .count()
        };
        let count = admitted[0].len();
        match exactly {
            Some(exactly) => assert_eq!(count, exactly, "{spec:?}"),
            None => assert!(count * 10 >= alone * 9 && count <= alone, "{spec:?}: {count} admitted, {alone} alone"),
        }
    }
}

/// At half the limit's rate, leases answer nearly every check, for every algorithm: the
/// store sees at least 20 times fewer calls than checks, and every request is admitted.
#[test]
fn below_the_limit_the_store_sees_few_calls() {
    for spec in [
        Spec::SlidingWindow { limit: 100_000, width: 1_000_000, buckets: 10, anchored: false },
        Spec::FixedWindow { limit: 100_000, window: 10_000_000, anchored: false },
        Spec::SlidingLog { limit: 100_000, window: 10_000_000 },
        Spec::TokenBucket { capacity: 10_000, amount: 1, interval: 100 },
        Spec::LeakyBucket { interval: 100, burst: 10_000, delay: false },
    ] {
        few_store_calls_below_the_limit(spec);
    }
}

fn few_store_calls_below_the_limit(spec: Spec) {
    let limits = [Limit::new("api", spec.policy())];
    let shared = Arc::new(MemoryStore::new());
    let stores: Vec<_> = (0..4).map(|_| LeasedStore::new(shared.clone(), us(100_000))).collect();
    let key = Key::new(b"tenant").unwrap();
    // 5 000 a second over four processes (the limit is 10 000 a second on average), for 10 s.
    let mut sources = [0u64; 2];
    for i in 0..50_000u64 {
        let now = Timestamp::from_micros(1_000_000 + i * 200);
        let verdict = ready(stores[(i % 4) as usize].check(Check::new(key, &limits, now, 1))).unwrap();
        assert!(verdict.decision.allowed, "{spec:?}: request {i} rejected below the limit");
        sources[usize::from(verdict.source == Source::Lease)] += 1;
    }
    let store_calls: u64 = stores.iter().map(|store| store.figures().store_calls).sum();
    assert!(store_calls * 20 <= 50_000, "{spec:?}: {store_calls} store calls for 50 000 checks ({sources:?})");
}

/// A sliding log leased by four processes at a tenth of its rate, for 30 windows: every
/// request admitted. Its leases (about 44 per window and lease period here) are logged as
/// entries once their deadline passes; kept as leases and merged past 16, the oldest units
/// rode forward from merge to merge, never leaving the window, and the log refused requests
/// at a tenth of its rate after 11 s.
#[test]
fn a_sliding_log_leased_below_its_limit_admits_every_request_for_ever() {
    let limits = [Limit::new("api", Spec::SlidingLog { limit: 10_000, window: 1_000_000 }.policy())];
    let shared = Arc::new(MemoryStore::new());
    let stores: Vec<_> = (0..4).map(|_| LeasedStore::new(shared.clone(), us(100_000))).collect();
    let key = Key::new(b"tenant").unwrap();
    for i in 0..30_000u64 {
        let now = Timestamp::from_micros(1_000_000 + i * 1_000);
        let verdict = ready(stores[(i % 4) as usize].check(Check::new(key, &limits, now, 1))).unwrap();
        assert!(verdict.decision.allowed, "request {i} rejected at a tenth of the rate: {verdict:?}");
    }
}

/// Why the store must hold leased units apart (docs/leases.md): in each, a store that saw
/// a lease's units at the lease's time admits a stream that, with one leased unit spent
/// later, the definition refuses.
#[test]
fn debiting_a_lease_at_its_grant_would_over_admit() {
    let refused = |oracle: &mut dyn Oracle, stream: &[(u64, u64)]| {
        stream.iter().any(|&(now, cost)| !oracle.step(now, cost).allowed)
    };
    // Sliding log, 2 per 10 µs: a lease of 2 at 0 (one spent at 0, one at 9); the store
    // then admits 2 at 10, when its entries of 0 have left the window.
    assert!(!refused(&mut SlidingLogOracle::new(2, 10, false), &[(0, 2), (10, 1), (10, 1)]));
    assert!(refused(&mut SlidingLogOracle::new(2, 10, false), &[(0, 1), (9, 1), (10, 1), (10, 1)]));
    // Token bucket of 2, 1 token every 10 µs: a lease of 2 at 0 (one spent at 0, one at
    // 15, when the bucket is full again and restarts its refill clock); the store admits 20 and 21.
    assert!(!refused(&mut TokenBucketOracle::new(2, 1, 10), &[(0, 2), (20, 1), (21, 1)]));
    assert!(refused(&mut TokenBucketOracle::new(2, 1, 10), &[(0, 1), (15, 1), (20, 1), (21, 1)]));
    // Leaky bucket, one every 10 µs, no burst: a lease of 1 at 0 spent at 9; the store
    // admits 10.
    assert!(!refused(&mut LeakyBucketOracle::new(10, 0, false), &[(0, 1), (10, 1)]));
    assert!(refused(&mut LeakyBucketOracle::new(10, 0, false), &[(9, 1), (10, 1)]));
}

/// The sliding log's `attempts` variant is refused: a process holds a lease taken at 0
/// (2 per 10 µs: one unit spent at 0, one held), another's attempt at 5 is rejected by the
/// store (which counts the held unit) but logged, as attempts are, and the held unit spent
/// at 6 then finds a window of 2 that the definition, replaying every attempt, refuses.
#[test]
fn the_attempts_log_cannot_be_leased_exactly() {
    let mut oracle = SlidingLogOracle::new(2, 10, true);
    let decisions: Vec<bool> =
        [(0, 1), (5, 1), (6, 1)].iter().map(|&(now, cost)| oracle.step(now, cost).allowed).collect();
    assert_eq!(decisions, [true, true, false], "the leased unit spent at 6 is refused by the definition");
    let attempts = SlidingLog::new(2, us(10), SlidingLogVariant::Attempts).unwrap();
    let refusal = check_leasable(&[Limit::new("login", attempts)]).unwrap_err();
    assert!(refusal.to_string().contains("cannot be leased exactly"), "{refusal}");
    for spec in [
        Spec::SlidingLog { limit: 2, window: 10 },
        Spec::TokenBucket { capacity: 2, amount: 1, interval: 10 },
        Spec::LeakyBucket { interval: 10, burst: 0, delay: false },
    ] {
        assert!(check_leasable(&[Limit::new("leased", spec.policy())]).is_ok(), "{spec:?}");
    }
}

/// Each rule of docs/leases.md is needed: every schedule below is one the property test
/// found when that rule was taken out of the store (the merged stream then goes over the
/// definition); with every rule in, each stays within it, with leases granted.
#[test]
fn each_lease_rule_holds_its_counterexample() {
    type Schedule = &'static [(usize, usize, u64, u64)];
    // A gap of `CRASH` marks a request after which its process crashes (no gap).
    const CRASH: u64 = u64::MAX;
    let request = |(process, key, cost, gap)| match gap {
        CRASH => Request { process, key, cost, gap: 0, then: Then::Crash },
        gap => Request { process, key, cost, gap, then: Then::Nothing },
    };
    let cases: [(&str, Spec, u64, Schedule); 6] = [
        (
            "sliding log: units logged at the deadline, not at the grant",
            Spec::SlidingLog { limit: 5, window: 20 },
            201,
            &[
                (0, 0, 3, 0),
                (0, 0, 1, 0),
                (0, 0, 1, 20),
                (0, 0, 1, 0),
                (0, 0, 1, 20),
                (0, 0, 2, 0),
                (0, 0, 1, 0),
                (0, 0, 1, 0),
                (0, 0, 1, 0),
            ],
        ),
        (
            "leaky bucket: held units spent just before each request",
            Spec::LeakyBucket { interval: 1, burst: 4, delay: false },
            21,
            &[
                (0, 0, 1, 0),
                (0, 0, 1, 0),
                (0, 0, 1, 0),
                (0, 0, 1, 3),
                (0, 0, 1, 0),
                (0, 0, 1, 2),
                (0, 0, 1, 0),
                (0, 0, 1, 0),
                (0, 0, 3, 0),
            ],
        ),
        (
            "leaky bucket: an ended lease folded in as spent at its deadline",
            Spec::LeakyBucket { interval: 14, burst: 4, delay: false },
            126,
            &[
                (1, 0, 1, 0),
                (1, 0, 1, 0),
                (1, 0, 1, 0),
                (1, 0, 1, 42),
                (1, 0, 1, 0),
                (0, 0, 1, 4),
                (0, 0, 1, 7),
                (0, 0, 1, 2),
                (0, 0, 1, 1),
                (0, 0, 1, 1),
                (0, 0, 1, 2),
                (0, 0, 1, 4),
                (0, 0, 1, 3),
                (0, 0, 1, 1),
                (0, 0, 1, 7),
                (0, 0, 1, 7),
                (0, 0, 1, 5),
                (0, 0, 1, 5),
                (0, 0, 1, 3),
                (0, 0, 1, 6),
                (0, 0, 1, 6),
                (0, 0, 1, 4),
                (0, 0, 1, 1),
                (0, 0, 1, 5),
                (0, 0, 1, 4),
                (0, 0, 1, 7),
                (0, 0, 1, 5),
                (0, 0, 1, 6),
                (0, 0, 1, 7),
                (0, 0, 1, 5),
                (1, 0, 1, 2),
                (0, 0, 1, 6),
                (0, 0, 1, 5),
                (0, 0, 1, 5),
                (0, 0, 1, 0),
                (0, 0, 1, 0),
            ],
        ),
        (
            "token bucket: never refilled above the capacity less the units held",
            Spec::TokenBucket { capacity: 8, amount: 3, interval: 14 },
            148,
            &[
                (0, 1, 2, 0),
                (0, 1, 1, 0),
                (0, 0, 1, 77),
                (0, 1, 1, 1),
                (0, 1, 1, 0),
                (0, 1, 1, 68),
                (0, 1, 1, 0),
                (0, 1, 1, 2),
                (0, 1, 1, 0),
                (0, 0, 1, 0),
                (0, 0, 1, 0),
                (0, 1, 1, 0),
                (0, 1, 1, 0),
                (0, 1, 1, 0),
                (0, 1, 1, 0),
                (0, 1, 1, 0),
            ],
        ),
        (
            "token bucket: the refill clock restarts within one refill of the cap",
            Spec::TokenBucket { capacity: 5, amount: 5, interval: 12 },
            101,
            &[
                (0, 0, 1, 0),
                (0, 0, 1, 0),
                (0, 0, 1, 0),
                (0, 0, 1, 12),
                (0, 0, 1, 0),
                (0, 0, 1, 94),
                (0, 0, 1, 5),
                (0, 1, 1, 7),
                (0, 0, 2, 0),
                (0, 0, 1, 2),
                (0, 0, 3, 3),
            ],
        ),
        (
            "token bucket: a lease that ends raises the cap at its deadline, not before (process 0 crashes at its 16th request)",
            Spec::TokenBucket { capacity: 7, amount: 2, interval: 9 },
            288,
            &[
                (0, 0, 1, 0),
                (0, 0, 1, 0),
                (0, 0, 1, 0),
                (0, 0, 1, 0),
                (0, 0, 1, 0),
                (0, 0, 1, 0),
                (0, 0, 1, 0),
                (0, 1, 1, 0),
                (0, 1, 1, 0),
                (0, 0, 1, 0),
                (0, 1, 1, 0),
                (0, 1, 1, 0),
                (1, 0, 1, 170),
                (0, 1, 1, 111),
                (0, 0, 1, 7),
                (0, 1, 1, CRASH),
                (0, 1, 1, 0),
                (0, 1, 1, 0),
                (0, 0, 1, 1),
                (0, 1, 1, 0),
                (0, 0, 1, 0),
                (0, 0, 1, 0),
                (0, 0, 1, 0),
                (0, 1, 2, 3),
                (0, 1, 1, 5),
                (0, 1, 1, 0),
                (0, 1, 1, 0),
                (0, 0, 1, 0),
                (0, 0, 1, 0),
            ],
        ),
    ];
    for (rule, spec, period, schedule) in cases {
        let requests: Vec<Request> = schedule.iter().copied().map(request).collect();
        let (admitted, leased) = run(&[Limit::new("l", spec.policy())], period, 2, &requests);
        assert!(leased > 0, "{rule}: no lease was spent");
        assert_exact(&[spec], &admitted).unwrap_or_else(|error| panic!("{rule}: {error}"));
    }
}

/// A store standing for Redis that can be taken down: it then answers `Unavailable`.
#[derive(Debug)]
struct Switchable {
    store: MemoryStore,
    down: std::sync::atomic::AtomicBool,
}

impl Store for Switchable {
    fn check(
        &self,
        check: Check<'_>,
    ) -> impl Future<Output = Result<sluice_core::Verdict, sluice_core::StoreError>> + Send {
        let answer = if self.down.load(std::sync::atomic::Ordering::Relaxed) {
            Err(sluice_core::StoreError::Unavailable("down".into()))
        } else {
            self.store.check_now(check.key, check.limits, check.now, check.cost)
        };
        std::future::ready(answer)
    }

    fn reset(
        &self,
        key: Key<'_>,
        limits: &[Limit],
    ) -> impl Future<Output = Result<(), sluice_core::StoreError>> + Send {
        self.store.reset(key, limits)
    }

    fn check_and_lease(
        &self,
        check: Check<'_>,
    ) -> impl Future<Output = Result<sluice_core::LeaseAnswer, sluice_core::StoreError>> + Send {
        let answer = if self.down.load(std::sync::atomic::Ordering::Relaxed) {
            Err(sluice_core::StoreError::Unavailable("down".into()))
        } else {
            self.store.check_and_lease_now(check)
        };
        std::future::ready(answer)
    }
}

/// During an outage a process keeps spending the units it holds (debited before: still
/// exact), then the store's error (its failure mode, on Redis) answers.
#[test]
fn held_units_are_spent_through_an_outage() {
    let spec = Spec::FixedWindow { limit: 1_000, window: 60_000_000, anchored: false };
    let limits = [Limit::new("api", spec.policy())];
    let shared = Arc::new(Switchable { store: MemoryStore::new(), down: false.into() });
    let process = LeasedStore::new(shared.clone(), us(100_000));
    let key = Key::new(b"tenant").unwrap();
    let at = |i: u64| Timestamp::from_micros(60_000_000 + i * 1_000);
    // A period of steady traffic, then a lease.
    let mut i = 0;
    while process.figures().units_held == 0 {
        assert!(ready(process.check(Check::new(key, &limits, at(i), 1))).unwrap().decision.allowed);
        i += 1;
        assert!(i < 1_000, "no lease was granted");
    }
    let held = process.figures().units_held;
    shared.down.store(true, std::sync::atomic::Ordering::Relaxed);
    for _ in 0..held {
        let verdict = ready(process.check(Check::new(key, &limits, at(i), 1))).unwrap();
        assert_eq!((verdict.decision.allowed, verdict.source), (true, Source::Lease));
        i += 1;
    }
    assert!(
        ready(process.check(Check::new(key, &limits, at(i), 1))).is_err(),
        "then the store decides, and it is down"
    );
}

/// A process whose traffic for a key stops gives its unspent units back, and another
/// process can then use them in the same window.
#[test]
fn unspent_units_go_back_to_the_store() {
    let spec = Spec::FixedWindow { limit: 1_000, window: 60_000_000, anchored: false };
    let limits = [Limit::new("api", spec.policy())];
    let shared = Arc::new(MemoryStore::new());
    let (busy, other) = (LeasedStore::new(shared.clone(), us(100_000)), LeasedStore::new(shared.clone(), us(100_000)));
    let key = Key::new(b"tenant").unwrap();
    let at = |ms: u64| Timestamp::from_micros(60_000_000 + ms * 1_000);
    for ms in 0..150 {
        assert!(ready(busy.check(Check::new(key, &limits, at(ms), 1))).unwrap().decision.allowed);
    }
    let held = busy.figures().units_held;
    assert!(held > 0, "a lease is held");
    ready(busy.give_back(at(200), Unspent::OfQuietKeys));
    assert_eq!(busy.figures().units_returned, 0, "not quiet for a period yet");
    ready(busy.give_back(at(250), Unspent::OfQuietKeys));
    assert_eq!(busy.figures().units_returned, held, "quiet for a period: given back");
    assert_eq!(busy.figures().units_held, 0);
    let more = (0..1_000)
        .filter(|i| ready(other.check(Check::new(key, &limits, at(300 + i), 1))).unwrap().decision.allowed)
        .count();
    assert_eq!(150 + more, 1_000, "the window admits exactly its limit, the units given back included");
}

/// A store standing for Redis deciding at its own time: each lease request reaches it
/// `delay` after it was sent (the clock moves on meanwhile), and it decides then.
#[derive(Debug)]
struct Distant {
    store: MemoryStore,
    clock: ManualClock,
    delay: Duration,
}

impl Store for Distant {
    fn check(
        &self,
        check: Check<'_>,
    ) -> impl Future<Output = Result<sluice_core::Verdict, sluice_core::StoreError>> + Send {
        self.clock.advance(self.delay);
        std::future::ready(self.store.check_now(check.key, check.limits, self.clock.now(), check.cost))
    }

    fn reset(
        &self,
        key: Key<'_>,
        limits: &[Limit],
    ) -> impl Future<Output = Result<(), sluice_core::StoreError>> + Send {
        self.store.reset(key, limits)
    }

    fn check_and_lease(
        &self,
        check: Check<'_>,
    ) -> impl Future<Output = Result<sluice_core::LeaseAnswer, sluice_core::StoreError>> + Send {
        self.clock.advance(self.delay);
        let decided = Check::new(check.key, check.limits, self.clock.now(), check.cost);
        std::future::ready(self.store.check_and_lease_now(decided.lease(check.lease, check.lease_period)))
    }
}

/// A leased answer's `reset_after` names the store's instant or a later one, never an
/// earlier: the store decided a round trip after the request was sent, and a `LeasedStore`
/// given the callers' clock counts from when the answer came. Without the clock it counts
/// from the request's `now`, a round trip early.
#[test]
fn a_leased_reset_after_is_never_before_the_stores() {
    let spec = Spec::FixedWindow { limit: 100_000, window: 60_000_000, anchored: false };
    let limits = [Limit::new("api", spec.policy())];
    let key = Key::new(b"tenant").unwrap();
    let window_end = 120_000_000;
    for (with_clock, early) in [(true, false), (false, true)] {
        let clock = ManualClock::at(Timestamp::from_micros(60_000_000));
        let delay = us(500);
        let store = Distant { store: MemoryStore::new(), clock: clock.clone(), delay };
        let leased = LeasedStore::new(store, us(100_000));
        let leased = if with_clock { leased.with_clock(clock.clone()) } else { leased };
        let mut earliest = u64::MAX;
        for _ in 0..2_000 {
            clock.advance(us(50));
            let now = clock.now();
            let verdict = ready(leased.check(Check::new(key, &limits, now, 1))).unwrap();
            if verdict.source == Source::Lease {
                earliest = earliest.min(now.saturating_add(verdict.decision.reset_after).as_micros());
            }
        }
        assert!(earliest < u64::MAX, "leases answered");
        assert_eq!(earliest < window_end, early, "with the clock: {with_clock}; earliest end named {earliest}");
    }
}

/// A key's state holds at most 16 leases at once under every held algorithm, and stays one
/// a snapshot restores: the buckets decide a 17th request alone, unleased; the sliding log,
/// whose leases stay a window after their deadline, grants it and merges its two oldest
/// leases at the later deadline.
#[test]
fn a_key_holds_at_most_sixteen_leases() {
    for spec in [
        Spec::SlidingLog { limit: 1_000, window: 1_000_000 },
        Spec::TokenBucket { capacity: 1_000, amount: 1, interval: 1_000_000 },
        Spec::LeakyBucket { interval: 1_000, burst: 999, delay: false },
    ] {
        let limits = [Limit::new("l", spec.policy())];
        let store = MemoryStore::builder().clock(ManualClock::at(Timestamp::from_micros(1_000_000))).build();
        let key = Key::new(b"k").unwrap();
        let granted: Vec<bool> = (0..40u64)
            .map(|i| {
                // Each lease ends 1 ms after its grant; the sliding log keeps it a window more.
                let check = Check::new(key, &limits, Timestamp::from_micros(1_000_000 + i * 10), 1).lease(1, us(1_000));
                let answer = store.check_and_lease_now(check).unwrap();
                assert!(answer.verdict.decision.allowed, "{spec:?}: request {i}");
                !answer.leased.is_empty()
            })
            .collect();
        let expected = if matches!(spec, Spec::SlidingLog { .. }) { 40 } else { 16 };
        assert_eq!(granted.iter().filter(|&&leased| leased).count(), expected, "{spec:?}: {granted:?}");
        assert!(granted[..16].iter().all(|&leased| leased), "{spec:?}: the first 16 are leased");
        let restored = MemoryStore::builder().clock(ManualClock::at(Timestamp::from_micros(1_000_400))).build();
        assert_eq!(restored.restore(&store.snapshot(), &limits).unwrap().restored, 1, "{spec:?}");
    }
}

/// A rejected request changes nothing of a sliding log's leases, even those that have left
/// the window (Redis writes nothing on a rejection either).
#[test]
fn a_rejection_leaves_the_sliding_logs_leases_alone() {
    use sluice_core::Algorithm;
    use sluice_core::algorithm::Lease;
    let log = SlidingLog::new(2, us(10), SlidingLogVariant::Accepted).unwrap();
    let at = Timestamp::from_micros;
    let mut state = sluice_core::algorithm::sliding_log::SlidingLogState::default();
    let (decision, plan) = log.decide_leased(&state, at(0), 1, Lease { units: 1, deadline: at(10) });
    assert!(decision.allowed);
    log.record(&mut state, plan, true);
    assert_eq!(state.holds().len(), 1);
    // At 25 the lease has left the window; a cost the log can never admit is rejected.
    let before = state.clone();
    let (decision, plan) = log.decide(&state, at(25), 3);
    assert!(!decision.allowed);
    log.record(&mut state, plan, false);
    assert_eq!(state, before);
}

/// A limit listed twice is one state: a give-back under it takes the units back once, as
/// the check debited them once.
#[test]
fn a_limit_listed_twice_takes_its_units_back_once() {
    let spec = Spec::FixedWindow { limit: 100, window: 60_000_000, anchored: false };
    let limit = Limit::new("api", spec.policy());
    let (once, twice) = ([limit.clone()], [limit.clone(), limit]);
    let store = MemoryStore::new();
    let key = Key::new(b"tenant").unwrap();
    let now = Timestamp::from_micros(60_000_000);
    (0..20).for_each(|_| assert!(store.check_now(key, &once, now, 1).unwrap().decision.allowed));
    let answer = store.check_and_lease_now(Check::new(key, &twice, now, 1).lease(10, us(100_000))).unwrap();
    let decided_at = answer.decided_at.unwrap();
    let receipt = |decision: &sluice_core::Decision| sluice_core::Receipt {
        debited_in: once[0].policy().lease_terms().debited_in(decision, decided_at, us(100_000)),
        stamp: 0,
    };
    let receipts: Vec<_> = answer.leased.iter().map(receipt).collect();
    store.give_back_now(sluice_core::GiveBack::new(key, &twice, &receipts, 10, 10, now));
    assert_eq!(store.check_now(key, &once, now, 0).unwrap().decision.remaining, 79);
}

/// A request of eight busy processes on one key: a few µs apart, so each holds a lease most
/// of the time and a window sees many more than 16 lease deadlines.
fn dense_request() -> impl Strategy<Value = Request> {
    (
        0..8usize,
        prop_oneof![6 => Just(1u64), 1 => 2..4u64],
        0..4u64,
        prop_oneof![60 => Just(Then::Nothing), 1 => Just(Then::Crash)],
    )
        .prop_map(|(process, cost, gap, then)| Request { process, key: 0, cost, gap, then })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// A sliding log whose window is many lease periods long holds more than 16 leases'
    /// worth of deadlines at once, so its oldest leases merge: the merged stream stays
    /// within the definition.
    #[test]
    fn merged_sliding_log_leases_never_admit_more_than_the_definition(
        limit in 100..400u64,
        window in 2_000..6_000u64,
        period in 20..80u64,
        requests in prop::collection::vec(dense_request(), 300..1_500),
    ) {
        let spec = Spec::SlidingLog { limit, window };
        let (admitted, _) = run(&[Limit::new("log", spec.policy())], period, 8, &requests);
        assert_exact(&[spec], &admitted)?;
    }
}

/// A memory store that answers every call at its second poll: checks run side by side
/// overlap their store calls, so that a process holds leases of several requests at once
/// (`lease/parcel.rs`) and misses wait for the lease request in flight (`lease/held.rs`).
struct Overlapping(Arc<MemoryStore>);

impl Store for Overlapping {
    async fn check(&self, check: Check<'_>) -> Result<sluice_core::Verdict, sluice_core::StoreError> {
        tokio::task::yield_now().await;
        self.0.check(check).await
    }

    fn reset(
        &self,
        key: Key<'_>,
        limits: &[Limit],
    ) -> impl Future<Output = Result<(), sluice_core::StoreError>> + Send {
        self.0.reset(key, limits)
    }

    async fn check_and_lease(&self, check: Check<'_>) -> Result<sluice_core::LeaseAnswer, sluice_core::StoreError> {
        tokio::task::yield_now().await;
        self.0.check_and_lease(check).await
    }

    fn give_back(
        &self,
        back: sluice_core::GiveBack<'_>,
    ) -> impl Future<Output = Result<(), sluice_core::StoreError>> + Send {
        self.0.give_back(back)
    }
}

/// [`run`], with the requests in batches of four decided side by side at one instant (each
/// batch's time advanced by its first request's gap), every store call answered a poll late.
fn run_overlapping(limits: &[Limit], period: u64, processes: usize, requests: &[Request]) -> Admitted {
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let shared = Arc::new(Overlapping(Arc::new(MemoryStore::new())));
    let stores: Vec<_> = (0..processes).map(|_| LeasedStore::new(shared.clone(), us(period))).collect();
    let mut admitted: Admitted = Default::default();
    let mut now = 1_000_000u64;
    for batch in requests.chunks(4) {
        now += batch[0].gap;
        let at = Timestamp::from_micros(now);
        let decided = runtime.block_on(async {
            let checks = batch.iter().map(|request| {
                let (store, limits) = (stores[request.process].clone(), limits.to_vec());
                let (key, cost) = (request.key, request.cost);
                tokio::spawn(async move {
                    let name: &[u8] = if key == 0 { b"alpha" } else { b"beta" };
                    store.check(Check::new(Key::new(name).unwrap(), &limits, at, cost)).await.unwrap().decision.allowed
                })
            });
            let handles: Vec<_> = checks.collect();
            let mut allowed = Vec::new();
            for handle in handles {
                allowed.push(handle.await.unwrap());
            }
            allowed
        });
        for (request, allowed) in batch.iter().zip(decided) {
            if allowed {
                admitted[request.key].push((now, request.cost));
            }
            if let Then::GiveBack(which) = request.then {
                runtime.block_on(stores[request.process].give_back(at, which));
            }
        }
    }
    admitted
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// The bound with checks side by side: several leases held at once by one process, and
    /// checks waiting for the lease request in flight.
    #[test]
    fn overlapping_leases_never_admit_more_than_the_definition(
        specs in prop::collection::vec(spec(), 1..3),
        period in 1..300u64,
        requests in prop::collection::vec(request(3), 1..400),
    ) {
        let limits: Vec<Limit> = specs.iter().enumerate().map(|(i, spec)| Limit::new(format!("l{i}"), spec.policy())).collect();
        assert_exact(&specs, &run_overlapping(&limits, period, 3, &requests))?;
    }
}
