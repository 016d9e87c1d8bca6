//! The deadline a check's script obeys, so that a check answered without Redis never
//! consumes quota later.
//!
//! The caller stops waiting for a check `timeout` after sending it. A Redis that stalled
//! (stopped, swapping, a long command) still holds the check in its input buffer and would
//! run it when it resumes, counting a request that the failure mode already answered. So
//! each check carries a deadline in Redis's clock, and its script compares Redis `TIME` with
//! it before anything else: past it, the script writes nothing and replies "expired".
//!
//! - **Which clock.** The script compares Redis `TIME`. The deadline is this process's
//!   wall-clock time when it sent the check, plus [`SCRIPT_SHARE`] of the timeout (the rest
//!   is left for the reply to travel back), plus Redis's clock's *lead* over this process's.
//! - **The lead, without trusting NTP.** Every reply carries the Redis `TIME` its script
//!   read. Redis ran the script before the reply arrived, so `redis_time − arrival` is a
//!   lower bound of the lead (lower by the reply's trip back). The largest such bound seen
//!   in the last [`LEAD_TTL`] is used; an older one is replaced by the next sample, so a
//!   clock that stepped is followed within that time.
//! - **The bound.** A script writes only if Redis ran it no later than the caller's
//!   deadline in the caller's clock, since the lead used is at most the true lead. What is
//!   left: a reply that took longer than the rest of the timeout to come back (the script
//!   ran in time, the caller gave up first), and a clock step in the last [`LEAD_TTL`]
//!   that shrank the lead (Redis's clock set back, or this host's set forward): such a step
//!   of `s` lets a script write up to `s` after its caller gave up, until a new sample.
//! - **Before the first sample** (the first check of a new store, before Redis answered
//!   anything), no deadline is sent: Redis runs the check whenever it arrives, as Redis
//!   itself would.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The part of a check's timeout its script may start in: four fifths (40 ms of the
/// default 50 ms), the last fifth left for the reply to come back.
const SCRIPT_SHARE: (u32, u32) = (4, 5);

/// How long a lead sample stands before a newer, smaller one may replace it.
const LEAD_TTL: Duration = Duration::from_secs(10);

/// Stands for "no sample yet".
const UNKNOWN: i64 = i64::MIN;

/// The lower bound of Redis's clock's lead over this process's, from replies.
#[derive(Debug)]
pub(crate) struct ClockLead {
    /// µs; [`UNKNOWN`] before the first sample.
    lead: AtomicI64,
    /// When `lead` was sampled (µs of this process's wall clock).
    sampled_at: AtomicU64,
}

impl Default for ClockLead {
    fn default() -> Self {
        ClockLead { lead: AtomicI64::new(UNKNOWN), sampled_at: AtomicU64::new(0) }
    }
}

impl ClockLead {
    /// Records a reply that arrived at `arrived` (this process's wall clock, µs) from a
    /// script that read `redis_time` (µs).
    pub(crate) fn observe(&self, redis_time: u64, arrived: u64) {
        let sample = i64::try_from(i128::from(redis_time) - i128::from(arrived)).unwrap_or(UNKNOWN);
        let stale = arrived.saturating_sub(self.sampled_at.load(Ordering::Relaxed)) > micros(LEAD_TTL);
        // Racing samples may replace each other; each is a true lower bound when taken.
        if stale || sample > self.lead.load(Ordering::Relaxed) {
            self.lead.store(sample, Ordering::Relaxed);
            self.sampled_at.store(arrived, Ordering::Relaxed);
        }
    }

    /// The deadline (Redis's clock, µs) of a check sent at `sent` (this process's wall
    /// clock, µs) that the caller waits `timeout` for; `None` before the first sample.
    pub(crate) fn deadline(&self, sent: u64, timeout: Duration) -> Option<u64> {
        let lead = self.lead.load(Ordering::Relaxed);
        if lead == UNKNOWN {
            return None;
        }
        let share = timeout * SCRIPT_SHARE.0 / SCRIPT_SHARE.1;
        let deadline = i128::from(sent) + i128::from(micros(share)) + i128::from(lead);
        Some(u64::try_from(deadline.max(0)).unwrap_or(u64::MAX))
    }
}

/// This process's wall-clock time, µs since the Unix epoch.
pub(crate) fn wall_clock() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, micros)
}

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUT: Duration = Duration::from_millis(50);

    #[test]
    fn no_deadline_before_the_first_sample() {
        assert_eq!(ClockLead::default().deadline(1_000, TIMEOUT), None);
    }

    #[test]
    fn the_deadline_is_four_fifths_of_the_timeout_in_redis_clock() {
        let lead = ClockLead::default();
        // Redis's clock is 5 s ahead; the reply took 100 µs to come back.
        lead.observe(5_000_000 + 1_000_000, 1_000_100);
        assert_eq!(lead.deadline(2_000_000, TIMEOUT), Some(2_000_000 + 40_000 + 4_999_900));
    }

    #[test]
    fn the_largest_recent_lower_bound_stands_until_it_is_stale() {
        let lead = ClockLead::default();
        lead.observe(1_000_000, 1_000_050);
        lead.observe(1_000_000, 1_000_500); // a slower reply: a looser bound, not kept
        assert_eq!(lead.deadline(0, Duration::ZERO), Some(0));
        // Redis's clock was set back by a second: followed once the sample is stale.
        let later = 1_000_050 + micros(LEAD_TTL) + 1;
        lead.observe(later - 1_000_000, later);
        assert_eq!(lead.deadline(2_000_000, Duration::ZERO), Some(1_000_000));
    }
}
