//! One limit's per-key states inside one shard, typed by the limit's algorithm so each
//! entry holds exactly its key and its algorithm's state (no enum padding).

use super::dense::DenseTable;
use super::snapshot::states::{AnyState, Persist, Restored};
use super::stored_key::{Exact, Long, Probe, Short, StoredKey};
use crate::algorithm::Algorithm;
use crate::{Decision, Timestamp};
use ahash::RandomState;
use std::fmt;

/// The operations a shard needs from one limit's table, whatever its algorithm.
pub(crate) trait KeyedStates: Send + fmt::Debug {
    /// Judges a request without changing anything.
    fn judge(&mut self, hash: u64, probe: Probe<'_>, now: Timestamp, cost: u64) -> Decision;

    /// Decides and records a request. `admitted` is the outcome of every limit checked
    /// together, or `None` to use this limit's own decision. Returns the decision, and sets
    /// `inserted` when a new state was inserted (an out-parameter, not a tuple, so that the
    /// decision is written once into the caller's return slot instead of being copied).
    fn settle(
        &mut self,
        request: Request<'_>,
        admitted: Option<bool>,
        hasher: &RandomState,
        inserted: &mut bool,
    ) -> Decision;

    /// Whether `key` has a state here.
    fn holds(&mut self, hash: u64, probe: Probe<'_>) -> bool;

    /// Forgets the state of `key`; returns whether there was one.
    fn remove(&mut self, hash: u64, probe: Probe<'_>, hasher: &RandomState) -> bool;

    /// Drops every state expiring before `time`, and up to `ties` of those expiring at
    /// exactly `time` (decrementing it); returns how many were dropped.
    fn drop_expiring_before(&mut self, time: Timestamp, ties: &mut usize, hasher: &RandomState) -> usize;

    /// When each state expires.
    fn expiries(&self) -> Vec<Timestamp>;

    /// Bytes held by the table and its states (keys and heap parts included).
    fn heap_bytes(&self) -> usize;

    /// The snapshot tag of the table's algorithm.
    fn tag(&self) -> u8;

    /// Appends the states not fresh by `now` as snapshot entries; returns how many.
    fn encode(&self, now: Timestamp, out: &mut Vec<u8>) -> u64;

    /// Inserts a state read from a snapshot, unless the key has one or it is fresh by `now`.
    fn restore(
        &mut self,
        hash: u64,
        probe: Probe<'_>,
        state: AnyState,
        now: Timestamp,
        hasher: &RandomState,
    ) -> Restored;
}

/// A request addressed to one key of a shard.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Request<'a> {
    pub(crate) hash: u64,
    pub(crate) probe: Probe<'a>,
    pub(crate) now: Timestamp,
    pub(crate) cost: u64,
}

/// States of algorithm `A` keyed by one class of stored keys, packed in a dense table.
type Table<K, A> = DenseTable<(K, <A as Algorithm>::State)>;

/// A table of states of algorithm `A`, keyed by the caller's key bytes: one hash table per
/// class of key length (see [`stored_key`](super::stored_key)).
pub(crate) struct Keyed<A: Algorithm> {
    algorithm: A,
    exact: Table<Exact, A>,
    short: Table<Short, A>,
    long: Table<Long, A>,
}

impl<A: Algorithm> Keyed<A> {
    pub(crate) fn new(algorithm: A) -> Self {
        Keyed { algorithm, exact: DenseTable::new(), short: DenseTable::new(), long: DenseTable::new() }
    }

    /// The algorithm (and parameters) the states follow.
    pub(crate) fn algorithm(&self) -> &A {
        &self.algorithm
    }
}

impl<A: Algorithm + fmt::Debug> fmt::Debug for Keyed<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let states = self.exact.len() + self.short.len() + self.long.len();
        f.debug_struct("Keyed").field("algorithm", &self.algorithm).field("states", &states).finish()
    }
}

/// Runs `$body` with `$table` bound to the table of `$probe`'s class and `$key` to its
/// lookup form.
macro_rules! in_class_table {
    ($keyed:expr, $probe:expr, |$table:ident, $key:ident| $body:expr) => {
        match $probe {
            Probe::Exact($key) => {
                let $table = &mut $keyed.exact;
                $body
            }
            Probe::Short($key) => {
                let $table = &mut $keyed.short;
                $body
            }
            Probe::Long($key) => {
                let $table = &mut $keyed.long;
                $body
            }
        }
    };
}

impl<A> KeyedStates for Keyed<A>
where
    A: Persist + fmt::Debug + Send,
    A::State: PartialEq + HeapSize,
{
    fn judge(&mut self, hash: u64, probe: Probe<'_>, now: Timestamp, cost: u64) -> Decision {
        let algorithm = &self.algorithm;
        in_class_table!(self, probe, |table, key| judge_in(algorithm, table, hash, key, now, cost))
    }

    #[inline(always)]
    fn settle(
        &mut self,
        request: Request<'_>,
        admitted: Option<bool>,
        hasher: &RandomState,
        inserted: &mut bool,
    ) -> Decision {
        let Request { hash, probe, now, cost } = request;
        let algorithm = &self.algorithm;
        in_class_table!(self, probe, |table, key| {
            let Some((_, state)) = table.find_mut(hash, |(stored, _)| stored.is(key)) else {
                return settle_new(algorithm, table, request, key, admitted, hasher, inserted);
            };
            let (decision, plan) = algorithm.decide(state, now, cost);
            algorithm.record(state, plan, admitted.unwrap_or(decision.allowed));
            decision
        })
    }

    fn holds(&mut self, hash: u64, probe: Probe<'_>) -> bool {
        in_class_table!(self, probe, |table, key| table.find(hash, |(stored, _)| stored.is(key)).is_some())
    }

    fn remove(&mut self, hash: u64, probe: Probe<'_>, hasher: &RandomState) -> bool {
        in_class_table!(self, probe, |table, key| table.remove(hash, |(stored, _)| stored.is(key), rehash(hasher)))
    }

    fn drop_expiring_before(&mut self, time: Timestamp, ties: &mut usize, hasher: &RandomState) -> usize {
        let algorithm = &self.algorithm;
        drop_expiring_in(algorithm, &mut self.exact, time, ties, hasher)
            + drop_expiring_in(algorithm, &mut self.short, time, ties, hasher)
            + drop_expiring_in(algorithm, &mut self.long, time, ties, hasher)
    }

    fn expiries(&self) -> Vec<Timestamp> {
        let algorithm = &self.algorithm;
        let exact = self.exact.iter().map(|(_, state)| algorithm.expires_at(state));
        let short = self.short.iter().map(|(_, state)| algorithm.expires_at(state));
        let long = self.long.iter().map(|(_, state)| algorithm.expires_at(state));
        exact.chain(short).chain(long).collect()
    }

    fn heap_bytes(&self) -> usize {
        heap_bytes_of(&self.exact) + heap_bytes_of(&self.short) + heap_bytes_of(&self.long)
    }

    fn tag(&self) -> u8 {
        A::TAG
    }

    fn encode(&self, now: Timestamp, out: &mut Vec<u8>) -> u64 {
        let algorithm = &self.algorithm;
        encode_in(algorithm, &self.exact, now, out)
            + encode_in(algorithm, &self.short, now, out)
            + encode_in(algorithm, &self.long, now, out)
    }

    fn restore(
        &mut self,
        hash: u64,
        probe: Probe<'_>,
        state: AnyState,
        now: Timestamp,
        hasher: &RandomState,
    ) -> Restored {
        let Some(state) = A::of(&state).cloned().filter(|state| self.algorithm.expires_at(state) > now) else {
            return Restored::Fresh;
        };
        in_class_table!(self, probe, |table, key| {
            if table.find(hash, |(stored, _)| stored.is(key)).is_some() {
                return Restored::Present;
            }
            match insert(table, hash, key, state, hasher) {
                true => Restored::New,
                false => Restored::Fresh,
            }
        })
    }
}

/// The decision for `key` in `table`, changing nothing.
fn judge_in<A: Algorithm, K: StoredKey>(
    algorithm: &A,
    table: &Table<K, A>,
    hash: u64,
    key: K::Probe<'_>,
    now: Timestamp,
    cost: u64,
) -> Decision {
    let fresh = A::State::default();
    let state = table.find(hash, |(stored, _)| stored.is(key)).map_or(&fresh, |(_, state)| state);
    algorithm.decide(state, now, cost).0
}

/// Decides a request for a key with no state, and inserts its state unless it stays fresh.
#[cold]
fn settle_new<A: Algorithm, K: StoredKey>(
    algorithm: &A,
    table: &mut Table<K, A>,
    request: Request<'_>,
    key: K::Probe<'_>,
    admitted: Option<bool>,
    hasher: &RandomState,
    inserted: &mut bool,
) -> Decision
where
    A::State: PartialEq,
{
    let (decision, plan) = algorithm.decide(&A::State::default(), request.now, request.cost);
    let mut state = A::State::default();
    algorithm.record(&mut state, plan, admitted.unwrap_or(decision.allowed));
    if state != A::State::default() {
        *inserted = insert(table, request.hash, key, state, hasher);
    }
    decision
}

/// Inserts a state for a key known to hold none; false when the table is full (the key
/// then goes on as if fresh at each check).
fn insert<S, K: StoredKey>(
    table: &mut DenseTable<(K, S)>,
    hash: u64,
    key: K::Probe<'_>,
    state: S,
    hasher: &RandomState,
) -> bool {
    table.insert_unique(hash, (K::store(key), state), rehash(hasher))
}

/// The hash of a stored entry's key, as the store computed it for the caller's key.
fn rehash<S, K: StoredKey>(hasher: &RandomState) -> impl Fn(&(K, S)) -> u64 + '_ {
    move |(stored, _)| hasher.hash_one(stored.bytes())
}

fn drop_expiring_in<A: Algorithm, K: StoredKey>(
    algorithm: &A,
    table: &mut Table<K, A>,
    time: Timestamp,
    ties: &mut usize,
    hasher: &RandomState,
) -> usize {
    let before = table.len();
    let keep = |(_, state): &mut (K, A::State)| {
        let expires = algorithm.expires_at(state);
        let dropped = expires < time || (expires == time && *ties > 0);
        if expires == time && dropped {
            *ties -= 1;
        }
        !dropped
    };
    table.retain(keep, rehash(hasher));
    before - table.len()
}

fn heap_bytes_of<S: HeapSize, K: StoredKey>(table: &DenseTable<(K, S)>) -> usize {
    let owned: usize = table.iter().map(|(key, state)| state.heap_size() + key.heap_size()).sum();
    table.allocation_size() + owned
}

fn encode_in<A: Persist, K: StoredKey>(algorithm: &A, table: &Table<K, A>, now: Timestamp, out: &mut Vec<u8>) -> u64 {
    let mut count = 0;
    for (key, state) in table.iter().filter(|(_, state)| algorithm.expires_at(state) > now) {
        let key = key.bytes();
        out.extend_from_slice(&(key.len() as u16).to_le_bytes());
        out.extend_from_slice(key);
        A::encode(state, out);
        count += 1;
    }
    count
}

/// Bytes a state holds outside its own struct.
pub(crate) trait HeapSize {
    fn heap_size(&self) -> usize {
        0
    }
}

impl HeapSize for crate::algorithm::sliding_log::SlidingLogState {
    fn heap_size(&self) -> usize {
        self.heap_bytes()
    }
}
impl HeapSize for crate::algorithm::sliding_window::BucketCounts {
    fn heap_size(&self) -> usize {
        self.heap_bytes()
    }
}
impl HeapSize for crate::algorithm::fixed_window::WindowCount {}
impl HeapSize for crate::algorithm::token_bucket::Tokens {}
impl HeapSize for crate::algorithm::leaky_bucket::Tat {}
