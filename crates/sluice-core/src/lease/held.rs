//! The units one process holds for one key and set of limits, and what it reports when
//! it spends them.

use super::parcel::{Parcel, Parcels};
use super::sizing::{Demand, LastWord, extra_units};
use super::terms;
use crate::algorithm::LeaseTerms;
use crate::store::{LeaseAnswer, Receipt, Source, Verdict};
use crate::{Decision, Limit, Timestamp};
use event_listener::{Event, EventListener};
use smallvec::SmallVec;
use std::sync::Arc;
use std::time::Duration;

/// Leased units of one key and set of limits, with what this process knows of them.
#[derive(Clone, Debug)]
pub(crate) struct Held {
    /// The units left to spend, by where the store debited them.
    parcels: Parcels,
    /// The store's decision for the last lease granted: what leased decisions report.
    quote: Option<Quote>,
    /// What the store said after its last decision here, and when.
    last_word: Option<(LastWord, Timestamp)>,
    /// This process's own recent demand for the key.
    demand: Demand,
    /// The lease request in flight for the key, while no answer has come: meanwhile (a
    /// period at most) other misses wait for it rather than ask for a lease of their own.
    asking: Option<Asking>,
}

/// A lease request sent and not yet answered.
#[derive(Clone, Debug)]
struct Asking {
    since: Timestamp,
    /// Notified when the answer is taken in, or the request failed or was dropped.
    answered: Arc<Event>,
}

/// What a check that held units did not cover does.
#[derive(Debug)]
pub(crate) enum Miss {
    /// Asks the store, for this many units beyond its cost.
    Ask(u64),
    /// Waits for the lease request in flight, then tries the held units again.
    Wait(EventListener),
}

/// Units a lease's answer changed: newly held, and given up to keep a key's parcels few
/// (they stay counted where they were debited until that ends).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Settled {
    pub(crate) leased: u64,
    pub(crate) dropped: u64,
}

/// A lease request, as [`Held::settle`] takes its answer in.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Asked {
    /// When it was sent: the lease's units are spendable for `period` from then.
    pub(crate) now: Timestamp,
    /// When its answer came (no earlier than `now`): leased decisions count the store's
    /// `reset_after` from then, so that they never name an instant before the store's.
    pub(crate) received: Timestamp,
    /// The units asked beyond the request's cost.
    pub(crate) extra: u64,
    /// The lease period.
    pub(crate) period: Duration,
}

/// Unspent units to give back, with where and as what lease they were debited.
#[derive(Debug)]
pub(crate) struct Returning {
    pub(crate) units: u64,
    pub(crate) leased: u64,
    pub(crate) receipts: SmallVec<[Receipt; 2]>,
}

/// Which keys' unspent units to give back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unspent {
    /// Those of keys this process saw no request for over a whole period.
    OfQuietKeys,
    /// All of them (at shutdown, or when the configuration changes).
    All,
}

/// The store's decision for a granted lease, the limit it reported, and when.
#[derive(Clone, Copy, Debug)]
struct Quote {
    decision: Decision,
    limit: usize,
    at: Timestamp,
}

impl Held {
    /// Nothing held yet; demand counted from `now`.
    pub(crate) fn new(now: Timestamp) -> Self {
        Held { parcels: Parcels::default(), quote: None, last_word: None, demand: Demand::starting(now), asking: None }
    }

    /// Spends `cost` held units at `now` when they cover it (counting the demand): the
    /// leased decision.
    pub(crate) fn spend(&mut self, now: Timestamp, cost: u64, period: Duration) -> Option<Verdict> {
        let quote = self.quote?;
        if !self.parcels.spend(now, cost) {
            return None;
        }
        self.demand.observe(now, cost, period);
        let reset_after = terms::reset_after(&quote.decision, now.saturating_since(quote.at));
        let decision = quote.decision.with_remaining(self.parcels.spendable(now)).with_reset_after(reset_after);
        Some(Verdict::new(decision, quote.limit, Source::Lease))
    }

    /// Counts a request of `cost` at `now` that held units did not cover, and says what it
    /// does: waits for the lease request in flight for the key, if any (concurrent misses
    /// would each lease a period's demand: one request at a time keeps what a process holds
    /// to what one lease gives, and saves their store calls), or asks the store for the
    /// units to lease beyond its cost. A miss that `waited` already asks, for no more units
    /// while a request is in flight.
    pub(crate) fn wanted(&mut self, now: Timestamp, cost: u64, period: Duration, waited: bool) -> Miss {
        self.demand.observe(now, cost, period);
        if let Some(asking) = self.asking.as_ref().filter(|asking| now.saturating_since(asking.since) < period) {
            return if waited { Miss::Ask(0) } else { Miss::Wait(asking.answered.listen()) };
        }
        let last = self.last_word.map(|(word, at)| match word.ages {
            true => LastWord { spendable_for: word.spendable_for.saturating_sub(now.saturating_since(at)), ..word },
            false => word,
        });
        let extra = extra_units(&self.demand, cost, last, period);
        if extra > 0 {
            self.answered();
            self.asking = Some(Asking { since: now, answered: Arc::new(Event::new()) });
        }
        Miss::Ask(extra)
    }

    /// Ends the lease request in flight (answered, failed or dropped): its waiters try again.
    pub(crate) fn answered(&mut self) {
        if let Some(asking) = self.asking.take() {
            asking.answered.notify(usize::MAX);
        }
    }

    /// Gives up held units that can no longer be spent at `now`; returns how many.
    pub(crate) fn expire(&mut self, now: Timestamp) -> u64 {
        self.parcels.expire(now)
    }

    /// Takes the units held that may still be spent, with where the store debited them, to
    /// give them back (one return per lease parcel): those of `which` keys.
    pub(crate) fn take_unspent(&mut self, now: Timestamp, period: Duration, which: Unspent) -> Vec<Returning> {
        if which == Unspent::OfQuietKeys && !self.demand.is_quiet(now, period) {
            return Vec::new();
        }
        let returning = |Parcel { units, leased, receipts, .. }| Returning { units, leased, receipts };
        self.parcels.take_returnable(now).into_iter().map(returning).collect()
    }

    /// True when it holds nothing and its demand is stale: safe to forget.
    pub(crate) fn is_idle(&self, now: Timestamp, period: Duration) -> bool {
        self.parcels.spendable(now) == 0 && self.demand.is_idle(now, period)
    }

    /// Takes in the store's `answer` to the lease request `asked` (call
    /// [`expire`](Self::expire) first): holds its units when granted. Returns the request's
    /// verdict (counting the units now held as remaining, which they are, for this process)
    /// and what changed.
    pub(crate) fn settle(&mut self, limits: &[Limit], asked: Asked, answer: &LeaseAnswer) -> (Verdict, Settled) {
        let Asked { now, received, extra, period } = asked;
        if extra > 0 {
            self.answered();
        }
        let verdict = answer.verdict;
        let last = last_word(&limits[verdict.limit], &verdict.decision, period);
        self.last_word = Some((last, now));
        if answer.leased.is_empty() || extra == 0 {
            return (verdict, Settled::default());
        }
        let valid = limits
            .iter()
            .zip(&answer.leased)
            .map(|(limit, decision)| terms::valid_for(limit, decision, period))
            .min()
            .unwrap_or(Duration::ZERO);
        let until = now.saturating_add(valid);
        let receipts: SmallVec<[Receipt; 2]> = match answer.decided_at {
            Some(at) => limits
                .iter()
                .zip(&answer.leased)
                .enumerate()
                .map(|(index, (limit, decision))| Receipt {
                    debited_in: terms::debited_in(limit, decision, at, period),
                    stamp: answer.stamps.get(index).copied().unwrap_or(0),
                })
                .collect(),
            None => SmallVec::new(),
        };
        // Units held from an earlier lease join the new ones when the store debited both in
        // the same place (their give-back names one place); otherwise they are held apart.
        let dropped = self.parcels.add(Parcel { units: extra, until, receipts, leased: extra });
        self.quote = Some(Quote { decision: verdict.decision, limit: verdict.limit, at: received.max(now) });
        let held = self.parcels.spendable(now);
        let decision = verdict.decision.with_remaining(verdict.decision.remaining.saturating_add(held));
        (Verdict::new(decision, verdict.limit, verdict.source), Settled { leased: extra, dropped })
    }
}

/// What the store's `decision` under `limit` says for the next lease of `period`: what
/// remains, and how long units would stay spendable (unknown after a rejection: none then).
/// A held lease's units are spendable for a whole period from its own grant, whenever that
/// is: what the word says of the next one does not shrink as the word ages; a window's end
/// does not move, so what it says of a window's does.
fn last_word(limit: &Limit, decision: &Decision, period: Duration) -> LastWord {
    if !decision.allowed {
        return LastWord { remaining: 0, spendable_for: Duration::ZERO, ages: false };
    }
    let ages = !matches!(limit.policy().lease_terms(), LeaseTerms::Held);
    LastWord { remaining: decision.remaining, spendable_for: terms::valid_for(limit, decision, period), ages }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FixedWindow, Key, MemoryStore, store::Check};

    const PERIOD: Duration = Duration::from_millis(100);

    fn at(ms: u64) -> Timestamp {
        Timestamp::from_micros(1_000_000 + ms * 1_000)
    }

    /// A key of `limits` whose last word says much remains, with a period of demand seen.
    fn busy(limits: &[Limit]) -> (Held, LeaseAnswer) {
        let store = MemoryStore::new();
        let key = Key::new(b"k").unwrap();
        let answer = store.check_and_lease_now(Check::new(key, limits, at(0), 1)).unwrap();
        let mut held = Held::new(at(0));
        held.settle(limits, Asked { now: at(0), received: at(0), extra: 0, period: PERIOD }, &answer);
        (0..50).for_each(|ms| held.demand.observe(at(ms), 1, PERIOD));
        (held, answer)
    }

    fn asks(miss: &Miss) -> u64 {
        match miss {
            Miss::Ask(extra) => *extra,
            Miss::Wait(_) => panic!("waits"),
        }
    }

    #[test]
    fn one_lease_request_at_a_time_per_key() {
        let window = FixedWindow::new(1_000_000, Duration::from_secs(60), crate::Alignment::Anchored, Duration::ZERO);
        let limits = [Limit::new("w", window.unwrap())];
        let (mut held, answer) = busy(&limits);
        let first = asks(&held.wanted(at(60), 1, PERIOD, false));
        assert!(first > 0, "a lease is asked for");
        assert!(matches!(held.wanted(at(61), 1, PERIOD, false), Miss::Wait(_)), "a miss waits for it");
        assert_eq!(asks(&held.wanted(at(61), 1, PERIOD, true)), 0, "and after waiting asks for none");
        let asked = Asked { now: at(60), received: at(62), extra: first, period: PERIOD };
        held.settle(&limits, asked, &answer);
        assert!(asks(&held.wanted(at(63), 1, PERIOD, false)) > 0, "answered: the next miss may ask");
        assert!(asks(&held.wanted(at(163), 1, PERIOD, false)) > 0, "unanswered for a period: asked again");
    }
}
