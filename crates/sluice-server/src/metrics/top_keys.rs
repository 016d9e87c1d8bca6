//! A policy's heaviest keys over two rolling epochs: this minute and the one before, in a
//! [`SpaceSaving`] table per epoch, one pair for denied checks and one for consumed units.
//!
//! Epochs are whole minutes of the decision's `now` (the limiter's clock), so that tests
//! move them with a `ManualClock`. A check counts into the epoch of its `now`: one of the
//! next epoch turns the current table into the previous one and starts an empty one; one
//! after a longer gap starts both empty. A check whose `now` is a little behind the
//! current epoch (another thread's clock read, made just before the turn) counts into the
//! current one: epochs are where checks were counted, to within that race.
//!
//! Every check of a policy takes one of its two locks, never both: an allowed check adds
//! its cost to the consumed table, a denied one adds 1 to the denied table. Nothing is
//! sampled, so the bound of [`SpaceSaving`] holds for each epoch's table.

use crate::metrics::space_saving::{Counted, SpaceSaving};
use parking_lot::Mutex;
use sluice_core::Timestamp;

/// The length of an epoch, in microseconds: one minute.
pub(crate) const EPOCH_MICROS: u64 = 60_000_000;

/// What a table counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum By {
    /// Checks the policy denied (shadow rejections included), one each.
    Denied,
    /// Units the policy allowed, each check its cost.
    Consumed,
}

impl By {
    /// Both, in the order they are shown.
    pub(crate) const ALL: [By; 2] = [By::Denied, By::Consumed];

    /// The name the API and the metrics use.
    pub(crate) fn name(self) -> &'static str {
        match self {
            By::Denied => "denied",
            By::Consumed => "consumed",
        }
    }

    /// The table named `name`, if any.
    pub(crate) fn parse(name: &str) -> Option<By> {
        By::ALL.into_iter().find(|by| by.name() == name)
    }
}

/// One epoch's table as read: its start, and its keys with their errors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EpochTop {
    /// The epoch's start, in microseconds since the Unix epoch.
    pub(crate) start_micros: u64,
    /// `n`: checks (denied) or units (consumed) counted in the epoch.
    pub(crate) total: u64,
    /// `n / k`: every key above it is listed, and no count is more than it too high.
    pub(crate) bound: u64,
    /// The listed keys, heaviest first.
    pub(crate) keys: Vec<Counted>,
}

/// A policy's heaviest keys, denied and consumed.
#[derive(Debug)]
pub(crate) struct TopKeys {
    denied: Mutex<Epochs>,
    consumed: Mutex<Epochs>,
}

/// The current epoch's table and the previous one's.
#[derive(Debug)]
struct Epochs {
    epoch: u64,
    current: SpaceSaving,
    previous: SpaceSaving,
}

impl TopKeys {
    /// Empty tables of `k` counters each.
    pub(crate) fn new(k: usize) -> TopKeys {
        TopKeys { denied: Mutex::new(Epochs::new(k)), consumed: Mutex::new(Epochs::new(k)) }
    }

    /// The number of counters of each table, `k`.
    pub(crate) fn capacity(&self) -> usize {
        self.denied.lock().current.capacity()
    }

    /// Counts one decision on `key` (hashed as `hash`) at `now`: a denial, or `cost` units
    /// consumed when allowed.
    pub(crate) fn record(&self, now: Timestamp, hash: u64, key: &[u8], allowed: bool, cost: u64) {
        let (table, weight) = if allowed { (&self.consumed, cost) } else { (&self.denied, 1) };
        if weight > 0 {
            table.lock().add(epoch_of(now), hash, key, weight);
        }
    }

    /// The table `by` of this epoch and of the previous one, as of `now`.
    pub(crate) fn read(&self, by: By, now: Timestamp) -> [EpochTop; 2] {
        let table = match by {
            By::Denied => &self.denied,
            By::Consumed => &self.consumed,
        };
        table.lock().read(epoch_of(now))
    }

    /// The bytes the four tables hold on the heap.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.denied.lock().heap_bytes() + self.consumed.lock().heap_bytes()
    }
}

/// The epoch `now` falls in.
pub(crate) fn epoch_of(now: Timestamp) -> u64 {
    now.as_micros() / EPOCH_MICROS
}

impl Epochs {
    fn new(k: usize) -> Epochs {
        Epochs { epoch: 0, current: SpaceSaving::new(k), previous: SpaceSaving::new(k) }
    }

    fn add(&mut self, epoch: u64, hash: u64, key: &[u8], weight: u64) {
        self.turn_to(epoch);
        self.current.add(hash, key, weight);
    }

    /// Makes `epoch` the current one, if it is later.
    fn turn_to(&mut self, epoch: u64) {
        if epoch <= self.epoch {
            return;
        }
        std::mem::swap(&mut self.current, &mut self.previous);
        self.current.clear();
        if epoch > self.epoch + 1 {
            self.previous.clear();
        }
        self.epoch = epoch;
    }

    /// Both epochs as of `epoch`, without turning: a table whose epoch has passed is shown
    /// as the previous one, or not at all.
    fn read(&self, epoch: u64) -> [EpochTop; 2] {
        let empty = SpaceSaving::new(self.current.capacity());
        let (current, previous) = match epoch.saturating_sub(self.epoch) {
            0 => (&self.current, &self.previous),
            1 => (&empty, &self.current),
            _ => (&empty, &empty),
        };
        let at = |table: &SpaceSaving, epoch: u64| EpochTop {
            start_micros: epoch * EPOCH_MICROS,
            total: table.total(),
            bound: table.bound(),
            keys: table.entries(),
        };
        let now = epoch.max(self.epoch);
        [at(current, now), at(previous, now.saturating_sub(1))]
    }

    fn heap_bytes(&self) -> usize {
        self.current.heap_bytes() + self.previous.heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::space_saving::key_hash;

    fn at_second(second: u64) -> Timestamp {
        Timestamp::from_micros(second * 1_000_000)
    }

    fn record(top: &TopKeys, second: u64, key: &str, allowed: bool, cost: u64) {
        top.record(at_second(second), key_hash(key.as_bytes()), key.as_bytes(), allowed, cost);
    }

    #[test]
    fn denials_and_units_count_in_their_own_tables() {
        let top = TopKeys::new(4);
        record(&top, 0, "a", true, 5);
        record(&top, 1, "a", false, 5);
        record(&top, 2, "b", false, 1);
        let [consumed, _] = top.read(By::Consumed, at_second(3));
        let [denied, _] = top.read(By::Denied, at_second(3));
        assert_eq!((consumed.total, consumed.keys[0].count), (5, 5));
        assert_eq!((denied.total, denied.keys.len()), (2, 2));
    }

    #[test]
    fn the_next_minute_makes_the_current_table_the_previous_one() {
        let top = TopKeys::new(4);
        record(&top, 59, "a", false, 1);
        let [current, previous] = top.read(By::Denied, at_second(60));
        assert_eq!((current.total, current.start_micros), (0, 60_000_000));
        assert_eq!((previous.total, previous.start_micros), (1, 0));
        record(&top, 61, "b", false, 1);
        let [current, previous] = top.read(By::Denied, at_second(61));
        assert_eq!((current.keys[0].key.as_slice(), previous.keys[0].key.as_slice()), (&b"b"[..], &b"a"[..]));
    }

    #[test]
    fn after_a_silent_minute_both_tables_are_empty() {
        let top = TopKeys::new(4);
        record(&top, 10, "a", false, 1);
        assert_eq!(top.read(By::Denied, at_second(130)).map(|epoch| epoch.total), [0, 0]);
        record(&top, 130, "b", false, 1);
        assert_eq!(top.read(By::Denied, at_second(130)).map(|epoch| epoch.total), [1, 0]);
    }

    #[test]
    fn a_check_a_little_late_counts_in_the_current_epoch() {
        let top = TopKeys::new(4);
        record(&top, 60, "a", false, 1);
        record(&top, 59, "b", false, 1);
        assert_eq!(top.read(By::Denied, at_second(60)).map(|epoch| epoch.total), [2, 0]);
    }
}
