//! One limit's per-key states inside one shard, typed by the limit's algorithm so each
//! entry holds exactly its key and its algorithm's state (no enum padding).

use super::snapshot::states::{AnyState, Persist, Restored};
use crate::algorithm::Algorithm;
use crate::{Decision, Timestamp};
use ahash::RandomState;
use hashbrown::HashTable;
use smallvec::SmallVec;
use std::fmt;

/// Key bytes, stored inline up to 16 bytes (an IPv6 address, a UUID) and on the heap beyond.
pub(crate) type KeyBytes = SmallVec<[u8; 16]>;

/// The operations a shard needs from one limit's table, whatever its algorithm.
pub(crate) trait KeyedStates: Send + fmt::Debug {
    /// Judges a request without changing anything.
    fn judge(&self, hash: u64, key: &[u8], now: Timestamp, cost: u64) -> Decision;

    /// Decides and records a request. `admitted` is the outcome of every limit checked
    /// together, or `None` to use this limit's own decision. Returns the decision and
    /// whether a new state was inserted.
    fn settle(&mut self, request: Request<'_>, admitted: Option<bool>, hasher: &RandomState) -> (Decision, bool);

    /// Forgets the state of `key`; returns whether there was one.
    fn remove(&mut self, hash: u64, key: &[u8]) -> bool;

    /// Drops every state expiring before `time`, and up to `ties` of those expiring at
    /// exactly `time` (decrementing it); returns how many were dropped.
    fn drop_expiring_before(&mut self, time: Timestamp, ties: &mut usize) -> usize;

    /// When each state expires.
    fn expiries(&self) -> Vec<Timestamp>;

    /// Bytes held by the table and its states (keys and heap parts included).
    fn heap_bytes(&self) -> usize;

    /// The snapshot tag of the table's algorithm.
    fn tag(&self) -> u8;

    /// Appends the states not fresh by `now` as snapshot entries; returns how many.
    fn encode(&self, now: Timestamp, out: &mut Vec<u8>) -> u64;

    /// Inserts a state read from a snapshot, unless the key has one or it is fresh by `now`.
    fn restore(&mut self, hash: u64, key: &[u8], state: AnyState, now: Timestamp, hasher: &RandomState) -> Restored;
}

/// A request addressed to one key of a shard.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Request<'a> {
    pub(crate) hash: u64,
    pub(crate) key: &'a [u8],
    pub(crate) now: Timestamp,
    pub(crate) cost: u64,
}

/// A table of states of algorithm `A`, keyed by the caller's key bytes.
pub(crate) struct Keyed<A: Algorithm> {
    algorithm: A,
    entries: HashTable<(KeyBytes, A::State)>,
}

impl<A: Algorithm> Keyed<A> {
    pub(crate) fn new(algorithm: A) -> Self {
        Keyed { algorithm, entries: HashTable::new() }
    }
}

impl<A: Algorithm + fmt::Debug> fmt::Debug for Keyed<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyed").field("algorithm", &self.algorithm).field("states", &self.entries.len()).finish()
    }
}

impl<A> KeyedStates for Keyed<A>
where
    A: Persist + fmt::Debug + Send,
    A::State: PartialEq + HeapSize,
{
    fn judge(&self, hash: u64, key: &[u8], now: Timestamp, cost: u64) -> Decision {
        let fresh = A::State::default();
        let state = self.entries.find(hash, |(k, _)| k.as_slice() == key).map_or(&fresh, |(_, s)| s);
        self.algorithm.decide(state, now, cost).0
    }

    fn settle(&mut self, request: Request<'_>, admitted: Option<bool>, hasher: &RandomState) -> (Decision, bool) {
        let Request { hash, key, now, cost } = request;
        if let Some((_, state)) = self.entries.find_mut(hash, |(k, _)| k.as_slice() == key) {
            let (decision, plan) = self.algorithm.decide(state, now, cost);
            self.algorithm.record(state, plan, admitted.unwrap_or(decision.allowed));
            return (decision, false);
        }
        let (decision, plan) = self.algorithm.decide(&A::State::default(), now, cost);
        let mut state = A::State::default();
        self.algorithm.record(&mut state, plan, admitted.unwrap_or(decision.allowed));
        if state == A::State::default() {
            return (decision, false);
        }
        let rehash = |(k, _): &(KeyBytes, A::State)| hasher.hash_one(k.as_slice());
        self.entries.insert_unique(hash, (KeyBytes::from_slice(key), state), rehash);
        (decision, true)
    }

    fn remove(&mut self, hash: u64, key: &[u8]) -> bool {
        self.entries.find_entry(hash, |(k, _)| k.as_slice() == key).map(|entry| entry.remove()).is_ok()
    }

    fn drop_expiring_before(&mut self, time: Timestamp, ties: &mut usize) -> usize {
        let before = self.entries.len();
        let algorithm = &self.algorithm;
        self.entries.retain(|(_, state)| {
            let expires = algorithm.expires_at(state);
            let dropped = expires < time || (expires == time && *ties > 0);
            if expires == time && dropped {
                *ties -= 1;
            }
            !dropped
        });
        before - self.entries.len()
    }

    fn expiries(&self) -> Vec<Timestamp> {
        self.entries.iter().map(|(_, state)| self.algorithm.expires_at(state)).collect()
    }

    fn heap_bytes(&self) -> usize {
        let slots = self.entries.allocation_size();
        let owned: usize = self
            .entries
            .iter()
            .map(|(key, state)| state.heap_size() + if key.spilled() { key.capacity() } else { 0 })
            .sum();
        slots + owned
    }

    fn tag(&self) -> u8 {
        A::TAG
    }

    fn encode(&self, now: Timestamp, out: &mut Vec<u8>) -> u64 {
        let mut count = 0;
        for (key, state) in self.entries.iter().filter(|(_, state)| self.algorithm.expires_at(state) > now) {
            out.extend_from_slice(&(key.len() as u16).to_le_bytes());
            out.extend_from_slice(key);
            A::encode(state, out);
            count += 1;
        }
        count
    }

    fn restore(&mut self, hash: u64, key: &[u8], state: AnyState, now: Timestamp, hasher: &RandomState) -> Restored {
        let Some(state) = A::of(&state).cloned().filter(|state| self.algorithm.expires_at(state) > now) else {
            return Restored::Fresh;
        };
        if self.entries.find(hash, |(k, _)| k.as_slice() == key).is_some() {
            return Restored::Present;
        }
        let rehash = |(k, _): &(KeyBytes, A::State)| hasher.hash_one(k.as_slice());
        self.entries.insert_unique(hash, (KeyBytes::from_slice(key), state), rehash);
        Restored::New
    }
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
