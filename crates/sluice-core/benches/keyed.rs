//! Keyed check cost: Sluice's memory store against governor's keyed GCRA limiter, on the
//! same 16-byte keys, one thread and two threads, the clock read included.
//!
//! Algorithms: Sluice's sliding log (the centrepiece), token bucket and fixed window, each
//! against governor with the same quota (`L` per second, burst `L`).
//!
//! Every key is checked before measuring (for the sliding log, its log is filled to its
//! steady-state size first, see `Peers::prefill`); keys are then visited in a pseudo-random
//! order (xorshift64, no allocation per check). Each group runs both peers on the same keys,
//! so the figures to compare are the ratios within a group.
//!
//! Cases (`keyed/<algorithm>/<case>/<keys>`):
//! - `allowed/{1,1000,1000000}`: limits sized so that nearly every check is allowed by both
//!   (`L` per second with `L = max(100, 50 000 000 / keys)`).
//! - `sliding_log/allowed_10ms/1000`: as `allowed/1000` with 500 per 10 ms: the same checks,
//!   while each key's log holds about a hundred times fewer entries (it stays in cache).
//! - `sliding_log/allowed_fresh/1000000`: 1 000 000 keys whose logs start with one entry.
//! - `sliding_log/over_limit/1`: one hot key far over a 1 000 per second limit, so that
//!   nearly every check is rejected by both.
//! - `sliding_log/over_limit/1000`: 1 000 keys each far over a 100 per second limit (each
//!   key is checked thousands of times a second): the keys of an API under load, nearly
//!   every check rejected, each log full at 100 entries.
//!
//! Functions: `sluice_store` (`MemoryStore::check_one` after reading a `SystemClock`),
//! `sluice_limiter` (`RateLimiter::check`), `governor_check_key`. The share of allowed
//! checks of each function is printed after its group.
//!
//! Measured with this bench and not kept (the code is in git history):
//! - Prefetching the log's next lines: `sliding_log/allowed/1000` 85.0 → 93.2 ns per check.
//! - Contended rejections under a shared `RwLock`: two threads on one key, 70–76 → 80–93 ns.
//! - Tight rings for every log, or from 64 entries: 2.2× slower for a growing log (and 417.6 →
//!   465.5 instructions in `keyed_instructions`).

mod common;

use common::key_bytes;
use criterion::{BenchmarkGroup, Criterion, criterion_group, criterion_main, measurement::WallTime};
use governor::{DefaultKeyedRateLimiter, Quota};
use sluice_core::{
    Alignment, Clock, FixedWindow, Key, Limit, ManualClock, MemoryStore, Policy, RateLimiter, SlidingLog,
    SlidingLogVariant, SystemClock, Timestamp, TokenBucket, TokenBucketSettings,
};
use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::Barrier;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// xorshift64: a cheap pseudo-random walk over the keys.
struct Walk(u64);

impl Walk {
    fn new(seed: u64) -> Self {
        Walk(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    fn next(&mut self, keys: usize) -> usize {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        ((u128::from(x) * keys as u128) >> 64) as usize
    }
}

/// Allowed and total checks of one benchmark function.
#[derive(Default)]
struct Tally {
    allowed: AtomicU64,
    total: AtomicU64,
}

impl Tally {
    fn add(&self, allowed: u64, total: u64) {
        self.allowed.fetch_add(allowed, Ordering::Relaxed);
        self.total.fetch_add(total, Ordering::Relaxed);
    }

    fn share(&self) -> f64 {
        let total = self.total.load(Ordering::Relaxed).max(1);
        100.0 * self.allowed.load(Ordering::Relaxed) as f64 / total as f64
    }
}

/// The algorithms measured against governor.
#[derive(Clone, Copy)]
enum Algorithm {
    SlidingLog,
    TokenBucket,
    FixedWindow,
}

impl Algorithm {
    /// `rate.limit` requests per `rate.window`, burst `rate.limit`, in this algorithm.
    fn policy(self, rate: Rate) -> Policy {
        let (limit, window) = (u64::from(rate.limit), rate.window);
        let policy: Result<Policy, _> = match self {
            Algorithm::SlidingLog => SlidingLog::new(limit, window, SlidingLogVariant::Accepted).map(Policy::from),
            Algorithm::TokenBucket => token_bucket(limit, window).map(Policy::from),
            Algorithm::FixedWindow => {
                FixedWindow::new(limit, window, Alignment::Aligned, Duration::ZERO).map(Policy::from)
            }
        };
        policy.expect("valid policy")
    }

    fn name(self) -> &'static str {
        match self {
            Algorithm::SlidingLog => "sliding_log",
            Algorithm::TokenBucket => "token_bucket",
            Algorithm::FixedWindow => "fixed_window",
        }
    }
}

/// A bucket of `limit` tokens refilled by `limit` every `window`.
fn token_bucket(limit: u64, window: Duration) -> Result<TokenBucket, sluice_core::PolicyError> {
    TokenBucket::new(TokenBucketSettings { capacity: limit, refill_amount: limit, refill_interval: window })
}

/// A quota: `limit` requests per `window`.
#[derive(Clone, Copy)]
struct Rate {
    limit: u32,
    window: Duration,
}

impl Rate {
    fn per_second(limit: u32) -> Self {
        Rate { limit, window: Duration::from_secs(1) }
    }

    /// The same quota for governor: a request every `window / limit`, burst `limit`.
    fn governor(self) -> Quota {
        let limit = NonZeroU32::new(self.limit).expect("non-zero rate");
        Quota::with_period(self.window / self.limit).expect("non-zero period").allow_burst(limit)
    }
}

/// Both peers over the same keys, built once per group.
struct Peers {
    keys: Vec<[u8; 16]>,
    clock: SystemClock,
    limit: Limit,
    store: MemoryStore,
    limiter: RateLimiter,
    governor: DefaultKeyedRateLimiter<[u8; 16]>,
}

impl Peers {
    fn new(algorithm: Algorithm, keys: usize, rate: Rate, prefill: bool) -> Self {
        let limit = Limit::new("bench", algorithm.policy(rate));
        // The store's own clock (by which it drops expired states) never moves: prefilling
        // 1 000 000 keys takes seconds, longer than the window, and a sweep must not drop
        // the states of the keys filled first before they are measured.
        let store = MemoryStore::builder().clock(ManualClock::at(Timestamp::EPOCH)).build();
        let limiter = RateLimiter::builder().limit(limit.clone()).store(store.clone()).build().expect("one limit");
        let governor = DefaultKeyedRateLimiter::keyed(rate.governor());
        let peers = Peers {
            keys: (0..keys).map(key_bytes).collect(),
            clock: SystemClock::new(),
            limit,
            store,
            limiter,
            governor,
        };
        let logged = matches!(algorithm, Algorithm::SlidingLog) && prefill;
        peers.prefill(if logged { u64::from(rate.limit) } else { 1 }, rate.window);
        for key in &peers.keys {
            black_box(peers.governor_check(key));
        }
        peers
    }

    /// Checks `per_key` requests for every key, so that sliding logs start at their
    /// steady-state size: a log keeps growing until it holds `limit` entries (or expires
    /// entirely) and never gives back its capacity, and measuring that growth would add
    /// page faults that a long-running limiter no longer pays. All but the last request
    /// are spread over a window that ended a window ago; the last is checked now, so no
    /// state is expired and no sweep drops it.
    fn prefill(&self, per_key: u64, window: Duration) {
        let window = window.as_micros() as u64;
        let start = self.clock.now().as_micros() - 2 * window;
        for key in &self.keys {
            let key = Key::new(key).expect("16-byte key");
            for index in 1..per_key {
                let at = Timestamp::from_micros(start + index * window / per_key);
                assert!(self.store.check_one(key, &self.limit, at, 1).expect("room for every key").allowed);
            }
            assert!(self.store.check_one(key, &self.limit, self.clock.now(), 1).expect("room for every key").allowed);
        }
        assert_eq!(self.store.len(), self.keys.len(), "every key must hold a state");
    }

    fn sluice_store(&self, key: &[u8; 16]) -> bool {
        let key = Key::new(key).expect("16-byte key");
        self.store.check_one(key, &self.limit, self.clock.now(), 1).is_ok_and(|decision| decision.allowed)
    }

    fn sluice_limiter(&self, key: &[u8; 16]) -> bool {
        self.limiter.check(key).is_ok_and(|decision| decision.allowed)
    }

    fn governor_check(&self, key: &[u8; 16]) -> bool {
        self.governor.check_key(key).is_ok()
    }
}

type Check = fn(&Peers, &[u8; 16]) -> bool;

const FUNCTIONS: [(&str, Check); 3] = [
    ("sluice_store", Peers::sluice_store),
    ("sluice_limiter_check", Peers::sluice_limiter),
    ("governor_check_key", Peers::governor_check),
];

static SEED: AtomicU64 = AtomicU64::new(1);

/// One thread: one check per iteration.
fn single_thread(group: &mut BenchmarkGroup<'_, WallTime>, peers: &Peers, name: &str, check: Check, tally: &Tally) {
    group.bench_function(format!("{name}/1_thread"), |b| {
        let mut walk = Walk::new(SEED.fetch_add(1, Ordering::Relaxed));
        let (mut allowed, mut total) = (0, 0);
        b.iter(|| {
            let key = &peers.keys[walk.next(peers.keys.len())];
            let ok = check(peers, key);
            allowed += u64::from(ok);
            total += 1;
            black_box(ok)
        });
        tally.add(allowed, total);
    });
}

/// Two threads sharing the limiter, each doing half the checks; the time reported is the
/// wall time of the slower thread divided by all checks (time per check of the pair).
fn two_threads(group: &mut BenchmarkGroup<'_, WallTime>, peers: &Peers, name: &str, check: Check, tally: &Tally) {
    group.bench_function(format!("{name}/2_threads"), |b| {
        b.iter_custom(|iters| {
            let half = iters.div_ceil(2);
            let barrier = Barrier::new(2);
            let run = || {
                let mut walk = Walk::new(SEED.fetch_add(1, Ordering::Relaxed));
                let mut allowed = 0;
                barrier.wait();
                let start = Instant::now();
                for _ in 0..half {
                    let key = &peers.keys[walk.next(peers.keys.len())];
                    allowed += u64::from(black_box(check(peers, key)));
                }
                let elapsed = start.elapsed();
                tally.add(allowed, half);
                elapsed
            };
            let slowest = std::thread::scope(|scope| {
                let other = scope.spawn(run);
                let mine = run();
                mine.max(other.join().expect("bench thread"))
            });
            slowest.mul_f64(iters as f64 / (2 * half) as f64)
        });
    });
}

fn group(c: &mut Criterion, algorithm: Algorithm, case: &str, keys: usize, rate: Rate, prefill: bool) {
    let name = &format!("keyed/{}/{case}/{keys}", algorithm.name());
    let started = Instant::now();
    let peers = Peers::new(algorithm, keys, rate, prefill);
    let logged = peers.store.heap_bytes();
    let (limit, window) = (rate.limit, rate.window);
    eprintln!("{name}: {keys} keys, {limit} per {window:?}, set up in {:.1?}, {logged} heap bytes", started.elapsed());
    let mut group = c.benchmark_group(name);
    group.measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    let tallies: Vec<(String, Tally)> = FUNCTIONS
        .iter()
        .flat_map(|(function, _)| {
            ["1_thread", "2_threads"].map(|threads| (format!("{function}/{threads}"), Tally::default()))
        })
        .collect();
    for (index, (function, check)) in FUNCTIONS.iter().enumerate() {
        single_thread(&mut group, &peers, function, *check, &tallies[2 * index].1);
        two_threads(&mut group, &peers, function, *check, &tallies[2 * index + 1].1);
    }
    group.finish();
    for (function, tally) in tallies.iter().filter(|(_, tally)| tally.total.load(Ordering::Relaxed) > 0) {
        eprintln!("{name}/{function}: {:.2}% allowed", tally.share());
    }
    eprintln!("{name}: sluice store holds {} states, {} heap bytes", peers.store.len(), peers.store.heap_bytes());
}

fn keyed(c: &mut Criterion) {
    let per_second = |keys: usize| Rate::per_second((50_000_000 / keys).max(100) as u32);
    for keys in [1, 1_000, 1_000_000] {
        group(c, Algorithm::SlidingLog, "allowed", keys, per_second(keys), true);
    }
    // The same keys and rate of checks, with logs a hundred times shorter.
    let short = Rate { limit: 500, window: Duration::from_millis(10) };
    group(c, Algorithm::SlidingLog, "allowed_10ms", 1_000, short, true);
    group(c, Algorithm::SlidingLog, "allowed_fresh", 1_000_000, Rate::per_second(100), false);
    group(c, Algorithm::SlidingLog, "over_limit", 1, Rate::per_second(1_000), true);
    group(c, Algorithm::SlidingLog, "over_limit", 1_000, Rate::per_second(100), true);
    for algorithm in [Algorithm::TokenBucket, Algorithm::FixedWindow] {
        for keys in [1_000, 1_000_000] {
            group(c, algorithm, "allowed", keys, per_second(keys), true);
        }
    }
}

criterion_group!(benches, keyed);
criterion_main!(benches);
