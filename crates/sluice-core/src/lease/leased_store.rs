//! [`LeasedStore`]: any shared store, with leases in front of it.

use super::counters::{LeaseCounters, LeaseFigures};
use super::held::Unspent;
use super::ledger::{Ledger, Spend};
use super::terms;
use crate::store::{LeaseAnswer, Store, StoreError, Verdict};
use crate::{Key, Limit, Timestamp};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// Leases kept by default, across keys: enough for every hot key of a busy server. A key
/// that finds the ledger full of live leases is checked at the store (exactly, unleased).
pub const DEFAULT_LEASE_ENTRIES: usize = 65_536;

/// A store with quota leases in front of it (module docs: [`crate::lease`]).
///
/// Checks of limits that can be leased exactly ([`check_leasable`](super::check_leasable))
/// are answered from units this process leased while they last, and go to `inner`
/// otherwise, asking it for a lease of about `period` of this process's own traffic for
/// the key; other checks, peeks (cost 0) and resets go to `inner` unchanged.
///
/// Time is the `now` the caller passes, which must not run backwards (use
/// [`SystemClock`](crate::SystemClock), which does not): a lease's life is measured on it.
///
/// # Examples
///
/// Two processes sharing one store (here a memory store standing in for Redis) never
/// admit more than the limit between them:
///
/// ```
/// use sluice_core::lease::LeasedStore;
/// use sluice_core::{Alignment, FixedWindow, Key, Limit, MemoryStore, Store, Timestamp};
/// use std::{sync::Arc, time::Duration};
///
/// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
/// let shared = Arc::new(MemoryStore::new());
/// let period = Duration::from_millis(100);
/// let (one, two) = (LeasedStore::new(shared.clone(), period), LeasedStore::new(shared, period));
/// let window = FixedWindow::new(100, Duration::from_secs(60), Alignment::Aligned, Duration::ZERO)?;
/// let limits = [Limit::new("api", window)];
/// let key = Key::new(b"tenant-7")?;
/// let mut admitted = 0;
/// for step in 0..300u64 {
///     let process = if step % 2 == 0 { &one } else { &two };
///     let verdict = process.check(key, &limits, Timestamp::from_micros(step * 100), 1).await?;
///     admitted += u64::from(verdict.decision.allowed);
/// }
/// assert_eq!(admitted, 100);
/// assert!(one.figures().leased_checks > 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct LeasedStore<S> {
    inner: S,
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    period: Duration,
    ledger: Ledger,
    counters: LeaseCounters,
}

impl<S: Store> LeasedStore<S> {
    /// Leases in front of `inner`, each covering at most `period` of this process's own
    /// traffic for a key. A zero `period` leases nothing: every check goes to `inner`.
    pub fn new(inner: S, period: Duration) -> Self {
        LeasedStore::with_capacity(inner, period, DEFAULT_LEASE_ENTRIES)
    }

    /// [`new`](Self::new), keeping at most `entries` keys' leases.
    pub fn with_capacity(inner: S, period: Duration, entries: usize) -> Self {
        let shared = Shared { period, ledger: Ledger::new(entries), counters: LeaseCounters::default() };
        LeasedStore { inner, shared: Arc::new(shared) }
    }

    /// The store behind the leases.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// The same leases (one ledger, one set of counters) in front of another store, such
    /// as another connection to the same Redis: how the threads of one process share
    /// their leases.
    pub fn in_front_of<T: Store>(&self, inner: T) -> LeasedStore<T> {
        LeasedStore { inner, shared: Arc::clone(&self.shared) }
    }

    /// The lease period.
    pub fn period(&self) -> Duration {
        self.shared.period
    }

    /// What the leases did so far.
    pub fn figures(&self) -> LeaseFigures {
        self.shared.counters.figures()
    }

    /// Keys (with their limits) this store keeps lease state for.
    pub fn entries(&self) -> usize {
        self.shared.ledger.len()
    }

    /// Gives up the units that can no longer be spent at `now` and forgets keys idle for
    /// two periods (run it now and then; checks give up a key's expired units themselves).
    pub fn sweep(&self, now: Timestamp) {
        self.shared.ledger.sweep(now, (self.shared.period, &self.shared.counters));
    }

    /// True when requests of `cost` against `limits` may be leased.
    fn leases(&self, limits: &[Limit], cost: u64) -> bool {
        cost > 0 && !self.shared.period.is_zero() && !limits.is_empty() && terms::leasable(limits)
    }

    /// Gives the unspent units of `which` keys back to the store (a key's units go back
    /// when this process saw no request for it over a period, or all of them at shutdown
    /// and when the limits change). Units the store cannot take back stay counted until
    /// their window or bucket ends, as expired ones do.
    pub async fn give_back(&self, now: Timestamp, which: Unspent) {
        let shared = &*self.shared;
        for back in shared.ledger.take_unspent(now, shared.period, which) {
            let Ok(key) = Key::new(&back.key) else { continue };
            match self.inner.give_back(key, &back.limits, &back.debited_in, back.units).await {
                Ok(()) => shared.counters.returned(back.units),
                Err(_) => shared.counters.expired(back.units),
            }
        }
    }

    /// The leased decision, when held units cover the request; `Err` with the units to
    /// ask the store for otherwise (`None`: no lease for these limits).
    fn spend(&self, key: Key<'_>, limits: &[Limit], now: Timestamp, cost: u64) -> Result<Verdict, Option<u64>> {
        let shared = &*self.shared;
        if !self.leases(limits, cost) {
            return Err(None);
        }
        match shared.ledger.spend(limits, key, (now, cost), (shared.period, &shared.counters)) {
            Spend::Covered(verdict) => {
                shared.counters.leased_check(cost);
                Ok(verdict)
            }
            Spend::Ask { extra } => Err(Some(extra)),
        }
    }

    /// Asks the store: for `extra` more units when `Some` (the answer taken in, even when
    /// no unit was asked for: it says what remains), or a plain check.
    async fn ask(
        &self,
        key: Key<'_>,
        limits: &[Limit],
        (now, cost): (Timestamp, u64),
        extra: Option<u64>,
    ) -> Result<Verdict, StoreError> {
        let shared = &*self.shared;
        shared.counters.store_call();
        let Some(extra) = extra else {
            return self.inner.check(key, limits, now, cost).await;
        };
        let answer: LeaseAnswer = self.inner.check_and_lease(key, limits, now, cost, extra).await?;
        let ledger = &shared.ledger;
        Ok(ledger.settle(limits, key, now, (extra, &answer), &shared.counters))
    }
}

impl<S: Store> Store for LeasedStore<S> {
    fn check(
        &self,
        key: Key<'_>,
        limits: &[Limit],
        now: Timestamp,
        cost: u64,
    ) -> impl Future<Output = Result<Verdict, StoreError>> + Send {
        let spent = self.spend(key, limits, now, cost);
        async move {
            match spent {
                Ok(verdict) => Ok(verdict),
                Err(extra) => self.ask(key, limits, (now, cost), extra).await,
            }
        }
    }

    fn reset(&self, key: Key<'_>, limits: &[Limit]) -> impl Future<Output = Result<(), StoreError>> + Send {
        self.inner.reset(key, limits)
    }

    #[inline]
    fn check_ready(
        &self,
        key: Key<'_>,
        limits: &[Limit],
        now: Timestamp,
        cost: u64,
    ) -> Option<Result<Verdict, StoreError>> {
        if !self.leases(limits, cost) {
            return None;
        }
        let shared = &*self.shared;
        let verdict = shared.ledger.spend_if_covered(limits, key, (now, cost), (shared.period, &shared.counters))?;
        shared.counters.leased_check(cost);
        Some(Ok(verdict))
    }
}
