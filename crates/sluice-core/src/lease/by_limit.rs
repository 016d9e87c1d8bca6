//! What leases did for each limit, by name: counted beside the store-wide
//! [`LeaseFigures`](super::LeaseFigures), read as [`LimitLeaseFigures`].
//!
//! A ledger entry resolves its limits' counters once, when it is made (a read lock and a
//! lookup per limit). A check its leased units cover adds to the entry's own [`Spent`], two
//! plain integers under the shard lock the check holds anyway: no atomic, no shared cache
//! line. The entry's spending goes into its limits' counters when it is forgotten, and a
//! reader adds that of the entries still held. The rarer events (units leased, given back,
//! given up) go straight to the limits' counters. A lease granted to a set of limits was
//! debited from each of them, so its units count under each limit of the set.

use crate::Limit;
use parking_lot::RwLock;
use smallvec::SmallVec;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// What leases did for one limit (all its definitions under one name) since the store was
/// built.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LimitLeaseFigures {
    /// The limit's name.
    pub name: String,
    /// Checks of the limit decided from leased units: store calls saved.
    pub leased_checks: u64,
    /// Units leased for the limit: debited by the store beyond the requests' own costs.
    pub units_leased: u64,
    /// Its leased units given up unspent when their window or bucket ended.
    pub units_expired: u64,
    /// Its unspent leased units given back to the store.
    pub units_returned: u64,
    /// Its leased units held now, not yet spent or given up.
    pub units_held: u64,
}

/// The live counters of one limit; its leased checks and units spent are those of the
/// entries forgotten (a reader adds those of the entries held).
#[derive(Debug, Default)]
pub(crate) struct LimitCounters {
    name: Arc<str>,
    leased_checks: AtomicU64,
    units_leased: AtomicU64,
    units_expired: AtomicU64,
    units_returned: AtomicU64,
    units_spent: AtomicU64,
}

/// What one entry's leased checks spent, kept under its shard's lock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Spent {
    checks: u64,
    units: u64,
}

impl Spent {
    /// Counts a check of `cost` covered by leased units.
    #[inline]
    pub(crate) fn check(&mut self, cost: u64) {
        self.checks += 1;
        self.units += cost;
    }
}

/// The counters of an entry's limits, resolved once.
#[derive(Clone, Debug, Default)]
pub(crate) struct Tally(SmallVec<[Arc<LimitCounters>; 2]>);

impl Tally {
    fn add(&self, units: u64, counter: impl Fn(&LimitCounters) -> &AtomicU64) {
        if units > 0 {
            for counters in &self.0 {
                counter(counters).fetch_add(units, Ordering::Relaxed);
            }
        }
    }

    /// Counts what a forgotten entry's leased checks spent.
    pub(crate) fn retire(&self, spent: Spent) {
        self.add(spent.checks, |counters| &counters.leased_checks);
        self.add(spent.units, |counters| &counters.units_spent);
    }

    /// Adds `spent`, an entry's still held, to `live` under each of its limits' names.
    pub(crate) fn add_live(&self, spent: Spent, live: &mut HashMap<Arc<str>, Spent>) {
        for counters in &self.0 {
            let sum = live.entry(Arc::clone(&counters.name)).or_default();
            (sum.checks, sum.units) = (sum.checks + spent.checks, sum.units + spent.units);
        }
    }

    /// Counts units newly leased.
    pub(crate) fn leased(&self, units: u64) {
        self.add(units, |counters| &counters.units_leased);
    }

    /// Counts units given up unspent.
    pub(crate) fn expired(&self, units: u64) {
        self.add(units, |counters| &counters.units_expired);
    }

    /// Counts units given back to the store.
    pub(crate) fn returned(&self, units: u64) {
        self.add(units, |counters| &counters.units_returned);
    }
}

/// Every limit's counters, by name, made the first time an entry names the limit. Limits
/// come from the configuration, so there are as many as it names.
#[derive(Debug, Default)]
pub(crate) struct ByLimit {
    counters: RwLock<HashMap<Arc<str>, Arc<LimitCounters>>>,
}

impl ByLimit {
    /// The counters of `limits`, made for those not seen before; a name listed twice is
    /// counted once.
    pub(crate) fn tally(&self, limits: &[Limit]) -> Tally {
        let mut tally = Tally::default();
        for (at, limit) in limits.iter().enumerate() {
            if !limits[..at].iter().any(|before| before.name() == limit.name()) {
                tally.0.push(self.of(limit.shared_name()));
            }
        }
        tally
    }

    fn of(&self, name: &Arc<str>) -> Arc<LimitCounters> {
        if let Some(counters) = self.counters.read().get(name) {
            return Arc::clone(counters);
        }
        let made = || Arc::new(LimitCounters { name: Arc::clone(name), ..LimitCounters::default() });
        Arc::clone(self.counters.write().entry(Arc::clone(name)).or_insert_with(made))
    }

    /// Each limit's figures, by name, with `live` what the entries held spent.
    pub(crate) fn figures(&self, live: &HashMap<Arc<str>, Spent>) -> Vec<LimitLeaseFigures> {
        let read = self.counters.read();
        let of = |(name, counters): (&Arc<str>, &Arc<LimitCounters>)| {
            counters.figures(name, live.get(name).copied().unwrap_or_default())
        };
        let mut figures: Vec<LimitLeaseFigures> = read.iter().map(of).collect();
        figures.sort_by(|one, other| one.name.cmp(&other.name));
        figures
    }
}

impl LimitCounters {
    fn figures(&self, name: &str, live: Spent) -> LimitLeaseFigures {
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let (leased, expired) = (read(&self.units_leased), read(&self.units_expired));
        let (spent, returned) = (read(&self.units_spent) + live.units, read(&self.units_returned));
        LimitLeaseFigures {
            name: name.to_owned(),
            leased_checks: read(&self.leased_checks) + live.checks,
            units_leased: leased,
            units_expired: expired,
            units_returned: returned,
            units_held: leased.saturating_sub(expired).saturating_sub(spent).saturating_sub(returned),
        }
    }
}
