//! A shard's tables, one per limit it serves, found by the limit's id.
//!
//! Most shards serve one or two limits: the first [`SCANNED`] tables are found by a scan of
//! a short vector, as fast as it gets for one or two. A shard can also serve many limits
//! (each distinct Envoy `limit` override is a limit of its own): the tables beyond those are
//! found through a hash index, so that finding one stays O(1) however many there are. A
//! table is dropped once it holds no state, so limits that are no longer used cost nothing.

use super::keyed::KeyedStates;
use super::limit_table::LimitTable;
use crate::{Limit, LimitId};
use ahash::RandomState;
use std::collections::HashMap;
use std::sync::Arc;

/// ShardTables found by a scan; those past these are found through the index.
pub(crate) const SCANNED: usize = 4;

/// The limit a shard's table belongs to, less its policy (which the table holds).
#[derive(Debug)]
pub(crate) struct TableOwner {
    pub(crate) id: LimitId,
    pub(crate) name: Arc<str>,
}

impl TableOwner {
    /// The whole limit, its policy read back from `table`.
    pub(crate) fn limit(&self, table: &LimitTable) -> Limit {
        Limit::new(Arc::clone(&self.name), table.policy())
    }
}

/// Each limit's table, with what the table does not hold of its limit: the id it is found
/// by, and the name (for the snapshot's definitions; the table holds the policy). Not the
/// whole `Limit`: its policy would be a second copy in every shard.
#[derive(Debug, Default)]
pub(crate) struct ShardTables {
    list: Vec<(TableOwner, LimitTable)>,
    /// The position in `list` of each table past the first [`SCANNED`].
    index: HashMap<LimitId, usize, RandomState>,
}

impl ShardTables {
    /// The number of tables.
    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    /// Where the table of `id` is, if there is one.
    #[inline]
    pub(crate) fn position(&self, id: LimitId) -> Option<usize> {
        // Most shards serve one limit: its table is the first.
        if self.list.first().is_some_and(|(held, _)| held.id == id) {
            return Some(0);
        }
        let scanned = &self.list[..self.list.len().min(SCANNED)];
        match scanned.iter().position(|(held, _)| held.id == id) {
            Some(position) => Some(position),
            None if self.list.len() <= SCANNED => None,
            None => self.index.get(&id).copied(),
        }
    }

    /// The table at `position`, to read it.
    pub(crate) fn get(&self, position: usize) -> &LimitTable {
        &self.list[position].1
    }

    /// The table at `position`.
    #[inline]
    pub(crate) fn at(&mut self, position: usize) -> &mut LimitTable {
        &mut self.list[position].1
    }

    /// Adds an empty table for `limit`, which has none; returns its position and how many
    /// bytes the tables' own memory grew by.
    pub(crate) fn add(&mut self, limit: &Limit) -> (usize, usize) {
        let before = self.own_bytes();
        let position = self.list.len();
        if position < SCANNED {
            // One more slot, not Vec's four: a table and its owner are 184 bytes, and most
            // shards serve one or two limits.
            self.list.reserve_exact(1);
        } else {
            self.index.insert(limit.id(), position);
        }
        let owner = TableOwner { id: limit.id(), name: Arc::clone(limit.shared_name()) };
        self.list.push((owner, LimitTable::new(limit.policy())));
        (position, self.own_bytes() - before)
    }

    /// Drops the tables that hold no state; returns how many bytes that gave back (their
    /// own memory, and the tables' list and index).
    pub(crate) fn drop_empty(&mut self) -> usize {
        let before = self.own_bytes();
        let mut freed = 0;
        let mut position = 0;
        while position < self.list.len() {
            match self.list[position].1.is_empty() {
                true => freed += self.swap_remove(position),
                false => position += 1,
            }
        }
        self.give_back_spare_room();
        freed + before - self.own_bytes()
    }

    /// Drops the table at `position` if it holds no state; returns how many bytes that
    /// gave back.
    pub(crate) fn drop_if_empty(&mut self, position: usize) -> usize {
        if !self.list[position].1.is_empty() {
            return 0;
        }
        let before = self.own_bytes();
        let freed = self.swap_remove(position);
        self.give_back_spare_room();
        freed + before - self.own_bytes()
    }

    /// Removes the table at `position`, the last one taking its place; returns the bytes
    /// the table held (an empty table's memory is its own, so this costs nothing per state).
    fn swap_remove(&mut self, position: usize) -> usize {
        let last = self.list.len() - 1;
        if position >= SCANNED {
            self.index.remove(&self.list[position].0.id);
        }
        if last != position && last >= SCANNED {
            // Updated in place, never inserted: the index does not grow while it shrinks.
            let moved = self.list[last].0.id;
            match self.index.get_mut(&moved) {
                Some(at) if position >= SCANNED => *at = position,
                _ => {
                    self.index.remove(&moved);
                }
            }
        }
        self.list.swap_remove(position).1.heap_bytes()
    }

    /// Shrinks the list and the index when most of their room is unused (all of it when
    /// the shard serves no limit any more).
    fn give_back_spare_room(&mut self) {
        if self.list.is_empty() || self.list.capacity() > 2 * self.list.len().max(SCANNED) {
            self.list.shrink_to(self.list.len() + self.list.len() / 8);
        }
        if self.index.is_empty() || self.index.capacity() > 2 * self.index.len().max(SCANNED) {
            self.index.shrink_to(self.index.len() + self.index.len() / 8);
        }
    }

    /// Bytes of the list of tables and of the index (not what the tables hold).
    pub(crate) fn own_bytes(&self) -> usize {
        self.list.capacity() * size_of::<(TableOwner, LimitTable)>() + index_bytes(self.index.capacity())
    }

    /// How many bytes the tables' own memory grows by when one more table is added.
    pub(crate) fn growth_of_one_more(&self) -> usize {
        let (len, capacity) = (self.list.len(), self.list.capacity());
        let list = match (len == capacity, len < SCANNED) {
            (false, _) => 0,
            (true, true) => 1,
            // A vector that is full doubles (to 4 at least).
            (true, false) => capacity.max(4),
        };
        let index = match len >= SCANNED && self.index.len() == self.index.capacity() {
            true => index_bytes((2 * self.index.capacity()).max(3)) - index_bytes(self.index.capacity()),
            false => 0,
        };
        list * size_of::<(TableOwner, LimitTable)>() + index
    }

    /// The tables with their owners.
    pub(crate) fn iter(&self) -> std::slice::Iter<'_, (TableOwner, LimitTable)> {
        self.list.iter()
    }

    /// The tables, to change them.
    pub(crate) fn tables_mut(&mut self) -> impl Iterator<Item = &mut LimitTable> {
        self.list.iter_mut().map(|(_, table)| table)
    }
}

/// The bytes of an index of `capacity`: a hash map's buckets, at most 7/8 of them used,
/// each an entry and a control byte.
fn index_bytes(capacity: usize) -> usize {
    match capacity {
        0 => 0,
        capacity => (capacity * 8 / 7).next_power_of_two() * (size_of::<(LimitId, usize)>() + 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Alignment, FixedWindow};
    use proptest::prelude::*;
    use std::time::Duration;

    fn limit(i: u64) -> Limit {
        Limit::new(
            "override",
            FixedWindow::new(i + 1, Duration::from_secs(1), Alignment::Aligned, Duration::ZERO).unwrap(),
        )
    }

    /// Finding a table costs a scan of at most [`SCANNED`] entries and one index lookup:
    /// every table past the first [`SCANNED`] is in the index, at its position, and no
    /// other is.
    fn assert_indexed(tables: &ShardTables) {
        assert_eq!(tables.index.len(), tables.len().saturating_sub(SCANNED));
        for (position, (owner, _)) in tables.iter().enumerate() {
            assert_eq!(tables.position(owner.id), Some(position));
            assert_eq!(tables.index.get(&owner.id).copied(), (position >= SCANNED).then_some(position));
        }
    }

    proptest! {
        #[test]
        fn every_table_is_found_through_a_short_scan_or_the_index(
            ops in prop::collection::vec((0u64..64, any::<bool>()), 1..200),
        ) {
            let mut tables = ShardTables::default();
            for (i, add) in ops {
                let id = limit(i).id();
                match (add, tables.position(id)) {
                    (true, None) => {
                        let (position, _) = tables.add(&limit(i));
                        prop_assert_eq!(tables.position(id), Some(position));
                    }
                    // Empty, so dropped.
                    (false, Some(position)) => {
                        tables.drop_if_empty(position);
                        prop_assert_eq!(tables.position(id), None);
                    }
                    _ => {}
                }
                assert_indexed(&tables);
            }
            tables.drop_empty();
            prop_assert_eq!((tables.len(), tables.own_bytes()), (0, 0));
        }
    }

    #[test]
    fn ten_thousand_tables_are_each_found_by_the_index() {
        let mut tables = ShardTables::default();
        for i in 0..10_000 {
            tables.add(&limit(i));
        }
        assert_indexed(&tables);
        assert_eq!(tables.position(limit(10_000).id()), None);
    }
}
