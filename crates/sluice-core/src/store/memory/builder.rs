//! The settings of a [`MemoryStore`], and how it is put together from them.

use super::dense::MAX_ENTRIES;
use super::{Bound, DEFAULT_MAX_KEYS, DEFAULT_MAX_MEMORY, Inner, MAX_SHARDS, MemoryStore, Padded, Shard};
use crate::{Clock, SystemClock, Timestamp};
use ahash::RandomState;
use parking_lot::Mutex;
use std::fmt;
use std::sync::Arc;

/// A shard's share of `max_memory` is at least this (64 KiB), shards fewer if need be, so
/// that a small cap still leaves each shard room for a useful number of states.
const MIN_SHARD_BYTES: usize = 64 << 10;

/// Settings of a [`MemoryStore`].
#[derive(Default)]
pub struct MemoryStoreBuilder {
    max_keys: Option<usize>,
    max_memory: Option<usize>,
    shards: Option<usize>,
    clock: Option<Box<dyn Fn() -> Timestamp + Send + Sync>>,
}

impl fmt::Debug for MemoryStoreBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStoreBuilder")
            .field("max_keys", &self.max_keys)
            .field("max_memory", &self.max_memory)
            .field("shards", &self.shards)
            .finish_non_exhaustive()
    }
}

impl MemoryStoreBuilder {
    /// The most states the store holds at once (default [`DEFAULT_MAX_KEYS`]). The cap is
    /// split evenly between shards; each shard holds at most `max_keys / shards`, and at
    /// most 16 777 215 (more shards are used when needed, up to 4096).
    pub fn max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = Some(max_keys.max(1));
        self
    }

    /// The most bytes the store holds at once, keys included, as
    /// [`heap_bytes`](MemoryStore::heap_bytes) counts them (default [`DEFAULT_MAX_MEMORY`]).
    /// Split evenly between shards, as `max_keys` is; each shard gets at least 64 KiB
    /// (fewer shards are used when needed). The cap is enforced as states are added: a
    /// shard over its share makes room as when it holds `max_keys` states, dropping
    /// states that are not limited, and refuses a new key when only limited states are left.
    pub fn max_memory(mut self, bytes: usize) -> Self {
        self.max_memory = Some(bytes.max(1));
        self
    }

    /// The number of shards, rounded up to a power of two, at most 4096 (default: 16 per CPU).
    pub fn shards(mut self, shards: usize) -> Self {
        self.shards = Some(shards.max(1));
        self
    }

    /// The clock by which states are judged fresh and dropped (default: the system clock).
    ///
    /// The simulator gives a clock that never moves, so it drops nothing: requests carry
    /// their own times, and a state may only be dropped by the store's own clock.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Some(Box::new(move || clock.now()));
        self
    }

    /// The store.
    pub fn build(self) -> MemoryStore {
        let max_keys = self.max_keys.unwrap_or(DEFAULT_MAX_KEYS);
        let max_memory = self.max_memory.unwrap_or(DEFAULT_MAX_MEMORY);
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut count = self.shards.unwrap_or(16 * cpus).clamp(1, MAX_SHARDS).next_power_of_two();
        while count > 1 && (count > max_keys || max_memory / count < MIN_SHARD_BYTES) {
            count /= 2;
        }
        // A shard's table holds at most MAX_ENTRIES states: spread larger caps wider.
        while max_keys / count > MAX_ENTRIES && count < MAX_SHARDS {
            count *= 2;
        }
        let max_keys = max_keys.min(MAX_ENTRIES * count);
        let clock = self.clock.unwrap_or_else(|| {
            let clock = SystemClock::new();
            Box::new(move || clock.now())
        });
        let shards = (0..count).map(|_| Padded(Mutex::new(Shard::default()))).collect();
        let bound = Bound { states: max_keys / count, bytes: max_memory / count };
        let inner = Inner { shards, hasher: RandomState::new(), bound, max_keys, max_memory, clock };
        MemoryStore { inner: Arc::new(inner) }
    }
}
