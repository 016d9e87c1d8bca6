//! The units of one lease (or of several the store debited in one place), as one process
//! holds them: how many are left, until when, and where the store debited them.

use crate::Timestamp;
use crate::store::Receipt;
use smallvec::SmallVec;

/// At most this many parcels per key: a process holds more than one only while lease
/// requests overlap (concurrent checks each missing held units) or a window turns, so a
/// handful covers it; a fifth gives up the oldest's units (still counted where they were
/// debited until that ends).
pub(crate) const MAX_PARCELS: usize = 4;

/// Leased units debited in one place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Parcel {
    /// Units left to spend.
    pub(crate) units: u64,
    /// They may be spent while `now < until`.
    pub(crate) until: Timestamp,
    /// Where the store debited them: per limit, the start of the window or bucket, or the
    /// lease's deadline (store time), for giving them back; empty when unknown.
    pub(crate) receipts: SmallVec<[Receipt; 2]>,
    /// The units the store debited there as leases: what a give-back names.
    pub(crate) leased: u64,
}

/// A key's parcels, the one ending first first.
#[derive(Clone, Debug, Default)]
pub(crate) struct Parcels(SmallVec<[Parcel; 1]>);

impl Parcels {
    /// Units left that may still be spent at `now`.
    pub(crate) fn spendable(&self, now: Timestamp) -> u64 {
        self.0.iter().filter(|parcel| now < parcel.until).map(|parcel| parcel.units).sum()
    }

    /// Takes `cost` units at `now` from the parcel ending first that covers them; false
    /// when none does.
    pub(crate) fn spend(&mut self, now: Timestamp, cost: u64) -> bool {
        let Some(parcel) = self.0.iter_mut().find(|parcel| now < parcel.until && parcel.units >= cost) else {
            return false;
        };
        parcel.units -= cost;
        true
    }

    /// Gives up the parcels that can no longer be spent at `now`, and the empty ones;
    /// returns how many units that gave up.
    pub(crate) fn expire(&mut self, now: Timestamp) -> u64 {
        let given_up = self.0.iter().filter(|parcel| now >= parcel.until).map(|parcel| parcel.units).sum();
        self.0.retain(|parcel| now < parcel.until && parcel.units > 0);
        given_up
    }

    /// Holds `parcel`: with one debited in the same place (units joined, spendable while
    /// both are), or apart. Returns the units given up to stay within [`MAX_PARCELS`].
    pub(crate) fn add(&mut self, parcel: Parcel) -> u64 {
        if let Some(same) = self.0.iter_mut().find(|held| held.receipts == parcel.receipts) {
            same.units = same.units.saturating_add(parcel.units);
            same.leased = same.leased.saturating_add(parcel.leased);
            same.until = same.until.min(parcel.until);
        } else {
            self.0.push(parcel);
        }
        self.0.sort_by_key(|parcel| parcel.until);
        if self.0.len() > MAX_PARCELS { self.0.remove(0).units } else { 0 }
    }

    /// Takes every parcel still spendable at `now` that can be given back (its receipts
    /// known), leaving the others.
    pub(crate) fn take_returnable(&mut self, now: Timestamp) -> SmallVec<[Parcel; 1]> {
        let returnable = |parcel: &Parcel| parcel.units > 0 && now < parcel.until && !parcel.receipts.is_empty();
        let taken = self.0.iter().filter(|parcel| returnable(parcel)).cloned().collect();
        self.0.retain(|parcel| !returnable(parcel));
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parcel(units: u64, until: u64, debited_in: u64) -> Parcel {
        let receipts = [Receipt { debited_in, stamp: 0 }].into_iter().collect();
        Parcel { units, until: Timestamp::from_micros(until), receipts, leased: units }
    }

    #[test]
    fn overlapping_leases_are_held_apart_and_spent_ending_first() {
        let mut parcels = Parcels::default();
        assert_eq!(parcels.add(parcel(3, 200, 150)), 0);
        assert_eq!(parcels.add(parcel(5, 100, 50)), 0);
        assert_eq!(parcels.spendable(Timestamp::from_micros(10)), 8);
        assert!(parcels.spend(Timestamp::from_micros(10), 4));
        assert_eq!(parcels.0.iter().map(|parcel| parcel.units).collect::<Vec<_>>(), [1, 3], "the first to end paid");
        assert!(!parcels.spend(Timestamp::from_micros(10), 4), "no one parcel covers 4");
        assert_eq!(parcels.expire(Timestamp::from_micros(100)), 1);
        assert_eq!(parcels.spendable(Timestamp::from_micros(100)), 3);
    }

    #[test]
    fn a_lease_debited_in_the_same_place_joins_the_one_held() {
        let mut parcels = Parcels::default();
        parcels.add(parcel(3, 200, 0));
        parcels.add(parcel(2, 150, 0));
        assert_eq!(parcels.0.as_slice(), [Parcel { units: 5, leased: 5, ..parcel(0, 150, 0) }]);
    }

    #[test]
    fn a_fifth_parcel_gives_up_the_oldest() {
        let mut parcels = Parcels::default();
        let given_up: Vec<u64> = (1..=5).map(|i| parcels.add(parcel(i, 100 * i, i))).collect();
        assert_eq!(given_up, [0, 0, 0, 0, 1]);
        assert_eq!(parcels.0.len(), MAX_PARCELS);
    }

    #[test]
    fn only_spendable_parcels_with_receipts_are_returned() {
        let mut parcels = Parcels::default();
        parcels.add(parcel(3, 100, 1));
        parcels.add(parcel(4, 300, 2));
        parcels.add(Parcel { receipts: SmallVec::new(), ..parcel(5, 400, 3) });
        let taken = parcels.take_returnable(Timestamp::from_micros(150));
        assert_eq!(taken.iter().map(|parcel| parcel.units).collect::<Vec<_>>(), [4]);
        assert_eq!(parcels.0.iter().map(|parcel| parcel.units).collect::<Vec<_>>(), [3, 5]);
    }
}
