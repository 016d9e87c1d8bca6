//! Concurrent checks of one key behind a `LeasedStore`: while a lease request for the key is
//! in flight, the checks that miss held units wait for its answer rather than each going to
//! the store (and each leasing a period's demand); a request that is dropped unanswered lets
//! them go on.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

use sluice_core::lease::LeasedStore;
use sluice_core::store::{Check, LeaseAnswer, Store, StoreError, Verdict};
use sluice_core::{Key, Limit, MemoryStore, Timestamp, TokenBucket, TokenBucketSettings};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::watch;

/// A memory store whose lease requests wait while its gate is closed, counting every call.
struct Gated {
    inner: MemoryStore,
    open: watch::Sender<bool>,
    calls: AtomicU64,
}

impl Store for Gated {
    fn check(&self, check: Check<'_>) -> impl Future<Output = Result<Verdict, StoreError>> + Send {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.check(check)
    }

    fn reset(&self, key: Key<'_>, limits: &[Limit]) -> impl Future<Output = Result<(), StoreError>> + Send {
        self.inner.reset(key, limits)
    }

    fn check_and_lease(&self, check: Check<'_>) -> impl Future<Output = Result<LeaseAnswer, StoreError>> + Send {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let mut open = self.open.subscribe();
        async move {
            open.wait_for(|open| *open).await.unwrap();
            self.inner.check_and_lease(check).await
        }
    }
}

const PERIOD: Duration = Duration::from_millis(100);

/// A token bucket far from empty: its leases are spendable for a period, so that a check
/// a period after the last lease misses held units.
fn limits() -> [Limit; 1] {
    let settings =
        TokenBucketSettings { capacity: 1_000_000, refill_amount: 1_000, refill_interval: Duration::from_millis(1) };
    [Limit::new("api", TokenBucket::new(settings).unwrap())]
}

fn at(ms: u64) -> Timestamp {
    Timestamp::from_micros(1_000_000 + ms * 1_000)
}

/// A leased store over a gated one (open), warmed up: 100 checks 1 ms apart, so that its
/// next lease is sized to its demand.
async fn warmed_up() -> (Arc<Gated>, LeasedStore<Arc<Gated>>) {
    let gated = Arc::new(Gated { inner: MemoryStore::new(), open: watch::channel(true).0, calls: AtomicU64::new(0) });
    let store = LeasedStore::new(Arc::clone(&gated), PERIOD);
    let limits = limits();
    for ms in 0..100 {
        store.check(Check::new(Key::new(b"tenant").unwrap(), &limits, at(ms), 1)).await.unwrap();
    }
    (gated, store)
}

/// Spawns `count` checks of the key at `now`.
fn spawn_checks(store: &LeasedStore<Arc<Gated>>, now: Timestamp, count: usize) -> Vec<tokio::task::JoinHandle<bool>> {
    (0..count)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move {
                let limits = limits();
                let check = Check::new(Key::new(b"tenant").unwrap(), &limits, now, 1);
                store.check(check).await.unwrap().decision.allowed
            })
        })
        .collect()
}

/// Lets every spawned task run until it waits.
async fn settle_tasks() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(flavor = "current_thread")]
async fn checks_that_miss_wait_for_the_lease_request_in_flight() {
    let (gated, store) = warmed_up().await;
    gated.open.send_replace(false);
    let before = gated.calls.load(Ordering::SeqCst);
    // Past the held units' period: every one of these misses them.
    let checks = spawn_checks(&store, at(300), 20);
    settle_tasks().await;
    assert_eq!(gated.calls.load(Ordering::SeqCst) - before, 1, "one lease request, the others wait");
    gated.open.send_replace(true);
    for check in checks {
        assert!(check.await.unwrap());
    }
    let calls = gated.calls.load(Ordering::SeqCst) - before;
    assert!(calls <= 2, "{calls} store calls for 20 concurrent checks: the lease answered the waiters");
}

#[tokio::test(flavor = "current_thread")]
async fn a_lease_request_dropped_unanswered_lets_its_waiters_go_on() {
    let (gated, store) = warmed_up().await;
    gated.open.send_replace(false);
    let before = gated.calls.load(Ordering::SeqCst);
    let asker = spawn_checks(&store, at(300), 1).remove(0);
    settle_tasks().await;
    let waiter = spawn_checks(&store, at(300), 1).remove(0);
    settle_tasks().await;
    assert_eq!(gated.calls.load(Ordering::SeqCst) - before, 1, "the second check waits");
    asker.abort();
    settle_tasks().await;
    assert_eq!(gated.calls.load(Ordering::SeqCst) - before, 2, "woken, the waiter asks the store itself");
    gated.open.send_replace(true);
    assert!(waiter.await.unwrap());
}
