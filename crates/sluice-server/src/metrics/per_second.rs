//! Checks allowed and rejected in each of the last [`SECONDS`] seconds, for the dashboard's
//! live chart.
//!
//! A ring of one slot per second, each slot a counter tagged with the second it counts:
//! memory is fixed (2 × [`SECONDS`] atomics) whatever the traffic, nothing sweeps the ring,
//! and a check costs one compare-and-swap. A slot whose tag is not the second asked for
//! counted an older second, so that second had no checks.

use sluice_core::Timestamp;
use std::sync::atomic::{AtomicU64, Ordering};

/// How many seconds are kept: five minutes.
pub(crate) const SECONDS: usize = 300;

/// The low bits of a slot count; the high bits hold the second (modulo 2^24, 194 days, so
/// a stale slot would pass for a current one only after 300 × 2^22 seconds, 40 years).
const COUNT_BITS: u32 = 40;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;
const TAG_MASK: u64 = (1 << (64 - COUNT_BITS)) - 1;

/// The per-second counters of the last [`SECONDS`] seconds.
#[derive(Debug)]
pub(crate) struct PerSecond {
    allowed: [AtomicU64; SECONDS],
    rejected: [AtomicU64; SECONDS],
}

/// The counts of consecutive whole seconds, oldest first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Seconds {
    /// The last second counted, in seconds since the Unix epoch.
    pub(crate) last: u64,
    pub(crate) allowed: Vec<u64>,
    pub(crate) rejected: Vec<u64>,
}

impl Default for PerSecond {
    fn default() -> PerSecond {
        PerSecond {
            allowed: std::array::from_fn(|_| AtomicU64::new(0)),
            rejected: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl PerSecond {
    /// Counts one check decided at `now`.
    pub(crate) fn record(&self, now: Timestamp, allowed: bool) {
        let second = now.as_micros() / 1_000_000;
        let counters = if allowed { &self.allowed } else { &self.rejected };
        let tag = second & TAG_MASK;
        let slot = &counters[slot_of(second)];
        // Never fails: the closure always returns a value.
        let _ = slot.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |packed| {
            Some(if packed >> COUNT_BITS == tag { packed + 1 } else { tag << COUNT_BITS | 1 })
        });
    }

    /// The [`SECONDS`] whole seconds before the one `now` falls in (that one is still
    /// counting, so its rate would read low).
    pub(crate) fn before(&self, now: Timestamp) -> Seconds {
        let last = (now.as_micros() / 1_000_000).saturating_sub(1);
        let first = last.saturating_sub(SECONDS as u64 - 1);
        let read = |counters: &[AtomicU64; SECONDS]| -> Vec<u64> {
            (first..=last)
                .map(|second| {
                    let packed = counters[slot_of(second)].load(Ordering::Relaxed);
                    if packed >> COUNT_BITS == second & TAG_MASK { packed & COUNT_MASK } else { 0 }
                })
                .collect()
        };
        Seconds { last, allowed: read(&self.allowed), rejected: read(&self.rejected) }
    }
}

fn slot_of(second: u64) -> usize {
    // Below SECONDS: the cast cannot truncate.
    (second % SECONDS as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: u64, millis: u64) -> Timestamp {
        Timestamp::from_micros(seconds * 1_000_000 + millis * 1000)
    }

    #[test]
    fn counts_each_second_apart_and_leaves_out_the_current_one() {
        let history = PerSecond::default();
        for (second, millis, allowed) in [(1000, 0, true), (1000, 999, false), (1000, 500, true), (1002, 1, false)] {
            history.record(at(second, millis), allowed);
        }
        history.record(at(1003, 0), true);
        let seen = history.before(at(1003, 400));
        assert_eq!(seen.last, 1002);
        assert_eq!(seen.allowed.len(), SECONDS);
        assert_eq!(seen.allowed[SECONDS - 3..], [2, 0, 0]);
        assert_eq!(seen.rejected[SECONDS - 3..], [1, 0, 1]);
    }

    #[test]
    fn a_slot_reused_a_ring_later_forgets_its_old_second() {
        let history = PerSecond::default();
        history.record(at(1000, 0), true);
        history.record(at(1000, 1), true);
        history.record(at(1000 + SECONDS as u64, 0), true);
        let seen = history.before(at(1001 + SECONDS as u64, 0));
        assert_eq!(seen.allowed.iter().sum::<u64>(), 1, "the second 1000 is out of the window");
        assert_eq!(seen.allowed[SECONDS - 1], 1);
        // Asked again much later, nothing is left in the window.
        assert_eq!(history.before(at(5000, 0)).allowed.iter().sum::<u64>(), 0);
    }
}
