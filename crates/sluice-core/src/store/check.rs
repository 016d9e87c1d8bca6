//! The one request value every store takes: a [`Check`], and a lease's return, [`GiveBack`].

use crate::{Key, Limit, Timestamp};

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
}

impl<'a> Check<'a> {
    /// A check of `key` against `limits` at `now` for `cost` units, asking no lease.
    #[inline]
    pub fn new(key: Key<'a>, limits: &'a [Limit], now: Timestamp, cost: u64) -> Self {
        Check { key, limits, now, cost, lease: 0 }
    }

    /// The same check, asking for `units` more as a lease.
    #[inline]
    #[must_use]
    pub fn lease(self, units: u64) -> Self {
        Check { lease: units, ..self }
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
    /// Per limit, the start (µs, the store's clock) of the window or bucket they were
    /// debited in: a state that no longer counts it takes nothing back.
    pub debited_in: &'a [u64],
    /// The units given back, under every limit.
    pub units: u64,
}

impl<'a> GiveBack<'a> {
    /// `units` of `key` given back under each of `limits`, debited in the window or bucket
    /// starting at `debited_in[i]`.
    pub fn new(key: Key<'a>, limits: &'a [Limit], debited_in: &'a [u64], units: u64) -> Self {
        GiveBack { key, limits, debited_in, units }
    }
}
