//! `sweep_in_background`: an instance that goes idle gives its leased units back by itself,
//! with nothing but time passing (issue 42: an idle app instance held 142 of 1 000 units
//! while the other was refused), and the task ends once the store is dropped. Time is
//! tokio's, paused: the tests move it, and the clock the checks read follows it.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

use sluice_tower::sluice_core::Check;
use sluice_tower::{
    Alignment, Clock, FixedWindow, Key, LeasedStore, Limit, MemoryStore, Store, Timestamp, sweep_in_background,
};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

const PERIOD: Duration = Duration::from_millis(100);
const LIMIT: u64 = 1_000;
/// Units the first instance spends, one request a millisecond.
const SPENT: u64 = 200;

/// A clock that reads tokio's time (paused here), from 2026-01-01.
#[derive(Clone, Debug)]
struct TokioClock(Instant);

impl Clock for TokioClock {
    fn now(&self) -> Timestamp {
        let elapsed = u64::try_from(self.0.elapsed().as_micros()).unwrap();
        Timestamp::from_micros(1_767_225_600_000_000 + elapsed)
    }

    fn sleep(&self, duration: Duration) -> impl Future<Output = ()> + Send {
        tokio::time::sleep(duration)
    }
}

type Shared = Arc<MemoryStore>;

fn limits() -> [Limit; 1] {
    [Limit::new(
        "api",
        FixedWindow::new(LIMIT, Duration::from_secs(3_600), Alignment::Anchored, Duration::ZERO).unwrap(),
    )]
}

async fn check(store: &LeasedStore<Shared>, clock: &TokioClock) -> bool {
    let limits = limits();
    let check = Check::new(Key::new(b"tenant").unwrap(), &limits, clock.now(), 1);
    store.check(check).await.unwrap().decision.allowed
}

/// A leased store on `shared` that sweeps itself, its sweep started (its ticks fall on
/// whole lease periods from now).
async fn sweeping(shared: &Shared, clock: &TokioClock) -> Arc<LeasedStore<Shared>> {
    let store = sweep_in_background(LeasedStore::new(Arc::clone(shared), PERIOD), clock.clone());
    tokio::task::yield_now().await;
    store
}

/// [`SPENT`] requests through `one`, a millisecond apart: it leases units as it goes, and
/// holds some when its traffic stops. Returns how many.
async fn busy_then_idle(one: &LeasedStore<Shared>, clock: &TokioClock) -> u64 {
    for _ in 0..SPENT {
        assert!(check(one, clock).await);
        tokio::time::advance(Duration::from_millis(1)).await;
    }
    let held = one.figures().units_held;
    assert!(held > 0, "{:?}", one.figures());
    held
}

/// What a second instance on `shared` admits now, asking until it is refused.
async fn the_other_admits(shared: &Shared, clock: &TokioClock) -> u64 {
    let two = LeasedStore::new(Arc::clone(shared), PERIOD);
    let mut admitted = 0;
    while check(&two, clock).await {
        admitted += 1;
    }
    admitted
}

#[tokio::test(start_paused = true)]
async fn an_idle_instance_gives_its_units_back_with_nothing_but_time_passing() {
    let (shared, clock) = (Shared::default(), TokioClock(Instant::now()));
    let one = sweeping(&shared, &clock).await;
    let held = busy_then_idle(&one, &clock).await;
    // The key is quiet a period after its last request, at 299 ms: the tick at 300 ms
    // gives its units back.
    tokio::time::sleep(PERIOD * 2).await;
    assert_eq!((one.figures().units_held, one.figures().units_returned), (0, held), "{:?}", one.figures());
    assert_eq!(the_other_admits(&shared, &clock).await, LIMIT - SPENT);
}

#[tokio::test(start_paused = true)]
async fn without_the_sweep_an_idle_instance_keeps_its_units() {
    let (shared, clock) = (Shared::default(), TokioClock(Instant::now()));
    let one = LeasedStore::new(Arc::clone(&shared), PERIOD);
    let held = busy_then_idle(&one, &clock).await;
    tokio::time::sleep(PERIOD * 2).await;
    assert_eq!(one.figures().units_held, held);
    assert_eq!(the_other_admits(&shared, &clock).await, LIMIT - SPENT - held);
}

#[tokio::test(start_paused = true)]
async fn dropping_the_store_gives_everything_back_and_ends_the_task() {
    let (shared, clock) = (Shared::default(), TokioClock(Instant::now()));
    let tasks = || tokio::runtime::Handle::current().metrics().num_alive_tasks();
    let before = tasks();
    let one = sweeping(&shared, &clock).await;
    assert_eq!(tasks(), before + 1, "the sweep runs");
    // Cloned as a limiter and its layer's services would: every clone is a handle.
    let handles = vec![Arc::clone(&one), Arc::clone(&one)];
    // Requests from 50 ms to 249 ms; dropped at 250 ms.
    tokio::time::advance(PERIOD / 2).await;
    busy_then_idle(&one, &clock).await;
    drop((one, handles));
    // The tick at 300 ms finds the store dropped. The key would be quiet only at 349 ms:
    // only the give-back on drop can have returned its units by 325 ms.
    tokio::time::sleep(PERIOD * 3 / 4).await;
    assert_eq!(tasks(), before, "the sweep ended");
    assert_eq!(the_other_admits(&shared, &clock).await, LIMIT - SPENT);
}
