//! One limit's table in a shard, whatever its algorithm.
//!
//! A closed enum rather than a `Box<dyn KeyedStates>`: a check dispatches with one `match`
//! that the compiler inlines through, down to the algorithm's `decide` and `record`,
//! instead of a virtual call behind two more pointers.

use super::codec::states::{AnyState, Restored};
use super::keyed::{Change, Cut, Keyed, KeyedStates, Request, Room};
use super::stored_key::Probe;
use crate::algorithm::Returned;
use crate::algorithm::fixed_window::FixedWindow;
use crate::algorithm::leaky_bucket::LeakyBucket;
use crate::algorithm::sliding_log::SlidingLog;
use crate::algorithm::sliding_window::SlidingWindow;
use crate::algorithm::token_bucket::TokenBucket;
use crate::{Decision, Policy, Timestamp};
use ahash::RandomState;

/// The states of one limit, typed by its algorithm.
#[derive(Debug)]
pub(crate) enum LimitTable {
    SlidingLog(Keyed<SlidingLog>),
    FixedWindow(Keyed<FixedWindow>),
    SlidingWindow(Keyed<SlidingWindow>),
    TokenBucket(Keyed<TokenBucket>),
    LeakyBucket(Keyed<LeakyBucket>),
}

/// Evaluates `$body` with `$keyed` bound to the typed table inside `$table`.
macro_rules! with_keyed {
    ($table:expr, $keyed:ident => $body:expr) => {
        match $table {
            LimitTable::SlidingLog($keyed) => $body,
            LimitTable::FixedWindow($keyed) => $body,
            LimitTable::SlidingWindow($keyed) => $body,
            LimitTable::TokenBucket($keyed) => $body,
            LimitTable::LeakyBucket($keyed) => $body,
        }
    };
}

impl LimitTable {
    /// An empty table for `policy`.
    pub(crate) fn new(policy: &Policy) -> Self {
        match policy {
            Policy::SlidingLog(algorithm) => LimitTable::SlidingLog(Keyed::new(algorithm.clone())),
            Policy::FixedWindow(algorithm) => LimitTable::FixedWindow(Keyed::new(algorithm.clone())),
            Policy::SlidingWindow(algorithm) => LimitTable::SlidingWindow(Keyed::new(algorithm.clone())),
            Policy::TokenBucket(algorithm) => LimitTable::TokenBucket(Keyed::new(algorithm.clone())),
            Policy::LeakyBucket(algorithm) => LimitTable::LeakyBucket(Keyed::new(algorithm.clone())),
        }
    }

    /// The policy the table's states follow.
    pub(crate) fn policy(&self) -> Policy {
        with_keyed!(self, keyed => keyed.algorithm().clone().into())
    }
}

impl KeyedStates for LimitTable {
    fn judge(&mut self, request: Request<'_>) -> Decision {
        with_keyed!(self, keyed => keyed.judge(request))
    }

    #[inline(always)]
    fn settle(&mut self, request: Request<'_>, admitted: Option<bool>, grown: &mut isize) -> Option<Decision> {
        with_keyed!(self, keyed => keyed.settle(request, admitted, grown))
    }

    fn settle_new(&mut self, request: Request<'_>, admitted: Option<bool>, hasher: &RandomState) -> (Decision, Change) {
        with_keyed!(self, keyed => keyed.settle_new(request, admitted, hasher))
    }

    fn give_back(&mut self, hash: u64, probe: Probe<'_>, back: Returned) -> isize {
        with_keyed!(self, keyed => keyed.give_back(hash, probe, back))
    }

    fn holds(&mut self, hash: u64, probe: Probe<'_>) -> bool {
        with_keyed!(self, keyed => keyed.holds(hash, probe))
    }

    fn insertion_bytes(&self, probe: Probe<'_>) -> usize {
        with_keyed!(self, keyed => keyed.insertion_bytes(probe))
    }

    fn remove(&mut self, hash: u64, probe: Probe<'_>, hasher: &RandomState) -> Room {
        with_keyed!(self, keyed => keyed.remove(hash, probe, hasher))
    }

    fn drop_expiring_before(&mut self, cut: &mut Cut, hasher: &RandomState) -> Room {
        with_keyed!(self, keyed => keyed.drop_expiring_before(cut, hasher))
    }

    fn evictable_expiries(&self, now: Timestamp) -> Vec<Timestamp> {
        with_keyed!(self, keyed => keyed.evictable_expiries(now))
    }

    fn len(&self) -> usize {
        with_keyed!(self, keyed => keyed.len())
    }

    fn heap_bytes(&self) -> usize {
        with_keyed!(self, keyed => keyed.heap_bytes())
    }

    fn tag(&self) -> u8 {
        with_keyed!(self, keyed => keyed.tag())
    }

    fn encode(&self, now: Timestamp, out: &mut Vec<u8>) -> u64 {
        with_keyed!(self, keyed => keyed.encode(now, out))
    }

    fn restore(
        &mut self,
        hash: u64,
        probe: Probe<'_>,
        state: AnyState,
        now: Timestamp,
        hasher: &RandomState,
    ) -> Restored {
        with_keyed!(self, keyed => keyed.restore(hash, probe, state, now, hasher))
    }
}
