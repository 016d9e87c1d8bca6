//! A hash table whose memory follows what it holds: entries packed densely in a vector
//! that grows by an eighth at a time, found through a small index of 4-byte slots.
//!
//! A table that keeps its entries in its buckets and doubles when 7/8 full holds, after a
//! doubling, about twice the memory its entries need: a store with 1 000 000 keys in 32
//! shards sits there (47.7 % full). Here only the index doubles, and an index slot is 4
//! bytes: an entry costs its own size, plus at most 1/8 of it in spare capacity, plus 5 to
//! 10 bytes of index. A lookup reads one index slot (the slot's tag, 8 bits of the hash,
//! rules out nearly every other key without touching its entry) and then the entry: two
//! dependent reads, as in a table with a control-byte array.
//!
//! The index is open addressing with linear probing; removal shifts later slots back, so
//! there are no tombstones. A table holds at most [`MAX_ENTRIES`] entries.

/// The most entries one table holds: the index stores entry positions in 24 bits.
pub(crate) const MAX_ENTRIES: usize = (1 << 24) - 1;

/// An index slot with no entry.
const EMPTY: u32 = u32::MAX;
const POSITION_BITS: u32 = 24;
const POSITION_MASK: u32 = (1 << POSITION_BITS) - 1;
/// The index grows when more than 4 in 5 of its slots are used.
const MAX_LOAD_NUMERATOR: usize = 4;
const MAX_LOAD_DENOMINATOR: usize = 5;
const MIN_SLOTS: usize = 8;

/// A set of entries found by hash; the caller compares keys and computes hashes.
#[derive(Debug, Default)]
pub(crate) struct DenseTable<T> {
    /// `EMPTY`, or the entry's position in `entries` with its hash's top 8 bits above it.
    slots: Box<[u32]>,
    entries: Vec<T>,
}

impl<T> DenseTable<T> {
    /// An empty table; it allocates on the first insertion.
    pub(crate) fn new() -> Self {
        DenseTable { slots: Box::new([]), entries: Vec::new() }
    }

    /// The number of entries.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The entries, in no particular order.
    pub(crate) fn iter(&self) -> std::slice::Iter<'_, T> {
        self.entries.iter()
    }

    /// Bytes allocated by the index and the entries' vector.
    pub(crate) fn allocation_size(&self) -> usize {
        self.slots.len() * size_of::<u32>() + self.entries.capacity() * size_of::<T>()
    }

    /// How many bytes the allocation grows by when one more entry is inserted.
    pub(crate) fn growth_of_one_more(&self) -> usize {
        let len = self.entries.len();
        let entries = match len == self.entries.capacity() {
            true => (len / 8).max(1) * size_of::<T>(),
            false => 0,
        };
        let index = match (len + 1) * MAX_LOAD_DENOMINATOR > self.slots.len() * MAX_LOAD_NUMERATOR {
            true => ((self.slots.len() * 2).max(MIN_SLOTS) - self.slots.len()) * size_of::<u32>(),
            false => 0,
        };
        entries + index
    }

    /// The entry with `hash` for which `is` holds.
    #[inline]
    pub(crate) fn find(&self, hash: u64, is: impl Fn(&T) -> bool) -> Option<&T> {
        self.find_position(hash, is).map(|(_, position)| &self.entries[position])
    }

    /// The entry with `hash` for which `is` holds, to change it.
    #[inline]
    pub(crate) fn find_mut(&mut self, hash: u64, is: impl Fn(&T) -> bool) -> Option<&mut T> {
        self.find_position(hash, is).map(|(_, position)| &mut self.entries[position])
    }

    /// Adds `entry`, whose hash is `hash` and which no entry equals; `rehash` gives any
    /// entry's hash (the index is rebuilt from them when it grows). Returns false, and
    /// drops `entry`, when the table already holds [`MAX_ENTRIES`].
    pub(crate) fn insert_unique(&mut self, hash: u64, entry: T, rehash: impl Fn(&T) -> u64) -> bool {
        let position = self.entries.len();
        if position >= MAX_ENTRIES {
            return false;
        }
        if (position + 1) * MAX_LOAD_DENOMINATOR > self.slots.len() * MAX_LOAD_NUMERATOR {
            self.rebuild_index((self.slots.len() * 2).max(MIN_SLOTS), &rehash);
        }
        if self.entries.len() == self.entries.capacity() {
            self.entries.reserve_exact((position / 8).max(1));
        }
        self.entries.push(entry);
        let mut slot = self.home(hash);
        while self.slots[slot] != EMPTY {
            slot = self.next(slot);
        }
        self.slots[slot] = tagged(hash, position);
        true
    }

    /// Removes the entry with `hash` for which `is` holds; returns whether there was one.
    pub(crate) fn remove(&mut self, hash: u64, is: impl Fn(&T) -> bool, rehash: impl Fn(&T) -> u64) -> bool {
        let Some((slot, position)) = self.find_position(hash, is) else {
            return false;
        };
        self.remove_at(slot, position, &rehash);
        true
    }

    /// Keeps only the entries for which `keep` holds (asked once per entry, in order).
    /// A few removals are made one by one; beyond an eighth of the entries, the entries
    /// are compacted and the index rebuilt (giving back memory when less than half of it
    /// is used).
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&mut T) -> bool, rehash: impl Fn(&T) -> u64) {
        let kept: Vec<bool> = self.entries.iter_mut().map(&mut keep).collect();
        let doomed: Vec<usize> = kept.iter().enumerate().filter(|(_, kept)| !**kept).map(|(at, _)| at).collect();
        if doomed.len() * 8 < self.entries.len() {
            // From the last: a swap-remove only moves entries from past the position.
            for &position in doomed.iter().rev() {
                let slot = self.slot_of(rehash(&self.entries[position]), position);
                self.remove_at(slot, position, &rehash);
            }
            return;
        }
        let mut verdicts = kept.into_iter();
        self.entries.retain(|_| verdicts.next().unwrap_or(true));
        let len = self.entries.len();
        if self.entries.capacity() > 2 * len {
            self.entries.shrink_to(len + len / 8);
        }
        let mut slots = MIN_SLOTS;
        while len * MAX_LOAD_DENOMINATOR > slots * MAX_LOAD_NUMERATOR {
            slots *= 2;
        }
        self.rebuild_index(if len == 0 { 0 } else { slots }, &rehash);
    }

    /// Removes the entry at `position`, whose index slot is `slot`.
    fn remove_at(&mut self, slot: usize, position: usize, rehash: &impl Fn(&T) -> u64) {
        self.vacate(slot, rehash);
        let last = self.entries.len() - 1;
        if position != last {
            // The last entry moves into the removed one's place: point its slot there.
            let moved = rehash(&self.entries[last]);
            let slot = self.slot_of(moved, last);
            self.slots[slot] = tagged(moved, position);
        }
        self.entries.swap_remove(position);
    }

    /// The index slot and entry position of the entry with `hash` for which `is` holds.
    #[inline]
    fn find_position(&self, hash: u64, is: impl Fn(&T) -> bool) -> Option<(usize, usize)> {
        if self.slots.is_empty() {
            return None;
        }
        let tag = tag_of(hash);
        let mut slot = self.home(hash);
        // Most entries sit in their home slot or the next one. Whether the home slot holds
        // another key is a coin toss at this table's load, so the candidate of the two is
        // chosen without a branch, and the loop below runs only when neither is the entry.
        // (An entry found in the next slot is the one sought even when the home slot is
        // empty: keys are unique.)
        let (home, next) = (self.slots[slot], self.slots[self.next(slot)]);
        let candidate = std::hint::select_unpredictable(home >> POSITION_BITS != tag, next, home);
        if candidate != EMPTY && candidate >> POSITION_BITS == tag {
            let position = (candidate & POSITION_MASK) as usize;
            if is(&self.entries[position]) {
                let found = if candidate == home { slot } else { self.next(slot) };
                return Some((found, position));
            }
        }
        loop {
            let value = self.slots[slot];
            if value == EMPTY {
                return None;
            }
            let position = (value & POSITION_MASK) as usize;
            if value >> POSITION_BITS == tag && is(&self.entries[position]) {
                return Some((slot, position));
            }
            slot = self.next(slot);
        }
    }

    /// The index slot that holds entry `position`, whose hash is `hash`.
    fn slot_of(&self, hash: u64, position: usize) -> usize {
        let mut slot = self.home(hash);
        while self.slots[slot] & POSITION_MASK != position as u32 {
            slot = self.next(slot);
        }
        slot
    }

    /// Empties `slot`, shifting back the slots after it that would no longer be found.
    fn vacate(&mut self, mut hole: usize, rehash: &impl Fn(&T) -> u64) {
        let mut slot = hole;
        loop {
            slot = self.next(slot);
            let value = self.slots[slot];
            if value == EMPTY {
                break;
            }
            let home = self.home(rehash(&self.entries[(value & POSITION_MASK) as usize]));
            // An entry stays if its home lies cyclically in (hole, slot]: the hole is not on
            // its probe path.
            let stays = if hole <= slot { hole < home && home <= slot } else { hole < home || home <= slot };
            if !stays {
                self.slots[hole] = value;
                hole = slot;
            }
        }
        self.slots[hole] = EMPTY;
    }

    /// Replaces the index with one of `size` slots (a power of two, or 0 when empty).
    fn rebuild_index(&mut self, size: usize, rehash: &impl Fn(&T) -> u64) {
        self.slots = vec![EMPTY; size].into_boxed_slice();
        for position in 0..self.entries.len() {
            let hash = rehash(&self.entries[position]);
            let mut slot = self.home(hash);
            while self.slots[slot] != EMPTY {
                slot = self.next(slot);
            }
            self.slots[slot] = tagged(hash, position);
        }
    }

    #[inline]
    fn home(&self, hash: u64) -> usize {
        hash as usize & (self.slots.len() - 1)
    }

    #[inline]
    fn next(&self, slot: usize) -> usize {
        (slot + 1) & (self.slots.len() - 1)
    }
}

/// The top 8 bits of `hash` (the low ones pick the slot).
#[inline]
fn tag_of(hash: u64) -> u32 {
    (hash >> 56) as u32
}

/// A slot value: `position` with `hash`'s tag. Never `EMPTY`, since `position` is below
/// [`MAX_ENTRIES`].
fn tagged(hash: u64, position: usize) -> u32 {
    tag_of(hash) << POSITION_BITS | position as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// A hash with few distinct values, so that probe runs, wrap-around and shifts are common.
    fn weak_hash(key: &u16) -> u64 {
        let spread = u64::from(*key % 13).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        spread ^ u64::from(*key % 3) << 56
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u16, u32),
        Remove(u16),
        Retain(u16),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u16..300, any::<u32>()).prop_map(|(key, value)| Op::Insert(key, value)),
            2 => (0u16..300).prop_map(Op::Remove),
            1 => (2u16..40).prop_map(Op::Retain),
        ]
    }

    fn rehash(entry: &(u16, u32)) -> u64 {
        weak_hash(&entry.0)
    }

    proptest! {
        #[test]
        fn behaves_like_a_map(ops in prop::collection::vec(op(), 1..400)) {
            let mut table: DenseTable<(u16, u32)> = DenseTable::new();
            let mut model: HashMap<u16, u32> = HashMap::new();
            for op in ops {
                match op {
                    Op::Insert(key, value) => {
                        let hash = weak_hash(&key);
                        match table.find_mut(hash, |(k, _)| *k == key) {
                            Some(entry) => entry.1 = value,
                            None => prop_assert!(table.insert_unique(hash, (key, value), rehash)),
                        }
                        model.insert(key, value);
                    }
                    Op::Remove(key) => {
                        let removed = table.remove(weak_hash(&key), |(k, _)| *k == key, rehash);
                        prop_assert_eq!(removed, model.remove(&key).is_some());
                    }
                    Op::Retain(modulus) => {
                        table.retain(|(k, _)| *k % modulus != 0, rehash);
                        model.retain(|k, _| *k % modulus != 0);
                    }
                }
                prop_assert_eq!(table.len(), model.len());
                for (key, value) in &model {
                    let found = table.find(weak_hash(key), |(k, _)| k == key);
                    prop_assert_eq!(found, Some(&(*key, *value)));
                }
                for key in 0..300u16 {
                    if !model.contains_key(&key) {
                        prop_assert!(table.find(weak_hash(&key), |(k, _)| *k == key).is_none());
                    }
                }
            }
        }
    }

    #[test]
    fn memory_follows_the_entries() {
        let mut table: DenseTable<(u64, u64)> = DenseTable::new();
        let hash = |entry: &(u64, u64)| entry.0.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        for key in 0..100_000u64 {
            assert!(table.insert_unique(hash(&(key, 0)), (key, 0), hash));
        }
        let per_entry = table.allocation_size() as f64 / 100_000.0;
        // 16 bytes of entry, at most an eighth more of spare capacity, 5 to 10 of index.
        assert!(per_entry <= 16.0 * 1.125 + 4.0 / 0.4, "{per_entry} bytes per entry");
        table.retain(|(key, _)| *key % 10 == 0, hash);
        assert_eq!(table.len(), 10_000);
        assert!(table.allocation_size() < 10_000 * 40, "memory is given back: {}", table.allocation_size());
        assert!(table.find(hash(&(20, 0)), |(k, _)| *k == 20).is_some());
        assert!(table.find(hash(&(21, 0)), |(k, _)| *k == 21).is_none());
    }
}
