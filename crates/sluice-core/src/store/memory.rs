//! The embedded store: per-key states in memory, in shards behind short locks.
//!
//! A key's shard is chosen by a keyed hash of the key alone, so all limits checked together
//! for one key sit behind one lock and an all-or-nothing check takes one lock. Inside a
//! shard, each limit has its own table typed by its algorithm.
//!
//! Memory stays bounded: a state that is back to fresh (by the store's own clock, which
//! only moves forward) is dropped by sweeps that run as keys are added and by
//! [`MemoryStore::sweep`]; a table is dropped with its last state; and the store never
//! holds more than [`max_keys`](MemoryStoreBuilder::max_keys) states nor more than
//! [`max_memory`](MemoryStoreBuilder::max_memory) bytes. When a shard is full, it first
//! drops every fresh-equivalent state, then the states that would become fresh soonest
//! among those that are not limited: losing one only makes its key start over, which admits
//! at most what the key would have been admitted soon anyway. A limited state (a key being
//! rejected) is never dropped, so a flood of new keys cannot lift a block; when a shard
//! holds nothing else, a new key is refused ([`StoreError::Full`]).
//!
//! [`MemoryStore::snapshot`] and [`MemoryStore::restore`] carry the states over a restart.

mod builder;
mod codec;
mod dense;
mod keyed;
mod limit_table;
mod shard;
mod shard_tables;
mod snapshot;
mod stored_key;

pub use builder::MemoryStoreBuilder;
pub use codec::SnapshotError;
use keyed::KeyedStates;
use shard::{Bound, Shard};
pub use snapshot::RestoreReport;

use crate::algorithm::{Lease, Returned};
use crate::store::{Check, GiveBack, LeaseAnswer, Store, StoreError, Verdict};
use crate::{Decision, Key, Limit, Timestamp};
use ahash::RandomState;
use keyed::{Request, Room};
use parking_lot::Mutex;
use smallvec::SmallVec;
use std::collections::BTreeMap;
use std::fmt;
use std::future::{Future, Ready, ready};
use std::sync::Arc;
use stored_key::Probe;

/// The most shards a store is cut into.
const MAX_SHARDS: usize = 4096;

/// The default cap on states held.
pub const DEFAULT_MAX_KEYS: usize = 10_000_000;

/// The default cap on bytes held (1 GiB): above what [`DEFAULT_MAX_KEYS`] states of short
/// keys take (about 50 to 70 bytes each), so that it binds only when keys are long (a
/// flood of 1 KiB keys) or states are large (long sliding logs).
pub const DEFAULT_MAX_MEMORY: usize = 1 << 30;

/// The in-memory store. Cheap to clone: clones share the same states.
///
/// # Examples
///
/// ```
/// use sluice_core::{Key, Limit, MemoryStore, Store, Timestamp, TokenBucket, TokenBucketSettings};
/// use std::time::Duration;
///
/// let store = MemoryStore::new();
/// let bucket = TokenBucketSettings { capacity: 2, refill_amount: 1, refill_interval: Duration::from_secs(1) };
/// let api = Limit::new("api", TokenBucket::new(bucket)?);
/// let key = Key::new(b"user-1")?;
/// let now = Timestamp::from_micros(1_700_000_000_000_000);
/// let verdict = store.check_now(key, std::slice::from_ref(&api), now, 1)?;
/// assert!(verdict.decision.allowed);
/// assert_eq!(verdict.decision.remaining, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct MemoryStore {
    inner: Arc<Inner>,
}

struct Inner {
    shards: Box<[Padded<Mutex<Shard>>]>,
    hasher: RandomState,
    /// Each shard's share of the caps.
    bound: Bound,
    /// The caps as set, for the error that reports them.
    max_keys: usize,
    max_memory: usize,
    clock: Box<dyn Fn() -> Timestamp + Send + Sync>,
}

/// Keeps each shard's lock on its own cache lines.
#[repr(align(128))]
struct Padded<T>(T);

impl MemoryStore {
    /// A store with the default settings: the system clock, [`DEFAULT_MAX_KEYS`].
    pub fn new() -> Self {
        MemoryStore::builder().build()
    }

    /// A builder to set the cap, the shard count and the store's own clock.
    pub fn builder() -> MemoryStoreBuilder {
        MemoryStoreBuilder::default()
    }

    /// Checks `key` against `limits` at `now`, all or nothing, and returns at once: what
    /// [`Store::check_ready`] answers for this store (always `Some`), and what its
    /// [`Store::check`] future holds.
    ///
    /// # Errors
    ///
    /// [`StoreError::NoLimits`] when `limits` is empty; [`StoreError::Full`] when the key
    /// needs a new state and its shard is full of limited states.
    #[inline]
    pub fn check_now(&self, key: Key<'_>, limits: &[Limit], now: Timestamp, cost: u64) -> Result<Verdict, StoreError> {
        match limits {
            [limit] => {
                let decision = self.check_one(key, limit, now, cost)?;
                Ok(Verdict { decision, limit: 0, source: crate::store::Source::Store })
            }
            limits => self.check_several(key, limits, now, cost),
        }
    }

    /// [`check_now`](Self::check_now) for any number of limits but one, under one lock.
    #[inline(never)]
    fn check_several(&self, key: Key<'_>, limits: &[Limit], now: Timestamp, cost: u64) -> Result<Verdict, StoreError> {
        let key = key.as_bytes();
        let hash = self.inner.hasher.hash_one(key);
        let mut shard = self.shard(hash).lock();
        let request = Request { hash, probe: Probe::of(key), now, cost, lease: Lease::default() };
        self.make_room_for(&mut shard, limits, request)?;
        let decisions = judge_all(&mut shard, limits, request);
        self.record_all(&mut shard, limits, request, decisions.iter().all(|d| d.allowed));
        Verdict::combine(&decisions).ok_or(StoreError::NoLimits)
    }

    /// [`Store::check_and_lease`] at once, in one step under the key's lock: the request
    /// with its lease when both fit every limit (each limit's decision for them returned),
    /// or else the request decided alone. Limits that cannot be leased exactly
    /// ([`LeaseTerms::Refused`](crate::algorithm::LeaseTerms::Refused)) get no lease.
    ///
    /// # Errors
    ///
    /// As [`check_now`](Self::check_now).
    pub fn check_and_lease_now(&self, check: Check<'_>) -> Result<LeaseAnswer, StoreError> {
        let Check { key, limits, now, cost, lease: units, lease_period } = check;
        let refused = limits.iter().any(|limit| limit.policy().lease_terms().refusal().is_some());
        if units == 0 || cost == 0 || limits.is_empty() || refused {
            return self.check_now(key, limits, now, cost).map(LeaseAnswer::unleased);
        }
        let hash = self.inner.hasher.hash_one(key.as_bytes());
        let mut shard = self.shard(hash).lock();
        let lease = Lease { units, deadline: now.saturating_add(lease_period) };
        let request = Request { hash, probe: Probe::of(key.as_bytes()), now, cost, lease };
        self.make_room_for(&mut shard, limits, request)?;
        let decisions = judge_all(&mut shard, limits, request);
        if decisions.iter().all(|d| d.allowed) {
            self.record_all(&mut shard, limits, request, true);
            return LeaseAnswer::granted(decisions.to_vec(), now).ok_or(StoreError::NoLimits);
        }
        let request = Request { lease: Lease::default(), ..request };
        let decisions = judge_all(&mut shard, limits, request);
        let admitted = decisions.iter().all(|d| d.allowed);
        self.record_all(&mut shard, limits, request, admitted);
        Verdict::combine(&decisions).map(LeaseAnswer::unleased).ok_or(StoreError::NoLimits)
    }

    /// [`Store::give_back`] at once: takes the units back from the key's state under each
    /// limit, in the window or bucket they were debited in.
    pub fn give_back_now(&self, back: GiveBack<'_>) {
        let GiveBack { key, limits, receipts, leased, units, now, .. } = back;
        let hash = self.inner.hasher.hash_one(key.as_bytes());
        let mut shard = self.shard(hash).lock();
        for (index, (limit, receipt)) in limits.iter().zip(receipts).enumerate() {
            // A limit listed twice is one state: its units go back once, as they were debited.
            if !first_listing(limits, index) {
                continue;
            }
            if let Some(position) = shard.tables.position(limit.id()) {
                let returned =
                    Returned { debited_in: receipt.debited_in, stamp: receipt.stamp, leased, unspent: units, now };
                let grown = shard.tables.at(position).give_back(hash, Probe::of(key.as_bytes()), returned);
                shard.bytes = shard.bytes.saturating_add_signed(grown);
            }
        }
    }

    /// Records `request` under each of `limits` (a limit listed twice once), then drops
    /// emptied tables and keeps the shard within its bound.
    fn record_all(&self, shard: &mut Shard, limits: &[Limit], request: Request<'_>, admitted: bool) {
        for (index, limit) in limits.iter().enumerate() {
            // A limit listed twice is one state: record the request once.
            if first_listing(limits, index) {
                let change = shard.record(limit, request, admitted, &self.inner.hasher);
                shard.count(change, &*self.inner.clock, &self.inner.hasher);
            }
        }
        for limit in limits {
            shard.drop_table_if_empty(limit.id());
        }
        shard.keep_within(self.inner.bound, (self.inner.clock)(), &self.inner.hasher);
    }

    /// Makes room in a full shard, before a check of several limits is judged, for the
    /// states it will insert: settling one limit then never drops a state another limit's
    /// decision was made on. (Making room may drop one of this key's own states; the key
    /// is then judged fresh under that limit, as after any eviction.) Only a cap smaller
    /// than the limits checked together can leave the shard over it, by this key's states,
    /// when it holds nothing else.
    ///
    /// # Errors
    ///
    /// [`StoreError::Full`] when the room cannot be made: the shard holds limited states only.
    fn make_room_for(&self, shard: &mut Shard, limits: &[Limit], request: Request<'_>) -> Result<(), StoreError> {
        let bound = self.inner.bound;
        let first_listed =
            || (0..limits.len()).filter(|&index| first_listing(limits, index)).map(|index| &limits[index]);
        // At most this much is needed, found without looking the key up.
        let at_most: Room = first_listed().map(|limit| shard.room_for_any_key(limit, request.probe)).sum();
        let room = shard.room_left(bound);
        if at_most.states <= room.states && at_most.bytes <= room.bytes {
            return Ok(());
        }
        loop {
            // Again after each round: making room may have dropped one of this key's states.
            let needed: Room = first_listed().map(|limit| shard.room_for(limit, request)).sum();
            if needed == Room::default() || shard.fits(bound, needed) {
                return Ok(());
            }
            let before = shard.states;
            shard.make_room(bound, needed, (self.inner.clock)(), &self.inner.hasher);
            if shard.states == before {
                break;
            }
        }
        if shard.states == 0 { Ok(()) } else { Err(self.full()) }
    }

    /// Checks `key` against one limit at `now`: [`check_now`](Self::check_now) with a
    /// single limit (which calls this), returning the decision alone.
    ///
    /// # Errors
    ///
    /// [`StoreError::Full`] when the key needs a new state and its shard is full of
    /// limited states.
    #[inline]
    pub fn check_one(&self, key: Key<'_>, limit: &Limit, now: Timestamp, cost: u64) -> Result<Decision, StoreError> {
        let key = key.as_bytes();
        let hash = self.inner.hasher.hash_one(key);
        let request = Request { hash, probe: Probe::of(key), now, cost, lease: Lease::default() };
        let mut shard = self.shard(hash).lock();
        self.settle(&mut shard, limit, request)
    }

    /// Forgets `key`'s state for each of `limits` at once; returns how many states were held.
    pub fn reset_now(&self, key: Key<'_>, limits: &[Limit]) -> usize {
        let key = key.as_bytes();
        let hash = self.inner.hasher.hash_one(key);
        let mut shard = self.shard(hash).lock();
        let probe = Probe::of(key);
        limits.iter().filter(|limit| shard.forget(limit, hash, probe, &self.inner.hasher)).count()
    }

    /// Drops every state that is back to fresh by the store's clock; returns how many.
    pub fn sweep(&self) -> usize {
        let now = (self.inner.clock)();
        self.inner.shards.iter().map(|shard| shard.0.lock().drop_expiring_by(now, &self.inner.hasher)).sum()
    }

    /// The number of states held (one per limit and key).
    pub fn len(&self) -> usize {
        self.inner.shards.iter().map(|shard| shard.0.lock().states).sum()
    }

    /// The number of states held for each limit, by limit name (the states of every
    /// definition under one name add up); names holding none are left out. Walks the
    /// shards' tables, not their states.
    pub fn len_by_name(&self) -> BTreeMap<Arc<str>, usize> {
        let mut counts = BTreeMap::new();
        for shard in self.inner.shards.iter() {
            for (owner, table) in shard.0.lock().tables.iter() {
                *counts.entry(Arc::clone(&owner.name)).or_default() += table.len();
            }
        }
        counts
    }

    /// True when no state is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The number of tables held: one per limit in each shard that holds a state of it.
    /// A table is dropped with its last state.
    pub fn tables(&self) -> usize {
        self.inner.shards.iter().map(|shard| shard.0.lock().tables.len()).sum()
    }

    /// Bytes held by the tables, keys and states (not counting the allocator's overhead):
    /// what [`max_memory`](MemoryStoreBuilder::max_memory) bounds. Counted from scratch,
    /// so it takes a while on a large store.
    pub fn heap_bytes(&self) -> usize {
        self.inner.shards.iter().map(|shard| shard.0.lock().heap_bytes()).sum()
    }

    fn shard(&self, hash: u64) -> &Mutex<Shard> {
        &self.inner.shards[self.shard_index(hash)].0
    }

    fn shard_index(&self, hash: u64) -> usize {
        // Middle bits: a table uses the low bits for its index and the top 8 for tags.
        (hash >> 32) as usize & (self.inner.shards.len() - 1)
    }

    /// The error for a key refused because its shard is full of limited states.
    fn full(&self) -> StoreError {
        StoreError::Full { max_keys: self.inner.max_keys, max_memory: self.inner.max_memory }
    }

    /// Decides and records `request` under `limit`. The common case (the key holds a state,
    /// which stays where it is and the same size) does nothing more than find it, decide
    /// and record; anything else goes out of line.
    #[inline(always)]
    fn settle(&self, shard: &mut Shard, limit: &Limit, request: Request<'_>) -> Result<Decision, StoreError> {
        let Some(position) = shard.tables.position(limit.id()) else {
            return self.settle_new(shard, limit, request);
        };
        let mut grown = 0;
        let Some(decision) = shard.tables.at(position).settle(request, None, &mut grown) else {
            return self.settle_new(shard, limit, request);
        };
        if grown != 0 {
            self.resized(shard, grown);
        }
        Ok(decision)
    }

    /// Counts a state's heap reallocated by a check (a sliding log's ring), and makes room
    /// if that took the shard past its bound.
    #[cold]
    #[inline(never)]
    fn resized(&self, shard: &mut Shard, grown: isize) {
        shard.bytes = shard.bytes.saturating_add_signed(grown);
        shard.keep_within(self.inner.bound, (self.inner.clock)(), &self.inner.hasher);
    }

    /// [`settle`](Self::settle) for a key that holds no state under `limit` (its table
    /// created if the shard has none, and dropped again if the request stored nothing: a
    /// peek, a rejection). A new state that takes the shard past its bound is taken out
    /// again and given room, the request decided again (the algorithm is pure: the same
    /// decision), or refused when the shard holds only limited states. (Room is made after
    /// the insertion, not before, so that a request that stores nothing never makes room.)
    #[cold]
    #[inline(never)]
    fn settle_new(&self, shard: &mut Shard, limit: &Limit, request: Request<'_>) -> Result<Decision, StoreError> {
        let (clock, hasher, bound) = (&*self.inner.clock, &self.inner.hasher, self.inner.bound);
        let position = shard.table_of(limit);
        let (decision, change) = shard.tables.at(position).settle_new(request, None, hasher);
        if !change.inserted {
            shard.drop_table_if_empty(limit.id());
            return Ok(decision);
        }
        shard.count(change, clock, hasher);
        if shard.is_within(bound) {
            return Ok(decision);
        }
        shard.forget(limit, request.hash, request.probe, hasher);
        let needed = shard.room_for(limit, request);
        if !shard.make_room(bound, needed, clock(), hasher) {
            return Err(self.full());
        }
        let position = shard.table_of(limit);
        let (decision, change) = shard.tables.at(position).settle_new(request, None, hasher);
        shard.count(change, clock, hasher);
        Ok(decision)
    }
}

/// The decision for `request` under `limit`, changing nothing.
fn judge(shard: &mut Shard, limit: &Limit, request: Request<'_>) -> Decision {
    match shard.tables.position(limit.id()) {
        Some(position) => shard.tables.at(position).judge(request),
        None => limit.policy().decide_fresh_leased(request.now, request.cost, request.lease),
    }
}

/// Each limit's decision for `request`, changing nothing.
fn judge_all(shard: &mut Shard, limits: &[Limit], request: Request<'_>) -> SmallVec<[Decision; 4]> {
    limits.iter().map(|limit| judge(shard, limit, request)).collect()
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::new()
    }
}

impl fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore")
            .field("shards", &self.inner.shards.len())
            .field("max_keys", &self.inner.max_keys)
            .field("max_memory", &self.inner.max_memory)
            .finish_non_exhaustive()
    }
}

impl Store for MemoryStore {
    fn check(&self, check: Check<'_>) -> impl Future<Output = Result<Verdict, StoreError>> + Send {
        let verdict: Ready<_> = ready(self.check_now(check.key, check.limits, check.now, check.cost));
        verdict
    }

    #[inline]
    fn check_ready(&self, check: Check<'_>) -> Option<Result<Verdict, StoreError>> {
        Some(self.check_now(check.key, check.limits, check.now, check.cost))
    }

    fn reset(&self, key: Key<'_>, limits: &[Limit]) -> impl Future<Output = Result<(), StoreError>> + Send {
        self.reset_now(key, limits);
        ready(Ok(()))
    }

    fn check_and_lease(&self, check: Check<'_>) -> impl Future<Output = Result<LeaseAnswer, StoreError>> + Send {
        ready(self.check_and_lease_now(check))
    }

    fn give_back(&self, back: GiveBack<'_>) -> impl Future<Output = Result<(), StoreError>> + Send {
        self.give_back_now(back);
        ready(Ok(()))
    }
}

/// Whether `limits[index]` is listed for the first time (a limit listed twice is one state).
fn first_listing(limits: &[Limit], index: usize) -> bool {
    !limits[..index].iter().any(|earlier| earlier.id() == limits[index].id())
}

#[cfg(test)]
mod tests;
