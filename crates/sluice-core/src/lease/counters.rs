//! What leases did: counted by a [`LeasedStore`](super::LeasedStore), read as figures.

use crate::Source;
use std::sync::atomic::{AtomicU64, Ordering};

/// Counts of a [`LeasedStore`](super::LeasedStore)'s work since it was built.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseFigures {
    /// Checks decided from leased units, without the store.
    pub leased_checks: u64,
    /// Checks that went to the store (with or without a lease request), answered by it or
    /// by its failure mode; not those its own local cache answered ([`cache_answers`](Self::cache_answers)).
    pub store_calls: u64,
    /// Checks the store answered from a local cache without calling out, such as the Redis
    /// store's cache of blocked keys ([`Source::Cache`](crate::Source::Cache)).
    pub cache_answers: u64,
    /// Units leased: debited by the store beyond the requests' own costs, to spend here.
    pub units_leased: u64,
    /// Leased units that could no longer be spent (their window or bucket ended) and were
    /// given up unspent.
    pub units_expired: u64,
    /// Unspent leased units given back to the store (their key went quiet, or the process
    /// stopped or reloaded).
    pub units_returned: u64,
    /// Leased units held now, not yet spent or given up.
    pub units_held: u64,
}

/// The live counters behind [`LeaseFigures`].
#[derive(Debug, Default)]
pub(crate) struct LeaseCounters {
    leased_checks: AtomicU64,
    store_calls: AtomicU64,
    cache_answers: AtomicU64,
    units_leased: AtomicU64,
    units_expired: AtomicU64,
    units_returned: AtomicU64,
    units_spent: AtomicU64,
}

impl LeaseCounters {
    pub(crate) fn leased_check(&self, cost: u64) {
        self.leased_checks.fetch_add(1, Ordering::Relaxed);
        self.units_spent.fetch_add(cost, Ordering::Relaxed);
    }

    /// Counts a check sent to the store, by who answered it (`None`: an error): its local
    /// cache, or the store (or its failure mode).
    pub(crate) fn asked_store(&self, answered_by: Option<Source>) {
        let counter = if answered_by == Some(Source::Cache) { &self.cache_answers } else { &self.store_calls };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn leased(&self, units: u64) {
        self.units_leased.fetch_add(units, Ordering::Relaxed);
    }

    pub(crate) fn expired(&self, units: u64) {
        if units > 0 {
            self.units_expired.fetch_add(units, Ordering::Relaxed);
        }
    }

    pub(crate) fn returned(&self, units: u64) {
        self.units_returned.fetch_add(units, Ordering::Relaxed);
    }

    pub(crate) fn figures(&self) -> LeaseFigures {
        let leased = self.units_leased.load(Ordering::Relaxed);
        let expired = self.units_expired.load(Ordering::Relaxed);
        let spent = self.units_spent.load(Ordering::Relaxed);
        let returned = self.units_returned.load(Ordering::Relaxed);
        LeaseFigures {
            leased_checks: self.leased_checks.load(Ordering::Relaxed),
            store_calls: self.store_calls.load(Ordering::Relaxed),
            cache_answers: self.cache_answers.load(Ordering::Relaxed),
            units_leased: leased,
            units_expired: expired,
            units_returned: returned,
            units_held: leased.saturating_sub(expired).saturating_sub(spent).saturating_sub(returned),
        }
    }
}
