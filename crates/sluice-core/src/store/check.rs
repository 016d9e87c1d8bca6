//! The one request value every store takes: a [`Check`], and a lease's return, [`GiveBack`].

use crate::{Key, Limit, Timestamp};
use std::time::Duration;

/// One request at the store seam: `key` checked against every limit in `limits` at `now`,
/// for `cost` units, all or nothing (docs/semantics.md), and the units to lease with it.
///
/// Stores, the [`LeasedStore`](crate::lease::LeasedStore) and the callers of
/// [`Store`](crate::Store) pass this one value, as a tower service passes one request.
///
/// # Examples
///
/// ```
/// use sluice_core::store::Check;
/// use sluice_core::{Key, Limit, MemoryStore, SlidingLog, SlidingLogVariant, Store, Timestamp};
/// use std::time::Duration;
///
/// let limits = [Limit::new("api", SlidingLog::new(5, Duration::from_secs(1), SlidingLogVariant::Accepted)?)];
/// let check = Check::new(Key::new(b"alice")?, &limits, Timestamp::from_micros(1), 2);
/// let verdict = MemoryStore::new().check_ready(check).expect("the memory store decides at once")?;
/// assert_eq!(verdict.decision.remaining, 3);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct Check<'a> {
    /// The key whose states are checked.
    pub key: Key<'a>,
    /// The limits checked together; must not be empty.
    pub limits: &'a [Limit],
    /// The time of the check.
    pub now: Timestamp,
    /// The request's cost (0: a read-only peek).
    pub cost: u64,
    /// Units to debit beyond `cost` as a lease, in the same atomic step, when `cost + lease`
    /// fits every limit ([`Store::check_and_lease`](crate::Store::check_and_lease)); 0 asks
    /// for none. [`Store::check`](crate::Store::check) ignores it.
    pub lease: u64,
    /// How long the leased units may be spent after the store's decision: where the store
    /// holds them apart ([`LeaseTerms::Held`](crate::algorithm::LeaseTerms::Held)), it counts
    /// them as spent, at the latest, this long after it decided.
    pub lease_period: Duration,
}

impl<'a> Check<'a> {
    /// A check of `key` against `limits` at `now` for `cost` units, asking no lease.
    #[inline]
    pub fn new(key: Key<'a>, limits: &'a [Limit], now: Timestamp, cost: u64) -> Self {
        Check { key, limits, now, cost, lease: 0, lease_period: Duration::ZERO }
    }

    /// The same check, asking for `units` more as a lease, to be spent within `period` of
    /// the store's decision.
    #[inline]
    #[must_use]
    pub fn lease(self, units: u64, period: Duration) -> Self {
        Check { lease: units, lease_period: period, ..self }
    }
}

/// A lease's unspent units, given back to the store that debited them
/// ([`Store::give_back`](crate::Store::give_back), docs/leases.md).
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct GiveBack<'a> {
    /// The key the units were leased for.
    pub key: Key<'a>,
    /// The limits they were debited under.
    pub limits: &'a [Limit],
    /// Per limit, where the store debited the lease. A state that no longer holds it takes
    /// nothing back.
    pub receipts: &'a [Receipt],
    /// The units the lease granted.
    pub leased: u64,
    /// The units given back (never spent), under every limit.
    pub units: u64,
    /// The time of the give-back (a store with its own clock, such as Redis, uses its own).
    pub now: Timestamp,
}

impl<'a> GiveBack<'a> {
    /// `units` of `key` given back at `now` under each of `limits`, of a lease of `leased`
    /// units debited where `receipts[i]` says.
    pub fn new(
        key: Key<'a>,
        limits: &'a [Limit],
        receipts: &'a [Receipt],
        leased: u64,
        units: u64,
        now: Timestamp,
    ) -> Self {
        GiveBack { key, limits, receipts, leased, units, now }
    }
}

/// Where a store debited one limit's share of a lease: what a [`GiveBack`] names, so that
/// units go back only into the state that counted them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Receipt {
    /// µs, the store's clock: the start of the window or bucket the units were debited in,
    /// or the lease's deadline where the store holds leases
    /// ([`LeaseTerms::debited_in`](crate::algorithm::LeaseTerms::debited_in)).
    pub debited_in: u64,
    /// The stamp of the state that debited them, from stores that can lose a state and make
    /// a new one for the same window (Redis: a flush, a restart without persistence, a
    /// failover); 0 from stores that cannot.
    pub stamp: u64,
}
