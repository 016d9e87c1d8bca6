//! Units a store leased out and counts as spent at the lease's deadline: the per-key list
//! beside the sliding log, the token bucket and the leaky bucket (docs/leases.md).
//!
//! A lease granted at store time `g` may be spent until its deadline `D` (at most `g` plus
//! the lease period). The store cannot know when each unit is spent, so it keeps the
//! lease's units here, under `D`, and decides as if each were spent at the worst instant it
//! could be: the sliding log counts them at `D` (they leave the window last), the buckets
//! as spent just before every request until `D`, and at `D` once it has passed.

use crate::Timestamp;

/// The most leases one key's state holds at once: about one per process holding units of
/// the key. A lease that finds the list full is not granted (its request is decided alone).
pub const MAX_HOLDS: usize = 16;

/// One lease's units, counted as spent at `deadline` (µs, the store's clock).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hold {
    /// The latest instant the units may be spent.
    pub deadline: u64,
    /// Units held (leases ending at the same instant share one entry).
    pub units: u64,
}

/// A new lease to hold: what [`Algorithm::decide_leased`](super::Algorithm::decide_leased)
/// is asked to grant beside the request's own cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lease {
    /// Units to lease beyond the request's cost.
    pub units: u64,
    /// The store's instant after which they can no longer be spent.
    pub deadline: Timestamp,
}

/// Leases held out by one key's state, by deadline, oldest first (at most [`MAX_HOLDS`]).
///
/// Empty, it costs one word and no allocation: only keys that are leased carry a list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Holds(Option<Box<HoldList>>);

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct HoldList {
    holds: Vec<Hold>,
    /// Whether held units ended (spent or given back) since the state last held nothing and
    /// was full: the token bucket's second clock rule (docs/leases.md).
    ended: bool,
}

impl Holds {
    /// A list holding `holds` (sorted by deadline), with the `ended` mark: what a snapshot
    /// or a stored layout reads back.
    pub fn from_parts(mut holds: Vec<Hold>, ended: bool) -> Self {
        holds.retain(|hold| hold.units > 0);
        holds.sort_by_key(|hold| hold.deadline);
        if holds.is_empty() && !ended {
            return Holds(None);
        }
        Holds(Some(Box::new(HoldList { holds, ended })))
    }

    /// The leases held, oldest deadline first.
    pub fn iter(&self) -> impl Iterator<Item = Hold> + '_ {
        self.0.iter().flat_map(|list| list.holds.iter().copied())
    }

    /// True when nothing is held and nothing is marked ended: the state decides as if
    /// leases did not exist.
    #[inline(always)]
    pub fn is_clear(&self) -> bool {
        self.0.is_none()
    }

    /// True when no lease is held (one may have ended since the state was last full).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether held units ended since the state was last full with nothing held.
    pub fn ended(&self) -> bool {
        self.0.as_ref().is_some_and(|list| list.ended)
    }

    /// Number of leases held.
    pub fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |list| list.holds.len())
    }

    /// Units of leases whose deadline is after `now`: still spendable.
    pub fn live_units(&self, now: u64) -> u64 {
        self.iter().filter(|hold| hold.deadline > now).map(|hold| hold.units).sum()
    }

    /// Leases whose deadline is at or before `now`, oldest first: spent by now, at the latest.
    pub fn ended_by(&self, now: u64) -> impl Iterator<Item = Hold> + '_ {
        self.iter().take_while(move |hold| hold.deadline <= now)
    }

    /// The latest deadline held.
    pub fn last_deadline(&self) -> Option<u64> {
        self.0.as_ref().and_then(|list| list.holds.last()).map(|hold| hold.deadline)
    }

    /// True when one more lease fits at `now` (leases ended by then make room).
    pub fn has_room(&self, now: u64) -> bool {
        self.iter().filter(|hold| hold.deadline > now).count() < MAX_HOLDS
    }

    /// Drops the leases ended by `now`; marks the list when any did.
    pub fn drop_ended(&mut self, now: u64) {
        let Some(list) = self.0.as_mut() else { return };
        let before = list.holds.len();
        list.holds.retain(|hold| hold.deadline > now);
        list.ended |= list.holds.len() < before;
    }

    /// Drops the leases for which `gone` is true, without marking (the sliding log's
    /// leases leave the window; nothing restarts).
    pub fn drop_where(&mut self, gone: impl Fn(&Hold) -> bool) {
        if let Some(list) = self.0.as_mut() {
            list.holds.retain(|hold| !gone(hold));
        }
        self.tidy();
    }

    /// Takes out the leases whose deadline is at or before `t`, oldest first.
    pub fn take_until(&mut self, t: u64) -> Vec<Hold> {
        let Some(list) = self.0.as_mut() else { return Vec::new() };
        let ended = list.holds.partition_point(|hold| hold.deadline <= t);
        let taken = list.holds.drain(..ended).collect();
        self.tidy();
        taken
    }

    /// Adds a lease (merged with one of the same deadline).
    pub fn add(&mut self, hold: Hold) {
        if hold.units == 0 {
            return;
        }
        let list = self.0.get_or_insert_with(Box::default);
        match list.holds.binary_search_by_key(&hold.deadline, |held| held.deadline) {
            Ok(found) => list.holds[found].units += hold.units,
            Err(at) => list.holds.insert(at, hold),
        }
    }

    /// [`add`](Self::add), then, while more than [`MAX_HOLDS`] are held, moves the oldest
    /// lease's units to the next one's deadline: counted as spent later than they were, which
    /// a store that counts held units until their deadline passes (the sliding log) may
    /// always do. The moved lease's give-back then finds nothing and takes nothing back.
    pub fn add_merging_oldest(&mut self, hold: Hold) {
        self.add(hold);
        if let Some(list) = self.0.as_mut() {
            while list.holds.len() > MAX_HOLDS {
                let oldest = list.holds.remove(0);
                list.holds[0].units += oldest.units;
            }
        }
    }

    /// Takes `units` out of the lease held under `deadline`, when it holds at least
    /// `leased` (the lease the units came from is still here); marks the list. False when
    /// it is not held (ended, or the state that held it was lost).
    pub fn take(&mut self, deadline: u64, leased: u64, units: u64) -> bool {
        let Some(list) = self.0.as_mut() else { return false };
        let Ok(found) = list.holds.binary_search_by_key(&deadline, |held| held.deadline) else { return false };
        if list.holds[found].units < leased.max(units) {
            return false;
        }
        list.holds[found].units -= units;
        if list.holds[found].units == 0 {
            list.holds.remove(found);
        }
        list.ended = true;
        true
    }

    /// Forgets the ended mark (the state is full again, nothing held): frees the list when
    /// it holds nothing.
    pub fn clear_ended(&mut self) {
        if let Some(list) = self.0.as_mut() {
            list.ended = false;
        }
        self.tidy();
    }

    /// Bytes on the heap.
    pub fn heap_bytes(&self) -> usize {
        self.0.as_ref().map_or(0, |list| size_of::<HoldList>() + list.holds.capacity() * size_of::<Hold>())
    }

    fn tidy(&mut self) {
        if self.0.as_ref().is_some_and(|list| list.holds.is_empty() && !list.ended) {
            self.0 = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hold(deadline: u64, units: u64) -> Hold {
        Hold { deadline, units }
    }

    #[test]
    fn leases_of_one_deadline_share_an_entry_and_come_back_one_by_one() {
        let mut holds = Holds::default();
        holds.add(hold(20, 3));
        holds.add(hold(10, 2));
        holds.add(hold(20, 4));
        assert_eq!(holds.iter().collect::<Vec<_>>(), [hold(10, 2), hold(20, 7)]);
        assert_eq!(holds.live_units(10), 7);
        assert!(holds.take(20, 3, 1));
        assert!(!holds.take(20, 7, 1), "6 held: a lease of 7 is not here");
        assert!(!holds.take(30, 1, 1));
        assert!(holds.ended());
    }

    #[test]
    fn ended_leases_mark_the_list_until_it_is_cleared() {
        let mut holds = Holds::default();
        holds.add(hold(10, 2));
        holds.drop_ended(9);
        assert!(!holds.ended());
        holds.drop_ended(10);
        assert!(holds.ended() && holds.is_empty() && !holds.is_clear());
        holds.clear_ended();
        assert!(holds.is_clear());
        assert_eq!(size_of::<Holds>(), size_of::<usize>());
    }

    #[test]
    fn a_seventeenth_lease_merges_the_oldest_into_the_next() {
        let mut holds = Holds::default();
        (1..=MAX_HOLDS as u64 + 1).for_each(|deadline| holds.add_merging_oldest(hold(deadline, 1)));
        assert_eq!(holds.len(), MAX_HOLDS);
        assert_eq!(holds.iter().next(), Some(hold(2, 2)));
        assert_eq!(holds.live_units(0), MAX_HOLDS as u64 + 1, "no unit is lost");
    }

    #[test]
    fn a_full_list_has_room_once_a_lease_ends() {
        let mut holds = Holds::default();
        (1..=MAX_HOLDS as u64).for_each(|deadline| holds.add(hold(deadline, 1)));
        assert!(!holds.has_room(0));
        assert!(holds.has_room(1));
    }
}
