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

use hashbrown::HashTable;

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

/// One counter: a key, its hash and its counts.
#[derive(Debug)]
struct Slot {
    hash: u64,
    error: u64,
    /// A replaced key's buffer is reused, so a table that has seen its longest keys
    /// allocates no more.
    key: Vec<u8>,
}

/// The `k` heaviest keys of a weighted stream, with their errors.
///
/// A key is found through a hash table of counter ids (its bytes compared, so two keys
/// with one hash stay apart), and the smallest counter is the root of a min-heap: a check
/// costs O(1) to find its key and O(log k) to keep the heap, not a scan of the `k`.
#[derive(Debug)]
pub(crate) struct SpaceSaving {
    slots: Vec<Slot>,
    /// Counts with their counter ids, a min-heap by count (the counts here are the ones
    /// that matter; `Slot::count` is not kept).
    heap: Vec<(u64, u32)>,
    /// Each counter's place in `heap`.
    place: Vec<u32>,
    /// Counter ids by their key's hash.
    index: HashTable<u32>,
    capacity: usize,
    total: u64,
}

impl SpaceSaving {
    /// An empty table of `capacity` counters (at least one, at most 2^32).
    pub(crate) fn new(capacity: usize) -> SpaceSaving {
        let capacity = capacity.clamp(1, u32::MAX as usize);
        SpaceSaving {
            slots: Vec::with_capacity(capacity),
            heap: Vec::with_capacity(capacity),
            place: Vec::with_capacity(capacity),
            index: HashTable::with_capacity(capacity),
            capacity,
            total: 0,
        }
    }

    /// Adds `weight` to `key`, whose hash is `hash` (any hash: equal keys, equal hashes).
    pub(crate) fn add(&mut self, hash: u64, key: &[u8], weight: u64) {
        self.total = self.total.saturating_add(weight);
        let slots = &self.slots;
        if let Some(&id) = self.index.find(hash, |&id| slots[id as usize].key == key) {
            let place = self.place[id as usize] as usize;
            self.heap[place].0 = self.heap[place].0.saturating_add(weight);
            self.sift_down(place);
            return;
        }
        if self.slots.len() < self.capacity {
            self.push(hash, key, weight);
            return;
        }
        // The smallest counter takes the new key, its count as the new key's error.
        let (min, id) = self.heap[0];
        let slot = &mut self.slots[id as usize];
        if let Ok(entry) = self.index.find_entry(slot.hash, |&other| other == id) {
            entry.remove();
        }
        (slot.hash, slot.error) = (hash, min);
        slot.key.clear();
        slot.key.extend_from_slice(key);
        let slots = &self.slots;
        self.index.insert_unique(hash, id, |&other| slots[other as usize].hash);
        self.heap[0].0 = min.saturating_add(weight);
        self.sift_down(0);
    }

    /// Takes a free counter for `key`.
    fn push(&mut self, hash: u64, key: &[u8], weight: u64) {
        let id = u32::try_from(self.slots.len()).unwrap_or(u32::MAX);
        self.slots.push(Slot { hash, error: 0, key: key.to_vec() });
        self.place.push(id);
        self.heap.push((weight, id));
        let slots = &self.slots;
        self.index.insert_unique(hash, id, |&other| slots[other as usize].hash);
        self.sift_up(self.heap.len() - 1);
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        self.place[self.heap[a].1 as usize] = u32::try_from(a).unwrap_or(u32::MAX);
        self.place[self.heap[b].1 as usize] = u32::try_from(b).unwrap_or(u32::MAX);
    }

    /// Moves the counter at `place` down while a child is smaller (its count grew): the
    /// smaller children move up into the hole, and the counter lands once, where it stops.
    fn sift_down(&mut self, mut place: usize) {
        let moving = self.heap[place];
        loop {
            let left = 2 * place + 1;
            let Some(&(left_count, _)) = self.heap.get(left) else { break };
            let child = match self.heap.get(left + 1) {
                Some(&(right_count, _)) if right_count < left_count => left + 1,
                _ => left,
            };
            if self.heap[child].0 >= moving.0 {
                break;
            }
            self.set(place, self.heap[child]);
            place = child;
        }
        self.set(place, moving);
    }

    /// Puts `entry` at `place` in the heap and notes where its counter is.
    fn set(&mut self, place: usize, entry: (u64, u32)) {
        self.heap[place] = entry;
        self.place[entry.1 as usize] = u32::try_from(place).unwrap_or(u32::MAX);
    }

    /// Moves the counter at `place` up while its parent is larger (it was just added).
    fn sift_up(&mut self, mut place: usize) {
        while place > 0 {
            let parent = (place - 1) / 2;
            if self.heap[parent].0 <= self.heap[place].0 {
                return;
            }
            self.swap(place, parent);
            place = parent;
        }
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
        let mut entries: Vec<Counted> = self
            .heap
            .iter()
            .map(|&(count, id)| {
                let slot = &self.slots[id as usize];
                Counted { key: slot.key.clone(), count, error: slot.error }
            })
            .collect();
        entries.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
        entries
    }

    /// Forgets every key.
    pub(crate) fn clear(&mut self) {
        // The key buffers go too: a flood of long keys in one epoch must not pin memory
        // beyond the table's own bound, and `heap_bytes` counts what is held.
        self.slots.clear();
        self.heap.clear();
        self.place.clear();
        self.index.clear();
        self.total = 0;
    }

    /// The bytes this table holds on the heap: its counters, heap, index and keys.
    pub(crate) fn heap_bytes(&self) -> usize {
        let per_counter = size_of::<Slot>() + size_of::<(u64, u32)>() + size_of::<u32>();
        let keys: usize = self.slots.iter().map(|slot| slot.key.capacity()).sum();
        self.capacity * per_counter + self.index.allocation_size() + keys
    }
}

/// A hasher of keys for the tables' index and the distinct-key sketch: fixed seeds,
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
