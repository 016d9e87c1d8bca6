//! The leases one process holds, by key and set of limits: sharded, bounded.

use super::by_limit::{ByLimit, LimitLeaseFigures, Spent, Tally};
use super::counters::LeaseCounters;
use super::held::{Asked, Held, Miss, Returning, Unspent};
use crate::store::{Check, LeaseAnswer, Receipt, Verdict};
use crate::{Key, Limit, Timestamp};
use ahash::RandomState;
use parking_lot::Mutex;
use smallvec::SmallVec;
use std::collections::HashMap;
use std::time::Duration;

const SHARDS: usize = 64;

/// Leases by key and set of limits, at most `capacity` entries, each covering at most
/// `period` of this process's own traffic; what they do is counted in `counters`, and
/// for each limit in `by_limit`.
#[derive(Debug)]
pub(crate) struct Ledger {
    shards: Box<[Mutex<Shard>]>,
    hasher: RandomState,
    per_shard: usize,
    period: Duration,
    counters: LeaseCounters,
    by_limit: ByLimit,
}

#[derive(Debug, Default)]
struct Shard {
    /// By a hash of the limits and the key; the entry holds both to tell collisions apart.
    entries: HashMap<u64, Entry>,
}

#[derive(Debug)]
struct Entry {
    limits: Box<[Limit]>,
    key: Box<[u8]>,
    held: Held,
    /// Its limits' counters.
    tally: Tally,
    /// What its leased checks spent, not yet in `tally`.
    spent: Spent,
}

impl Entry {
    fn is_for(&self, limits: &[Limit], key: Key<'_>) -> bool {
        *self.key == *key.as_bytes() && self.limits.iter().map(Limit::id).eq(limits.iter().map(Limit::id))
    }
}

/// Unspent units to give back to the store: where they were debited.
#[derive(Debug)]
pub(crate) struct Return {
    pub(crate) key: Box<[u8]>,
    pub(crate) limits: Box<[Limit]>,
    /// Per limit, where the store debited them (store time).
    pub(crate) receipts: SmallVec<[Receipt; 2]>,
    /// The units the lease granted.
    pub(crate) leased: u64,
    /// The units given back.
    pub(crate) units: u64,
    /// Its limits' counters.
    pub(crate) tally: Tally,
}

/// What [`Ledger::spend`] found.
#[derive(Debug)]
pub(crate) enum Spend {
    /// Held units covered the request.
    Covered(Verdict),
    /// The store must decide; ask it for `extra` more units.
    Ask { extra: u64 },
    /// A lease request for the key is in flight: wait for it, then spend again
    /// ([`Ledger::spend_after_waiting`]).
    Wait(event_listener::EventListener),
}

impl Ledger {
    /// A ledger of at most `capacity` entries, of leases covering `period`.
    pub(crate) fn new(capacity: usize, period: Duration) -> Self {
        let shards = (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect();
        let per_shard = capacity.div_ceil(SHARDS).max(1);
        let (counters, by_limit) = (LeaseCounters::default(), ByLimit::default());
        Ledger { shards, hasher: RandomState::new(), per_shard, period, counters, by_limit }
    }

    /// The lease period.
    pub(crate) fn period(&self) -> Duration {
        self.period
    }

    /// What the leases did.
    pub(crate) fn counters(&self) -> &LeaseCounters {
        &self.counters
    }

    /// What the leases did for each limit, by name: the counters, and what the entries
    /// held spent (a walk of every entry).
    pub(crate) fn figures_by_limit(&self) -> Vec<LimitLeaseFigures> {
        let mut live = HashMap::new();
        for shard in self.shards.iter() {
            for entry in shard.lock().entries.values() {
                entry.tally.add_live(entry.spent, &mut live);
            }
        }
        self.by_limit.figures(&live)
    }

    /// Spends held units on `check`, or says how much to ask the store for, or to wait for
    /// the lease request in flight for its key.
    pub(crate) fn spend(&self, check: Check<'_>) -> Spend {
        let period = self.period;
        self.spend_or(check, |held| held.wanted(check.now, check.cost, period, false))
    }

    /// [`spend`](Self::spend) once the lease request `check` waited for was answered: never
    /// waits again.
    pub(crate) fn spend_after_waiting(&self, check: Check<'_>) -> Spend {
        let period = self.period;
        self.spend_or(check, |held| held.wanted(check.now, check.cost, period, true))
    }

    /// Ends the lease request `check` made without an answer to take in (it failed, or its
    /// future was dropped): the checks waiting for it try again.
    pub(crate) fn unanswered(&self, check: Check<'_>) {
        let (hash, shard) = self.shard(check.limits, check.key);
        if let Some(entry) = shard.lock().entries.get_mut(&hash).filter(|entry| entry.is_for(check.limits, check.key)) {
            entry.held.answered();
        }
    }

    /// Spends held units on `check` when they cover it; changes nothing otherwise (the
    /// request is not counted: its check will be).
    pub(crate) fn spend_if_covered(&self, check: Check<'_>) -> Option<Verdict> {
        match self.spend_or(check, |_| Miss::Ask(0)) {
            Spend::Covered(verdict) => Some(verdict),
            Spend::Ask { .. } | Spend::Wait(_) => None,
        }
    }

    fn spend_or(&self, check: Check<'_>, missed: impl FnOnce(&mut Held) -> Miss) -> Spend {
        let Check { key, limits, now, cost, .. } = check;
        let (hash, shard) = self.shard(limits, key);
        let mut shard = shard.lock();
        if !shard.entries.contains_key(&hash) && !self.make_room(&mut shard, now) {
            return Spend::Ask { extra: 0 };
        }
        let entry = shard.entries.entry(hash).or_insert_with(|| Entry {
            limits: limits.into(),
            key: key.as_bytes().into(),
            held: Held::new(now),
            tally: self.by_limit.tally(limits),
            spent: Spent::default(),
        });
        if !entry.is_for(limits, key) {
            return Spend::Ask { extra: 0 };
        }
        match entry.held.spend(now, cost, self.period) {
            Some(verdict) => {
                self.counters.leased_check(cost);
                entry.spent.check(cost);
                Spend::Covered(verdict)
            }
            None => match missed(&mut entry.held) {
                Miss::Ask(extra) => Spend::Ask { extra },
                Miss::Wait(listener) => Spend::Wait(listener),
            },
        }
    }

    /// Takes in the store's `answer` to `check` (which asked for `check.lease` units),
    /// `received` at this process's time.
    pub(crate) fn settle(&self, check: Check<'_>, answer: &LeaseAnswer, received: Timestamp) -> Verdict {
        let Check { key, limits, now, .. } = check;
        let (hash, shard) = self.shard(limits, key);
        let mut shard = shard.lock();
        let Some(entry) = shard.entries.get_mut(&hash).filter(|entry| entry.is_for(limits, key)) else {
            return answer.verdict;
        };
        let expired = entry.held.expire(now);
        let asked = Asked { now, received, extra: check.lease, period: self.period };
        let (verdict, settled) = entry.held.settle(limits, asked, answer);
        self.count_leased(&entry.tally, settled.leased, expired + settled.dropped);
        verdict
    }

    /// Gives up every held unit that can no longer be spent at `now`, and forgets idle
    /// entries.
    pub(crate) fn sweep(&self, now: Timestamp) {
        for shard in self.shards.iter() {
            self.forget_idle(&mut shard.lock(), now);
        }
    }

    /// Takes the unspent units of `which` keys, to give them back.
    pub(crate) fn take_unspent(&self, now: Timestamp, which: Unspent) -> Vec<Return> {
        let mut returns = Vec::new();
        for shard in self.shards.iter() {
            for entry in shard.lock().entries.values_mut() {
                for Returning { units, leased, receipts } in entry.held.take_unspent(now, self.period, which) {
                    let (key, limits, tally) = (entry.key.clone(), entry.limits.clone(), entry.tally.clone());
                    returns.push(Return { key, limits, receipts, leased, units, tally });
                }
            }
        }
        returns
    }

    /// Entries held.
    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|shard| shard.lock().entries.len()).sum()
    }

    fn shard(&self, limits: &[Limit], key: Key<'_>) -> (u64, &Mutex<Shard>) {
        let ids: SmallVec<[u64; 2]> = limits.iter().map(|limit| limit.id().0).collect();
        let hash = self.hasher.hash_one((ids.as_slice(), key.as_bytes()));
        (hash, &self.shards[(hash >> 40) as usize % SHARDS])
    }

    /// Room in `shard` for one more entry: forgets idle ones when full. False when none is
    /// idle.
    fn make_room(&self, shard: &mut Shard, now: Timestamp) -> bool {
        if shard.entries.len() < self.per_shard {
            return true;
        }
        // Only entries that hold nothing spendable.
        self.forget_idle(shard, now);
        shard.entries.len() < self.per_shard
    }

    /// Gives up `shard`'s units that can no longer be spent at `now`, and forgets its idle
    /// entries.
    fn forget_idle(&self, shard: &mut Shard, now: Timestamp) {
        shard.entries.retain(|_, entry| {
            self.count_leased(&entry.tally, 0, entry.held.expire(now));
            let keep = !entry.held.is_idle(now, self.period);
            if !keep {
                entry.tally.retire(entry.spent);
            }
            keep
        });
    }

    /// Counts `leased` units newly leased and `expired` ones given up, service-wide and
    /// in `tally`.
    fn count_leased(&self, tally: &Tally, leased: u64, expired: u64) {
        self.counters.leased(leased);
        self.counters.expired(expired);
        tally.leased(leased);
        tally.expired(expired);
    }

    /// Counts `units` given back (`returned`) or that the store could not take back.
    pub(crate) fn count_given_back(&self, tally: &Tally, units: u64, returned: bool) {
        if returned {
            self.counters.returned(units);
            tally.returned(units);
        } else {
            self.counters.expired(units);
            tally.expired(units);
        }
    }
}
