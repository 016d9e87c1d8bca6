//! The settings of a [`MemoryStore`], and how it is put together from them.

use super::dense::MAX_ENTRIES;
use super::{DEFAULT_MAX_KEYS, Inner, MAX_SHARDS, MemoryStore, Padded, Shard};
use crate::{Clock, SystemClock, Timestamp};
use ahash::RandomState;
use parking_lot::Mutex;
use std::fmt;
use std::sync::Arc;

/// Settings of a [`MemoryStore`].
#[derive(Default)]
pub struct MemoryStoreBuilder {
    max_keys: Option<usize>,
    shards: Option<usize>,
    clock: Option<Box<dyn Fn() -> Timestamp + Send + Sync>>,
}

impl fmt::Debug for MemoryStoreBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStoreBuilder")
            .field("max_keys", &self.max_keys)
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
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut count = self.shards.unwrap_or(16 * cpus).clamp(1, MAX_SHARDS).next_power_of_two();
        while count > max_keys {
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
        let inner = Inner { shards, hasher: RandomState::new(), shard_capacity: max_keys / count, clock };
        MemoryStore { inner: Arc::new(inner) }
    }
}
