//! How many units a lease asks for: a lease period of this process's own traffic, and
//! less as the limit's quota runs out.

use crate::Timestamp;
use std::time::Duration;

/// A lease never takes more than this share of what the store said remained (1/4), so
/// that several processes asking at once leave room for each other, and leases shrink
/// to nothing as the quota runs out: near the limit every request is the store's.
pub(crate) const SHARE_OF_REMAINING: u64 = 4;

/// The units of one key and limits this process asked for, over the current and the
/// last lease period: its own recent rate.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Demand {
    /// When the current period began.
    since: Timestamp,
    /// Units asked since then.
    current: u64,
    /// Units asked in the last whole period (scaled to one period when it ran longer).
    last: u64,
    /// When the last request came.
    latest: Timestamp,
}

impl Demand {
    /// A demand whose first period starts at `now`.
    pub(crate) fn starting(now: Timestamp) -> Self {
        Demand { since: now, current: 0, last: 0, latest: now }
    }

    /// Counts `cost` units asked at `now`, starting a new period once `period` has passed.
    pub(crate) fn observe(&mut self, now: Timestamp, cost: u64, period: Duration) {
        let elapsed = now.saturating_since(self.since);
        if elapsed >= period {
            // Units per period over the time that passed: an idle gap lowers the rate.
            let periods = (elapsed.as_micros() / period.as_micros().max(1)).max(1);
            self.last = u64::try_from(u128::from(self.current) / periods).unwrap_or(u64::MAX);
            self.current = 0;
            self.since = now;
        }
        self.current = self.current.saturating_add(cost);
        self.latest = self.latest.max(now);
    }

    /// True when no request came for a whole period.
    pub(crate) fn is_quiet(&self, now: Timestamp, period: Duration) -> bool {
        now.saturating_since(self.latest) >= period
    }

    /// Units this process is likely to ask for over the next period.
    pub(crate) fn per_period(&self) -> u64 {
        self.last.max(self.current)
    }

    /// True when nothing was asked for over the last two periods.
    pub(crate) fn is_idle(&self, now: Timestamp, period: Duration) -> bool {
        now.saturating_since(self.since) >= period.saturating_mul(2)
    }
}

/// What the store said last: how many cost-1 requests remained, and for how long from
/// now units leased would stay spendable (to the end of the window or bucket).
#[derive(Clone, Copy, Debug)]
pub(crate) struct LastWord {
    pub(crate) remaining: u64,
    pub(crate) spendable_for: Duration,
    /// Whether `spendable_for` shrinks as time passes (a window's end does not move; a held
    /// lease is spendable for a period from its own grant, whenever that is).
    pub(crate) ages: bool,
}

/// Units to lease beyond a request's `cost`: this process's own demand over half the time
/// its units stay spendable, at most a period (half a period for a held lease, spendable
/// for one: so a lease is spent well before its units expire, at the rate it was sized by,
/// when the rate wavers), less what the request itself takes, and at most a quarter of what
/// the store said remained. Nothing when the store said nothing.
pub(crate) fn extra_units(demand: &Demand, cost: u64, last: Option<LastWord>, period: Duration) -> u64 {
    let Some(last) = last else { return 0 };
    let horizon = (last.spendable_for / 2).min(period).as_micros();
    let usable = u128::from(demand.per_period()) * horizon / period.as_micros().max(1);
    let usable = u64::try_from(usable).unwrap_or(u64::MAX);
    usable.saturating_sub(cost).min(last.remaining / SHARE_OF_REMAINING)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PERIOD: Duration = Duration::from_millis(100);

    fn at(ms: u64) -> Timestamp {
        Timestamp::from_micros(ms * 1_000)
    }

    fn said(remaining: u64, spendable_ms: u64) -> Option<LastWord> {
        Some(LastWord { remaining, spendable_for: Duration::from_millis(spendable_ms), ages: true })
    }

    #[test]
    fn a_period_of_own_traffic_is_asked_for() {
        let mut demand = Demand::starting(at(0));
        (0..50).for_each(|i| demand.observe(at(i), 1, PERIOD));
        demand.observe(at(100), 1, PERIOD);
        assert_eq!(demand.per_period(), 50);
        assert_eq!(extra_units(&demand, 1, said(1_000, 60_000), PERIOD), 49);
    }

    #[test]
    fn leases_shrink_with_the_remaining_quota_to_nothing() {
        let mut demand = Demand::starting(at(0));
        (0..50).for_each(|i| demand.observe(at(i), 1, PERIOD));
        assert_eq!(extra_units(&demand, 1, said(40, 60_000), PERIOD), 10);
        assert_eq!(extra_units(&demand, 1, said(400, 60_000), PERIOD), 49);
        assert_eq!(extra_units(&demand, 1, said(3, 60_000), PERIOD), 0);
        assert_eq!(extra_units(&demand, 1, None, PERIOD), 0);
    }

    #[test]
    fn leases_shrink_as_the_window_ends() {
        let mut demand = Demand::starting(at(0));
        (0..50).for_each(|i| demand.observe(at(i), 1, PERIOD));
        assert_eq!(extra_units(&demand, 1, said(1_000, 100), PERIOD), 24);
        assert_eq!(extra_units(&demand, 1, said(1_000, 1), PERIOD), 0);
    }

    #[test]
    fn an_idle_gap_lowers_the_rate() {
        let mut demand = Demand::starting(at(0));
        (0..40).for_each(|i| demand.observe(at(i), 1, PERIOD));
        demand.observe(at(400), 1, PERIOD);
        assert_eq!(demand.last, 10);
        assert!(!demand.is_idle(at(400), PERIOD));
        assert!(demand.is_idle(at(600), PERIOD));
    }
}
