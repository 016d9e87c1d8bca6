//! The embedded store: per-key states in memory, in shards behind short locks.
//!
//! A key's shard is chosen by a keyed hash of the key alone, so all limits checked together
//! for one key sit behind one lock and an all-or-nothing check takes one lock. Inside a
//! shard, each limit has its own table typed by its algorithm.
//!
//! Memory stays bounded: a state that is back to fresh (by the store's own clock, which
//! only moves forward) is dropped by sweeps that run as keys are added and by
//! [`MemoryStore::sweep`]; and the number of states never exceeds
//! [`max_keys`](MemoryStoreBuilder::max_keys). When a shard is full, it first drops every
//! fresh-equivalent state, then the states that would become fresh soonest: losing one only
//! makes its key start over, which admits at most what the key would have been admitted
//! soon anyway, and states that stay hot (keys being rejected for a long time) are kept.
//!
//! [`MemoryStore::snapshot`] and [`MemoryStore::restore`] carry the states over a restart.

mod builder;
mod dense;
mod keyed;
mod snapshot;
mod stored_key;
mod table;

pub use builder::MemoryStoreBuilder;
use keyed::KeyedStates;
pub use snapshot::{RestoreReport, SnapshotError};
use table::Table;

use crate::store::{Store, StoreError, Verdict};
use crate::{Decision, Key, Limit, LimitId, Timestamp};
use ahash::RandomState;
use keyed::Request;
use parking_lot::Mutex;
use smallvec::SmallVec;
use std::fmt;
use std::future::{Future, Ready, ready};
use std::sync::Arc;
use stored_key::Probe;

/// States in one shard are swept after this many insertions (or as many as it holds).
const SWEEP_EVERY: usize = 1024;

/// The most shards a store is cut into.
const MAX_SHARDS: usize = 4096;

/// The default cap on states held.
pub const DEFAULT_MAX_KEYS: usize = 10_000_000;

/// The in-memory store. Cheap to clone: clones share the same states.
///
/// # Examples
///
/// ```
/// use sluice::{Key, Limit, MemoryStore, Store, Timestamp, TokenBucket, TokenBucketSettings};
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
    shard_capacity: usize,
    clock: Box<dyn Fn() -> Timestamp + Send + Sync>,
}

/// Keeps each shard's lock on its own cache lines.
#[repr(align(128))]
struct Padded<T>(T);

#[derive(Debug, Default)]
struct Shard {
    /// Each limit's table, with what the table does not hold of its limit: the id it is
    /// found by, and the name (for the snapshot's definitions; the table holds the policy).
    /// Not the whole `Limit`: its policy would be a second copy in every shard.
    tables: Vec<(TableOwner, Table)>,
    states: usize,
    inserted_since_sweep: usize,
}

/// The limit a shard's table belongs to, less its policy (which the table holds).
#[derive(Debug)]
struct TableOwner {
    id: LimitId,
    name: Arc<str>,
}

impl TableOwner {
    /// The whole limit, its policy read back from `table`.
    fn limit(&self, table: &Table) -> Limit {
        Limit::new(Arc::clone(&self.name), table.policy())
    }
}

impl MemoryStore {
    /// A store with the default settings: the system clock, [`DEFAULT_MAX_KEYS`].
    pub fn new() -> Self {
        MemoryStore::builder().build()
    }

    /// A builder to set the cap, the shard count and the store's own clock.
    pub fn builder() -> MemoryStoreBuilder {
        MemoryStoreBuilder::default()
    }

    /// Checks `key` against `limits` at `now`, all or nothing, and returns at once.
    ///
    /// # Errors
    ///
    /// [`StoreError::NoLimits`] when `limits` is empty.
    pub fn check_now(&self, key: Key<'_>, limits: &[Limit], now: Timestamp, cost: u64) -> Result<Verdict, StoreError> {
        if let [limit] = limits {
            let decision = self.check_one(key, limit, now, cost);
            return Ok(Verdict { decision, limit: 0, source: crate::store::Source::Store });
        }
        let key = key.as_bytes();
        let hash = self.inner.hasher.hash_one(key);
        let mut shard = self.shard(hash).lock();
        let probe = Probe::of(key);
        let request = Request { hash, probe, now, cost };
        if shard.states + limits.len() > self.inner.shard_capacity {
            self.make_room_for(&mut shard, limits, request);
        }
        let decisions: SmallVec<[Decision; 4]> =
            limits.iter().map(|limit| shard.table(limit).judge(hash, probe, now, cost)).collect();
        let admitted = decisions.iter().all(|d| d.allowed);
        for (index, limit) in limits.iter().enumerate() {
            // A limit listed twice is one state: record the request once.
            if first_listing(limits, index) {
                self.settle(&mut shard, limit, request, Some(admitted));
            }
        }
        Verdict::combine(&decisions).ok_or(StoreError::NoLimits)
    }

    /// Makes room in a full shard, before a check of several limits is judged, for the
    /// states it will insert: settling one limit then never drops a state another limit's
    /// decision was made on. (Making room may drop one of this key's own states; the key
    /// is then judged fresh under that limit, as after any eviction.) Only a cap smaller
    /// than the limits checked together can leave the shard over it, by this key's states.
    fn make_room_for(&self, shard: &mut Shard, limits: &[Limit], request: Request<'_>) {
        let capacity = self.inner.shard_capacity;
        loop {
            let missing = (0..limits.len())
                .filter(|&index| first_listing(limits, index) && !shard.holds(&limits[index], request))
                .count();
            let excess = (shard.states + missing).saturating_sub(capacity);
            if excess == 0 {
                return;
            }
            let before = shard.states;
            shard.make_room(capacity, excess, (self.inner.clock)(), &self.inner.hasher);
            if shard.states == before {
                return;
            }
        }
    }

    /// Checks `key` against one limit at `now`: [`check_now`](Self::check_now) with a
    /// single limit, on the shortest path (what a one-limit [`RateLimiter`](crate::RateLimiter)
    /// calls).
    #[inline]
    pub fn check_one(&self, key: Key<'_>, limit: &Limit, now: Timestamp, cost: u64) -> Decision {
        let key = key.as_bytes();
        let hash = self.inner.hasher.hash_one(key);
        let request = Request { hash, probe: Probe::of(key), now, cost };
        let mut shard = self.shard(hash).lock();
        self.settle(&mut shard, limit, request, None)
    }

    /// Forgets `key`'s state for each of `limits` at once; returns how many states were held.
    pub fn reset_now(&self, key: Key<'_>, limits: &[Limit]) -> usize {
        let key = key.as_bytes();
        let hash = self.inner.hasher.hash_one(key);
        let mut shard = self.shard(hash).lock();
        let probe = Probe::of(key);
        let Shard { tables, states, .. } = &mut *shard;
        let mut removed = 0;
        for (held, table) in tables.iter_mut() {
            if limits.iter().any(|limit| limit.id() == held.id) && table.remove(hash, probe, &self.inner.hasher) {
                removed += 1;
            }
        }
        *states -= removed;
        removed
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

    /// True when no state is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held by the tables, keys and states (not counting the allocator's overhead).
    pub fn heap_bytes(&self) -> usize {
        let tables = |shard: &Shard| {
            let own = shard.tables.capacity() * size_of::<(TableOwner, Table)>();
            own + shard.tables.iter().map(|(_, t)| t.heap_bytes()).sum::<usize>()
        };
        self.inner.shards.iter().map(|shard| tables(&shard.0.lock())).sum()
    }

    fn shard(&self, hash: u64) -> &Mutex<Shard> {
        &self.inner.shards[self.shard_index(hash)].0
    }

    fn shard_index(&self, hash: u64) -> usize {
        // Middle bits: a table uses the low bits for its index and the top 8 for tags.
        (hash >> 32) as usize & (self.inner.shards.len() - 1)
    }

    #[inline(always)]
    fn settle(&self, shard: &mut Shard, limit: &Limit, request: Request<'_>, admitted: Option<bool>) -> Decision {
        // Room is made only for a new state: a key already held keeps its state (making
        // room first could drop the very state this request is decided on).
        if shard.states >= self.inner.shard_capacity && !shard.holds(limit, request) {
            shard.make_room(self.inner.shard_capacity, 1, (self.inner.clock)(), &self.inner.hasher);
        }
        let mut inserted = false;
        let decision = shard.table(limit).settle(request, admitted, &self.inner.hasher, &mut inserted);
        if inserted {
            shard.states += 1;
            shard.inserted_since_sweep += 1;
            // Sweep each time the shard has doubled since the last sweep (compared with the
            // states that sweep kept, not with `states`, which counts these insertions too
            // and would never be reached again once a sweep keeps anything).
            let kept = shard.states.saturating_sub(shard.inserted_since_sweep);
            if shard.inserted_since_sweep >= SWEEP_EVERY.max(kept) {
                shard.drop_expiring_by((self.inner.clock)(), &self.inner.hasher);
            }
        }
        decision
    }
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
            .field("shard_capacity", &self.inner.shard_capacity)
            .finish_non_exhaustive()
    }
}

impl Store for MemoryStore {
    fn check(
        &self,
        key: Key<'_>,
        limits: &[Limit],
        now: Timestamp,
        cost: u64,
    ) -> impl Future<Output = Result<Verdict, StoreError>> + Send {
        let verdict: Ready<_> = ready(self.check_now(key, limits, now, cost));
        verdict
    }

    fn reset(&self, key: Key<'_>, limits: &[Limit]) -> impl Future<Output = Result<(), StoreError>> + Send {
        self.reset_now(key, limits);
        ready(Ok(()))
    }
}

impl Shard {
    /// The table of `limit`, created empty on first use.
    #[inline]
    fn table(&mut self, limit: &Limit) -> &mut Table {
        let index = match self.position(limit) {
            Some(index) => index,
            None => {
                // One more slot, not Vec's four: a table and its owner are 184 bytes, and most
                // shards serve one or two limits.
                self.tables.reserve_exact(1);
                self.tables.push((
                    TableOwner { id: limit.id(), name: Arc::clone(limit.shared_name()) },
                    Table::new(limit.policy()),
                ));
                self.tables.len() - 1
            }
        };
        &mut self.tables[index].1
    }

    /// Where `limit`'s table is in `tables`, if it has one.
    #[inline]
    fn position(&self, limit: &Limit) -> Option<usize> {
        let id = limit.id();
        self.tables.iter().position(|(held, _)| held.id == id)
    }

    /// Whether the key of `request` has a state under `limit`.
    fn holds(&mut self, limit: &Limit, request: Request<'_>) -> bool {
        self.position(limit).is_some_and(|index| self.tables[index].1.holds(request.hash, request.probe))
    }

    /// Drops the states expiring before `time` and `ties` of those expiring at `time`.
    fn drop_expiring_before(&mut self, time: Timestamp, mut ties: usize, hasher: &RandomState) -> usize {
        let dropped: usize = self.tables.iter_mut().map(|(_, t)| t.drop_expiring_before(time, &mut ties, hasher)).sum();
        self.states -= dropped;
        self.inserted_since_sweep = 0;
        dropped
    }

    /// Drops every state that is fresh-equivalent by `now`.
    fn drop_expiring_by(&mut self, now: Timestamp, hasher: &RandomState) -> usize {
        self.drop_expiring_before(Timestamp::from_micros(now.as_micros().saturating_add(1)), 0, hasher)
    }

    /// Frees a sixteenth of the shard, and at least `at_least` states: every
    /// fresh-equivalent state, then (if that was not enough) the states that would become
    /// fresh soonest.
    fn make_room(&mut self, capacity: usize, at_least: usize, now: Timestamp, hasher: &RandomState) {
        let target = (capacity / 16).max(at_least).max(1);
        if self.drop_expiring_by(now, hasher) >= target {
            return;
        }
        let mut expiries: Vec<Timestamp> = self.tables.iter().flat_map(|(_, t)| t.expiries()).collect();
        let Some(last) = expiries.len().checked_sub(1) else {
            return;
        };
        let threshold = *expiries.select_nth_unstable((target - 1).min(last)).1;
        let below = expiries.iter().filter(|&&expiry| expiry < threshold).count();
        self.drop_expiring_before(threshold, target.saturating_sub(below), hasher);
    }
}

/// Whether `limits[index]` is listed for the first time (a limit listed twice is one state).
fn first_listing(limits: &[Limit], index: usize) -> bool {
    !limits[..index].iter().any(|earlier| earlier.id() == limits[index].id())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each shard allocates one of these per limit it serves: with 1 000 keys over 32 shards
    /// that is about 6 bytes per key, so the per-key targets (48 bytes for a token bucket,
    /// 64 for a sliding log, with 16-byte keys) hold only while it stays this small. The
    /// whole `Limit` here (its policy a second copy of the table's) cost 1.3 bytes per key.
    #[test]
    fn a_shards_table_and_its_owner_fit_in_184_bytes() {
        assert!(size_of::<(TableOwner, Table)>() <= 184, "{} bytes", size_of::<(TableOwner, Table)>());
    }
}
