//! One shard of the memory store: each limit's table, what they hold in states and bytes,
//! and how room is made when the shard is full.
//!
//! Making room drops, in this order: every state already fresh (losing nothing), then the
//! states that become fresh soonest among those that are not *limited* (a request of cost 1
//! would be rejected under them, by the store's clock). A limited state is never dropped:
//! forgetting it would lift its key's block, so a flood of new keys cannot clear one. When
//! only limited states are left, there is no room, and the store refuses the new key.

use super::keyed::{Change, Cut, KeyedStates, Request, Room};
use super::limit_table::LimitTable;
use super::shard_tables::ShardTables;
use super::stored_key::Probe;
use crate::{Limit, LimitId, Timestamp};
use ahash::RandomState;

/// States in one shard are swept after this many insertions (or as many as it holds).
const SWEEP_EVERY: usize = 1024;

/// How much one shard may hold: its share of `max_keys` and `max_memory`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Bound {
    pub(super) states: usize,
    pub(super) bytes: usize,
}

/// The tables of one shard, and what they hold.
#[derive(Debug, Default)]
pub(super) struct Shard {
    pub(super) tables: ShardTables,
    /// States held, in every table.
    pub(super) states: usize,
    /// Bytes held, as [`MemoryStore::heap_bytes`](super::MemoryStore::heap_bytes) counts
    /// them: kept up to date as states come and go, so that the bound costs no scan.
    pub(super) bytes: usize,
    inserted_since_sweep: usize,
}

impl Shard {
    /// The room left under `bound`.
    #[inline]
    pub(super) fn room_left(&self, bound: Bound) -> Room {
        Room { states: bound.states.saturating_sub(self.states), bytes: bound.bytes.saturating_sub(self.bytes) }
    }

    /// Whether the shard holds no more than `bound`.
    pub(super) fn is_within(&self, bound: Bound) -> bool {
        self.states <= bound.states && self.bytes <= bound.bytes
    }

    /// Whether `needed` fits under `bound`.
    pub(super) fn fits(&self, bound: Bound, needed: Room) -> bool {
        let room = self.room_left(bound);
        self.is_within(bound) && needed.states <= room.states && needed.bytes <= room.bytes
    }

    /// The position of `limit`'s table, created empty if it has none.
    #[inline]
    pub(super) fn table_of(&mut self, limit: &Limit) -> usize {
        match self.tables.position(limit.id()) {
            Some(position) => position,
            None => self.add_table(limit),
        }
    }

    #[cold]
    fn add_table(&mut self, limit: &Limit) -> usize {
        let (position, bytes) = self.tables.add(limit);
        self.bytes += bytes;
        position
    }

    /// Drops the table of `id` if it holds no state (a check that stored nothing under a
    /// limit new to the shard).
    pub(super) fn drop_table_if_empty(&mut self, id: LimitId) {
        if let Some(position) = self.tables.position(id) {
            self.bytes -= self.tables.drop_if_empty(position);
        }
    }

    /// Counts what recording a request changed, and sweeps when due.
    pub(super) fn count(&mut self, change: Change, clock: &dyn Fn() -> Timestamp, hasher: &RandomState) {
        self.bytes = self.bytes.saturating_add_signed(change.bytes);
        if change.inserted {
            self.states += 1;
            self.inserted_since_sweep += 1;
            // Sweep each time the shard has doubled since the last sweep (compared with the
            // states that sweep kept, not with `states`, which counts these insertions too
            // and would never be reached again once a sweep keeps anything).
            let kept = self.states.saturating_sub(self.inserted_since_sweep);
            if self.inserted_since_sweep >= SWEEP_EVERY.max(kept) {
                self.drop_expiring_by(clock(), hasher);
            }
        }
    }

    /// Decides and records `request` under `limit` (its table created if the shard has
    /// none), `admitted` the outcome of every limit checked together; returns what that
    /// changed, to [`count`](Self::count).
    pub(super) fn record(
        &mut self,
        limit: &Limit,
        request: Request<'_>,
        admitted: bool,
        hasher: &RandomState,
    ) -> Change {
        let position = self.table_of(limit);
        let table = self.tables.at(position);
        let mut grown = 0;
        match table.settle(request, Some(admitted), &mut grown) {
            Some(_) => Change { inserted: false, bytes: grown },
            None => table.settle_new(request, Some(admitted), hasher).1,
        }
    }

    /// Makes room when states already held grew past `bound` (a sliding log's entries), or
    /// a table's bookkeeping did, after a check.
    pub(super) fn keep_within(&mut self, bound: Bound, now: Timestamp, hasher: &RandomState) {
        if !self.is_within(bound) {
            self.make_room(bound, Room::default(), now, hasher);
        }
    }

    /// Whether the key of `request` has a state under `limit`.
    pub(super) fn holds(&mut self, limit: &Limit, request: Request<'_>) -> bool {
        let position = self.tables.position(limit.id());
        position.is_some_and(|position| self.tables.at(position).holds(request.hash, request.probe))
    }

    /// The room a new state of `request`'s key under `limit` takes (none when it has one).
    pub(super) fn room_for(&mut self, limit: &Limit, request: Request<'_>) -> Room {
        match self.holds(limit, request) {
            true => Room::default(),
            false => self.room_for_any_key(limit, request.probe),
        }
    }

    /// At least the room a new state of any key of `probe`'s class under `limit` takes,
    /// without looking the key up: one state, and what inserting it would add.
    pub(super) fn room_for_any_key(&self, limit: &Limit, probe: Probe<'_>) -> Room {
        let bytes = match self.tables.position(limit.id()) {
            Some(position) => self.tables.get(position).insertion_bytes(probe),
            None => self.tables.growth_of_one_more() + LimitTable::new(limit.policy()).insertion_bytes(probe),
        };
        Room { states: 1, bytes }
    }

    /// Forgets the state of key `probe` (of hash `hash`) under `limit`; whether there was one.
    pub(super) fn forget(&mut self, limit: &Limit, hash: u64, probe: Probe<'_>, hasher: &RandomState) -> bool {
        let Some(position) = self.tables.position(limit.id()) else {
            return false;
        };
        let freed = self.tables.at(position).remove(hash, probe, hasher);
        self.states -= freed.states;
        self.bytes -= freed.bytes + self.tables.drop_if_empty(position);
        freed.states > 0
    }

    /// Drops every state that is fresh-equivalent by `now`; returns how many.
    pub(super) fn drop_expiring_by(&mut self, now: Timestamp, hasher: &RandomState) -> usize {
        let before = Timestamp::from_micros(now.as_micros().saturating_add(1));
        self.drop_states(Cut { before, ties: 0, now }, hasher).states
    }

    /// Makes room for `needed` under `bound`; returns whether it fits now.
    ///
    /// Drops every state fresh by `now`, then the states not limited at `now` that become
    /// fresh soonest, down to a sixteenth under the bound (so that a full shard does not
    /// do this at every insertion), and never a limited state.
    pub(super) fn make_room(&mut self, bound: Bound, needed: Room, now: Timestamp, hasher: &RandomState) -> bool {
        let goal = Bound {
            states: bound.states.saturating_sub(needed.states.max(bound.states / 16)),
            bytes: bound.bytes.saturating_sub(needed.bytes.max(bound.bytes / 16)),
        };
        self.drop_expiring_by(now, hasher);
        while self.states > goal.states || self.bytes > goal.bytes {
            if !self.evict_soonest(self.excess_over(goal), now, hasher) {
                break;
            }
        }
        self.fits(bound, needed)
    }

    /// How many states to drop to come down to `goal`: in bytes, at this shard's average
    /// bytes per state (making room loops when dropping gave back less).
    fn excess_over(&self, goal: Bound) -> usize {
        let states = self.states.saturating_sub(goal.states);
        let bytes = self.bytes.saturating_sub(goal.bytes);
        let per_state = (self.bytes / self.states.max(1)).max(1);
        states.max(bytes.div_ceil(per_state)).max(1)
    }

    /// Drops the `count` states not limited at `now` that become fresh soonest; false when
    /// none could be dropped.
    fn evict_soonest(&mut self, count: usize, now: Timestamp, hasher: &RandomState) -> bool {
        let mut expiries: Vec<Timestamp> = self.tables.iter().flat_map(|(_, t)| t.evictable_expiries(now)).collect();
        let Some(last) = expiries.len().checked_sub(1) else {
            return false;
        };
        let threshold = *expiries.select_nth_unstable((count - 1).min(last)).1;
        let below = expiries.iter().filter(|&&expiry| expiry < threshold).count();
        let cut = Cut { before: threshold, ties: count.min(last + 1).saturating_sub(below), now };
        self.drop_states(cut, hasher).states > 0
    }

    /// Drops the states `cut` selects, and the tables left empty.
    fn drop_states(&mut self, mut cut: Cut, hasher: &RandomState) -> Room {
        let freed: Room = self.tables.tables_mut().map(|table| table.drop_expiring_before(&mut cut, hasher)).sum();
        self.states -= freed.states;
        self.bytes -= freed.bytes + self.tables.drop_empty();
        self.inserted_since_sweep = 0;
        freed
    }

    /// Bytes held, counted from scratch (what `bytes` keeps up to date).
    pub(super) fn heap_bytes(&self) -> usize {
        self.tables.own_bytes() + self.tables.iter().map(|(_, table)| table.heap_bytes()).sum::<usize>()
    }
}
