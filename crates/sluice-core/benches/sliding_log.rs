//! Sliding-log cost per check as the limit `N` grows (10, 1 000, 100 000), against the
//! textbook log: a `VecDeque<u64>` that pops expired entries from the front, pushes at the
//! back and compares its length with the limit.
//!
//! Two load patterns, both with time injected (no clock read):
//! - `steady`: one request every `window / N`, so the log stays full and every check
//!   expires one entry and logs one.
//! - `burst_gap`: a burst of `N` requests at one instant, then a gap longer than the window,
//!   then the next burst; the time reported is the average per check over whole cycles.
//!
//! Sluice runs as the pure core (`Algorithm::decide` + `record` on a `SlidingLogState`) and
//! through a `MemoryStore` holding the one key.

use criterion::{BenchmarkGroup, BenchmarkId, Criterion, criterion_group, criterion_main, measurement::WallTime};
use sluice_core::algorithm::sliding_log::SlidingLogState;
use sluice_core::{Algorithm, Key, Limit, ManualClock, MemoryStore, SlidingLog, SlidingLogVariant, Timestamp};
use std::collections::VecDeque;
use std::hint::black_box;
use std::time::{Duration, Instant};

const WINDOW: Duration = Duration::from_secs(1);
const WINDOW_US: u64 = 1_000_000;
const START_US: u64 = 1_700_000_000_000_000;
const SIZES: [u64; 3] = [10, 1_000, 100_000];
const KEY: &[u8] = b"bench-key-000001";

/// The textbook sliding window log.
struct Textbook {
    log: VecDeque<u64>,
    limit: usize,
    window: u64,
}

impl Log for Textbook {
    fn check(&mut self, now: u64) -> bool {
        while let Some(&oldest) = self.log.front() {
            if oldest + self.window > now {
                break;
            }
            self.log.pop_front();
        }
        if self.log.len() < self.limit {
            self.log.push_back(now);
            true
        } else {
            false
        }
    }
}

impl Textbook {
    fn new(limit: u64) -> Self {
        Textbook { log: VecDeque::new(), limit: limit as usize, window: WINDOW_US }
    }
}

/// A log under test: checks one request of cost 1 at `now` (µs).
trait Log {
    fn check(&mut self, now: u64) -> bool;
}

/// The pure core: `decide` then `record` on one state.
struct Core {
    policy: SlidingLog,
    state: SlidingLogState,
}

impl Log for Core {
    fn check(&mut self, now: u64) -> bool {
        let (decision, plan) = self.policy.decide(&self.state, Timestamp::from_micros(now), 1);
        self.policy.record(&mut self.state, plan, decision.allowed);
        decision.allowed
    }
}

/// The memory store with one key.
struct Store {
    limit: Limit,
    store: MemoryStore,
}

impl Log for Store {
    fn check(&mut self, now: u64) -> bool {
        let key = Key::new(KEY).expect("valid key");
        let verdict = self.store.check_now(key, std::slice::from_ref(&self.limit), Timestamp::from_micros(now), 1);
        verdict.is_ok_and(|verdict| verdict.decision.allowed)
    }
}

fn policy(n: u64) -> SlidingLog {
    SlidingLog::new(n, WINDOW, SlidingLogVariant::Accepted).expect("valid sliding log")
}

fn store(n: u64) -> Store {
    // The store's own clock never moves, so it never drops the key's state.
    let store = MemoryStore::builder().clock(ManualClock::at(Timestamp::EPOCH)).build();
    Store { limit: Limit::new("bench", policy(n)), store }
}

fn core(n: u64) -> Core {
    Core { policy: policy(n), state: SlidingLogState::default() }
}

/// One request every `window / N`: the log stays full, each check expires one entry.
fn steady<L: Log>(group: &mut BenchmarkGroup<'_, WallTime>, name: &str, n: u64, mut log: L) {
    let step = WINDOW_US / n;
    let mut now = START_US;
    for _ in 0..2 * n {
        now += step;
        assert!(log.check(now), "{name}: steady requests must be allowed");
    }
    let mut rejected = 0u64;
    group.bench_function(BenchmarkId::new(name, n), |b| {
        b.iter(|| {
            now += step;
            let allowed = log.check(black_box(now));
            rejected += u64::from(!allowed);
            allowed
        });
    });
    assert_eq!(rejected, 0, "{name}: steady requests must be allowed");
}

/// Bursts of `N` requests at one instant separated by gaps longer than the window; the
/// time per check is averaged over whole cycles.
fn burst_gap<L: Log>(group: &mut BenchmarkGroup<'_, WallTime>, name: &str, n: u64, mut log: L) {
    let mut instant = START_US;
    let mut rejected = 0u64;
    let mut cycle = || {
        for _ in 0..n {
            rejected += u64::from(!log.check(black_box(instant)));
        }
        instant += WINDOW_US + 1;
    };
    cycle();
    group.bench_function(BenchmarkId::new(name, n), |b| {
        b.iter_custom(|iters| {
            let cycles = iters.div_ceil(n);
            let start = Instant::now();
            for _ in 0..cycles {
                cycle();
            }
            start.elapsed().mul_f64(iters as f64 / (cycles * n) as f64)
        });
    });
    assert_eq!(rejected, 0, "{name}: every request of a burst of N must be allowed");
}

fn sliding_log(c: &mut Criterion) {
    let mut group = c.benchmark_group("sliding_log/steady");
    group.measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    for n in SIZES {
        steady(&mut group, "textbook_vecdeque", n, Textbook::new(n));
        steady(&mut group, "sluice_core", n, core(n));
        steady(&mut group, "sluice_memory_store", n, store(n));
    }
    group.finish();

    let mut group = c.benchmark_group("sliding_log/burst_gap");
    group.measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    for n in SIZES {
        burst_gap(&mut group, "textbook_vecdeque", n, Textbook::new(n));
        burst_gap(&mut group, "sluice_core", n, core(n));
        burst_gap(&mut group, "sluice_memory_store", n, store(n));
    }
    group.finish();
}

criterion_group!(benches, sliding_log);
criterion_main!(benches);
