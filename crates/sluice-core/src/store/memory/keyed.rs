//! One limit's per-key states inside one shard, typed by the limit's algorithm so each
//! entry holds exactly its key and its algorithm's state (no enum padding).

use super::codec::states::{AnyState, Persist, Restored};
use super::dense::DenseTable;
use super::stored_key::{Exact, Long, Probe, Short, StoredKey};
use crate::algorithm::{Algorithm, Lease, Returned, decide_with};
use crate::{Decision, Timestamp};
use ahash::RandomState;
use std::fmt;

/// The operations a shard needs from one limit's table, whatever its algorithm.
pub(crate) trait KeyedStates: Send + fmt::Debug {
    /// Judges a request without changing anything.
    fn judge(&mut self, request: Request<'_>) -> Decision;

    /// Decides and records a request for a key that holds a state here; `None`, having
    /// changed nothing, when it holds none (see [`settle_new`](Self::settle_new)).
    /// `admitted` is the outcome of every limit checked together, or `None` to use this
    /// limit's own decision. Adds to `grown` how many bytes the state's heap grew by, which
    /// is zero unless it was reallocated (a sliding log's ring).
    ///
    /// This is the check's hot path: no record of what changed, and the decision written
    /// once, into the caller's return slot (an `Option` of it takes no more room).
    fn settle(&mut self, request: Request<'_>, admitted: Option<bool>, grown: &mut isize) -> Option<Decision>;

    /// Decides a request for a key that holds no state here, and inserts its state unless
    /// it stays fresh; returns the decision and what was inserted.
    fn settle_new(&mut self, request: Request<'_>, admitted: Option<bool>, hasher: &RandomState) -> (Decision, Change);

    /// Takes a lease's unspent units back into `key`'s state ([`Algorithm::give_back`]);
    /// nothing when the key has no state here. Returns how many bytes the state's heap grew
    /// by.
    fn give_back(&mut self, hash: u64, probe: Probe<'_>, back: Returned) -> isize;

    /// Whether `key` has a state here.
    fn holds(&mut self, hash: u64, probe: Probe<'_>) -> bool;

    /// Bytes that inserting a state for `probe` would add, besides the state's own heap:
    /// the key's, and the table's growth if it has no room left.
    fn insertion_bytes(&self, probe: Probe<'_>) -> usize;

    /// Forgets the state of `key`; what that freed (no state when there was none).
    fn remove(&mut self, hash: u64, probe: Probe<'_>, hasher: &RandomState) -> Room;

    /// Drops the states `cut` selects (decrementing its `ties`); returns what that freed.
    fn drop_expiring_before(&mut self, cut: &mut Cut, hasher: &RandomState) -> Room;

    /// When each state that is not limited at `now` expires: the states eviction may drop.
    fn evictable_expiries(&self, now: Timestamp) -> Vec<Timestamp>;

    /// The number of states.
    fn len(&self) -> usize;

    /// True when the table holds no state.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held by the table and its states (keys and heap parts included).
    fn heap_bytes(&self) -> usize;

    /// The snapshot tag of the table's algorithm.
    fn tag(&self) -> u8;

    /// Appends the states not fresh by `now` as snapshot entries; returns how many.
    fn encode(&self, now: Timestamp, out: &mut Vec<u8>) -> u64;

    /// Inserts a state read from a snapshot, unless the key has one or it is fresh by `now`.
    /// A state inserted comes back with the bytes it added.
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
    /// Units to lease beside `cost` (none: a plain check).
    pub(crate) lease: Lease,
}

/// What inserting a state changed in a table, besides the decision.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Change {
    /// A new state was inserted.
    pub(crate) inserted: bool,
    /// How many bytes the table's memory grew by (negative when it shrank).
    pub(crate) bytes: isize,
}

/// A number of states and of bytes: the room left in a shard, the room a check asks of it,
/// or what dropping states gave back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Room {
    pub(crate) states: usize,
    pub(crate) bytes: usize,
}

impl std::ops::Add for Room {
    type Output = Room;

    /// Both amounts together (bytes saturate: a bound's worth is never near `usize::MAX`).
    fn add(self, other: Room) -> Room {
        Room { states: self.states + other.states, bytes: self.bytes.saturating_add(other.bytes) }
    }
}

impl std::iter::Sum for Room {
    fn sum<I: Iterator<Item = Room>>(iter: I) -> Room {
        iter.fold(Room::default(), |total, room| total + room)
    }
}

/// Which states a pass of sweeping or eviction drops: those expiring before `before`, and
/// up to `ties` of those expiring at exactly `before`; never one that is limited at `now`
/// (a request of cost 1 would be rejected under it), so that no flood of keys can clear
/// a block.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cut {
    pub(crate) before: Timestamp,
    pub(crate) ties: usize,
    pub(crate) now: Timestamp,
}

/// States of algorithm `A` keyed by one class of stored keys, packed in a dense table.
type KeyClassTable<K, A> = DenseTable<(K, <A as Algorithm>::State)>;

/// A table of states of algorithm `A`, keyed by the caller's key bytes: one hash table per
/// class of key length (see [`stored_key`](super::stored_key)).
pub(crate) struct Keyed<A: Algorithm> {
    algorithm: A,
    exact: KeyClassTable<Exact, A>,
    short: KeyClassTable<Short, A>,
    long: KeyClassTable<Long, A>,
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
    A: Persist + RecordResizing + fmt::Debug + Send,
    A::State: PartialEq + HeapSize,
{
    fn judge(&mut self, request: Request<'_>) -> Decision {
        let algorithm = &self.algorithm;
        in_class_table!(self, request.probe, |table, key| judge_in(algorithm, table, key, request))
    }

    #[inline(always)]
    fn settle(&mut self, request: Request<'_>, admitted: Option<bool>, grown: &mut isize) -> Option<Decision> {
        let Request { hash, probe, now, cost, lease } = request;
        let algorithm = &self.algorithm;
        in_class_table!(self, probe, |table, key| {
            let (_, state) = table.find_mut(hash, |(stored, _)| stored.is(key))?;
            let (decision, plan) = decide_with(algorithm, state, now, cost, lease);
            // A constant zero for the algorithms whose state holds no heap.
            *grown += algorithm.record_resizing(state, plan, admitted.unwrap_or(decision.allowed));
            Some(decision)
        })
    }

    fn settle_new(&mut self, request: Request<'_>, admitted: Option<bool>, hasher: &RandomState) -> (Decision, Change) {
        let algorithm = &self.algorithm;
        in_class_table!(self, request.probe, |table, key| settle_new(algorithm, table, request, key, admitted, hasher))
    }

    fn give_back(&mut self, hash: u64, probe: Probe<'_>, back: Returned) -> isize {
        let algorithm = &self.algorithm;
        in_class_table!(self, probe, |table, key| {
            let Some((_, state)) = table.find_mut(hash, |(stored, _)| stored.is(key)) else { return 0 };
            let held = state.heap_size();
            algorithm.give_back(state, back);
            state.heap_size() as isize - held as isize
        })
    }

    fn holds(&mut self, hash: u64, probe: Probe<'_>) -> bool {
        in_class_table!(self, probe, |table, key| table.find(hash, |(stored, _)| stored.is(key)).is_some())
    }

    fn insertion_bytes(&self, probe: Probe<'_>) -> usize {
        match probe {
            Probe::Exact(_) => self.exact.growth_of_one_more(),
            Probe::Short(_) => self.short.growth_of_one_more(),
            Probe::Long(key) => self.long.growth_of_one_more() + key.len(),
        }
    }

    fn remove(&mut self, hash: u64, probe: Probe<'_>, hasher: &RandomState) -> Room {
        in_class_table!(self, probe, |table, key| {
            let before = table.allocation_size();
            let Some(owned) = table.find(hash, |(stored, _)| stored.is(key)).map(owned_bytes) else {
                return Room::default();
            };
            table.remove(hash, |(stored, _)| stored.is(key), rehash(hasher));
            Room { states: 1, bytes: before - table.allocation_size() + owned }
        })
    }

    fn drop_expiring_before(&mut self, cut: &mut Cut, hasher: &RandomState) -> Room {
        let algorithm = &self.algorithm;
        drop_expiring_in(algorithm, &mut self.exact, cut, hasher)
            + drop_expiring_in(algorithm, &mut self.short, cut, hasher)
            + drop_expiring_in(algorithm, &mut self.long, cut, hasher)
    }

    fn evictable_expiries(&self, now: Timestamp) -> Vec<Timestamp> {
        let algorithm = &self.algorithm;
        let exact = evictable_in(algorithm, &self.exact, now);
        let short = evictable_in(algorithm, &self.short, now);
        let long = evictable_in(algorithm, &self.long, now);
        exact.chain(short).chain(long).collect()
    }

    fn len(&self) -> usize {
        self.exact.len() + self.short.len() + self.long.len()
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
                Some(bytes) => Restored::New { bytes },
                None => Restored::Fresh,
            }
        })
    }
}

/// The decision for `key` in `table`, changing nothing.
fn judge_in<A: Algorithm, K: StoredKey>(
    algorithm: &A,
    table: &KeyClassTable<K, A>,
    key: K::Probe<'_>,
    request: Request<'_>,
) -> Decision {
    let fresh = A::State::default();
    let state = table.find(request.hash, |(stored, _)| stored.is(key)).map_or(&fresh, |(_, state)| state);
    decide_with(algorithm, state, request.now, request.cost, request.lease).0
}

/// Decides a request for a key with no state, and inserts its state unless it stays fresh.
fn settle_new<A: Algorithm, K: StoredKey>(
    algorithm: &A,
    table: &mut KeyClassTable<K, A>,
    request: Request<'_>,
    key: K::Probe<'_>,
    admitted: Option<bool>,
    hasher: &RandomState,
) -> (Decision, Change)
where
    A::State: PartialEq + HeapSize,
{
    let (decision, plan) = decide_with(algorithm, &A::State::default(), request.now, request.cost, request.lease);
    let mut state = A::State::default();
    algorithm.record(&mut state, plan, admitted.unwrap_or(decision.allowed));
    let mut change = Change::default();
    if state != A::State::default()
        && let Some(bytes) = insert(table, request.hash, key, state, hasher)
    {
        change = Change { inserted: true, bytes: bytes as isize };
    }
    (decision, change)
}

/// Inserts a state for a key known to hold none; returns the bytes it added, or `None`
/// when the table is full (the key then goes on as if fresh at each check).
fn insert<S: HeapSize, K: StoredKey>(
    table: &mut DenseTable<(K, S)>,
    hash: u64,
    key: K::Probe<'_>,
    state: S,
    hasher: &RandomState,
) -> Option<usize> {
    let before = table.allocation_size();
    let entry = (K::store(key), state);
    let owned = owned_bytes(&entry);
    table.insert_unique(hash, entry, rehash(hasher)).then(|| table.allocation_size() - before + owned)
}

/// The hash of a stored entry's key, as the store computed it for the caller's key.
fn rehash<S, K: StoredKey>(hasher: &RandomState) -> impl Fn(&(K, S)) -> u64 + '_ {
    move |(stored, _)| hasher.hash_one(stored.bytes())
}

/// Whether a request of cost 1 at `now` would be rejected under `state`: a state eviction
/// must keep, or the key's block would be lifted by forgetting it.
fn is_limited<A: Algorithm>(algorithm: &A, state: &A::State, now: Timestamp) -> bool {
    !algorithm.decide(state, now, 1).0.allowed
}

/// When each state of `table` that is not limited at `now` expires.
fn evictable_in<'a, A: Algorithm, K: StoredKey>(
    algorithm: &'a A,
    table: &'a KeyClassTable<K, A>,
    now: Timestamp,
) -> impl Iterator<Item = Timestamp> + 'a {
    let evictable =
        move |(_, state): &(K, A::State)| (!is_limited(algorithm, state, now)).then(|| algorithm.expires_at(state));
    table.iter().filter_map(evictable)
}

fn drop_expiring_in<A: Algorithm, K: StoredKey>(
    algorithm: &A,
    table: &mut KeyClassTable<K, A>,
    cut: &mut Cut,
    hasher: &RandomState,
) -> Room
where
    A::State: HeapSize,
{
    let (before, allocated) = (table.len(), table.allocation_size());
    let mut owned = 0;
    let keep = |entry: &mut (K, A::State)| {
        let expires = algorithm.expires_at(&entry.1);
        let due = expires < cut.before || (expires == cut.before && cut.ties > 0);
        // A state expired by `now` decides as a fresh one does: it cannot be limited, and
        // a sweep drops it without asking the algorithm.
        let dropped = due && (expires <= cut.now || !is_limited(algorithm, &entry.1, cut.now));
        if dropped {
            cut.ties -= usize::from(expires == cut.before);
            owned += owned_bytes(entry);
        }
        !dropped
    };
    table.retain(keep, rehash(hasher));
    Room { states: before - table.len(), bytes: allocated - table.allocation_size() + owned }
}

/// Bytes an entry holds outside the table: its key's and its state's heap.
fn owned_bytes<S: HeapSize, K: StoredKey>((key, state): &(K, S)) -> usize {
    key.heap_size() + state.heap_size()
}

fn heap_bytes_of<S: HeapSize, K: StoredKey>(table: &DenseTable<(K, S)>) -> usize {
    let owned: usize = table.iter().map(owned_bytes).sum();
    table.allocation_size() + owned
}

fn encode_in<A: Persist, K: StoredKey>(
    algorithm: &A,
    table: &KeyClassTable<K, A>,
    now: Timestamp,
    out: &mut Vec<u8>,
) -> u64 {
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

/// [`Algorithm::record`], telling how many bytes the state's heap grew by: what the store
/// counts against its bound. Zero unless the heap was reallocated, and a constant zero for
/// the algorithms whose state holds no heap.
pub(crate) trait RecordResizing: Algorithm {
    fn record_resizing(&self, state: &mut Self::State, plan: Self::Plan, admitted: bool) -> isize {
        self.record(state, plan, admitted);
        0
    }
}

/// [`Algorithm::record`], returning how many bytes the state's heap grew by, measured.
fn record_measured<A: Algorithm>(algorithm: &A, state: &mut A::State, plan: A::Plan, admitted: bool) -> isize
where
    A::State: HeapSize,
{
    let held = state.heap_size();
    algorithm.record(state, plan, admitted);
    state.heap_size() as isize - held as isize
}

impl RecordResizing for crate::algorithm::sliding_log::SlidingLog {
    #[inline(always)]
    fn record_resizing(&self, state: &mut Self::State, plan: Self::Plan, admitted: bool) -> isize {
        crate::algorithm::sliding_log::SlidingLog::record_resizing(self, state, plan, admitted)
    }
}
impl RecordResizing for crate::algorithm::sliding_window::SlidingWindow {
    #[inline(always)]
    fn record_resizing(&self, state: &mut Self::State, plan: Self::Plan, admitted: bool) -> isize {
        // The counters are allocated once, by the first request recorded.
        if !state.counts.is_empty() {
            self.record(state, plan, admitted);
            return 0;
        }
        record_measured(self, state, plan, admitted)
    }
}
impl RecordResizing for crate::algorithm::fixed_window::FixedWindow {}
impl RecordResizing for crate::algorithm::token_bucket::TokenBucket {
    #[inline(always)]
    fn record_resizing(&self, state: &mut Self::State, plan: Self::Plan, admitted: bool) -> isize {
        if state.holds.is_clear() && plan.is_none_or(|plan| !plan.leases()) {
            self.record(state, plan, admitted);
            return 0;
        }
        record_measured(self, state, plan, admitted)
    }
}
impl RecordResizing for crate::algorithm::leaky_bucket::LeakyBucket {
    #[inline(always)]
    fn record_resizing(&self, state: &mut Self::State, plan: Self::Plan, admitted: bool) -> isize {
        if state.holds.is_clear() && plan.is_none_or(|plan| !plan.leases()) {
            self.record(state, plan, admitted);
            return 0;
        }
        record_measured(self, state, plan, admitted)
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
impl HeapSize for crate::algorithm::token_bucket::Tokens {
    fn heap_size(&self) -> usize {
        self.holds.heap_bytes()
    }
}
impl HeapSize for crate::algorithm::leaky_bucket::Tat {
    fn heap_size(&self) -> usize {
        self.holds.heap_bytes()
    }
}
