//! A check answered from leased units ([`LeasedStore::check_ready`]): the path a leased
//! check takes without the store, where the ledger counts it store-wide and for each of
//! its limits (`LeasedStore::figures_by_limit`). One hot key, and 1 000 keys in turn, each
//! holding a lease of a fixed window far from its limit; one limit, and two at once.
//!
//! `cargo bench -p sluice-core --bench leased`; docs/benchmarks.md ("Leases: the leased
//! check path") records the medians. For callgrind, `<binary> instructions LIMITS N` runs N
//! leased checks of the hot key with 1 or 2 limits and exits: instructions per check are
//! the difference of two runs (N = 200 000 and 100 000) over 100 000.
#![allow(clippy::unwrap_used, missing_docs)]

use criterion::{Criterion, criterion_group};
use sluice_core::lease::LeasedStore;
use sluice_core::{Alignment, Check, FixedWindow, Key, Limit, MemoryStore, Store, Timestamp};
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

const KEYS: usize = 1_000;

/// A fixed window no bench run comes near.
fn limit(name: &str) -> Limit {
    Limit::new(name, FixedWindow::new(1 << 40, Duration::from_secs(3600), Alignment::Aligned, Duration::ZERO).unwrap())
}

/// Polls a future that the memory store makes ready at once.
fn ready<F: Future>(future: F) -> F::Output {
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match std::pin::pin!(future).poll(&mut context) {
        std::task::Poll::Ready(output) => output,
        std::task::Poll::Pending => panic!("the memory store answers at once"),
    }
}

/// A leased store whose `keys` hold leases of `limits` at `now`, large enough for the run.
fn leased(keys: &[Vec<u8>], limits: &[Limit], now: Timestamp) -> LeasedStore<Arc<MemoryStore>> {
    let store = LeasedStore::new(Arc::new(MemoryStore::new()), Duration::from_secs(60));
    // Demand over a lease period makes the leases grow: a few rounds of every key.
    for _ in 0..64 {
        for key in keys {
            ready(store.check(Check::new(Key::new(key).unwrap(), limits, now, 1))).unwrap();
        }
    }
    store
}

/// Decides `check` from leased units, or through the store (asking for a new lease) when
/// they ran out: rarely, as each lease covers a minute of this demand.
fn decide(store: &LeasedStore<Arc<MemoryStore>>, check: Check<'_>) -> bool {
    let verdict = store.check_ready(check).unwrap_or_else(|| ready(store.check(check))).unwrap();
    verdict.decision.allowed
}

fn leased_checks(c: &mut Criterion) {
    let keys: Vec<Vec<u8>> = (0..KEYS).map(|index| format!("tenant-{index:04}").into_bytes()).collect();
    let now = Timestamp::from_micros(3_600_000_000 * 500_000 + 1);
    let mut group = c.benchmark_group("leased_check");
    for (name, limits) in [("one_limit", vec![limit("api")]), ("two_limits", vec![limit("api"), limit("burst")])] {
        let store = leased(&keys, &limits, now);
        let hot = Key::new(&keys[0]).unwrap();
        group.bench_function(format!("hot/{name}"), |b| {
            b.iter(|| decide(&store, Check::new(black_box(hot), &limits, now, 1)))
        });
        let mut next = 0;
        group.bench_function(format!("keys_in_turn/{name}"), |b| {
            b.iter(|| {
                next = (next + 1) % KEYS;
                let key = Key::new(black_box(&keys[next])).unwrap();
                decide(&store, Check::new(key, &limits, now, 1))
            })
        });
        let figures = store.figures();
        assert!(figures.leased_checks > 100 * figures.store_calls, "mostly leased: {figures:?}");
    }
    group.finish();
}

/// `instructions LIMITS N`: N leased checks of one key, for callgrind.
fn instructions(limits: usize, checks: usize) {
    let limits: Vec<Limit> = ["api", "burst"].iter().take(limits).map(|name| limit(name)).collect();
    let keys = [b"tenant-0000".to_vec()];
    let now = Timestamp::from_micros(3_600_000_000 * 500_000 + 1);
    let store = leased(&keys, &limits, now);
    let key = Key::new(&keys[0]).unwrap();
    let allowed = (0..checks).filter(|_| decide(&store, Check::new(black_box(key), &limits, now, 1))).count();
    assert_eq!(allowed, checks);
}

criterion_group!(benches, leased_checks);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("instructions") {
        return instructions(args[2].parse().unwrap(), args[3].parse().unwrap());
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
