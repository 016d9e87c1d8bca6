//! Where per-key state lives. The store owns atomicity; the algorithm owns the math.

mod check;
pub mod memory;

use crate::{Decision, Key, Limit, Timestamp};
pub use check::{Check, GiveBack, Receipt};
use std::future::Future;

/// A store of per-key states that decides requests atomically.
///
/// One async API for every store; a store that can decide without waiting (the memory
/// store) also answers through [`check_ready`](Store::check_ready).
pub trait Store: Send + Sync + 'static {
    /// Decides `check`: a request of `check.cost` for `check.key` against every limit in
    /// `check.limits` at `check.now`, all or nothing (docs/semantics.md): it is allowed only if
    /// every limit allows it, and a limit's state changes only if it is allowed (or the limit
    /// records rejected attempts). `check.lease` is ignored.
    ///
    /// `check.limits` must not be empty.
    fn check(&self, check: Check<'_>) -> impl Future<Output = Result<Verdict, StoreError>> + Send;

    /// Forgets `key`'s state for each of `limits` (an admin's "reset this key"): its next
    /// check starts fresh. Other keys, and other limits of this key, keep their state.
    /// Resetting a key that holds no state, or no limit at all, succeeds and changes nothing.
    ///
    /// Failure modes do not apply: a store that cannot forget says so
    /// ([`StoreError::Unavailable`]) instead of pretending it did.
    fn reset(&self, key: Key<'_>, limits: &[Limit]) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// [`check`](Self::check) without a future, when this store can decide at once: `Some`
    /// with the verdict `check` would give (and the same effect on the states), or `None`
    /// when deciding needs I/O, and nothing was checked: await `check` then.
    ///
    /// The one decide-now path. The memory store always answers here, so
    /// [`RateLimiter::check`](crate::RateLimiter::check) and the tower layer decide without
    /// building a future. A store that wraps another should forward this method, or its
    /// callers lose the shortcut (its `check` still works). The default answers `None`.
    ///
    /// # Examples
    ///
    /// ```
    /// use sluice_core::store::Check;
    /// use sluice_core::{Key, Limit, MemoryStore, SlidingLog, SlidingLogVariant, Store, Timestamp};
    /// use std::time::Duration;
    ///
    /// let limits = [Limit::new("api", SlidingLog::new(1, Duration::from_secs(1), SlidingLogVariant::Accepted)?)];
    /// let store = MemoryStore::new();
    /// let check = Check::new(Key::new(b"alice")?, &limits, Timestamp::from_micros(1), 1);
    /// let first = store.check_ready(check).expect("the memory store decides at once")?;
    /// assert!(first.decision.allowed);
    /// let second = store.check_ready(check).expect("the memory store decides at once")?;
    /// assert!(!second.decision.allowed);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    fn check_ready(&self, check: Check<'_>) -> Option<Result<Verdict, StoreError>> {
        let _ = check;
        None
    }

    /// [`check`](Self::check), and a lease in the same atomic step: when `cost + lease`
    /// fits every limit, the store debits `cost + lease` (as one admitted request of that
    /// cost) and answers each limit's decision for it in [`LeaseAnswer::leased`]; otherwise it
    /// decides `cost` alone, exactly as `check` would.
    ///
    /// Only for limits that record nothing on a rejection (see
    /// [`Policy::records_rejections`](crate::Policy::records_rejections)); for others, and
    /// with `lease == 0`, the store decides `cost` alone. The default grants no lease.
    /// [`LeasedStore`](crate::lease::LeasedStore) is the caller; docs/leases.md the argument.
    fn check_and_lease(&self, check: Check<'_>) -> impl Future<Output = Result<LeaseAnswer, StoreError>> + Send {
        let checked = self.check(check);
        async move { Ok(LeaseAnswer::unleased(checked.await?)) }
    }

    /// Takes back a lease's unspent units from the key's state under each limit, in the
    /// window or bucket they were debited in, where the state still counts it; nothing
    /// elsewhere (docs/leases.md). The default takes nothing back: the units stay counted
    /// until their window or bucket ends.
    fn give_back(&self, back: GiveBack<'_>) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = back;
        std::future::ready(Ok(()))
    }
}

impl<S: Store> Store for std::sync::Arc<S> {
    fn check(&self, check: Check<'_>) -> impl Future<Output = Result<Verdict, StoreError>> + Send {
        (**self).check(check)
    }

    fn reset(&self, key: Key<'_>, limits: &[Limit]) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).reset(key, limits)
    }

    #[inline]
    fn check_ready(&self, check: Check<'_>) -> Option<Result<Verdict, StoreError>> {
        (**self).check_ready(check)
    }

    fn check_and_lease(&self, check: Check<'_>) -> impl Future<Output = Result<LeaseAnswer, StoreError>> + Send {
        (**self).check_and_lease(check)
    }

    fn give_back(&self, back: GiveBack<'_>) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).give_back(back)
    }
}

/// What [`Store::check_and_lease`] answers.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseAnswer {
    /// The verdict for the request's own cost. When the lease was granted its decision
    /// is the store's for `cost + lease` (so `remaining` already excludes the leased units).
    pub verdict: Verdict,
    /// When the `lease` units were debited too: each limit's decision for `cost + lease`,
    /// in the order of `limits`. Empty when they were not (the verdict is then `check`'s).
    pub leased: Vec<Decision>,
    /// The time the store decided at (its own clock: Redis `TIME`, or the `now` given), when
    /// the lease was granted: with each decision's `reset_after`, where the units were
    /// debited, for [`Store::give_back`].
    pub decided_at: Option<Timestamp>,
    /// Per limit, the stamp of the state that debited the lease ([`Receipt::stamp`]),
    /// from stores that stamp their states; empty from the others.
    pub stamps: Vec<u64>,
}

impl LeaseAnswer {
    /// An answer with the verdict alone: no lease.
    pub fn unleased(verdict: Verdict) -> Self {
        LeaseAnswer { verdict, leased: Vec::new(), decided_at: None, stamps: Vec::new() }
    }

    /// An answer granting the lease, decided at `decided_at`: `leased` holds each limit's
    /// decision for `cost + lease`.
    pub fn granted(leased: Vec<Decision>, decided_at: Timestamp) -> Option<Self> {
        let verdict = Verdict::combine(&leased)?;
        Some(LeaseAnswer { verdict, leased, decided_at: Some(decided_at), stamps: Vec::new() })
    }

    /// The same answer, with the stamps of the states that debited the lease, one per limit.
    #[must_use]
    pub fn stamped(self, stamps: Vec<u64>) -> Self {
        LeaseAnswer { stamps, ..self }
    }
}

/// The outcome of a check against one or several limits.
///
/// Built with [`Verdict::new`] (or [`Verdict::combine`]) outside this crate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Verdict {
    /// The combined decision: the most restrictive limit's.
    pub decision: Decision,
    /// Index in `limits` of the limit whose decision is reported.
    pub limit: usize,
    /// Who decided: the store, or something standing in for it.
    pub source: Source,
}

impl Verdict {
    /// The `decision` of the limit at index `limit` of the limits checked, made by `source`.
    pub fn new(decision: Decision, limit: usize, source: Source) -> Self {
        Verdict { decision, limit, source }
    }

    /// The same verdict, attributed to `source`.
    #[must_use]
    pub fn with_source(self, source: Source) -> Self {
        Verdict { source, ..self }
    }

    /// Combines per-limit decisions made by the store into the most restrictive one, as
    /// it is (docs/semantics.md: "the reported decision is the most restrictive one"):
    /// rejections first, then the longest `retry_after`, then the fewest `remaining`; the
    /// first listed on ties.
    pub fn combine(decisions: &[Decision]) -> Option<Verdict> {
        let mut verdict = Verdict { decision: *decisions.first()?, limit: 0, source: Source::Store };
        for (index, decision) in decisions.iter().enumerate().skip(1) {
            if decision.is_more_restrictive_than(&verdict.decision) {
                verdict = Verdict { decision: *decision, limit: index, source: Source::Store };
            }
        }
        Some(verdict)
    }
}

/// Who made a decision.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Source {
    /// The store, from the key's state.
    #[default]
    Store,
    /// A local cache of keys the store rejected until a known time: the same decision the
    /// store would give, without a round trip.
    Cache,
    /// The store failed and the `open` failure mode allowed the request.
    FailedOpen,
    /// The store failed and the `closed` failure mode rejected the request.
    FailedClosed,
    /// The store failed and a local fallback store decided.
    Fallback,
    /// Units this process leased from the store (debited there when leased) covered the
    /// request: the store's own decision, made ahead (docs/leases.md).
    Lease,
}

impl Source {
    /// True when the store did not take part: it failed, and a failure mode decided.
    pub fn is_without_store(self) -> bool {
        matches!(self, Source::FailedOpen | Source::FailedClosed | Source::Fallback)
    }
}

/// A store that could not decide.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store could not be reached or did not answer in time.
    #[error("store unavailable")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The store answered something this version cannot read.
    #[error("store returned a malformed reply: {0}")]
    Malformed(String),
    /// The store cannot decide this request exactly (such as a time of 2^53 µs or more,
    /// beyond what Redis's Lua numbers hold).
    #[error("request refused by the store: {0}")]
    Refused(String),
    /// The request was not checked: `limits` was empty.
    #[error("no limit to check")]
    NoLimits,
    /// The memory store would need a new state for this key, and its shard is full of
    /// states that are limited: dropping one would lift a key's block, so the new key is
    /// refused until some are freed (as they stop being limited, or expire).
    ///
    /// Not transient: failing open on it would let a flood of new keys through.
    #[error(
        "the memory store is full of limited keys (max_keys {max_keys}, max_memory {max_memory} bytes): \
         new keys are refused until some are freed"
    )]
    Full {
        /// The store's cap on states.
        max_keys: usize,
        /// The store's cap on bytes.
        max_memory: usize,
    },
}

impl StoreError {
    /// True when the same request may succeed later (retry, or fail open meanwhile).
    pub fn is_transient(&self) -> bool {
        matches!(self, StoreError::Unavailable(_))
    }
}
