//! Each limit's lease figures ([`LeasedStore::figures_by_limit`]) add up: per limit,
//! every unit leased is spent, given back, given up or still held; checks answered from
//! leases are those the verdicts say; and over limits checked one at a time they sum to
//! the store-wide [`LeaseFigures`](sluice_core::lease::LeaseFigures). Random traffic on a
//! [`ManualClock`], so nothing depends on the machine's speed.

#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

use proptest::prelude::*;
use sluice_core::lease::{LeasedStore, LimitLeaseFigures, Unspent};
use sluice_core::{
    Alignment, Check, Clock, FixedWindow, Key, Limit, ManualClock, MemoryStore, Source, Store, Timestamp, TokenBucket,
    TokenBucketSettings,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Polls a future that the memory store makes ready at once.
fn ready<F: Future>(future: F) -> F::Output {
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match std::pin::pin!(future).poll(&mut context) {
        std::task::Poll::Ready(output) => output,
        std::task::Poll::Pending => panic!("the memory store answers at once"),
    }
}

/// Three leasable limits of different shapes and sizes.
fn limits() -> [Limit; 3] {
    let window = |limit, ms| FixedWindow::new(limit, Duration::from_millis(ms), Alignment::Aligned, Duration::ZERO);
    let settings = TokenBucketSettings { capacity: 400, refill_amount: 40, refill_interval: Duration::from_millis(50) };
    [
        Limit::new("api", window(1_000, 1_000).unwrap()),
        Limit::new("login", window(60, 500).unwrap()),
        Limit::new("upload", TokenBucket::new(settings).unwrap()),
    ]
}

/// One step of traffic: a check of one limit for one key, after `gap_us`, then maybe a
/// sweep and a give-back.
#[derive(Clone, Copy, Debug)]
struct Step {
    limit: usize,
    key: usize,
    cost: u64,
    gap_us: u64,
    settle: Option<Unspent>,
}

fn step() -> impl Strategy<Value = Step> {
    let settle = prop_oneof![
        12 => Just(None),
        2 => Just(Some(Unspent::OfQuietKeys)),
        1 => Just(Some(Unspent::All)),
    ];
    (0..3usize, 0..4usize, 1..4u64, prop_oneof![0..2_000u64, 0..200_000u64], settle)
        .prop_map(|(limit, key, cost, gap_us, settle)| Step { limit, key, cost, gap_us, settle })
}

/// What the verdicts said, per limit name: checks answered from leases and their units.
type Spent = BTreeMap<String, (u64, u64)>;

/// Runs `steps` through one leased store on `clock`; what the verdicts said.
fn run(store: &LeasedStore<Arc<MemoryStore>>, clock: &ManualClock, steps: &[Step]) -> Spent {
    let (limits, keys) = (limits(), [&b"a"[..], b"b", b"c", b"d"]);
    let mut spent = Spent::new();
    for step in steps {
        clock.advance(Duration::from_micros(step.gap_us));
        let limit = std::slice::from_ref(&limits[step.limit]);
        let check = Check::new(Key::new(keys[step.key]).unwrap(), limit, clock.now(), step.cost);
        let verdict = ready(store.check(check)).unwrap();
        let counted = spent.entry(limit[0].name().to_owned()).or_default();
        if verdict.source == Source::Lease {
            *counted = (counted.0 + 1, counted.1 + step.cost);
        }
        if let Some(which) = step.settle {
            store.sweep(clock.now());
            ready(store.give_back(clock.now(), which));
        }
    }
    spent
}

/// `leased = spent + returned + expired + held` for `figures`, with `spent` the units of
/// its leased checks.
fn assert_adds_up(figures: &LimitLeaseFigures, spent: (u64, u64)) -> Result<(), TestCaseError> {
    prop_assert_eq!(figures.leased_checks, spent.0, "{}: checks answered from leases", figures.name);
    let accounted = spent.1 + figures.units_returned + figures.units_expired + figures.units_held;
    prop_assert_eq!(figures.units_leased, accounted, "{}: {:?}", figures.name, figures);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Per limit the figures add up, and over the limits they are the store's.
    #[test]
    fn each_limits_lease_figures_add_up_to_the_stores(steps in prop::collection::vec(step(), 1..400)) {
        let clock = ManualClock::at(Timestamp::from_micros(1_000_000));
        let store = LeasedStore::new(Arc::new(MemoryStore::new()), Duration::from_millis(100)).with_clock(clock.clone());
        let spent = run(&store, &clock, &steps);
        let by_limit = store.figures_by_limit();
        for figures in &by_limit {
            assert_adds_up(figures, spent.get(&figures.name).copied().unwrap_or_default())?;
        }
        let whole = store.figures();
        let sum = |field: fn(&LimitLeaseFigures) -> u64| by_limit.iter().map(field).sum::<u64>();
        prop_assert_eq!(sum(|figures| figures.leased_checks), whole.leased_checks);
        prop_assert_eq!(sum(|figures| figures.units_leased), whole.units_leased);
        prop_assert_eq!(sum(|figures| figures.units_returned), whole.units_returned);
        prop_assert_eq!(sum(|figures| figures.units_expired), whole.units_expired);
        prop_assert_eq!(sum(|figures| figures.units_held), whole.units_held);
    }
}

/// A lease granted to a set of limits was debited from each: each counts all of it, as
/// the store-wide figures do; a limit listed twice counts once.
#[test]
fn a_lease_for_a_set_of_limits_counts_under_each() {
    let [api, login, _] = limits();
    let clock = ManualClock::at(Timestamp::from_micros(1_000_000));
    let store = LeasedStore::new(Arc::new(MemoryStore::new()), Duration::from_millis(100));
    let set = [api.clone(), login, api];
    for _ in 0..40 {
        clock.advance(Duration::from_millis(1));
        ready(store.check(Check::new(Key::new(b"tenant").unwrap(), &set, clock.now(), 1))).unwrap();
    }
    let whole = store.figures();
    assert!(whole.leased_checks > 0 && whole.units_held > 0, "{whole:?}");
    let names: Vec<String> = store.figures_by_limit().into_iter().map(|figures| figures.name).collect();
    assert_eq!(names, ["api", "login"]);
    for figures in store.figures_by_limit() {
        assert_eq!(figures.leased_checks, whole.leased_checks, "{figures:?}");
        assert_eq!(figures.units_leased, whole.units_leased, "{figures:?}");
        assert_eq!(figures.units_held, whole.units_held, "{figures:?}");
    }
}

/// The random traffic's shape reaches every count: a key busy until just before its
/// window's end, then checked in the next window, gives up the units it held; giving back
/// at the end returns the rest.
#[test]
fn busy_traffic_across_a_window_leases_spends_expires_and_returns() {
    let clock = ManualClock::at(Timestamp::from_micros(1_000_000));
    let store = LeasedStore::new(Arc::new(MemoryStore::new()), Duration::from_millis(100)).with_clock(clock.clone());
    let busy = Step { limit: 0, key: 0, cost: 1, gap_us: 1_000, settle: None };
    let mut steps = vec![busy; 950];
    steps.push(Step { gap_us: 60_000, ..busy });
    steps.extend([busy; 200]);
    steps.push(Step { settle: Some(Unspent::All), ..busy });
    let spent = run(&store, &clock, &steps);
    let api = store.figures_by_limit().into_iter().find(|figures| figures.name == "api").unwrap();
    assert!(api.leased_checks > 1_000 && api.units_expired > 0 && api.units_returned > 0, "{api:?}");
    assert_eq!(api.units_held, 0, "every unit given back: {api:?}");
    assert_adds_up(&api, spent["api"]).unwrap();
}
