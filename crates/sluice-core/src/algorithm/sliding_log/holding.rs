//! The sliding log's decisions while units are leased out: the ring's entries and the
//! leases logged at their deadlines beside it, counted together (docs/leases.md).
//!
//! A lease's units are logged at its deadline `D`, which may lie ahead of every entry in
//! the ring, so they are kept apart (the ring stays in time order) and merged here, newest
//! first. There are few of them ([`MAX_HOLDS`](crate::algorithm::MAX_HOLDS)), so a rank
//! among all the entries costs a binary search in the ring per lease.

use super::{SlidingLog, SlidingLogPlan, SlidingLogState, SlidingLogVariant};
use crate::algorithm::{Hold, Lease};
use crate::{Decision, Timestamp};
use smallvec::SmallVec;

/// What a decision counts: the ring, and the leases still in the window, newest first.
struct Merged<'a> {
    log: &'a SlidingLog,
    state: &'a SlidingLogState,
    /// Leases not yet out of the window (and, for a rejected attempt, the attempt itself),
    /// newest first.
    holds: SmallVec<[Hold; 4]>,
    /// Live entries in the ring.
    ring_live: u64,
}

impl Merged<'_> {
    /// Units held in the window.
    fn held(&self) -> u64 {
        self.holds.iter().map(|hold| hold.units).sum()
    }

    /// `t + window − now` for the newest entry counted, or 0 when none is.
    fn reset_after(&self, now: u64) -> u64 {
        let ring = if self.ring_live > 0 { self.state.newest() } else { None };
        let newest = ring.into_iter().chain(self.holds.first().map(|hold| hold.deadline)).max();
        newest.map_or(0, |newest| newest.saturating_add(self.log.window).saturating_sub(now))
    }

    /// `t + window − now` for the `rank`-th newest entry counted (1 = newest), or the
    /// oldest held when there are fewer.
    fn wait_for_rank(&self, rank: u64, now: u64) -> u64 {
        let mut newer_held = 0;
        for hold in &self.holds {
            let newer = self.ring_newer_than(hold.deadline) + newer_held;
            if rank <= newer {
                return self.ring_rank(rank - newer_held, now);
            }
            if rank <= newer + hold.units {
                return hold.deadline.saturating_add(self.log.window).saturating_sub(now);
            }
            newer_held += hold.units;
        }
        match self.state.len() {
            0 => self.holds.last().map_or(0, |oldest| oldest.deadline.saturating_add(self.log.window) - now),
            _ => self.ring_rank(rank.saturating_sub(newer_held).max(1), now),
        }
    }

    /// Entries of the ring newer than `time`.
    fn ring_newer_than(&self, time: u64) -> u64 {
        let (mut lo, mut hi) = (0, self.state.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.state.entry(mid) > time { hi = mid } else { lo = mid + 1 }
        }
        (self.state.len() - lo) as u64
    }

    /// `t + window − now` for the `rank`-th newest entry of the ring (the oldest when it
    /// holds fewer).
    fn ring_rank(&self, rank: u64, now: u64) -> u64 {
        let len = self.state.len();
        let index = len - usize::try_from(rank).unwrap_or(usize::MAX).min(len);
        self.state.entry(index).saturating_add(self.log.window).saturating_sub(now)
    }
}

impl SlidingLog {
    /// [`decide`](crate::Algorithm::decide) for a log with leases held, and
    /// [`decide_leased`](crate::Algorithm::decide_leased): every unit held counts until its
    /// deadline has left the window, and `lease` is granted only when it fits with `cost`.
    #[inline(never)]
    pub(super) fn decide_holding(
        &self,
        state: &SlidingLogState,
        now: Timestamp,
        cost: u64,
        lease: Lease,
    ) -> (Decision, SlidingLogPlan) {
        let entries = state.view();
        let newest = entries.newest();
        let now = now.as_micros().max(newest);
        let first_live = self.first_live(&entries, newest, now);
        let mut holds: SmallVec<[Hold; 4]> =
            state.holds().iter().filter(|hold| !self.expired(hold.deadline, now)).collect();
        holds.reverse();
        let merged = Merged { log: self, state, holds, ring_live: (state.len() - first_live) as u64 };
        let live = merged.ring_live + merged.held();
        let hold = (lease.units > 0).then_some(Hold { deadline: lease.deadline.as_micros(), units: lease.units });
        let narrow_window = self.window <= super::ring::NARROW_SPAN;
        let plan = SlidingLogPlan { newest, now, cost, first_live, narrow_window, hold };
        let n = self.limit;
        let decision = if cost == 0 {
            match live < n {
                true => Decision::allow(n, n - live, merged.reset_after(now)),
                false => Decision::reject(n, 0, merged.reset_after(now), merged.wait_for_rank(n, now)),
            }
        } else if cost <= n && live.saturating_add(cost).saturating_add(lease.units) <= n {
            let latest = hold.map_or(now, |hold| hold.deadline).max(now);
            let reset_after = merged.reset_after(now).max(latest + self.window - now);
            Decision::allow(n, n - live - cost - lease.units, reset_after)
        } else {
            self.rejection_holding(merged, live, now, cost)
        };
        (decision, plan)
    }

    /// The decision for a request that cannot fit while leases are held.
    fn rejection_holding(&self, mut merged: Merged<'_>, live: u64, now: u64, cost: u64) -> Decision {
        let n = self.limit;
        let reset_after = merged.reset_after(now);
        match self.variant {
            SlidingLogVariant::Accepted if cost > n => Decision::never(n, n.saturating_sub(live), reset_after),
            SlidingLogVariant::Accepted => {
                let wait = merged.wait_for_rank(n - cost + 1, now);
                Decision::reject(n, n.saturating_sub(live), reset_after, wait)
            }
            SlidingLogVariant::Attempts if cost > n => Decision::never(n, 0, reset_after.max(self.window)),
            SlidingLogVariant::Attempts => {
                // The attempt itself is logged: `cost` entries stamped `now`, newer than the
                // ring and older than every lease still ahead.
                let at = merged.holds.iter().take_while(|hold| hold.deadline > now).count();
                merged.holds.insert(at, Hold { deadline: now, units: cost });
                let wait = merged.wait_for_rank(n - cost + 1, now);
                Decision::reject(n, 0, reset_after.max(self.window), wait)
            }
        }
    }
}
