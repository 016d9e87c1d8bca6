//! A space-saving table (Metwally, Agrawal and El Abbadi, 2005), weighted: the heaviest
//! keys of a stream in `k` counters, each count overestimated by a stated error.
//!
//! A key already tracked adds its weight to its counter. A new key takes a free counter,
//! or else the smallest one: it inherits that count (`min`) as its possible overestimate,
//! its `error`, and adds its weight on top. Every add raises the counters' sum by the
//! weight, so the sum is always `n`, the stream's total weight. From that:
//!
//! - the smallest counter is at most `n / k` once the table is full (none is free before);
//! - the smallest counter never decreases, so every `error` (a past smallest) is at most
//!   the smallest now, at most `n / k`;
//! - a key's counter is never below its true weight (`count − error ≤ true ≤ count`);
//! - a key not in the table weighs at most the smallest counter: it weighed at most that
//!   when it was last evicted, and has not come back since. So every key weighing more
//!   than `n / k` is in the table.
//!
//! Nothing is sampled and nothing is dropped: the bound holds for every stream, adversarial
//! ones included (`space_saving_props.rs` checks it against an exact count).

/// A tracked key with its counts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Counted {
    /// The key's bytes.
    pub(crate) key: Vec<u8>,
    /// Its weight as counted: never below its true weight, at most `error` above it.
    pub(crate) count: u64,
    /// How much `count` may overstate: the count of the key it replaced (0: exact).
    pub(crate) error: u64,
}

/// The `k` heaviest keys of a weighted stream, with their errors.
#[derive(Debug)]
pub(crate) struct SpaceSaving {
    /// Each counter's key hash, compared before the key's bytes (a fast filter only).
    hashes: Vec<u64>,
    counts: Vec<u64>,
    errors: Vec<u64>,
    /// Each counter's key; a replaced key's buffer is reused, so a table that has seen
    /// its longest keys allocates no more.
    keys: Vec<Vec<u8>>,
    capacity: usize,
    total: u64,
}

impl SpaceSaving {
    /// An empty table of `capacity` counters (at least one).
    pub(crate) fn new(capacity: usize) -> SpaceSaving {
        let capacity = capacity.max(1);
        SpaceSaving {
            hashes: Vec::with_capacity(capacity),
            counts: Vec::with_capacity(capacity),
            errors: Vec::with_capacity(capacity),
            keys: Vec::with_capacity(capacity),
            capacity,
            total: 0,
        }
    }

    /// Adds `weight` to `key`, whose hash is `hash` (any hash: equal keys, equal hashes).
    pub(crate) fn add(&mut self, hash: u64, key: &[u8], weight: u64) {
        self.total = self.total.saturating_add(weight);
        // One pass finds the key or, failing that, the smallest counter.
        let mut smallest = 0;
        for (slot, &slot_hash) in self.hashes.iter().enumerate() {
            if slot_hash == hash && self.keys[slot] == key {
                self.counts[slot] = self.counts[slot].saturating_add(weight);
                return;
            }
            if self.counts[slot] < self.counts[smallest] {
                smallest = slot;
            }
        }
        if self.counts.len() < self.capacity {
            self.hashes.push(hash);
            self.counts.push(weight);
            self.errors.push(0);
            self.keys.push(key.to_vec());
            return;
        }
        let min = self.counts[smallest];
        self.hashes[smallest] = hash;
        self.counts[smallest] = min.saturating_add(weight);
        self.errors[smallest] = min;
        self.keys[smallest].clear();
        self.keys[smallest].extend_from_slice(key);
    }

    /// The stream's total weight so far, `n`.
    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    /// The number of counters, `k`.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// `n / k`: every error is at most this, and every key weighing more is listed.
    pub(crate) fn bound(&self) -> u64 {
        self.total / self.capacity as u64
    }

    /// The tracked keys, heaviest first (ties by key).
    pub(crate) fn entries(&self) -> Vec<Counted> {
        let mut entries: Vec<Counted> = (0..self.counts.len())
            .map(|slot| Counted { key: self.keys[slot].clone(), count: self.counts[slot], error: self.errors[slot] })
            .collect();
        entries.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
        entries
    }

    /// Forgets every key (the buffers are kept for the next stream).
    pub(crate) fn clear(&mut self) {
        self.hashes.clear();
        self.counts.clear();
        self.errors.clear();
        self.total = 0;
        // The key buffers go too: a flood of long keys in one epoch must not pin memory
        // beyond the table's own bound, and `heap_bytes` counts what is held.
        self.keys.clear();
    }

    /// The bytes this table holds on the heap: its counters and its keys' buffers.
    pub(crate) fn heap_bytes(&self) -> usize {
        let per_counter = 3 * size_of::<u64>() + size_of::<Vec<u8>>();
        self.capacity * per_counter + self.keys.iter().map(Vec::capacity).sum::<usize>()
    }
}

/// A hasher of keys for the tables' fast filter and the distinct-key sketch: fixed seeds,
/// so equal keys hash alike in every thread and every run of the process.
pub(crate) fn key_hash(key: &[u8]) -> u64 {
    KEY_HASHER.hash_one(key)
}

static KEY_HASHER: ahash::RandomState =
    ahash::RandomState::with_seeds(0x5eed_0001, 0x5eed_0002, 0x5eed_0003, 0x5eed_0004);

#[cfg(test)]
mod tests {
    use super::*;

    fn table_of(capacity: usize, stream: &[(&str, u64)]) -> SpaceSaving {
        let mut table = SpaceSaving::new(capacity);
        for (key, weight) in stream {
            table.add(key_hash(key.as_bytes()), key.as_bytes(), *weight);
        }
        table
    }

    #[test]
    fn a_table_with_room_counts_exactly() {
        let table = table_of(4, &[("a", 1), ("b", 4), ("a", 2)]);
        let entries = table.entries();
        assert_eq!((entries[0].key.as_slice(), entries[0].count, entries[0].error), (&b"b"[..], 4, 0));
        assert_eq!((entries[1].key.as_slice(), entries[1].count, entries[1].error), (&b"a"[..], 3, 0));
        assert_eq!((table.total(), table.bound()), (7, 1));
    }

    #[test]
    fn a_new_key_replaces_the_smallest_and_inherits_its_count_as_error() {
        let table = table_of(2, &[("a", 5), ("b", 2), ("c", 1)]);
        let entries = table.entries();
        assert_eq!((entries[0].key.as_slice(), entries[0].count, entries[0].error), (&b"a"[..], 5, 0));
        assert_eq!((entries[1].key.as_slice(), entries[1].count, entries[1].error), (&b"c"[..], 3, 2));
        assert!(entries[1].error <= table.bound(), "error within n / k = {}", table.bound());
    }

    #[test]
    fn clearing_forgets_keys_and_total() {
        let mut table = table_of(2, &[("a", 5), ("b", 2), ("c", 1)]);
        table.clear();
        assert_eq!((table.entries(), table.total()), (vec![], 0));
    }
}
