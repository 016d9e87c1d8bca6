//! [`LeasedStore`]: any shared store, with leases in front of it.

use super::by_limit::LimitLeaseFigures;
use super::counters::LeaseFigures;
use super::held::Unspent;
use super::ledger::{Ledger, Spend};
use super::terms;
use crate::store::{Check, GiveBack, LeaseAnswer, Store, StoreError, Verdict};
use crate::{Clock, Key, Limit, Timestamp};
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
/// Nothing runs between checks: once a lease period, call [`sweep`](Self::sweep) and
/// [`give_back`](Self::give_back) with [`Unspent::OfQuietKeys`] (and `give_back` with
/// [`Unspent::All`] before the process exits), or an idle process keeps its units out of
/// the others' reach until their window or bucket ends. In an async app,
/// `sluice_tower::sweep_in_background` runs both on the tokio runtime for as long as the
/// store is in use (docs/leases.md, "Giving back").
///
/// # Examples
///
/// Two processes sharing one store (here a memory store standing in for Redis) never
/// admit more than the limit between them:
///
/// ```
/// use sluice_core::lease::LeasedStore;
/// use sluice_core::{Alignment, Check, FixedWindow, Key, Limit, MemoryStore, Store, Timestamp};
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
///     let verdict = process.check(Check::new(key, &limits, Timestamp::from_micros(step * 100), 1)).await?;
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
    ledger: Arc<Ledger>,
    answers: AnswerClock,
}

/// The clock that times the store's answers ([`LeasedStore::with_clock`]); none by default.
#[derive(Clone, Default)]
struct AnswerClock(Option<Arc<dyn Fn() -> Timestamp + Send + Sync>>);

impl AnswerClock {
    /// When an answer to a request sent at `sent` came: now on the clock, or `sent` without
    /// one.
    fn received(&self, sent: Timestamp) -> Timestamp {
        self.0.as_ref().map_or(sent, |now| now().max(sent))
    }
}

impl std::fmt::Debug for AnswerClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "AnswerClock(set)" } else { "AnswerClock(none)" })
    }
}

impl<S: Store> LeasedStore<S> {
    /// Leases in front of `inner`, each covering at most `period` of this process's own
    /// traffic for a key. A zero `period` leases nothing: every check goes to `inner`.
    pub fn new(inner: S, period: Duration) -> Self {
        LeasedStore::with_capacity(inner, period, DEFAULT_LEASE_ENTRIES)
    }

    /// [`new`](Self::new), keeping at most `entries` keys' leases.
    pub fn with_capacity(inner: S, period: Duration, entries: usize) -> Self {
        LeasedStore { inner, ledger: Arc::new(Ledger::new(entries, period)), answers: AnswerClock::default() }
    }

    /// The same store, reading `clock` (the one the callers' `now` comes from) when the
    /// store's answer to a lease request comes: a leased decision's `reset_after` then
    /// counts from that instant, so that it never names one before the store's (without a
    /// clock it counts from the request's `now`, earlier by the request's round trip).
    #[must_use]
    pub fn with_clock(self, clock: impl Clock) -> Self {
        LeasedStore { answers: AnswerClock(Some(Arc::new(move || clock.now()))), ..self }
    }

    /// The store behind the leases.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// The same leases (one ledger, one set of counters) in front of another store, such
    /// as another connection to the same Redis: how the threads of one process share
    /// their leases.
    pub fn in_front_of<T: Store>(&self, inner: T) -> LeasedStore<T> {
        LeasedStore { inner, ledger: Arc::clone(&self.ledger), answers: self.answers.clone() }
    }

    /// The lease period.
    pub fn period(&self) -> Duration {
        self.ledger.period()
    }

    /// What the leases did so far.
    pub fn figures(&self) -> LeaseFigures {
        self.ledger.counters().figures()
    }

    /// What the leases did for each limit, by limit name (a lease granted to a set of
    /// limits counts under each of them), sorted by name.
    ///
    /// It walks every key's lease entry (a leased check counts in its entry, at no cost to
    /// the others). As with [`figures`](Self::figures), the counts are read one after the
    /// other while checks go on: a read that races a [`sweep`](Self::sweep) forgetting a
    /// key may count that key's leased checks twice or miss them, for that read only; a
    /// quiet store reads exactly.
    pub fn figures_by_limit(&self) -> Vec<LimitLeaseFigures> {
        self.ledger.figures_by_limit()
    }

    /// Keys (with their limits) this store keeps lease state for.
    pub fn entries(&self) -> usize {
        self.ledger.len()
    }

    /// Gives up the units that can no longer be spent at `now` and forgets keys idle for
    /// two periods (run it once a lease period, before [`give_back`](Self::give_back);
    /// checks give up a key's expired units themselves).
    pub fn sweep(&self, now: Timestamp) {
        self.ledger.sweep(now);
    }

    /// True when `check` may be leased.
    fn leases(&self, check: Check<'_>) -> bool {
        check.cost > 0 && !self.period().is_zero() && !check.limits.is_empty() && terms::leasable(check.limits)
    }

    /// Gives the unspent units of `which` keys back to the store (a key's units go back
    /// when this process saw no request for it over a period, or all of them at shutdown
    /// and when the limits change). Units the store cannot take back stay counted until
    /// their window or bucket ends, as expired ones do.
    pub async fn give_back(&self, now: Timestamp, which: Unspent) {
        for back in self.ledger.take_unspent(now, which) {
            let Ok(key) = Key::new(&back.key) else { continue };
            let returned = GiveBack::new(key, &back.limits, &back.receipts, back.leased, back.units, now);
            let taken = self.inner.give_back(returned).await.is_ok();
            self.ledger.count_given_back(&back.tally, back.units, taken);
        }
    }

    /// What `spent` (the ledger's answer for `check`) means: the leased decision, or the
    /// check to send to the store, asking for a lease when `check.lease > 0`.
    fn leased<'a>(&self, check: Check<'a>, spent: Spend) -> Result<Verdict, Miss<'a>> {
        match spent {
            Spend::Covered(verdict) => Ok(verdict),
            Spend::Ask { extra } => Err(Miss::Ask(check.lease(extra, self.period()))),
            Spend::Wait(listener) => Err(Miss::Wait(listener)),
        }
    }

    /// Decides `check` from held units, or through the store: after waiting for the lease
    /// request in flight for its key, when there is one.
    async fn decide(&self, check: Check<'_>, missed: Miss<'_>) -> Result<Verdict, StoreError> {
        let asked = match missed {
            Miss::Ask(asked) => asked,
            Miss::Wait(listener) => {
                listener.await;
                match self.leased(check, self.ledger.spend_after_waiting(check)) {
                    Ok(verdict) => return Ok(verdict),
                    Err(Miss::Ask(asked)) => asked,
                    Err(Miss::Wait(_)) => check,
                }
            }
        };
        self.lease(asked).await
    }

    /// Asks the store for the lease `check` carries, and takes the answer in (even when no
    /// unit was asked for: it says what remains). A lease request that fails, or whose
    /// future is dropped, ends so (the checks waiting for it try again).
    async fn lease(&self, check: Check<'_>) -> Result<Verdict, StoreError> {
        let mut unanswered = Unanswered { ledger: &self.ledger, check: (check.lease > 0).then_some(check) };
        let answer = self.inner.check_and_lease(check).await;
        self.ledger.counters().asked_store(answer.as_ref().ok().map(|answer| answer.verdict.source));
        let answer: LeaseAnswer = answer?;
        unanswered.check = None;
        Ok(self.ledger.settle(check, &answer, self.answers.received(check.now)))
    }

    /// Asks the store for a plain check: these limits get no lease.
    async fn unleased(&self, check: Check<'_>) -> Result<Verdict, StoreError> {
        let verdict = self.inner.check(check).await;
        self.ledger.counters().asked_store(verdict.as_ref().ok().map(|verdict| verdict.source));
        verdict
    }
}

impl<S: Store> Store for LeasedStore<S> {
    fn check(&self, check: Check<'_>) -> impl Future<Output = Result<Verdict, StoreError>> + Send {
        let spent = self.leases(check).then(|| self.leased(check, self.ledger.spend(check)));
        async move {
            match spent {
                Some(Ok(verdict)) => Ok(verdict),
                Some(Err(missed)) => self.decide(check, missed).await,
                None => self.unleased(check).await,
            }
        }
    }

    fn reset(&self, key: Key<'_>, limits: &[Limit]) -> impl Future<Output = Result<(), StoreError>> + Send {
        self.inner.reset(key, limits)
    }

    #[inline]
    fn check_ready(&self, check: Check<'_>) -> Option<Result<Verdict, StoreError>> {
        if !self.leases(check) {
            return None;
        }
        self.ledger.spend_if_covered(check).map(Ok)
    }
}

/// What a check that held units did not cover does.
enum Miss<'a> {
    /// Sends this check (asking for the lease it carries) to the store.
    Ask(Check<'a>),
    /// Waits for the lease request in flight for its key first.
    Wait(event_listener::EventListener),
}

/// A lease request not answered yet: dropped so (failed, or its future dropped), it ends the
/// request in the ledger, so that the checks waiting for it do not wait for ever.
struct Unanswered<'a, 'c> {
    ledger: &'a Ledger,
    check: Option<Check<'c>>,
}

impl Drop for Unanswered<'_, '_> {
    fn drop(&mut self) {
        if let Some(check) = self.check {
            self.ledger.unanswered(check);
        }
    }
}
