//! The sliding log's decisions while units are leased out, on its Lua layout: the twin of
//! `lua/sliding_log_holding.lua` (itself the twin of the core's `sliding_log/holding.rs`).
//! The ring's entries and the leases logged at their deadlines beside it are counted
//! together, newest first: a rank among them costs a binary search in the ring per lease.

use super::{Log, Params};
use sluice_core::SlidingLogVariant;
use sluice_core::algorithm::{Hold, Lease};
use smallvec::SmallVec;

/// A decision's allowed, remaining, reset_after and retry_after (−1 none, −2 never).
pub(super) type Answer = (bool, u64, u64, i64);

/// What a decision counts: the ring, and the leases still in the window, newest first.
struct Merged<'l, 'a> {
    log: &'l Log<'a>,
    /// Live entries in the ring.
    ring_live: u64,
    holds: SmallVec<[Hold; 4]>,
    window: u64,
}

impl Merged<'_, '_> {
    /// Entries of the ring newer than `time`.
    fn ring_newer_than(&self, time: u64) -> u64 {
        let (mut lo, mut hi) = (0, self.log.len);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.log.at(mid) > time { hi = mid } else { lo = mid + 1 }
        }
        (self.log.len - lo) as u64
    }

    /// `t + window − now` for the `rank`-th newest entry of the ring (the oldest when it
    /// holds fewer).
    fn ring_rank(&self, rank: u64, now: u64) -> u64 {
        let len = self.log.len;
        let index = len - usize::try_from(rank).unwrap_or(usize::MAX).min(len);
        self.log.at(index).saturating_add(self.window).saturating_sub(now)
    }

    /// `t + window − now` for the newest entry counted, or 0 when none is.
    fn reset_after(&self, now: u64) -> u64 {
        let ring = (self.ring_live > 0).then_some(self.log.newest);
        let newest = ring.into_iter().chain(self.holds.first().map(|hold| hold.deadline)).max();
        newest.map_or(0, |newest| newest.saturating_add(self.window).saturating_sub(now))
    }

    /// `t + window − now` for the `rank`-th newest entry counted (1 = newest), or the oldest
    /// held when there are fewer.
    fn wait_for_rank(&self, rank: u64, now: u64) -> u64 {
        let mut newer_held = 0;
        for hold in &self.holds {
            let newer = self.ring_newer_than(hold.deadline) + newer_held;
            if rank <= newer {
                return self.ring_rank(rank - newer_held, now);
            }
            if rank <= newer + hold.units {
                return hold.deadline.saturating_add(self.window).saturating_sub(now);
            }
            newer_held += hold.units;
        }
        match self.log.len {
            0 => self.holds.last().map_or(0, |oldest| oldest.deadline.saturating_add(self.window).saturating_sub(now)),
            _ => self.ring_rank(rank.saturating_sub(newer_held).max(1), now),
        }
    }
}

/// The decision for `cost` (and `lease`) at `now` on `log`, whose ring holds `ring_live`
/// live entries: every unit held counts until its deadline has left the window, and the
/// lease is granted only when it fits with `cost`.
pub(super) fn judge(log: &Log<'_>, ring_live: u64, p: Params, now: u64, cost: u64, lease: Option<Lease>) -> Answer {
    let window = p.window;
    let mut holds: SmallVec<[Hold; 4]> =
        log.holds.iter().filter(|hold| hold.deadline.saturating_add(window) > now).collect();
    holds.reverse();
    let merged = Merged { log, ring_live, holds, window };
    let live = ring_live + merged.holds.iter().map(|hold| hold.units).sum::<u64>();
    let (n, units) = (p.n, lease.map_or(0, |lease| lease.units));
    let reset_after = merged.reset_after(now);
    let signed = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
    if cost == 0 {
        return match live < n {
            true => (true, n - live, reset_after, -1),
            false => (false, 0, reset_after, signed(merged.wait_for_rank(n, now))),
        };
    }
    if cost <= n && live.saturating_add(cost).saturating_add(units) <= n {
        let latest = lease.map_or(now, |lease| lease.deadline.as_micros()).max(now);
        return (true, n - live - cost - units, reset_after.max(latest + window - now), -1);
    }
    rejection(merged, live, p, now, cost)
}

/// The decision for a request that cannot fit while leases are held.
fn rejection(mut merged: Merged<'_, '_>, live: u64, p: Params, now: u64, cost: u64) -> Answer {
    let (n, window) = (p.n, p.window);
    let reset_after = merged.reset_after(now);
    let signed = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
    match p.variant {
        SlidingLogVariant::Accepted if cost > n => (false, n.saturating_sub(live), reset_after, -2),
        SlidingLogVariant::Accepted => {
            (false, n.saturating_sub(live), reset_after, signed(merged.wait_for_rank(n - cost + 1, now)))
        }
        SlidingLogVariant::Attempts if cost > n => (false, 0, reset_after.max(window), -2),
        SlidingLogVariant::Attempts => {
            // The attempt itself is logged: `cost` entries stamped `now`, newer than the
            // ring and older than every lease still ahead.
            let at = merged.holds.iter().take_while(|hold| hold.deadline > now).count();
            merged.holds.insert(at, Hold { deadline: now, units: cost });
            (false, 0, reset_after.max(window), signed(merged.wait_for_rank(n - cost + 1, now)))
        }
    }
}
